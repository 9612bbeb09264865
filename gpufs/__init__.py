"""gpufs: feature selection with boosted and bagged trees on NVIDIA GPUs, and on the CPU.

Public API only; nothing here imports cupy. ``_numba_setup`` comes first: it configures numba
(where compiled kernels are cached) before any gpufs module imports numba.
"""
from . import _numba_setup  # noqa: F401  (must precede every import of numba)
from ._version import __version__
from ._warnings import SelectionWarning
from .selectors.controlburn import ControlBurnClassifier, ControlBurnRegressor
from .selectors.gbfs import GBFSClassifier, GBFSRegressor
from .selectors.multitask import MultiTaskGBFSClassifier, MultiTaskGBFSRegressor
from .selectors.stagewise import StagewiseClassifier, StagewiseRegressor
from .tree import TreeEnsemble

__all__ = ["ControlBurnClassifier", "ControlBurnRegressor", "GBFSClassifier", "GBFSRegressor",
           "MultiTaskGBFSClassifier", "MultiTaskGBFSRegressor", "SelectionWarning",
           "StagewiseClassifier", "StagewiseRegressor", "TreeEnsemble", "__version__"]
