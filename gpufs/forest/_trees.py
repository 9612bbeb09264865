"""One tree of a ControlBurn forest: its penalties (feature-sparse trees, per-tree feature
subsets), the bins of a single-feature tree, and the one place where the forest calls the
shared grower (:meth:`TreeGrower.grow`)."""

from __future__ import annotations

import numpy as np

from .._types import RAW_DTYPE
from ..backends.base import categorical_slots
from ..engine.grower import TreeParams, grow_tree
from ..engine.penalties import PenaltyState
from ..engine.quantize import fixed_point_scale, quantize
from ..engine.tree import Tree
from ._honest import honest_leaf_values
from ._prune import prune_out_of_bag

__all__ = ["TreeGrower"]


class _SubsetPenalty(PenaltyState):
    """A PenaltyState whose splits are restricted to a feature subset (per-tree subsampling)."""

    def __init__(self, mu, costs, groups, scaling, subset_mask):
        super().__init__(mu, costs, groups, scaling, None)
        self.subset_mask = subset_mask

    def allowed_mask(self) -> np.ndarray:
        return super().allowed_mask() & self.subset_mask


class ColumnBins:
    """The bin mapper seen by a one-column slice of the binned matrix (single-feature trees).

    Parameters
    ----------
    bin_mapper : BinMapper
        The mapper of the whole matrix.
    feature : int
        The column the slice holds.
    """

    def __init__(self, bin_mapper, feature):
        self.bin_mapper, self.feature = bin_mapper, int(feature)
        cat = getattr(bin_mapper, "is_categorical_", None)
        #: the sliced column is categorical when the whole matrix's column is
        self.is_categorical_ = None if cat is None else np.asarray(cat)[[self.feature]]

    def threshold_value(self, feature, bin_threshold):
        """The raw threshold of ``bin_threshold`` on the sliced column."""
        return self.bin_mapper.threshold_value(self.feature, bin_threshold)


class TreeGrower:
    """Grows the forest's trees: least-squares regression trees fit to a residual, with unit
    hessians times the bootstrap count weights, ``reg_lambda = 0``, learning rate 1 and the
    categorical guards of ``ForestParams``.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    params : ForestParams
    costs : ndarray of shape (n_features,), float64
        Feature costs (the price of a new feature in a feature-sparse tree).
    groups : ndarray of shape (n_features,), int32
        Feature groups (members become free together in a feature-sparse tree).
    """

    def __init__(self, backend, params, costs, groups):
        self.backend, self.params = backend, params
        self.costs, self.groups = costs, groups
        d = int(np.asarray(costs).shape[0])
        #: Out-of-bag pruning's removed splits, per feature: how many, and the sum of their
        #: own out-of-bag savings (``PruneResult.removed_saving``), over every tree grown.
        self.pruned_splits = np.zeros(d, np.int64)
        self.pruned_saving = np.zeros(d, np.float64)

    def _penalties(self, n_features, subset):
        p, d = self.params, self.costs.shape[0]
        if p.tree_type == "sparse":
            return _SubsetPenalty(
                p.sparse_mu,
                self.costs,
                self.groups,
                "root_sse",
                subset if subset is not None else np.ones(d, bool),
            )
        if subset is not None:
            return _SubsetPenalty(0.0, self.costs, self.groups, "none", subset)
        return PenaltyState(
            0.0, np.ones(n_features), np.arange(n_features, dtype=np.int32), "none", None
        )

    def grow(
        self,
        Xb,
        n_bins,
        bin_mapper,
        residual,
        count_weights,
        depth,
        tree_index,
        *,
        feature=None,
        subset=None,
        value_weights=None,
        prune_weights=None,
    ):
        """Grow one tree and predict it on every row.

        Parameters
        ----------
        Xb : ndarray of shape (n_samples, n_columns), uint8
            The binned matrix, or one column of it for a single-feature tree.
        n_bins : ndarray of shape (n_columns,)
        bin_mapper : BinMapper or ColumnBins
        residual : ndarray of shape (n_samples,), float64
            The target of the tree.
        count_weights : ndarray of shape (n_samples,), float64
            Bootstrap counts times the sample weights.
        depth : int
        tree_index : int
            The tree's index in the forest.
        feature : int or None
            For a single-feature tree: the column of the whole matrix ``Xb`` holds.
        subset : ndarray of shape (n_features,), bool, or None
            The features this tree may split on.
        value_weights : ndarray of shape (n_samples,), float64, or None
            Honest leaf values (``_honest``): each row's weight in the re-estimated node
            values, 0 on the in-bag rows. None: the in-bag means the grower gives.
        prune_weights : ndarray of shape (n_samples,), float64, or None
            Out-of-bag pruning (``_prune``, ``ForestParams.oob_prune`` standard errors):
            each row's weight in the test of a split, 0 on the in-bag rows. None: no
            pruning.

        Returns
        -------
        tree : Tree
        prediction : ndarray of shape (n_samples,), float64
            The tree's value on every row, from the grower's row partition.
        """
        backend, xp = self.backend, self.backend.xp
        m = residual.shape[0]
        g = -residual * count_weights
        h = count_weights
        g_scale, h_scale = fixed_point_scale(g, m), fixed_point_scale(h, m)
        gq, hq = quantize(g, g_scale), quantize(h, h_scale)
        if int(hq.sum()) == 0:
            # Every in-bag row weighs 0 (a bootstrap of few positive-weight rows can draw
            # none): with reg_lambda = 0 no node has a value, -G / H is 0 / 0. The tree
            # fits no data, so it is one leaf of value 0 and predicts 0 everywhere.
            n_cat = categorical_slots(getattr(bin_mapper, "is_categorical_", None), Xb.shape[1])[1]
            return Tree.empty(depth, categorical=n_cat > 0), xp.zeros(m, dtype=RAW_DTYPE)
        pen = self._penalties(Xb.shape[1], subset)
        divisor = pen.gain_divisor(g, h) if self.params.tree_type == "sparse" else 1.0
        tp = TreeParams(
            max_depth=depth,
            reg_lambda=0.0,
            learning_rate=1.0,
            min_child_weight=float(self.params.min_child_weight),
            min_split_gain=0.0,
            cat_smooth=float(self.params.cat_smooth),
            cat_l2=float(self.params.cat_l2),
            min_data_per_group=float(self.params.min_data_per_group),
            max_cat_threshold=int(self.params.max_cat_threshold),
        )
        grown = grow_tree(
            backend,
            Xb,
            gq,
            hq,
            g_scale,
            h_scale,
            n_bins,
            bin_mapper,
            pen,
            tp,
            tree_index,
            gain_divisor=divisor,
        )
        if prune_weights is not None:
            pruned = prune_out_of_bag(
                grown, residual, prune_weights, float(self.params.oob_prune), xp
            )
            pred = pruned.prediction
            removed = pruned.removed_features
            if feature is not None:
                removed = np.full_like(removed, feature)
            np.add.at(self.pruned_splits, removed, 1)
            np.add.at(self.pruned_saving, removed, pruned.removed_saving)
        elif value_weights is None:
            pred = xp.zeros(m, dtype=RAW_DTYPE)
            grown.add_to(pred)
        else:
            pred = honest_leaf_values(grown, residual, value_weights, xp)
        tree = grown.tree
        if feature is not None:
            f = tree.arrays["feature"]
            f[f >= 0] = feature
        return tree, pred
