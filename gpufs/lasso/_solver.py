"""The solver of the tree-weight lasso: :class:`TreeLasso` (the lasso of one forest, prepared
once and solved for any lambda) and the one-call front ends ``solve_lasso``, ``lambda_max`` and
``lasso_path``. The algorithm (FISTA with adaptive restart on working sets, a Newton polish on
the support, the KKT stopping rule) is described in the package docstring."""

from __future__ import annotations

import contextlib
import copy
import math
import numbers

import numpy as np

from .._device import is_host_namespace, namespace_of, to_host
from .._warnings import warn_from_caller
from ..engine.objectives import log_odds, logistic_loss_terms
from . import _docs
from ._costs import _host_vector, _nonneg
from ._linalg import _check_sketch, _gram, _sketch_square
from ._models import _DirectLogistic, _DirectSquare, _GramSquare
from ._options import DEFAULT_MAX_ITER, DEFAULT_TOL, Datafit, SolverOptions, _keywords
from ._results import LassoResult

__all__ = ["TreeLasso", "lambda_max", "lasso_path", "solve_lasso"]

#: Iterations between KKT checks (each check is one host sync and one extra gradient).
_CHECK_EVERY = 10
#: Proximal Newton (logistic loss) on working sets of at most this many trees (its Hessian
#: costs rows x trees^2; beyond, FISTA).
_PN_MAX_TREES = 256
#: A proximal Newton step's quadratic is solved to this fraction of the current KKT residual.
_PN_INNER_RTOL = 0.01
#: Up to this many trees a solve runs host BLAS on one thread (:meth:`TreeLasso._solve`).
_ONE_THREAD_MAX_TREES = 512
#: Working sets: at least this many trees are added per round; smaller forests are solved whole.
_WS_MIN_ADD = 16


def _checked_problem(xp, A, y, costs, loss, sample_weight, fit_intercept):
    """Validate the lasso's data (``loss`` is checked by its :class:`Datafit`):
    ``(A float64 (m, T) on xp, y, u, r host float64)``."""
    A = xp.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"A must be 2-D (n_rows, n_trees), got shape {tuple(A.shape)}")
    if A.dtype.kind not in "biuf":
        raise ValueError(f"A must be numeric, got dtype {A.dtype}")
    m, n_trees = A.shape
    if m == 0 or n_trees == 0:
        raise ValueError(f"A must have at least one row and one tree, got shape {tuple(A.shape)}")
    A = xp.ascontiguousarray(A, dtype=xp.float64)
    if not bool(xp.all(xp.isfinite(A))):
        raise ValueError("A contains NaN or infinite values")
    y_h = _host_vector(y, None, "y")
    if y_h.shape[0] != m:
        raise ValueError(f"y has length {y_h.shape[0]} but A has {m} rows")
    u_h = _nonneg(_host_vector(costs, None, "costs"), "costs")
    if u_h.shape[0] != n_trees:
        raise ValueError(
            f"costs has length {u_h.shape[0]} but A has {n_trees} columns (one per tree)"
        )
    if sample_weight is None:
        r_h = np.ones(m)
    else:
        r_h = _nonneg(_host_vector(sample_weight, None, "sample_weight"), "sample_weight")
        if r_h.shape[0] != m:
            raise ValueError(f"sample_weight has length {r_h.shape[0]} but A has {m} rows")
    if not float(r_h.sum()) > 0:
        raise ValueError("sample_weight must have a positive sum")
    if loss == "logistic":
        if not np.all((y_h == 0) | (y_h == 1)):
            raise ValueError("loss='logistic' needs y in {0, 1}")
        if fit_intercept and np.unique(y_h[r_h > 0]).size < 2:
            raise ValueError(
                "loss='logistic' with an intercept needs both classes among the "
                "rows with positive weight (otherwise the intercept runs to "
                "infinity)"
            )
    return A, y_h, u_h, r_h


