"""Strict JSON for model files: the parser, the writer and the typed field readers.

Owns RFC 8259 JSON in and out (no ``NaN`` / ``Infinity`` tokens, no duplicate keys, no numbers
that overflow float64; non-finite floats written as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"``), the caps on what one file may hold, :class:`ModelFileError`, and one reader
per field type (``read_int``, ``read_float_array``, ``read_free_form``, ...), each of which
checks one value and names its place in the file (:class:`At`) in the error it raises. The
codecs of the models (binning, tree, each selector family) and the envelope
(:mod:`gpufs.io.model_io`) are built from these readers; the format is described in
``docs/model_format.rst``.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np

#: The version of the model file format (model files and standalone ensembles).
FORMAT_VERSION = 2
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
NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class ModelFileError(ValueError):
    """A model file that is not one gpufs wrote: the message names the field and the rule."""


class Token:
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
                raise ModelFileError(
                    f"key {short(k)} appears twice in one object; strict JSON "
                    "readers disagree on which one counts."
                )
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
        markers (``Token``) that the field checks reject. A ModelFileError (a ValueError)
        says what is wrong otherwise.
    """
    # counted in strings too: an upper bound, taken before the parser allocates anything
    if text.count("[") + text.count("{") > MAX_CONTAINERS:
        raise ModelFileError(
            f"more than {MAX_CONTAINERS} JSON lists and objects; no model file has that many."
        )
    try:
        return json.loads(text, parse_constant=Token, object_pairs_hook=_no_duplicate_keys)
    except ModelFileError:
        raise
    except RecursionError:
        raise ModelFileError("the JSON is nested too deeply to be a model file.") from None
    except ValueError as exc:  # JSONDecodeError, and integers of more than 4300 digits
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


def floats_out(a):
    """float64 array -> nested lists; NaN / +-inf as the strings of ``NONFINITE``."""
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    if finite.all():
        return a.tolist()
    obj = a.astype(object)
    obj[np.isnan(a)] = "NaN"
    obj[a == np.inf] = "Infinity"
    obj[a == -np.inf] = "-Infinity"
    return obj.tolist()


def float_out(x):
    return floats_out(np.float64(x))


class At:
    """Where in the document a value sits: ``fitted.ensemble.trees.feature[3][7]``."""

    __slots__ = ("path",)

    def __init__(self, path=""):
        self.path = path

    def __getitem__(self, key):
        if isinstance(key, str):
            return At(f"{self.path}.{key}" if self.path else key)
        return At(f"{self.path}[{key}]")

    def fail(self, msg):
        raise ModelFileError(f"{self.path or 'the file'}: {msg}")


def short(x):
    """repr of a value read from the file, cut to a length fit for an error message."""
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."


def kind_of(v):
    if isinstance(v, Token):
        return f"the non-standard JSON token {v.name}"
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(v), type(v).__name__)


def read_obj(v, at, required, optional=()):
    """A JSON object with exactly the ``required`` keys and any of the ``optional`` ones."""
    if type(v) is not dict:
        at.fail(f"expected an object, got {kind_of(v)}.")
    missing = [k for k in required if k not in v]
    if missing:
        at.fail(f"missing key {missing[0]!r}.")
    allowed = set(required) | set(optional)
    extra = [k for k in v if k not in allowed]
    if extra:
        at.fail(f"unexpected key {short(extra[0])} (a file of another format version, or edited).")
    return v


def read_int(v, at, lo=None, hi=None):
    if type(v) is not int:
        at.fail(f"expected an integer, got {kind_of(v)}.")
    if lo is not None and v < lo:
        at.fail(f"{short(v)} is below the smallest allowed value {lo}.")
    if hi is not None and v > hi:
        at.fail(f"{short(v)} is above the largest allowed value {hi}.")
    return v


