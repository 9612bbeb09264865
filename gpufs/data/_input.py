"""The one door for user data: X, y (targets and class labels), sample weights, feature costs
and groups.

Owns: accepting numpy, pandas, cupy, cudf, polars and pyarrow inputs; remembering feature names;
checking dtypes, shapes and values; and saying clearly what is wrong. Nothing here modifies the
user's arrays: every conversion that could alias is followed by a copy before anything writes.

Every estimator in gpufs calls these functions and nothing else to read its inputs.
"""

from __future__ import annotations

import numbers

import numpy as np
from numba import njit
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import _check_feature_names

from .._device import input_float_dtype, is_cupy_array, like, namespace_of, to_device, to_host
from .._types import CHUNK_ELEMENTS_NONFINITE, read_only
from .._warnings import warn_from_caller
from ._colstats import row_slices


def _module_root(obj) -> str:
    return type(obj).__module__.split(".")[0]


def _frame(X):
    """X as a narwhals eager DataFrame, or None when X is not a dataframe."""
    if (
        isinstance(X, np.ndarray)
        or is_cupy_array(X)
        or not (hasattr(X, "columns") or hasattr(X, "column_names") or hasattr(X, "schema"))
    ):
        return None
    try:
        import narwhals.stable.v1 as nw
    except ImportError:  # pragma: no cover - narwhals comes with scikit-learn >= 1.6
        return None
    try:
        return nw.from_native(X, eager_only=True)
    except TypeError:
        return None


#: Column kinds of a frame.
_NUMERIC, _CATEGORY, _OTHER = "numeric", "categorical", "other"


def _column_kind(dtype) -> str:
    import narwhals.stable.v1 as nw

    if dtype.is_numeric() or dtype == nw.Boolean:
        return _NUMERIC
    if dtype in (nw.String, nw.Categorical, nw.Enum):
        return _CATEGORY
    return _OTHER


def _shown(names) -> str:
    return ", ".join(repr(str(b)) for b in names[:5]) + (" ..." if len(names) > 5 else "")


def categorical_mask(categorical_features, n_features, names, kinds=None):
    """The categorical columns (bool (n_features,)) that ``categorical_features`` names.

    Parameters
    ----------
    categorical_features : "from_dtype", None, or array-like of str / int / bool
        "from_dtype": the columns of a categorical or string dtype (``kinds``); None: no
        column; names (they must be columns of X), indices, or a bool mask of length
        n_features.
    n_features : int
    names : list of str or None
        The column names of X (None for arrays).
    kinds : list of str or None
        ``_column_kind`` of each column of a frame (None for arrays: no column is then
        categorical by dtype).
    """
    mask = np.zeros(n_features, dtype=bool)
    if categorical_features is None:
        return mask
    if isinstance(categorical_features, str):
        if categorical_features != "from_dtype":
            raise ValueError(
                f"categorical_features must be 'from_dtype', None, or column "
                f"names, indices or a boolean mask; got {categorical_features!r}."
            )
        if kinds is not None:
            mask[:] = [k == _CATEGORY for k in kinds]
        return mask
    cf = np.asarray(categorical_features)
    if cf.ndim != 1:
        raise ValueError(
            "categorical_features must be a flat list of column names, indices or a boolean mask."
        )
    if cf.dtype.kind == "b":
        if cf.shape[0] != n_features:
            raise ValueError(
                f"categorical_features as a boolean mask needs one entry per "
                f"column: expected {n_features}, got {cf.shape[0]}."
            )
        return cf.copy()
    if cf.dtype.kind in "iu":
        bad = cf[(cf < 0) | (cf >= n_features)]
        if bad.size:
            raise ValueError(
                f"categorical_features: column index {int(bad[0])} is out of "
                f"range for X with {n_features} columns."
            )
        mask[cf] = True
        return mask
    if cf.dtype.kind in "UO" and cf.size:
        if names is None:
            raise ValueError(
                "categorical_features names columns, but X has no column names; "
                "give column indices or a boolean mask instead."
            )
        where = {str(n): i for i, n in enumerate(names)}
        missing = [str(c) for c in cf if str(c) not in where]
        if missing:
            raise ValueError(
                f"categorical_features names columns that X does not have: {_shown(missing)}."
            )
        mask[[where[str(c)] for c in cf]] = True
        return mask
    if cf.size == 0:
        return mask
    raise ValueError(
        f"categorical_features must hold column names, indices or booleans; got dtype {cf.dtype}."
    )


