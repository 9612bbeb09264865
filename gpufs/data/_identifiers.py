"""Identifier-like columns: the rules that keep a name or an id from becoming a feature
unnoticed (a tree memorises the training rows through it).

A categorical column is identifier-like with at least ``MIN_DISTINCT`` distinct values and
more than ``MAX_DISTINCT_SHARE`` of its non-missing values distinct on ``MIN_ROWS_FOR_SHARE``
rows or more, more than ``SMALL_TABLE_SHARE`` on fewer (a 20-level category on 30 rows is a
category). Chosen by dtype, fit refuses it, naming it; named by the user, it is used with a
warning; ``gpufs select`` leaves it out with a warning. An integer table column unique per row
and monotone or spread like hashes (``integer_identifier``) is used as a number, with a
warning naming it. The input door (``gpufs.data._input``), the Dask loader and the CLI ask here;
``docs/cli.rst`` states the rules for users.
"""

from __future__ import annotations

from .._warnings import warn_from_caller

#: A categorical column is identifier-like when its distinct values exceed this share of its
#: non-missing values: on average each category then marks fewer than two rows.
MAX_DISTINCT_SHARE = 0.5
#: ... and it has at least this many distinct values (a 4-row toy table is not judged).
MIN_DISTINCT = 10
#: Below this many non-missing values the distinct share must exceed ``SMALL_TABLE_SHARE``:
#: on a small table a real category has few rows per level.
MIN_ROWS_FOR_SHARE = 100
SMALL_TABLE_SHARE = 0.9
#: An integer column unique on every row whose range exceeds this many times its rows is
#: spread like hashes (a row number's range is the rows; a count's far smaller).
HASH_SPREAD = 1000


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
    >>> identifier_like(20, 30), identifier_like(30, 30)    # a small table: 20 levels; names
    (False, True)
    """
    share = MAX_DISTINCT_SHARE if n_present >= MIN_ROWS_FOR_SHARE else SMALL_TABLE_SHARE
    return n_distinct >= MIN_DISTINCT and n_distinct > share * n_present


def integer_identifier(values):
    """Why an integer column looks like an identifier ("increasing", "decreasing" or "spread
    like hashes"), or None.

    Parameters
    ----------
    values : ndarray of shape (n_rows,), integer
        The column, in row order.

    Returns
    -------
    str or None

    Examples
    --------
    >>> import numpy as np
    >>> integer_identifier(np.arange(1000, 1050))
    'increasing'
    >>> integer_identifier(np.arange(50) % 7) is None
    True
    """
    import numpy as np

    v = np.asarray(values)
    n = v.shape[0]
    if v.dtype.kind not in "iu" or n < MIN_DISTINCT:
        return None
    step = np.diff(v.astype(np.float64))
    if bool((step > 0).all()):
        why = "increasing"
    elif bool((step < 0).all()):
        why = "decreasing"
    else:
        if np.unique(v).size != n:
            return None
        spread = float(v.max()) - float(v.min())
        if spread <= HASH_SPREAD * n:
            return None
        why = "spread like hashes"
    return why


def warn_integer_identifiers(frame_columns):
    """Warn (UserWarning) about each integer column that ``integer_identifier`` flags.

    Parameters
    ----------
    frame_columns : iterable of (name, ndarray)
        The table's non-categorical columns.
    """
    found = []
    for name, values in frame_columns:
        why = integer_identifier(values)
        if why is not None:
            found.append(
                f"{str(name)!r} ({len(values)} distinct values in {len(values)} rows, {why})"
            )
    if found:
        warn_from_caller(
            f"integer column {', '.join(found)} looks like an identifier (a row "
            "number or a key), not a feature: it is used as a number; leave it out "
            "of X (in the CLI: --drop) if it is an id.",
            UserWarning,
        )


def describe(name, n_distinct: int, n_present: int) -> str:
    """``'name' (569 distinct values in 569 rows)``: the evidence, for messages."""
    return f"{str(name)!r} ({n_distinct} distinct values in {n_present} rows)"


def check_identifier_columns(value_counts, names, categorical_features) -> None:
    """Refuse (or, for columns the user named, warn about) identifier-like columns at fit.

    Parameters
    ----------
    value_counts : dict int -> (values, counts)
        ``gpufs.data._category_codes.count_values`` of each categorical column's non-missing
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
            "categorical_features to use it as a categorical feature anyway."
        )
    warn_from_caller(
        f"categorical column {which} looks like an identifier: most rows have a "
        "value of their own, so a model may memorise the training rows through it.",
        UserWarning,
    )
