"""gpufs: feature selection with boosted and bagged trees on NVIDIA GPUs, and on the CPU.

Public API only; nothing here imports cupy. ``_numba_setup`` comes first: it configures numba
(where compiled kernels are cached) before any gpufs module imports numba.

The estimators are imported on first use (PEP 562's module ``__getattr__``): ``import gpufs``
takes milliseconds instead of the seconds scikit-learn, scipy and numba need, so the ``gpufs``
command starts, and answers Ctrl-C, before it loads them.
"""

import importlib as _importlib
import os as _os
import sys as _sys


def _started_as_the_command() -> bool:
    """Whether this import is the ``gpufs`` command's own start (its console script, or
    ``python -m gpufs`` while runpy finds the package): an interrupt then ends the command
    with one line, as ``gpufs.cli`` does once it is imported."""
    argv0 = _sys.argv[0] if _sys.argv else ""
    name = _os.path.basename(argv0).lower()
    for tail in ("-script.py", ".exe"):
        name = name[: -len(tail)] if name.endswith(tail) else name
    return argv0 == "-m" or name == "gpufs"


try:
    from . import _numba_setup  # noqa: F401  (must precede every import of numba)
    from ._version import __version__
except KeyboardInterrupt:
    if not _started_as_the_command():
        raise
    _sys.stderr.write("error: interrupted\n")
    raise SystemExit(130) from None

#: public name -> the module that defines it
_LAZY = {
    "ControlBurnClassifier": ".selectors.controlburn",
    "ControlBurnRegressor": ".selectors.controlburn",
    "GBFSClassifier": ".selectors.gbfs",
    "GBFSRegressor": ".selectors.gbfs",
    "MultiTaskGBFSClassifier": ".selectors.multitask",
    "MultiTaskGBFSRegressor": ".selectors.multitask",
    "StagewiseClassifier": ".selectors.stagewise",
    "StagewiseRegressor": ".selectors.stagewise",
    "TreeEnsemble": ".engine.tree",
    "SelectionWarning": "._warnings",
    "ModelFileError": ".io._strict_json",
}

__all__ = [
    "ControlBurnClassifier",
    "ControlBurnRegressor",
    "GBFSClassifier",
    "GBFSRegressor",
    "ModelFileError",
    "MultiTaskGBFSClassifier",
    "MultiTaskGBFSRegressor",
    "SelectionWarning",
    "StagewiseClassifier",
    "StagewiseRegressor",
    "TreeEnsemble",
    "__version__",
]


def __getattr__(name):
    """A public class (imported now, then kept), or a submodule (``gpufs.io.model_io``)."""
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name], __name__), name)
        if _LAZY[name].startswith(".selectors"):  # an estimator: numba is loaded now
            from .cli._compile_watch import install

            install()  # the first fit's compile notice, from the library (logging)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return _importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