def _learn_or_get_codes(
    estimator, reset, mask, columns, n_features, max_categories, names, categorical_features=None
):
    """At fit (``reset``): learn the codes of the categorical columns and keep them in
    ``estimator.category_codes_`` (None when there are none); identifier-like columns are
    refused or warned about (``gpufs.data._identifiers``). Later: the fitted codes."""
    from ._category_codes import CategoryCodes, count_values
    from ._identifiers import check_identifier_columns

    if reset:
        codes = None
        if mask.any():
            counts = {
                f: count_values(columns[f][0][~columns[f][1]], (names or {}).get(f, f))
                for f in columns
            }
            check_identifier_columns(counts, names, categorical_features)
            codes = CategoryCodes.learn_counts(counts, n_features, max_categories)
        estimator.category_codes_ = codes
        return codes
    return getattr(estimator, "category_codes_", None)


def _fitted_mask(estimator, n_features):
    codes = getattr(estimator, "category_codes_", None)
    if codes is None or codes.n_features != n_features:
        return np.zeros(n_features, dtype=bool)
    return codes.is_categorical


def _dataframe_to_array(estimator, frame, X, device, reset, categorical_features, max_categories):
    """A pandas / polars / pyarrow / cudf / modin table -> float array (categorical columns
    as their category codes, NaN for missing), through narwhals."""
    import narwhals.stable.v1 as nw

    names = [str(c) for c in frame.columns]
    d = len(names)
    kinds = [_column_kind(t) for t in frame.schema.values()]
    if reset:
        mask = categorical_mask(categorical_features, d, names, kinds)
    else:
        mask = _fitted_mask(estimator, d)
    bad = [
        (n, t)
        for n, k, t, m in zip(names, kinds, frame.schema.values(), mask)
        if not m and k != _NUMERIC
    ]
    if bad:
        raise ValueError(
            f"X has non-numeric columns: {_shown([n for n, _ in bad])} (dtype "
            f"{', '.join(str(t) for _, t in bad[:5])}). gpufs reads numeric, boolean, "
            "categorical and string columns (those are categorical features: see "
            "categorical_features); convert the others (dates, for example, to numbers) first."
        )
    cols = list(frame.columns)
    num = [cols[i] for i in range(d) if not mask[i]]
    if reset and _module_root(X) != "cudf":  # an integer id is used, with a warning
        from ._identifiers import warn_integer_identifiers

        ints = [i for i in range(d) if not mask[i] and frame.schema[cols[i]].is_integer()]
        if ints:
            warn_integer_identifiers((names[i], frame.get_column(cols[i]).to_numpy()) for i in ints)
    f32 = bool(num) and not mask.any() and all(frame.schema[c] == nw.Float32 for c in num)
    target = nw.Float32 if f32 else nw.Float64
    if not mask.any():  # numbers only: one conversion, no second copy
        if reset:
            estimator.category_codes_ = None
        if _module_root(X) == "cudf":
            return to_device(X.astype("float64").to_cupy(na_value=np.nan), device)
        return frame.select(nw.col(*num).cast(target)).to_numpy()
    out = np.empty((len(frame), d), dtype=np.float64)
    if num:
        out[:, ~mask] = frame.select(nw.col(*num).cast(target)).to_numpy()
    columns = _frame_category_columns(frame, mask)
    codes = _learn_or_get_codes(
        estimator,
        reset,
        mask,
        columns,
        d,
        max_categories,
        dict(enumerate(names)),
        categorical_features,
    )
    for f, (values, missing) in columns.items():
        out[:, f] = codes.encode(f, values, missing, names[f])
    return out


def _encode_array_categories(estimator, arr, reset, categorical_features, max_categories):
    """Category codes of the categorical columns of a 2-D array (``categorical_features`` by
    index or mask at fit; the fitted ones later)."""
    d = arr.shape[1]
    mask = categorical_mask(categorical_features, d, None) if reset else _fitted_mask(estimator, d)
    if not mask.any():
        if reset:
            estimator.category_codes_ = None
        return arr
    host = to_host(arr)
    columns = _array_category_columns(host, mask)
    codes = _learn_or_get_codes(
        estimator, reset, mask, columns, d, max_categories, None, categorical_features
    )
    out = np.empty(host.shape, dtype=np.float64)
    num = ~mask
    if num.any():
        try:
            out[:, num] = host[:, num].astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"X has values that are not numbers in columns that are not categorical: {exc}"
            ) from exc
    for f, (values, missing) in columns.items():
        out[:, f] = codes.encode(f, values, missing)
    return out


