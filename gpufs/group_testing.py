"""GT-GBM: candidate features by group testing and binary search (``split_search=
"group_testing"``).

Owns Algorithm 2 of Han, Rao, Sorokina and Subbian, "Scalable Feature Selection for
(Multitask) Gradient Boosted Trees" (AISTATS 2020, Section 4, Theorem 4.1) in histogram form:
the standardized columns, the random subsets, the binary searches over them, and the callable
(:class:`GroupTestSearch`) that a :class:`gpufs.penalties.PenaltyState` asks for each tree's
candidate set C.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""
from __future__ import annotations

import math
import time

import numpy as np
from numba import njit, prange

from ._device import namespace_of, to_host
from ._gain import candidate, parent_term
from ._types import N_HIST_BINS

__all__ = ["FirstStep", "GroupTestSearch", "best_gains", "draw_subsets",
           "group_test_candidates", "isolation_probability", "n_search_steps", "n_subsets",
           "pseudo_feature_bins", "pseudo_feature_extremes", "pseudo_feature_histograms",
           "pseudo_features_per_tree", "standardize", "standardize_extremes",
           "standardize_with", "standardized_values", "subset_size", "STANDARDIZED_MAX"]

#: Standardized columns are integers in [0, STANDARDIZED_MAX] (8 fractional bits).
STANDARDIZED_MAX = 255
#: Rows per task of the CPU sums (tasks go block by block: every group's sum over one block of
#: rows before the next block, so a block's slice of the columns is read from the cache by the
#: many groups that share columns; 1.1x to 1.7x faster than group by group, measured at
#: 6,000 x 5,000 and 80,000 x 2,000).
_ROW_BLOCK = 2048
#: Column x row additions below which the CPU kernels run on the calling thread only.
_PARALLEL_MIN_WORK = 1 << 20

_candidate = njit(inline="always")(candidate)
_parent_term = njit(inline="always")(parent_term)


# --- the sizes of Theorem 4.1 --------------------------------------------------------------

def n_subsets(s: int, delta: float) -> int:
    """Theorem 4.1's number of random subsets, ``ceil(e * s * log(s / delta))`` (1 for
    ``s = 1``: the one subset is every feature).

    Parameters
    ----------
    s : int >= 1
        The desired number of features.
    delta : float in (0, 1)

    Returns
    -------
    int
    """
    if s <= 1:
        return 1
    return int(math.ceil(math.e * s * math.log(s / delta)))


def subset_size(n_features: int, s: int) -> int:
    """Features per subset: ``floor(n_features / s)``, at least 1 (every feature for s = 1).

    Parameters
    ----------
    n_features, s : int

    Returns
    -------
    int
    """
    return max(1, int(n_features) // max(1, int(s)))


def n_search_steps(m: int) -> int:
    """Halvings of a binary search over ``m`` features: ``ceil(log2(m))`` (0 for m = 1).

    Parameters
    ----------
    m : int

    Returns
    -------
    int
    """
    return int(math.ceil(math.log2(m))) if m > 1 else 0


def pseudo_features_per_tree(n_features: int, s: int, delta: float) -> int:
    """Pseudo-features scored per tree: at most 2 per subset per step.

    Compare with ``n_features``, what the exact search scores per node: group testing pays off
    only when this is much smaller (small ``s``, large ``n_features``).

    Parameters
    ----------
    n_features : int
    s : int
        The desired number of features.
    delta : float in (0, 1)

    Returns
    -------
    int
    """
    m = subset_size(n_features, s)
    return 2 * n_subsets(s, delta) * n_search_steps(m)


def isolation_probability(n_features: int, s: int, p: int, m: int) -> float:
    """Probability that for every one of ``s`` given features some subset among ``p``
    independent uniform subsets of ``m`` features holds that feature and none of the others.

    Theorem 4.1 says ``p >= e s log(s / delta)`` subsets of size ``n_features / s`` make this
    at least ``1 - delta``. Exact value: a subset isolates a given feature with probability
    ``q = m/d * C(d - s, m - 1) / C(d - 1, m - 1)``; it isolates at most one feature, so by
    inclusion-exclusion P(all isolated) = sum_k (-1)^k C(s, k) (1 - k q)^p.

    Parameters
    ----------
    n_features, s, p, m : int

    Returns
    -------
    float
    """
    d = int(n_features)
    if m > d or s > d:
        raise ValueError("need m <= n_features and s <= n_features")
    # C(d - s, m - 1) / C(d - 1, m - 1) = prod_{j < m-1} (d - s - j) / (d - 1 - j)
    ratio = 1.0
    for j in range(m - 1):
        ratio *= max(0, d - s - j) / (d - 1 - j)
    q = m / d * ratio
    return float(sum((-1) ** k * math.comb(s, k) * (1.0 - k * q) ** p for k in range(s + 1)))


def draw_subsets(rng, n_features: int, s: int, delta: float) -> np.ndarray:
    """The random subsets of one tree.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_features, s : int >= 1
    delta : float in (0, 1)

    Returns
    -------
    int64 (p, m): p = ``n_subsets(s, delta)`` subsets of m = ``subset_size(n_features, s)``
    features, each uniform without replacement and in random order (row i is subset i, in
    the order its halves are taken); independent of each other.
    """
    p, m = n_subsets(s, delta), subset_size(n_features, s)
    if s <= 1:
        return rng.permutation(n_features).astype(np.int64)[None, :]
    return np.stack([rng.choice(n_features, m, replace=False) for _ in range(p)]).astype(
        np.int64)


# --- standardized columns ------------------------------------------------------------------

def standardize(X, backend, block: int = 64):
    """The min-max standardized columns of X in the layout ``backend``'s group tests read.

    Each value is ``rint((x - lo) / (hi - lo) * 255)`` with lo and hi the column's minimum and
    maximum (0 for missing values and constant columns): one subtraction, one division, one
    multiplication and a rounding, in float64, so numpy, numba and cupy give the same integers.

    Parameters
    ----------
    X : float (n_samples, n_features), numpy or cupy (the backend's device)
    backend : CPUBackend or GPUBackend
    block : int
        Columns converted to float64 at a time on the GPU (bounds the temporary memory).

    Returns
    -------
    CPU: uint8 (n_features, n_samples), a column per row (the CPU kernels add whole columns).
    GPU: float32 (n_samples, n_features), integer-valued (the operand of one matrix product
    per search step; float32 holds every partial sum exactly while it is below 2**24, i.e. for
    groups of up to 65,793 features).
    """
    return backend.group_test_steps().standardize(X, block)


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


def _standardize_float32(X, block):
    """``standardize`` in the matrix-product layout: float32 (n_samples, n_features)."""
    xp = namespace_of(X)
    n, d = X.shape
    out = xp.empty((n, d), np.float32)
    for a in range(0, d, block):
        b = min(d, a + block)
        x = xp.asarray(X[:, a:b], dtype=np.float64)
        nan = xp.isnan(x)
        lo = xp.min(xp.where(nan, xp.inf, x), axis=0)
        hi = xp.max(xp.where(nan, -xp.inf, x), axis=0)
        span = hi - lo
        ok = xp.isfinite(span) & (span > 0)
        z = (x - xp.where(ok, lo, 0.0)[None, :]) / xp.where(ok, span, 1.0)[None, :]
        q = xp.rint(z * float(STANDARDIZED_MAX))
        out[:, a:b] = xp.where(nan | ~ok[None, :], 0.0, q).astype(np.float32)
    return out


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
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
                    out[f, i] = np.uint8(np.rint((x - lo[f]) / sp * 255.0))
                else:
                    out[f, i] = 0


def standardized_values(Q) -> np.ndarray:
    """The standardized values on the host, from either layout of ``standardize``.

    Parameters
    ----------
    Q : ndarray
        ``standardize``'s result (CPU or GPU layout).

    Returns
    -------
    ndarray of shape (n_samples, n_features), uint8
    """
    Q = to_host(Q)
    return np.ascontiguousarray(Q.T) if Q.dtype == np.uint8 else Q.astype(np.uint8)


# --- the scan of one pseudo-feature histogram (both devices' results go through it) ---------

@njit(inline="always")
def _best_gain(hist, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight):
    """Best gain of the thresholds 'bin <= b', b < nb - 1, of one histogram (int64 (>= nb, 2)
    of (g, h) sums); -inf when no threshold leaves both children a valid hessian."""
    G = G_q * g_inv
    H = H_q * h_inv
    parent = _parent_term(G, H, reg_lambda)
    best = -math.inf
    gl = hist[0, 0] - hist[0, 0]
    hl = gl
    for b in range(nb - 1):
        if b > 0 and hist[b, 0] == 0 and hist[b, 1] == 0:
            continue            # same left sums as b - 1, which scored first: cannot win
        gl += hist[b, 0]
        hl += hist[b, 1]
        gain, score = _candidate(gl, hl, H_q, G, H, parent, g_inv, h_inv, reg_lambda, 1.0,
                                 min_child_weight, 0.0)
        if score > best:
            best = gain
    return best


@njit(cache=True)
def _best_gains_of_histograms(hist, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight,
                              out):
    """``_best_gain`` of every column of one node's histograms (n_cols, 256, 2) int64."""
    for c in range(hist.shape[0]):
        out[c] = _best_gain(hist[c], nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight)


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
            acc[r] += (((np.uint16(c0[r]) + np.uint16(c1[r]))
                        + (np.uint16(c2[r]) + np.uint16(c3[r])))
                       + ((np.uint16(c4[r]) + np.uint16(c5[r]))
                          + (np.uint16(c6[r]) + np.uint16(c7[r]))))
        k += 8
    while k < end:
        col = Qc[members[k], lo:hi]
        for r in range(hi - lo):
            acc[r] += col[r]
        k += 1


@njit(parallel=True, cache=True)
def _sums_par(Qc, subsets, g_sub, g_lo, g_hi, out):
    n_blocks = (Qc.shape[1] + _ROW_BLOCK - 1) // _ROW_BLOCK
    for task in prange(g_sub.shape[0] * n_blocks):
        _sums_task(task, Qc, subsets, g_sub, g_lo, g_hi, out)


@njit(cache=True)
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
def _scan_column(c, P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight,
                 out):
    """Score pseudo-feature c: bin P[c] (unless B, its bins, is given: B.shape[0] > 0),
    histogram it, keep the best gain."""
    if B.shape[0] > 0:
        bins = B[c]
    else:
        bins = np.empty(P.shape[1], np.uint8)
        _bins_of(P[c], nb, bins)
    out[c] = _histogram_gain(bins, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda,
                             min_child_weight)


@njit(parallel=True, cache=True)
def _scan_par(P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out):
    for c in prange(out.shape[0]):
        _scan_column(c, P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight,
                     out)


@njit(cache=True)
def _scan_ser(P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out):
    for c in range(out.shape[0]):
        _scan_column(c, P, B, gh, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight,
                     out)


@njit(parallel=True, cache=True)
def _bin_columns(P, nb, B):
    """B[c] = the bins of pseudo-feature P[c] (the per-fit first step, ``FirstStep``)."""
    for c in prange(P.shape[0]):
        _bins_of(P[c], nb, B[c])


@njit(parallel=True, cache=True)
def _pseudo_extremes(P, out):
    for c in prange(P.shape[0]):
        lo = np.int32(2147483647)
        hi = np.int32(-2147483648)
        for r in range(P.shape[1]):
            lo = min(lo, P[c, r])
            hi = max(hi, P[c, r])
        out[c, 0] = lo
        out[c, 1] = hi


@njit(parallel=True, cache=True)
def _bin_columns_at(P, nb, v_lo, v_hi, B):
    for c in prange(P.shape[0]):
        _bins_at(P[c], nb, v_lo[c], v_hi[c], B[c])


@njit(parallel=True, cache=True)
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
    _bin_columns_at(P, int(max_bins), np.asarray(v_lo, np.int32), np.asarray(v_hi, np.int32),
                    B)
    return B


def best_gains(hist, scan):
    """The best threshold gain of each pseudo-feature histogram, as a search step scores it.

    Parameters
    ----------
    hist : ndarray of shape (n_columns, >= max_bins, 2), int64
    scan : tuple
        (max_bins, G_q, H_q, 1 / g_scale, 1 / h_scale, reg_lambda, min_child_weight).

    Returns
    -------
    ndarray of shape (n_columns,), float64
    """
    gains = np.empty(hist.shape[0], np.float64)
    _best_gains_of_histograms(np.ascontiguousarray(hist), *scan, gains)
    return gains


_NO_BINS = np.zeros((0, 0), np.uint8)


def _cat(a, b):
    """Two groups' tables (sub, lo, hi), one after the other."""
    return tuple(np.concatenate([x, y]) for x, y in zip(a, b))


@njit(parallel=True, cache=True)
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
        self.prev = None                    # the previous step's columns
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
            self.Q, subsets, sub, lo, hi, out)
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
        if first is not None:                   # the per-fit first step: sums and bins
            both, B = first.sums, first.bins
        elif right is not None:
            both = self.sums(subsets, _cat(left, right))
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


