"""What ``warm_start`` compares: a fingerprint of the training data.

Owns the one rule by which GBFS and ControlBurn decide that a new ``fit`` sees the data of the
last one (and so may reuse its bins, ``mu`` probes or forest): every column's checksum (of its
values' bit patterns, in row order), the checksums of the target and the weights, the shape
and dtype of the checked matrix, the column names, the input's dtypes and the categories of
the categorical columns. Any difference refits from scratch; a reordered column, a changed
dtype or a renamed column is a difference. The checksum is a fast hash, not a proof: two
different matrices that collide are astronomically unlikely, not impossible.
"""

from __future__ import annotations

import numpy as np

from .._device import namespace_of, to_host
from .._types import CHUNK_ELEMENTS_WARM_KEY
from ._colstats import row_slices
from ._input import _frame

__all__ = ["column_checksums", "data_fingerprint", "input_dtypes"]

_MIX = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio (Fibonacci hashing)
_MIX2 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64's multiplier


def column_checksums(X) -> tuple:
    """A 64-bit checksum of every column of a 1-D or 2-D array, in its array namespace.

    Each value's bit pattern is mixed with its row index (so a row or column permutation
    changes the checksums) and the column sums wrap modulo 2^64.

    Parameters
    ----------
    X : ndarray of shape (n_samples,) or (n_samples, n_features)
        numpy or cupy, any fixed-width dtype.

    Returns
    -------
    tuple of int
        One per column (one for a 1-D array).
    """
    xp = namespace_of(X)
    A = X.reshape(-1, 1) if X.ndim == 1 else X
    n, d = A.shape
    width = {1: xp.uint8, 2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[A.dtype.itemsize]
    total = xp.zeros(d, dtype=xp.uint64)
    for sl in row_slices(n, d, CHUNK_ELEMENTS_WARM_KEY):
        bits = xp.ascontiguousarray(A[sl]).view(width).astype(xp.uint64)
        rows = xp.arange(sl.start, sl.stop, dtype=xp.uint64).reshape(-1, 1)
        h = (bits + np.uint64(1)) * _MIX
        h ^= h >> np.uint64(31)
        h *= (rows * _MIX2) | np.uint64(1)
        h ^= h >> np.uint64(29)
        total += h.sum(axis=0, dtype=xp.uint64)
    return tuple(int(v) for v in to_host(total))


def input_dtypes(X) -> tuple:
    """The dtype of every column of a table, or the array's one dtype.

    Parameters
    ----------
    X : array-like
        What the user passed to ``fit``.

    Returns
    -------
    tuple of str
    """
    frame = _frame(X)
    if frame is not None:
        return tuple(str(t) for t in frame.schema.values())
    return (str(getattr(X, "dtype", type(X).__name__)),)


def data_fingerprint(estimator, X_input, X, y, sample_weight) -> tuple:
    """What a warm start compares (module docstring), after ``estimator``'s input door ran.

    Parameters
    ----------
    estimator : fitted selector
        Its ``feature_names_in_`` and ``category_codes_`` (set by the input door) are read.
    X_input : array-like
        X as the user gave it (for its dtypes).
    X : ndarray of shape (n_samples, n_features)
        The checked matrix (numpy or cupy).
    y : ndarray of shape (n_samples,)
        The encoded target.
    sample_weight : ndarray of shape (n_samples,) or None

    Returns
    -------
    tuple
        Hashable and comparable with ``==``.
    """
    names = getattr(estimator, "feature_names_in_", None)
    codes = getattr(estimator, "category_codes_", None)
    categories = (
        None
        if codes is None
        else tuple(
            (f, tuple(map(repr, vals)), codes.n_codes[f])
            for f, vals in sorted(codes.values.items())
        )
    )
    return (
        tuple(X.shape),
        str(X.dtype),
        column_checksums(X),
        None if y is None else (str(y.dtype), column_checksums(y)),
        None if sample_weight is None else column_checksums(sample_weight),
        None if names is None else tuple(str(n) for n in names),
        input_dtypes(X_input),
        categories,
    )