@_docs.fill
class TreeLasso:
    """The tree-weight lasso of one forest, prepared once and solved for any number of lambdas.

    Preparation (means, the Gram matrix or the sketch) is done here; :meth:`solve` then costs
    only iterations. Weights and arrays stay in the namespace of ``A``.

    Parameters
    ----------
    $data
    costs : ndarray of shape (n_trees,)
        Tree costs ``u`` >= 0 (see :func:`tree_costs`); a tree of cost 0 is never penalized.
    $datafit
    """

    def __init__(self, A, y, costs, *, datafit=Datafit()):
        datafit = _datafit(datafit)
        loss, fit_intercept = datafit.loss, datafit.fit_intercept
        xp = namespace_of(A)
        A, y_h, u_h, r_h = _checked_problem(
            xp, A, y, costs, loss, datafit.sample_weight, fit_intercept
        )
        m, n_trees = A.shape
        sketch, sketch_size = _check_sketch(datafit.sketch, datafit.sketch_size, loss, m, n_trees)
        self.xp = xp
        self.loss = loss
        self.fit_intercept = bool(fit_intercept)
        self.A, self.m, self.n_trees, self.W = A, m, n_trees, float(r_h.sum())
        self.y = xp.asarray(y_h)
        self.r = xp.asarray(r_h)
        self.u = xp.asarray(u_h)
        self.u_host = u_h
        self.sketch, self.sketch_size = sketch, sketch_size
        rng = datafit.rng()
        if loss == "squared":
            self._model, self._b0 = self._squared_model(rng)
        else:
            self._model, self._b0 = self._logistic_model(rng, y_h, r_h)

        # KKT scale: the gradient at w = 0 (b = b0), the quantity that sets lambda_max.
        z0 = self._model.image(xp.zeros(n_trees), xp.asarray(self._b0))
        g0, _ = self._model.grad(z0)
        scale = float(xp.max(xp.abs(g0)))
        self._scale = scale if scale > 0 else 1.0
        self._lip = None
        self._lambda_max = None

    def with_costs(self, costs):
        """The same problem with other tree costs, sharing everything prepared (the model,
        its Gram matrix or sketch, the Lipschitz constant): what a reweighting step needs.

        Parameters
        ----------
        costs : ndarray of shape (n_trees,)
            Tree costs >= 0.

        Returns
        -------
        TreeLasso
        """
        u_h = _nonneg(_host_vector(costs, self.n_trees, "costs"), "costs")
        other = copy.copy(self)
        other.u, other.u_host = self.xp.asarray(u_h), u_h
        other._lambda_max = None  # depends on the costs; the Lipschitz constant does not
        return other

    def _squared_model(self, rng):
        """The squared loss's model and b0 = 0: the intercept is eliminated by centering, the
        rows are sketched when asked, and the Gram form is used whenever T <= rows."""
        xp, A, W, n_trees = self.xp, self.A, self.W, self.n_trees
        if self.fit_intercept:
            self.abar = (self.r @ A) / W
            self.ybar = float(self.r @ self.y) / W
        else:
            self.abar = xp.zeros(n_trees)
            self.ybar = 0.0
        yc = self.y - self.ybar
        if self.sketch is not None:
            B, v = _sketch_square(xp, A, yc, self.r, self.abar, self.sketch, self.sketch_size, rng)
            rows, r_model, abar_model = B.shape[0], None, None
        else:
            B, v = A, yc
            rows, r_model = self.m, self.r
            abar_model = self.abar if self.fit_intercept else None
        if n_trees <= rows:
            K, c, yy = _gram(xp, B, v, r_model, abar_model)
            return _GramSquare(xp, K, c, yy, W), 0.0
        return _DirectSquare(xp, B, v, r_model, abar_model, W), 0.0

    def _logistic_model(self, rng, y_h, r_h):
        """The logistic loss's model (on a row sample with ``sketch="rows"``) and the starting
        intercept b0, the log-odds of the weighted class frequency."""
        xp = self.xp
        if self.sketch == "rows":
            idx = np.sort(rng.choice(self.m, size=self.sketch_size, replace=False))
            r_s = r_h[idx]
            if self.fit_intercept and (r_s.sum() <= 0 or np.unique(y_h[idx][r_s > 0]).size < 2):
                raise ValueError(
                    "the row sketch holds a single class (or no weight); use a larger sketch_size"
                )
            idx_x = xp.asarray(idx)
            As, ys, rs, Ws = self.A[idx_x], self.y[idx_x], self.r[idx_x], float(r_s.sum())
        else:
            As, ys, rs, Ws = self.A, self.y, self.r, self.W
            r_s, idx = r_h, slice(None)
        model = _DirectLogistic(xp, As, ys, rs, Ws, self.fit_intercept)
        if not self.fit_intercept:
            return model, 0.0
        return model, log_odds(float((r_s * y_h[idx]).sum()) / float(r_s.sum()))

    # -- small helpers ------------------------------------------------------------------------

    @property
    def lipschitz(self) -> float:
        """Lipschitz constant of the gradient of the smooth part (computed once, lazily)."""
        if self._lip is None:
            lip = self._model.lipschitz()
            # A zero Lipschitz constant means A (centered) is zero; any step is exact then.
            self._lip = lip if lip > 0 else 1.0
        return self._lip

    def intercept_of(self, w, b=None) -> float:
        """The intercept that goes with some weights.

        Parameters
        ----------
        w : ndarray of shape (n_trees,), float64
        b : float or None, default=None
            The solver's intercept variable (logistic loss); the squared loss's intercept is
            eliminated and computed from ``w``.

        Returns
        -------
        float
            0.0 without ``fit_intercept``.
        """
        if self.loss == "squared":
            return float(self.ybar - self.abar @ w) if self.fit_intercept else 0.0
        return float(b) if self.fit_intercept else 0.0

    def objective(self, w, b, lam) -> float:
        """The full-data objective of the lasso.

        Parameters
        ----------
        w : ndarray of shape (n_trees,), float64
        b : float
            Intercept.
        lam : float
            Penalty.

        Returns
        -------
        float
        """
        xp = self.xp
        w = xp.asarray(w, dtype=xp.float64)
        z = self.A @ w + b
        if self.loss == "squared":
            e = z - self.y
            loss = (self.r * e * e).sum() / self.W
        else:
            loss = (self.r * logistic_loss_terms(z, self.y)).sum() / self.W
        return float(loss + lam * (self.u @ w))

    def _residual(self, lam, u, w, gw, gb, lip):
        """Relative KKT residual (gradient mapping) of the trees in w (with costs u)."""
        xp = self.xp
        g = gw + lam * u
        if math.isinf(lip):
            rho = xp.where(w > 0, g, xp.minimum(g, 0.0))  # min(g, L w) as L -> infinity
        else:
            rho = xp.minimum(g, lip * w)
        res = float(xp.max(xp.abs(rho))) if w.shape[0] else 0.0
        if gb is not None:
            res = max(res, abs(float(gb)))
        return res / self._scale

    # -- lambda_max -----------------------------------------------------------------------------

    def lambda_max(self) -> float:
        """Smallest lambda at which every tree with a positive cost has weight 0.

        From the KKT conditions at w = 0: ``lambda_max = max_i max(-g_i, 0) / u_i`` over trees
        with ``u_i > 0``, g the gradient of the smooth part at w = 0 and the optimal intercept.
        Trees with zero cost are never penalized: when there are some, they are first fitted
        alone (a small unpenalized solve) and g is taken at that point. For a sketched problem
        this is the lambda_max of the sketched problem.

        Returns
        -------
        float
            0.0 when no tree has a positive cost.
        """
        if self._lambda_max is not None:
            return self._lambda_max
        xp = self.xp
        free = self.u_host == 0
        if free.any():
            w, b = self._solve(0.0, None, DEFAULT_TOL, DEFAULT_MAX_ITER, allowed=free)[:2]
        else:
            w, b = xp.zeros(self.n_trees), xp.asarray(self._b0)
        gw, _ = self._model.grad(self._model.image(w, b))
        gw = to_host(gw)
        pos = ~free
        if not pos.any():
            self._lambda_max = 0.0
        else:
            self._lambda_max = float(np.max(np.maximum(-gw[pos], 0.0) / self.u_host[pos]))
        return self._lambda_max

    # -- the solver ---------------------------------------------------------------------------

    def solve(self, lam, *, warm_start=None, tol=DEFAULT_TOL, max_iter=DEFAULT_MAX_ITER):
        """Solve the lasso at one lambda.

        Parameters
        ----------
        lam : float >= 0
        warm_start : LassoResult or None, default=None
            A solution (from a nearby lambda, say) to start from; None starts at w = 0.
        tol : float > 0, default=1e-9
            Relative KKT tolerance.
        max_iter : int >= 1, default=20000
            Cap on FISTA iterations, summed over working sets (a ConvergenceWarning says when
            it is hit).

        Returns
        -------
        LassoResult
        """
        lam = _check_lam(lam)
        SolverOptions(tol, max_iter)  # raises on a bad tol or max_iter
        w, b, n_iter, converged, kkt, fval = self._solve(lam, warm_start, float(tol), int(max_iter))
        if not converged:
            from sklearn.exceptions import ConvergenceWarning

            warn_from_caller(
                f"lasso solve at lam={lam:.6g} stopped after {n_iter} iterations with "
                f"relative KKT residual {kkt:.3g} > tol={tol:.3g}",
                ConvergenceWarning,
            )
        b_out = self.intercept_of(w, b)
        obj = self.objective(w, b_out, lam)
        solved = obj if self.sketch is None else float(fval + lam * (self.u @ w))
        return LassoResult(
            weights=w,
            intercept=b_out,
            objective=obj,
            solved_objective=solved,
            lam=lam,
            n_iter=n_iter,
            converged=converged,
            kkt=kkt,
        )

    def _start(self, warm_start):
        xp = self.xp
        if warm_start is None:
            return xp.zeros(self.n_trees), xp.asarray(self._b0)
        w = xp.asarray(warm_start.weights, dtype=xp.float64).copy()
        if w.shape != (self.n_trees,):
            raise ValueError(f"warm_start has {tuple(w.shape)} weights, expected ({self.n_trees},)")
        if self.loss == "logistic" and self.fit_intercept:
            return w, xp.asarray(float(warm_start.intercept))
        return w, xp.asarray(0.0)

    def _solve(self, lam, warm_start, tol, max_iter, allowed=None):
        """:meth:`_solve_ws` with host BLAS on one thread when the forest has at most
        ``_ONE_THREAD_MAX_TREES`` trees: its products are then thin (rows x a few dozen
        trees), threads gain little on them, and on a machine whose cores are busy they wait
        for each other: 3-7 times the wall time of one thread, measured on 10,000 rows and
        100 trees at load 20-35 on 2 cores."""
        if self.n_trees > _ONE_THREAD_MAX_TREES:
            return self._solve_ws(lam, warm_start, tol, max_iter, allowed)
        with _one_blas_thread(self.xp):
            return self._solve_ws(lam, warm_start, tol, max_iter, allowed)

    def _solve_ws(self, lam, warm_start, tol, max_iter, allowed=None):
        """Working sets around FISTA + polish.

        Returns (w (T,), b (0-d), n_iter, converged, kkt, smooth value of the solved model).

        FISTA's step is 1/L with L from the whole forest, but the trees of a forest are strongly
        correlated, so L is far larger than the curvature on the few trees that end up with
        weight. Solving on a working set (the current support plus the worst KKT violators) has
        a much smaller L and cheaper iterations; after each working-set solve the full gradient
        is checked and violators are added (at least doubling the set), so the loop ends with
        the full problem's KKT conditions met, in at most log2(T) rounds. ``allowed`` (bool (T,)
        host) pins the other trees at 0 (used by lambda_max).
        """
        xp, model = self.xp, self._model
        n_trees = self.n_trees
        w, b = self._start(warm_start)
        if allowed is not None:
            w = w * xp.asarray(allowed.astype(np.float64))
        lam_u_h = lam * self.u_host
        n_iter = 0
        in_ws = None
        kkt_ws = conv = fval = None  # set by each working-set solve, read on the next pass
        while True:
            z = model.image(w, b)
            gw, gb = model.grad(z)
            gb = gb if model.has_b else None
            # Full-problem violators: trees at 0 whose gradient says they should enter.
            viol = to_host(gw) + lam_u_h
            support = to_host(w > 0)
            cand = ~support & (viol < 0)
            if allowed is not None:
                cand &= allowed
            if in_ws is not None:
                cand &= ~in_ws
            worst = (-viol[cand].min() / self._scale) if cand.any() else 0.0
            if in_ws is not None:
                # The working-set solve met tol on its trees; the rest are zeros whose residual
                # is their violation.
                kkt = max(kkt_ws, worst)
                if worst <= tol or not conv or n_iter >= max_iter:
                    return w, b, n_iter, conv and worst <= tol, kkt, fval
            else:
                kkt = self._residual(lam, self.u, w, gw, gb, self.lipschitz_if_known())
                if allowed is None and kkt <= tol:
                    return w, b, 0, True, kkt, model.value(w, z)
            # Grow the working set: the support, what it had, and the worst violators.
            base = support if in_ws is None else (in_ws | support)
            idx_c = np.flatnonzero(cand & (-viol > tol * self._scale))
            n_add = max(_WS_MIN_ADD, int(base.sum()))
            order = np.argsort(viol[idx_c], kind="stable")[:n_add]
            new_ws = base.copy()
            new_ws[idx_c[order]] = True
            if allowed is not None:
                new_ws &= allowed
            if n_trees <= 2 * _WS_MIN_ADD or new_ws.sum() > n_trees // 2:
                new_ws = np.ones(n_trees, bool) if allowed is None else allowed.copy()
            in_ws = new_ws
            whole = bool(in_ws.all())
            if whole:
                sub, lip, u_sub, w_sub = model, self.lipschitz, self.u, w
            else:
                idx_x = xp.asarray(np.flatnonzero(in_ws))
                sub = model.restrict(idx_x)
                lip = sub.lipschitz()
                lip = lip if lip > 0 else 1.0
                u_sub, w_sub = self.u[idx_x], w[idx_x]
            inner = (
                self._prox_newton
                if self.loss == "logistic" and sub.n <= _PN_MAX_TREES
                else self._fista
            )
            w_sub, b, it, conv, kkt_ws, fval = inner(
                sub, u_sub, lam, w_sub, b, tol, max_iter - n_iter, lip
            )
            n_iter += it
            if whole:
                w = w_sub
            else:
                w = xp.zeros(n_trees)
                w[idx_x] = w_sub

    def lipschitz_if_known(self):
        """The full Lipschitz constant if computed already.

        Returns
        -------
        float
            Infinity when not computed yet (for a residual at a start point,
            ``min(g + lam u, L w)`` then only counts the gradient part on the support).
        """
        return self._lip if self._lip is not None else math.inf

    def _fista(self, model, u, lam, w, b, tol, max_iter, lip):
        """FISTA with gradient restart and support polish on one (sub)model.

        Returns (w, b, n_iter, converged, kkt, smooth value).
        """
        xp = self.xp
        lam_u = lam * u
        has_b = model.has_b
        z = model.image(w, b)
        gw, gb = model.grad(z)
        kkt = self._residual(lam, u, w, gw, gb if has_b else None, lip)
        if kkt <= tol:
            return w, b, 0, True, kkt, model.value(w, z)
        wy, by, zy = w, b, z
        t = xp.asarray(1.0)
        step = 1.0 / lip
        prev_support = None
        failed = None  # (support, kkt) of the last polish that did not give a KKT point
        converged = False
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            gw, gb = model.grad(zy)
            w_new = xp.maximum(wy - step * (gw + lam_u), 0.0)
            b_new = by - step * gb if has_b else b
            z_new = model.image(w_new, b_new)
            # Gradient restart test (y - x_new) . (x_new - x) > 0. It, t and beta stay 0-d
            # device arrays: no host sync per iteration.
            d = w_new - w
            crit = (wy - w_new) @ d
            if has_b:
                crit = crit + (by - b_new) * (b_new - b)
            restart = crit > 0
            t_new = 0.5 * (1.0 + xp.sqrt(1.0 + 4.0 * t * t))
            beta = xp.where(restart, 0.0, (t - 1.0) / t_new)
            t = xp.where(restart, 1.0, t_new)
            wy = w_new + beta * d
            if has_b:
                by = b_new + beta * (b_new - b)
            zy = z_new + beta * (z_new - z)
            w, b, z = w_new, b_new, z_new
            if n_iter % _CHECK_EVERY == 0 or n_iter == max_iter:
                gw, gb = model.grad(z)
                kkt = self._residual(lam, u, w, gw, gb if has_b else None, lip)
                if kkt <= tol:
                    converged = True
                    break
                support = to_host(w > 0)
                # Polish when the support has settled; after a failure retry on the same
                # support only once FISTA has got 10x closer (Newton may have started too far).
                if (
                    prev_support is not None
                    and np.array_equal(support, prev_support)
                    and (
                        failed is None
                        or not np.array_equal(support, failed[0])
                        or kkt < 0.1 * failed[1]
                    )
                ):
                    pol = self._polish(model, u, lam, w, b, support, lip, tol)
                    if pol is None:
                        pol = self._polish_flat(model, u, lam, w, b, support, lip, tol)
                    if pol is not None:
                        w, b, z, kkt = pol
                        converged = True
                        break
                    failed = (support, kkt)
                prev_support = support
        return w, b, n_iter, converged, kkt, model.value(w, z)

    def _prox_newton(self, model, u, lam, w, b, tol, max_iter, lip):
        """Proximal Newton for the logistic loss on one (sub)model: each step solves the
        lasso of the loss's quadratic model at the current point (small: the working set's
        Hessian, one pass over the rows to form it) and backtracks along the step until the
        objective falls enough (Lee, Sun, Saunders, "Proximal Newton-type methods for
        minimizing composite functions", SIAM J. Optim., 2014). FISTA needs hundreds of
        passes over the rows per solve where this needs a few Hessians, each the price of
        about ``n / 2`` of them. An iteration here is a Newton step.

        Returns (w, b, n_iter, converged, kkt, smooth value).
        """
        xp = self.xp
        has_b = model.has_b
        n = model.n
        u_h = np.asarray(to_host(u), dtype=np.float64)
        lam_u = lam * u_h
        z = model.image(w, b)
        f = model.value(w, z)
        n_iter = 0
        while True:
            gw, gb = model.grad(z)
            kkt = self._residual(lam, u, w, gw, gb if has_b else None, lip)
            if kkt <= tol or n_iter >= max_iter:
                return w, b, n_iter, kkt <= tol, kkt, f
            n_iter += 1
            H = np.asarray(to_host(model.newton_hess(z)), dtype=np.float64)
            g = np.asarray(to_host(gw), dtype=np.float64)
            w_h = np.asarray(to_host(w), dtype=np.float64)
            b_h = float(b) if has_b else 0.0
            if has_b:
                g = np.append(g, float(gb))
            x0 = np.append(w_h, b_h) if has_b else w_h
            # The step's quadratic is solved to 1 % of the current residual (10 % took 263
            # Newton steps for 64 solves of bench_controlburn's 100,000-row table, 1 % 229,
            # 0.1 % 226): it is on the host and small, while each Newton step is passes over
            # rows.
            atol = max(_PN_INNER_RTOL * kkt, 0.1 * tol) * self._scale
            x = _quadratic_lasso(H, g, x0, lam_u, n, atol)
            d = x - x0
            # Armijo backtracking on the full objective along the step (x >= 0 on w, and
            # w >= 0: every point of the segment is feasible).
            F0 = f + float(lam_u @ w_h)
            decrease = float(g @ d) + float(lam_u @ (x[:n] - w_h))
            if not decrease < 0:
                # No descent direction left at this precision: FISTA takes it from here.
                return self._fista(model, u, lam, w, b, tol, max_iter - n_iter, lip)
            step = 1.0
            for _ in range(40):
                w_new_h = w_h + step * d[:n]
                w_new = xp.asarray(np.maximum(w_new_h, 0.0))
                b_new = xp.asarray(b_h + step * d[n]) if has_b else b
                z_new = model.image(w_new, b_new)
                f_new = model.value(w_new, z_new)
                F_new = f_new + float(lam_u @ np.maximum(w_new_h, 0.0))
                # Armijo, with the objective's own rounding as slack: near the solution the
                # predicted decrease falls below one ulp of F0, the exact test then failed
                # until the step had shrunk to nothing (about 28 halvings per Newton step,
                # each a pass over the rows), and the solve crept to max_iter.
                if F_new <= F0 + 1e-4 * step * decrease + _ROUNDING * abs(F0):
                    break
                step *= 0.5
            else:
                return self._fista(model, u, lam, w, b, tol, max_iter - n_iter, lip)
            w, b, z, f = w_new, b_new, z_new, f_new

    def _polish(self, model, u, lam, w, b, support, lip, tol):
        """Newton on the support; (w, b, z, kkt) if it lands on a KKT point, else None."""
        xp = self.xp
        S = xp.asarray(np.flatnonzero(support))
        n_s = int(S.shape[0])
        has_b = model.has_b
        if n_s == 0 and not has_b:
            return None
        w_s = w[S]
        bb = b
        w_full = w
        # Squared loss: one exact step and two of iterative refinement at most.
        n_newton = 3 if self.loss == "squared" else 12
        z = model.image(w, b)
        for _ in range(n_newton):
            gw, gb = model.grad(z)
            rhs = gw[S] + lam * u[S]
            if has_b:
                rhs = xp.concatenate([rhs, gb[None]])
            H = model.hess_sub(S, z)
            try:
                delta = xp.linalg.solve(H, rhs)
            except np.linalg.LinAlgError:
                return None
            if not bool(xp.all(xp.isfinite(delta))):
                return None
            w_s = w_s - delta[:n_s]
            if has_b:
                bb = bb - delta[n_s]
            w_full = xp.zeros(model.n)
            w_full[S] = w_s
            z = model.image(w_full, bb)
            size = float(xp.max(xp.abs(w_s))) if n_s else 0.0
            if has_b:
                size = max(size, abs(float(bb)))
            if float(xp.max(xp.abs(delta))) <= 1e-13 * (1.0 + size):
                break
        if n_s and not bool(xp.all(w_s > 0)):
            return None
        gw, gb = model.grad(z)
        kkt = self._residual(lam, u, w_full, gw, gb if has_b else None, lip)
        if kkt <= tol:
            return w_full, bb, z, kkt
        return None

    def _polish_flat(self, model, u, lam, w, b, support, lip, tol):
        """The polish of a squared loss whose support is rank-deficient; (w, b, z, kkt) if it
        lands on a KKT point, else None.

        Trees of a forest often predict the same thing on a small table (two trees with the
        same partition of the rows, or one tree the sum of others), so the Hessian on the
        support is singular: :meth:`_polish`'s Newton step fails, and FISTA creeps along the
        flat directions, where the objective only falls by ``lam u . d`` (linear), by a step
        ``1 / L`` per iteration until the dearer of the trees reaches 0: thousands of
        iterations (3,500 per solve on scikit-learn's 27-row check tables, 16 trees of rank 2).
        Here the Newton step is taken in the Hessian's range (its pseudo-inverse), and along
        its null space the weights move against the gradient's null-space part, the direction
        FISTA drifts along, until the first weight reaches 0; that tree leaves the support and
        the step is repeated, until the gradient has no null-space part left. The result is
        accepted only as a KKT point of the (sub)model within ``tol``, as every exit is."""
        if model.has_b or self.loss != "squared":
            return None
        xp = self.xp
        S = np.flatnonzero(support)
        if S.size < 2:
            return None
        u_h = np.asarray(to_host(u), dtype=np.float64)
        w_s = np.asarray(to_host(w), dtype=np.float64)[S]
        # The quadratic's gradient on the support, g(w_s) = H w_s + q, from one gradient.
        w_full = xp.zeros(model.n)
        w_full[xp.asarray(S)] = xp.asarray(w_s)
        z = model.image(w_full, b)
        H = np.asarray(to_host(model.hess_sub(xp.asarray(S), z)), dtype=np.float64)
        g = np.asarray(to_host(model.grad(z)[0]), dtype=np.float64)[S] + lam * u_h[S]
        q = g - H @ w_s
        flat = 0.1 * tol * self._scale  # a null-space gradient below this is met already
        while S.size:
            ev, V = np.linalg.eigh(H)
            if not ev[-1] > 0:
                return None
            rng = ev > _FLAT_RCOND * ev[-1]
            Vr, Vn = V[:, rng], V[:, ~rng]
            g = H @ w_s + q
            w_s = w_s - Vr @ ((Vr.T @ g) / ev[rng])
            if not np.all(w_s > 0):
                return None
            d = -(Vn @ (Vn.T @ g))
            if not float(np.max(np.abs(d), initial=0.0)) > flat:
                break
            down = np.flatnonzero(d < 0)
            if down.size == 0:
                return None
            ratio = w_s[down] / -d[down]
            out = down[int(np.argmin(ratio))]
            w_s = w_s + float(ratio.min()) * d
            keep = np.arange(S.size) != out
            S, w_s, q, H = S[keep], w_s[keep], q[keep], H[np.ix_(keep, keep)]
            if not np.all(w_s > 0):
                return None
        w_full = xp.zeros(model.n)
        if S.size:
            w_full[xp.asarray(S)] = xp.asarray(w_s)
        z = model.image(w_full, b)
        gw, _ = model.grad(z)
        kkt = self._residual(lam, u, w_full, gw, None, lip)
        if kkt <= tol:
            return w_full, b, z, kkt
        return None


