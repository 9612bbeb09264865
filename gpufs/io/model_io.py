"""Model files: the envelope, the format version and the migration of the first format.

Owns ``save_model`` / ``load_model`` (the file on disk: a size cap, a regular file, an atomic
rename), the envelope of every model file (format tag and version, the writer's version, the
estimator's class, its parameters, ``n_features_in``, feature names and class labels), the
registry of the families' codecs (``register_codec``: each family encodes its own ``fitted``
part, beside its estimators) and the migration of files of the first format
(``"gpufs.TreeEnsemble/1"``). The readers and the strict-JSON rules are
``gpufs.io._strict_json``'s; the tree and bins codecs are ``gpufs.engine.tree``'s and
``gpufs.engine.binning``'s. The format, field by field, and why loading a file from a stranger is
safe: ``docs/model_format.rst`` and ``SECURITY.md``.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
import re
import tempfile

import numpy as np

from ..engine.binning import bins_to_dict, read_bins
from ..engine.tree import ensemble_from_dict, ensemble_to_dict
from . import _files
from ._strict_json import (
    FORMAT_VERSION,
    MAX_BINNED_FEATURES,
    MAX_CLASSES,
    MAX_CONTAINERS,
    MAX_DEPTH,
    MAX_FEATURES,
    MAX_NESTING,
    MAX_NODES,
    At,
    ModelFileError,
    Token,
    dumps,
    kind_of,
    loads,
    plain,
    read_bool_array,
    read_float_array,
    read_int,
    read_int_array,
    read_list,
    read_obj,
    read_scalar,
    read_str,
    scalar_out,
    short,
)

FORMAT = "gpufs.model"
_FORMAT1 = "gpufs.TreeEnsemble/1"
#: Largest file ``load_model`` reads by default (bytes). Parsing JSON takes a few times the
#: file's size in memory; every array built from it is no larger than the data it came from.
MAX_FILE_BYTES = 256 << 20
#: The label dtypes a file may name (numpy's ``dtype.str``, little-endian)
_CLASS_DTYPE = re.compile(r"^(\|b1|[<|](i1|i2|i4|i8|u1|u2|u4|u8)|<f[48]|<U[0-9]{1,5}|object)$")


def _read_text(path, max_bytes):
    # a regular file only (a FIFO would block the read forever), at most max_bytes
    data = _files.read_regular(path, max_bytes, ModelFileError)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{os.fspath(path)} is not UTF-8 text: {exc}") from None


def _write_text(path, text):
    """Write through a temporary file and a rename, so no half-written file is ever left.

    Only a regular file is replaced (a FIFO, a device or a folder is refused); the file gets
    the permissions of the file it replaces, or those the umask gives a new one. Errors name
    ``path``, not the temporary file.
    """
    path = os.fspath(path)
    kind = _files.special_kind(path)
    if kind is not None:
        raise ValueError(
            f"cannot save the model to {path}: it is {kind}, not a file; "
            "save_model replaces regular files only."
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"cannot save the model: no folder {folder}", path)
    mode = _files.new_file_mode(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gpufs-model-", suffix=".tmp")
    except OSError as exc:  # not writable, say: report the model's path
        raise type(exc)(exc.errno, f"cannot save the model: {exc.strerror}", path) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _encode_param(name, value, est_name):
    """A constructor parameter as JSON (the inverse is :func:`_decode_param`).

    None, booleans, integers, finite floats and strings as themselves; numpy scalars as
    their Python value; array-likes (costs, groups) as flat lists; a dict (``group_costs``)
    as ``{"dict": [[key, value], ...]}``; a gpufs GBFS estimator (``refit_estimator``) as
    ``{"estimator": name, "params": {...}}``; a RandomState or Generator, which has no JSON
    form, as None. Anything else cannot be saved.
    """
    from .. import _device

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.random.RandomState, np.random.Generator)):
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise ValueError(f"cannot save {est_name}: parameter {name}={value!r} is not finite.")
        return float(value)
    if isinstance(value, dict):
        return {
            "dict": [
                [scalar_out(k, name, est_name), scalar_out(v, name, est_name)]
                for k, v in value.items()
            ]
        }
    if hasattr(value, "get_params"):
        kind = type(value).__name__
        if (
            kind not in ("GBFSRegressor", "GBFSClassifier")
            or type(value).__module__ != "gpufs.selectors.gbfs"
        ):
            raise ValueError(
                f"cannot save {est_name} with {name}={kind}(...) in the gpufs model format, "
                "which describes gpufs models only. Save it with pickle or joblib instead "
                "(and load pickles only from sources you trust: SECURITY.md)."
            )
        return {
            "estimator": kind,
            "params": {
                k: _encode_param(k, v, est_name) for k, v in value.get_params(deep=False).items()
            },
        }
    arr = np.asarray(_device.to_host(value))
    if arr.ndim != 1:
        raise ValueError(f"cannot save {est_name}: parameter {name} is not a flat list.")
    return [scalar_out(x, name, est_name) for x in arr.tolist()]


def _decode_param(v, at, nested=False):
    if type(v) is list:
        read_list(v, at, max_length=MAX_FEATURES)
        return [read_scalar(x, at[i]) for i, x in enumerate(v)]
    if type(v) is dict:
        if "dict" in v:
            read_obj(v, at, ["dict"])
            out = {}
            for i, pair in enumerate(read_list(v["dict"], at["dict"], max_length=MAX_FEATURES)):
                read_list(pair, at["dict"][i], 2)
                key = read_scalar(pair[0], at["dict"][i][0])
                if key in out:
                    at["dict"][i][0].fail(f"key {short(key)} appears twice.")
                out[key] = read_scalar(pair[1], at["dict"][i][1])
            return out
        if nested:
            at.fail("estimators nested more than one level deep.")
        read_obj(v, at, ["estimator", "params"])
        cls = _estimator_class(v["estimator"], at["estimator"], ("GBFSRegressor", "GBFSClassifier"))
        est = cls(**_decode_params(v["params"], at["params"], cls, nested=True))
        _check_params(est, at["params"])
        return est
    return read_scalar(v, at)


def _decode_params(d, at, cls, nested=False):
    if type(d) is not dict:
        at.fail(f"expected an object, got {kind_of(d)}.")
    known = cls().get_params(deep=False)
    extra = [k for k in d if k not in known]
    if extra:
        at.fail(f"{cls.__name__} has no parameter {short(extra[0])}.")
    # parameters added after format 2 appeared take their defaults (the behaviour of that
    # fit); any other missing parameter means an edited file
    since = _CODECS[cls].params_since_format2
    missing = [k for k in known if k not in d and k not in since]
    if missing:
        at.fail(f"missing parameter {missing[0]!r} (a model file lists every parameter).")
    # a parameter whose default changed the fit when it appeared takes, in an older file,
    # the value that reproduces that file's fit (the categorical guards off, gain ranking)
    legacy = {
        k: v
        for k, v in getattr(_CODECS[cls], "params_before", {}).items()
        if k in known and k not in d
    }
    return {**legacy, **{k: _decode_param(v, at[k], nested) for k, v in d.items()}}


def _check_params(est, at):
    """Every parameter within the estimator's own ``_parameter_constraints`` (what ``fit``
    checks first), the failure named as ``params.<name>``."""
    from sklearn.utils._param_validation import (
        InvalidParameterError,
        validate_parameter_constraints,
    )

    constraints = getattr(est, "_parameter_constraints", {})
    for name, value in est.get_params(deep=False).items():
        if name not in constraints:
            continue
        try:
            validate_parameter_constraints(
                {name: constraints[name]}, {name: value}, caller_name=type(est).__name__
            )
        except InvalidParameterError as exc:
            at[name].fail(str(exc))


def _check_feature_params(est, at, n_features):
    """``feature_costs`` and ``feature_groups`` (where the estimator has them) as ``fit``
    checks them against the model's ``n_features``."""
    from ..data._input import check_costs, check_groups

    for name, check in (("feature_costs", check_costs), ("feature_groups", check_groups)):
        if name not in est.get_params(deep=False):
            continue
        try:
            check(getattr(est, name), n_features)
        except (TypeError, ValueError) as exc:
            at[name].fail(str(exc))


