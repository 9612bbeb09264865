"""Feature-diverse forests for ControlBurn (Liu, Xie, Udell, "ControlBurn: Feature Selection by
Sparse Forests", KDD 2021, section 3.2), grown on the shared grower.

Owns: incremental depth bagging (the paper's Algorithm 1), incremental depth bag-boosting (its
Algorithm 2), the tree variants of section 3.2.4 (feature-sparse trees and single-feature "EBM"
trees), per-tree feature subsampling, the training-loss convergence rule and the out-of-bag (OOB)
stopping rule,
and the two outputs the selection step needs: ``A`` (m x T), every tree's prediction on every
training row, and the per-tree feature masks (T x F bool). The lasso over tree weights lives in
``gpufs.lasso``; the estimators in ``gpufs.selectors.controlburn``.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from ._algorithms import IncrementalBagBoosting, IncrementalBagging, grow_forest
from ._params import (
    FOREST_PARAMETER_CONSTRAINTS,
    MAX_FOREST_DEPTH,
    METHODS,
    TREE_TYPES,
    ForestParams,
    check_forest_params,
    loss_converged,
)
from ._record import Forest, ForestBuilder

__all__ = [
    "FOREST_PARAMETER_CONSTRAINTS",
    "Forest",
    "ForestBuilder",
    "ForestParams",
    "IncrementalBagBoosting",
    "IncrementalBagging",
    "MAX_FOREST_DEPTH",
    "METHODS",
    "TREE_TYPES",
    "check_forest_params",
    "grow_forest",
    "loss_converged",
]
