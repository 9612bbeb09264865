"""Objectives: initial score, gradients, hessians and loss, the same bits on every device.

Owns the losses. Shapes: ``raw`` is (n_samples, n_outputs) float64 (n_outputs = 1 except
softmax, where it is the number of classes); ``y`` is (n_samples,) float64 for regression and
int32 class codes otherwise; ``w`` is (n_samples,) float64 sample weights or None. Arrays are
numpy or cupy; results stay on the arrays' device.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import numpy as np

from .._device import device_of, namespace_of
from .quantize import correctly_rounded_sum, exact_mean

__all__ = [
    "PROB_CLIP",
    "Logistic",
    "Softmax",
    "SquaredError",
    "log_odds",
    "logistic_loss_terms",
    "make_objective",
    "sigmoid",
    "softmax",
    "softplus",
]

#: Probabilities are clipped to ``[PROB_CLIP, 1 - PROB_CLIP]`` before a logarithm is taken.
PROB_CLIP = 1e-12

_DEFAULT_BACKENDS: dict = {}


# --------------------------------------------------------------------------------------------
# Array-namespace functions (numpy or cupy, whichever the argument lives in)
# --------------------------------------------------------------------------------------------


def sigmoid(z):
    """The logistic function ``1 / (1 + exp(-z))``, elementwise, without overflow.

    Parameters
    ----------
    z : ndarray of shape (n,) or any shape, float64
        numpy or cupy array.

    Returns
    -------
    p : ndarray of the same shape, float64, in [0, 1], in the namespace of ``z``.
    """
    xp = namespace_of(z)
    # exp(-|z|) never overflows; both branches are exact to rounding.
    ez = xp.exp(-xp.abs(z))
    return xp.where(z >= 0, 1.0 / (1.0 + ez), ez / (1.0 + ez))


def softplus(z, out=None):
    """``log(1 + exp(z))``, elementwise, without overflow.

    Computed as ``max(z, 0) + log1p(exp(-|z|))``: the value of ``logaddexp(0, z)`` at a fraction
    of its cost in numpy.

    Parameters
    ----------
    z : ndarray of shape (n,) or any shape, float64
        numpy or cupy array.
    out : ndarray of the same shape as ``z``, or None
        Where to write the result; ``out=z`` overwrites ``z`` (no temporary of its size
        besides one work array).

    Returns
    -------
    ndarray of the same shape, float64, in the namespace of ``z`` (``out`` when given).
    """
    xp = namespace_of(z)
    a = xp.abs(z)
    xp.negative(a, out=a)
    xp.exp(a, out=a)
    xp.log1p(a, out=a)
    if out is None:
        out = xp.maximum(z, 0.0)
    else:
        xp.maximum(z, 0.0, out=out)
    out += a
    return out


def softmax(raw):
    """Row-wise softmax ``exp(raw_k) / sum_j exp(raw_j)``, shifted by the row maximum.

    Parameters
    ----------
    raw : ndarray of shape (n_samples, n_classes), float64
        numpy or cupy array.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes), float64; rows sum to 1.
    """
    xp = namespace_of(raw)
    z = raw - raw.max(axis=1, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def logistic_loss_terms(z, y):
    """The binary log loss of logits ``z`` for 0/1 targets ``y``, row by row, without
    overflow: ``log(1 + exp(z)) - y z`` (``softplus(z) - y z``).

    Parameters
    ----------
    z : ndarray of shape (n,), float64
        Logits, numpy or cupy.
    y : ndarray of shape (n,), float64
        Targets in {0, 1}, in ``z``'s namespace.

    Returns
    -------
    ndarray of shape (n,), float64
    """
    return softplus(z) - y * z


def log_odds(p):
    """``log(p / (1 - p))`` of a probability clipped to ``[PROB_CLIP, 1 - PROB_CLIP]``.

    Parameters
    ----------
    p : float or ndarray of shape (n,), float64
        Probabilities (numpy, cupy or a Python float).

    Returns
    -------
    float64 scalar or ndarray of the same shape, finite.
    """
    if isinstance(p, (int, float, np.floating)):
        q = min(max(float(p), PROB_CLIP), 1 - PROB_CLIP)
        return float(np.log(q / (1 - q)))
    xp = namespace_of(p)
    q = xp.clip(p, PROB_CLIP, 1 - PROB_CLIP)
    return xp.log(q / (1 - q))


def _backend_for(a, backend):
    """``backend``, or the default backend of ``a``'s device (created once)."""
    if backend is not None:
        return backend
    device = device_of(a)
    if device not in _DEFAULT_BACKENDS:
        from ..backends import get_backend

        _DEFAULT_BACKENDS[device] = get_backend(device)
    return _DEFAULT_BACKENDS[device]