class DeviceSteps:
    """The same on the GPU backend: the pseudo-features of a step are ONE matrix product
    ``Q @ I`` (float32 (n, d) times the (d, n_groups) 0/1 indicator of the groups; cuBLAS,
    exact because every partial sum is an integer below 2**24), binned with array operations,
    histogrammed with the backend's histogram kernel, and scored on the host by the same
    compiled scan as the CPU's. Under the CUDA simulator the array module is numpy. The GPU
    backend's ``group_test_steps()``."""

    standardize = staticmethod(_standardize_float32)

    def __init__(self, backend, Q, gh, p, scan):
        self.backend = backend
        self.xp = backend.xp
        self.Q = Q
        self.gh = gh
        self.n, self.d = Q.shape
        self.scan = scan
        self.kept = self.xp.zeros((self.n, p), np.int64)
        self.rows = self.xp.arange(self.n, dtype=np.int32)
        self.left = self.right = None

    def sums(self, subsets, groups):
        """int64 (n, n_groups): the pseudo-feature of each group (sub, lo, hi)."""
        xp = self.xp
        sub, lo, hi = groups
        pos = np.arange(subsets.shape[1])
        inside = (pos >= lo[:, None]) & (pos < hi[:, None])          # (n_groups, m)
        cols, at = np.nonzero(inside)
        ind = xp.zeros((self.d, sub.shape[0]), np.float32)
        ind[xp.asarray(subsets[sub[cols], at]), xp.asarray(cols)] = 1.0
        return xp.matmul(self.Q, ind).astype(np.int64)

    def bins(self, both):
        """uint8 (n, 2k): ``_bins_of``'s rule, elementwise (the same float64 operations)."""
        xp = self.xp
        nb = self.scan[0]
        v_lo = both.min(axis=0)
        scale = nb / (both.max(axis=0).astype(np.float64) - v_lo.astype(np.float64) + 1.0)
        return xp.ascontiguousarray(((both - v_lo).astype(np.float64) * scale).astype(np.uint8))

    def step(self, subsets, active, left, right, first=None):
        xp = self.xp
        k = active.shape[0]
        if first is not None:
            both, bins = first.sums, first.bins
        else:
            if right is not None:
                both = self.sums(subsets, _cat(left, right))
            else:
                left = self.sums(subsets, left)
                both = xp.concatenate([left, self.kept[:, xp.asarray(active)] - left], axis=1)
            bins = self.bins(both)
        self.left, self.right = both[:, :k], both[:, k:]
        hist = to_host(self.backend.histograms(bins, self.gh, self.rows, np.zeros(1, np.int64),
                                               np.array([self.n], np.int64),
                                               np.zeros(1, np.int64)))
        gains = np.empty(2 * k, np.float64)
        _best_gains_of_histograms(hist[0], *self.scan, gains)
        return gains[:k], gains[k:]

    def keep(self, active, keep_left):
        xp = self.xp
        a = xp.asarray(active)
        self.kept[:, a] = xp.where(xp.asarray(keep_left)[None, :], self.left, self.right)