def classes_out(classes):
    c = np.asarray(classes)
    if c.dtype.kind == "O":
        kinds = {type(x) for x in c.tolist()}
        if len(kinds) != 1 or not kinds <= {str, int, float, bool}:
            raise ValueError(
                "cannot save class labels of mixed or non-JSON types: "
                f"{sorted(k.__name__ for k in kinds)}."
            )
        dtype = "object"
    else:
        dtype = c.dtype.newbyteorder("<").str
    if not _CLASS_DTYPE.match(dtype):
        raise ValueError(f"cannot save class labels of dtype {c.dtype}.")
    values = c.tolist()
    if c.dtype.kind == "f" or (dtype == "object" and isinstance(values[0], float)):
        values = [scalar_out(x, "classes_", "this model") for x in values]
    return {"dtype": dtype, "values": values}


def read_classes(d, at, min_count=2, what="a classifier has at least 2 classes."):
    """Sorted distinct labels (class labels; a multitask model's task labels, at least one)."""
    read_obj(d, at, ["dtype", "values"])
    dtype = read_str(d["dtype"], at["dtype"])
    if not _CLASS_DTYPE.match(dtype):
        at["dtype"].fail(f"{short(dtype)} is not a label dtype gpufs writes.")
    values = read_list(d["values"], at["values"], max_length=MAX_CLASSES)
    if len(values) < min_count:
        at["values"].fail(what)
    vat = at["values"]
    if dtype == "object":
        kinds = {type(x) for x in values}
        if len(kinds) != 1 or not kinds <= {str, int, float, bool}:
            vat.fail("labels must all be strings, all integers, all numbers or all booleans.")
        vals = [read_scalar(x, vat[i]) for i, x in enumerate(values)]
        try:
            ordered = all(a < b for a, b in zip(vals, vals[1:]))
        except TypeError:
            ordered = False
        arr = np.empty(len(vals), dtype=object)
        arr[:] = vals
    else:
        dt = np.dtype(dtype)
        if dt.kind == "b":
            arr = read_bool_array(values, vat, (len(values),))
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            arr = read_int_array(values, vat, (len(values),), int(info.min), int(info.max), dt)
        elif dt.kind == "f":
            arr = read_float_array(values, vat, (len(values),)).astype(dt)
            if dt != np.float64 and not np.array_equal(
                arr.astype(np.float64), np.array(values, dtype=np.float64)
            ):
                vat.fail(f"a label is not exactly representable as {dtype}.")
        else:
            width = dt.itemsize // 4
            for i, x in enumerate(values):
                if read_str(x, vat[i]) != x[:width] or "\x00" in x:
                    vat[i].fail(f"label longer than the dtype's {width} characters.")
            arr = np.array(values, dtype=dt)
        ordered = bool(np.all(arr[1:] > arr[:-1]))
    if not ordered:
        vat.fail("labels must be distinct and sorted (as numpy.unique returns them).")
    return arr


