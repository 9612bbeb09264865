"""Hyperparameter constraints: the building blocks of every estimator's
``_parameter_constraints`` (scikit-learn's ``sklearn.utils._param_validation``).

Owns the one rule for numeric hyperparameters: :func:`int_range` and :func:`real_range` are
scikit-learn ``Interval`` constraints that also reject booleans (``True`` is not a count or a
rate). ``Interval`` itself rejects NaN, and rejects infinity whenever the interval is open on
that side, which every unbounded range here is. A failed check raises scikit-learn's
``InvalidParameterError`` (a ``ValueError`` and ``TypeError``) whose message names the
parameter, its allowed values and the value given.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["DEVICE_CONSTRAINT", "MAX_INT", "int_range", "real_range"]


class _NumberInterval(Interval):
    """scikit-learn's ``Interval`` without booleans."""

    def is_satisfied_by(self, val):
        if isinstance(val, (bool, np.bool_)):
            return False
        return super().is_satisfied_by(val)


#: The largest integer any hyperparameter takes: counts end in numpy's int64 and numba's
#: integers, so a larger one would be an OverflowError deep in the fit, not a parameter error.
MAX_INT = 2**63 - 1


def int_range(low, high=None):
    """Constraint: an integer in ``[low, high]`` (``high=None``: up to ``MAX_INT``).

    Parameters
    ----------
    low : int
    high : int or None, default=None

    Returns
    -------
    sklearn.utils._param_validation.Interval
    """
    return _NumberInterval(numbers.Integral, low, MAX_INT if high is None else high, closed="both")


def real_range(low, high=None, closed="left"):
    """Constraint: a finite real number between ``low`` and ``high``.

    Parameters
    ----------
    low : float or None
    high : float or None, default=None
        None: no bound on that side (and infinity is rejected).
    closed : {"left", "right", "both", "neither"}, default="left"
        Which bounds belong to the interval, as in scikit-learn's ``Interval``.

    Returns
    -------
    sklearn.utils._param_validation.Interval
    """
    return _NumberInterval(numbers.Real, low, high, closed=closed)


#: The ``device`` parameter of every estimator.
DEVICE_CONSTRAINT = [StrOptions({"auto", "cpu", "gpu"})]

#: ``n_jobs`` as scikit-learn means it: None or -1 all cores, -k all but k - 1, k >= 1 at most
#: k threads (0 is refused).
N_JOBS_CONSTRAINT = [
    _NumberInterval(numbers.Integral, -MAX_INT, -1, closed="both"),
    int_range(1),
    None,
]
