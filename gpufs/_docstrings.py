"""Parameter and attribute descriptions shared by several docstrings, written once.

A docstring names a shared block as ``$name`` on a line of its own, indented like the
parameters around it; the decorator that :func:`filler` makes puts the block there. The
result is an ordinary numpydoc docstring (Sphinx, ``help()`` and numpydoc's validation read
it as if it had been written out).
"""

from __future__ import annotations

import inspect
from string import Template


def filler(blocks):
    """A decorator that fills ``$name`` lines of a docstring from ``blocks``.

    Parameters
    ----------
    blocks : dict of str to str
        Block name -> its text, unindented (lines of a numpydoc section).

    Returns
    -------
    callable
        Takes a function or class, rewrites its ``__doc__`` and returns it; a ``$name`` left
        unfilled (a typo) raises KeyError at import.
    """

    def fill(obj):
        lines = []
        for line in inspect.cleandoc(obj.__doc__).splitlines():
            name = line.strip()
            if name.startswith("$") and name[1:] in blocks:
                indent = line[: len(line) - len(line.lstrip())]
                lines += [indent + b if b else "" for b in blocks[name[1:]].splitlines()]
            else:
                lines.append(line)
        obj.__doc__ = Template("\n".join(lines)).substitute()
        return obj

    return fill


#: ``categorical_features`` of the tree-based selectors (GBFS, multitask GBFS, ControlBurn),
#: as a numpydoc parameter entry indented for a class docstring.
TREE_CATEGORICAL_FEATURES_DOC = """\
    categorical_features : "from_dtype", array-like of str or int, bool mask or None, \
            default="from_dtype"
        The categorical columns. "from_dtype": the columns of a categorical or string dtype
        of a pandas, polars, pyarrow or cudf table (none for arrays); else their names,
        indices or a boolean mask; None: none (non-numeric columns are then refused). Their
        categories are coded most frequent first (rare ones pooled; missing values and
        categories unseen in fit go where a split sends missing values), and the trees split
        them by sets of categories, each categorical column one feature with one price. A
        column chosen by dtype with a value of its own on most rows (a name, an id:
        ``gpufs.data._identifiers``) is refused at fit, naming it; named here, it is used with a
        warning.
"""


#: The fitted attributes every selector sets from its input (``_input``, the input door).
INPUT_ATTRIBUTES_DOC = """    is_categorical_ : ndarray of shape (n_features,), bool
        The columns fitted as categorical features.
    category_codes_ : CategoryCodes or None
        Their category -> code maps (``categories(f)``: column f's categories, most frequent
        first, the pooled rare ones last); None without categorical columns.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features,), object
        Column names, when the input had string column names.
"""