def read_float(v, at, lo=None, nonfinite=()):
    if type(v) is str and v in NONFINITE and v in nonfinite:
        return NONFINITE[v]
    if type(v) not in (int, float):
        at.fail(
            f"expected a number, got {kind_of(v)}"
            + (
                f" (non-finite values are written {', '.join(map(repr, nonfinite))})"
                if nonfinite
                else ""
            )
            + "."
        )
    try:
        x = float(v)
    except OverflowError:
        at.fail("number out of the float64 range.")
    if not math.isfinite(x):
        at.fail("number out of the float64 range.")
    if lo is not None and x < lo:
        at.fail(f"{x!r} is below the smallest allowed value {lo}.")
    return x


def read_bool(v, at):
    if type(v) is not bool:
        at.fail(f"expected true or false, got {kind_of(v)}.")
    return v


def read_str(v, at, choices=None):
    if type(v) is not str:
        at.fail(f"expected a string, got {kind_of(v)}.")
    if len(v) > MAX_STRING:
        at.fail(f"string longer than {MAX_STRING} characters.")
    if choices is not None and v not in choices:
        at.fail(f"{short(v)} is not one of {sorted(choices)}.")
    return v


def read_list(v, at, length=None, max_length=None):
    if type(v) is not list:
        at.fail(f"expected a list, got {kind_of(v)}.")
    if length is not None and len(v) != length:
        at.fail(f"expected {length} entries, got {len(v)}.")
    if max_length is not None and len(v) > max_length:
        at.fail(f"{len(v)} entries, more than the {max_length} allowed.")
    return v


def _flat(v, at, shape):
    """Nested lists of the exact ``shape`` -> (flat list, function: flat index -> At)."""
    read_list(v, at, shape[0])
    flat = v
    for dim in range(1, len(shape)):
        for i, row in enumerate(flat):
            if type(row) is not list or len(row) != shape[dim]:
                where = at
                for j in np.unravel_index(i, shape[:dim]):
                    where = where[int(j)]
                read_list(row, where, shape[dim])
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


def read_int_array(v, at, shape, lo, hi, dtype=np.int64):
    """An integer array of ``shape`` (list or list of lists) with values in [lo, hi]."""
    flat, where = _flat(v, at, shape)
    if not set(map(type, flat)) <= {int}:
        i, x = _first_bad(flat, (int,))
        where(i).fail(f"expected an integer, got {kind_of(x)}.")
    try:
        a = np.array(flat, dtype=np.int64)
    except OverflowError:
        i = next(i for i, x in enumerate(flat) if not -(2**63) <= x < 2**63)
        where(i).fail(f"{short(flat[i])} is out of the allowed range [{lo}, {hi}].")
    bad = np.flatnonzero((a < lo) | (a > hi))
    if bad.size:
        where(int(bad[0])).fail(f"{int(a[bad[0]])} is out of the allowed range [{lo}, {hi}].")
    return a.astype(dtype).reshape(shape)


def read_float_array(v, at, shape, lo=None, nonfinite=()):
    """A float64 array of ``shape``: finite numbers, or the strings of ``nonfinite``."""
    flat, where = _flat(v, at, shape)
    types = set(map(type, flat))
    if not types <= {int, float, str}:
        i, x = _first_bad(flat, (int, float, str))
        where(i).fail(f"expected a number, got {kind_of(x)}.")
    coded = None
    if str in types:
        coded = np.fromiter((type(x) is str for x in flat), dtype=bool, count=len(flat))
        flat = [
            read_float(x, where(i), nonfinite=nonfinite) if type(x) is str else x
            for i, x in enumerate(flat)
        ]
    try:
        a = np.array(flat, dtype=np.float64)
    except OverflowError:
        i = next(i for i, x in enumerate(flat) if type(x) is int and abs(x) >= 2**1023)
        where(i).fail("number out of the float64 range.")
    bad = ~np.isfinite(a)  # a JSON number that overflowed (1e999)
    if coded is not None:
        bad &= ~coded
    bad = np.flatnonzero(bad)
    if bad.size:
        where(int(bad[0])).fail("number out of the float64 range.")
    if lo is not None:
        low = np.flatnonzero(a < lo)
        if low.size:
            where(int(low[0])).fail(
                f"{a[low[0]].item()!r} is below the smallest allowed value {lo}."
            )
    return a.reshape(shape)