def _header(est, fitted):
    from .. import __version__

    name = type(est).__name__
    names = getattr(est, "feature_names_in_", None)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "gpufs_version": __version__,
        **body_header(est, name, names),
        "fitted": fitted,
    }


def body_header(est, name, names):
    return {
        "estimator": name,
        "params": {k: _encode_param(k, v, name) for k, v in est.get_params(deep=False).items()},
        "n_features_in": int(est.n_features_in_),
        "feature_names_in": None if names is None else [str(c) for c in names],
        "classes": classes_out(est.classes_) if hasattr(est, "classes_") else None,
    }


BODY_KEYS = ["estimator", "params", "n_features_in", "feature_names_in", "classes", "fitted"]


#: The estimators the format describes, by class name (a file names one of them).
ESTIMATORS = (
    "GBFSRegressor",
    "GBFSClassifier",
    "StagewiseRegressor",
    "StagewiseClassifier",
    "ControlBurnRegressor",
    "ControlBurnClassifier",
    "MultiTaskGBFSRegressor",
    "MultiTaskGBFSClassifier",
)
#: estimator class -> its family's codec (``register_codec``, called by each family's module)
_CODECS = {}


def register_codec(codec, *classes):
    """Make ``codec`` the writer and reader of the ``fitted`` part of ``classes``' files.

    Each selector family's module registers its own codec (``selectors/_gbfs_io.py``, ...),
    so this module never imports the families: loading a file imports the class it names
    (``gpufs.<name>``), which registers its codec.

    Parameters
    ----------
    codec : type
        Has ``binned`` (bool), ``params_since_format2`` (set of str), and the static methods
        ``write(est) -> dict``, ``read(est, fitted, at)`` and ``check_fit_params(est, at)``.
    *classes : type
        The estimator classes it encodes.
    """
    for cls in classes:
        _CODECS[cls] = codec


