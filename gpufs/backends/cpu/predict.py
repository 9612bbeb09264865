"""The CPU's prediction: an ensemble's raw scores on binned or raw features.

Owns ``_predict_binned`` and ``_predict_raw`` (the leaf rule ``gpufs.rules._gain.make_leaf_of``,
compiled for both devices). The GPU's counterpart is ``cuda_kernels/predict.py``.
"""

from numba import njit, prange

from ._device_fns import ROW_BLOCK, _leaf_binned, _leaf_raw


@njit(parallel=True, cache=True, nogil=True)
def _predict_binned(
    Xb, feature, bin_threshold, missing_left, value, tree_column, out, is_cat, cat_bits
):
    """out[i, tree_column[t]] += leaf value of tree t for row i, trees in order (a split on a
    categorical feature, ``is_cat`` (d,) bool, by its bitset ``cat_bits`` (n_trees, n_nodes,
    W) uint32)."""
    n = Xb.shape[0]
    n_trees = feature.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for t in range(n_trees):
                node = _leaf_binned(
                    Xb, i, t, feature, bin_threshold, missing_left, is_cat, cat_bits
                )
                out[i, tree_column[t]] += value[t, node]


@njit(parallel=True, cache=True, nogil=True)
def _predict_raw(X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits):
    """As ``_predict_binned`` on raw float features: left iff x <= threshold (NaN by default)."""
    n = X.shape[0]
    n_trees = feature.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for t in range(n_trees):
                node = _leaf_raw(X, i, t, feature, threshold, missing_left, is_cat, cat_bits)
                out[i, tree_column[t]] += value[t, node]
