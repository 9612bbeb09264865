"""The CPU's binning: float features to uint8 bins, and the binned matrix by column.

Owns ``_bin_transform`` (``gpufs.rules._gain.bin_of``, the cut rule both devices compile),
``bin_rows`` (its one caller: any float X, float64 row chunks at a time), ``float64_rows`` (how
every host kernel that reads raw X gets C-order float64 rows without a float64 copy of X) and
``_columns_of`` (the column-major copy the partition and the column-wise histograms read).
The GPU's counterpart is ``cuda_kernels/binning.py``.
"""

import numpy as np
from numba import njit, prange

from ..._types import CHUNK_ELEMENTS_FLOAT64, read_only
from ._device_fns import _bin_of

#: Rows per task of ``_columns_of``: a row is read whole and its bytes written to d columns,
#: so over a block the d output runs of 256 bytes (d x 4 cache lines) stay in L2.
COLUMN_ROWS = 256


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
def _bin_transform(X, cuts, out):
    """out (n, d) uint8 = ``bin_of`` of every X[i, f] (n, d) float64, C order, read-only
    (``bin_rows`` passes nothing else, so it compiles once), with the cut matrix ``cuts``
    (d, ``CUT_COLUMNS``) float64, +inf padded; NaN -> MISSING_BIN."""
    n, d = X.shape
    for b in prange((n + BIN_ROWS - 1) // BIN_ROWS):
        hi = min(n, (b + 1) * BIN_ROWS)
        for f in range(d):
            for i in range(b * BIN_ROWS, hi):
                out[i, f] = _bin_of(X[i, f], cuts, f)


def float64_rows(X, chunk_elements=None):
    """X's rows as read-only C-order float64 arrays: ``(rows, chunk)`` pairs, ``chunk`` equal
    to ``X[rows]``, covering X in order.

    A C-order float64 X is one chunk, X itself (no copy). Anything else (float32, F order,
    strided, another numeric dtype) comes in row chunks of about ``chunk_elements``
    elements, each converted on its own: float32 -> float64 is exact, so a kernel compiled
    once for float64 reads the same values, and no float64 copy of the whole X is made.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        numpy, numeric.
    chunk_elements : int or None, default=None
        None: ``CHUNK_ELEMENTS_FLOAT64``.

    Yields
    ------
    rows : slice
    chunk : ndarray of shape (rows.stop - rows.start, n_features), float64, C order, read-only
    """
    X = np.asarray(X)
    n, d = X.shape
    if X.dtype == np.float64 and X.flags.c_contiguous:
        yield slice(0, n), read_only(X)
        return
    if chunk_elements is None:
        chunk_elements = CHUNK_ELEMENTS_FLOAT64
    step = max(1, chunk_elements // max(1, d))
    for lo in range(0, n, step):
        rows = slice(lo, min(n, lo + step))
        yield rows, read_only(np.ascontiguousarray(X[rows], dtype=np.float64))


def bin_rows(X, cuts, out):
    """out (n, d) uint8 = the bins of X (n, d), any float dtype and order, with the cut
    matrix ``cuts`` (d, ``CUT_COLUMNS``) float64: ``_bin_transform`` on ``float64_rows``'
    chunks (the same bins as on a float64 copy of X, without one).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    cuts : ndarray of shape (n_features, CUT_COLUMNS), float64
    out : ndarray of shape (n_samples, n_features), uint8, C order

    Returns
    -------
    out
    """
    for rows, chunk in float64_rows(X):
        _bin_transform(chunk, cuts, out[rows])
    return out
