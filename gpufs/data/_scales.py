"""Scales of the target and the sample weights: what is invariant, and what is refused or
warned about before a fit.

Owns the checks the estimators run at the start of ``fit`` on the target ``y`` and the sample
weights ``w`` (one call each: :func:`check_boosting_scales` for GBFS, :func:`check_target_scale`
for the other regressors, :func:`check_classifier_weights` for ControlBurn's classifier), and
the documentation of how weights interact with ``reg_lambda`` and ``min_child_weight``.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import warnings

from .._device import namespace_of
from .._warnings import warn_from_caller

#: Sums of weighted gradients may reach this; their squares (the gains) stay below 2**1000,
#: leaving float64 room for the gain formula's sums and divisions.
_MAX_SUM = 2.0**500
#: Weighted gradients and hessians at least this large keep the fixed-point scale of
#: ``gpufs.engine.quantize`` and the squares of the gain finite and normal.
_MIN_TERM = 2.0**-500

_REMEDY_WEIGHTS = (
    "weights times c with reg_lambda times c and min_child_weight times c give "
    "the same model: rescale sample_weight to mean 1 (w * n / w.sum()), or "
    "scale reg_lambda and min_child_weight by the weights' mean"
)


def _target_range(y):
    xp = namespace_of(y)
    if y.shape[0] == 0:
        return 0.0
    return float(xp.max(y)) - float(xp.min(y))


def _span(y, R):
    """The target's span for a message: beyond float64, its ends instead of "inf"."""
    if R < float("inf"):
        return f"y spans {R:.3g}"
    xp = namespace_of(y)
    return f"y runs from {float(xp.min(y)):.3g} to {float(xp.max(y)):.3g}, a span beyond float64"


def _weights(w, n):
    """(total, largest) weight; unit weights when w is None."""
    if w is None:
        return float(n), 1.0
    xp = namespace_of(w)
    return float(xp.sum(w)), float(xp.max(w))


_STANDARDIZE = "Standardize y (for example (y - y.mean()) / y.std()) or rescale sample_weight"
_RESCALE = "Rescale sample_weight"


def _check_overflow(R, W, w_max, what_y, remedy=_STANDARDIZE):
    """R: bound of |gradient| per row; W, w_max: total and largest weight."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        s1 = R * W
        s2 = W * R * R
    if not (s1 <= _MAX_SUM and s2 <= _MAX_SUM * _MAX_SUM):
        reach = f"reach {s1:.3g}" if s1 < float("inf") else "leave float64's range"
        raise ValueError(
            f"the split gains would overflow float64: {what_y} and the sample weights sum to "
            f"{W:.3g}, so the gradient sums {reach} and their squares leave float64's "
            f"range. {remedy} (for example to mean 1)."
        )
    if 0 < R < _MIN_TERM:  # unweighted gradients (a forest's) and squared residuals
        raise ValueError(
            f"the split gains would underflow float64: {what_y}, below {_MIN_TERM:.3g}, so the "
            f"gradients' fixed-point scale and their squares leave float64's range whatever "
            f"the weights. {remedy} (for example to mean 1)."
        )
    if R > 0 and R * w_max < _MIN_TERM:
        raise ValueError(
            f"the split gains would underflow float64: {what_y} and the largest sample weight "
            f"is {w_max:.3g}, so every weighted gradient is below {_MIN_TERM:.3g}. {remedy} "
            "(for example to mean 1)."
        )


def check_target_scale(est, y, sample_weight=None):
    """For a regressor: ValueError when the target's range (times the weights) would take
    squared sums out of float64's range. Nothing for a classifier.

    Parameters
    ----------
    est : the estimator about to fit
    y : ndarray of shape (n_samples,), float64, numpy or cupy
    sample_weight : ndarray of shape (n_samples,) or None
    """
    from sklearn.base import is_classifier

    if is_classifier(est):
        return
    R = _target_range(y)
    W, w_max = _weights(sample_weight, y.shape[0])
    _check_overflow(R, W, w_max, _span(y, R))


def check_classifier_weights(est, sample_weight):
    """For a classifier whose trees sum weighted log-loss gradients (at most 1 each:
    ControlBurn's forest): ValueError when the weights would take those sums, or their
    squares, out of float64's range (denormal weights made every split NaN and selected
    nothing). Nothing for a regressor (:func:`check_target_scale`) or without weights.

    Parameters
    ----------
    est : the estimator about to fit
    sample_weight : ndarray of shape (n_samples,) or None
    """
    from sklearn.base import is_classifier

    if sample_weight is None or not is_classifier(est):
        return
    _check_log_loss_weights(*_weights(sample_weight, sample_weight.shape[0]))


def _check_log_loss_weights(W, w_max):
    """The weight bounds of a classifier's trees: gradients of the log loss are at most 1."""
    _check_overflow(1.0, W, w_max, "the gradients of the log loss are at most 1", _RESCALE)


