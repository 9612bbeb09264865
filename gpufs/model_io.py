"""Model files: one versioned, validated, strict-JSON format for every gpufs estimator.

Owns the model file format (its schema, in this module only), ``save_model`` / ``load_model``
for every estimator family (GBFS, stagewise, ControlBurn, multitask GBFS), the JSON form of
:class:`gpufs.tree.TreeEnsemble` and :class:`gpufs.binning.BinMapper`, the size caps, and the
migration of files of the first format (``"gpufs.TreeEnsemble/1"``).

A model file is data from strangers
-----------------------------------
Loading reads the file as text, parses it as strict JSON and checks **every** field (type,
dtype, length, range and the invariants between fields) before any array is handed to
compiled code. Anything that is not a model this library could have written raises ONE
:class:`ModelFileError` (a ``ValueError``) naming the field, e.g.
``ensemble.trees.feature[3][7]: feature index 120 >= n_features 100``. Loading never
executes code from the file, never imports a name it read, and allocates only arrays whose
sizes are backed by data present in the file or bounded by the caps below, so a small file
cannot make the process allocate gigabytes. (Values that only describe how the model was fit
and are not used to predict, such as the train losses, are checked for type and range but
cannot be proven true: a loaded model is exactly as trustworthy as its author.)

Why a small explicit validator and not pydantic or jsonschema: the checks that make a file
safe are mostly *between* fields (a feature index below the header's ``n_features``; a split
node's children inside the tree; a threshold equal to the cut point its bin names; the number
of trees equal to rounds times outputs), which both libraries leave to hand-written validator
functions anyway; the arrays hold up to millions of numbers, checked here with vectorized
numpy instead of one Python call per element; and gpufs's core install stays numpy, numba,
scipy and scikit-learn. Each check below reads as the rule it enforces.

Strict JSON
-----------
Files are RFC 8259 JSON: written with ``allow_nan=False`` and read with the non-standard
tokens ``NaN``, ``Infinity`` and ``-Infinity`` rejected, duplicate keys rejected, and numbers
that overflow float64 (``1e999``) rejected. A non-finite float is written as one of the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (the convention of Protocol Buffers' JSON mapping),
and only in the fields that may hold one: a split threshold is ``"Infinity"`` for the split
that sends every value left and the missing values right; a validation loss is ``"NaN"`` when
there was no validation data. Floats are written with Python's shortest round-trip repr, so a
loaded model predicts bit-identically.

Format, version 2
-----------------
::

    {"format": "gpufs.model", "format_version": 2, "gpufs_version": "<the writer>",
     "estimator": "GBFSClassifier",          # the class; load_model checks it
     "params": {...},                         # get_params(); see _encode_param
     "n_features_in": 30, "feature_names_in": null | [str, ...],
     "classes": null | {"dtype": "<i8", "values": [...]},
     "fitted": {...}}                         # per family, see _FAMILIES

* GBFS ``fitted``: ``device``, ``ensemble`` (:func:`ensemble_to_dict`), ``bins``
  (:func:`bins_to_dict`), ``n_estimators`` (rounds kept), ``selected_features``,
  ``first_use_tree``, ``feature_importances``, ``selection_record``, ``mu``, and the
  free-form ``mu_search``, ``fit_times``, ``selection_path``; ``evals_result`` may be absent
  (files written before it existed: it is then rebuilt from the selection record).
  ``group_test_candidates`` (one sorted list of distinct features per tree) is present
  exactly when the params say ``split_search="group_testing"``, and every feature a tree
  added to the selection must be among its tree's candidates (or, with feature groups, in a
  group of one of them or of an earlier selection).
* Stagewise ``fitted``: ``device``, ``mean``, ``std``, ``selected_features``,
  ``standardized_coef``, ``bias``, ``coef``, ``intercept``, ``weights_history``,
  ``cost_history``, ``validation_cost_history``, and ``evals_result`` (may be absent, as
  for GBFS); with categorical columns also ``categories`` (the category -> code maps, as in
  ``bins``) and ``category_coef`` ([column, weights (n_models x n_codes)] per selected
  categorical column).
* ControlBurn ``fitted``: ``device``, ``bins``, the selection (``selected_features``,
  ``feature_importances``, ``tree_weights``, ``intercept``, ``lambda``, ``selection_exact``,
  ``forest_coverage``, ``forest_features``, ``n_trees``, ``selection_path``, ``fit_times``)
  and ``refit``: the refit model, a whole GBFS model in this format (without the first three
  keys), or the constant model used when nothing was selected. The grown forest (``forest_``)
  is training evidence, often larger than everything else together, and is not saved: a loaded
  ControlBurn model predicts and reports its selection, but has no ``forest_``. A
  ``refit_estimator`` other than a gpufs GBFS model cannot be described by this format and is
  refused at save time (pickle such a model, and see SECURITY.md about pickles).

* Multitask GBFS ``fitted``: ``device``, ``tasks`` (the task labels, in the form of
  ``classes``), ``bins``, ``ensembles`` (one per task, in the order of ``tasks``),
  ``n_estimators``, ``mu_t``, ``selected_features`` (Omega_G), ``selected_features_by_task``,
  ``feature_importances``, ``selection_records`` (one per task), and the free-form
  ``fit_times`` and ``selection_path``.

Categorical features: ``bins`` may hold ``categories`` (:func:`read_categories`: per
categorical column its categories in code order and its number of codes; its cut points are
then k + 0.5), and an ensemble with categorical features lists them in
``categorical_features`` (equal to the bins') and holds ``trees.cat_bits``: per tree one entry
``[node, w0, ..., w7]`` per split on a categorical feature (uint32 words of the bitset of the
category bins sent left; no bit at or above the feature's bin count), and such a split has bin
threshold 0 and threshold 0 (:func:`_read_cat_bits`).

The tree arrays are those of :mod:`gpufs.tree`: a complete binary tree of depth D, node i's
children are 2i+1 and 2i+2. A valid tree: node 0 is in use; an internal node (feature >= 0)
is not on the last level, so both children exist, and its children are in use; every other
node is unused and all-default (feature -1, zeros, false); a leaf has bin threshold 0,
threshold 0, missing_left false and gain 0; an internal node's row count is the sum of its
children's. Feature indices are below ``n_features``; a split's bin threshold is below the
feature's bin count and its threshold is exactly that bin's upper cut point (+inf for the top
bin, whose missing values go right). Cut points are finite and non-decreasing per feature: the
binning rule (midpoints between consecutive distinct values) can produce two equal cut points
from three adjacent floats, an empty bin that is harmless, so "strictly increasing" would
refuse models gpufs itself wrote. Leaf values are bounded so that no sum of a row's leaf values
and base score can overflow.

Caps (module constants): file size ``MAX_FILE_BYTES`` (``load_model(max_bytes=...)`` raises
it for a trusted, larger file), JSON lists and objects ``MAX_CONTAINERS``, tree depth
``MAX_DEPTH``, nodes of all trees ``MAX_NODES``, features ``MAX_FEATURES``
(``MAX_BINNED_FEATURES`` for models with cut points, which occupy 2 KiB per feature in
memory), classes ``MAX_CLASSES``, nesting of free-form records
``MAX_NESTING``.

Format 1 (``"gpufs.TreeEnsemble/1"``, written by gpufs 0.1.0, GBFS only) is migrated on load:
its NaN and Infinity tokens are read, the document is mapped onto format 2, and the result is
validated like any other file. Saving always writes format 2.
"""
from __future__ import annotations

import errno
import itertools
import json
import math
import numbers
import os
import re
import tempfile

import numpy as np

from . import _files
from . import _types as T

FORMAT = "gpufs.model"
FORMAT_VERSION = 2
ENSEMBLE_FORMAT = "gpufs.TreeEnsemble"
_FORMAT1 = "gpufs.TreeEnsemble/1"

#: Largest file ``load_model`` reads by default (bytes). Parsing JSON takes a few times the
#: file's size in memory; every array built from it is no larger than the data it came from.
MAX_FILE_BYTES = 256 << 20
#: Deepest tree (the estimators' ``max_depth`` upper bound).
MAX_DEPTH = 16
#: Nodes of all trees of one ensemble together (about 46 bytes each in memory).
MAX_NODES = 1 << 24
#: Features of a model without cut points (stagewise).
MAX_FEATURES = 1 << 20
#: Features of a model with cut points: the padded cut matrix takes 2 KiB per feature.
MAX_BINNED_FEATURES = 1 << 17
#: Classes of a classifier.
MAX_CLASSES = 1 << 16
#: Nesting depth of the free-form records (``selection_path``, ``fit_times``).
MAX_NESTING = 8
#: Longest string (class labels, feature names, parameter values).
MAX_STRING = 1 << 16
#: Most JSON lists and objects in one file. Parsing makes one Python object of about 70 bytes
#: per list or object whatever its content, so a file of empty lists ("[],", 3 bytes each)
#: takes 21 times its size in memory (numbers: at most 9 times); models hold a few lists per
#: tree and per feature.
MAX_CONTAINERS = 1 << 22
#: Largest row count in a node (rows of a training set; keeps sums of counts exact in int64).
MAX_COUNT = 1 << 53

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_CLASS_DTYPE = re.compile(r"^(\|b1|[<|](i1|i2|i4|i8|u1|u2|u4|u8)|<f[48]|<U[0-9]{1,5}|object)$")


class ModelFileError(ValueError):
    """A model file that is not one gpufs wrote: the message names the field and the rule."""


# --------------------------------------------------------------------------------------------
# Strict JSON in and out
# --------------------------------------------------------------------------------------------

class _Token:
    """A non-standard JSON constant (NaN, Infinity, -Infinity) met while parsing.

    Kept as a marker, not a float, so that a format-2 file holding one is rejected with the
    field's name, and a format-1 file (which has them) can still be migrated.
    """

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def _no_duplicate_keys(pairs):
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise ModelFileError(f"key {_short(k)} appears twice in one object; strict JSON "
                                     "readers disagree on which one counts.")
            seen.add(k)
    return out


def loads(text):
    """Parse model-file text as strict JSON.

    Parameters
    ----------
    text : str

    Returns
    -------
    object
        The parsed document; the non-finite tokens (``NaN``, ``Infinity``) are kept as
        markers (``_Token``) that the field checks reject. A ModelFileError (a ValueError)
        says what is wrong otherwise.
    """
    # counted in strings too: an upper bound, taken before the parser allocates anything
    if text.count("[") + text.count("{") > MAX_CONTAINERS:
        raise ModelFileError(f"more than {MAX_CONTAINERS} JSON lists and objects; no model "
                             "file has that many.")
    try:
        return json.loads(text, parse_constant=_Token, object_pairs_hook=_no_duplicate_keys)
    except ModelFileError:
        raise
    except RecursionError:
        raise ModelFileError("the JSON is nested too deeply to be a model file.") from None
    except ValueError as exc:     # JSONDecodeError, and integers of more than 4300 digits
        raise ModelFileError(f"not valid JSON: {exc}") from None


def dumps(doc) -> str:
    """Strict JSON text of a document built by this module.

    Parameters
    ----------
    doc : dict

    Returns
    -------
    str
        Compact JSON without NaN / Infinity tokens.
    """
    return json.dumps(doc, allow_nan=False, separators=(",", ":"))


def _numpy_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"{type(o).__name__} has no JSON form")


