"""What trees cost and what they select: the per-tree costs ``u`` of ControlBurn's lasso
(feature costs and feature groups, Liu, Xie, Udell, "ControlBurn: Feature Selection by Sparse
Forests", KDD 2021, sections 3.3.1-3.3.2), the features a set of tree weights selects, and the
host-side checks of the vectors they are built from."""

from __future__ import annotations

import numpy as np

from .._device import to_host

__all__ = ["REWEIGHT_EPS", "selected_features", "tree_costs", "usage_discount"]

#: ``eps`` of the reweighting discount, relative to the largest usage (see :func:`usage_discount`).
REWEIGHT_EPS = 0.5


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
        raise ValueError(
            f"tree_feature_masks must be 2-D (n_trees, n_features), got shape {m.shape}"
        )
    if m.dtype != np.bool_:
        if m.dtype.kind not in "biuf" or not np.all((m == 0) | (m == 1)):
            raise ValueError(
                "tree_feature_masks must be boolean (or 0/1): entry [i, j] says "
                "tree i splits on feature j"
            )
        m = m.astype(bool)
    return m


def tree_costs(
    tree_feature_masks, feature_costs=None, groups=None, group_costs=None, discount=None
):
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
    discount : ndarray of shape (n_units,) or None, default=None
        Factors in [0, 1] that multiply the cost of every paid unit: a feature (n_units =
        n_features) or, with ``groups``, a group (n_units = the number of group labels);
        :func:`usage_discount` computes them. None: no discount.

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
            costs = _nonneg(
                _host_vector(feature_costs, n_features, "feature_costs"), "feature_costs"
            )
        costs = _discounted(costs, discount)
        # Row sums in a fixed (numpy pairwise) order: deterministic and the same on every machine.
        return np.where(masks, costs[None, :], 0.0).sum(axis=1)

    g, n_groups = _group_labels(groups, n_features)
    if group_costs is not None:
        if feature_costs is not None:
            raise ValueError(
                "give either feature_costs or group_costs together with groups, not "
                "both (a group's cost defaults to the sum of its feature costs)"
            )
        gc = np.asarray(to_host(group_costs))
        gc = _nonneg(_host_vector(gc, None, "group_costs"), "group_costs")
        if gc.shape[0] < n_groups:
            raise ValueError(
                f"group_costs has length {gc.shape[0]} but groups uses labels up to {n_groups - 1}"
            )
    elif feature_costs is not None:
        fc = _nonneg(_host_vector(feature_costs, n_features, "feature_costs"), "feature_costs")
        gc = np.bincount(g, weights=fc, minlength=n_groups)
    else:
        gc = np.ones(n_groups)
    gc = _discounted(gc[: max(n_groups, 1)], discount)
    return np.where(_uses_group(masks, g, n_groups), gc[None, :], 0.0).sum(axis=1)


def _group_labels(groups, n_features):
    """Integer group labels (n_features,) int64 >= 0 and their count, checked."""
    g = np.asarray(to_host(groups))
    if g.ndim != 1 or g.shape[0] != n_features:
        raise ValueError(
            f"groups must have shape ({n_features},) (one label per feature), got {g.shape}"
        )
    if g.dtype.kind not in "iub":
        if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
            g = g.astype(np.int64)
        else:
            raise ValueError(f"groups must hold integer labels, got dtype {g.dtype}")
    g = g.astype(np.int64)
    if g.size and g.min() < 0:
        raise ValueError(f"groups labels must be >= 0, got {int(g.min())}")
    return g, (int(g.max()) + 1 if g.size else 0)


def _uses_group(masks, g, n_groups):
    """(n_trees, max(n_groups, 1)) bool: tree i splits on some feature of group k."""
    uses = np.zeros((masks.shape[0], max(n_groups, 1)), dtype=bool)
    rows, cols = np.nonzero(masks)
    uses[rows, g[cols]] = True
    return uses


def _discounted(unit_costs, discount):
    if discount is None:
        return unit_costs
    d = np.asarray(discount, dtype=np.float64)
    if d.shape != unit_costs.shape:
        raise ValueError(
            f"discount has shape {d.shape}, expected {unit_costs.shape} (one "
            "factor per feature, or per group when groups are given)"
        )
    if not np.all((d >= 0) & (d <= 1)):
        raise ValueError("discount factors must lie in [0, 1]")
    return unit_costs * d


def usage_discount(weights, tree_feature_masks, groups=None, eps=REWEIGHT_EPS):
    """The cost discount of one reweighting step: ``eps_abs / (eps_abs + v)`` per unit.

    ``v`` is the usage of every paid unit, the total weight of the trees that use it
    (``v = G w`` of ControlBurn's problem (1); with ``groups``, per group), and
    ``eps_abs = eps * max(v)``. A unit no kept tree uses keeps its full cost (factor 1); the
    more weight the kept trees put on a unit, the cheaper it gets. This is one step of
    reweighted l1 minimization (Candes, Wakin, Boyd, "Enhancing Sparsity by Reweighted l1
    Minimization", J. Fourier Anal. Appl., 2008) for the concave penalty
    ``sum_j c_j eps_abs log(1 + v_j / eps_abs)``, which has the lasso's slope ``c_j`` at
    ``v_j = 0`` and flattens once a unit is paid for: near-copies of a kept feature stop
    looking as cheap as the kept feature itself, so the weight moves onto one of them.

    Parameters
    ----------
    weights : array-like of shape (n_trees,)
        Tree weights of a solution (numpy or cupy).
    tree_feature_masks : array-like of shape (n_trees, n_features), bool
    groups : array-like of shape (n_features,) of int >= 0, or None, default=None
        Group labels: one factor per group instead of per feature.
    eps : float > 0, default=REWEIGHT_EPS
        Relative to ``max(v)``.

    Returns
    -------
    ndarray of shape (n_features,) or (n_groups,), float64 in (0, 1], on the host
        All ones when no tree has weight.
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps!r}")
    w = np.asarray(to_host(weights), dtype=np.float64)
    masks = _as_masks(tree_feature_masks)
    if w.shape != (masks.shape[0],):
        raise ValueError(
            f"weights has shape {w.shape} but tree_feature_masks has "
            f"{masks.shape[0]} rows (one per tree)"
        )
    if groups is not None:
        g, n_groups = _group_labels(groups, masks.shape[1])
        masks = _uses_group(masks, g, n_groups)
    usage = np.maximum(w, 0.0) @ masks
    top = float(usage.max()) if usage.size else 0.0
    if not top > 0:
        return np.ones(usage.shape)
    eps_abs = eps * top
    return eps_abs / (eps_abs + usage)


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
        raise ValueError(
            f"weights has shape {w.shape} but tree_feature_masks has "
            f"{masks.shape[0]} rows (one per tree)"
        )
    kept = w > threshold
    return np.flatnonzero(masks[kept].any(axis=0)).astype(np.int64)
