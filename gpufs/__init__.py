"""gpufs: feature selection with boosted and bagged trees on NVIDIA GPUs, and on the CPU.

Public API only; nothing here imports cupy. ``_numba_setup`` comes first: it configures numba
(where compiled kernels are cached) before any gpufs module imports numba.

The estimators are imported on first use (PEP 562's module ``__getattr__``): ``import gpufs``
takes milliseconds instead of the seconds scikit-learn, scipy and numba need, so the ``gpufs``
command starts, and answers Ctrl-C, before it loads them.
"""
import importlib as _importlib

from . import _numba_setup  # noqa: F401  (must precede every import of numba)
from ._version import __version__

#: public name -> the module that defines it
_LAZY = {"ControlBurnClassifier": ".selectors.controlburn",
         "ControlBurnRegressor": ".selectors.controlburn",
         "GBFSClassifier": ".selectors.gbfs", "GBFSRegressor": ".selectors.gbfs",
         "MultiTaskGBFSClassifier": ".selectors.multitask",
         "MultiTaskGBFSRegressor": ".selectors.multitask",
         "StagewiseClassifier": ".selectors.stagewise",
         "StagewiseRegressor": ".selectors.stagewise",
         "TreeEnsemble": ".tree", "SelectionWarning": "._warnings"}

__all__ = ["ControlBurnClassifier", "ControlBurnRegressor", "GBFSClassifier", "GBFSRegressor",
           "MultiTaskGBFSClassifier", "MultiTaskGBFSRegressor", "SelectionWarning",
           "StagewiseClassifier", "StagewiseRegressor", "TreeEnsemble", "__version__"]


def __getattr__(name):
    """A public class (imported now, then kept), or a submodule (``gpufs.model_io``)."""
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name], __name__), name)
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