def plain(d):
    """A dict built in Python as the parsed JSON it stands for, so the file checks apply.

    Parameters
    ----------
    d : dict
        numpy arrays and scalars allowed; non-finite floats as the strings of the format.

    Returns
    -------
    object
        What :func:`loads` gives for the dict's JSON text.
    """
    try:
        text = json.dumps(d, default=_numpy_default, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"not a JSON-able model dict: {exc}") from None
    return loads(text)


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
        raise ValueError(f"cannot save the model to {path}: it is {kind}, not a file; "
                         "save_model replaces regular files only.")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"cannot save the model: no folder {folder}",
                                path)
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


def _floats_out(a):
    """float64 array -> nested lists; NaN / +-inf as the strings of ``_NONFINITE``."""
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    if finite.all():
        return a.tolist()
    obj = a.astype(object)
    obj[np.isnan(a)] = "NaN"
    obj[a == np.inf] = "Infinity"
    obj[a == -np.inf] = "-Infinity"
    return obj.tolist()


def _float_out(x):
    return _floats_out(np.float64(x))


# --------------------------------------------------------------------------------------------
# Readers: each checks one field and names it in its error
# --------------------------------------------------------------------------------------------

class _At:
    """Where in the document a value sits: ``fitted.ensemble.trees.feature[3][7]``."""

    __slots__ = ("path",)

    def __init__(self, path=""):
        self.path = path

    def __getitem__(self, key):
        if isinstance(key, str):
            return _At(f"{self.path}.{key}" if self.path else key)
        return _At(f"{self.path}[{key}]")

    def fail(self, msg):
        raise ModelFileError(f"{self.path or 'the file'}: {msg}")


def _short(x):
    """repr of a value read from the file, cut to a length fit for an error message."""
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."


def _kind(v):
    if isinstance(v, _Token):
        return f"the non-standard JSON token {v.name}"
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(v), type(v).__name__)


def _obj(v, at, required, optional=()):
    """A JSON object with exactly the ``required`` keys and any of the ``optional`` ones."""
    if type(v) is not dict:
        at.fail(f"expected an object, got {_kind(v)}.")
    missing = [k for k in required if k not in v]
    if missing:
        at.fail(f"missing key {missing[0]!r}.")
    allowed = set(required) | set(optional)
    extra = [k for k in v if k not in allowed]
    if extra:
        at.fail(f"unexpected key {_short(extra[0])} (a file of another format version, or "
                "edited).")
    return v


def _int(v, at, lo=None, hi=None):
    if type(v) is not int:
        at.fail(f"expected an integer, got {_kind(v)}.")
    if lo is not None and v < lo:
        at.fail(f"{_short(v)} is below the smallest allowed value {lo}.")
    if hi is not None and v > hi:
        at.fail(f"{_short(v)} is above the largest allowed value {hi}.")
    return v


def _float(v, at, lo=None, nonfinite=()):
    if type(v) is str and v in _NONFINITE and v in nonfinite:
        return _NONFINITE[v]
    if type(v) not in (int, float):
        at.fail(f"expected a number, got {_kind(v)}"
                + (f" (non-finite values are written {', '.join(map(repr, nonfinite))})"
                   if nonfinite else "") + ".")
    try:
        x = float(v)
    except OverflowError:
        at.fail("number out of the float64 range.")
    if not math.isfinite(x):
        at.fail("number out of the float64 range.")
    if lo is not None and x < lo:
        at.fail(f"{x!r} is below the smallest allowed value {lo}.")
    return x


def _bool(v, at):
    if type(v) is not bool:
        at.fail(f"expected true or false, got {_kind(v)}.")
    return v


def _str(v, at, choices=None):
    if type(v) is not str:
        at.fail(f"expected a string, got {_kind(v)}.")
    if len(v) > MAX_STRING:
        at.fail(f"string longer than {MAX_STRING} characters.")
    if choices is not None and v not in choices:
        at.fail(f"{_short(v)} is not one of {sorted(choices)}.")
    return v


def _list(v, at, length=None, max_length=None):
    if type(v) is not list:
        at.fail(f"expected a list, got {_kind(v)}.")
    if length is not None and len(v) != length:
        at.fail(f"expected {length} entries, got {len(v)}.")
    if max_length is not None and len(v) > max_length:
        at.fail(f"{len(v)} entries, more than the {max_length} allowed.")
    return v


def _flat(v, at, shape):
    """Nested lists of the exact ``shape`` -> (flat list, function: flat index -> _At)."""
    _list(v, at, shape[0])
    flat = v
    for dim in range(1, len(shape)):
        for i, row in enumerate(flat):
            if type(row) is not list or len(row) != shape[dim]:
                where = at
                for j in np.unravel_index(i, shape[:dim]):
                    where = where[int(j)]
                _list(row, where, shape[dim])
        flat = list(itertools.chain.from_iterable(flat))

    def where(i):
        out = at
        for j in np.unravel_index(i, shape):
            out = out[int(j)]
        return out

    return flat, where


def _first_bad(flat, ok_types):
    for i, x in enumerate(flat):
        if type(x) not in ok_types:
            return i, x
    return None, None


def _int_array(v, at, shape, lo, hi, dtype=np.int64):
    """An integer array of ``shape`` (list or list of lists) with values in [lo, hi]."""
    flat, where = _flat(v, at, shape)
    if not set(map(type, flat)) <= {int}:
        i, x = _first_bad(flat, (int,))
        where(i).fail(f"expected an integer, got {_kind(x)}.")
    try:
        a = np.array(flat, dtype=np.int64)
    except OverflowError:
        i = next(i for i, x in enumerate(flat) if not -2**63 <= x < 2**63)
        where(i).fail(f"{_short(flat[i])} is out of the allowed range [{lo}, {hi}].")
    bad = np.flatnonzero((a < lo) | (a > hi))
    if bad.size:
        where(int(bad[0])).fail(f"{int(a[bad[0]])} is out of the allowed range [{lo}, {hi}].")
    return a.astype(dtype).reshape(shape)


def _float_array(v, at, shape, lo=None, nonfinite=()):
    """A float64 array of ``shape``: finite numbers, or the strings of ``nonfinite``."""
    flat, where = _flat(v, at, shape)
    types = set(map(type, flat))
    if not types <= {int, float, str}:
        i, x = _first_bad(flat, (int, float, str))
        where(i).fail(f"expected a number, got {_kind(x)}.")
    coded = None
    if str in types:
        coded = np.fromiter((type(x) is str for x in flat), dtype=bool, count=len(flat))
        flat = [_float(x, where(i), nonfinite=nonfinite) if type(x) is str else x
                for i, x in enumerate(flat)]
    try:
        a = np.array(flat, dtype=np.float64)
    except OverflowError:
        i = next(i for i, x in enumerate(flat) if type(x) is int and abs(x) >= 2**1023)
        where(i).fail("number out of the float64 range.")
    bad = ~np.isfinite(a)          # a JSON number that overflowed (1e999)
    if coded is not None:
        bad &= ~coded
    bad = np.flatnonzero(bad)
    if bad.size:
        where(int(bad[0])).fail("number out of the float64 range.")
    if lo is not None:
        low = np.flatnonzero(a < lo)
        if low.size:
            where(int(low[0])).fail(f"{a[low[0]].item()!r} is below the smallest allowed "
                                    f"value {lo}.")
    return a.reshape(shape)


def _bool_array(v, at, shape):
    flat, where = _flat(v, at, shape)
    if not set(map(type, flat)) <= {bool}:
        i, x = _first_bad(flat, (bool,))
        where(i).fail(f"expected true or false, got {_kind(x)}.")
    return np.array(flat, dtype=np.bool_).reshape(shape)


def _index_list(v, at, n_features, max_length=None):
    """Distinct feature indices in [0, n_features), as int64 (order kept)."""
    _list(v, at, max_length=n_features if max_length is None else max_length)
    a = _int_array(v, at, (len(v),), 0, n_features - 1)
    if np.unique(a).shape[0] != a.shape[0]:
        at.fail("a feature index appears twice.")
    return a


def _free_form(v, at, depth=0):
    """A record that only describes the fit (``selection_path``, ``fit_times``, ...).

    Encoded by :func:`_free_form_out`: a mapping is ``{"items": [[key, value], ...]}`` (keys
    are strings or integers), a non-finite float ``{"float": "NaN"}`` (or "Infinity",
    "-Infinity"), lists are lists; strings, numbers, booleans and null are themselves.
    """
    if depth > MAX_NESTING:
        at.fail(f"nested deeper than {MAX_NESTING} levels.")
    t = type(v)
    if v is None or t in (bool, int):
        return v
    if t is str:
        return _str(v, at)
    if t is float:
        return _float(v, at)
    if t is list:
        _list(v, at, max_length=MAX_NODES)
        return [_free_form(x, at[i], depth + 1) for i, x in enumerate(v)]
    if t is dict and "float" in v:
        _obj(v, at, ["float"])
        return _float(v["float"], at["float"], nonfinite=tuple(_NONFINITE))
    if t is dict:
        _obj(v, at, ["items"])
        out = {}
        for i, pair in enumerate(_list(v["items"], at["items"])):
            _list(pair, at["items"][i], 2)
            key = pair[0]
            if type(key) not in (str, int):
                at["items"][i][0].fail(f"expected a string or integer key, got {_kind(key)}.")
            if key in out:
                at["items"][i][0].fail(f"key {_short(key)} appears twice.")
            out[key] = _free_form(pair[1], at["items"][i][1], depth + 1)
        return out
    at.fail(f"unexpected {_kind(v)}.")


def _free_form_out(v, name, depth=0):
    """The JSON form of a record read back by :func:`_free_form` (tuples become lists)."""
    if depth > MAX_NESTING:
        raise ValueError(f"cannot save {name}: nested deeper than {MAX_NESTING} levels.")
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": _float_out(v)}
    if isinstance(v, (list, tuple)):
        return [_free_form_out(x, name, depth + 1) for x in v]
    if isinstance(v, dict):
        items = []
        for k, x in v.items():
            if isinstance(k, np.generic):
                k = k.item()
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ValueError(f"cannot save {name}: key {k!r} is not a string or integer.")
            items.append([k, _free_form_out(x, name, depth + 1)])
        return {"items": items}
    raise ValueError(f"cannot save {name}: {type(v).__name__} values have no JSON form.")


# --------------------------------------------------------------------------------------------
# Bins and tree ensembles
# --------------------------------------------------------------------------------------------

def bins_to_dict(bm) -> dict:
    """The JSON form of a fitted :class:`gpufs.binning.BinMapper`.

    Parameters
    ----------
    bm : BinMapper

    Returns
    -------
    dict
    """
    out = {"max_bins": int(bm.max_bins),
           "subsample": None if bm.subsample is None else int(bm.subsample),
           "random_state": int(bm.random_state),
           "cuts": [_floats_out(c) for c in bm.cuts_]}
    categories = getattr(bm, "categories_", None)
    if categories is not None:
        out["categories"] = categories_to_dict(categories)
    return out


def categories_to_dict(codes) -> dict:
    """The JSON form of a :class:`gpufs._category_codes.CategoryCodes`.

    Parameters
    ----------
    codes : CategoryCodes
        Category values must be strings, booleans, integers or finite numbers.

    Returns
    -------
    dict
    """
    d = codes.to_dict()
    for f, vals in zip(d["features"], d["values"]):
        for v in vals:
            if not isinstance(v, (str, bool, int, float)) or (
                    isinstance(v, float) and not math.isfinite(v)):
                raise ValueError(f"cannot save the categories of column {f}: {v!r} has no "
                                 "JSON form (categories must be strings, booleans or numbers).")
    return d


