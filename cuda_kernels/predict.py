"""Batch prediction of an ensemble, from binned or from raw features.

``predict_binned_kernel(Xb, feature, bin_threshold, missing_left, value, tree_column, out)``
``predict_raw_kernel(X, feature, threshold, missing_left, value, tree_column, out)``
  Xb / X       (n, d) uint8 bins / float32 or float64 values (NaN = missing)
  feature      (n_trees, n_nodes) int32, -1 = leaf
  bin_threshold (n_trees, n_nodes) uint8; threshold (n_trees, n_nodes) float64
  missing_left (n_trees, n_nodes) bool; value (n_trees, n_nodes) float64
  tree_column  (n_trees,) int32
  is_cat       (d,) bool: the categorical features, whose splits follow their bitset
  cat_bits     (n_trees, n_nodes, W) uint32 category bitsets (W = 0 without categorical
               features: never read)
  out          (n, n_outputs) float64, updated in place: out[i, tree_column[t]] += leaf value,
               trees in order (the CPU's order of additions, so equal bit for bit)

Launch: 1-D grid-stride loop, one thread per row. Any grid works; the backend sizes it.
The walk down each tree is ``gpufs.rules._gain.make_leaf_of``, the CPU's walk.
"""

from numba import cuda

from ._device_fns import leaf_binned, leaf_raw


@cuda.jit(cache=True)
def predict_binned_kernel(
    Xb, feature, bin_threshold, missing_left, value, tree_column, out, is_cat, cat_bits
):
    n = Xb.shape[0]
    n_trees = feature.shape[0]
    i = cuda.grid(1)
    while i < n:
        for t in range(n_trees):
            node = leaf_binned(Xb, i, t, feature, bin_threshold, missing_left, is_cat, cat_bits)
            out[i, tree_column[t]] += value[t, node]
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def predict_raw_kernel(
    X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits
):
    n = X.shape[0]
    n_trees = feature.shape[0]
    i = cuda.grid(1)
    while i < n:
        for t in range(n_trees):
            node = leaf_raw(X, i, t, feature, threshold, missing_left, is_cat, cat_bits)
            out[i, tree_column[t]] += value[t, node]
        i += cuda.gridsize(1)
