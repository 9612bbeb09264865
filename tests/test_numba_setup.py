"""Where numba caches gpufs's compiled kernels (``gpufs._numba_setup``).

Each case runs in its own interpreter: numba reads its settings when it is imported, and the
cache folder of a ``cache=True`` kernel is fixed when its decorator runs, at gpufs's import.
Every case asks numba itself where each of gpufs's cached kernels (CPU and CUDA) will be
written, through the dispatcher's cache object. The fresh-install sequence that once broke
(install, run, reinstall editable) is run end to end by ``.ci/run``.
"""

import ast
import importlib
import importlib.util
import json
import os
import pkgutil
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Prints {"setting": gpufs's folder, "default": the default folder, "env": NUMBA_CACHE_DIR,
# "paths": {module: [cache folder of each cached kernel]}} as JSON.
_PROBE = """
import importlib, json, os, pkgutil, sys
{before}
import gpufs
from gpufs import _numba_setup
import gpufs.backends.cpu as cpu
modules = ["gpufs.backends.cpu." + m.name for m in pkgutil.iter_modules(cpu.__path__)]
try:
    import numba.cuda  # noqa: F401
    import gpufs.cuda_kernels as ck
    modules += ["gpufs.cuda_kernels." + m.name for m in pkgutil.iter_modules(ck.__path__)]
except ImportError:
    pass
paths = {{}}
for name in modules:
    mod = importlib.import_module(name)
    paths[name] = [v._cache.cache_path for v in vars(mod).values()
                   if getattr(getattr(v, "_cache", None), "cache_path", None)]
print(json.dumps({{"setting": _numba_setup.CACHE_DIR, "default": _numba_setup.default_cache_dir(),
                  "env": os.environ.get("NUMBA_CACHE_DIR"), "version": gpufs.__version__,
                  "paths": paths}}))
"""


def _probe(tmp_path, before="", **env_overrides):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTHONPATH=ROOT, **env_overrides)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(before=before)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _kernel_dirs(result):
    """Every cached kernel's cache folder; the CPU backend must have some."""
    assert result["paths"]["gpufs.backends.cpu.level"], (
        "no cache=True kernel found in the CPU backend"
    )
    return [p for paths in result["paths"].values() for p in paths]


def _inside(path, folder):
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(folder)]) == os.path.abspath(
        folder
    )


def test_kernels_cache_in_the_user_cache_folder_not_beside_the_package(tmp_path):
    r = _probe(tmp_path)
    expected = os.path.join(str(tmp_path / "xdg"), "gpufs", "numba", r["version"] + "-")
    if sys.platform.startswith("linux"):  # platformdirs follows XDG_CACHE_HOME on Linux only
        # <version>-<digest of the sources compiled into other files' kernels>
        assert r["default"].startswith(expected) and len(r["default"]) == len(expected) + 12
    assert r["setting"] == r["default"] == r["env"]
    dirs = _kernel_dirs(r)
    assert all(_inside(d, r["default"]) for d in dirs), dirs
    assert not any(_inside(d, os.path.join(ROOT, "gpufs")) for d in dirs)


def test_cuda_kernels_follow_the_same_folder(tmp_path):
    pytest.importorskip("numba.cuda")
    r = _probe(tmp_path)
    cuda = [
        p for m, paths in r["paths"].items() if m.startswith("gpufs.cuda_kernels") for p in paths
    ]
    assert cuda, "no cache=True CUDA kernel found"
    assert all(_inside(d, r["default"]) for d in cuda), cuda


def test_a_users_numba_cache_dir_wins(tmp_path):
    mine = str(tmp_path / "mine")
    r = _probe(tmp_path, NUMBA_CACHE_DIR=mine)
    assert r["setting"] == r["env"] == mine
    assert all(_inside(d, mine) for d in _kernel_dirs(r))


def test_numba_imported_before_gpufs_is_reconfigured(tmp_path):
    # numba and numba-cuda have read the (unset) variable already; gpufs must still move the cache
    before = "import numba\ntry:\n    import numba.cuda\nexcept ImportError:\n    pass"
    r = _probe(tmp_path, before=before)
    assert r["setting"] == r["default"]
    assert all(_inside(d, r["default"]) for d in _kernel_dirs(r))


def test_a_cache_dir_set_in_numbas_config_before_gpufs_wins(tmp_path):
    mine = str(tmp_path / "from-code")
    r = _probe(tmp_path, before=f"import numba\nnumba.config.CACHE_DIR = {mine!r}")
    assert r["setting"] == mine and r["env"] is None
    assert all(_inside(d, mine) for d in r["paths"]["gpufs.backends.cpu.level"])


