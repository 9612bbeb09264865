"""GT-GBM's group tests on the CPU: standardized columns, pseudo-features and their scores.

Owns the numba kernels of the group tests of ``gpufs.engine.group_testing`` (Han, Rao, Sorokina and
Subbian, "Scalable Feature Selection for (Multitask) Gradient Boosted Trees", AISTATS 2020,
Algorithm 2) on host arrays: the min-max standardized columns, the sums of a step's groups
(``CPUSteps``, the CPU backend's ``group_test_steps()``), their equal-width bins and
histograms, and the scan of one pseudo-feature histogram that scores both devices' steps
(``best_gains``). Shapes: standardized columns (n_features, n_samples) uint8; pseudo-features
(n_columns, n_rows) int32; ``gh`` (n_rows, 2) int64.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..._types import N_HIST_BINS, STANDARDIZED_MAX
from ...rules._group_scan import _best_gain, best_gains, concat_groups  # noqa: F401 (re-exported)

__all__ = [
    "best_gains",
    "pseudo_feature_bins",
    "pseudo_feature_extremes",
    "pseudo_feature_histograms",
    "standardize_extremes",
    "standardize_with",
]

#: Rows per task of the CPU sums (tasks go block by block: every group's sum over one block of
#: rows before the next block, so a block's slice of the columns is read from the cache by the
#: many groups that share columns; 1.1x to 1.7x faster than group by group, measured at
#: 6,000 x 5,000 and 80,000 x 2,000).
_ROW_BLOCK = 2048
#: Column x row additions below which the CPU kernels run on the calling thread only.
_PARALLEL_MIN_WORK = 1 << 20

# --- standardized columns ------------------------------------------------------------------


def _standardize_columns(X, block):
    """``standardize`` in the CPU layout: uint8 (n_features, n_samples)."""
    return standardize_with(X, *standardize_extremes(X))


def _float_rows(X):
    X = np.asarray(X)
    if X.dtype != np.float32 and X.dtype != np.float64:
        X = X.astype(np.float64)
    return np.ascontiguousarray(X)


def standardize_extremes(X):
    """Each column's minimum and maximum over its non-missing values, the extremes
    ``standardize`` scales by (a cluster's shards take the min and max of theirs).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float

    Returns
    -------
    lo, hi : ndarray of shape (n_features,), float64
        inf and -inf for a column without values.
    """
    X = _float_rows(X)
    lo = np.full(X.shape[1], np.inf)
    hi = np.full(X.shape[1], -np.inf)
    _column_extremes(X, lo, hi)
    return lo, hi


def standardize_with(X, lo, hi):
    """``standardize``'s CPU layout of the rows X at the column extremes ``lo``, ``hi``
    (:func:`standardize_extremes` of X, or of a whole table X is a part of).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float
    lo, hi : ndarray of shape (n_features,), float64

    Returns
    -------
    ndarray of shape (n_features, n_samples), uint8
    """
    X = _float_rows(X)
    out = np.empty((X.shape[1], X.shape[0]), np.uint8)
    _standardize_cpu(X, np.asarray(lo, np.float64), np.asarray(hi, np.float64), out)
    return out


@njit(parallel=True, cache=True, nogil=True)
def _column_extremes(X, lo, hi):
    """lo[f], hi[f] = min and max of column f's non-NaN values, in blocks of 64 columns."""
    n, d = X.shape
    for blk in prange((d + 63) // 64):
        a = blk * 64
        b = min(d, a + 64)
        for i in range(n):
            for f in range(a, b):
                x = np.float64(X[i, f])
                if x == x:
                    lo[f] = min(lo[f], x)
                    hi[f] = max(hi[f], x)


@njit(parallel=True, cache=True, nogil=True)
def _standardize_cpu(X, lo, hi, out):
    """``standardize`` on the CPU: X (n, d) float32/float64 C order -> out (d, n) uint8 at
    the column extremes lo, hi, in blocks of 64 columns (each row's slice of a block is
    contiguous)."""
    n, d = X.shape
    for blk in prange((d + 63) // 64):
        a = blk * 64
        b = min(d, a + 64)
        for i in range(n):
            for f in range(a, b):
                x = np.float64(X[i, f])
                sp = hi[f] - lo[f]
                if x == x and sp > 0 and sp < np.inf:
                    out[f, i] = np.uint8(np.rint((x - lo[f]) / sp * float(STANDARDIZED_MAX)))
                else:
                    out[f, i] = 0


@njit(inline="always")
def _bin_scale(nb, v_lo, v_hi):
    """The equal-width bin rule's factor: bin = trunc((v - v_lo) * nb / (v_hi - v_lo + 1)),
    computed as one float64 product with this factor (integer divisions per value cost 5x
    more), so bin <= nb - 1."""
    return nb / (np.float64(v_hi) - np.float64(v_lo) + 1.0)


# --- CPU kernels ---------------------------------------------------------------------------


@njit(inline="always")
def _sums_task(task, Qc, subsets, g_sub, g_lo, g_hi, out):
    """out[t, block] = sum of group t's columns over one block of rows; group t is
    ``subsets[g_sub[t], g_lo[t]:g_hi[t]]``. Eight columns at a time are added in uint16
    (8 * 255 < 2**16), then once into the int32 sum: a third of the time of adding one column
    at a time (measured), which is bound by the sum's loads and stores."""
    n_groups = g_sub.shape[0]
    b = task // n_groups
    t = task - b * n_groups
    lo = b * _ROW_BLOCK
    hi = min(Qc.shape[1], lo + _ROW_BLOCK)
    acc = out[t, lo:hi]
    acc[:] = 0
    members = subsets[g_sub[t]]
    k = g_lo[t]
    end = g_hi[t]
    while k + 8 <= end:
        c0 = Qc[members[k], lo:hi]
        c1 = Qc[members[k + 1], lo:hi]
        c2 = Qc[members[k + 2], lo:hi]
        c3 = Qc[members[k + 3], lo:hi]
        c4 = Qc[members[k + 4], lo:hi]
        c5 = Qc[members[k + 5], lo:hi]
        c6 = Qc[members[k + 6], lo:hi]
        c7 = Qc[members[k + 7], lo:hi]
        for r in range(hi - lo):
            acc[r] += (
                (np.uint16(c0[r]) + np.uint16(c1[r])) + (np.uint16(c2[r]) + np.uint16(c3[r]))
            ) + ((np.uint16(c4[r]) + np.uint16(c5[r])) + (np.uint16(c6[r]) + np.uint16(c7[r])))
        k += 8
    while k < end:
        col = Qc[members[k], lo:hi]
        for r in range(hi - lo):
            acc[r] += col[r]
        k += 1


@njit(parallel=True, cache=True, nogil=True)
def _sums_par(Qc, subsets, g_sub, g_lo, g_hi, out):
    n_blocks = (Qc.shape[1] + _ROW_BLOCK - 1) // _ROW_BLOCK
    for task in prange(g_sub.shape[0] * n_blocks):
        _sums_task(task, Qc, subsets, g_sub, g_lo, g_hi, out)


@njit(cache=True, nogil=True)
def _sums_ser(Qc, subsets, g_sub, g_lo, g_hi, out):
    n_blocks = (Qc.shape[1] + _ROW_BLOCK - 1) // _ROW_BLOCK
    for task in range(g_sub.shape[0] * n_blocks):
        _sums_task(task, Qc, subsets, g_sub, g_lo, g_hi, out)


@njit(inline="always")
def _bins_of(v, nb, bins):
    """bins[r] = the equal-width bin of v[r] (``_bin_scale``'s rule) over v's extremes.
    A loop of its own, which the compiler vectorizes: binning inside the histogram loop
    was 1.8x slower (measured)."""
    v_lo = v[0]
    v_hi = v_lo
    for r in range(v.shape[0]):
        v_lo = min(v_lo, v[r])
        v_hi = max(v_hi, v[r])
    _bins_at(v, nb, v_lo, v_hi, bins)


@njit(inline="always")
def _bins_at(v, nb, v_lo, v_hi, bins):
    """``_bins_of`` at given extremes (those of every row of the pseudo-feature)."""
    scale = _bin_scale(nb, v_lo, v_hi)
    for r in range(v.shape[0]):
        bins[r] = np.uint8(np.int32(np.float64(v[r] - v_lo) * scale))


@njit(inline="always")
def _histogram_gain(bins, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight):
    """The best gain of one binned pseudo-feature's histogram of the rows' (g, h)."""
    hist = np.zeros((N_HIST_BINS, 2), np.int64)
    for r in range(bins.shape[0]):
        b = bins[r]
        hist[b, 0] += gh[r, 0]
        hist[b, 1] += gh[r, 1]
    return _best_gain(hist, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight)


@njit(inline="always")
def _scan_column(c, P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out):
    """Score pseudo-feature c: bin P[c] (unless B, its bins, is given: B.shape[0] > 0),
    histogram it, keep the best gain."""
    if B.shape[0] > 0:
        bins = B[c]
    else:
        bins = np.empty(P.shape[1], np.uint8)
        _bins_of(P[c], nb, bins)
    out[c] = _histogram_gain(bins, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight)


@njit(parallel=True, cache=True, nogil=True)
def _scan_par(P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out):
    for c in prange(out.shape[0]):
        _scan_column(c, P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out)


@njit(cache=True, nogil=True)
def _scan_ser(P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out):
    for c in range(out.shape[0]):
        _scan_column(c, P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out)


@njit(parallel=True, cache=True, nogil=True)
def _bin_columns(P, nb, B):
    """B[c] = the bins of pseudo-feature P[c] (the per-fit first step, ``FirstStep``)."""
    for c in prange(P.shape[0]):
        _bins_of(P[c], nb, B[c])


@njit(parallel=True, cache=True, nogil=True)
def _pseudo_extremes(P, out):
    for c in prange(P.shape[0]):
        lo = np.int32(2147483647)
        hi = np.int32(-2147483648)
        for r in range(P.shape[1]):
            lo = min(lo, P[c, r])
            hi = max(hi, P[c, r])
        out[c, 0] = lo
        out[c, 1] = hi


@njit(parallel=True, cache=True, nogil=True)
def _bin_columns_at(P, nb, v_lo, v_hi, B):
    for c in prange(P.shape[0]):
        _bins_at(P[c], nb, v_lo[c], v_hi[c], B[c])


@njit(parallel=True, cache=True, nogil=True)
def _pseudo_histograms(B, gh, out):
    for c in prange(B.shape[0]):
        for r in range(B.shape[1]):
            b = B[c, r]
            out[c, b, 0] += gh[r, 0]
            out[c, b, 1] += gh[r, 1]


def pseudo_feature_extremes(P):
    """Each pseudo-feature's minimum and maximum over these rows (a part of the rows, on a
    cluster's shard: the driver takes the min and max over the shards).

    Parameters
    ----------
    P : ndarray of shape (n_columns, n_rows), int32

    Returns
    -------
    ndarray of shape (n_columns, 2), int32
        (min, max); (2**31 - 1, -2**31) for no rows.
    """
    out = np.empty((P.shape[0], 2), np.int32)
    _pseudo_extremes(P, out)
    return out


def pseudo_feature_histograms(P, gh, max_bins, v_lo, v_hi):
    """The histograms a search step scores, of these rows only: each pseudo-feature binned
    by ``_bins_of``'s rule at the extremes ``v_lo``, ``v_hi`` of all the rows, then its
    (g, h) sums per bin. Summed over every part of the rows (int64, exact) they are the
    histograms the step builds on the whole table.

    Parameters
    ----------
    P : ndarray of shape (n_columns, n_rows), int32, or uint8 bins
        The pseudo-features (or, uint8, their bins already: the per-fit first step's).
    gh : ndarray of shape (n_rows, 2), int64
    max_bins : int
    v_lo, v_hi : ndarray of shape (n_columns,), int32 (ignored for bins)

    Returns
    -------
    ndarray of shape (n_columns, max_bins, 2), int64
    """
    B = P if P.dtype == np.uint8 else pseudo_feature_bins(P, max_bins, v_lo, v_hi)
    out = np.zeros((B.shape[0], int(max_bins), 2), np.int64)
    _pseudo_histograms(B, np.ascontiguousarray(gh), out)
    return out


def pseudo_feature_bins(P, max_bins, v_lo, v_hi):
    """The equal-width bins of pseudo-features at given extremes (``_bins_of``'s rule).

    Parameters
    ----------
    P : ndarray of shape (n_columns, n_rows), int32
    max_bins : int
    v_lo, v_hi : ndarray of shape (n_columns,), int32
        Each pseudo-feature's minimum and maximum over all the rows.

    Returns
    -------
    ndarray of shape (n_columns, n_rows), uint8
    """
    B = np.empty(P.shape, np.uint8)
    _bin_columns_at(P, int(max_bins), np.asarray(v_lo, np.int32), np.asarray(v_hi, np.int32), B)
    return B


_NO_BINS = np.zeros((0, 0), np.uint8)


@njit(parallel=True, cache=True, nogil=True)
def _rest_par(prev, rows, both):
    """both[k + j] = prev[rows[j]] - both[j], j < k: the right halves, exactly."""
    k = rows.shape[0]
    for j in prange(k):
        a = prev[rows[j]]
        left = both[j]
        right = both[k + j]
        for r in range(right.shape[0]):
            right[r] = a[r] - left[r]


class CPUSteps:
    """The pseudo-features and scores of a search step on the CPU: the step's columns, left
    halves then right halves, (2k, n) int32, summed by ``_sums_*`` (a right half after the
    first step by ``_rest_par``: the kept group minus its left half), scored by ``_scan_*``.
    The CPU backend's ``group_test_steps()``."""

    standardize = staticmethod(_standardize_columns)

    def __init__(self, backend, Q, gh, p, scan):
        self.Q = Q
        self.gh = np.ascontiguousarray(gh)
        self.n = Q.shape[1]
        self.scan = scan
        self.parallel = backend._threads() > 1
        self.prev = None  # the previous step's columns
        self.row_of = np.zeros(p, np.int64)  # subset -> its kept group's row of ``prev``
        self.both = None

    def sums(self, subsets, groups, out=None):
        """int32 (n_groups, n): the pseudo-feature of each group (sub, lo, hi): the columns
        ``subsets[sub, lo:hi]``."""
        sub, lo, hi = groups
        if out is None:
            out = np.empty((sub.shape[0], self.n), np.int32)
        work = int((hi - lo).sum()) * self.n
        (_sums_par if self.parallel and work >= _PARALLEL_MIN_WORK else _sums_ser)(
            self.Q, subsets, sub, lo, hi, out
        )
        return out

    def bins(self, both):
        """uint8 (2k, n): each pseudo-feature's equal-width bins."""
        B = np.empty(both.shape, np.uint8)
        _bin_columns(both, self.scan[0], B)
        return B

    def columns(self, subsets, active, left, right, first=None):
        """The step's pseudo-features (2k, n) int32, left halves then right halves, and
        their bins (the per-fit first step's; else empty: binned when scored)."""
        k = active.shape[0]
        B = _NO_BINS
        if first is not None:  # the per-fit first step: sums and bins
            both, B = first.sums, first.bins
        elif right is not None:
            both = self.sums(subsets, concat_groups(left, right))
        else:
            both = np.empty((2 * k, self.n), np.int32)
            self.sums(subsets, left, both[:k])
            _rest_par(self.prev, self.row_of[active], both)
        self.both = both
        return both, B

    def step(self, subsets, active, left, right, first=None):
        k = active.shape[0]
        both, B = self.columns(subsets, active, left, right, first)
        gains = np.empty(2 * k, np.float64)
        parallel = self.parallel and both.size >= _PARALLEL_MIN_WORK // 4
        (_scan_par if parallel else _scan_ser)(both, B, self.gh, *self.scan, gains)
        return gains[:k], gains[k:]

    def keep(self, active, keep_left):
        j = np.arange(active.shape[0])
        self.row_of[active] = np.where(keep_left, j, j + active.shape[0])
        self.prev = self.both
