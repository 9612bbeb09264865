"""Packaging: one version number, every package folder in the wheel, ``python -m gpufs``."""

import os
import re
import subprocess
import sys

import pytest

import gpufs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)


def test_every_package_folder_is_in_the_wheel():
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    mapped = {pkg: path for pkg, path in setuptools.get("package-dir", {}).items()}
    found = set()
    for top, folder in [("gpufs", "gpufs")] + [(p, d) for p, d in mapped.items()]:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            if "__init__.py" in files:
                rel = os.path.relpath(dirpath, os.path.join(ROOT, folder))
                found.add(top if rel == "." else top + "." + rel.replace(os.sep, "."))
    assert found == listed, (
        f"pyproject.toml [tool.setuptools] packages: add {found - listed}, remove {listed - found}"
    )


def test_the_version_is_written_in_pyproject_only():
    version = _pyproject()["project"]["version"]
    assert gpufs.__version__ == version  # read back through the installed metadata
    pattern = re.compile(r"['\"]" + re.escape(version) + r"['\"]")  # the number as a literal
    for folder in ["gpufs", "cuda_kernels"]:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(dirpath, name)) as fh:
                        assert not pattern.search(fh.read()), os.path.join(dirpath, name)


def test_python_dash_m_gpufs_runs_the_command_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gpufs", "--help"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: gpufs")
    assert all(cmd in proc.stdout for cmd in ("demo", "select", "explain"))
