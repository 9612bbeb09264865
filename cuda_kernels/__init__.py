"""numba.cuda kernels of gpufs (shipped as ``gpufs.cuda_kernels``); no host logic here.

Every kernel is defined at module level with ``cuda.jit(cache=True)``: numba compiles it once per
argument-type signature and keeps the result on disk. Launch sizes, task tables and memory are
the business of ``gpufs.backends.gpu.GPUBackend``; each module's docstring gives the shapes,
dtypes and launch geometry its kernels expect.

  binning     bin_transform_kernel                  float X -> uint8 bins (the CPU's cut rule)
  histogram   histogram_kernel                      (g, h) sums per (node, feature, bin), int64
  split       split_per_feature_kernel,             best penalized split per node, the CPU's
              split_reduce_kernel                   formula and tie-breaking
  partition   partition_count_kernel, ...           stable left/right partition of node segments
  update      update_raw_kernel                     raw[row] += value of the row's leaf
  predict     predict_binned_kernel,                ensemble prediction, binned or raw features
              predict_raw_kernel
  objective   logistic_gradients_kernel, ...        per-row gradients / hessians and losses,
                                                    the exact formulas of ``gpufs._exactmath``

All of them also run under the numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), on numpy
arrays, which is how CI checks them against the CPU kernels.

Caching note: numba's on-disk cache is keyed on this package's source files only. The gain
formula is compiled in from ``gpufs._gain`` and the objectives' math from ``gpufs._exactmath``;
their content is part of the cache folder's name (``gpufs._numba_setup``), so editing them
recompiles these kernels.
"""
from .binning import bin_transform_kernel
from .histogram import FEATURE_WORDS, MAX_TILE_FEATURES, histogram_kernel
from .objective import (logistic_gradients_kernel, logistic_loss_kernel,
                        softmax_gradients_kernel, softmax_loss_kernel, squared_error_loss_kernel)
from .partition import (copy_back_kernel, partition_count_kernel, partition_offsets_kernel,
                        partition_scatter_kernel)
from .predict import predict_binned_kernel, predict_raw_kernel
from .split import split_per_feature_kernel, split_reduce_kernel
from .update import update_raw_kernel

__all__ = [
    "FEATURE_WORDS", "MAX_TILE_FEATURES",
    "bin_transform_kernel", "histogram_kernel", "split_per_feature_kernel",
    "split_reduce_kernel", "partition_count_kernel", "partition_offsets_kernel",
    "partition_scatter_kernel", "copy_back_kernel", "update_raw_kernel",
    "predict_binned_kernel", "predict_raw_kernel", "logistic_gradients_kernel",
    "softmax_gradients_kernel", "squared_error_loss_kernel", "logistic_loss_kernel",
    "softmax_loss_kernel",
]
