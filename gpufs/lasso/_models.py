"""The smooth part of the tree-weight lasso's objective, in three shapes behind one protocol.

``_GramSquare`` (squared loss on the T x T Gram matrix; iterations cost O(n^2) for a working
set of n trees, independent of the number of rows), ``_DirectSquare`` (squared loss on the
columns of A, for more trees than rows or sketched rows) and ``_DirectLogistic`` (logistic loss
with an explicit intercept). The solver sees only :class:`SmoothModel`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..engine.objectives import logistic_loss_terms, sigmoid
from ._linalg import _gram, _gram_scaled, _power_top_eig, _top_eig_sym

__all__ = ["SmoothModel"]

#: Up to this many columns a direct model forms its Gram matrix (m n^2 flops) for the Lipschitz
#: constant instead of running power iteration (tens to hundreds of passes of 2 m n flops).
_GRAM_LIP_MAX_T = 128


@runtime_checkable
class SmoothModel(Protocol):
    """The smooth part ``f(w, b)`` of the objective, as the solver uses it.

    Variables ``w`` (n,) and ``b`` (0-d) live in the model's array namespace ``xp``.

    Attributes
    ----------
    has_b : bool
        Whether ``b`` is an explicit variable (else the intercept is eliminated or absent).
    n : int
        Number of tree columns.
    """

    has_b: bool
    n: int

    def image(self, w, b):
        """A linear image ``z`` of the variables that the momentum step carries along, so the
        gradient at the extrapolated point needs no extra matrix-vector product.

        Parameters
        ----------
        w : ndarray of shape (n,), float64
            Tree weights.
        b : 0-d ndarray, float64
            The intercept (ignored without ``has_b``).

        Returns
        -------
        z : ndarray
            The model's image of (w, b) (its shape is the model's business).
        """

    def grad(self, z):
        """The gradient of ``f`` at the variables whose image is ``z``.

        Parameters
        ----------
        z : ndarray
            An :meth:`image`.

        Returns
        -------
        gw : ndarray of shape (n,), float64
            The gradient in w.
        gb : 0-d ndarray or None
            The gradient in b (None without ``has_b``).
        """

    def value(self, w, z):
        """``f`` at (w, b).

        Parameters
        ----------
        w : ndarray of shape (n,), float64
        z : ndarray
            The image of (w, b).

        Returns
        -------
        float
        """

    def hess_sub(self, S, z):
        """The Hessian on some trees (plus b with ``has_b``).

        Parameters
        ----------
        S : ndarray of shape (n_sub,), int, or None
            Tree indices (None: every tree).
        z : ndarray
            The image of the point.

        Returns
        -------
        ndarray of shape (n_sub + has_b, n_sub + has_b), float64
        """

    def restrict(self, idx):
        """The same model on some trees (a working set).

        Parameters
        ----------
        idx : ndarray of shape (n_sub,), int
            Tree indices.

        Returns
        -------
        SmoothModel
        """

    def lipschitz(self):
        """A Lipschitz constant of the gradient.

        Returns
        -------
        float
        """


class _GramSquare:
    """f(w) = (w^T K w - 2 c^T w + yy) / W, K = B_c^T D B_c; b eliminated by centering."""

    has_b = False

    def __init__(self, xp, K, c, yy, W):
        self.xp, self.K, self.c, self.yy, self.W = xp, K, c, yy, W
        self.n = K.shape[0]

    def image(self, w, b):
        return self.K @ w

    def grad(self, z):
        return (2.0 / self.W) * (z - self.c), None

    def value(self, w, z):
        # Only for monitoring: it can lose digits to cancellation when the fit is near perfect;
        # reported objectives are recomputed from residuals.
        return float((w @ z - 2.0 * (self.c @ w) + self.yy) / self.W)

    def hess_sub(self, S, z):
        if S is None:
            return (2.0 / self.W) * self.K
        return (2.0 / self.W) * self.K[S][:, S]

    def restrict(self, idx):
        return _GramSquare(self.xp, self.K[idx][:, idx], self.c[idx], self.yy, self.W)

    def lipschitz(self):
        return 2.0 / self.W * _top_eig_sym(self.xp, self.K)


class _DirectSquare:
    """f(w) = (1/W) sum_j r_j (z_j - v_j)^2, z = B w - (abar . w); b eliminated by centering."""

    has_b = False

    def __init__(self, xp, B, v, r, abar, W):
        self.xp, self.B, self.v, self.r, self.abar, self.W = xp, B, v, r, abar, W
        self.n = B.shape[1]

    def image(self, w, b):
        z = self.B @ w
        if self.abar is not None:
            # Implicit centering: (B - 1 abar^T) w without a centered copy of B.
            z = z - self.abar @ w
        return z

    def _adjoint(self, e):
        g = self.B.T @ e
        if self.abar is not None:
            g = g - self.abar * e.sum()
        return g

    def grad(self, z):
        e = z - self.v
        if self.r is not None:
            e = self.r * e
        return (2.0 / self.W) * self._adjoint(e), None

    def value(self, w, z):
        e = z - self.v
        e2 = e * e if self.r is None else self.r * e * e
        return float(e2.sum() / self.W)

    def hess_sub(self, S, z):
        if S is None:
            S = self.xp.arange(self.n)
        K, _, _ = _gram(
            self.xp, self.B[:, S], None, self.r, None if self.abar is None else self.abar[S]
        )
        return (2.0 / self.W) * K

    def restrict(self, idx):
        return _DirectSquare(
            self.xp,
            self.xp.take(self.B, idx, axis=1),
            self.v,
            self.r,
            None if self.abar is None else self.abar[idx],
            self.W,
        )

    def lipschitz(self):
        xp = self.xp
        if self.n <= _GRAM_LIP_MAX_T:
            K, _, _ = _gram(xp, self.B, None, self.r, self.abar)
            return 2.0 / self.W * _top_eig_sym(xp, K)

        def op(v):
            e = self.image(v, None)
            if self.r is not None:
                e = self.r * e
            return self._adjoint(e)

        return 2.0 / self.W * _power_top_eig(xp, op, self.n)


class _DirectLogistic:
    """f(w, b) = (1/W) sum_j r_j (log(1 + e^z_j) - y_j z_j), z = A w + b."""

    def __init__(self, xp, A, y, r, W, has_b, gram=None):
        self.xp, self.A, self.y, self.r, self.W, self.has_b = xp, A, y, r, W, has_b
        self.n = A.shape[1]
        # [A 1]^T R [A 1] (the ones column with has_b): the Lipschitz constant's matrix, kept
        # for the working sets (:meth:`restrict` passes each its block, no pass over rows).
        self._gram = gram
        # The last image (w, b, z) and the last z's sigmoid and gradient: a solve asks for
        # them again at the same point (the working-set loop before and after each inner
        # solve, the proximal Newton step's Hessian after its gradient), each a pass over
        # the rows. Kept by value for w and b and by identity for z (never written in place).
        self._last_image = None
        self._last_sigmoid = None
        self._last_grad = None

    def image(self, w, b):
        xp = self.xp
        b_key = float(b) if self.has_b else 0.0
        last = self._last_image
        if last is not None and last[1] == b_key and bool(xp.array_equal(last[0], w)):
            return last[2]
        z = self.A @ w
        z = z + b if self.has_b else z
        self._last_image = (xp.array(w, copy=True), b_key, z)
        return z

    def _sigmoid(self, z):
        last = self._last_sigmoid
        if last is not None and last[0] is z:
            return last[1]
        p = sigmoid(z)
        self._last_sigmoid = (z, p)
        return p

    def grad(self, z):
        last = self._last_grad
        if last is not None and last[0] is z:
            return last[1]
        e = self.r * (self._sigmoid(z) - self.y) / self.W
        gb = e.sum() if self.has_b else None
        out = (self.A.T @ e, gb)
        self._last_grad = (z, out)
        return out

    def value(self, w, z):
        return float((self.r * logistic_loss_terms(z, self.y)).sum() / self.W)

    def hess_sub(self, S, z, dtype=np.float64):
        p = self._sigmoid(z)
        d = self.xp.sqrt(self.r * p * (1.0 - p))
        return _gram_scaled(self.xp, self.A, S, d, self.has_b, dtype=dtype) / self.W

    def newton_hess(self, z):
        """The Hessian on every tree (plus b) for a proximal Newton step: ``hess_sub(None,
        z)`` with float32 products summed in float64 (``_gram_scaled``). The step's line
        search and the solver's KKT test are in float64, so this only changes the path to
        the solution, not where it ends; it halves the time of the step's one pass over the
        rows (70,000 rows x 65 trees, one core of the 2-core box beside a busy process: 30 ms
        to 17 ms a Hessian; the two differ by about 2e-7 of its largest entry).

        Returns
        -------
        ndarray of shape (n + has_b, n + has_b), float64
        """
        return self.hess_sub(None, z, dtype=np.float32)

    def restrict(self, idx):
        gram = self._gram
        if gram is None and self.n <= _GRAM_LIP_MAX_T:
            gram = self._gram = _gram_scaled(
                self.xp, self.A, None, self.xp.sqrt(self.r), self.has_b
            )
        if gram is not None:
            rows = idx
            if self.has_b:
                rows = self.xp.concatenate([idx, self.xp.asarray([self.n], dtype=idx.dtype)])
            gram = gram[rows][:, rows]
        return _DirectLogistic(
            self.xp,
            # take: one C-ordered copy, 3 times faster than A[:, idx] made contiguous
            self.xp.take(self.A, idx, axis=1),
            self.y,
            self.r,
            self.W,
            self.has_b,
            gram,
        )

    def lipschitz(self):
        xp = self.xp
        # The logistic curvature is at most 1/4.
        if self._gram is None and self.n <= _GRAM_LIP_MAX_T:
            self._gram = _gram_scaled(xp, self.A, None, xp.sqrt(self.r), self.has_b)
        if self._gram is not None:
            return 0.25 / self.W * _top_eig_sym(xp, self._gram)
        n = self.n

        def op(v):
            z = self.A @ v[:n]
            if self.has_b:
                z = z + v[n]
            e = self.r * z
            out = self.A.T @ e
            if self.has_b:
                out = xp.concatenate([out, e.sum()[None]])
            return out

        return 0.25 / self.W * _power_top_eig(xp, op, n + int(self.has_b))
