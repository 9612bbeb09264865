"""The rows of a distributed boosting fit, as the one boosting loop reads them.

Owns :class:`ShardRows`, the ``boosting.BoostingRows`` whose per-row data (target, weights,
raw scores, gradients, validation rows) stays in the shards of a
:class:`~gpufs.dask._group.ShardGroup`: ``gpufs.engine.boosting.fit_boosting`` runs a distributed
fit unchanged, with these rows and the driver's :class:`~gpufs.dask._backend.ClusterBackend`.
Each method gives the loop the bits :class:`~gpufs.engine.boosting.DeviceRows` gives on the same
rows in one process: the starting score from exact ``math.fsum`` parts, the losses from the
two-word fixed-point sums of ``quantize.exact_sum`` in two passes (the largest magnitude, then
the words at the global scales), and every per-row value from the same CPU kernels, row by
row.

Calls that return nothing the loop needs at once (the starting raw scores, snapshots,
validation predictions) are deferred to ride on the next call (``ShardGroup.defer``).
"""

from __future__ import annotations

import itertools
import math
import weakref

import numpy as np

from ..engine.boosting import BoostingRows
from ._backend import GradColumn, RawColumn, ShardedBins
from ._exact import fsum_from_parts, merge_stats, sum_from_words

__all__ = ["ShardRows", "predict_arrays"]

#: The tree arrays a shard's prediction reads.
_PREDICT_FIELDS = (
    "feature",
    "bin_threshold",
    "missing_left",
    "value",
    "tree_column",
    "is_categorical",
    "cat_bits",
)


def predict_arrays(ensemble, start, stop=None) -> dict:
    """The arrays of ``ensemble.trees[start:stop]`` that a shard's ``predict`` reads."""
    s = ensemble.stacked(start, stop)
    return {k: s[k] for k in _PREDICT_FIELDS}


class _Columns:
    """``G`` / ``Hs`` of a round: column k is a :class:`GradColumn` (the shards keep the
    values)."""

    def __init__(self, n):
        self.n = int(n)

    def __getitem__(self, k):
        return GradColumn(k, self.n)


class RawSnapshot:
    """A copy of the raw scores kept by every shard under ``token`` (a checkpoint's); the
    shards drop it once this handle is garbage."""

    def __init__(self, token):
        self.token = int(token)


_tokens = itertools.count()


class ShardRows(BoostingRows):
    """Training or validation rows held by a shard group.

    Parameters
    ----------
    group : ShardGroup
        Its shards hold the rows, the encoded target and the weights.
    n, d : int
        Rows and features.
    weighted : bool
        Whether the rows carry sample weights.
    backend : ClusterBackend or None
        The grower's backend of the training rows: a round's call brings every column's
        gradient extremes for it (None for validation rows).
    unit_hessian, divisor : bool
        The flags the fit's ``prepare_gradients`` passes (so the round's call computes the
        extremes it will ask for; any other flags cost a call of their own).
    """

    def __init__(self, group, n, d, weighted, backend=None, unit_hessian=False, divisor=False):
        self.group = group
        self.shape = (int(n), int(d))
        self.weighted = bool(weighted)
        #: the shards apply their own weights: nothing to pass to the backend
        self.w = None
        self.backend = backend
        self.flags = (bool(unit_hessian), bool(divisor))
        self._bins = ShardedBins(n, d)
        self._w_sum = None

    # --- exact sums over the shards ---------------------------------------------------------
    def _exact_sum(self, name, stats):
        """``quantize.exact_sum`` of the shards' stored vector ``name`` from its merged
        first-pass ``stats`` (second pass: the words at the global scales)."""
        n, m = stats[0], stats[1]
        if n == 0 or not (m > 0.0) or m == math.inf:
            return sum_from_words(stats, [])
        return sum_from_words(stats, self.group.call("words", name, m, n))

    def _weight_sum(self):
        """``quantize.exact_sum`` of the weights (computed once)."""
        if self._w_sum is None:
            self._w_sum = self._exact_sum("w", merge_stats(self.group.call("store_weights")))
        return self._w_sum

    def _mean_of(self, name, stats):
        """``quantize.exact_mean``: the exact sum of the stored vector ``name`` (already times
        w when weighted) over the exact sum of the weights, or over the row count."""
        merged = merge_stats(stats)
        total = self._exact_sum(name, merged)
        if self.weighted:
            return total / self._weight_sum()
        return total / merged[0] if merged[0] else math.nan

    # --- BoostingRows ------------------------------------------------------------------------
    def binned(self):
        return self._bins

    def init_score(self, objective):
        parts = self.group.call("init_parts", objective)
        means = []
        for c in range(len(parts[0][0])):
            num = fsum_from_parts(p[0][c] for p in parts)
            den = fsum_from_parts(p[1] for p in parts) if self.weighted else self.shape[0]
            means.append(num / den)
        return np.asarray(objective.init_score_from_means(means), dtype=np.float64)

    def start_raw(self, base):
        self.group.defer("init_raw", np.asarray(base, dtype=np.float64))

    def snapshot_raw(self):
        handle = RawSnapshot(next(_tokens))
        self.group.defer("snapshot_raw", handle.token)
        weakref.finalize(handle, self.group.defer, "drop_snapshot", handle.token)
        return handle

    def restore_raw(self, snapshot):
        self.group.defer("restore_raw", snapshot.token)

    def round_gradients(self, objective):
        if self.backend is not None:
            self.group.phase = f"tree {self.backend.tree_index + 1}, gradients"
        answers = self.group.call("round", objective.name, *self.flags)
        if self.backend is not None:
            self.backend.extremes = {
                (k, self.flags): [a[1][k] for a in answers] for k in range(len(answers[0][1]))
            }
        cols = _Columns(self.shape[0])
        return cols, cols, [a[0] for a in answers]

    def mean(self, terms):
        return self._mean_of("loss", terms)

    def raw_column(self, k):
        return RawColumn(k)

    def add_trees(self, ensemble, start, stop):
        self.group.defer("predict", predict_arrays(ensemble, start, stop))

    def loss(self, objective):
        self.group.phase = "the loss" if self.backend is not None else "the validation loss"
        return self._mean_of("loss", self.group.call("loss_terms", objective.name))
