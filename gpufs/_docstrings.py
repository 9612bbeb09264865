"""Parameter descriptions shared by several docstrings, written once.

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
