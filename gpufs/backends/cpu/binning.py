"""The CPU's binning: float features to uint8 bins, and the binned matrix by column.

Owns ``_bin_transform`` (``gpufs.rules._gain.bin_of``, the cut rule both devices compile) and
``_columns_of`` (the column-major copy the partition and the column-wise histograms read).
The GPU's counterpart is ``cuda_kernels/binning.py``.
"""

from numba import njit, prange

from ._device_fns import ROW_BLOCK, _bin_of


@njit(parallel=True, cache=True)
def _columns_of(Xb, out):
    """out (d, n) = Xb (n, d) transposed, in blocks of rows so both sides stay in cache."""
    n, d = Xb.shape
    block = 1024
    for b in prange((n + block - 1) // block):
        lo = b * block
        hi = min(n, lo + block)
        for f in range(d):
            for i in range(lo, hi):
                out[f, i] = Xb[i, f]


@njit(parallel=True, cache=True)
def _bin_transform(X, cuts, n_cuts, out):
    """out[i, f] = number of cuts of feature f that are < X[i, f]; NaN -> MISSING_BIN."""
    n, d = X.shape
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for f in range(d):
                out[i, f] = _bin_of(X[i, f], cuts, f, n_cuts[f])