def _estimator_class(name, at, allowed=None):
    import gpufs

    choices = allowed or ESTIMATORS
    read_str(name, at, set(choices))
    return getattr(gpufs, name)


def read_body(doc, at, expected=None, nested=False):
    """Validate a model body (header fields + fitted) and build the fitted estimator."""
    name = doc["estimator"]
    cls = _estimator_class(
        name, at["estimator"], ("GBFSRegressor", "GBFSClassifier") if nested else None
    )
    if expected is not None and cls is not expected:
        raise ModelFileError(f"the file holds a {name}, not a {expected.__name__}.")
    est = cls(**_decode_params(doc["params"], at["params"], cls))
    _check_params(est, at["params"])
    codec = _CODECS[cls]
    d = read_int(
        doc["n_features_in"],
        at["n_features_in"],
        1,
        MAX_BINNED_FEATURES if codec.binned else MAX_FEATURES,
    )
    est.n_features_in_ = d
    _check_feature_params(est, at["params"], d)
    names = doc["feature_names_in"]
    if names is not None:
        read_list(names, at["feature_names_in"], d)
        seen = set()
        for i, x in enumerate(names):
            if read_str(x, at["feature_names_in"][i]) in seen:
                at["feature_names_in"][i].fail(
                    f"name {short(x)} appears twice (a table's columns have distinct names)."
                )
            seen.add(x)
        est.feature_names_in_ = np.asarray(names, dtype=object)
    classifier = name.endswith("Classifier")
    if classifier != (doc["classes"] is not None):
        at["classes"].fail("a classifier has classes and a regressor has none.")
    if classifier:
        est.classes_ = read_classes(doc["classes"], at["classes"])
    codec.read(est, doc["fitted"], at["fitted"])
    return est


def _untoken(v):
    """Format 1 held NaN / Infinity tokens; format 2 writes them as strings."""
    if isinstance(v, Token):
        return v.name
    if type(v) is list:
        return [_untoken(x) for x in v]
    if type(v) is dict:
        return {k: _untoken(x) for k, x in v.items()}
    return v


