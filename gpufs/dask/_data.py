"""From Dask collections to checked partitions held in the workers' memory.

Owns the first step of a distributed fit: turning ``X`` (a ``dask.array`` or a
``dask.dataframe``, ``dask_cudf`` included), ``y`` and the sample weights into one checked
:class:`Part` per partition, computed where Dask puts it and left there; the global row order
(partition i's rows come before partition i + 1's, as in ``X.compute()``); the category codes
of categorical columns, learned from the value counts of all partitions (the codes the
single-process estimator learns from the whole column); and the checks that run before any
fitting work: every partition has the collection's columns and dtypes, the same number of rows
in ``X``, ``y`` and the weights, and values the single-process estimator would accept (the
rules of ``gpufs.data._input``, applied to each partition on its worker; rules about the whole
table, "a classifier needs two classes" or "weights are not all zero", are checked on the
merged per-partition summaries).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._device import kept_device
from ..data._category_codes import CategoryCodes, count_values, merge_counts
from ..data._identifiers import check_identifier_columns
from ..data._input import (
    ALL_ZERO_WEIGHTS,
    _check_feature_names,
    _frame,
    categorical_mask,
    category_values,
    check_classification_labels,
    check_regression_target,
    check_sample_weight,
    check_X,
    check_y,
    encode_classes,
    frame_layout,
)
from ._group import wait_futures

__all__ = [
    "Loaded",
    "Part",
    "PartSummary",
    "check_feature_names",
    "classes_of",
    "load",
    "load_part",
    "summary_of",
]


class _Layout:
    """What ``check_X`` checks a partition against: the collection's width, column names
    (frames) and category codes (the estimator's after ``load``)."""

    def __init__(self, n_features, names, codes):
        self.n_features_in_ = int(n_features)
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        self.category_codes_ = codes


@dataclass
class PartSummary:
    """What the driver learns about one partition (a few numbers, no rows)."""

    index: int
    n: int
    n_pos: int  # rows of positive weight (n without weights)
    schema: tuple  # ("frame", columns, dtypes) or ("array", n_columns, dtype)
    dtype: str  # the float dtype the rows were converted to
    labels: object  # the distinct labels (classification), else None
    w_sum: object  # exact sum of the weights (``_exact.fsum_part``), else None
    w_max: float
    y_min: float
    y_max: float


class Part:
    """One partition's checked rows, kept in a worker's memory for the fit.

    Attributes
    ----------
    index : int
        The partition's position in the collection.
    X : ndarray of shape (n, n_features), float32 or float64
    y : ndarray of shape (n,)
        The target as given (labels are encoded later, once the classes are known).
    w : ndarray of shape (n,), float64, or None
    summary : PartSummary
    """

    __slots__ = ("index", "X", "y", "w", "summary")


def _schema(X):
    if _frame(X) is not None:
        return ("frame", tuple(str(c) for c in X.columns), tuple(str(t) for t in X.dtypes))
    a = np.asarray(X) if not hasattr(X, "dtype") else X
    return ("array", int(a.shape[1]) if a.ndim == 2 else -1, str(a.dtype))


def load_part(index, X, y, w, classify, layout, ref, device="cpu"):
    """Check one partition on its worker: a :class:`Part`, or a ``_PartError`` (with the
    partition's index) that the driver raises for it.

    ``classify``: True for a classifier (``y`` holds labels), False for a regressor.
    ``layout`` (``_Layout``): the collection's names and category codes, ``ref`` its schema.
    ``device``: the shards' ("gpu": rows already on the GPU, cupy or cudf, stay there as a
    cupy array; the target and weights, a few bytes a row, come to the host).
    """
    from ._exact import fsum_part

    schema = _schema(X)
    if schema != ref:
        return _PartError(int(index), None, schema)
    of = "X"  # the input each check reads, for the driver's message
    try:
        part = Part()
        part.index = int(index)
        Xc = check_X(layout, X, device=kept_device(device, X), reset=False, allow_empty=True)
        n = int(Xc.shape[0])
        of = "y"
        yc = check_y(y, n, device="cpu")
        labels = None
        y_min = y_max = 0.0
        if classify:
            if n:
                check_classification_labels(yc)
            labels = np.unique(yc)
        else:
            yc = check_regression_target(yc)
            if n:
                y_min, y_max = float(yc.min()), float(yc.max())
        of = "sample_weight"
        wc = check_sample_weight(w, n, device="cpu", allow_all_zero=True)
        n_pos = n if wc is None else int((wc > 0).sum())
        part.X, part.y, part.w = Xc, yc, wc
        part.summary = PartSummary(
            index=part.index,
            n=n,
            n_pos=n_pos,
            schema=schema,
            dtype=str(Xc.dtype),
            labels=labels,
            w_sum=None if wc is None else fsum_part(wc),
            w_max=1.0 if wc is None else (float(wc.max()) if n else 0.0),
            y_min=y_min,
            y_max=y_max,
        )
        return part
    except Exception as exc:  # reported by the driver, naming the partition
        return _PartError(int(index), exc, schema, of)


def count_part_categories(index, X, mask, ref, names):
    """The value counts (``_category_codes.count_values``) of the categorical columns of one
    partition, dict f -> (values, counts), or a ``_PartError``; ``names`` (the column names or
    None) for the messages."""
    schema = _schema(X)
    if schema != ref:
        return _PartError(int(index), None, schema)
    try:
        return {
            f: count_values(v, f if names is None else names[f])
            for f, v in category_values(X, mask).items()
        }
    except Exception as exc:
        return _PartError(int(index), exc, schema)


class _PartError:
    """A partition the driver refuses: ``exc`` what its check raised (None when only its
    ``schema`` differs from the collection's), ``of`` the input that check read ("X", "y"
    or "sample_weight")."""

    def __init__(self, index, exc, schema, of="X"):
        self.index, self.exc, self.schema, self.of = index, exc, schema, of


def summary_of(part):
    """The small record the driver gathers (a ``_PartError`` passes through)."""
    return part if isinstance(part, _PartError) else part.summary


# --------------------------------------------------------------------------------------------
# Driver side
# --------------------------------------------------------------------------------------------


def _dask_kind(obj):
    """ "array", "frame", "series" or None for a non-Dask object."""
    import dask.array as da

    if isinstance(obj, da.Array):
        return "array"
    try:
        import dask.dataframe as dd
    except ImportError:  # dask without its dataframe extra
        return None
    if isinstance(obj, dd.DataFrame):
        return "frame"
    if isinstance(obj, dd.Series):
        return "series"
    return None


def _partitions_of(obj, what, is_X, row_chunks=None):
    """The collection's partitions as a list of Dask delayed objects, in row order (``is_X``:
    a 2-D table, else a 1-D target or weights, rechunked like ``row_chunks`` when known)."""
    kind = _dask_kind(obj)
    if kind is None:
        raise TypeError(
            f"{what} must be a dask.array or a dask.dataframe (got {type(obj).__name__}); for "
            "data in this process's memory use the single-process estimators (gpufs."
            "GBFSClassifier, ...), or wrap it with dask.array.from_array."
        )
    if kind == "array":
        if is_X:
            if obj.ndim != 2:
                raise ValueError(
                    f"{what} must be 2-D (n_samples, n_features); got {obj.ndim} dimensions."
                )
            if obj.numblocks[1] > 1:
                obj = obj.rechunk({1: -1})  # whole rows in each block
            return list(obj.to_delayed()[:, 0])
        if obj.ndim == 2 and obj.shape[1] == 1:
            obj = obj[:, 0]
        if obj.ndim != 1:
            raise ValueError(f"{what} must be 1-D (n_samples,); got {obj.ndim} dimensions.")
        if (
            row_chunks is not None
            and not any(np.isnan(c) for c in row_chunks)
            and tuple(obj.chunks[0]) != tuple(row_chunks)
            and not any(np.isnan(c) for c in obj.chunks[0])
        ):
            if obj.shape[0] != sum(row_chunks):  # rechunk would say "Chunks do not add up"
                raise ValueError(
                    f"{what} has {obj.shape[0]} rows where X has "
                    f"{int(sum(row_chunks))}: give one value per row of X."
                )
            obj = obj.rechunk((tuple(row_chunks),))
        return list(obj.to_delayed())
    if kind == "frame" and not is_X:
        if len(obj.columns) != 1:
            raise ValueError(
                f"{what} must be 1-D: a dask Series or a one-column frame; got "
                f"{len(obj.columns)} columns."
            )
        obj = obj[obj.columns[0]]
    if kind == "series" and is_X:
        raise ValueError(
            f"{what} must be 2-D: a dask DataFrame or a 2-D dask array, not a Series "
            "(use X.to_frame() for a single feature)."
        )
    return list(obj.to_delayed())


def _row_chunks(X):
    return tuple(X.chunks[0]) if _dask_kind(X) == "array" else None


@dataclass
class Loaded:
    """Checked partitions in the workers' memory.

    Attributes
    ----------
    futures : list of distributed.Future
        One :class:`Part` per partition, in row order.
    summaries : list of PartSummary
    offsets : ndarray of shape (n_parts + 1,), int64
        Global row offsets: partition i holds rows offsets[i]:offsets[i + 1].
    n, n_features : int
    dtype : str
        The float dtype of the converted rows (the same in every partition).
    """

    futures: list
    summaries: list
    offsets: np.ndarray
    n: int
    n_features: int
    dtype: str

    @property
    def n_pos(self) -> int:
        return int(sum(s.n_pos for s in self.summaries))


def _reference_schema(X):
    """The columns and dtypes every partition must have: the collection's own metadata."""
    if _dask_kind(X) == "frame":
        meta = X._meta
        return ("frame", tuple(str(c) for c in meta.columns), tuple(str(t) for t in meta.dtypes))
    return ("array", int(X.shape[1]), str(X.dtype))


def _schema_error(i, got, ref, what="X"):
    if got[0] != ref[0]:
        return (
            f"partition {i} of {what} is a{'n array' if got[0] == 'array' else ' frame'} "
            f"where the collection is a{'n array' if ref[0] == 'array' else ' frame'}."
        )
    if got[0] == "frame":
        if got[1] != ref[1]:
            missing = [c for c in ref[1] if c not in got[1]]
            extra = [c for c in got[1] if c not in ref[1]]
            detail = ", ".join(
                s
                for s in (
                    f"missing {missing[:5]}" if missing else "",
                    f"unexpected {extra[:5]}" if extra else "",
                    "" if missing or extra else "in another order",
                )
                if s
            )
            return (
                f"partition {i} of {what} has columns {list(got[1])[:8]} where the "
                f"collection has {list(ref[1])[:8]} ({detail}). Every partition must "
                "have the same columns in the same order."
            )
        bad = [(c, g, r) for c, g, r in zip(ref[1], got[2], ref[2]) if g != r]
        shown = ", ".join(f"{c!r}: {g} (expected {r})" for c, g, r in bad[:5])
        return (
            f"partition {i} of {what} has other column dtypes than the collection: "
            f"{shown}. Every partition must have the same dtypes (cast them, e.g. "
            f"{what}.astype(...))."
        )
    if got[1] != ref[1]:
        return f"partition {i} of {what} has {got[1]} columns where the collection has {ref[1]}."
    return (
        f"partition {i} of {what} has dtype {got[2]} where the collection has {ref[2]}. "
        "Every partition must have the same dtype."
    )


def _raise_part_errors(results, ref, what):
    """Raise for the first partition (in row order) whose columns or dtypes differ from the
    collection's, else for the first whose check failed."""
    errors = [r for r in results if isinstance(r, _PartError)]
    for e in errors:
        if e.schema != ref:
            raise ValueError(_schema_error(e.index, e.schema, ref, what))
    if errors:
        e = errors[0]
        cls = type(e.exc) if isinstance(e.exc, (ValueError, TypeError)) else ValueError
        # the input whose check failed: X, or y / sample_weight (of an eval_set: "y of ...")
        of = what if e.of == "X" else e.of if what == "X" else f"{e.of} of {what}"
        raise cls(f"partition {e.index} of {of}: {e.exc}") from e.exc


def _learn_codes(
    client, x_futures, mask, ref, names, d, max_categories, timeout, what, categorical_features=None
):
    """The category codes of the ``mask`` columns, learned from the value counts of every
    partition (merged: what ``CategoryCodes.learn`` gives on the whole columns); identifier-like
    columns are refused or warned about as in one process (``gpufs.data._identifiers``)."""
    counted = wait_futures(
        client,
        [
            client.submit(count_part_categories, i, f, mask, ref, names, pure=False)
            for i, f in enumerate(x_futures)
        ],
        timeout,
        f"counting the categories of {what}",
    )
    _raise_part_errors(counted, ref, what)
    merged = {}
    for f in np.flatnonzero(mask).tolist():
        name = names[f] if names is not None else f
        merged[f] = merge_counts([c[f] for c in counted], name)
    check_identifier_columns(
        merged, None if names is None else dict(enumerate(names)), categorical_features
    )
    return CategoryCodes.learn_counts(merged, d, max_categories)


def load(
    client, X, y, sample_weight, *, classify, timeout, estimator, reset=True, what="X", device="cpu"
):
    """Compute and check the partitions of (X, y, sample_weight) on the cluster.

    Parameters
    ----------
    client : distributed.Client
    X : dask.array.Array of shape (n_samples, n_features) or dask.dataframe.DataFrame
    y : dask.array.Array of shape (n_samples,), dask Series or one-column dask DataFrame
        Partitioned like X (same number of partitions, same rows per partition).
    sample_weight : like y, or None
    classify : bool
        y holds class labels.
    timeout : float
        Seconds to wait for the partitions to be computed.
    estimator : the estimator being fitted
        At fit (``reset``) its ``feature_names_in_``, ``n_features_in_`` and
        ``category_codes_`` are set from the collection (its ``categorical_features`` name the
        categorical columns, coded from the value counts of all partitions); afterwards
        (validation data) the collection is checked against them.
    reset : bool, default=True
    what : str
        The data's name in messages ("X", "eval_set[0]", ...).
    device : {"cpu", "gpu"}, default="cpu"
        The shards' (``load_part``: a GPU fit keeps cupy and cudf partitions on their GPU).

    Returns
    -------
    Loaded

    Raises ValueError / TypeError naming the partition for anything the single-process
    estimator would refuse, and for partitions whose columns or dtypes differ from the
    collection's; nothing has been fitted then.
    """
    x_parts = _partitions_of(X, what, True)
    chunks = _row_chunks(X)
    y_parts = _partitions_of(y, "y" if what == "X" else f"y of {what}", False, chunks)
    w_parts = (
        None
        if sample_weight is None
        else _partitions_of(sample_weight, "sample_weight", False, chunks)
    )
    for name, parts in (("y", y_parts), ("sample_weight", w_parts)):
        if parts is not None and len(parts) != len(x_parts):
            raise ValueError(
                f"{name} has {len(parts)} partitions where X has {len(x_parts)}: partition X "
                f"and {name} alike (e.g. from one dataframe, or with the same chunks)."
            )
    ref = _reference_schema(X)
    d = ref[1] if ref[0] == "array" else len(ref[1])
    meta = X._meta if _dask_kind(X) == "frame" else None
    names, kinds = frame_layout(meta) if meta is not None else (None, None)
    check_feature_names(estimator, X, reset=reset)
    if not reset:
        expected = getattr(estimator, "n_features_in_", d)
        if d != expected:
            raise ValueError(
                f"{what}: X has {d} features, but {type(estimator).__name__} is "
                f"expecting {expected} features as input."
            )
    # X, y and w in one computation: a table they share is read once
    n_p = len(x_parts)
    every = client.compute(x_parts + y_parts + (w_parts or []))
    x_f, y_f = every[:n_p], every[n_p : 2 * n_p]
    w_f = every[2 * n_p :] if w_parts is not None else [None] * n_p
    if reset:
        cat = estimator._categorical_args()
        mask = categorical_mask(cat["categorical_features"], d, names, kinds)
        codes = None
        if mask.any():
            codes = _learn_codes(
                client,
                x_f,
                mask,
                ref,
                names,
                d,
                cat["max_categories"],
                timeout,
                what,
                cat["categorical_features"],
            )
        estimator.category_codes_ = codes
    layout = _Layout(d, names, getattr(estimator, "category_codes_", None))
    futures = [
        client.submit(
            load_part, i, x_f[i], y_f[i], w_f[i], classify, layout, ref, device, pure=False
        )
        for i in range(n_p)
    ]
    summaries = wait_futures(
        client,
        [client.submit(summary_of, f, pure=False) for f in futures],
        timeout,
        f"computing the partitions of {what}",
    )
    _raise_part_errors(summaries, ref, what)
    dtypes = {s.dtype for s in summaries}
    if len(dtypes) > 1:  # equal schemas convert alike; a frame of mixed float columns too
        raise ValueError(f"the partitions of {what} convert to different dtypes {sorted(dtypes)}.")
    n_rows = np.array([s.n for s in summaries], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(n_rows)]).astype(np.int64)
    n = int(offsets[-1])
    if n == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape=(0, {d})) while a minimum of 1 "
            f"is required: every partition of {what} is empty."
        )
    if d == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape=({n}, 0)) while a minimum of 1 is required."
        )
    if sample_weight is not None and sum(s.n_pos for s in summaries) == 0:
        raise ValueError(ALL_ZERO_WEIGHTS)
    if reset:
        estimator.n_features_in_ = d
    return Loaded(
        futures=futures, summaries=summaries, offsets=offsets, n=n, n_features=d, dtype=dtypes.pop()
    )


