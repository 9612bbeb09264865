"""numba.cuda kernels of gpufs (shipped as ``gpufs.cuda_kernels``); no host logic here.

Every kernel is defined at module level with ``cuda.jit(cache=True)``: numba compiles it once per
argument-type signature and keeps the result on disk. Launch sizes, task tables and memory are
the business of ``gpufs.backends.gpu.backend.GPUBackend``; each module's docstring gives the shapes,
dtypes and launch geometry its kernels expect.

  binning     bin_transform_kernel                  float X -> uint8 bins (the CPU's cut rule)
  histogram   histogram_bounded_kernel,             (g, h) sums per (node, histogram slot),
              histogram_kernel                      int64, in the compact layout (bounded
                                                    fixed point; any int64: split words)
  split       search_kernel                         siblings' histograms by exact subtraction,
                                                    penalized split search, and (its last
                                                    block) the level's decisions (the shared
                                                    ``gpufs.rules._level`` rule)
  partition   partition_count_kernel,               stable left/right partition of the split
              partition_scatter_kernel              nodes' segments (block-level scans), the
                                                    children's segments, the next build table
  update      update_leaves_kernel                  raw[row] += value of the row's leaf
  predict     predict_binned_kernel,                ensemble prediction, binned or raw features
              predict_raw_kernel
  objective   round_*_kernel, extremes_kernel,      one round's gradients and losses, the
              quantize_kernel, ...                  fixed point of ``quantize``; the exact
                                                    formulas of ``gpufs.rules._exactmath``

All of them also run under the numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), on numpy
arrays, which is how CI checks them against the CPU kernels.

Caching note: numba's on-disk cache is keyed on this package's source files only. The gain
formula is compiled in from ``gpufs.rules._gain`` and the objectives' math from
``gpufs.rules._exactmath``; their content is part of the cache folder's name
(``gpufs._numba_setup``), so editing them recompiles these kernels.
"""

from .binning import bin_transform_kernel
from .histogram import (
    MAX_BOUNDED_TILE_SLOTS,
    MAX_TILE_SLOTS,
    bounded_tile_words,
    histogram_bounded_kernel,
    histogram_kernel,
    tile_words,
    tiles,
)
from .objective import (
    REDUCE_BLOCK,
    extremes_kernel,
    logistic_gradients_kernel,
    logistic_loss_kernel,
    quantize_kernel,
    round_logistic_kernel,
    round_softmax_kernel,
    round_squared_error_kernel,
    softmax_gradients_kernel,
    softmax_loss_kernel,
    squared_error_loss_kernel,
)
from .partition import partition_count_kernel, partition_scatter_kernel
from .predict import predict_binned_kernel, predict_raw_kernel
from .split import MAX_SEARCH_THREADS, OUT_FIELDS, search_kernel
from .update import update_leaves_kernel

__all__ = [
    "MAX_SEARCH_THREADS",
    "MAX_TILE_SLOTS",
    "MAX_BOUNDED_TILE_SLOTS",
    "OUT_FIELDS",
    "REDUCE_BLOCK",
    "tile_words",
    "bounded_tile_words",
    "tiles",
    "bin_transform_kernel",
    "histogram_kernel",
    "histogram_bounded_kernel",
    "search_kernel",
    "partition_count_kernel",
    "partition_scatter_kernel",
    "update_leaves_kernel",
    "predict_binned_kernel",
    "predict_raw_kernel",
    "logistic_gradients_kernel",
    "softmax_gradients_kernel",
    "squared_error_loss_kernel",
    "logistic_loss_kernel",
    "softmax_loss_kernel",
    "round_squared_error_kernel",
    "round_logistic_kernel",
    "round_softmax_kernel",
    "extremes_kernel",
    "quantize_kernel",
]
