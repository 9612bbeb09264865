"""Depth-wise growth of one tree on binned data: a loop over runs of levels.

Owns the tree loop and the bookkeeping a user sees; the backend owns the work. A level is
``backend.level_step``: penalized split search of every node, the decisions
(``gpufs.rules._level``: feature budget, Omega-only fallback, leaf or split), the partition of
the rows, the children's sums, and the next level's histograms (the smaller child of each
split built, its sibling by exact subtraction). The CPU runs every level up to the next
admission into Omega in one compiled call (``backend.grow_levels``); the GPU runs a level as
a fixed sequence of kernels and one small device -> host copy. No Python runs per node.

The grower keeps: the ``Tree`` arrays (filled from each level's decisions), the penalty state
(``gpufs.engine.penalties``: Omega grows between levels), and the leaf values, computed at the end
from the nodes' exact fixed-point sums with the one leaf formula (``_gain.leaf_value``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends.base import LevelResult, SplitParams
from ..rules._gain import leaf_value
from ..rules._hist_layout import layout_of
from .quantize import PreparedGradients
from .tree import Tree

__all__ = ["GrownTree", "LevelResult", "SplitParams", "TreeParams", "grow_tree", "grow_tree_packed"]


@dataclass(frozen=True)
class TreeParams:
    """Hyperparameters of one tree.

    Parameters
    ----------
    max_depth : int, default=4
    reg_lambda : float, default=1.0
        L2 regularization of the leaf values (added to every hessian sum).
    learning_rate : float, default=0.1
        Multiplies every leaf value.
    min_child_weight : float, default=1e-3
        Least hessian sum of a child.
    min_split_gain : float, default=0.0
        A node splits only when its penalized gain is strictly above this.
    cat_smooth, cat_l2, min_data_per_group : float, default=0.0
    max_cat_threshold : int, default=256
        LightGBM's guards of a split over sorted categories (``gpufs.rules._categorical``); the
        defaults guard nothing (the boosted estimators pass theirs).
    """

    max_depth: int = 4
    reg_lambda: float = 1.0
    learning_rate: float = 0.1
    min_child_weight: float = 1e-3
    min_split_gain: float = 0.0
    cat_smooth: float = 0.0
    cat_l2: float = 0.0
    min_data_per_group: float = 0.0
    max_cat_threshold: int = 256


@dataclass
class GrownTree:
    """A tree and where its rows ended up (the backend's tree state), so the raw scores are
    updated from the partition without traversing the tree (``add_to``).

    Parameters
    ----------
    tree : Tree
    state : object
        The backend's tree state (rows partitioned by leaf).
    backend : CPUBackend or GPUBackend
    leaf_nodes : ndarray of shape (n_leaves,), int64
        The tree's leaves, sorted.
    leaf_values : ndarray of shape (n_leaves,), float64
    new_features : list of int
        The features the tree brought into Omega, in order.
    """

    tree: Tree
    state: object
    backend: object
    leaf_nodes: np.ndarray
    leaf_values: np.ndarray
    new_features: list

    def add_to(self, raw_column):
        """Add every row's leaf value to its raw score, in place.

        Parameters
        ----------
        raw_column : ndarray of shape (n_samples,), float64
            On the backend's device (may be a column of a 2-D array).
        """
        self.backend.update_raw(raw_column, self.state, self.leaf_nodes, self.leaf_values)


def grow_tree_packed(
    backend,
    Xb,
    prep,
    n_bins,
    bin_mapper,
    penalties,
    params: TreeParams,
    tree_index: int,
    candidate_search=None,
) -> GrownTree:
    """Grow one tree from packed fixed-point gradients.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Xb : ndarray of shape (n_samples, n_features), uint8, or a prepared matrix
        On the backend's device, or ``backend.prepare_binned(Xb)`` (prepare it once when
        growing many trees).
    prep : PreparedGradients
        The tree's fixed-point (gradient, hessian) per row (``gh``, sample weights applied,
        on the backend's device), their exact sums, power-of-two scales and A-GBM gain
        divisor (``quantize.prepare_gradients``).
    n_bins : ndarray of shape (n_features,), int32
        Value bins per feature, on the backend's device.
    bin_mapper : BinMapper
        Gives the raw-value thresholds of the splits and the histogram layout
        (``BinMapper.hist_layout``).
    penalties : PenaltyState
        Updated in place as features are first used.
    params : TreeParams
    tree_index : int
        Index of this tree in the ensemble (recorded as the first use of new features).
    candidate_search : callable or None, default=None
        GT-GBM's group tests (``group_testing.GroupTestSearch``):
        ``candidate_search(backend, gh, G_q, H_q, g_scale, h_scale, params, tree_index)``
        gives the int64 features the tree may bring into Omega, recorded with
        ``penalties.set_tree_candidates``. None: every feature is a candidate.

    Returns
    -------
    GrownTree
    """
    g_scale, h_scale = float(prep.g_scale), float(prep.h_scale)
    depth_max = params.max_depth
    d = Xb.shape[1]
    cat_slot, n_cat = _categorical_slots(bin_mapper, d)
    is_cat = cat_slot >= 0
    tree = Tree.empty(depth_max, categorical=n_cat > 0)
    split = SplitParams(
        n_bins=n_bins,
        g_scale=g_scale,
        h_scale=h_scale,
        reg_lambda=float(params.reg_lambda),
        gain_divisor=float(prep.gain_divisor),
        min_child_weight=float(params.min_child_weight),
        min_split_gain=float(params.min_split_gain),
        cat_slot=cat_slot,
        n_cat=n_cat,
        cat_smooth=float(params.cat_smooth),
        cat_l2=float(params.cat_l2),
        min_data_per_group=float(params.min_data_per_group),
        max_cat_threshold=int(params.max_cat_threshold),
        layout=layout_of(bin_mapper, n_bins, d),
    )
    if candidate_search is not None:
        # Once the budget is spent nothing is searched: only Omega may be split on.
        cands = (
            np.zeros(0, np.int64)
            if penalties.budget_left() == 0
            else candidate_search(
                backend, prep.gh, int(prep.G_q), int(prep.H_q), g_scale, h_scale, params, tree_index
            )
        )
        penalties.set_tree_candidates(cands)
    feats = penalties.candidate_features(d)
    # Omega changes only when a level admits features (``penalties.admit``, below): the
    # penalty vector, the allowed mask and the budget are recomputed only then.
    penalty = penalties.penalty_vector()
    allowed, budget = None, None
    state = backend.start_tree(
        Xb,
        prep.gh,
        int(prep.G_q),
        int(prep.H_q),
        depth_max,
        feats,
        penalty=penalty,
        groups=penalties.groups,
        split=split,
    )
    # Levels run in runs: a backend with ``grow_levels`` (the CPU's) grows every level up to
    # the next admission in one compiled call; others go one ``level_step`` at a time.
    grow_levels = getattr(backend, "grow_levels", None) or _levels_one_at_a_time(backend)
    new_features: list[int] = []
    depth, done = 0, depth_max == 0
    while not done:
        if allowed is None:
            budget = penalties.budget_left()
            allowed = penalties.allowed_mask()
        depth, done, admitted = grow_levels(
            state,
            penalty,
            allowed,
            penalties.used,
            -1 if budget is None else budget,
            split,
            depth,
            depth_max,
            tree,
        )
        admitted = penalties.admit(admitted, tree_index)
        if admitted:
            new_features += admitted
            penalty = penalties.penalty_vector()
            allowed = None
    split_nodes = np.flatnonzero(tree.feature >= 0)
    if split_nodes.shape[0]:
        f = tree.feature[split_nodes]
        thresholds = _thresholds(bin_mapper, f, tree.bin_threshold[split_nodes])
        # a categorical split has no threshold: its left set is its bitset
        tree.threshold[split_nodes] = np.where(is_cat[f], 0.0, thresholds) if n_cat else thresholds

    # the nodes the rows reached: the root and every child of a split
    is_reached = np.ones(tree.feature.shape[0], np.bool_)
    np.greater_equal(tree.feature[_PARENT[depth_max]], 0, out=is_reached[1:])
    reached = np.flatnonzero(is_reached)
    node_g, node_h, node_count = backend.node_sums(state)
    G = node_g[reached] / g_scale
    H = node_h[reached] / h_scale
    # the one leaf rule, on arrays: the same IEEE operations per node as on a scalar
    tree.value[reached] = leaf_value(G, H, params.reg_lambda, params.learning_rate)
    tree.cover[reached] = H
    tree.count[reached] = node_count[reached]
    leaf_nodes = reached[tree.feature[reached] < 0]
    return GrownTree(
        tree=tree,
        state=state,
        backend=backend,
        leaf_nodes=leaf_nodes,
        leaf_values=tree.value[leaf_nodes].copy(),
        new_features=new_features,
    )


def grow_tree(
    backend,
    Xb,
    gq,
    hq,
    g_scale: float,
    h_scale: float,
    n_bins,
    bin_mapper,
    penalties,
    params: TreeParams,
    tree_index: int,
    gain_divisor: float = 1.0,
) -> GrownTree:
    """Grow one tree from separate fixed-point gradients and hessians (every feature a
    candidate: :func:`grow_tree_packed` takes a candidate search).

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Xb : ndarray of shape (n_samples, n_features), uint8, or a prepared matrix
    gq, hq : ndarray of shape (n_samples,), int64
        Fixed-point gradients and hessians.
    g_scale, h_scale : float
        Their power-of-two scales.
    n_bins : ndarray of shape (n_features,), int32
    bin_mapper : BinMapper
    penalties : PenaltyState
    params : TreeParams
    tree_index : int
    gain_divisor : float, default=1.0
        As for :func:`grow_tree_packed`.

    Returns
    -------
    GrownTree
    """
    xp = backend.xp
    prep = PreparedGradients(
        xp.stack([gq, hq], axis=1),
        int(gq.sum()),
        int(hq.sum()),
        float(g_scale),
        float(h_scale),
        float(gain_divisor),
    )
    return grow_tree_packed(backend, Xb, prep, n_bins, bin_mapper, penalties, params, tree_index)


def _levels_one_at_a_time(backend):
    """``grow_levels`` (``CPUBackend.grow_levels``' contract) for a backend that has only
    ``level_step``: one level per call, each split's decision written into the tree at its
    node."""

    def grow_levels(state, penalty, allowed, used, budget, split, depth, max_depth, tree):
        res = backend.level_step(
            state, penalty, allowed, used, budget, split, depth + 1 < max_depth
        )
        mask = res.feature >= 0
        nodes = res.nodes[mask]
        tree.feature[nodes] = res.feature[mask]
        tree.bin_threshold[nodes] = res.bin[mask]
        tree.missing_left[nodes] = res.missing_left[mask]
        tree.gain[nodes] = res.gain[mask]
        if tree.cat_bits.shape[1]:
            tree.cat_bits[nodes] = res.cat_bits[mask]
        done = nodes.shape[0] == 0 or depth + 1 >= max_depth
        return depth + 1, done, res.admitted

    return grow_levels


class _Parents(dict):
    """Depth -> the parent of every node but the root of a complete tree of that depth,
    (n_nodes - 1,) int64."""

    def __missing__(self, depth):
        parents = self[depth] = (np.arange(1, 2 ** (depth + 1) - 1) - 1) // 2
        return parents


_PARENT = _Parents()


def _categorical_slots(bin_mapper, n_features):
    """(cat_slot, n_cat) of the mapper's categorical features (``BinMapper.categorical_slots``,
    made once per fit; from ``is_categorical_`` for other mappers, none without it)."""
    get = getattr(bin_mapper, "categorical_slots", None)
    if get is not None:
        cat_slot, n_cat = get()
        if cat_slot.shape[0] == n_features:
            return cat_slot, n_cat
    from ..backends.base import categorical_slots

    return categorical_slots(getattr(bin_mapper, "is_categorical_", None), n_features)


def _thresholds(bin_mapper, features, bins):
    """Raw-value thresholds of splits (``BinMapper.threshold_values``; mappers without the
    vectorized form answer one split at a time)."""
    vectorized = getattr(bin_mapper, "threshold_values", None)
    if vectorized is not None:
        return vectorized(features, bins)
    return [bin_mapper.threshold_value(int(f), int(b)) for f, b in zip(features, bins)]