def _exact_weighted_mean(a, w):
    """Weighted mean from correctly rounded sums (``quantize.correctly_rounded_sum``:
    ``math.fsum``'s bits, computed where the rows are).

    Used for the initial score: a float reduction's result depends on the order of the rows
    (and on numpy's vs cupy's reduction trees), which would make the base score, and so every
    tree after it, depend on row order and on the device. ``a * w`` is one IEEE
    multiplication per row on either device.
    """
    xp = namespace_of(a)
    a = xp.asarray(a, dtype=xp.float64)
    if w is None:
        return correctly_rounded_sum(a) / a.shape[0]
    w = xp.asarray(w, dtype=xp.float64)
    return correctly_rounded_sum(a * w) / correctly_rounded_sum(w)


class _Objective:
    """Shared plumbing: column access to ``gradients``, the negative gradient and the exact
    mean loss."""

    name = ""

    def gradients(self, raw, y, backend=None):
        """Gradients and hessians of the per-row loss in ``raw``, before sample weights.

        Parameters
        ----------
        raw : ndarray of shape (n_samples, n_outputs), float64
        y : ndarray of shape (n_samples,)
            Targets (float64) or class codes (int).
        backend : CPUBackend, GPUBackend or None
            Runs the exact kernel; None: the default backend of ``raw``'s device.

        Returns
        -------
        g, h : ndarray of shape (n_outputs, n_samples), float64
            Row k belongs to output column k.
        """
        return _backend_for(raw, backend).gradients(self.name, raw, y)

    def grad_hess(self, raw, y, k, backend=None):
        """Gradient and hessian of one output column.

        Parameters
        ----------
        raw : ndarray of shape (n_samples, n_outputs), float64
        y : ndarray of shape (n_samples,)
        k : int
            The output column.
        backend : CPUBackend, GPUBackend or None

        Returns
        -------
        g, h : ndarray of shape (n_samples,), float64
        """
        g, h = self.gradients(raw, y, backend)
        return g[k], h[k]

    def negative_gradient(self, raw, y, backend=None):
        """Pseudo-residuals ``-dL/draw``.

        Parameters
        ----------
        raw : ndarray of shape (n_samples, n_outputs), float64
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        backend : CPUBackend, GPUBackend or None

        Returns
        -------
        ndarray of shape (n_samples, n_outputs), float64
        """
        g, _ = self.gradients(raw, y, backend)
        return -g.T

    def init_score(self, y, w):
        """The best constant model: :meth:`init_score_from_means` of the weighted means of
        :meth:`init_columns`, each from correctly rounded host sums (the same for any device
        and row order).

        Parameters
        ----------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Targets or class codes.
        w : ndarray of shape (n_samples,), float64, or None

        Returns
        -------
        ndarray of shape (n_outputs,), float64
        """
        return self.init_score_from_means(
            [_exact_weighted_mean(c, w) for c in self.init_columns(y)]
        )

    def loss(self, raw, y, w, backend=None):
        """Mean per-row loss, weighted by ``w``, as a host float (``docs/module_notes.rst``).

        Parameters
        ----------
        raw : ndarray of shape (n_samples, n_outputs), float64
        y : ndarray of shape (n_samples,)
        w : ndarray of shape (n_samples,), float64, or None
        backend : CPUBackend, GPUBackend or None

        Returns
        -------
        float
        """
        terms = _backend_for(raw, backend).loss_terms(self.name, raw, y)
        return exact_mean(terms, w)


class SquaredError(_Objective):
    """Squared error ``0.5 * (raw - y)^2`` of one or several targets.

    ``g = raw - y``, ``h = 1``; :meth:`loss` reports the mean of ``(raw - y)^2`` summed over
    the targets. With several targets (``y`` of shape (n_samples, n_targets), as the
    ControlBurn forest fits class indicators) every column is an independent output.

    Parameters
    ----------
    n_targets : int, default=1
        Number of target columns (outputs).
    """

    name = "squared_error"

    def __init__(self, n_targets=1):
        self.n_targets = int(n_targets)

    def n_outputs(self, n_classes):
        """Raw-score columns: one per target.

        Parameters
        ----------
        n_classes : int
            Unused (the targets fix it).

        Returns
        -------
        int
        """
        return self.n_targets

    def init_columns(self, y):
        """The columns whose weighted means start the fit: every target column.

        Parameters
        ----------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets), float64

        Returns
        -------
        list of ndarray of shape (n_samples,)
        """
        return [y] if y.ndim == 1 else [y[:, k] for k in range(y.shape[1])]

    def init_score_from_means(self, means):
        """The best constant model from the weighted means of :meth:`init_columns`: the
        means themselves.

        Parameters
        ----------
        means : sequence of float
            One per target column.

        Returns
        -------
        ndarray of shape (n_targets,), float64
        """
        return np.array(means, dtype=np.float64)

    def gradients(self, raw, y, backend=None):
        xp = namespace_of(raw)
        if y.ndim == 1:
            g = (raw[:, 0] - y)[None, :]  # one IEEE subtraction per row: the same on any device
        else:
            g = (raw - y).T
        return g, xp.ones_like(g)

    def negative_gradient(self, raw, y, backend=None):
        # y - raw is bit for bit -(raw - y): IEEE subtraction is exactly antisymmetric.
        return (y.reshape(-1, 1) if y.ndim == 1 else y) - raw

    gradients.__doc__ = _Objective.gradients.__doc__
    negative_gradient.__doc__ = _Objective.negative_gradient.__doc__

    def loss(self, raw, y, w, backend=None):
        if y.ndim == 1:
            return super().loss(raw, y, w, backend)
        xp = namespace_of(raw)
        be = _backend_for(raw, backend)
        terms = None
        for k in range(y.shape[1]):  # the targets' squared errors, summed column by column
            t = be.loss_terms(
                self.name, xp.ascontiguousarray(raw[:, k : k + 1]), xp.ascontiguousarray(y[:, k])
            )
            terms = t if terms is None else terms + t
        return exact_mean(terms, w)

    loss.__doc__ = _Objective.loss.__doc__