def check_boosting_scales(est, y, sample_weight=None):
    """The checks of ``docs/module_notes.rst`` for a GBFS estimator about to fit.

    Parameters
    ----------
    est : GBFSRegressor or GBFSClassifier, its hyperparameters already validated
    y : ndarray of shape (n_samples,), the encoded target (numpy or cupy)
    sample_weight : ndarray of shape (n_samples,), float64, or None
    """
    from sklearn.base import is_classifier

    n = y.shape[0]
    W, w_max = _weights(sample_weight, n)
    R = None if is_classifier(est) else _target_range(y)
    check_boosting_scale_values(est, n, W, w_max, R, _span_text=None if R is None else _span(y, R))


def check_boosting_scale_values(est, n, W, w_max, R=None, _span_text=None):
    """:func:`check_boosting_scales` from the numbers it reads off the data (a cluster computes
    them over its workers, ``gpufs.dask``).

    Parameters
    ----------
    est : GBFSRegressor or GBFSClassifier, its hyperparameters already validated
    n : int
        Rows.
    W, w_max : float
        The total and the largest sample weight (``n`` and 1 without weights).
    R : float or None
        For a regressor, the target's range (max - min).
    _span_text : str or None
        How the error names that range (``check_boosting_scales`` names the target's ends
        when the range itself is beyond float64).
    """
    from sklearn.base import is_classifier

    if is_classifier(est):
        h_max = 0.25 if est.hessian else 1.0
        _check_log_loss_weights(W, w_max)
    else:
        h_max = 1.0
        _check_overflow(
            R,
            W,
            w_max,
            _span_text
            or (f"y spans {R:.3g}" if R < float("inf") else "y spans more than float64 holds"),
        )
    if w_max * h_max < _MIN_TERM:
        raise ValueError(
            f"the hessian sums would underflow float64: the largest sample weight is "
            f"{w_max:.3g}. Rescale sample_weight (for example to mean 1)."
        )
    H = W * h_max
    lam, mcw = float(est.reg_lambda), float(est.min_child_weight)
    if H < 2 * mcw:
        warn_from_caller(
            f"no split can be made: the hessian sum of all rows is at most {H:.3g} (sample "
            f"weights sum to {W:.3g}), below twice min_child_weight={mcw:g}, so no node has "
            f"two children that each reach it and every tree will be a single leaf. "
            + _REMEDY_WEIGHTS
            + ".",
            UserWarning,
        )
        return
    leaf = H / 2.0 ** int(est.max_depth)
    # the weights' scale is to blame when unit weights would give leaves above reg_lambda
    if H < lam or (leaf < lam <= n * h_max / 2.0 ** int(est.max_depth)):
        where = (
            "the hessian sum of all rows"
            if H < lam
            else f"an average leaf of a depth-{int(est.max_depth)} tree"
        )
        h = H if H < lam else leaf
        warn_from_caller(
            f"reg_lambda={lam:g} swamps the hessian sums: {where} holds about {h:.3g} (sample "
            f"weights sum to {W:.3g}, mean {W / max(n, 1):.3g}), so leaf values shrink by "
            f"more than half and splits must overcome reg_lambda; " + _REMEDY_WEIGHTS + ".",
            UserWarning,
        )


__all__ = ["check_boosting_scale_values", "check_boosting_scales", "check_target_scale"]