def _migrate_format1(p):
    """Map a gpufs 0.1.0 GBFS file onto format 2 (then validated like any file)."""
    at = At()
    read_obj(
        p,
        at,
        [
            "estimator",
            "params",
            "ensemble",
            "bin_mapper",
            "selected_features",
            "first_use_tree",
            "feature_importances",
            "selection_record",
            "n_features_in",
            "feature_names_in",
            "n_estimators_",
            "classes",
        ],
    )
    name = read_str(p["estimator"], at["estimator"], {"GBFSRegressor", "GBFSClassifier"})
    e = read_obj(
        p["ensemble"],
        at["ensemble"],
        ["format", "max_depth", "n_features", "base_score", "tree_column", "trees"],
    )
    classes = p["classes"]
    if classes is not None:
        values = read_list(classes, at["classes"], max_length=MAX_CLASSES)
        kinds = {type(x) for x in values}
        if len(kinds) != 1 or not kinds <= {str, int, float, bool}:
            at["classes"].fail(
                "labels must all be strings, all integers, all numbers or all booleans."
            )
        classes = classes_out(np.asarray(values))
    rec = _untoken(p["selection_record"])
    # gpufs 0.1.0 fitted at the mu it was given (no search)
    params_mu = p["params"].get("mu") if type(p["params"]) is dict else None
    base = read_list(_untoken(e["base_score"]), at["ensemble"]["base_score"])
    cols = read_list(e["tree_column"], at["ensemble"]["tree_column"])
    params = p["params"]
    if type(params) is dict:  # 0.1.0 had fewer parameters: the others take their defaults
        import gpufs

        cls = getattr(gpufs, name)
        defaults = {**cls().get_params(deep=False), **getattr(_CODECS[cls], "params_before", {})}
        params = {**{k: _encode_param(k, v, name) for k, v in defaults.items()}, **params}
    return {
        "estimator": name,
        "params": params,
        "n_features_in": p["n_features_in"],
        "feature_names_in": p["feature_names_in"],
        "classes": classes,
        "fitted": {
            "device": "cpu",
            "ensemble": {
                "max_depth": e["max_depth"],
                "n_features": e["n_features"],
                "n_outputs": len(base),
                "n_trees": len(cols),
                "base_score": base,
                "tree_column": cols,
                "trees": _untoken(e["trees"]),
            },
            "bins": _untoken(p["bin_mapper"]),
            "n_estimators": p["n_estimators_"],
            "selected_features": p["selected_features"],
            "first_use_tree": p["first_use_tree"],
            "feature_importances": _untoken(p["feature_importances"]),
            "selection_record": rec,
            "mu": params_mu,
            "mu_search": None,
            "fit_times": None,
            "selection_path": None,
        },
    }


def to_document(est) -> dict:
    """The model file's content of a fitted gpufs estimator.

    Parameters
    ----------
    est : estimator
        A fitted gpufs selector.

    Returns
    -------
    dict
        JSON-ready.
    """
    from sklearn.utils.validation import check_is_fitted

    name = type(est).__name__
    codec = _CODECS.get(type(est))
    if codec is None:
        raise ValueError(f"{name} has no gpufs model format.")
    check_is_fitted(est)
    _check_saveable(est, name)
    return _header(est, codec.write(est))


def _check_saveable(est, name):
    """What load_model checks of the parameters, checked before writing: a parameter set
    out of its range, or changed since fit (``set_params`` without a refit) so that it no
    longer describes the fitted model, would make a file that does not load."""
    from sklearn.utils._param_validation import InvalidParameterError

    try:
        est._validate_params()
        _check_feature_params(est, At("params"), est.n_features_in_)
        _CODECS[type(est)].check_fit_params(est, At("fitted"))
    except (InvalidParameterError, ModelFileError) as exc:
        raise ValueError(
            f"cannot save {name}: {exc} The parameters must be those of the fit: "
            "refit the model, or set them back."
        ) from None


