"""GT-GBM's group tests on a cluster: the search steps of ``gpufs.engine.group_testing``, per shard.

Owns :class:`ClusterSteps`, what :class:`~gpufs.dask._backend.ClusterBackend`'s
``group_test_steps()`` gives ``group_testing.group_test_candidates`` and ``FirstStep``, which
run unchanged on the driver. The standardized columns are made on the shards at the column
extremes of all the training rows (each shard's min and max, merged). A step is two calls:
each shard sums its rows' pseudo-features (the CPU's blocked sums) and returns their extremes;
with the merged extremes each shard bins them by the one equal-width rule and returns their
(g, h) histograms, int64, which the driver sums (exact, any order) and scores with the CPU's
compiled scan. The kept halves ride on the next call. So the candidates, and the trees, are
those of one process.
"""

from __future__ import annotations

import numpy as np

from .._types import N_HIST_BINS
from ..engine.group_testing import best_gains

__all__ = ["ClusterSteps", "ShardedRaw", "ShardedStandardized"]


class ShardedRaw:
    """The training rows' float columns, held by the shards of ``group`` (``standardize``'s
    input on a cluster)."""

    def __init__(self, group, d):
        self.group, self.shape = group, (-1, int(d))


class ShardedStandardized:
    """The standardized columns the shards keep: only the layout (``dtype`` uint8, shape
    (n_features, n_rows)) lives here, as ``GroupTestSearch`` reads it."""

    dtype = np.dtype(np.uint8)

    def __init__(self, d, n):
        self.shape = (int(d), int(n))


def standardize_on_shards(X, block=64):
    """``group_testing.standardize`` of the shards' training rows of positive weight."""
    group = X.group
    group.phase = "standardizing the columns (group testing)"
    got = group.call("gt_column_extremes")
    lo = np.min([g[0] for g in got], axis=0)
    hi = np.max([g[1] for g in got], axis=0)
    n = sum(int(g[2]) for g in got)
    group.call("gt_standardize", lo, hi)
    return ShardedStandardized(X.shape[1], n)


def _merged_extremes(got):
    return (
        np.min([g[:, 0] for g in got], axis=0).astype(np.int32),
        np.max([g[:, 1] for g in got], axis=0).astype(np.int32),
    )


class _FirstOnShards:
    """``FirstStep``'s sums and bins, kept by the shards."""


class ClusterSteps:
    """``group_testing``'s step interface (``CPUSteps``, ``DeviceSteps``) on a shard group.

    Parameters
    ----------
    backend : ClusterBackend
    Q : ShardedStandardized
    gh : object or None
        The tree's fixed-point gradients (the shards keep them); None for ``FirstStep``.
    p : int
        Subsets.
    scan : tuple
        (max_bins, G_q, H_q, 1 / g_scale, 1 / h_scale, reg_lambda, min_child_weight).
    """

    standardize = staticmethod(standardize_on_shards)

    def __init__(self, backend, Q, gh, p, scan):
        self.group = backend.group
        self.scan = scan
        self.nb = int(scan[0])
        if gh is not None:  # a search: its state starts on the shards with the next call
            self.group.defer("gt_begin", int(p), tuple(scan))

    def _phase(self, what):
        self.group.phase = f"{self.group.phase.split(', ')[0]}, group tests ({what})"

    def sums(self, subsets, groups):
        """The first step of every search (``FirstStep``): the shards keep the sums."""
        self._phase("first step")
        out = _FirstOnShards()
        out.extremes = _merged_extremes(self.group.call("gt_first_sums", subsets, groups))
        return out

    def bins(self, first):
        """... and their bins at the merged extremes."""
        self.group.defer("gt_first_bins", self.nb, *first.extremes)
        return first

    def step(self, subsets, active, left, right, first=None):
        k = active.shape[0]
        self._phase("search step")
        if first is None:
            got = self.group.call("gt_sums", subsets, active, left, right)
            v_lo, v_hi = _merged_extremes(got)
        else:  # the shards binned the first step's sums already
            self.group.defer("gt_sums", subsets, active, left, right, True)
            v_lo = v_hi = None
        parts = self.group.call("gt_hist", self.nb, v_lo, v_hi)
        hist = np.zeros((2 * k, N_HIST_BINS, 2), np.int64)
        hist[:, : self.nb] = sum(parts[1:], parts[0])
        gains = best_gains(hist, self.scan)
        return gains[:k], gains[k:]

    def keep(self, active, keep_left):
        self.group.defer("gt_keep", np.asarray(active), np.asarray(keep_left))