def _frame_category_columns(frame, mask):
    """dict f -> (values (n,), missing (n,) bool) of the ``mask`` columns of a narwhals
    frame."""
    columns = {}
    for f in np.flatnonzero(mask):
        s = frame[:, int(f)]  # by position: frame[name] reads an integer name as a row
        columns[int(f)] = (np.asarray(s.to_numpy()), np.asarray(s.is_null().to_numpy()))
    return columns


def _array_category_columns(host, mask):
    """dict f -> (values (n,), missing (n,) bool) of the ``mask`` columns of a 2-D host
    array."""
    columns = {}
    for f in np.flatnonzero(mask):
        col = host[:, f]
        if col.dtype.kind == "f":
            missing = np.isnan(col)
        elif col.dtype.kind == "O":
            missing = np.array(
                [v is None or (isinstance(v, float) and v != v) for v in col], dtype=bool
            )
        else:
            missing = np.zeros(col.shape[0], dtype=bool)
        columns[int(f)] = (col, missing)
    return columns


def frame_layout(X):
    """The column names and kinds of a table (None, None for an array).

    Parameters
    ----------
    X : object
        A table (pandas, polars, pyarrow, cudf) or an array.

    Returns
    -------
    names : list of str or None
    kinds : list of str or None
        "numeric", "categorical" (categorical and string dtypes) or "other" per column.
    """
    frame = _frame(X)
    if frame is None:
        return None, None
    return [str(c) for c in frame.columns], [_column_kind(t) for t in frame.schema.values()]


def category_values(X, mask):
    """The non-missing values of the categorical columns of a table or 2-D array: what their
    codes are learned from at fit (a cluster counts them per partition, ``gpufs.dask``).

    Parameters
    ----------
    X : table or array-like of shape (n_samples, n_features)
    mask : ndarray of shape (n_features,), bool
        The categorical columns.

    Returns
    -------
    dict int -> ndarray of shape (n_present,)
    """
    frame = _frame(X)
    if frame is not None:
        columns = _frame_category_columns(frame, mask)
    else:
        columns = _array_category_columns(to_host(as_array(X, "cpu", "X")), mask)
    return {f: values[~missing] for f, (values, missing) in columns.items()}


def as_array(X, device: str, what: str):
    """Any supported input as a numpy or cupy array (may alias the input; never written).

    The door for array-like parameters (groups, costs, task labels) that need no other check.

    Parameters
    ----------
    X : array-like
        numpy, cupy, pandas, cudf, polars, pyarrow or a sequence.
    device : {"cpu", "gpu"}
        Where a table's values go.
    what : str
        The parameter's name, for error messages.

    Returns
    -------
    ndarray
        numpy or cupy.
    """
    if hasattr(X, "tocsr") or hasattr(X, "toarray") and hasattr(X, "nnz"):
        raise TypeError(
            f"{what} is a sparse matrix; gpufs needs dense data. Convert it with "
            f"{what}.toarray() if it fits in memory."
        )
    frame = _frame(X)
    if frame is not None:  # a table given where an array is expected (y, weights, costs)
        if _module_root(X) == "cudf":
            return to_device(X.astype("float64").to_cupy(na_value=np.nan), device)
        return frame.to_numpy()
    root = _module_root(X)
    if root == "pyarrow" and hasattr(X, "to_numpy") and not hasattr(X, "columns"):
        X = X.to_numpy(zero_copy_only=False)  # a pyarrow Array or ChunkedArray
    if is_cupy_array(X):
        return to_device(X, device)
    if root == "cudf":  # a cudf Series
        return to_device(X.astype("float64").to_cupy(na_value=np.nan), device)
    if hasattr(X, "to_numpy") and not isinstance(X, np.ndarray):
        X = X.to_numpy()
    try:
        return np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{what} could not be converted to an array: {exc}") from exc


