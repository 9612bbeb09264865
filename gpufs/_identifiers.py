"""Identifier-like categorical columns: the one rule that keeps a name or an id from becoming a
feature unnoticed.

A text column with a different value on (almost) every row - a name, an order id - is no
feature: each category marks one or two training rows, so a tree that splits on it memorises
those rows and predicts nothing on new ones (on breast cancer with a ``name`` column GBFS
selected it and its held-out accuracy fell from 0.92 to 0.37). The rule: a categorical column
is identifier-like when more than ``MAX_DISTINCT_SHARE`` of its non-missing values are
distinct (at least ``MIN_DISTINCT`` of them). Found among the columns chosen by dtype
(``categorical_features="from_dtype"``), fit refuses it, naming it; named by the user, it is
used, with a warning. The input door (``gpufs._input``), the Dask loader and ``gpufs select``
(which leaves such columns out, with a warning) all ask ``identifier_like``.
"""
from __future__ import annotations

import warnings

#: A categorical column is identifier-like when its distinct values exceed this share of its
#: non-missing values: on average each category then marks fewer than two rows.
MAX_DISTINCT_SHARE = 0.5
#: ... and it has at least this many distinct values (a 4-row toy table is not judged).
MIN_DISTINCT = 10


def identifier_like(n_distinct: int, n_present: int) -> bool:
    """Whether a categorical column with these counts is identifier-like.

    Parameters
    ----------
    n_distinct : int
        Distinct non-missing values of the column.
    n_present : int
        Non-missing values of the column.

    Returns
    -------
    bool

    Examples
    --------
    >>> identifier_like(569, 569)       # a name on every row
    True
    >>> identifier_like(30, 2000)       # a 30-level category
    False
    """
    return n_distinct >= MIN_DISTINCT and n_distinct > MAX_DISTINCT_SHARE * n_present


def describe(name, n_distinct: int, n_present: int) -> str:
    """``'name' (569 distinct values in 569 rows)``: the evidence, for messages."""
    return f"{str(name)!r} ({n_distinct} distinct values in {n_present} rows)"


def check_identifier_columns(value_counts, names, categorical_features) -> None:
    """Refuse (or, for columns the user named, warn about) identifier-like columns at fit.

    Parameters
    ----------
    value_counts : dict int -> (values, counts)
        ``gpufs._category_codes.count_values`` of each categorical column's non-missing
        values.
    names : dict int -> str or None
        Column names, for the messages (None: ``column <index>``).
    categorical_features : "from_dtype" or anything else
        "from_dtype": the columns were chosen by their dtype, so an identifier-like one is
        refused with a ValueError; otherwise the user named them, and a UserWarning says so.
    """
    found = []
    for f, (values, counts) in sorted(value_counts.items()):
        n_distinct, n_present = len(values), int(sum(int(c) for c in counts))
        if identifier_like(n_distinct, n_present):
            label = (names or {}).get(f, f"column {f}")
            found.append(describe(label, n_distinct, n_present))
    if not found:
        return
    which = ", ".join(found)
    if isinstance(categorical_features, str) and categorical_features == "from_dtype":
        raise ValueError(
            f"X's text or categorical column {which} looks like an identifier, not a feature: "
            "most rows have a value of their own, so a model would memorise the training rows "
            "through it. Leave it out of X (for example X.drop(columns=[...])), or name it in "
            "categorical_features to use it as a categorical feature anyway.")
    warnings.warn(f"categorical column {which} looks like an identifier: most rows have a "
                  "value of their own, so a model may memorise the training rows through it.",
                  UserWarning, stacklevel=4)