class FirstStep:
    """The first step of every search, computed once (``gt_subsets="per_fit"``): the
    pseudo-features of both halves of every subset and their bins depend on the data and the
    subsets only, not on the gradients (the paper's precomputation, Section 4.2).

    Parameters
    ----------
    backend, Q : as for ``group_test_candidates``
    subsets : int64 (p, m), m >= 2
    max_bins : int

    Attributes
    ----------
    sums : the 2p pseudo-features (left halves, then right halves), in the backend's layout
    bins : uint8, their bins, in the same layout
    """

    def __init__(self, backend, Q, subsets, max_bins):
        p, m = subsets.shape
        steps = backend.group_test_steps()(backend, Q, None, p, (int(max_bins),))
        every, zero, mid, end = (np.arange(p), np.zeros(p, np.int64),
                                 np.full(p, m // 2, np.int64), np.full(p, m, np.int64))
        self.sums = steps.sums(subsets, _cat((every, zero, mid), (every, mid, end)))
        self.bins = steps.bins(self.sums)


def group_test_candidates(backend, Q, gh, G_q, H_q, g_scale, h_scale, subsets, *,
                          max_bins=255, reg_lambda=1.0, min_child_weight=1e-3, first=None,
                          trace=None):
    """The binary searches of all subsets over the rows of ``gh``: where each ends.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Q : ``standardize``'s result for ``backend`` (the same rows as ``gh``, in order)
    gh : int64 (n, 2) fixed-point (gradient, hessian) on the backend's device
    G_q, H_q : int, the exact sums of ``gh``'s columns
    g_scale, h_scale : float, the power-of-two scales of ``gh``'s columns
    subsets : int64 (p, m), ``draw_subsets``'s result
    max_bins : int in [2, 255], equal-width bins of each pseudo-feature
    reg_lambda, min_child_weight : as in the tree's split search
    first : FirstStep or None
        The first step's pseudo-features and bins, computed once for these subsets (the
        same numbers this function would compute).
    trace : list or None
        When given, one dict per step is appended: ``active`` (the subsets searched),
        ``left`` and ``right`` (their groups), ``gain_left`` and ``gain_right`` (float64).

    Returns
    -------
    int64 (p,): the feature each subset's search ended on (subset order; may repeat).
    """
    p, m = subsets.shape
    scan = (int(max_bins), int(G_q), int(H_q), 1.0 / float(g_scale), 1.0 / float(h_scale),
            float(reg_lambda), float(min_child_weight))
    steps = backend.group_test_steps()(backend, Q, gh, p, scan)
    lo = np.zeros(p, np.int64)
    hi = np.full(p, m, np.int64)
    active = np.arange(p) if m > 1 else np.zeros(0, np.int64)
    is_first = True
    while active.size:
        mid = (lo + hi) // 2
        left = (active, lo[active], mid[active])
        right = (active, mid[active], hi[active])
        gl, gr = steps.step(subsets, active, left, right if is_first else None,
                            first if is_first else None)
        keep_left = gl >= gr          # ties keep the left half
        steps.keep(active, keep_left)
        if trace is not None:
            trace.append(dict(active=active.copy(),
                              left=[subsets[i, a:b] for i, a, b in zip(*left)],
                              right=[subsets[i, a:b] for i, a, b in zip(*right)],
                              gain_left=gl.copy(), gain_right=gr.copy()))
        hi[active] = np.where(keep_left, mid[active], hi[active])
        lo[active] = np.where(keep_left, lo[active], mid[active])
        active = active[hi[active] - lo[active] > 1]
        is_first = False
    return subsets[np.arange(p), lo]


class GroupTestSearch:
    """The candidate search of a GT-GBM fit: called by the penalty state before each tree.

    Parameters
    ----------
    Q : ``standardize(X, backend)`` of the training rows that have a positive weight
    s : int >= 1, the desired number of features (Theorem 4.1's s)
    delta : float in (0, 1)
    seed : int, seeds the subsets
    max_bins : int in [2, 255], bins of each pseudo-feature
    rows : int64 array or None
        The rows of the tree's gradients that ``Q`` holds (those of positive weight; rows of
        weight 0 are not training data, as for the cut points), on the fitting device; None:
        all rows.
    subsets : {"per_tree", "per_fit"}
        "per_tree": every tree draws its own subsets, from (seed, tree index) (Algorithm 2,
        line 2, inside the tree-fitting subroutine). "per_fit": one draw, from (seed,), for
        every tree, and the first step of every search (both halves of every subset: two
        thirds of the summing and a ninth of the binning) computed once (the paper's
        precomputation, Section 4.2 and Table 1).

    Attributes
    ----------
    seconds : float
        Wall time spent in the group tests so far (``per_fit``'s precomputation included).
    """

    def __init__(self, Q, s, delta, seed, max_bins=255, rows=None, subsets="per_tree"):
        if subsets not in ("per_tree", "per_fit"):
            raise ValueError(f"subsets must be 'per_tree' or 'per_fit', got {subsets!r}.")
        self.Q = Q
        self.s = int(s)
        self.delta = float(delta)
        self.seed = int(seed)
        self.max_bins = int(max_bins)
        self.rows = rows
        self.per_fit = subsets == "per_fit"
        self.seconds = 0.0
        self._first = None

    @property
    def n_features(self) -> int:
        """The number of features the search runs over."""
        return int(self.Q.shape[0] if self.Q.dtype == np.uint8 else self.Q.shape[1])

    def subsets(self, tree_index: int) -> np.ndarray:
        """The subsets of a tree.

        Parameters
        ----------
        tree_index : int

        Returns
        -------
        ndarray of shape (p, m), int64
            ``draw_subsets`` seeded by (seed, tree), or by (seed,) for every tree with
            ``per_fit``.
        """
        key = [self.seed] if self.per_fit else [self.seed, int(tree_index)]
        return draw_subsets(np.random.default_rng(key), self.n_features, self.s, self.delta)

    def __call__(self, backend, gh, G_q, H_q, g_scale, h_scale, tree_params, tree_index):
        """int64 sorted distinct candidate features of tree ``tree_index``.

        ``gh`` (n, 2) int64 and its sums ``G_q``, ``H_q`` are the tree's fixed-point
        gradients over every row (weights applied); ``tree_params`` a
        ``grower.TreeParams``."""
        t0 = time.perf_counter()
        if self.rows is not None:
            gh = gh[self.rows]        # rows of weight 0 hold (0, 0): the sums do not change
        subsets = self.subsets(tree_index)
        first = None
        if self.per_fit and subsets.shape[1] > 1:
            if self._first is None:
                self._first = FirstStep(backend, self.Q, subsets, self.max_bins)
            first = self._first
        found = group_test_candidates(
            backend, self.Q, gh, G_q, H_q, g_scale, h_scale, subsets,
            max_bins=self.max_bins, reg_lambda=tree_params.reg_lambda,
            min_child_weight=tree_params.min_child_weight, first=first)
        self.seconds += time.perf_counter() - t0
        return np.unique(found)