#: Eigenvalues of a support's Hessian below this fraction of its largest are its null space
#: (:meth:`TreeLasso._polish_flat`).
_FLAT_RCOND = 1e-10

_BLAS = []


def _one_blas_thread(xp):
    """A context in which host BLAS runs one thread (numpy arrays; else nothing)."""
    if not is_host_namespace(xp):
        return contextlib.nullcontext()
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS.append(ThreadpoolController())
        except (ImportError, OSError, RuntimeError):  # no threadpoolctl: BLAS as it is
            _BLAS.append(None)
    if _BLAS[0] is None:
        return contextlib.nullcontext()
    return _BLAS[0].limit(limits=1, user_api="blas")


#: The relative rounding of an objective value summed over the rows (a few ulps per row):
#: the slack of the proximal Newton line search.
_ROUNDING = 1e-13


def _quadratic_lasso(H, g, x0, lam_u, n, atol, max_iter=5000):
    """argmin over x (x[:n] >= 0, x[n:] free) of g.(x - x0) + (x - x0)' H (x - x0) / 2 +
    lam_u . x[:n], on the host: FISTA with gradient restart, then the exact minimizer on the
    support it found when that one is a KKT point (the proximal Newton step of
    :meth:`TreeLasso._prox_newton`), to a KKT residual ``atol``."""
    p = H.shape[0]
    L = float(np.linalg.eigvalsh(H)[-1]) if p else 0.0
    if not L > 0:
        return x0.copy()
    step = 1.0 / L
    c = g - H @ x0  # the quadratic's gradient is H x + c

    def residual(x, gq):
        rho = np.minimum(gq[:n] + lam_u, L * x[:n])
        res = float(np.max(np.abs(rho), initial=0.0))
        return max(res, float(np.max(np.abs(gq[n:]), initial=0.0)))

    def exact_on_support(x):
        S = np.flatnonzero(np.r_[x[:n] > 0, np.ones(p - n, bool)])
        if S.size == 0:
            return None
        rhs = -(c[S] + np.r_[lam_u, np.zeros(p - n)][S])
        try:
            xs = np.linalg.solve(H[np.ix_(S, S)], rhs)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(xs)) or np.any(xs[S < n] <= 0):
            return None
        out = np.zeros(p)
        out[S] = xs
        return out if residual(out, H @ out + c) <= atol else None

    x = np.maximum(x0, 0.0) if p == n else np.r_[np.maximum(x0[:n], 0.0), x0[n:]]
    y, t = x.copy(), 1.0
    prev_support = None
    for it in range(1, max_iter + 1):
        gq = H @ y + c
        x_new = y - step * gq
        x_new[:n] = np.maximum(x_new[:n] - step * lam_u, 0.0)
        if (y - x_new) @ (x_new - x) > 0:
            t = 1.0  # gradient restart
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        y = x_new + ((t - 1.0) / t_new) * (x_new - x)
        x, t = x_new, t_new
        if it % 10 == 0:
            if residual(x, H @ x + c) <= atol:
                return x
            support = x[:n] > 0
            if prev_support is not None and np.array_equal(support, prev_support):
                exact = exact_on_support(x)
                if exact is not None:
                    return exact
            prev_support = support
    return x