def from_document(doc, expected=None):
    """The fitted estimator a parsed model file describes (validated completely first).

    Parameters
    ----------
    doc : object
        The parsed file (:func:`loads`).
    expected : type or None, default=None
        The estimator class the caller asks for; a file holding another raises.

    Returns
    -------
    estimator
    """
    at = At()
    if type(doc) is not dict:
        at.fail(f"expected a JSON object, got {kind_of(doc)}.")
    if (
        "format" not in doc
        and type(doc.get("ensemble")) is dict
        and doc["ensemble"].get("format") == _FORMAT1
    ):
        body = _migrate_format1(doc)
        return read_body(body, at, expected)
    fmt = doc.get("format")
    if fmt != FORMAT:
        at.fail(f"not a gpufs model file (format={short(fmt)}, expected {FORMAT!r}).")
    read_obj(doc, at, ["format", "format_version", "gpufs_version"] + BODY_KEYS)
    version = doc["format_version"]
    if version != FORMAT_VERSION:
        at["format_version"].fail(
            f"format version {short(version)}; this gpufs reads version "
            f"{FORMAT_VERSION} (and migrates the first format)."
        )
    read_str(doc["gpufs_version"], at["gpufs_version"])
    return read_body(doc, at, expected)


def save_model(est, path) -> None:
    """Write a fitted gpufs estimator to ``path`` as a model file (strict JSON).

    The file is written to a temporary name and renamed, so an interrupted save leaves no
    partial file. Raises ValueError for what the format cannot describe (a ControlBurn
    ``refit_estimator`` that is not a gpufs GBFS model, non-finite parameters).

    Parameters
    ----------
    est : estimator
        A fitted gpufs selector.
    path : str or path-like
    """
    _write_text(path, dumps(to_document(est)))


def load_model(path, expected=None, max_bytes=None):
    """Read a model file written by :func:`save_model` (or gpufs 0.1.0's format).

    Parameters
    ----------
    path : str or path-like
    expected : estimator class or None
        The class the caller wants; a file holding another class raises ModelFileError.
    max_bytes : int or None
        Largest file read (default ``MAX_FILE_BYTES``).

    Returns
    -------
    The fitted estimator.

    Raises
    ------
    ModelFileError (a ValueError)
        When the file is not a model gpufs could have written; the message names the field.
    """
    text = _read_text(path, MAX_FILE_BYTES if max_bytes is None else int(max_bytes))
    return from_document(loads(text), expected)


def estimator_save_model(self, path):
    """Write the fitted model to ``path`` as a gpufs model file (strict JSON).

    The file holds what ``predict``, ``transform`` and the selection attributes need, and no
    code (the format: ``gpufs.io.model_io``; what loading trusts: SECURITY.md). It is written to
    a temporary file and renamed, so an interrupted save leaves no partial file. ControlBurn:
    the refit model is saved inside; a ``refit_estimator`` other than a gpufs GBFS model
    cannot be described by the format and raises ValueError (pickle such a model); the grown
    forest (``forest_``) is not saved.

    Parameters
    ----------
    path : str or path-like
    """
    save_model(self, path)


def estimator_load_model(cls, path, *, max_bytes=None):
    """The fitted estimator saved in ``path`` by ``save_model``.

    Every field is validated before any array is used; a file that is not a model of this
    class that gpufs could have written raises one ValueError naming the field. Files of
    gpufs 0.1.0's format are migrated.

    Parameters
    ----------
    path : str or path-like
    max_bytes : int, default=None
        Largest file read (None: ``gpufs.io.model_io.MAX_FILE_BYTES``, 256 MiB); raise it only
        for a trusted file.

    Returns
    -------
    estimator : an instance of the class it is called on, fitted
    """
    return load_model(path, expected=cls, max_bytes=max_bytes)


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_BINNED_FEATURES",
    "MAX_CLASSES",
    "MAX_CONTAINERS",
    "MAX_DEPTH",
    "MAX_FEATURES",
    "MAX_FILE_BYTES",
    "MAX_NESTING",
    "MAX_NODES",
    "ModelFileError",
    "bins_to_dict",
    "dumps",
    "ensemble_from_dict",
    "ensemble_to_dict",
    "estimator_load_model",
    "estimator_save_model",
    "from_document",
    "load_model",
    "loads",
    "plain",
    "read_bins",
    "save_model",
    "to_document",
]
