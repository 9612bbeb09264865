"""What trees cost and what they select: the per-tree costs ``u`` of ControlBurn's lasso
(feature costs and feature groups, Liu, Xie, Udell, "ControlBurn: Feature Selection by Sparse
Forests", KDD 2021, sections 3.3.1-3.3.2), the features a set of tree weights selects, and the
host-side checks of the vectors they are built from."""
from __future__ import annotations

import numpy as np

from .._device import to_host

__all__ = ["selected_features", "tree_costs"]


def _host_vector(x, n, what, *, allow_none=False):
    if x is None:
        if allow_none:
            return None
        raise ValueError(f"{what} is required")
    v = np.asarray(to_host(x))
    if v.dtype.kind not in "biuf":
        raise ValueError(f"{what} must be numeric, got dtype {v.dtype}")
    v = v.astype(np.float64, copy=False)
    if v.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {v.shape}")
    if n is not None and v.shape[0] != n:
        raise ValueError(f"{what} has length {v.shape[0]}, expected {n}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return v


def _nonneg(v, what):
    if v.size and v.min() < 0:
        i = int(np.argmin(v))
        raise ValueError(f"{what} must be >= 0; entry {i} is {float(v[i])!r}")
    return v


def _as_masks(tree_feature_masks):
    """(T, F) bool on the host; 0/1 numbers are accepted."""
    m = np.asarray(to_host(tree_feature_masks))
    if m.ndim != 2:
        raise ValueError("tree_feature_masks must be 2-D (n_trees, n_features), got shape "
                         f"{m.shape}")
    if m.dtype != np.bool_:
        if m.dtype.kind not in "biuf" or not np.all((m == 0) | (m == 1)):
            raise ValueError("tree_feature_masks must be boolean (or 0/1): entry [i, j] says "
                             "tree i splits on feature j")
        m = m.astype(bool)
    return m


def tree_costs(tree_feature_masks, feature_costs=None, groups=None, group_costs=None):
    """Cost ``u_i`` of each tree (ControlBurn, sections 3.3.1 and 3.3.2).

    Without groups ``u_i = sum of feature_costs over the features tree i uses`` (the number of
    features when all costs are 1). With groups a tree pays once for every group it touches:
    ``u_i = sum of group_costs over the groups tree i uses``. When ``group_costs`` is None the
    cost of a group is the sum of its members' ``feature_costs`` (buying a group buys all its
    features), or 1 per group when ``feature_costs`` is None too (the paper's count of groups).
    Giving both ``feature_costs`` and ``group_costs`` is ambiguous and raises.

    Parameters
    ----------
    tree_feature_masks : array-like of shape (n_trees, n_features), bool
        ``[i, j]`` is True when tree i splits on feature j (0/1 numbers are accepted).
    feature_costs : array-like of shape (n_features,) or None, default=None
        Costs >= 0; None: every feature costs 1.
    groups : array-like of shape (n_features,) of int >= 0, or None, default=None
        Group label of each feature; None: every feature its own group.
    group_costs : array-like of shape (n_groups,) or None, default=None
        Costs >= 0 indexed by group label (more entries than the largest label).

    Returns
    -------
    ndarray of shape (n_trees,), float64, on the host
    """
    masks = _as_masks(tree_feature_masks)
    n_trees, n_features = masks.shape
    if groups is None:
        if group_costs is not None:
            raise ValueError("group_costs was given without groups")
        if feature_costs is None:
            costs = np.ones(n_features)
        else:
            costs = _nonneg(_host_vector(feature_costs, n_features, "feature_costs"),
                            "feature_costs")
        # Row sums in a fixed (numpy pairwise) order: deterministic and the same on every machine.
        return np.where(masks, costs[None, :], 0.0).sum(axis=1)

    g = np.asarray(to_host(groups))
    if g.ndim != 1 or g.shape[0] != n_features:
        raise ValueError(f"groups must have shape ({n_features},) (one label per feature), "
                         f"got {g.shape}")
    if g.dtype.kind not in "iub":
        if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
            g = g.astype(np.int64)
        else:
            raise ValueError(f"groups must hold integer labels, got dtype {g.dtype}")
    g = g.astype(np.int64)
    if g.size and g.min() < 0:
        raise ValueError(f"groups labels must be >= 0, got {int(g.min())}")
    n_groups = int(g.max()) + 1 if g.size else 0
    if group_costs is not None:
        if feature_costs is not None:
            raise ValueError("give either feature_costs or group_costs together with groups, not "
                             "both (a group's cost defaults to the sum of its feature costs)")
        gc = np.asarray(to_host(group_costs))
        gc = _nonneg(_host_vector(gc, None, "group_costs"), "group_costs")
        if gc.shape[0] < n_groups:
            raise ValueError(f"group_costs has length {gc.shape[0]} but groups uses labels up to "
                             f"{n_groups - 1}")
    elif feature_costs is not None:
        fc = _nonneg(_host_vector(feature_costs, n_features, "feature_costs"), "feature_costs")
        gc = np.bincount(g, weights=fc, minlength=n_groups)
    else:
        gc = np.ones(n_groups)
    # uses_group[i, k]: tree i splits on some feature of group k.
    uses_group = np.zeros((n_trees, max(n_groups, 1)), dtype=bool)
    rows, cols = np.nonzero(masks)
    uses_group[rows, g[cols]] = True
    return np.where(uses_group, gc[None, : uses_group.shape[1]], 0.0).sum(axis=1)


def selected_features(weights, tree_feature_masks, threshold=0.0):
    """The features used by some tree with ``weight > threshold``.

    Parameters
    ----------
    weights : array-like of shape (n_trees,)
        Tree weights (numpy or cupy).
    tree_feature_masks : array-like of shape (n_trees, n_features), bool
    threshold : float, default=0.0

    Returns
    -------
    ndarray of shape (n_selected,), int64
        Sorted feature indices.
    """
    w = np.asarray(to_host(weights), dtype=np.float64)
    masks = _as_masks(tree_feature_masks)
    if w.shape != (masks.shape[0],):
        raise ValueError(f"weights has shape {w.shape} but tree_feature_masks has "
                         f"{masks.shape[0]} rows (one per tree)")
    kept = w > threshold
    return np.flatnonzero(masks[kept].any(axis=0)).astype(np.int64)
