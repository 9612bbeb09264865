"""numba's process-wide settings that gpufs needs, applied before gpufs imports numba.

``gpufs/__init__.py`` imports this module first, before any module that imports numba.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import os
import sys

from ._version import __version__

#: the ``numba.core.config`` modules that hold a ``CACHE_DIR`` (numba's and numba-cuda's)
_CONFIG_MODULES = ("numba.core.config", "numba.cuda.core.config")


#: Modules whose functions or constants are compiled *into* kernels defined in other files
#: (the layout constants of ``_types``, the named tuples of ``_args`` too). numba's cache
#: checks only the time stamp of a kernel's own file, so an edit of these files would leave
#: stale kernels behind; their content hash is part of the cache folder's name instead.
#: Every ``.py`` file of the folders in ``_INLINED_FOLDERS`` is hashed, and the files listed in
#: ``_INLINED_SOURCES`` besides. ``tests/test_numba_setup.py`` derives the files from the
#: cached kernels' code and fails on one that neither covers.
_INLINED_FOLDERS = ("rules", "cuda_kernels")
_INLINED_SOURCES = (
    "_types.py",
    "backends/cpu/_args.py",
    "backends/cpu/_device_fns.py",
    "backends/cpu/histogram.py",
    "backends/cpu/split.py",
    "backends/cpu/partition.py",
)


def _find(here, name):
    """The path of ``name`` (relative to the package), or None: ``cuda_kernels/`` sits inside
    the installed package, but beside it in a source checkout (pyproject maps
    ``gpufs.cuda_kernels`` to the top-level folder)."""
    places = [os.path.join(here, name)]
    if name.split("/")[0] == "cuda_kernels":
        places.append(os.path.join(os.path.dirname(here), name))
    return next((p for p in places if os.path.exists(p)), None)


def _inlined_files():
    """(name, path or None) of every hashed file, in a fixed order."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for folder in _INLINED_FOLDERS:
        path = _find(here, folder)
        names = sorted(f for f in os.listdir(path) if f.endswith(".py")) if path else []
        out += [(f"{folder}/{f}", os.path.join(path, f)) for f in names] or [(folder, None)]
    out += [(name, _find(here, name)) for name in _INLINED_SOURCES]
    return out


def _inlined_sources_digest() -> str:
    import hashlib

    h = hashlib.sha256()
    for name, path in _inlined_files():
        h.update(name.encode())
        if path is not None:
            with open(path, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()[:12]


def default_cache_dir() -> str:
    """The folder gpufs gives numba for its cache:
    ``<user cache dir>/gpufs/numba/<version>-<digest>``.

    One folder per gpufs version and per content of the modules compiled into other files'
    kernels (``_INLINED_FOLDERS``, ``_INLINED_SOURCES``), so neither an upgrade nor an edit of
    the shared rules ever loads kernels compiled from other sources; for everything else
    numba's own index checks each source file's time stamp.
    """
    from platformdirs import user_cache_dir

    return os.path.join(
        user_cache_dir("gpufs", appauthor=False),
        "numba",
        f"{__version__}-{_inlined_sources_digest()}",
    )


def configure_numba_cache() -> str:
    """Point numba's on-disk cache away from the installed package; return the folder in use.

    See ``docs/module_notes.rst`` for the rule. Idempotent; never creates the folder (numba does,
    on its first cache write).
    """
    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    if user_dir:
        return user_dir
    loaded = [sys.modules[name] for name in _CONFIG_MODULES if name in sys.modules]
    for config in loaded:
        if getattr(config, "CACHE_DIR", ""):  # set in code, or in a .numba_config.yaml
            return config.CACHE_DIR
    cache_dir = default_cache_dir()
    os.environ["NUMBA_CACHE_DIR"] = cache_dir
    for config in loaded:
        config.reload_config()
    return cache_dir


#: the folder numba caches gpufs's compiled kernels in, for this process
CACHE_DIR = configure_numba_cache()