def read_bool_array(v, at, shape):
    flat, where = _flat(v, at, shape)
    if not set(map(type, flat)) <= {bool}:
        i, x = _first_bad(flat, (bool,))
        where(i).fail(f"expected true or false, got {kind_of(x)}.")
    return np.array(flat, dtype=np.bool_).reshape(shape)


def read_index_list(v, at, n_features, max_length=None):
    """Distinct feature indices in [0, n_features), as int64 (order kept)."""
    read_list(v, at, max_length=n_features if max_length is None else max_length)
    a = read_int_array(v, at, (len(v),), 0, n_features - 1)
    if np.unique(a).shape[0] != a.shape[0]:
        at.fail("a feature index appears twice.")
    return a


def read_free_form(v, at, depth=0):
    """A record that only describes the fit (``selection_path``, ``fit_times``, ...).

    Encoded by :func:`free_form_out`: a mapping is ``{"items": [[key, value], ...]}`` (keys
    are strings or integers), a non-finite float ``{"float": "NaN"}`` (or "Infinity",
    "-Infinity"), lists are lists; strings, numbers, booleans and null are themselves.
    """
    if depth > MAX_NESTING:
        at.fail(f"nested deeper than {MAX_NESTING} levels.")
    t = type(v)
    if v is None or t in (bool, int):
        return v
    if t is str:
        return read_str(v, at)
    if t is float:
        return read_float(v, at)
    if t is list:
        read_list(v, at, max_length=MAX_NODES)
        return [read_free_form(x, at[i], depth + 1) for i, x in enumerate(v)]
    if t is dict and "float" in v:
        read_obj(v, at, ["float"])
        return read_float(v["float"], at["float"], nonfinite=tuple(NONFINITE))
    if t is dict:
        read_obj(v, at, ["items"])
        out = {}
        for i, pair in enumerate(read_list(v["items"], at["items"])):
            read_list(pair, at["items"][i], 2)
            key = pair[0]
            if type(key) not in (str, int):
                at["items"][i][0].fail(f"expected a string or integer key, got {kind_of(key)}.")
            if key in out:
                at["items"][i][0].fail(f"key {short(key)} appears twice.")
            out[key] = read_free_form(pair[1], at["items"][i][1], depth + 1)
        return out
    at.fail(f"unexpected {kind_of(v)}.")


def free_form_out(v, name, depth=0):
    """The JSON form of a record read back by :func:`read_free_form` (tuples become lists)."""
    if depth > MAX_NESTING:
        raise ValueError(f"cannot save {name}: nested deeper than {MAX_NESTING} levels.")
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": float_out(v)}
    if isinstance(v, (list, tuple)):
        return [free_form_out(x, name, depth + 1) for x in v]
    if isinstance(v, dict):
        items = []
        for k, x in v.items():
            if isinstance(k, np.generic):
                k = k.item()
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ValueError(f"cannot save {name}: key {k!r} is not a string or integer.")
            items.append([k, free_form_out(x, name, depth + 1)])
        return {"items": items}
    raise ValueError(f"cannot save {name}: {type(v).__name__} values have no JSON form.")


def scalar_out(x, name, est_name):
    if isinstance(x, np.generic):
        x = x.item()
    if x is None or isinstance(x, (bool, str, int)):
        return x
    if isinstance(x, float) and math.isfinite(x):
        return x
    raise ValueError(
        f"cannot save {est_name}: parameter {name} holds {x!r}, which has no JSON form."
    )


def read_scalar(v, at):
    if v is None or type(v) in (bool, int):
        return v
    if type(v) is str:
        return read_str(v, at)
    return read_float(v, at)
