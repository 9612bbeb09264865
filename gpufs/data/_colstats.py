"""Weighted column statistics of a data matrix, in row chunks: the one implementation of the
mean and population variance that forward stagewise selection standardizes with and that
ControlBurn scales its importances with.

The variance is a second pass around the mean (not ``E[x^2] - mean^2``, which cancels), over
row chunks so that no temporary of the matrix's full size is made.
"""

from __future__ import annotations

__all__ = ["column_mean_var", "matvec_T", "row_slices"]


def row_slices(n_rows: int, n_cols: int, chunk_elements: int):
    """Slices covering 0..n_rows in chunks of about ``chunk_elements`` elements.

    Parameters
    ----------
    n_rows, n_cols : int
    chunk_elements : int
        Elements (rows x columns) per chunk.

    Returns
    -------
    list of slice
    """
    step = max(1, chunk_elements // max(1, n_cols))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def matvec_T(X, v, xp):
    """``X' v`` as float64.

    With float32 X, v is cast down so the product does not upcast X into a full-size float64
    temporary.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
    v : ndarray of shape (n_samples,), float64
    xp : module
        numpy or cupy.

    Returns
    -------
    ndarray of shape (n_features,), float64
    """
    if X.dtype != v.dtype:
        v = v.astype(X.dtype)
    return (X.T @ v).astype(xp.float64, copy=False)


def column_mean_var(X, w, W, xp, chunks):
    """Weighted mean and population variance of every column.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
    w : ndarray of shape (n_samples,), float64
        Non-negative row weights summing to ``W``.
    W : float
    xp : module
        numpy or cupy.
    chunks : list of slice
        Row chunks covering the rows (:func:`row_slices`).

    Returns
    -------
    mean, var : ndarray of shape (n_features,), float64
    """
    mean = matvec_T(X, w, xp) / W
    var = xp.zeros(X.shape[1], dtype=xp.float64)
    for sl in chunks:
        C = X[sl] - mean  # float64 chunk temporary
        C *= C
        var += w[sl] @ C
    var /= W
    return mean, var
