"""Honest leaf values of a forest's tree (Wager and Athey, "Estimation and Inference of
Heterogeneous Treatment Effects using Random Forests", JASA 113(523), 2018, section 2.4, "honest
trees"): the tree's splits are chosen on its in-bag rows, and its leaf values are re-estimated
from rows the split search did not see.

One implementation in array code (``xp``: numpy, cupy, or the host arrays of a cluster's
driver), used by every tree type (``TreeGrower.grow``). The per-row work is the grower's row
partition (``backend.update_raw``, which every backend has) and two ``bincount`` over the
leaves; the per-node work is on the host, over at most 2**17 - 1 nodes.

Exact and device-independent: the sums are of fixed-point values (``gpufs.engine.quantize``,
at most 2**15 each), so a leaf's sum is an integer below 2**52 (for fewer than 2**37 rows),
exact in float64 whatever the order of its rows (cupy's ``bincount`` adds in any order): the
CPU and the GPU give the same bits.
"""

from __future__ import annotations

import numpy as np

from .._device import to_host
from .._types import RAW_DTYPE
from ..engine.quantize import fixed_point_scale, quantize

__all__ = ["honest_leaf_values", "leaf_of_rows", "node_sums_from_leaves"]


def leaf_of_rows(grown, n_rows: int, xp):
    """Each row's leaf, as an index into ``grown.leaf_nodes``.

    From the grower's row partition, the same one the tree's prediction vector comes from
    (``GrownTree.add_to``): ``backend.update_raw`` adds leaf i's number i + 1 to a zero column.

    Parameters
    ----------
    grown : GrownTree
    n_rows : int
    xp : module

    Returns
    -------
    ndarray of shape (n_rows,), int64
        On the backend's device; -1 for a row in no leaf (none: every row is partitioned).
    """
    leaves = np.asarray(grown.leaf_nodes, np.int64)
    ids = xp.zeros(n_rows, dtype=RAW_DTYPE)
    numbers = np.arange(1, leaves.shape[0] + 1, dtype=np.float64)
    grown.backend.update_raw(ids, grown.state, leaves, numbers)
    return ids.astype(np.int64) - 1


def node_sums_from_leaves(leaf_nodes, leaf_sums, n_nodes: int) -> np.ndarray:
    """The sums of every node of a complete tree (node i's children 2i+1 and 2i+2) from its
    leaves' sums: a node's is the sum of its leaves'.

    Parameters
    ----------
    leaf_nodes : ndarray of shape (n_leaves,), int64
    leaf_sums : ndarray of shape (n_leaves,), int64 or float64
        int64 for exact fixed-point sums (honest values); float64 for the out-of-bag
        pruning's sums (``_prune``).
    n_nodes : int
        ``2 ** (depth + 1) - 1``.

    Returns
    -------
    ndarray of shape (n_nodes,), the dtype of ``leaf_sums``
        0 for a node no leaf lies under.
    """
    leaf_sums = np.asarray(leaf_sums)
    s = np.zeros(n_nodes, leaf_sums.dtype)
    s[np.asarray(leaf_nodes, np.int64)] = leaf_sums
    depth = int(np.log2(n_nodes + 1)) - 1
    for level in range(depth - 1, -1, -1):
        idx = np.arange(2**level - 1, 2 ** (level + 1) - 1)
        s[idx] += s[2 * idx + 1] + s[2 * idx + 2]
    return s


def honest_leaf_values(grown, residual, value_weights, xp):
    """Re-estimate a grown tree's node values from the rows of ``value_weights``.

    A node's honest value is the weighted mean of ``residual`` over its value rows, in fixed
    point as the grower's own leaf rule (``-G / H`` with ``reg_lambda = 0``, learning rate 1).
    A node without value rows (weight 0) takes its parent's honest value, up to the root; a
    root without any takes 0 (no change to the forest's output). The parent's value is the
    honest estimate of the same quantity on the coarser partition the split search also chose
    (a leaf without value rows is a small leaf, whose in-bag mean is the noisiest of all);
    0 would shrink every empty leaf to "no effect" whatever its neighbours say. (On the
    planted churn table of ``bench/bench_quality.py`` both give 2 of 9 fits with noise ahead,
    8 of the 9 selections alike: with bag-boosting's half of about 18 % of the rows, few
    leaves are empty.)

    Parameters
    ----------
    grown : GrownTree
        Its tree's ``value`` is rewritten in place at every node the tree reached.
    residual : ndarray of shape (n_rows,), float64
        The tree's target.
    value_weights : ndarray of shape (n_rows,), float64
        Each row's weight in the honest values: 0 for the rows the split search saw (in-bag)
        and for the rows kept for the forest's stopping rule.
    xp : module

    Returns
    -------
    ndarray of shape (n_rows,), float64
        The tree's prediction on every row with its honest values (the column of ``A``).
    """
    tree = grown.tree
    leaves = np.asarray(grown.leaf_nodes, np.int64)
    n_rows = residual.shape[0]
    n_nodes = tree.arrays["value"].shape[0]
    leaf = leaf_of_rows(grown, n_rows, xp)
    g = -residual * value_weights
    g_scale = fixed_point_scale(g, n_rows)
    h_scale = fixed_point_scale(value_weights, n_rows)
    # integers of at most 2**15 each: every partial sum is exact in float64 (below 2**52)
    gq = quantize(g, g_scale).astype(np.float64)
    hq = quantize(value_weights, h_scale).astype(np.float64)
    n_leaves = leaves.shape[0]
    G_leaf = np.asarray(to_host(xp.bincount(leaf, weights=gq, minlength=n_leaves)))
    H_leaf = np.asarray(to_host(xp.bincount(leaf, weights=hq, minlength=n_leaves)))
    G = node_sums_from_leaves(leaves, np.rint(G_leaf).astype(np.int64), n_nodes)
    H = node_sums_from_leaves(leaves, np.rint(H_leaf).astype(np.int64), n_nodes)
    value = np.zeros(n_nodes, np.float64)
    depth = int(np.log2(n_nodes + 1)) - 1
    for level in range(depth + 1):
        idx = np.arange(2**level - 1, 2 ** (level + 1) - 1)
        parent = value[(idx - 1) // 2] if level else np.zeros(1)
        has = H[idx] > 0
        own = np.divide(
            -(G[idx] / g_scale), H[idx] / h_scale, out=np.zeros(idx.shape[0]), where=has
        )
        value[idx] = np.where(has, own, parent)
    reached = np.union1d(np.flatnonzero(tree.arrays["feature"] >= 0), leaves)
    tree.arrays["value"][reached] = value[reached]
    return xp.asarray(value[leaves])[leaf]