def _check_numeric(arr, what: str):
    kind = arr.dtype.kind
    if kind == "c":
        raise ValueError(
            f"Complex data not supported: {what} is complex; gpufs needs real numbers."
        )
    if kind not in "biuf":
        if kind == "O":
            try:
                return arr.astype(np.float64)
            except (TypeError, ValueError) as exc:
                # keep the exception type (numpy's TypeError for non-scalars such as dicts)
                raise type(exc)(f"{what} has values that are not numbers: {exc}") from exc
        raise ValueError(
            f"{what} has dtype {arr.dtype}, which is not numeric: gpufs needs numeric values. "
            "Encode categorical or text data first."
        )
    return arr


def check_X(
    estimator,
    X,
    *,
    device: str = "cpu",
    reset: bool,
    dtype="float",
    allow_nan: bool = True,
    categorical_features=None,
    max_categories=255,
    allow_empty: bool = False,
):
    """Validate X and return it as a 2-D float array on ``device``.

    Tables (pandas, polars, pyarrow, cudf, modin) are read through narwhals, one column kind
    at a time: numeric and boolean columns as numbers; categorical columns (at fit, those
    ``categorical_features`` names; afterwards, those of the fit) as their category codes
    (``gpufs.data._category_codes``: most frequent category 0, rare ones pooled, NaN for missing
    values and categories not seen in fit), learned at fit into
    ``estimator.category_codes_``; any other column is refused by name.

    Parameters
    ----------
    estimator : the estimator (its ``feature_names_in_`` / ``n_features_in_`` are set when
        ``reset`` and checked otherwise).
    X : array-like (n_samples, n_features): numpy, pandas, cupy, cudf, polars or pyarrow.
    device : "cpu" (numpy out) or "gpu" (cupy out).
    reset : True in ``fit`` (remember names and width), False afterwards (check them).
    dtype : "float" (default: float64; a float32 table on the GPU keeps its dtype, the
        binning reads it as it is) or a numpy dtype to convert to.
    allow_nan : NaN marks a missing value (routed by a learned default direction); inf never is.
        False refuses NaN in the numeric columns (categorical ones may always miss a value).
    categorical_features : "from_dtype", None, or column names / indices / a bool mask
        Read at fit only (``reset``); see ``categorical_mask``. None (the default here, for
        callers that take numbers only) refuses non-numeric columns.
    max_categories : int in [2, 255]
        Most codes of one categorical column (its bins): the rest are pooled.
    allow_empty : accept 0 rows (one partition of a larger table, ``gpufs.dask``).

    Returns
    -------
    array (n_samples, n_features) of ``dtype``, numpy or cupy. A new array whenever a
    conversion happened; callers must still never write into it.
    """
    if X is None:
        raise ValueError("X is None; expected a 2-D array-like of shape (n_samples, n_features).")
    _check_feature_names(estimator, X, reset=reset)
    frame = _frame(X)
    if frame is not None:
        arr = _dataframe_to_array(
            estimator, frame, X, device, reset, categorical_features, max_categories
        )
    else:
        arr = as_array(X, device, "X")
        if arr.ndim == 2 and (reset or getattr(estimator, "category_codes_", None)):
            arr = _encode_array_categories(
                estimator, arr, reset, categorical_features, max_categories
            )
    if arr.ndim != 2:
        if arr.ndim == 1:
            raise ValueError(
                "Expected 2D array, got 1D array instead. Reshape your data either using "
                "X.reshape(-1, 1) if your data has a single feature or X.reshape(1, -1) if it "
                "contains a single sample."
            )
        raise ValueError(f"X must be 2-D (n_samples, n_features); got {arr.ndim} dimensions.")
    arr = _check_numeric(arr, "X")
    n, d = arr.shape
    if n == 0 and not allow_empty:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required."
        )
    if d == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required."
        )
    xp = namespace_of(arr)
    if isinstance(dtype, str) and dtype == "float":
        # host tables are float64 (float32 -> float64 is exact: the same bins), so the kernels
        # compiled once serve every input dtype; a GPU table keeps float32 (device memory)
        dtype = input_float_dtype(arr)
    arr = xp.asarray(arr, dtype=dtype)
    if arr.dtype.kind == "f":
        has_nan, has_inf = _nonfinite(arr, xp)
        if has_nan or has_inf:
            if has_inf:
                raise ValueError(
                    "Input X contains infinity or a value too large for "
                    f"{arr.dtype}. Replace inf with a finite value or NaN (missing)."
                )
            # a missing category is a category's absence, not a missing number: a
            # categorical column may hold NaN even where numbers may not
            cat = _fitted_mask(estimator, d)
            if not allow_nan and (
                not cat.any() or bool(xp.isnan(arr[:, xp.asarray(np.flatnonzero(~cat))]).any())
            ):
                raise ValueError(
                    "Input X contains NaN. This estimator does not accept missing "
                    "values; impute them first."
                )
    if reset:
        estimator.n_features_in_ = d
    else:
        expected = getattr(estimator, "n_features_in_", None)
        if expected is not None and d != expected:
            raise ValueError(
                f"X has {d} features, but {type(estimator).__name__} is expecting {expected} "
                "features as input."
            )
    return to_device(arr, device)