def _check_lam(lam):
    if (
        isinstance(lam, bool)
        or not isinstance(lam, numbers.Real)
        or not math.isfinite(lam)
        or lam < 0
    ):
        raise ValueError(f"lambda must be a finite number >= 0, got {lam!r}")
    return float(lam)


def _datafit(datafit):
    if not isinstance(datafit, Datafit):
        raise TypeError(f"datafit must be a gpufs.lasso.Datafit, got {type(datafit).__name__}")
    return datafit


def _solver_options(solver):
    if not isinstance(solver, SolverOptions):
        raise TypeError(f"solver must be a gpufs.lasso.SolverOptions, got {type(solver).__name__}")
    return solver


@_docs.fill
def solve_lasso(A, y, costs, lam, *, datafit=Datafit(), solver=SolverOptions(), warm_start=None):
    """Solve the tree-weight lasso once.

    Parameters
    ----------
    $data
    costs : ndarray of shape (n_trees,)
        Tree costs >= 0.
    lam : float >= 0
    $datafit
    $solver_options
    warm_start : LassoResult or None, default=None

    Returns
    -------
    LassoResult
    """
    solver = _solver_options(solver)
    prob = TreeLasso(A, y, costs, datafit=datafit)
    return prob.solve(lam, warm_start=warm_start, **_keywords(solver))


