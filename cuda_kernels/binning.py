"""Bin transform: float features -> uint8 bins, the rule of ``gpufs.engine.binning``.

``bin_transform_kernel(X, cuts, out)``
  X       (n, d) float32 or float64, any strides (NaN = missing). float32 values are widened to
          float64 before the comparison, exactly as the CPU's ``astype(float64)`` does, so
          float32 input needs no float64 copy of the matrix.
  cuts    (d, 254) float64 cut points per feature, padded with +inf (``CUT_COLUMNS``)
  out     (n, d) uint8: number of cuts of feature f that are < X[i, f]; NaN -> MISSING_BIN (255)

Launch: 1-D grid-stride loop over the n * d elements in row-major order, so neighbouring
threads read neighbouring elements of a row (coalesced for C-ordered X and out). Any grid works;
the backend sizes it.
"""

from numba import cuda

from ._device_fns import bin_of


@cuda.jit(cache=True)
def bin_transform_kernel(X, cuts, out):
    n = X.shape[0]
    d = X.shape[1]
    total = n * d
    e = cuda.grid(1)
    stride = cuda.gridsize(1)
    while e < total:
        i = e // d
        f = e - i * d
        out[i, f] = bin_of(X[i, f], cuts, f)
        e += stride