@njit(cache=True, nogil=True)
def _scan_nonfinite(a):
    """(any NaN, any +-inf) of a 2-D float array, without an n x d temporary."""
    has_nan = False
    has_inf = False
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            v = a[i, j]
            if v != v:
                has_nan = True
            elif v - v != 0.0:  # inf - inf is NaN
                has_inf = True
        if has_nan and has_inf:
            break
    return has_nan, has_inf


def _nonfinite(arr, xp):
    if isinstance(arr, np.ndarray) and arr.dtype in (np.float32, np.float64):
        if arr.flags.f_contiguous and not arr.flags.c_contiguous:
            arr = arr.T  # the same values in C order: one compiled scan serves both orders
        if arr.flags.c_contiguous:
            return _scan_nonfinite(read_only(arr))  # the compiled scan, no temporaries
        has_nan = has_inf = False  # strided: C-order chunks, one compiled signature still
        for rows in row_slices(arr.shape[0], arr.shape[1], CHUNK_ELEMENTS_NONFINITE):
            nan, inf = _scan_nonfinite(read_only(np.ascontiguousarray(arr[rows])))
            has_nan, has_inf = has_nan or nan, has_inf or inf
            if has_nan and has_inf:
                break
        return has_nan, has_inf
    finite = xp.isfinite(arr)
    if bool(finite.all()):
        return False, False
    return bool(xp.isnan(arr).any()), bool(xp.isinf(arr).any())


def check_y(y, n_samples: int, *, device: str = "cpu"):
    """Validate a 1-D target of length ``n_samples``: finite when numeric.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        numpy, pandas, cupy, cudf, polars or pyarrow; a column vector is raveled with a
        DataConversionWarning.
    n_samples : int
        Rows of X.
    device : {"cpu", "gpu"}, default="cpu"

    Returns
    -------
    y : ndarray of shape (n_samples,)
        numpy or cupy, not yet encoded; labels may be of any dtype.
    """
    if y is None:
        raise ValueError(
            "y is None; this estimator needs a target y to fit. "
            "requires y to be passed, but the target y is None."
        )
    arr = as_array(y, device, "y")
    if arr.ndim == 2 and arr.shape[1] == 1:
        warn_from_caller(
            "A column-vector y was passed when a 1d array was expected. Please change "
            "the shape of y to (n_samples, ), for example using ravel().",
            DataConversionWarning,
        )
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,); got shape {arr.shape}.")
    if arr.shape[0] != n_samples:
        raise ValueError(
            f"Found input variables with inconsistent numbers of samples: [{n_samples}, "
            f"{arr.shape[0]}] (X has {n_samples} rows, y has {arr.shape[0]})."
        )
    if arr.dtype.kind in "fc":
        xp = namespace_of(arr)
        if arr.dtype.kind == "c":
            raise ValueError("Complex data not supported: y is complex.")
        if bool(xp.isnan(arr).any()):
            raise ValueError("Input y contains NaN; every target value must be finite.")
        if bool(xp.isinf(arr).any()):
            raise ValueError("Input y contains infinity; every target value must be finite.")
    return arr


def check_regression_target(y):
    """A regression target as float64.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        numpy or cupy.

    Returns
    -------
    y : ndarray of shape (n_samples,), float64, on y's device.

    Raises a ValueError for non-numeric or non-finite targets.
    """
    kind = y.dtype.kind
    if kind not in "biuf":
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"y has dtype {y.dtype}; a regressor needs a numeric target."
            ) from None
    xp = namespace_of(y)
    y = xp.asarray(y, dtype=np.float64)
    if not bool(xp.isfinite(y).all()):
        raise ValueError("Input y contains NaN or infinity; every target value must be finite.")
    return y