def read_categories(d, at, n_features, max_codes):
    """Validate a category-codes dict.

    Rules: ``n_features`` is the model's; ``features`` are increasing column indices; each
    column's ``values`` are distinct strings, or distinct booleans / numbers (finite), at most
    ``MAX_CLASSES``; its ``n_codes`` is at most ``max_codes`` and at most the number of
    values, and 0 only for a column without values (every row missing in fit).

    Parameters
    ----------
    d : object
        The parsed dict.
    at : _At
        Where it sits in the file (for the error messages).
    n_features, max_codes : int

    Returns
    -------
    CategoryCodes
    """
    from ._category_codes import CategoryCodes

    _obj(d, at, ["n_features", "features", "values", "n_codes"])
    if _int(d["n_features"], at["n_features"]) != n_features:
        at["n_features"].fail(f"{d['n_features']} differs from the model's {n_features} "
                              "features.")
    feats = _index_list(d["features"], at["features"], n_features)
    if np.any(np.diff(feats) <= 0):
        at["features"].fail("column indices must be increasing.")
    k = feats.shape[0]
    vat, nat = at["values"], at["n_codes"]
    _list(d["values"], vat, k)
    n_codes = _int_array(d["n_codes"], nat, (k,), 0, max_codes)
    values = {}
    for i, vals in enumerate(d["values"]):
        _list(vals, vat[i], max_length=MAX_CLASSES)
        kinds = {str if type(v) is str else "number" for v in vals}
        if len(kinds) > 1:
            vat[i].fail("categories must all be strings or all numbers.")
        out = [_decode_scalar(v, vat[i][j]) for j, v in enumerate(vals)]
        if any(v is None for v in out):
            vat[i].fail("a category cannot be null (missing values have no code).")
        if len(set(out)) != len(out):
            vat[i].fail("a category appears twice.")
        if n_codes[i] > len(out) or (n_codes[i] == 0) != (len(out) == 0):
            nat[i].fail(f"{int(n_codes[i])} codes for {len(out)} categories.")
        values[int(feats[i])] = out
    return CategoryCodes(n_features, values, {int(f): int(n) for f, n in zip(feats, n_codes)})


def read_bins(d, at=None, n_features=None):
    """Validate a bins dict.

    Parameters
    ----------
    d : object
        The parsed dict.
    at : _At or None, default=None
        Where it sits in the file (for the error messages).
    n_features : int or None, default=None
        The features the enclosing model declares (checked when given).

    Returns
    -------
    max_bins, subsample, random_state : int, int or None, int
    cuts : list of ndarray of shape (n_cuts,), float64
        Finite and non-decreasing, at most ``max_bins - 1`` each.
    categories : CategoryCodes or None
        The categorical features' codes, whose cuts are ``category_cuts``.
    """
    from .binning import category_cuts

    at = at or _At("bins")
    _obj(d, at, ["max_bins", "subsample", "random_state", "cuts"], ["categories"])
    max_bins = _int(d["max_bins"], at["max_bins"], 2, T.MAX_VALUE_BINS)
    subsample = None if d["subsample"] is None else _int(d["subsample"], at["subsample"], 1)
    random_state = _int(d["random_state"], at["random_state"], 0, 2**32 - 1)
    cuts_in = _list(d["cuts"], at["cuts"], n_features, MAX_BINNED_FEATURES)
    if not cuts_in:
        at["cuts"].fail("a model needs at least one feature.")
    cuts = []
    for f, c in enumerate(cuts_in):
        _list(c, at["cuts"][f], max_length=max_bins - 1)
        a = _float_array(c, at["cuts"][f], (len(c),))
        down = np.flatnonzero(a[1:] < a[:-1])
        if down.size:
            at["cuts"][f][int(down[0]) + 1].fail("cut points must be in increasing order.")
        cuts.append(a.astype(T.CUT_DTYPE))
    categories = None
    if d.get("categories") is not None:
        categories = read_categories(d["categories"], at["categories"], len(cuts), max_bins)
        for f, n in categories.n_codes.items():
            if not np.array_equal(cuts[f], category_cuts(n)):
                at["cuts"][f].fail(f"a categorical feature with {n} codes has the cut points "
                                   "k + 0.5 for k < n - 1.")
    return max_bins, subsample, random_state, cuts, categories


def _ensemble_fields(ens) -> dict:
    s = ens.stacked()
    from .tree import TREE_FIELDS

    trees = {}
    for k, dt in TREE_FIELDS.items():
        if k == "cat_bits":
            continue
        trees[k] = _floats_out(s[k]) if np.dtype(dt).kind == "f" else s[k].tolist()
    out = {"max_depth": int(ens.max_depth), "n_features": int(ens.n_features),
           "n_outputs": int(ens.n_outputs), "n_trees": int(ens.n_trees),
           "base_score": _floats_out(ens.base_score),
           "tree_column": s["tree_column"].tolist(), "trees": trees}
    if ens.categorical:
        # the bitsets of the categorical splits only: [node, word 0, ..., word 7] per split
        is_cat = ens.categorical_mask()
        split = (s["feature"] >= 0) & is_cat[np.maximum(s["feature"], 0)]
        out["categorical_features"] = np.flatnonzero(is_cat).tolist()
        trees["cat_bits"] = [[[int(i)] + s["cat_bits"][t, i].tolist()
                              for i in np.flatnonzero(split[t])] for t in range(ens.n_trees)]
    return out


def ensemble_to_dict(ens) -> dict:
    """The JSON form of a :class:`gpufs.tree.TreeEnsemble` (standalone: with format tags).

    Parameters
    ----------
    ens : TreeEnsemble

    Returns
    -------
    dict
    """
    return {"format": ENSEMBLE_FORMAT, "format_version": FORMAT_VERSION,
            **_ensemble_fields(ens)}