def _defined_in(module_name, name):
    """The gpufs module that defines global ``name`` of ``module_name``: followed through the
    module's ``from x import name`` lines (re-exports too); ``from .. import _tasks`` gives
    ``gpufs.rules._tasks`` itself; a name bound in the module (or imported from outside gpufs)
    gives the module."""
    mod = sys.modules[module_name]
    with open(mod.__file__, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    package = module_name if hasattr(mod, "__path__") else module_name.rpartition(".")[0]
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        src = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
        if src != "gpufs" and not src.startswith("gpufs."):
            continue
        for alias in node.names:
            if (alias.asname or alias.name) == name:
                sub = f"{src}.{alias.name}"
                if isinstance(sys.modules.get(sub), types.ModuleType):
                    return sub
                return _defined_in(src, alias.name)
    return module_name


def _code_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _files_compiled_into(fn, files, seen):
    """Add to ``files`` the module of every global that compiled ``fn`` reads (constants,
    named tuples, compiled functions: followed into those, and into closures' cells)."""
    from numba.core.dispatcher import Dispatcher

    if fn in seen:
        return
    seen.add(fn)
    files.add(sys.modules[fn.__module__].__file__)
    names = _code_names(fn.__code__)
    found = [(fn.__module__, n, fn.__globals__[n]) for n in names if n in fn.__globals__]
    for _, _, obj in list(found):
        if isinstance(obj, types.ModuleType) and obj.__name__.startswith("gpufs."):
            found += [(obj.__name__, n, getattr(obj, n)) for n in names if hasattr(obj, n)]
    for cell in fn.__closure__ or ():
        found.append((None, None, cell.cell_contents))
    for module_name, name, obj in found:
        if isinstance(obj, Dispatcher):
            _files_compiled_into(obj.py_func, files, seen)
        elif isinstance(obj, types.FunctionType) and obj.__module__.startswith("gpufs"):
            _files_compiled_into(obj, files, seen)
        elif module_name is not None and not isinstance(obj, types.ModuleType):
            origin = _defined_in(module_name, name)
            if origin.startswith("gpufs"):
                files.add(sys.modules[origin].__file__)


def _sources_compiled_into_other_files_kernels():
    """{file (relative to the package): the cached kernels of other files it is compiled
    into}, from the kernels themselves: every ``cache=True`` dispatcher of the CPU backend
    and of the CUDA kernels (when numba.cuda imports), and what its code reads."""
    import gpufs
    import gpufs.backends.cpu as cpu

    names = ["gpufs.backends.cpu." + m.name for m in pkgutil.iter_modules(cpu.__path__)]
    try:
        import numba.cuda  # noqa: F401

        import gpufs.cuda_kernels as ck

        names += ["gpufs.cuda_kernels." + m.name for m in pkgutil.iter_modules(ck.__path__)]
    except ImportError:
        pass
    for name in names:
        importlib.import_module(name)
    base = os.path.dirname(gpufs.__file__)
    out = {}
    for name, mod in list(sys.modules.items()):
        if name != "gpufs" and not name.startswith("gpufs."):
            continue
        for kname, obj in list(vars(mod).items()):
            if not getattr(getattr(obj, "_cache", None), "cache_path", None):
                continue
            own = sys.modules[obj.py_func.__module__].__file__
            files = set()
            _files_compiled_into(obj.py_func, files, set())
            for f in files - {own}:
                rel = os.path.relpath(f, base).replace(os.sep, "/")
                # a source checkout keeps cuda_kernels/ beside the package, not inside it
                rel = rel[3:] if rel.startswith("../cuda_kernels/") else rel
                out.setdefault(rel, set()).add(f"{name}.{kname}")
    return out


def test_every_source_compiled_into_other_files_kernels_is_hashed():
    """numba's cache checks only a kernel's own file: every file whose functions or constants
    are compiled into another file's cached kernels must be in ``_INLINED_SOURCES`` (hashed
    into the cache folder's name), or an edit of it would load stale kernels."""
    from gpufs import _numba_setup

    needed = _sources_compiled_into_other_files_kernels()
    # the scan sees the shared rules and the layout constants (it is not blind)
    assert {"rules/_gain.py", "_types.py"} <= set(needed), sorted(needed)
    folders = _numba_setup._INLINED_FOLDERS
    missing = {
        f: sorted(k)[:3]
        for f, k in needed.items()
        if f not in _numba_setup._INLINED_SOURCES and f.split("/")[0] not in folders
    }
    assert not missing, f"add to _numba_setup._INLINED_SOURCES or _INLINED_FOLDERS: {missing}"
    # every listed file and folder exists (cuda_kernels/ beside the package in a checkout),
    # and a folder's files are hashed one by one
    hashed = dict(_numba_setup._inlined_files())
    assert all(path is not None and os.path.exists(path) for path in hashed.values()), hashed
    for folder in folders:
        assert any(name.startswith(folder + "/") for name in hashed), folder
    assert "cuda_kernels/_device_fns.py" in hashed


def test_an_edit_of_any_file_in_a_hashed_folder_changes_the_cache_folder(tmp_path, monkeypatch):
    from gpufs import _numba_setup

    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "a.py").write_text("X = 1\n")
    (folder / "b.py").write_text("Y = 2\n")
    monkeypatch.setattr(_numba_setup, "_INLINED_FOLDERS", (str(folder),))
    monkeypatch.setattr(_numba_setup, "_INLINED_SOURCES", ())
    before = _numba_setup._inlined_sources_digest()
    (folder / "b.py").write_text("Y = 3\n")
    assert _numba_setup._inlined_sources_digest() != before
    (folder / "c.py").write_text("")
    assert len(_numba_setup._inlined_files()) == 3
