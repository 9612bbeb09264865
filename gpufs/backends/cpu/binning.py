"""The CPU's binning: float features to uint8 bins, and the binned matrix by column.

Owns ``_bin_transform`` (``gpufs.rules._gain.bin_of``, the cut rule both devices compile, and
its shorter forms ``bin_of_few`` / ``bin_of_one`` for features of few cut points),
``_columns_of`` (the column-major copy the partition and the column-wise histograms read) and
``small_int_counts`` (the value counts that let ``BinMapper.fit`` skip sorting columns of small
integers). The GPU's counterpart is ``cuda_kernels/binning.py``.
"""

import numpy as np
from numba import njit, prange

from ...rules._gain import FEW_CUTS
from ._device_fns import _bin_of, _bin_of_few, _bin_of_one

#: Rows per task of ``_columns_of``: a row is read whole and its bytes written to d columns,
#: so over a block the d output runs of 256 bytes (d x 4 cache lines) stay in L2.
COLUMN_ROWS = 256


@njit(parallel=True, cache=True, nogil=True)
def _columns_of(Xb, out):
    """out (d, n) uint8 = Xb (n, d) uint8 transposed, a block of rows at a time, each row read
    in order (2-2.5x faster than a feature at a time over the block's rows: 1M x 100, 172
    against 71 ms on one thread)."""
    n, d = Xb.shape
    for b in prange((n + COLUMN_ROWS - 1) // COLUMN_ROWS):
        lo = b * COLUMN_ROWS
        hi = min(n, lo + COLUMN_ROWS)
        for i in range(lo, hi):
            for f in range(d):
                out[f, i] = Xb[i, f]


#: Rows per task of ``_bin_transform``: a block of rows is binned a feature at a time, so the
#: feature's cut row (2 KiB) stays in L1 and the rows' searches, independent of each other,
#: overlap; 256 rows of 100 float32 values (100 KiB) stay in L2 between features.
BIN_ROWS = 256


@njit(cache=True, nogil=True)
def _bin_rows_few(X, cuts, out, lo, hi, f, n_cut):
    """``out[lo:hi, f]`` for a feature of at most ``FEW_CUTS`` cut points: ``bin_of_one``
    (one cut) or ``bin_of_few``, the same bins as ``bin_of`` in one or five probes instead of
    nine. A function of its own, not inlined into ``_bin_transform``'s loop: compiled there,
    the short searches were 2-3x slower (this 2-core box, one thread, ns per value: 8,000 x
    1,500 counts 13.3 -> 4.5, 8,000 x 1,397 flags 14.6 -> 2.4, 100,000 x 200 random
    integers 0..15 12.4 -> 4.4), while the full search stays where it is fastest, in the
    loop (compiled in a function of its own it was 12.2 -> 15.5 on 200,000 x 100 normal
    values)."""
    if n_cut <= 1:
        for i in range(lo, hi):
            out[i, f] = _bin_of_one(X[i, f], cuts, f)
    else:
        for i in range(lo, hi):
            out[i, f] = _bin_of_few(X[i, f], cuts, f)


@njit(parallel=True, cache=True, nogil=True)
def _bin_transform(X, cuts, n_cuts, out):
    """out (n, d) uint8 = ``bin_of`` of every X[i, f] (n, d) float32 or float64, with the
    cut matrix ``cuts`` (d, ``CUT_COLUMNS``) float64, +inf padded, and ``n_cuts`` (d,) int64
    each row's cut points; NaN -> MISSING_BIN. Features of at most ``FEW_CUTS`` cut points
    take ``_bin_rows_few``'s shorter searches, which give the same bins."""
    n, d = X.shape
    for b in prange((n + BIN_ROWS - 1) // BIN_ROWS):
        lo = b * BIN_ROWS
        hi = min(n, lo + BIN_ROWS)
        for f in range(d):
            if n_cuts[f] <= FEW_CUTS:
                _bin_rows_few(X, cuts, out, lo, hi, f, n_cuts[f])
            else:
                for i in range(lo, hi):
                    out[i, f] = _bin_of(X[i, f], cuts, f)


#: Values 0 .. SMALL_INT_VALUES - 1 are counted by ``small_int_counts``; any other value
#: (but NaN) sends its column to the sort.
SMALL_INT_VALUES = 256


@njit(cache=True, nogil=True)
def _count_small_ints(X, rows, cols, counts, n_nan, other):
    """``counts[j, v]`` += rows of X[:, cols[j]] equal to v (0 <= v < SMALL_INT_VALUES),
    ``n_nan[j]`` += its NaN rows, ``other[j]`` = True when it holds any other value. ``rows``
    (m,) int64: the rows read (empty: all). Row by row, the columns of a row read in order:
    X (n, d) C-ordered float32 or float64, so a row's columns share cache lines.
    No GIL: ``BinMapper.fit`` runs column blocks on Python threads."""
    m = rows.shape[0] if rows.shape[0] > 0 else X.shape[0]
    w = cols.shape[0]
    for ii in range(m):
        i = rows[ii] if rows.shape[0] > 0 else ii
        for j in range(w):
            x = X[i, cols[j]]
            if x != x:
                n_nan[j] += 1
            elif x >= 0.0 and x < SMALL_INT_VALUES:
                v = np.int64(x)  # in range, not NaN: the conversion is defined
                if v == x:
                    counts[j, v] += 1
                else:
                    other[j] = True
            else:
                other[j] = True


def small_int_counts(X, rows, cols):
    """How many rows of each listed column hold each small integer, when that is all they
    hold (the rest NaN).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64, C-ordered
    rows : ndarray of shape (m,), int64, or None
        The rows counted (None: all).
    cols : ndarray of shape (w,), int64
        The columns counted.

    Returns
    -------
    counts : ndarray of shape (w, SMALL_INT_VALUES), int64
        Rows per value 0 .. SMALL_INT_VALUES - 1 (exact: -0.0 counts as 0).
    n_nan : ndarray of shape (w,), int64
        NaN rows.
    small : ndarray of shape (w,), bool
        Whether the column holds nothing but NaN and those values (else its counts are
        partial and mean nothing).
    """
    w = cols.shape[0]
    counts = np.zeros((w, SMALL_INT_VALUES), np.int64)
    n_nan = np.zeros(w, np.int64)
    other = np.zeros(w, np.bool_)
    rows = np.empty(0, np.int64) if rows is None else np.ascontiguousarray(rows, np.int64)
    _count_small_ints(X, rows, np.ascontiguousarray(cols, np.int64), counts, n_nan, other)
    return counts, n_nan, ~other