def _label_types(y_host):
    """The kinds of Python values among object labels: a subset of {"number", "string",
    "bool", other type names}."""
    kinds = set()
    for v in y_host.ravel():
        if isinstance(v, (bool, np.bool_)):
            kinds.add("bool")
        elif isinstance(v, (numbers.Number, np.number)):
            kinds.add("number")
        elif isinstance(v, (str, bytes, np.str_)):
            kinds.add("string")
        else:
            kinds.add(type(v).__name__)
    return kinds


def check_classification_labels(y):
    """Raise a ValueError unless ``y`` holds class labels.

    Rejects NaN / infinity, labels of mixed types (strings and numbers, say, which cannot be
    ordered), and targets scikit-learn does not call class labels ("Unknown label type:
    continuous", ...).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        numpy or cupy.
    """
    from sklearn.utils.multiclass import check_classification_targets

    xp = namespace_of(y)
    if y.dtype.kind == "f" and not bool(xp.isfinite(y).all()):
        raise ValueError("Input y contains NaN or infinity; every label must be finite.")
    y_host = to_host(y)
    if y_host.dtype.kind == "O":
        kinds = _label_types(y_host)
        if len(kinds) > 1:
            raise ValueError(
                f"y has labels of mixed types ({', '.join(sorted(kinds))}); a "
                "classifier needs labels of one type: convert them first, for "
                "example with y.astype(str)."
            )
    check_classification_targets(y_host)


def encode_classes(y):
    """Encode labels to 0..K-1.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels, numpy or cupy.

    Returns
    -------
    classes : ndarray of shape (n_classes,)
        Sorted labels, a host numpy array (labels are few and are needed on the host for
        ``predict``).
    codes : ndarray of shape (n_samples,), int32
        On y's device.

    Raises when there is only one class.
    """
    if is_cupy_array(y):
        classes_dev, enc = namespace_of(y).unique(y, return_inverse=True)
        classes = classes_dev.get()
        enc = enc.astype(np.int32)
    else:
        y_host = np.asarray(y)
        if y_host.dtype.kind == "f" and not np.isfinite(y_host).all():
            raise ValueError("Input y contains NaN or infinity; every label must be finite.")
        try:
            classes, enc = np.unique(y_host, return_inverse=True)
        except TypeError as exc:
            raise ValueError(f"y has labels of mixed, unorderable types: {exc}") from exc
        enc = enc.astype(np.int32)
    if classes.shape[0] < 2:
        raise ValueError(
            f"y has only 1 class ({np.asarray(classes[0]).tolist()!r}); a classifier needs "
            "at least 2 classes."
        )
    return classes, enc


def encode_known_classes(y, classes, what="eval_set"):
    """Codes of ``y`` among the fitted ``classes`` (a validation set's labels).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels, numpy or cupy.
    classes : ndarray of shape (n_classes,)
        The sorted labels seen in training.
    what : str
        The data's name in the error message.

    Returns
    -------
    codes : ndarray of shape (n_samples,), int32, on y's device.

    Raises a ValueError naming the labels not seen in training.
    """
    y_host = to_host(y)
    try:
        idx = np.searchsorted(classes, y_host)
    except TypeError as exc:
        raise ValueError(f"{what} has labels of another type than y's: {exc}") from exc
    idx = np.clip(idx, 0, len(classes) - 1)
    known = classes[idx] == y_host
    if not np.all(known):
        unknown = np.unique(y_host[~known])
        raise ValueError(f"{what} has labels not seen in y: {unknown[:5].tolist()}.")
    return like(idx.astype(np.int32), y)


ALL_ZERO_WEIGHTS = "sample_weight is zero everywhere; at least one row needs weight > 0."


