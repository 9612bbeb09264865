"""The version of gpufs: read from the installed package's metadata.

The number itself is written in one place only, ``pyproject.toml``; this module reads it back
through :mod:`importlib.metadata`, so the package, ``gpufs --version``, the model files, the
CLI's reports and the numba cache directory all name the same version.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpufs")
except PackageNotFoundError:  # a source tree on sys.path that was never pip-installed
    __version__ = "0+unknown"