@_docs.fill
def lambda_max(A, y, costs, *, datafit=Datafit()):
    """Smallest lambda giving w = 0 on every positive-cost tree (see
    :meth:`TreeLasso.lambda_max`).

    Parameters
    ----------
    $data
    costs : ndarray of shape (n_trees,)
    $datafit

    Returns
    -------
    float
    """
    return TreeLasso(A, y, costs, datafit=datafit).lambda_max()


@_docs.fill
def lasso_path(
    A,
    y,
    costs,
    lams=None,
    *,
    n_lambdas=30,
    lambda_min_ratio=1e-3,
    datafit=Datafit(),
    solver=SolverOptions(),
):
    """Warm-started solutions over a grid of lambdas.

    The lambdas are solved from the largest down, each warm-started from the previous.

    Parameters
    ----------
    $data
    costs : ndarray of shape (n_trees,)
    lams : array-like of float or None, default=None
        The lambdas, in any order; None: ``n_lambdas`` geometric values from ``lambda_max``
        down to ``lambda_min_ratio * lambda_max``.
    n_lambdas : int >= 2, default=30
    lambda_min_ratio : float in (0, 1), default=1e-3
    $datafit
    $solver_options

    Returns
    -------
    list of LassoResult
        In the order of ``lams``.
    """
    solver = _solver_options(solver)
    prob = TreeLasso(A, y, costs, datafit=datafit)
    if lams is None:
        lams = _geometric_grid(prob.lambda_max(), n_lambdas, lambda_min_ratio)
    lams = [_check_lam(x) for x in np.asarray(lams, dtype=np.float64).ravel()]
    order = sorted(range(len(lams)), key=lambda i: -lams[i])
    out = [None] * len(lams)
    prev = None
    for i in order:
        prev = prob.solve(lams[i], warm_start=prev, **_keywords(solver))
        out[i] = prev
    return out


def _geometric_grid(lmax, n, ratio):
    if not (isinstance(n, numbers.Integral) and n >= 2):
        raise ValueError(f"n_lambdas must be an integer >= 2, got {n!r}")
    if not (0 < ratio < 1):
        raise ValueError(f"lambda_min_ratio must be in (0, 1), got {ratio!r}")
    return [lmax * ratio ** (i / (n - 1)) for i in range(n)]
