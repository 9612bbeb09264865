"""Category -> code maps of a table's categorical columns (the input door's encoding).

Owns the rule that turns the categories of a column into the codes the engine bins and splits
on, learned once in ``fit`` and applied to every later table (most frequent category first,
rare ones pooled in one last code, missing and unseen categories to NaN), and the maps' JSON
form in model files.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import math

import numpy as np

from ..io._strict_json import (
    MAX_CLASSES,
    read_index_list,
    read_int,
    read_int_array,
    read_list,
    read_obj,
    read_scalar,
)

#: Share of a column's non-missing values the own-code categories cover before the rest pool.
COVERAGE = 0.99


def plain_scalar(v):
    """A value as a plain Python scalar (numpy scalars unwrapped): category values, and the
    class and task labels that messages name."""
    return v.item() if isinstance(v, np.generic) else v


class CategoryCodes:
    """The category -> code maps of the categorical columns of a table.

    Parameters
    ----------
    n_features : int
        Columns of the table.
    values : dict int -> list
        For each categorical column, its categories in code order (most frequent first; the
        pooled rare categories last).
    n_codes : dict int -> int
        Codes of each categorical column: category ``values[f][j]`` has code
        ``min(j, n_codes[f] - 1)``.
    """

    def __init__(self, n_features, values, n_codes):
        self.n_features = int(n_features)
        self.values = {int(f): [plain_scalar(v) for v in vals] for f, vals in values.items()}
        self.n_codes = {int(f): int(n) for f, n in n_codes.items()}
        self._lookup = None

    @property
    def features(self) -> np.ndarray:
        """int64 (n_categorical,): the categorical columns, increasing."""
        return np.array(sorted(self.values), dtype=np.int64)

    @property
    def is_categorical(self) -> np.ndarray:
        """bool (n_features,)."""
        mask = np.zeros(self.n_features, dtype=bool)
        mask[self.features] = True
        return mask

    def categories(self, f) -> list:
        """The categories of column ``f`` in code order (the pooled ones last)."""
        return list(self.values[int(f)])

    @classmethod
    def learn(cls, columns, n_features, max_codes, names=None):
        """Learn the codes of ``columns`` (dict f -> 1-D array of the column's non-missing
        values) with at most ``max_codes`` codes per column (2..255); ``names`` (dict f ->
        column name) for the error messages."""
        return cls.learn_counts(
            {f: count_values(col, (names or {}).get(f, f)) for f, col in columns.items()},
            n_features,
            max_codes,
        )

    @classmethod
    def learn_counts(cls, value_counts, n_features, max_codes):
        """Learn the codes from the columns' value counts (dict f -> ``count_values``' pair,
        or ``merge_counts``' of the parts of a table held in pieces, ``gpufs.dask``): the
        codes ``learn`` gives on the whole columns."""
        values, n_codes = {}, {}
        for f, (uniq, counts) in value_counts.items():
            counts = np.asarray(counts, dtype=np.int64)
            order = np.argsort(-counts, kind="stable")
            uniq, counts = [uniq[i] for i in order], counts[order]
            total = int(counts.sum())
            own = 0
            covered = 0
            while own < len(uniq) and own < max_codes - 1 and covered < COVERAGE * total:
                covered += int(counts[own])
                own += 1
            n = own + (1 if own < len(uniq) else 0)
            values[f], n_codes[f] = uniq, n
        return cls(n_features, values, n_codes)

    def encode(self, f, col, missing, name=None):
        """float64 codes of column ``f``: ``col`` (n,) its values, ``missing`` (n,) bool its
        missing entries. Missing values and categories not seen in fit are NaN.

        A value of the other kind than the fit's categories (a number in a column of text
        categories, text in one of numbers) is a ValueError naming the column (``name``, else
        ``f``): it is the column given as its codes, not an unseen category.
        """
        if self._lookup is None:
            self._lookup = {
                g: {v: min(j, self.n_codes[g] - 1) for j, v in enumerate(vals)}
                for g, vals in self.values.items()
            }
        table = self._lookup[int(f)]
        out = np.full(col.shape[0], np.nan)
        present = ~np.asarray(missing, bool)
        if not present.any():
            return out
        vals = col[present]
        try:
            uniq, inverse = np.unique(vals, return_inverse=True)
        except TypeError:  # values of mixed types cannot be sorted: look each one up
            self._check_kind(f, vals, name)
            out[present] = [table.get(plain_scalar(v), np.nan) for v in vals]
            return out
        self._check_kind(f, uniq, name)
        codes = np.array([table.get(plain_scalar(v), np.nan) for v in uniq], dtype=np.float64)
        out[present] = codes[inverse.reshape(-1)]
        return out

    def _check_kind(self, f, vals, name):
        """Refuse ``vals`` (present values of column f) of another kind than its categories."""
        fitted = self.values[int(f)]
        if not fitted:
            return
        want = _kind(fitted[0])
        if vals.dtype.kind in "biuf":
            other = None if want == "numbers" else "numbers"
        elif vals.dtype.kind in "US":
            other = None if want == "text" else "text"
        else:
            kinds = {_kind(plain_scalar(v)) for v in vals}
            other = next((k for k in sorted(kinds) if k != want), None)
        if other is None:
            return
        shown = ", ".join(repr(v) for v in fitted[:3]) + (", ..." if len(fitted) > 3 else "")
        col = repr(name) if name is not None else f
        raise ValueError(
            f"categorical column {col} held {want.rstrip('s')} categories in fit ({shown}) but "
            f"holds {other} now: "
            f"give its categories as in fit (a column of codes, such as pandas' .cat.codes, "
            f"is not its categories)."
        )

    # --- persistence (validated by read_categories) --------------------------------------
    def to_dict(self) -> dict:
        return {
            "n_features": self.n_features,
            "features": [int(f) for f in self.features],
            "values": [self.values[int(f)] for f in self.features],
            "n_codes": [self.n_codes[int(f)] for f in self.features],
        }

    def __eq__(self, other):
        return isinstance(other, CategoryCodes) and self.to_dict() == other.to_dict()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_lookup"] = None
        return state


def _kind(v) -> str:
    """ "text" or "numbers" (booleans too): the two kinds of categories."""
    return "text" if isinstance(v, (str, bytes)) else "numbers"


def count_values(col, name):
    """The distinct values of a categorical column, sorted, and their counts.

    Parameters
    ----------
    col : ndarray of shape (n,)
        The column's non-missing values.
    name : str or int
        The column, for the error messages.

    Returns
    -------
    values : list
        The distinct values as plain Python scalars, in ``np.unique``'s order.
    counts : ndarray of shape (n_values,), int64
    """
    return _unique_counts(col, repr(name))


def merge_counts(parts, name):
    """``count_values`` of a column from those of its pieces (rows split in any way).

    Parameters
    ----------
    parts : list of (values, counts)
        ``count_values`` of each piece.
    name : str or int
        The column, for the error messages.

    Returns
    -------
    values : list
    counts : ndarray of shape (n_values,), int64
        What ``count_values`` gives on the whole column.
    """
    vals = [v for p in parts for v in p[0]]
    cnts = np.concatenate([np.asarray(p[1], np.int64) for p in parts] or [np.zeros(0, np.int64)])
    arr = np.empty(len(vals), dtype=object)
    arr[:] = vals
    try:
        uniq, inverse = np.unique(arr, return_inverse=True)
    except TypeError as exc:
        raise ValueError(
            f"categorical column {name!r} mixes value types that cannot be "
            f"ordered: {exc}; convert it to one type (for example .astype(str)) "
            "first."
        ) from None
    return [plain_scalar(v) for v in uniq], np.bincount(
        inverse.reshape(-1), weights=cnts, minlength=len(uniq)
    ).astype(np.int64)


def _unique_counts(col, f):
    """Distinct values of a column and their counts (mixed types: an error naming it)."""
    col = np.asarray(col)
    try:
        uniq, counts = np.unique(col, return_counts=True)
    except TypeError as exc:
        raise ValueError(
            f"categorical column {f} mixes value types that cannot be ordered: "
            f"{exc}; convert it to one type (for example .astype(str)) first."
        ) from None
    if uniq.dtype.kind == "f" and not np.isfinite(uniq).all():
        raise ValueError(f"categorical column {f} holds infinity; categories must be finite.")
    return [plain_scalar(v) for v in uniq], counts


# --- the JSON form of the category maps (model files) ---------------------------------------


def categories_to_dict(codes) -> dict:
    """The JSON form of a :class:`gpufs.data._category_codes.CategoryCodes`.

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
                isinstance(v, float) and not math.isfinite(v)
            ):
                raise ValueError(
                    f"cannot save the categories of column {f}: {v!r} has no "
                    "JSON form (categories must be strings, booleans or numbers)."
                )
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
    at : At
        Where it sits in the file (for the error messages).
    n_features, max_codes : int

    Returns
    -------
    CategoryCodes
    """
    read_obj(d, at, ["n_features", "features", "values", "n_codes"])
    if read_int(d["n_features"], at["n_features"]) != n_features:
        at["n_features"].fail(f"{d['n_features']} differs from the model's {n_features} features.")
    feats = read_index_list(d["features"], at["features"], n_features)
    if np.any(np.diff(feats) <= 0):
        at["features"].fail("column indices must be increasing.")
    k = feats.shape[0]
    vat, nat = at["values"], at["n_codes"]
    read_list(d["values"], vat, k)
    n_codes = read_int_array(d["n_codes"], nat, (k,), 0, max_codes)
    values = {}
    for i, vals in enumerate(d["values"]):
        read_list(vals, vat[i], max_length=MAX_CLASSES)
        kinds = {str if type(v) is str else "number" for v in vals}
        if len(kinds) > 1:
            vat[i].fail("categories must all be strings or all numbers.")
        out = [read_scalar(v, vat[i][j]) for j, v in enumerate(vals)]
        if any(v is None for v in out):
            vat[i].fail("a category cannot be null (missing values have no code).")
        if len(set(out)) != len(out):
            vat[i].fail("a category appears twice.")
        if n_codes[i] > len(out) or (n_codes[i] == 0) != (len(out) == 0):
            nat[i].fail(f"{int(n_codes[i])} codes for {len(out)} categories.")
        values[int(feats[i])] = out
    return CategoryCodes(n_features, values, {int(f): int(n) for f, n in zip(feats, n_codes)})
