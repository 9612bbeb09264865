"""Predictions of a fitted model on a Dask collection: lazily, partition by partition.

Owns :func:`lazy_apply`, which maps an in-memory method of a fitted estimator (``predict``,
``predict_proba``, ...) over the partitions of a ``dask.array`` or ``dask.dataframe``: the
model travels to the workers (without the client), the rows never leave them, and the result
is a Dask collection of the same kind (an array, or a Series / DataFrame on the same index).
"""

from __future__ import annotations

import copy

import numpy as np

from ._data import _dask_kind

__all__ = ["lazy_apply"]


def lazy_apply(est, owner, X, method, width=None, columns=None, dtype=np.float64):
    """``method`` of ``est`` as the class after ``owner`` in its MRO defines it (the
    in-memory one), applied to every partition of the Dask collection ``X``.

    ``width`` None: one value per row (a 1-D array or a Series of ``dtype``); else ``width``
    columns (a 2-D array, or a DataFrame with ``columns``).
    """
    model = copy.copy(est)
    model.client = None  # the tasks carry the model, never the client
    method_fn = getattr(super(owner, model), method)
    empty_shape = (0,) if width is None else (0, int(width))

    def fn(block):  # an empty partition has an empty answer (the estimators refuse 0 rows)
        if block.shape[0] == 0:
            return np.empty(empty_shape, dtype=dtype)
        return np.asarray(method_fn(block))

    kind = _dask_kind(X)
    if kind == "frame":
        import pandas as pd

        if width is None:
            return X.map_partitions(
                lambda df: pd.Series(fn(df), index=df.index), meta=pd.Series(dtype=dtype)
            )
        cols = [str(c) for c in columns]
        return X.map_partitions(
            lambda df: pd.DataFrame(fn(df), index=df.index, columns=cols),
            meta=pd.DataFrame({c: pd.Series(dtype=dtype) for c in cols}),
        )
    if kind != "array":
        raise TypeError(f"expected a dask.array or dask.dataframe, got {type(X).__name__}")
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    if width is None:
        return X.map_blocks(fn, drop_axis=1, dtype=dtype)
    return X.map_blocks(fn, chunks=(X.chunks[0], (width,)), dtype=dtype)
