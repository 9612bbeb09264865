"""The parameter descriptions shared by the lasso's entry points, written once.

A docstring names a block as ``$data``, ``$problem`` or ``$solver`` on a line of its own
(indented like the parameters around it); :func:`fill` puts the block there.
"""
from __future__ import annotations

import inspect
from string import Template

_BLOCKS = {
    "data": """\
A : ndarray of shape (n_samples, n_trees)
    Per-tree predictions on the training rows (numpy or cupy; used as float64).
y : ndarray of shape (n_samples,)
    Targets (in {0, 1} for ``loss="logistic"``).""",
    "problem": """\
loss : {"squared", "logistic"}, default="squared"
sample_weight : ndarray of shape (n_samples,) or None, default=None
    Row weights >= 0 with a positive sum.
fit_intercept : bool, default=True
    Include the free intercept b (see the package docstring).
sketch : {"gaussian", "count", "rows"} or None, default=None
    Row sketching (see the package docstring).
sketch_size : int or None, default=None
    Rows of the sketch; default min(n_samples, max(10 (n_trees + 1), 1000)).
random_state : int, numpy Generator or None, default=0
    Seed of the sketch (None draws a fresh, non-reproducible one).""",
    "solver": """\
tol : float > 0, default=1e-9
    Relative KKT tolerance.
max_iter : int >= 1, default=20000
    Cap on FISTA iterations, summed over working sets.""",
}


def fill(obj):
    """Put the shared blocks into ``obj``'s docstring (a function or class decorator)."""
    doc = inspect.cleandoc(obj.__doc__)
    lines = []
    for line in doc.splitlines():
        name = line.strip()
        if name.startswith("$") and name[1:] in _BLOCKS:
            indent = line[: len(line) - len(line.lstrip())]
            lines += [indent + b for b in _BLOCKS[name[1:]].splitlines()]
        else:
            lines.append(line)
    obj.__doc__ = Template("\n".join(lines)).substitute()  # a stray "$name" is an error
    return obj