def check_feature_names(estimator, X, reset):
    """Record (``reset``) or check the column names of a Dask collection, from its metadata
    (``feature_names_in_``, as the single-process estimators do)."""
    meta = X._meta if _dask_kind(X) == "frame" else None
    if meta is not None:
        _check_feature_names(estimator, meta, reset=reset)
    else:
        _check_feature_names(estimator, np.empty((0, X.shape[1])), reset=reset)


def _encode_block(block, layout, idx, dtype):
    """Columns ``idx`` of one partition as the input door converts them (``check_X``)."""
    Xc = check_X(layout, block, device="cpu", reset=False, allow_empty=True)
    return np.ascontiguousarray(Xc[:, idx], dtype=dtype)


def encoded_columns(estimator, X, idx, dtype):
    """Columns ``idx`` of the Dask collection ``X`` as the fitted ``estimator``'s input door
    converts them (numbers, and category codes for its categorical columns): a lazy
    ``dask.array`` of ``dtype`` with X's partitions as blocks."""
    import dask.array as da
    from dask import delayed

    layout = _Layout(
        estimator.n_features_in_,
        getattr(estimator, "feature_names_in_", None),
        getattr(estimator, "category_codes_", None),
    )
    idx = np.asarray(idx, dtype=np.int64)
    k = int(idx.shape[0])
    if _dask_kind(X) == "frame":
        return da.concatenate(
            [
                da.from_delayed(
                    delayed(_encode_block, pure=True)(p, layout, idx, dtype),
                    shape=(np.nan, k),
                    dtype=dtype,
                )
                for p in X.to_delayed()
            ],
            axis=0,
        )
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    return X.map_blocks(_encode_block, layout, idx, dtype, chunks=(X.chunks[0], (k,)), dtype=dtype)


def classes_of(summaries):
    """The sorted classes of all partitions' labels (``_input.encode_classes``' rules: at
    least two classes, one label type)."""
    labels = [s.labels for s in summaries if s.labels is not None and len(s.labels)]
    union = np.unique(np.concatenate(labels)) if labels else np.empty(0)
    check_classification_labels(union)
    classes, _ = encode_classes(union)
    return classes