def ensemble_from_dict(d, at=None, *, n_features=None, n_outputs=None, cuts=None,
                       tagged=True, categorical=None):
    """Validate an ensemble dict and build the :class:`gpufs.tree.TreeEnsemble`.

    Parameters
    ----------
    d : object
        The parsed dict.
    at : _At or None, default=None
        Where it sits in the file (for the error messages).
    n_features, n_outputs : int or None, default=None
        What the enclosing model declares (checked when given).
    cuts : list of ndarray or None, default=None
        The bin mapper's cut points; with them every split's threshold must be the cut point
        its bin threshold names.
    tagged : bool, default=True
        The dict carries ``format`` and ``format_version`` (a standalone ensemble).
    categorical : ndarray of shape (n_features,), bool, or None, default=None
        The bin mapper's categorical features, which the ensemble's
        ``categorical_features`` must equal.

    Returns
    -------
    TreeEnsemble
    """
    from .tree import TREE_FIELDS, Tree, TreeEnsemble, n_nodes_for_depth

    at = at or _At("ensemble")
    keys = ["max_depth", "n_features", "n_outputs", "n_trees", "base_score", "tree_column",
            "trees"]
    optional = ["categorical_features"]
    if tagged:
        if type(d) is not dict or d.get("format") != ENSEMBLE_FORMAT:
            found = d.get("format") if type(d) is dict else None
            at.fail(f"not a gpufs ensemble (format={_short(found)}, expected "
                    f"{ENSEMBLE_FORMAT!r}).")
        _obj(d, at, keys + ["format", "format_version"], optional)
        if d["format_version"] != FORMAT_VERSION:
            at["format_version"].fail(f"version {_short(d['format_version'])} is not "
                                      f"{FORMAT_VERSION}.")
    else:
        _obj(d, at, keys, optional)
    depth = _int(d["max_depth"], at["max_depth"], 0, MAX_DEPTH)
    d_feat = _int(d["n_features"], at["n_features"], 1, MAX_FEATURES)
    if n_features is not None and d_feat != n_features:
        at["n_features"].fail(f"{d_feat} differs from the model's n_features_in {n_features}.")
    k_out = _int(d["n_outputs"], at["n_outputs"], 1, MAX_CLASSES)
    if n_outputs is not None and k_out != n_outputs:
        at["n_outputs"].fail(f"{k_out} outputs, but the model has {n_outputs}.")
    n_nodes = n_nodes_for_depth(depth)
    n_trees = _int(d["n_trees"], at["n_trees"], 0, MAX_NODES // n_nodes)
    base = _float_array(d["base_score"], at["base_score"], (k_out,))
    col = _int_array(d["tree_column"], at["tree_column"], (n_trees,), 0, k_out - 1, np.int32)
    tat = at["trees"]
    is_cat = np.zeros(d_feat, dtype=bool)
    if d.get("categorical_features") is not None:
        cf = _index_list(d["categorical_features"], at["categorical_features"], d_feat)
        if np.any(np.diff(cf) <= 0):
            at["categorical_features"].fail("feature indices must be increasing.")
        is_cat[cf] = True
    if categorical is not None and not np.array_equal(is_cat, categorical):
        at["categorical_features"].fail("differs from the categorical features of the bins.")
    fields = [k for k in TREE_FIELDS if k != "cat_bits"]
    _obj(d["trees"], tat, fields + (["cat_bits"] if is_cat.any() else []))
    shape = (n_trees, n_nodes)
    feature = _int_array(d["trees"]["feature"], tat["feature"], shape, -1, d_feat - 1,
                         T.FEATURE_DTYPE)
    a = {"feature": feature}
    a["bin_threshold"] = _int_array(d["trees"]["bin_threshold"], tat["bin_threshold"], shape,
                                    0, T.MAX_VALUE_BINS - 1, T.BIN_THRESHOLD_DTYPE)
    a["threshold"] = _float_array(d["trees"]["threshold"], tat["threshold"], shape,
                                  nonfinite=("Infinity",))
    a["missing_left"] = _bool_array(d["trees"]["missing_left"], tat["missing_left"], shape)
    a["value"] = _float_array(d["trees"]["value"], tat["value"], shape)
    a["gain"] = _float_array(d["trees"]["gain"], tat["gain"], shape)
    a["cover"] = _float_array(d["trees"]["cover"], tat["cover"], shape, lo=0.0)
    a["count"] = _int_array(d["trees"]["count"], tat["count"], shape, 0, MAX_COUNT)
    _check_tree_structure(a, depth, tat)
    a["cat_bits"] = _read_cat_bits(d["trees"].get("cat_bits"), tat["cat_bits"], a, is_cat,
                                   cuts)
    if cuts is not None:
        _check_thresholds(a, cuts, tat, is_cat)
    _check_no_overflow(a["value"], col, base, k_out, tat["value"])
    ens = TreeEnsemble(max_depth=depth, n_features=d_feat, base_score=base,
                       is_categorical=is_cat if is_cat.any() else None)
    for t in range(n_trees):
        ens.append(Tree({k: a[k][t].copy() for k in TREE_FIELDS}), int(col[t]))
    return ens


def _check_tree_structure(a, depth, at):
    """The complete-binary-tree invariants of the module docstring, over all trees at once."""
    feature = a["feature"]
    n_trees, n_nodes = feature.shape
    if n_trees == 0:
        return
    internal = feature >= 0
    first_last = 2 ** depth - 1                 # first node of the last level
    bad = np.argwhere(internal[:, first_last:])
    if bad.size:
        t, i = bad[0]
        at["feature"][int(t)][int(i) + first_last].fail(
            f"a split on the last level of a depth-{depth} tree (its children would be "
            "outside the tree).")
    used = np.zeros_like(internal)
    used[:, 0] = True
    for level in range(depth):
        lo, hi = 2 ** level - 1, 2 ** (level + 1) - 1
        parent = used[:, lo:hi] & internal[:, lo:hi]
        used[:, 2 * lo + 1:2 * hi + 1:2] = parent
        used[:, 2 * lo + 2:2 * hi + 2:2] = parent
    leaf = used & ~internal
    defaults = {"feature": -1, "bin_threshold": 0, "threshold": 0.0, "missing_left": False,
                "value": 0.0, "gain": 0.0, "cover": 0.0, "count": 0}
    for k, dflt in defaults.items():
        bad = np.argwhere(~used & (a[k] != dflt))
        if bad.size:
            t, i = (int(x) for x in bad[0])
            at[k][t][i].fail(f"node {i} of tree {t} is below a leaf (unused) but holds "
                             f"{a[k][t, i].item()!r}, not {dflt!r}.")
    for k in ("bin_threshold", "threshold", "missing_left", "gain"):
        bad = np.argwhere(leaf & (a[k] != defaults[k]))
        if bad.size:
            t, i = (int(x) for x in bad[0])
            at[k][t][i].fail(f"node {i} of tree {t} is a leaf but holds "
                             f"{a[k][t, i].item()!r}, not {defaults[k]!r}.")
    inner = np.argwhere(internal)
    if inner.size:
        t, i = inner[:, 0], inner[:, 1]
        c = a["count"]
        bad = np.flatnonzero(c[t, i] != c[t, 2 * i + 1] + c[t, 2 * i + 2])
        if bad.size:
            tt, ii = int(t[bad[0]]), int(i[bad[0]])
            at["count"][tt][ii].fail(f"node {ii} of tree {tt} holds {int(c[tt, ii])} rows, "
                                     "not the sum of its children's.")
        thr = a["threshold"][t, i]
        bad = np.flatnonzero(~np.isfinite(thr) & (thr != np.inf))
        if bad.size:
            tt, ii = int(t[bad[0]]), int(i[bad[0]])
            at["threshold"][tt][ii].fail("a split threshold must be a number or 'Infinity'.")


def _read_cat_bits(v, at, a, is_cat, cuts):
    """The category bitsets of the categorical splits -> uint32 (n_trees, n_nodes, W).

    Every split on a categorical feature has exactly one entry ``[node, w0, ..., w7]`` (nodes
    increasing), no other node has one; words are in [0, 2**32); no bit at or above the
    feature's bin count is set (255 without cut points: the missing bin follows
    ``missing_left``); such a split's bin threshold and threshold are 0."""
    from ._categorical import CAT_WORDS

    feature = a["feature"]
    n_trees, n_nodes = feature.shape
    if not is_cat.any():
        return np.zeros((n_trees, n_nodes, 0), np.uint32)
    out = np.zeros((n_trees, n_nodes, CAT_WORDS), np.uint32)
    cat_split = (feature >= 0) & is_cat[np.maximum(feature, 0)]
    for k in ("bin_threshold", "threshold"):
        bad = np.argwhere(cat_split & (a[k] != 0))
        if bad.size:
            t, i = (int(x) for x in bad[0])
            at.fail(f"node {i} of tree {t} splits a categorical feature but its {k} is "
                    f"{a[k][t, i].item()!r}, not 0.")
    n_bins = (np.full(is_cat.shape[0], T.MAX_VALUE_BINS, np.int64) if cuts is None
              else np.array([c.shape[0] + 1 for c in cuts], dtype=np.int64))
    _list(v, at, n_trees)
    for t, entries in enumerate(v):
        want = np.flatnonzero(cat_split[t])
        _list(entries, at[t], want.shape[0])
        if not entries:
            continue
        rows = _int_array(entries, at[t], (len(entries), 1 + CAT_WORDS), 0, 2**32 - 1)
        nodes = rows[:, 0]
        if not np.array_equal(nodes, want):
            j = int(np.flatnonzero(nodes != want)[0])
            at[t][j][0].fail(f"tree {t}'s categorical splits are at nodes {want.tolist()[:8]}; "
                             f"entry {j} names node {int(nodes[j])}.")
        words = rows[:, 1:].astype(np.uint32)
        bit = np.arange(32 * CAT_WORDS)
        is_set = ((words[:, bit // 32] >> (bit % 32).astype(np.uint32)) & 1).astype(bool)
        limit = n_bins[feature[t, nodes]]
        bad = np.argwhere(is_set & (bit[None, :] >= limit[:, None]))
        if bad.size:
            j, b = (int(x) for x in bad[0])
            at[t][j].fail(f"bit {b} is set, but feature {int(feature[t, nodes[j]])} has "
                          f"{int(limit[j])} bins.")
        out[t, nodes] = words
    return out


def _check_thresholds(a, cuts, at, is_cat=None):
    """Every numeric split: bin threshold below its feature's bin count, threshold = that cut
    point (+inf for the top bin, whose split sends every value left and missing values
    right). Categorical splits are checked by ``_read_cat_bits``."""
    numeric = a["feature"] >= 0
    if is_cat is not None:
        numeric &= ~is_cat[np.maximum(a["feature"], 0)]
    inner = np.argwhere(numeric)
    if not inner.size:
        return
    t, i = inner[:, 0], inner[:, 1]
    f = a["feature"][t, i].astype(np.int64)
    bt = a["bin_threshold"][t, i].astype(np.int64)
    n_cuts = np.array([c.shape[0] for c in cuts], dtype=np.int64)
    bad = np.flatnonzero(bt > n_cuts[f])
    if bad.size:
        j = bad[0]
        at["bin_threshold"][int(t[j])][int(i[j])].fail(
            f"bin threshold {int(bt[j])} >= n_bins {int(n_cuts[f[j]] + 1)} of feature "
            f"{int(f[j])}.")
    top = bt == n_cuts[f]
    bad = np.flatnonzero(top & a["missing_left"][t, i])
    if bad.size:
        j = bad[0]
        at["missing_left"][int(t[j])][int(i[j])].fail(
            "a split on the top bin sends every value left; its missing values must go right.")
    flat = np.concatenate(cuts + [np.zeros(1)])
    start = np.concatenate([[0], np.cumsum(n_cuts)[:-1]])
    expected = np.where(top, np.inf, flat[np.where(top, 0, start[f] + bt)])
    bad = np.flatnonzero(expected != a["threshold"][t, i])
    if bad.size:
        j = bad[0]
        at["threshold"][int(t[j])][int(i[j])].fail(
            f"threshold {a['threshold'][t[j], i[j]].item()!r} is not the cut point "
            f"{expected[j].item()!r} "
            f"that bin threshold {int(bt[j])} of feature {int(f[j])} names.")


def _check_no_overflow(value, col, base, k_out, at):
    """No row's raw score (base + one leaf value per tree) can overflow float64."""
    if value.shape[0] == 0:
        return
    with np.errstate(over="ignore"):
        bound = np.abs(base).astype(np.float64)
        np.add.at(bound, col.astype(np.int64), np.abs(value).max(axis=1))
    if not np.isfinite(bound).all():
        at.fail("leaf values so large that a prediction would overflow float64.")


# --------------------------------------------------------------------------------------------
# The header: params, names, classes
# --------------------------------------------------------------------------------------------

def _encode_param(name, value, est_name):
    """A constructor parameter as JSON (the inverse is :func:`_decode_param`).

    None, booleans, integers, finite floats and strings as themselves; numpy scalars as
    their Python value; array-likes (costs, groups) as flat lists; a dict (``group_costs``)
    as ``{"dict": [[key, value], ...]}``; a gpufs GBFS estimator (``refit_estimator``) as
    ``{"estimator": name, "params": {...}}``; a RandomState or Generator, which has no JSON
    form, as None. Anything else cannot be saved.
    """
    from . import _device

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
            raise ValueError(f"cannot save {est_name}: parameter {name}={value!r} is not "
                             "finite.")
        return float(value)
    if isinstance(value, dict):
        return {"dict": [[_encode_scalar(k, name, est_name), _encode_scalar(v, name, est_name)]
                         for k, v in value.items()]}
    if hasattr(value, "get_params"):
        kind = type(value).__name__
        if kind not in ("GBFSRegressor", "GBFSClassifier") or \
                type(value).__module__ != "gpufs.selectors.gbfs":
            raise ValueError(
                f"cannot save {est_name} with {name}={kind}(...) in the gpufs model format, "
                "which describes gpufs models only. Save it with pickle or joblib instead "
                "(and load pickles only from sources you trust: SECURITY.md).")
        return {"estimator": kind,
                "params": {k: _encode_param(k, v, est_name)
                           for k, v in value.get_params(deep=False).items()}}
    arr = np.asarray(_device.to_host(value))
    if arr.ndim != 1:
        raise ValueError(f"cannot save {est_name}: parameter {name} is not a flat list.")
    return [_encode_scalar(x, name, est_name) for x in arr.tolist()]


def _encode_scalar(x, name, est_name):
    if isinstance(x, np.generic):
        x = x.item()
    if x is None or isinstance(x, (bool, str, int)):
        return x
    if isinstance(x, float) and math.isfinite(x):
        return x
    raise ValueError(f"cannot save {est_name}: parameter {name} holds {x!r}, which has no "
                     "JSON form.")


def _decode_scalar(v, at):
    if v is None or type(v) in (bool, int):
        return v
    if type(v) is str:
        return _str(v, at)
    return _float(v, at)


def _decode_param(v, at, nested=False):
    if type(v) is list:
        _list(v, at, max_length=MAX_FEATURES)
        return [_decode_scalar(x, at[i]) for i, x in enumerate(v)]
    if type(v) is dict:
        if "dict" in v:
            _obj(v, at, ["dict"])
            out = {}
            for i, pair in enumerate(_list(v["dict"], at["dict"], max_length=MAX_FEATURES)):
                _list(pair, at["dict"][i], 2)
                key = _decode_scalar(pair[0], at["dict"][i][0])
                if key in out:
                    at["dict"][i][0].fail(f"key {_short(key)} appears twice.")
                out[key] = _decode_scalar(pair[1], at["dict"][i][1])
            return out
        if nested:
            at.fail("estimators nested more than one level deep.")
        _obj(v, at, ["estimator", "params"])
        cls = _estimator_class(v["estimator"], at["estimator"],
                               ("GBFSRegressor", "GBFSClassifier"))
        est = cls(**_decode_params(v["params"], at["params"], cls, nested=True))
        _check_params(est, at["params"])
        return est
    return _decode_scalar(v, at)


#: Parameters each family gained after format 2 appeared. A format-2 file written before one
#: existed lacks it, and it takes its default (the behaviour of that fit); any other missing
#: parameter means an edited file. Format-1 files are completed by the migration.
_PARAMS_SINCE_FORMAT2 = {
    "GBFS": {"categorical_features", "gt_delta", "gt_s", "gt_subsets", "n_jobs",
             "split_search", "tol", "warm_start"},
    "Stagewise": {"categorical_features"},
    "ControlBurn": {"categorical_features", "n_jobs", "reweight_steps", "warm_start"},
    "MultiTaskGBFS": {"categorical_features", "n_jobs"},
}


def _decode_params(d, at, cls, nested=False):
    if type(d) is not dict:
        at.fail(f"expected an object, got {_kind(d)}.")
    known = cls().get_params(deep=False)
    extra = [k for k in d if k not in known]
    if extra:
        at.fail(f"{cls.__name__} has no parameter {_short(extra[0])}.")
    family = cls.__name__.replace("Regressor", "").replace("Classifier", "")
    missing = [k for k in known if k not in d and k not in _PARAMS_SINCE_FORMAT2[family]]
    if missing:
        at.fail(f"missing parameter {missing[0]!r} (a model file lists every parameter).")
    return {k: _decode_param(v, at[k], nested) for k, v in d.items()}


def _check_params(est, at):
    """Every parameter within the estimator's own ``_parameter_constraints`` (what ``fit``
    checks first), the failure named as ``params.<name>``."""
    from sklearn.utils._param_validation import (InvalidParameterError,
                                                 validate_parameter_constraints)

    constraints = getattr(est, "_parameter_constraints", {})
    for name, value in est.get_params(deep=False).items():
        if name not in constraints:
            continue
        try:
            validate_parameter_constraints({name: constraints[name]}, {name: value},
                                           caller_name=type(est).__name__)
        except InvalidParameterError as exc:
            at[name].fail(str(exc))


def _check_feature_params(est, at, n_features):
    """``feature_costs`` and ``feature_groups`` (where the estimator has them) as ``fit``
    checks them against the model's ``n_features``."""
    from ._input import check_costs, check_groups

    for name, check in (("feature_costs", check_costs), ("feature_groups", check_groups)):
        if name not in est.get_params(deep=False):
            continue
        try:
            check(getattr(est, name), n_features)
        except (TypeError, ValueError) as exc:
            at[name].fail(str(exc))


def _classes_out(classes):
    c = np.asarray(classes)
    if c.dtype.kind == "O":
        kinds = {type(x) for x in c.tolist()}
        if len(kinds) != 1 or not kinds <= {str, int, float, bool}:
            raise ValueError("cannot save class labels of mixed or non-JSON types: "
                             f"{sorted(k.__name__ for k in kinds)}.")
        dtype = "object"
    else:
        dtype = c.dtype.newbyteorder("<").str
    if not _CLASS_DTYPE.match(dtype):
        raise ValueError(f"cannot save class labels of dtype {c.dtype}.")
    values = c.tolist()
    if c.dtype.kind == "f" or (dtype == "object" and isinstance(values[0], float)):
        values = [_encode_scalar(x, "classes_", "this model") for x in values]
    return {"dtype": dtype, "values": values}


def _read_classes(d, at, min_count=2, what="a classifier has at least 2 classes."):
    """Sorted distinct labels (class labels; a multitask model's task labels, at least one)."""
    _obj(d, at, ["dtype", "values"])
    dtype = _str(d["dtype"], at["dtype"])
    if not _CLASS_DTYPE.match(dtype):
        at["dtype"].fail(f"{_short(dtype)} is not a label dtype gpufs writes.")
    values = _list(d["values"], at["values"], max_length=MAX_CLASSES)
    if len(values) < min_count:
        at["values"].fail(what)
    vat = at["values"]
    if dtype == "object":
        kinds = {type(x) for x in values}
        if len(kinds) != 1 or not kinds <= {str, int, float, bool}:
            vat.fail("labels must all be strings, all integers, all numbers or all booleans.")
        vals = [_decode_scalar(x, vat[i]) for i, x in enumerate(values)]
        try:
            ordered = all(a < b for a, b in zip(vals, vals[1:]))
        except TypeError:
            ordered = False
        arr = np.empty(len(vals), dtype=object)
        arr[:] = vals
    else:
        dt = np.dtype(dtype)
        if dt.kind == "b":
            arr = _bool_array(values, vat, (len(values),))
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            arr = _int_array(values, vat, (len(values),), int(info.min), int(info.max), dt)
        elif dt.kind == "f":
            arr = _float_array(values, vat, (len(values),)).astype(dt)
            if dt != np.float64 and not np.array_equal(arr.astype(np.float64),
                                                       np.array(values, dtype=np.float64)):
                vat.fail(f"a label is not exactly representable as {dtype}.")
        else:
            width = dt.itemsize // 4
            for i, x in enumerate(values):
                if _str(x, vat[i]) != x[:width] or "\x00" in x:
                    vat[i].fail(f"label longer than the dtype's {width} characters.")
            arr = np.array(values, dtype=dt)
        ordered = bool(np.all(arr[1:] > arr[:-1]))
    if not ordered:
        vat.fail("labels must be distinct and sorted (as numpy.unique returns them).")
    return arr


def _header(est, fitted):
    from . import __version__

    name = type(est).__name__
    names = getattr(est, "feature_names_in_", None)
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "gpufs_version": __version__,
        **_body_header(est, name, names),
        "fitted": fitted,
    }


def _body_header(est, name, names):
    return {
        "estimator": name,
        "params": {k: _encode_param(k, v, name) for k, v in est.get_params(deep=False).items()},
        "n_features_in": int(est.n_features_in_),
        "feature_names_in": None if names is None else [str(c) for c in names],
        "classes": _classes_out(est.classes_) if hasattr(est, "classes_") else None,
    }


_BODY_KEYS = ["estimator", "params", "n_features_in", "feature_names_in", "classes", "fitted"]


def _estimator_class(name, at, allowed=None):
    import gpufs

    choices = allowed or tuple(_FAMILIES)
    _str(name, at, set(choices))
    return getattr(gpufs, name)


def _read_body(doc, at, expected=None, nested=False):
    """Validate a model body (header fields + fitted) and build the fitted estimator."""
    name = doc["estimator"]
    cls = _estimator_class(name, at["estimator"],
                           ("GBFSRegressor", "GBFSClassifier") if nested else None)
    if expected is not None and cls is not expected:
        raise ModelFileError(f"the file holds a {name}, not a {expected.__name__}.")
    est = cls(**_decode_params(doc["params"], at["params"], cls))
    _check_params(est, at["params"])
    family = _FAMILIES[name]
    d = _int(doc["n_features_in"], at["n_features_in"], 1,
             MAX_BINNED_FEATURES if family.binned else MAX_FEATURES)
    est.n_features_in_ = d
    _check_feature_params(est, at["params"], d)
    names = doc["feature_names_in"]
    if names is not None:
        _list(names, at["feature_names_in"], d)
        seen = set()
        for i, x in enumerate(names):
            if _str(x, at["feature_names_in"][i]) in seen:
                at["feature_names_in"][i].fail(f"name {_short(x)} appears twice (a table's "
                                               "columns have distinct names).")
            seen.add(x)
        est.feature_names_in_ = np.asarray(names, dtype=object)
    classifier = name.endswith("Classifier")
    if classifier != (doc["classes"] is not None):
        at["classes"].fail("a classifier has classes and a regressor has none.")
    if classifier:
        est.classes_ = _read_classes(doc["classes"], at["classes"])
    family.read(est, doc["fitted"], at["fitted"])
    return est


# --------------------------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------------------------

def _check_first_use(ens, first, at):
    """``first`` (n_features,) is, per feature, the first tree that splits on it (-1: none)."""
    derived = np.full(first.shape[0], -1, dtype=np.int64)
    if ens.n_trees:
        feat = ens.stacked()["feature"]
        for t in range(ens.n_trees - 1, -1, -1):
            derived[feat[t][feat[t] >= 0]] = t
    bad = np.flatnonzero(derived != first)
    if bad.size:
        f = int(bad[0])
        by = f"tree {int(derived[f])}" if derived[f] >= 0 else "no tree"
        at[f].fail(f"feature {f} is first split on by {by}, not {int(first[f])}.")


def _check_split_gains(ens, at):
    """Every split of a fitted model has a positive gain: a split is made only when its
    (penalized) gain beats ``min_split_gain`` >= 0. (A standalone ensemble, which may be
    built by hand, is not held to this.)"""
    if not ens.n_trees:
        return
    s = ens.stacked()
    bad = np.argwhere((s["feature"] >= 0) & ~(s["gain"] > 0))
    if bad.size:
        t, i = (int(x) for x in bad[0])
        at[t][i].fail(f"a split's gain must be positive, got {s['gain'][t, i].item()!r}.")


def _check_importances(imp, ensembles, at):
    """Importances are each feature's share of the split gains of the trees (all zero
    without splits), as the fit computes them."""
    gains = np.zeros(imp.shape[0])
    for ens in ensembles:
        if ens.n_trees:
            s = ens.stacked()
            split = s["feature"] >= 0
            np.add.at(gains, s["feature"][split], s["gain"][split])
    total = gains.sum()
    expect = gains / total if total > 0 else gains
    if not np.allclose(imp, expect, rtol=1e-12, atol=1e-15):
        at.fail("not the trees' split gains (each feature's share of the total gain).")


def _check_max_bins(est, at):
    if est.bin_mapper_.max_bins != est.max_bins:
        at["bins"]["max_bins"].fail(f"{est.bin_mapper_.max_bins} differs from params.max_bins "
                                    f"{est.max_bins}.")


def _n_outputs(est):
    k = len(est.classes_) if hasattr(est, "classes_") else 1
    return 1 if k <= 2 else k


def _device_of(v, at):
    return _str(v, at, {"cpu", "gpu"})


def _loss_lists(v, at, length):
    """``evals_result``: one loss array of ``length`` per validation set."""
    _list(v, at, max_length=MAX_CLASSES)
    return [_float_array(r, at[i], (length,), lo=0.0, nonfinite=("NaN", "Infinity"))
            for i, r in enumerate(v)]


class _GBFS:
    binned = True

    @staticmethod
    def check_fit_params(est, at):
        """The fitted model is what the parameters fit: tree depth, rounds, bins, and the mu
        of a fit without a feature budget (a search sets it otherwise)."""
        ens = est.ensemble_
        if ens.max_depth != est.max_depth:
            at["ensemble"]["max_depth"].fail(f"the trees have depth {ens.max_depth}, but "
                                             f"params.max_depth is {est.max_depth}.")
        if est.n_estimators_ > est.n_estimators:
            at["n_estimators"].fail(f"{est.n_estimators_} rounds, more than "
                                    f"params.n_estimators {est.n_estimators}.")
        _check_max_bins(est, at)
        k = est.n_features_to_select
        if (k is None or (k == "auto" and est.tol is not None)) and est.mu_ != est.mu:
            at["mu"].fail(f"{est.mu_!r} differs from params.mu {est.mu!r} (without "
                          "n_features_to_select the fit runs at mu).")
    keys = ["device", "ensemble", "bins", "n_estimators", "selected_features", "first_use_tree",
            "feature_importances", "selection_record", "mu", "mu_search", "fit_times",
            "selection_path"]
    #: keys a file may lack (written before the attribute existed)
    optional = ["evals_result"]

    @staticmethod
    def write(est):
        rec = est.selection_record_
        return {
            "device": str(est.device_),
            "ensemble": _ensemble_fields(est.ensemble_),
            "bins": bins_to_dict(est.bin_mapper_),
            "n_estimators": int(est.n_estimators_),
            "selected_features": np.asarray(est.selected_features_).tolist(),
            "first_use_tree": np.asarray(est.first_use_tree_).tolist(),
            "feature_importances": _floats_out(est.feature_importances_),
            "selection_record": {
                "tree_column": [int(c) for c in rec["tree_column"]],
                "features_added": [[int(f) for f in fs] for fs in rec["features_added"]],
                "train_loss": _floats_out(rec["train_loss"]),
                "val_loss": _floats_out(rec["val_loss"]),
            },
            "mu": _float_out(est.mu_),
            "mu_search": _free_form_out(est.mu_search_, "mu_search_"),
            "fit_times": _free_form_out(est.fit_times_, "fit_times_"),
            "selection_path": _free_form_out(est.selection_path_, "selection_path_"),
            "evals_result": [_floats_out(r) for r in est.evals_result_],
            **({} if getattr(est, "group_test_candidates_", None) is None else
               {"group_test_candidates": [np.asarray(c).tolist()
                                          for c in est.group_test_candidates_]}),
        }

    @staticmethod
    def read(est, f, at):
        from .binning import BinMapper

        _obj(f, at, _GBFS.keys, _GBFS.optional + ["group_test_candidates"])
        d = est.n_features_in_
        k_out = _n_outputs(est)
        est.device_ = _device_of(f["device"], at["device"])
        bins = read_bins(f["bins"], at["bins"], d)
        est.bin_mapper_ = BinMapper._from_validated(*bins)
        est.category_codes_ = bins[4]
        ens = ensemble_from_dict(f["ensemble"], at["ensemble"], n_features=d, n_outputs=k_out,
                                 cuts=bins[3], tagged=False,
                                 categorical=est.bin_mapper_.is_categorical_)
        n_trees = ens.n_trees
        rounds = _int(f["n_estimators"], at["n_estimators"], 0)
        if rounds * k_out != n_trees:
            at["n_estimators"].fail(f"{rounds} rounds of {k_out} trees, but the ensemble has "
                                    f"{n_trees} trees.")
        col = np.asarray(ens.tree_column)
        bad = np.flatnonzero(col != np.arange(n_trees) % k_out)
        if bad.size:
            at["ensemble"]["tree_column"][int(bad[0])].fail(
                f"tree {int(bad[0])} of a boosted model fits output "
                f"{int(bad[0]) % k_out}, not {int(col[bad[0]])}.")
        selected = _index_list(f["selected_features"], at["selected_features"], d)
        first = _int_array(f["first_use_tree"], at["first_use_tree"], (d,), -1, n_trees - 1)
        used = np.flatnonzero(first >= 0)
        if not np.array_equal(np.sort(selected), used):
            at["selected_features"].fail("the selected features are not the features with a "
                                         "first-use tree.")
        if np.any(np.diff(first[selected]) < 0):
            at["selected_features"].fail("not in order of first use.")
        imp = _float_array(f["feature_importances"], at["feature_importances"], (d,), lo=0.0)
        rat = at["selection_record"]
        rec = _obj(f["selection_record"], rat,
                   ["tree_column", "features_added", "train_loss", "val_loss"])
        rcol = _int_array(rec["tree_column"], rat["tree_column"], (n_trees,), 0, k_out - 1)
        if not np.array_equal(rcol, col):
            rat["tree_column"].fail("differs from the ensemble's tree_column.")
        added = _list(rec["features_added"], rat["features_added"], n_trees)
        features_added = [_index_list(a, rat["features_added"][t], d).tolist()
                          for t, a in enumerate(added)]
        losses = {k: _float_array(rec[k], rat[k], (n_trees,), lo=0.0,
                                  nonfinite=("NaN", "Infinity")).tolist()
                  for k in ("train_loss", "val_loss")}
        _check_split_gains(ens, at["ensemble"]["trees"]["gain"])
        _check_first_use(ens, first, at["first_use_tree"])
        for t, fs in enumerate(features_added):
            want = np.flatnonzero(first == t)
            if sorted(fs) != want.tolist():
                rat["features_added"][t].fail(f"tree {t} first splits on features "
                                              f"{want.tolist()[:8]}, not {sorted(fs)[:8]}.")
        if [f for fs in features_added for f in fs] != selected.tolist():
            at["selected_features"].fail("not the features in the order the trees added them "
                                         "(selection_record.features_added).")
        _check_importances(imp, [ens], at["feature_importances"])
        est.ensemble_ = ens
        est.n_estimators_ = rounds
        est.selected_features_ = selected
        est.first_use_tree_ = first
        est.support_ = np.zeros(d, dtype=bool)
        est.support_[selected] = True
        est.feature_importances_ = imp
        est.selection_record_ = {"tree_column": rcol.tolist(),
                                 "features_added": features_added, **losses}
        est.group_test_candidates_ = _group_test_candidates(f, at, est, n_trees,
                                                            features_added, first)
        est.mu_ = _float(f["mu"], at["mu"], lo=0.0)
        _GBFS.check_fit_params(est, at)
        if "evals_result" in f:
            est.evals_result_ = _loss_lists(f["evals_result"], at["evals_result"], rounds)
        else:           # the validation loss the selection record kept, per round
            val = np.asarray(losses["val_loss"][::k_out], dtype=np.float64)
            est.evals_result_ = [] if np.isnan(val).all() else [val]
        # what the fit reports about itself (informational: type-checked, not provable)
        est.mu_search_ = _free_form(f["mu_search"], at["mu_search"])
        for key in ("fit_times", "selection_path"):
            value = _free_form(f[key], at[key])
            if value is not None:           # absent from files of the first format
                setattr(est, key + "_", value)
        est._objective = est._make_objective()


def _group_test_candidates(f, at, est, n_trees, features_added, first_use):
    """GT-GBM's candidates per tree (None for the exact search): sorted distinct indices, one
    list per tree. A feature tree t added to the selection is one of its candidates or, with
    feature groups, shares a group with one of them or with a feature selected before tree t
    (its group was free)."""
    from ._input import check_groups

    gt = getattr(est, "split_search", "exact") == "group_testing"
    if gt != ("group_test_candidates" in f):
        at.fail("group_test_candidates must be present exactly when split_search is "
                "'group_testing'.")
    if not gt:
        return None
    cat = at["group_test_candidates"]
    d = est.n_features_in_
    try:
        groups = check_groups(getattr(est, "feature_groups", None), d)
    except (TypeError, ValueError) as e:
        at.fail(f"the params' feature_groups are not valid: {e}")
    lists = _list(f["group_test_candidates"], cat, n_trees)
    out = []
    for t, c in enumerate(lists):
        a = _index_list(c, cat[t], d)
        if np.any(np.diff(a) <= 0):
            cat[t].fail("candidates must be sorted.")
        free = set(groups[a].tolist()) | set(groups[(first_use >= 0) & (first_use < t)].tolist())
        missing = [x for x in features_added[t] if int(groups[x]) not in free]
        if missing:
            cat[t].fail(f"tree {t} added feature {missing[0]}, which is not one of its "
                        "candidates (nor in a group with one or with an earlier selection).")
        out.append(a)
    return out


class _Stagewise:
    binned = False

    @staticmethod
    def check_fit_params(est, at, k=None):
        """No more features than ``n_features_to_select`` asks for."""
        from .selectors._base import resolve_k

        k = len(est.selected_features_) if k is None else k
        want = est.n_features_to_select
        limit = (est.n_features_in_ if want is None or want == "auto"
                 else resolve_k(want, est.n_features_in_))
        if k > limit:
            at["selected_features"].fail(f"{k} features, more than params.n_features_to_select "
                                         f"{want!r} allows ({limit}).")
    keys = ["device", "mean", "std", "selected_features", "standardized_coef", "bias", "coef",
            "intercept", "weights_history", "cost_history", "validation_cost_history"]
    optional = ["evals_result", "categories", "category_coef"]

    @staticmethod
    def write(est):
        return {
            "device": str(est.device_),
            "mean": _floats_out(est.mean_), "std": _floats_out(est.std_),
            "selected_features": np.asarray(est.selected_features_).tolist(),
            "standardized_coef": _floats_out(est.standardized_coef_),
            "bias": _floats_out(est.bias_), "coef": _floats_out(est.coef_),
            "intercept": _floats_out(est.intercept_),
            "weights_history": _floats_out(est.weights_history_),
            "cost_history": _floats_out(est.cost_history_),
            "validation_cost_history": (None if est.validation_cost_history_ is None
                                        else _floats_out(est.validation_cost_history_)),
            "evals_result": [_floats_out(r) for r in est.evals_result_],
            **_Stagewise._write_categories(est),
        }

    @staticmethod
    def _write_categories(est):
        codes = getattr(est, "category_codes_", None)
        if codes is None:
            return {}
        return {"categories": categories_to_dict(codes),
                "category_coef": [[int(f), _floats_out(np.atleast_2d(a))]
                                  for f, a in sorted(est.category_coef_.items())]}

    @staticmethod
    def _read_categories(est, f, at, sel, m, classifier):
        """The category maps and the selected categorical columns' weights: one entry per
        selected categorical column, (m, n_codes) finite weights."""
        est.category_codes_ = None
        est.category_coef_ = {}
        if ("categories" in f) != ("category_coef" in f):
            at.fail("categories and category_coef come together.")
        if "categories" not in f:
            return np.zeros(est.n_features_in_, dtype=bool)
        codes = read_categories(f["categories"], at["categories"], est.n_features_in_,
                                T.MAX_VALUE_BINS)
        is_cat = codes.is_categorical
        want = [int(x) for x in sel if is_cat[x]]
        cat = at["category_coef"]
        entries = _list(f["category_coef"], cat, len(want))
        coef = {}
        for i, e in enumerate(entries):
            _list(e, cat[i], 2)
            col = _int(e[0], cat[i][0], 0, est.n_features_in_ - 1)
            if col != sorted(want)[i]:
                cat[i][0].fail(f"the selected categorical columns are {sorted(want)}.")
            a = _float_array(e[1], cat[i][1], (m, codes.n_codes[col]))
            coef[col] = a if classifier else a[0]
        est.category_codes_, est.category_coef_ = codes, coef
        return is_cat

    @staticmethod
    def read(est, f, at):
        _obj(f, at, _Stagewise.keys, _Stagewise.optional)
        d = est.n_features_in_
        classifier = hasattr(est, "classes_")
        m = _n_outputs(est) if classifier else 1
        est.device_ = _device_of(f["device"], at["device"])
        mean = _float_array(f["mean"], at["mean"], (d,))
        std = _float_array(f["std"], at["std"], (d,), lo=0.0)
        sel = _index_list(f["selected_features"], at["selected_features"], d)
        k = sel.shape[0]
        is_cat = _Stagewise._read_categories(est, f, at, sel, m, classifier)
        if np.any((std[sel] == 0) & ~is_cat[sel]):
            at["selected_features"].fail("a constant feature (std 0) cannot be selected.")
        coef_shape = (m, d) if classifier else (d,)
        hist_shape = (k + 1, m, d) if classifier else (k + 1, d)
        a = _float_array(f["standardized_coef"], at["standardized_coef"], coef_shape)
        bias = (_float_array(f["bias"], at["bias"], (m,)) if classifier
                else _float(f["bias"], at["bias"]))
        coef = _float_array(f["coef"], at["coef"], coef_shape)
        intercept = (_float_array(f["intercept"], at["intercept"], (m,)) if classifier
                     else _float(f["intercept"], at["intercept"]))
        hist = _float_array(f["weights_history"], at["weights_history"], hist_shape)
        a2, c2, h3 = a.reshape(m, d), coef.reshape(m, d), hist.reshape(k + 1, m, d)
        off = np.ones(d, dtype=bool)
        off[sel] = False
        if np.any(a2[:, off] != 0) or np.any(c2[:, off] != 0):
            at["coef"].fail("a feature that was not selected has a non-zero weight.")
        if np.any(h3[0] != 0):
            at["weights_history"][0].fail("round 0 (the bias alone) has non-zero weights.")
        for r in range(1, k + 1):
            step = h3[r] != h3[r - 1]
            step[:, sel[r - 1]] = False
            if step.any():
                at["weights_history"][r].fail(f"round {r} changes a weight other than that of "
                                              f"selected feature {int(sel[r - 1])}.")
        if not np.array_equal(h3[k], a2):
            at["weights_history"][k].fail("the last round's weights are not "
                                          "standardized_coef.")
        inv = np.divide(1.0, std, out=np.zeros(d), where=std > 0)
        # coef_ = standardized_coef_ / std_ and intercept_ = bias_ - coef_ @ mean_, up to the
        # rounding of a product and of a BLAS dot product
        expect = a2 * inv
        if np.any(np.abs(c2 - expect) > 1e-12 * np.abs(expect)):
            at["coef"].fail("not standardized_coef / std.")
        b2, i2 = np.atleast_1d(bias), np.atleast_1d(intercept)
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.abs(b2) + np.abs(c2) @ np.abs(mean)
            gap = np.abs(i2 - (b2 - c2 @ mean))
        if not (np.all(np.isfinite(scale)) and np.all(gap <= 1e-9 * scale + 1e-300)):
            at["intercept"].fail("not bias - coef @ mean.")
        cost = _float_array(f["cost_history"], at["cost_history"], (k + 1,), lo=0.0)
        # every round lowers the training cost or leaves it (up to the rounding of the
        # evaluated cost, far below this margin)
        rose = np.flatnonzero(cost[1:] > cost[:-1] * (1 + 1e-9) + 1e-300)
        if rose.size:
            at["cost_history"][int(rose[0]) + 1].fail("the cost rose in a round; each round "
                                                      "lowers the training cost or leaves it.")
        _Stagewise.check_fit_params(est, at, k)
        vch = f["validation_cost_history"]
        if vch is not None:
            vch = _float_array(vch, at["validation_cost_history"], (k + 1,), lo=0.0)
        if "evals_result" in f:
            evals = _loss_lists(f["evals_result"], at["evals_result"], k + 1)
            last = evals[-1] if evals else None
            if (vch is None) != (last is None) or (vch is not None
                                                   and not np.array_equal(vch, last)):
                at["evals_result"].fail("its last entry is not validation_cost_history.")
        else:           # written before evals_result_ existed
            evals = [] if vch is None else [vch]
        est.evals_result_ = evals
        est.mean_, est.std_ = mean, std
        est.selected_features_ = sel.astype(np.intp)
        est.support_ = np.zeros(d, dtype=bool)
        est.support_[sel] = True
        est.cost_history_, est.validation_cost_history_ = cost, vch
        est.standardized_coef_, est.bias_ = a, bias
        est.coef_, est.intercept_ = coef, intercept
        est.weights_history_ = hist
        # selection_path_ is derived from the selection and the costs: no field of its own
        from .path import selection_path
        est._set_selection_path(selection_path(est), entry_round=list(range(1, k + 1)))


class _ControlBurn:
    binned = True

    @staticmethod
    def check_fit_params(est, at):
        """The bins are those of ``max_bins``."""
        _check_max_bins(est, at)
    keys = ["device", "bins", "selected_features", "feature_importances", "forest_coverage",
            "forest_features", "n_trees", "tree_weights", "intercept", "lambda",
            "selection_exact", "selection_path", "fit_times", "refit"]

    @staticmethod
    def write(est):
        from .selectors.gbfs import _BaseGBFS

        refit = est.refit_estimator_
        if isinstance(refit, _BaseGBFS):
            r = {"kind": "gbfs", "model": {**_body_header(refit, type(refit).__name__,
                                                          getattr(refit, "feature_names_in_",
                                                                  None)),
                                           "fitted": _GBFS.write(refit)}}
        elif type(refit).__name__ == "DummyRegressor":
            r = {"kind": "constant", "value": _float_out(np.ravel(refit.constant_)[0])}
        elif type(refit).__name__ == "DummyClassifier":
            r = {"kind": "prior", "class_prior": _floats_out(refit.class_prior_)}
        else:
            raise ValueError(
                f"cannot save {type(est).__name__} with refit_estimator="
                f"{type(refit).__name__}(...) in the gpufs model format, which describes "
                "gpufs models only. Save it with pickle or joblib instead (and load pickles "
                "only from sources you trust: SECURITY.md).")
        return {
            "device": str(est.device_),
            "bins": bins_to_dict(est.bin_mapper_),
            "selected_features": np.asarray(est.selected_features_).tolist(),
            "feature_importances": _floats_out(est.feature_importances_),
            "forest_coverage": int(est.forest_coverage_),
            "forest_features": np.asarray(est.forest_features_).tolist(),
            "n_trees": int(est.n_trees_),
            "tree_weights": _floats_out(est.tree_weights_),
            "intercept": _float_out(est.intercept_),
            "lambda": None if est.lambda_ is None else _float_out(est.lambda_),
            "selection_exact": bool(est.selection_exact_),
            "selection_path": _free_form_out(est.selection_path_, "selection_path_"),
            "fit_times": _free_form_out(getattr(est, "fit_times_", None), "fit_times_"),
            "refit": r,
        }

    @staticmethod
    def read(est, f, at):
        from .binning import BinMapper

        _obj(f, at, _ControlBurn.keys)
        d = est.n_features_in_
        est.device_ = _device_of(f["device"], at["device"])
        bins = read_bins(f["bins"], at["bins"], d)
        est.bin_mapper_ = BinMapper._from_validated(*bins)
        est.category_codes_ = bins[4]
        sel = _index_list(f["selected_features"], at["selected_features"], d)
        imp = _float_array(f["feature_importances"], at["feature_importances"], (d,), lo=0.0)
        off = np.ones(d, dtype=bool)
        off[sel] = False
        if np.any(imp[off] != 0):
            at["feature_importances"].fail("a feature that was not selected has importance.")
        cov = _int(f["forest_coverage"], at["forest_coverage"], 0, d)
        forest_features = _index_list(f["forest_features"], at["forest_features"], d)
        if forest_features.shape[0] != cov or np.any(np.diff(forest_features) <= 0):
            at["forest_features"].fail("expected the forest_coverage features, in increasing "
                                       "order.")
        if not np.isin(sel, forest_features).all():
            at["selected_features"].fail("a selected feature is not used by the forest.")
        n_trees = _int(f["n_trees"], at["n_trees"], 0, MAX_NODES)
        weights = _float_array(f["tree_weights"], at["tree_weights"], (n_trees,), lo=0.0)
        intercept = _float(f["intercept"], at["intercept"])
        lam = None if f["lambda"] is None else _float(f["lambda"], at["lambda"], lo=0.0)
        exact = _bool(f["selection_exact"], at["selection_exact"])
        path = _free_form(f["selection_path"], at["selection_path"])
        times = _free_form(f["fit_times"], at["fit_times"])
        est.refit_estimator_ = _ControlBurn._read_refit(est, f["refit"], at["refit"], sel)
        est.selected_features_ = sel
        est.support_ = np.zeros(d, dtype=bool)
        est.support_[sel] = True
        est.feature_importances_ = imp
        est.forest_coverage_, est.forest_features_ = cov, forest_features
        est.n_trees_, est.tree_weights_ = n_trees, weights
        est.intercept_, est.lambda_, est.selection_exact_ = intercept, lam, exact
        est.selection_path_ = path
        if times is not None:
            est.fit_times_ = times
        _ControlBurn.check_fit_params(est, at)

    @staticmethod
    def _read_refit(est, r, at, sel):
        from sklearn.dummy import DummyClassifier, DummyRegressor

        classifier = hasattr(est, "classes_")
        if type(r) is not dict:
            at.fail(f"expected an object, got {_kind(r)}.")
        kind = _str(r.get("kind"), at["kind"], {"gbfs", "constant", "prior"})
        if (kind == "gbfs") != (sel.shape[0] > 0):
            at["kind"].fail("the refit model is a GBFS model exactly when features were "
                            "selected.")
        if kind == "gbfs":
            _obj(r, at, ["kind", "model"])
            mat = at["model"]
            _obj(r["model"], mat, _BODY_KEYS)
            want = "GBFSClassifier" if classifier else "GBFSRegressor"
            if r["model"].get("estimator") != want:
                mat["estimator"].fail(f"the refit model of a {type(est).__name__} is a {want}.")
            refit = _read_body(r["model"], mat, nested=True)
            if refit.n_features_in_ != sel.shape[0]:
                mat["n_features_in"].fail(f"{refit.n_features_in_} features, but "
                                          f"{sel.shape[0]} were selected.")
            if classifier and not (refit.classes_.dtype == est.classes_.dtype
                                   and np.array_equal(refit.classes_, est.classes_)):
                mat["classes"].fail("differ from the model's classes.")
            return refit
        if kind == "constant":
            if classifier:
                at["kind"].fail("a classifier's constant model is 'prior'.")
            _obj(r, at, ["kind", "value"])
            value = _float(r["value"], at["value"])
            return DummyRegressor().fit(np.zeros((1, 1)), np.array([value]))
        if not classifier:
            at["kind"].fail("a regressor's constant model is 'constant'.")
        _obj(r, at, ["kind", "class_prior"])
        k = len(est.classes_)
        prior = _float_array(r["class_prior"], at["class_prior"], (k,), lo=0.0)
        dummy = DummyClassifier(strategy="prior").fit(np.zeros((k, 1)), est.classes_)
        dummy.class_prior_ = prior
        return dummy


class _MultiTaskGBFS:
    """Multitask GBFS: one ensemble per task over shared bins, Omega_G and each Omega_t.

    Beyond each ensemble's own checks: every task's ensemble has ``n_estimators`` rounds of
    trees; Omega_t (``selected_features_by_task``) is exactly the set of features task t's
    trees split on, in an order consistent with the first tree that uses each; Omega_G
    (``selected_features``) is exactly their union; the trees of all tasks together stay
    under ``MAX_NODES``.
    """

    binned = True
    keys = ["device", "tasks", "bins", "ensembles", "n_estimators", "mu_t",
            "selected_features", "selected_features_by_task", "feature_importances",
            "selection_records", "fit_times", "selection_path"]

    @staticmethod
    def write(est):
        return {
            "device": str(est.device_),
            "tasks": _classes_out(est.tasks_),
            "bins": bins_to_dict(est.bin_mapper_),
            "ensembles": [_ensemble_fields(e) for e in est.ensembles_],
            "n_estimators": int(est.n_estimators_),
            "mu_t": _floats_out(est.mu_t_),
            "selected_features": np.asarray(est.selected_features_).tolist(),
            "selected_features_by_task": [np.asarray(s).tolist()
                                          for s in est.selected_features_by_task_],
            "feature_importances": _floats_out(est.feature_importances_),
            "selection_records": [{
                "tree_column": [int(c) for c in rec["tree_column"]],
                "features_added": [[int(f) for f in fs] for fs in rec["features_added"]],
                "train_loss": _floats_out(rec["train_loss"]),
                "val_loss": _floats_out(rec["val_loss"]),
            } for rec in est.selection_records_],
            "fit_times": _free_form_out(est.fit_times_, "fit_times_"),
            "selection_path": _free_form_out(est.selection_path_, "selection_path_"),
        }

    @staticmethod
    def read(est, f, at):
        from .binning import BinMapper
        from .tree import n_nodes_for_depth

        _obj(f, at, _MultiTaskGBFS.keys)
        d = est.n_features_in_
        k_out = _n_outputs(est)
        est.device_ = _device_of(f["device"], at["device"])
        tasks = _read_classes(f["tasks"], at["tasks"], 1, "a model has at least one task.")
        n_tasks = len(tasks)
        est.tasks_ = tasks
        bins = read_bins(f["bins"], at["bins"], d)
        rounds = _int(f["n_estimators"], at["n_estimators"], 0)
        eat = at["ensembles"]
        _list(f["ensembles"], eat, n_tasks)
        ensembles, first_use, nodes = [], [], 0
        for t, e in enumerate(f["ensembles"]):
            ens = ensemble_from_dict(e, eat[t], n_features=d, n_outputs=k_out, cuts=bins[3],
                                     categorical=BinMapper._from_validated(*bins).is_categorical_,
                                     tagged=False)
            nodes += ens.n_trees * n_nodes_for_depth(ens.max_depth)
            if nodes > MAX_NODES:
                eat[t].fail(f"the tasks' trees hold more than {MAX_NODES} nodes together.")
            if ens.n_trees != rounds * k_out:
                eat[t]["n_trees"].fail(f"{ens.n_trees} trees, but the model has {rounds} "
                                       f"rounds of {k_out}.")
            col = np.asarray(ens.tree_column)
            bad = np.flatnonzero(col != np.arange(ens.n_trees) % k_out)
            if bad.size:
                eat[t]["tree_column"][int(bad[0])].fail(
                    f"tree {int(bad[0])} of a boosted model fits output {int(bad[0]) % k_out}.")
            _check_split_gains(ens, eat[t]["trees"]["gain"])
            ensembles.append(ens)
            # the first tree of this task that splits on each feature (-1: none)
            first = np.full(d, -1, dtype=np.int64)
            if ens.n_trees:
                feat = ens.stacked()["feature"]
                for tree in range(ens.n_trees - 1, -1, -1):
                    used = feat[tree][feat[tree] >= 0]
                    first[used] = tree
            first_use.append(first)
        sat = at["selected_features_by_task"]
        _list(f["selected_features_by_task"], sat, n_tasks)
        by_task = []
        for t, v in enumerate(f["selected_features_by_task"]):
            sel = _index_list(v, sat[t], d)
            if not np.array_equal(np.sort(sel), np.flatnonzero(first_use[t] >= 0)):
                sat[t].fail("not the features task's trees split on.")
            if np.any(np.diff(first_use[t][sel]) < 0):
                sat[t].fail("not in order of first use.")
            by_task.append(sel)
        selected = _index_list(f["selected_features"], at["selected_features"], d)
        union = np.unique(np.concatenate(by_task)) if by_task else np.zeros(0, np.int64)
        if not np.array_equal(np.sort(selected), union):
            at["selected_features"].fail("not the union of the tasks' selected features.")
        mu_t = _float_array(f["mu_t"], at["mu_t"], (n_tasks,), lo=0.0)
        imp = _float_array(f["feature_importances"], at["feature_importances"], (d,), lo=0.0)
        _check_importances(imp, ensembles, at["feature_importances"])
        rat = at["selection_records"]
        _list(f["selection_records"], rat, n_tasks)
        records = []
        for t, rec in enumerate(f["selection_records"]):
            n_trees = ensembles[t].n_trees
            _obj(rec, rat[t], ["tree_column", "features_added", "train_loss", "val_loss"])
            rcol = _int_array(rec["tree_column"], rat[t]["tree_column"], (n_trees,), 0,
                              k_out - 1)
            if not np.array_equal(rcol, np.asarray(ensembles[t].tree_column)):
                rat[t]["tree_column"].fail("differs from the ensemble's tree_column.")
            added = _list(rec["features_added"], rat[t]["features_added"], n_trees)
            records.append({
                "tree_column": rcol.tolist(),
                "features_added": [_index_list(a, rat[t]["features_added"][i], d).tolist()
                                   for i, a in enumerate(added)],
                **{k: _float_array(rec[k], rat[t][k], (n_trees,), lo=0.0,
                                   nonfinite=("NaN", "Infinity")).tolist()
                   for k in ("train_loss", "val_loss")}})
        est.tasks_ = tasks
        est.bin_mapper_ = BinMapper._from_validated(*bins)
        est.category_codes_ = bins[4]
        est.ensembles_ = ensembles
        est.n_estimators_ = rounds
        est.mu_t_ = mu_t
        est.selected_features_ = selected
        est.support_ = np.zeros(d, dtype=bool)
        est.support_[selected] = True
        est.selected_features_by_task_ = by_task
        est.first_use_tree_by_task_ = np.stack(first_use) if first_use else \
            np.zeros((0, d), np.int64)
        est.feature_importances_ = imp
        est.selection_records_ = records
        for key in ("fit_times", "selection_path"):
            setattr(est, key + "_", _free_form(f[key], at[key]))
        est._objective = est._make_objective()
        _MultiTaskGBFS.check_fit_params(est, at)

    @staticmethod
    def check_fit_params(est, at):
        """The task prices as fit resolves them (one per task, mu_G + mu_t < 1 with
        root_sse), and the tree depth, rounds (all of them: no early stopping) and bins of
        the parameters."""
        try:
            mu_t = est._resolve_mu_t(len(est.tasks_))
        except ValueError as exc:
            _At("params")["mu_t"].fail(str(exc))
        if not np.array_equal(est.mu_t_, mu_t):
            at["mu_t"].fail(f"{np.asarray(est.mu_t_).tolist()[:8]} differs from params.mu_t "
                            f"{mu_t.tolist()[:8]}.")
        for t, ens in enumerate(est.ensembles_):
            if ens.max_depth != est.max_depth:
                at["ensembles"][t]["max_depth"].fail(f"the trees have depth {ens.max_depth}, "
                                                     f"but params.max_depth is "
                                                     f"{est.max_depth}.")
        if est.n_estimators_ != est.n_estimators:
            at["n_estimators"].fail(f"{est.n_estimators_} rounds, but params.n_estimators is "
                                    f"{est.n_estimators}.")
        _check_max_bins(est, at)


_FAMILIES = {
    "GBFSRegressor": _GBFS, "GBFSClassifier": _GBFS,
    "StagewiseRegressor": _Stagewise, "StagewiseClassifier": _Stagewise,
    "ControlBurnRegressor": _ControlBurn, "ControlBurnClassifier": _ControlBurn,
    "MultiTaskGBFSRegressor": _MultiTaskGBFS, "MultiTaskGBFSClassifier": _MultiTaskGBFS,
}


# --------------------------------------------------------------------------------------------
# Format 1 -> format 2
# --------------------------------------------------------------------------------------------

def _untoken(v):
    """Format 1 held NaN / Infinity tokens; format 2 writes them as strings."""
    if isinstance(v, _Token):
        return v.name
    if type(v) is list:
        return [_untoken(x) for x in v]
    if type(v) is dict:
        return {k: _untoken(x) for k, x in v.items()}
    return v


def _migrate_format1(p):
    """Map a gpufs 0.1.0 GBFS file onto format 2 (then validated like any file)."""
    at = _At()
    _obj(p, at, ["estimator", "params", "ensemble", "bin_mapper", "selected_features",
                 "first_use_tree", "feature_importances", "selection_record",
                 "n_features_in", "feature_names_in", "n_estimators_", "classes"])
    name = _str(p["estimator"], at["estimator"], {"GBFSRegressor", "GBFSClassifier"})
    e = _obj(p["ensemble"], at["ensemble"], ["format", "max_depth", "n_features",
                                            "base_score", "tree_column", "trees"])
    classes = p["classes"]
    if classes is not None:
        values = _list(classes, at["classes"], max_length=MAX_CLASSES)
        kinds = {type(x) for x in values}
        if len(kinds) != 1 or not kinds <= {str, int, float, bool}:
            at["classes"].fail("labels must all be strings, all integers, all numbers or all "
                               "booleans.")
        classes = _classes_out(np.asarray(values))
    rec = _untoken(p["selection_record"])
    # gpufs 0.1.0 fitted at the mu it was given (no search)
    params_mu = p["params"].get("mu") if type(p["params"]) is dict else None
    base = _list(_untoken(e["base_score"]), at["ensemble"]["base_score"])
    cols = _list(e["tree_column"], at["ensemble"]["tree_column"])
    params = p["params"]
    if type(params) is dict:  # 0.1.0 had fewer parameters: the others take their defaults
        import gpufs

        defaults = getattr(gpufs, name)().get_params(deep=False)
        params = {**{k: _encode_param(k, v, name) for k, v in defaults.items()}, **params}
    return {
        "estimator": name, "params": params, "n_features_in": p["n_features_in"],
        "feature_names_in": p["feature_names_in"], "classes": classes,
        "fitted": {
            "device": "cpu",
            "ensemble": {"max_depth": e["max_depth"], "n_features": e["n_features"],
                         "n_outputs": len(base), "n_trees": len(cols),
                         "base_score": base, "tree_column": cols,
                         "trees": _untoken(e["trees"])},
            "bins": _untoken(p["bin_mapper"]),
            "n_estimators": p["n_estimators_"],
            "selected_features": p["selected_features"],
            "first_use_tree": p["first_use_tree"],
            "feature_importances": _untoken(p["feature_importances"]),
            "selection_record": rec,
            "mu": params_mu, "mu_search": None, "fit_times": None, "selection_path": None,
        },
    }


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------

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
    if name not in _FAMILIES:
        raise ValueError(f"{name} has no gpufs model format.")
    check_is_fitted(est)
    _check_saveable(est, name)
    return _header(est, _FAMILIES[name].write(est))


def _check_saveable(est, name):
    """What load_model checks of the parameters, checked before writing: a parameter set
    out of its range, or changed since fit (``set_params`` without a refit) so that it no
    longer describes the fitted model, would make a file that does not load."""
    from sklearn.utils._param_validation import InvalidParameterError

    try:
        est._validate_params()
        _check_feature_params(est, _At("params"), est.n_features_in_)
        _FAMILIES[name].check_fit_params(est, _At("fitted"))
    except (InvalidParameterError, ModelFileError) as exc:
        raise ValueError(f"cannot save {name}: {exc} The parameters must be those of the fit: "
                         "refit the model, or set them back.") from None


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
    at = _At()
    if type(doc) is not dict:
        at.fail(f"expected a JSON object, got {_kind(doc)}.")
    if "format" not in doc and type(doc.get("ensemble")) is dict \
            and doc["ensemble"].get("format") == _FORMAT1:
        body = _migrate_format1(doc)
        return _read_body(body, at, expected)
    fmt = doc.get("format")
    if fmt != FORMAT:
        at.fail(f"not a gpufs model file (format={_short(fmt)}, expected {FORMAT!r}).")
    _obj(doc, at, ["format", "format_version", "gpufs_version"] + _BODY_KEYS)
    version = doc["format_version"]
    if version != FORMAT_VERSION:
        at["format_version"].fail(f"format version {_short(version)}; this gpufs reads version "
                                  f"{FORMAT_VERSION} (and migrates the first format).")
    _str(doc["gpufs_version"], at["gpufs_version"])
    return _read_body(doc, at, expected)


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
    code (the format: ``gpufs.model_io``; what loading trusts: SECURITY.md). It is written to
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
        Largest file read (None: ``gpufs.model_io.MAX_FILE_BYTES``, 256 MiB); raise it only
        for a trusted file.

    Returns
    -------
    estimator : an instance of the class it is called on, fitted
    """
    return load_model(path, expected=cls, max_bytes=max_bytes)


__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_BINNED_FEATURES", "MAX_CLASSES", "MAX_CONTAINERS",
           "MAX_DEPTH", "MAX_FEATURES", "MAX_FILE_BYTES", "MAX_NESTING", "MAX_NODES",
           "ModelFileError",
           "bins_to_dict", "dumps", "ensemble_from_dict", "ensemble_to_dict",
           "estimator_load_model", "estimator_save_model",
           "from_document", "load_model", "loads", "plain", "read_bins", "save_model",
           "to_document"]
