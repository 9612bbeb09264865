"""The records of ControlBurn's fit step, shared by the single-process and Dask estimators.

Owns :class:`ForestData` (what the forest is grown from and the lasso solved with),
:class:`BurnSelection` (the lasso's selection and its diagnostics) and :class:`BurnResult`
(the forest, the selection, the laps and the warnings of one fit step). The step itself,
``_BaseControlBurn._fit_step``, returns a ``BurnResult``; each ``fit`` then sets the fitted
attributes from it in one place (``_BaseControlBurn._set_fit_result``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["BurnResult", "BurnSelection", "ForestData"]


class ForestData(NamedTuple):
    """What ControlBurn's forest is grown from and its lasso solved with.

    Parameters
    ----------
    backend : CPUBackend, GPUBackend or ClusterBackend
        Grows the trees (``gpufs.dask``'s cluster backend on a cluster).
    Xb : ndarray of shape (n_samples, n_features), uint8, or ShardedBins
        The binned matrix (on a cluster: a stand-in for the workers' rows).
    y : ndarray of shape (n_samples,)
        The encoded target, on the backend's device.
    sample_weight : ndarray of shape (n_samples,), float64, or None
    n_classes : int
        0 for regression.
    costs : ndarray of shape (n_features,), float64
        The forest's feature costs (all 1 when none were given).
    groups : ndarray of shape (n_features,), int
        The forest's feature groups.
    lasso_groups : ndarray of shape (n_features,), int64, or None
        Group labels 0..G-1 for the lasso (None: no groups).
    group_costs : ndarray of shape (n_groups,), float64, or None
    seed : int
    bin_mapper : BinMapper
        The cut points of ``Xb``.
    corr_of : callable or None, default=None
        ``corr_of(features)``: the absolute correlation matrix of those columns, for the
        near-copy rule (``_near_copies``); None skips the rule.
    """

    backend: Any
    Xb: Any
    y: Any
    sample_weight: Any
    n_classes: int
    costs: np.ndarray
    groups: np.ndarray
    lasso_groups: np.ndarray | None
    group_costs: np.ndarray | None
    seed: int
    bin_mapper: Any
    corr_of: Callable | None = None


class BurnSelection(NamedTuple):
    """The lasso's selection from one forest, with its diagnostics.

    Parameters
    ----------
    selected_features : ndarray of shape (n_selected,), int64
        Most important first (completed features last).
    feature_importances : ndarray of shape (n_features,), float64
        Normalized to sum 1 (0 off the selection).
    forest_coverage : int
    forest_features : ndarray of shape (n_covered,), int64
    n_trees : int
    tree_weights : ndarray of shape (n_trees,), float64
    intercept : float
    lam : float or None
        The selection's lambda (None when the forest splits on no feature).
    exact : bool
    merged_near_copies : list of list of int
    path : dict
        ``selection_path_``.
    filled : ndarray of shape (n_filled,), int64
        ``selection_filled_``: the last entries of ``selected_features``, which fill a short
        selection to k (``_controlburn_fill``); empty otherwise.
    """

    selected_features: np.ndarray
    feature_importances: np.ndarray
    forest_coverage: int
    forest_features: np.ndarray
    n_trees: int
    tree_weights: np.ndarray
    intercept: float
    lam: float | None
    exact: bool
    merged_near_copies: list
    path: dict
    filled: np.ndarray


class BurnResult(NamedTuple):
    """What ControlBurn's fit step returns.

    Parameters
    ----------
    forest : Forest
        Grown or kept, its training predictions dropped.
    selection : BurnSelection
    times : dict
        Wall seconds: "select", and "forest" when the forest was grown.
    warnings : list of str
        The ``SelectionWarning`` messages, in order, for ``fit`` to raise.
    """

    forest: Any
    selection: BurnSelection
    times: dict
    warnings: list
