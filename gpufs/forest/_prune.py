"""Out-of-bag pruning of a forest's tree: reduced-error pruning (Quinlan, "Simplifying decision
trees", International Journal of Man-Machine Studies 27(3), 1987) on the rows the tree's
bootstrap left out.

A split is kept only when it lowers the squared error of the tree's target on its out-of-bag
rows, with the values the split search gave (in-bag means): bottom up, a node whose subtree
does no better out of bag than the node alone as a leaf becomes that leaf. A split on a noise
column fits its in-bag rows only; out of bag its children's values are as good as guesses, so
it goes, and with it the column from the tree's features. ControlBurn's lasso selects trees and
pays for every feature a tree uses, so a deep tree with a stray noise split otherwise brings
that column in with the signal the tree carries.

Array code (``xp``: numpy or cupy) for the per-row sums (one ``bincount`` per sum over the
leaves); the per-node work is on the host.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._device import to_host
from ._honest import leaf_of_rows, node_sums_from_leaves

__all__ = ["PruneResult", "prune_out_of_bag"]


class PruneResult(NamedTuple):
    """What :func:`prune_out_of_bag` did to one tree.

    Attributes
    ----------
    prediction : ndarray of shape (n_rows,), float64
        The pruned tree's value on every row (on the device of the rows).
    n_pruned : int
        Splits removed.
    removed_features : ndarray of shape (n_pruned,), int64
        The feature of each removed split (as the tree numbers its columns).
    removed_saving : ndarray of shape (n_pruned,), float64
        Each removed split's own out-of-bag saving: the weighted squared error of its node
        as a leaf minus that of its two children as leaves (the in-bag values), summed over
        the node's out-of-bag rows. Negative when the split did worse out of bag. ControlBurn
        fills a short selection by these (``ControlBurnClassifier``'s ``selection_filled_``).
    """

    prediction: object
    n_pruned: int
    removed_features: np.ndarray
    removed_saving: np.ndarray


def prune_out_of_bag(grown, residual, oob_weights, z, xp):
    """Prune a grown tree in place by its out-of-bag squared error; its prediction on every row.

    Parameters
    ----------
    grown : GrownTree
        Its tree's arrays are rewritten in place: a pruned node becomes a leaf (its in-bag
        value kept) and the nodes below it are cleared as unreached ones (``Tree.empty``).
    residual : ndarray of shape (n_rows,), float64
        The tree's target.
    oob_weights : ndarray of shape (n_rows,), float64
        Each row's weight in the out-of-bag error: 0 on the in-bag rows.
    z : float >= 0
        A split (with what is kept below it) stays when its out-of-bag saving is above ``z``
        standard errors of that sum.
    xp : module

    Returns
    -------
    PruneResult
    """
    arrays = grown.tree.arrays
    feature = arrays["feature"]
    value = np.asarray(arrays["value"], np.float64)
    n_nodes = feature.shape[0]
    leaves = np.asarray(grown.leaf_nodes, np.int64)
    n_rows = residual.shape[0]
    leaf = leaf_of_rows(grown, n_rows, xp)
    wr = oob_weights * residual

    def by_leaf(weights):
        return np.asarray(to_host(xp.bincount(leaf, weights=weights, minlength=leaves.shape[0])))

    n = node_sums_from_leaves(leaves, by_leaf(oob_weights), n_nodes)
    s1 = node_sums_from_leaves(leaves, by_leaf(wr), n_nodes)
    s2 = node_sums_from_leaves(leaves, by_leaf(wr * residual), n_nodes)
    # Bottom up: a split node's subtree (as pruned below it) against the node as a leaf.
    # Row r under current leaf l saves d_r = (r - v_p)^2 - (r - v_l)^2 = a_l r + b_l, with
    # a_l = 2 (v_l - v_p), b_l = v_p^2 - v_l^2: the subtree's saving and its spread come from
    # the leaves' (n, S1, S2). Kept when the saving is above z standard errors of its sum.
    under = {}  # split node kept -> the current leaves under it
    pruned = np.zeros(n_nodes, bool)
    depth = int(np.log2(n_nodes + 1)) - 1
    for level in range(depth - 1, -1, -1):
        idx = np.arange(2**level - 1, 2 ** (level + 1) - 1)
        for p in idx[feature[idx] >= 0].tolist():
            lv = np.concatenate([under.get(c, np.array([c])) for c in (2 * p + 1, 2 * p + 2)])
            vp = value[p]
            a = 2.0 * (value[lv] - vp)
            b = vp * vp - value[lv] ** 2
            saving = float((a * s1[lv] + b * n[lv]).sum())
            sq = float((a * a * s2[lv] + 2.0 * a * b * s1[lv] + b * b * n[lv]).sum())
            mass = float(n[p])
            var = max(sq - (saving * saving / mass if mass > 0 else 0.0), 0.0)
            if mass > 0 and saving > z * np.sqrt(var):
                under[p] = lv
            else:
                pruned[p] = True
    # every node under a pruned one is cleared; each old leaf answers with its highest pruned
    # ancestor (or itself)
    gone = np.zeros(n_nodes, bool)
    answer = np.arange(n_nodes)
    for level in range(1, depth + 1):
        idx = np.arange(2**level - 1, 2 ** (level + 1) - 1)
        parent = (idx - 1) // 2
        cut = gone[parent] | pruned[parent]
        gone[idx] = cut
        answer[idx] = np.where(cut, answer[parent], idx)
    removed = np.flatnonzero((gone | pruned) & (feature >= 0))
    removed_features = np.asarray(feature[removed], np.int64)
    # each removed split's own saving: its node as a leaf against its children as leaves
    vp = value[removed]
    saving = np.zeros(removed.shape[0])
    for c in (2 * removed + 1, 2 * removed + 2):
        saving += 2.0 * (value[c] - vp) * s1[c] + (vp * vp - value[c] ** 2) * n[c]
    for name, a in arrays.items():
        cleared = -1 if name == "feature" else 0  # as ``Tree.empty`` leaves an unreached node
        a[gone] = cleared
        if name not in ("value", "cover", "count"):  # a pruned node is a leaf of its own value
            a[pruned] = cleared
    leaf_value = value[answer[leaves]]
    pred = xp.asarray(leaf_value)[leaf]
    return PruneResult(pred, int(removed.shape[0]), removed_features, saving)