class Logistic(_Objective):
    """Binary log loss on the logit: ``log(1 + e^raw) - y raw``; ``g = p - y``,
    ``h = p (1 - p)``; ``y`` in {0, 1}."""

    name = "logistic"

    def n_outputs(self, n_classes):
        """Raw-score columns: one (the logit of class 1).

        Parameters
        ----------
        n_classes : int
            2.

        Returns
        -------
        int
        """
        return 1

    def init_columns(self, y):
        """The column whose weighted mean starts the fit: ``y`` itself.

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
            0/1 targets.

        Returns
        -------
        list of ndarray of shape (n_samples,)
        """
        return [y]

    def init_score_from_means(self, means):
        """The best constant model from the weighted mean of ``y``: its log-odds.

        Parameters
        ----------
        means : sequence of one float

        Returns
        -------
        ndarray of shape (1,), float64
            Finite (the mean is clipped by ``PROB_CLIP``).
        """
        return np.array([log_odds(means[0])])

    def proba(self, raw):
        """Class probabilities of raw scores.

        Parameters
        ----------
        raw : ndarray of shape (n_samples, 1), float64

        Returns
        -------
        ndarray of shape (n_samples, 2), float64
            ``(1 - p, p)`` with ``p = sigmoid(raw)``.
        """
        xp = namespace_of(raw)
        p1 = sigmoid(raw[:, 0])
        return xp.stack([1.0 - p1, p1], axis=1)


class Softmax(_Objective):
    """Multiclass log loss; one output (and one tree per round) per class.

    ``p_k = e^(raw_k - max raw) / sum_j e^(raw_j - max raw)`` (classes summed in order);
    ``g_k = p_k - [y == k]``, ``h_k = p_k (1 - p_k)``; loss ``-log p_y``.

    Parameters
    ----------
    n_classes : int
        Number of classes (outputs); ``y`` holds class codes 0..n_classes-1.
    """

    name = "softmax"

    def __init__(self, n_classes):
        self.n_classes = int(n_classes)

    def n_outputs(self, n_classes):
        """Raw-score columns: one per class.

        Parameters
        ----------
        n_classes : int
            Unused (the objective's own ``n_classes`` fixes it).

        Returns
        -------
        int
        """
        return self.n_classes

    def init_columns(self, y):
        """The columns whose weighted means start the fit: the class indicators.

        Parameters
        ----------
        y : ndarray of shape (n_samples,), int
            Class codes.

        Returns
        -------
        list of ndarray of shape (n_samples,), float64
            ``y == c`` for every class c, on ``y``'s device (the weights are there too:
            a host column beside device weights failed on a real GPU).
        """
        xp = namespace_of(y)
        return [(y == c).astype(xp.float64) for c in range(self.n_classes)]

    def init_score_from_means(self, means):
        """The best constant model from the weighted class frequencies: their centred log.

        Parameters
        ----------
        means : sequence of float
            One per class.

        Returns
        -------
        ndarray of shape (n_classes,), float64
            Finite (frequencies are clipped below by ``PROB_CLIP``).
        """
        counts = np.clip(np.array(means, dtype=np.float64), PROB_CLIP, None)
        logp = np.log(counts)
        return logp - logp.mean()

    @staticmethod
    def _codes(y):
        return y if y.dtype.kind in "iu" else y.astype(np.int64)

    def gradients(self, raw, y, backend=None):
        return super().gradients(raw, self._codes(y), backend)

    def loss(self, raw, y, w, backend=None):
        return super().loss(raw, self._codes(y), w, backend)

    gradients.__doc__ = _Objective.gradients.__doc__
    loss.__doc__ = _Objective.loss.__doc__

    def proba(self, raw):
        """Class probabilities of raw scores.

        Parameters
        ----------
        raw : ndarray of shape (n_samples, n_classes), float64

        Returns
        -------
        ndarray of shape (n_samples, n_classes), float64
            Rows sum to 1.
        """
        return softmax(raw)


def make_objective(task: str, n_classes: int = 0):
    """The boosting objective of a task.

    Parameters
    ----------
    task : {"regression", "classification"}
    n_classes : int, default=0
        Number of classes (classification).

    Returns
    -------
    SquaredError for regression; Logistic for two classes; Softmax(n_classes) otherwise.
    """
    if task == "regression":
        return SquaredError()
    if n_classes == 2:
        return Logistic()
    return Softmax(n_classes)
