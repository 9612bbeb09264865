"""The CPU's prediction: an ensemble's raw scores on binned or raw features.

Owns ``_predict_binned`` and ``_predict_raw`` (the leaf rule ``gpufs.rules._gain.make_leaf_of``,
compiled for both devices), and ``predict_raw_rows``, the one caller of ``_predict_raw`` (any
float X, float64 row chunks at a time). The GPU's counterpart is ``cuda_kernels/predict.py``.
"""

from numba import njit, prange

from ._device_fns import ROW_BLOCK, _leaf_binned, _leaf_raw
from .binning import float64_rows


@njit(parallel=True, cache=True)
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


@njit(parallel=True, cache=True)
def _predict_raw(X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits):
    """As ``_predict_binned`` on raw float features X (n, d) float64, C order, read-only
    (``predict_raw_rows`` passes nothing else): left iff x <= threshold (NaN by default)."""
    n = X.shape[0]
    n_trees = feature.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for t in range(n_trees):
                node = _leaf_raw(X, i, t, feature, threshold, missing_left, is_cat, cat_bits)
                out[i, tree_column[t]] += value[t, node]


def predict_raw_rows(
    X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits
):
    """``_predict_raw`` on X of any float dtype and order, a ``float64_rows`` chunk at a time
    (float32 -> float64 is exact: the same leaves as on a float64 copy of X, without one).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        NaN marks a missing value.
    feature, threshold, missing_left, value : ndarray of shape (n_trees, n_nodes)
        The ensemble's stacked tree arrays (``TreeEnsemble.stacked``).
    tree_column : ndarray of shape (n_trees,), int32
        The output column each tree adds to.
    out : ndarray of shape (n_samples, n_outputs), float64, C order
        Scores the trees are added to, in place.
    is_cat : ndarray of shape (n_features,), bool
    cat_bits : ndarray of shape (n_trees, n_nodes, CAT_WORDS), uint32
        The category bitsets of the categorical splits.

    Returns
    -------
    out : ndarray of shape (n_samples, n_outputs), float64
    """
    for rows, chunk in float64_rows(X):
        _predict_raw(
            chunk, feature, threshold, missing_left, value, tree_column, out[rows], is_cat, cat_bits
        )
    return out