def check_sample_weight(
    sample_weight, n_samples: int, *, device: str = "cpu", allow_all_zero: bool = False
):
    """Validate sample weights.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), float or None
        A number means that weight for every row.
    n_samples : int
    device : {"cpu", "gpu"}, default="cpu"
    allow_all_zero : bool, default=False
        Accept weights that are all zero (one partition of a larger table, ``gpufs.dask``,
        which checks the whole table's weights itself).

    Returns
    -------
    None, or ndarray of shape (n_samples,), float64, finite and >= 0, not all zero.
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Number):
        sample_weight = np.full(n_samples, float(sample_weight))
    w = as_array(sample_weight, device, "sample_weight")
    if w.ndim != 1 or w.shape[0] != n_samples:
        raise ValueError(f"sample_weight must have shape ({n_samples},), got {tuple(w.shape)}.")
    w = _check_numeric(w, "sample_weight")
    xp = namespace_of(w)
    w = xp.asarray(w, dtype=np.float64)
    if not bool(xp.isfinite(w).all()):
        raise ValueError("sample_weight contains NaN or infinity.")
    if bool((w < 0).any()):
        raise ValueError("sample_weight has negative values; weights must be >= 0.")
    if not allow_all_zero and not bool((w > 0).any()):
        raise ValueError(ALL_ZERO_WEIGHTS)
    return to_device(w, device)


def check_costs(costs, n_features: int):
    """Validate per-feature costs.

    Parameters
    ----------
    costs : array-like of shape (n_features,) or None
    n_features : int

    Returns
    -------
    ndarray of shape (n_features,), float64, finite and >= 0 (ones for None).
    """
    if costs is None:
        return np.ones(n_features, dtype=np.float64)
    try:
        c = np.array(as_array(costs, "cpu", "feature_costs"), dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"feature_costs must be an array of numbers, one per feature: {exc}"
        ) from None
    if c.ndim != 1 or c.shape[0] != n_features:
        raise ValueError(
            f"feature_costs must have one entry per feature: expected shape ({n_features},), "
            f"got {tuple(c.shape)}."
        )
    if not np.isfinite(c).all():
        raise ValueError("feature_costs contains NaN or infinity; costs must be finite.")
    if (c < 0).any():
        bad = np.flatnonzero(c < 0)[:5].tolist()
        raise ValueError(f"feature_costs must be >= 0; negative at feature indices {bad}.")
    check_cost_range(c, "feature_costs")
    return c


#: Positive costs must lie within these bounds (0 is a free feature). Costs count only
#: relative to ``mu`` (GBFS) and to one another (ControlBurn's lasso, where a scale of all
#: costs is a scale of lambda), so any sensible costs fit; ControlBurn's lambda search failed
#: beyond them (all costs 1e-200: a math domain error; 1e200: a ZeroDivisionError; one cost
#: 1e300 among ones: a ZeroDivisionError), and worked from 1e-100 to 1e100 (mixed as well).
COST_RANGE = (1e-100, 1e100)


def check_cost_range(costs, name):
    """ValueError where a positive cost in ``costs`` (float64, finite, >= 0) lies outside
    ``COST_RANGE``."""
    lo, hi = COST_RANGE
    pos = costs[costs > 0]
    if pos.size and (pos.min() < lo or pos.max() > hi):
        raise ValueError(
            f"{name} runs from {pos.min():.3g} to {pos.max():.3g}; positive costs must lie "
            f"between {lo:g} and {hi:g}. Only their ratios to each other (and to mu) count: "
            "rescale them, for example to a mean of 1, or give what is free the cost 0."
        )


def check_groups(groups, n_features: int):
    """Validate feature groups ("bags").

    Parameters
    ----------
    groups : array-like of shape (n_features,) of int, or None
        Integer group labels (integer-valued floats are accepted); None: each feature its own
        group.
    n_features : int

    Returns
    -------
    ndarray of shape (n_features,), int32
        Groups renumbered 0..G-1 in order of first appearance.
    """
    if groups is None:
        return np.arange(n_features, dtype=np.int32)
    g = np.asarray(as_array(groups, "cpu", "feature_groups"))
    if g.ndim != 1 or g.shape[0] != n_features:
        raise ValueError(
            f"feature_groups must give one group label per feature: expected shape "
            f"({n_features},), got {tuple(g.shape)}."
        )
    if g.dtype.kind == "f":
        if not np.isfinite(g).all():
            raise ValueError("feature_groups contains NaN or infinity.")
        if not np.all(g == np.round(g)):
            raise ValueError("feature_groups must be integer labels.")
    elif g.dtype.kind not in "iu":
        raise ValueError(f"feature_groups must be integer labels, got dtype {g.dtype}.")
    _, first_idx, inverse = np.unique(g, return_index=True, return_inverse=True)
    # Renumber by first appearance so labels are stable and readable.
    order = np.argsort(first_idx)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    return rank[inverse].astype(np.int32)
