"""Depth-wise growth of one tree on binned data: a loop over levels, one backend call each.

Owns the tree loop and the bookkeeping a user sees; the backend owns the work. Per level,
``backend.level_step`` runs the whole level in one compiled call on the CPU (or a fixed
sequence of kernels and one small device -> host copy on the GPU): penalized split search of
every node, the decisions (``gpufs._level``: feature budget, Omega-only fallback, leaf or
split), the partition of the rows, the children's sums, and the next level's histograms (the
smaller child of each split built, its sibling by exact subtraction). No Python runs per node
and nothing here branches on the device.

The grower keeps: the ``Tree`` arrays (filled from each level's decisions), the penalty state
(``gpufs.penalties``: Omega grows between levels), and the leaf values, computed at the end
from the nodes' exact fixed-point sums with the one leaf formula (``_gain.leaf_value``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .quantize import fixed_point_scale, quantize
from .tree import Tree, n_nodes_for_depth


@dataclass(frozen=True)
class TreeParams:
    """Hyperparameters of one tree."""

    max_depth: int = 4
    reg_lambda: float = 1.0
    learning_rate: float = 0.1
    min_child_weight: float = 1e-3
    min_split_gain: float = 0.0


@dataclass(frozen=True)
class SplitParams:
    """Everything the split search of one tree needs besides the histograms (host scalars
    and the per-feature bin counts on the backend's device)."""

    n_bins: object
    g_scale: float
    h_scale: float
    reg_lambda: float
    gain_divisor: float
    min_child_weight: float
    min_split_gain: float


@dataclass
class LevelResult:
    """One level's decisions, host arrays over the level's nodes (in node order).

    ``feature`` int32 (-1: the node is a leaf), ``bin`` int32, ``missing_left`` bool,
    ``gain`` float64; ``admitted`` int64, the features that entered Omega, in order.
    """

    nodes: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    gain: np.ndarray
    admitted: np.ndarray


@dataclass
class GrownTree:
    """A tree and where its rows ended up (the backend's tree state), so the raw scores are
    updated from the partition without traversing the tree (``add_to``)."""

    tree: Tree
    state: object
    backend: object
    leaf_nodes: np.ndarray
    leaf_values: np.ndarray
    new_features: list

    def add_to(self, raw_column):
        """raw_column[row] += value of the row's leaf, in place (n_samples,) float64."""
        self.backend.update_raw(raw_column, self.state, self.leaf_nodes, self.leaf_values)


def grow_tree_packed(backend, Xb, gh, root_g_q, root_h_q, g_scale, h_scale, n_bins,
                     bin_mapper, penalties, params: TreeParams, tree_index: int,
                     gain_divisor: float = 1.0) -> GrownTree:
    """Grow one tree from packed fixed-point gradients.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Xb : uint8 (n_samples, n_features) on the backend's device, or
        ``backend.prepare_binned(Xb)`` (prepare it once when growing many trees)
    gh : int64 (n_samples, 2) fixed-point (gradient, hessian), sample weights applied
    root_g_q, root_h_q : int, the exact sums of the two columns of ``gh``
    g_scale, h_scale : the power-of-two scales of ``gh``'s columns
    n_bins : int32 (n_features,) value bins per feature, on the backend's device
    bin_mapper : ``binning.BinMapper`` (raw-value thresholds of the splits)
    penalties : ``penalties.PenaltyState``, updated in place as features are first used
    tree_index : index of this tree in the ensemble (recorded as the first use of new features)
    gain_divisor : the A-GBM divisor of this tree's gradients (1.0 for plain GBFS)
    """
    depth_max = params.max_depth
    d = Xb.shape[1]
    tree = Tree.empty(depth_max)
    split = SplitParams(n_bins=n_bins, g_scale=float(g_scale), h_scale=float(h_scale),
                        reg_lambda=float(params.reg_lambda), gain_divisor=float(gain_divisor),
                        min_child_weight=float(params.min_child_weight),
                        min_split_gain=float(params.min_split_gain))
    begin = getattr(penalties, "begin_tree", None)
    if begin is not None:  # GT-GBM's group tests name the tree's candidates (penalties.py)
        begin(backend, gh, int(root_g_q), int(root_h_q), float(g_scale), float(h_scale), params,
              tree_index)
    feats = penalties.candidate_features(d)
    state = backend.start_tree(Xb, gh, int(root_g_q), int(root_h_q), depth_max, feats)
    reached = [np.zeros(1, np.int64)]
    leaves = []
    new_features: list[int] = []
    for depth in range(depth_max):
        budget = penalties.budget_left()
        res = backend.level_step(state, penalties.penalty_vector(), penalties.allowed_mask(),
                                 penalties.used, -1 if budget is None else budget, split,
                                 depth + 1 < depth_max)
        split_mask = res.feature >= 0
        nodes = res.nodes[split_mask]
        leaves.append(res.nodes[~split_mask])
        new_features += penalties.admit(res.admitted, tree_index)
        if nodes.shape[0] == 0:
            break
        f = res.feature[split_mask]
        b = res.bin[split_mask]
        tree.feature[nodes] = f
        tree.bin_threshold[nodes] = b
        tree.threshold[nodes] = _thresholds(bin_mapper, f, b)
        tree.missing_left[nodes] = res.missing_left[split_mask]
        tree.gain[nodes] = res.gain[split_mask]
        children = np.empty(2 * nodes.shape[0], np.int64)
        children[0::2] = 2 * nodes + 1
        children[1::2] = 2 * nodes + 2
        reached.append(children)
        if depth + 1 == depth_max:
            leaves.append(children)

    reached = np.concatenate(reached)
    node_g, node_h, node_count = backend.node_sums(state)
    G = node_g[reached] / g_scale
    H = node_h[reached] / h_scale
    # ``_gain.leaf_value``'s formula on arrays: the same IEEE operations per node.
    tree.value[reached] = (-G / (H + params.reg_lambda)) * params.learning_rate
    tree.cover[reached] = H
    tree.count[reached] = node_count[reached]
    leaf_nodes = np.sort(np.concatenate(leaves))
    return GrownTree(tree=tree, state=state, backend=backend, leaf_nodes=leaf_nodes,
                     leaf_values=tree.value[leaf_nodes].copy(), new_features=new_features)


def grow_tree(backend, Xb, gq, hq, g_scale: float, h_scale: float, n_bins, bin_mapper,
              penalties, params: TreeParams, tree_index: int,
              gain_divisor: float = 1.0) -> GrownTree:
    """Grow one tree from separate fixed-point gradients ``gq`` and hessians ``hq`` (int64
    (n_samples,) each); see ``grow_tree_packed`` for the rest."""
    xp = backend.xp
    gh = xp.stack([gq, hq], axis=1)
    return grow_tree_packed(backend, Xb, gh, int(gq.sum()), int(hq.sum()), g_scale, h_scale,
                            n_bins, bin_mapper, penalties, params, tree_index, gain_divisor)


def grow_tree_from_gradients(backend, Xb, g, h, n_bins, bin_mapper, penalties,
                             params: TreeParams, tree_index: int, *, divisor: bool = False):
    """Quantize float64 gradients ``g`` and hessians ``h`` (n_samples,) and grow a tree;
    ``divisor`` asks for the A-GBM divisor of these gradients (else 1)."""
    n = int(g.shape[0])
    g_scale, h_scale = fixed_point_scale(g, n), fixed_point_scale(h, n)
    div = penalties.gain_divisor(g, h) if divisor else 1.0
    return grow_tree(backend, Xb, quantize(g, g_scale), quantize(h, h_scale), g_scale, h_scale,
                     n_bins, bin_mapper, penalties, params, tree_index, gain_divisor=div)


def _thresholds(bin_mapper, features, bins):
    """Raw-value thresholds of splits (``BinMapper.threshold_values``; mappers without the
    vectorized form answer one split at a time)."""
    vectorized = getattr(bin_mapper, "threshold_values", None)
    if vectorized is not None:
        return vectorized(features, bins)
    return [bin_mapper.threshold_value(int(f), int(b)) for f, b in zip(features, bins)]
