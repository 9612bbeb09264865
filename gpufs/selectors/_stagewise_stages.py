"""The per-round candidate solvers of forward stagewise selection, one loss object per cost.

Owns :class:`LeastSquaresStage` and :class:`LogisticStage` (targets, bias, cost and the
round's best weight of every candidate column, Watt, Borhani, Katsaggelos, "Machine Learning
Refined", 2nd ed., section 9.6), the chunked column statistics they sweep with, the column
scaling that keeps float32 data in range, and the one-hot candidates of categorical columns
with the cross-fitted cost that ranks them. The fit loop and the estimators are
``selectors.stagewise``'s.
"""

from __future__ import annotations

import numpy as np

from .._device import namespace_of, to_host
from .._types import CHUNK_ELEMENTS_STAGEWISE
from ..data._colstats import column_mean_var, matvec_T, row_slices
from ..engine.objectives import log_odds, sigmoid, softplus

__all__ = ["LeastSquaresStage", "LogisticStage"]

#: Largest Newton step on one standardized weight (logit units per standard deviation).
_MAX_NEWTON_STEP = 10.0


# --------------------------------------------------------------------------------------------
# Building blocks (all take and return arrays of namespace xp)
# --------------------------------------------------------------------------------------------


def _row_chunks(n_rows: int, n_cols: int, device: str):
    """Slices covering 0..n_rows in chunks of about ``CHUNK_ELEMENTS_STAGEWISE[device]``
    elements."""
    chunk = CHUNK_ELEMENTS_STAGEWISE.get(device, CHUNK_ELEMENTS_STAGEWISE["cpu"])
    return row_slices(n_rows, n_cols, chunk)


def _standardize_stats(X, w, W, xp, device):
    """Weighted mean and population std of every column, and 1/std (0 for constant columns).

    X (n, d); w (n,) float64 >= 0 with sum W. Returns ``mean, std, inv_std``, float64 (d,).
    A column is constant when its variance is within rounding of zero (the bound scikit-learn's
    StandardScaler uses), so constant columns never get a 1/std of 1e15.
    """
    n = X.shape[0]
    mean, var = column_mean_var(X, w, W, xp, _row_chunks(n, X.shape[1], device))
    eps = np.finfo(np.float64).eps
    n_eff = float(n)
    bound = n_eff * eps * var + (n_eff * mean * eps) ** 2
    constant = (var <= bound) | (var <= 0)
    std = xp.where(constant, 0.0, xp.sqrt(xp.maximum(var, 0.0)))
    inv_std = xp.where(constant, 0.0, 1.0 / xp.where(constant, 1.0, std))
    return mean, std, inv_std


def _softplus_neg(T):
    """``log(1 + exp(-T))`` elementwise; overwrites and returns T."""
    namespace_of(T).negative(T, out=T)
    return softplus(T, out=T)


def _newton_step(G, H, xp):
    """Clipped Newton step G / H (the Hessian may underflow to 0 on separated data)."""
    tiny = np.finfo(np.float64).tiny
    step = G / xp.maximum(H, tiny)
    return xp.clip(step, -_MAX_NEWTON_STEP, _MAX_NEWTON_STEP)


def _column(X, j, mean, inv_std):
    """Standardized column j of X as float64 (n,) (a gather of one column, not of X)."""
    return (X[:, j].astype(np.float64) - float(mean[j])) * float(inv_std[j])


# --------------------------------------------------------------------------------------------
# The costs: one loss object each (targets, bias, cost, the round's candidate solver)
# --------------------------------------------------------------------------------------------


class LeastSquaresStage:
    """The least-squares cost ``(1/W) sum_p w_p (y_p - f_p)^2`` of a stagewise model.

    Shapes: margins ``F`` and targets ``Y`` are (n_samples, 1) float64; ``w`` (n_samples,)
    float64 weights summing to ``W``.
    """

    def targets(self, y, xp):
        """The target as the cost reads it.

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
            The encoded target.
        xp : module
            Array namespace of the result.

        Returns
        -------
        Y : ndarray of shape (n_samples, 1), float64
        """
        return xp.asarray(y, dtype=xp.float64)[:, None]

    def bias(self, Y, w, W, xp):
        """The best constant model: the weighted mean.

        Parameters
        ----------
        Y : ndarray of shape (n_samples, 1), float64
        w : ndarray of shape (n_samples,), float64
        W : float
            ``w``'s sum.
        xp : module

        Returns
        -------
        ndarray of shape (1,), float64
        """
        return (w @ Y) / W

    def cost(self, F, Y, w, W, xp):
        """The weighted mean squared error of margins ``F``.

        Parameters
        ----------
        F, Y : ndarray of shape (n_samples, n_models), float64
            Margins and targets.
        w : ndarray of shape (n_samples,), float64
            Row weights.
        W : float
            Their sum.
        xp : module
            The arrays' namespace.

        Returns
        -------
        float
        """
        r = Y[:, 0] - F[:, 0]
        return float((w * r) @ r) / W

    def candidates(self, X, F, Y, w, W, mean, inv_std, active, xp, device):
        """Every feature's one-weight least-squares fit against the residual, in closed form.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Raw (not standardized) data, float32 or float64.
        F, Y : ndarray of shape (n_samples, 1), float64
        w : ndarray of shape (n_samples,), float64
        W : float
        mean, inv_std : ndarray of shape (n_features,), float64
        active : ndarray of shape (n_features,), bool
            Unused here (every feature has its closed form).
        xp : module
            The arrays' namespace.
        device : {"cpu", "gpu"}
            Unused here.

        Returns
        -------
        a, cost : ndarray of shape (1, n_features), float64
            Each feature's standardized weight and the weighted mean squared error it leaves.
            Constant features get ``a = 0`` and the current cost.
        """
        r = Y[:, 0] - F[:, 0]
        wr = w * r
        S = float(wr @ r)
        c = (matvec_T(X, wr, xp) - mean * float(wr.sum())) * inv_std  # z_j' W r
        a = c / W  # z_j' W z_j = W
        cost = xp.maximum(S - c * a, 0.0) / W
        return a[None, :], cost[None, :]


class LogisticStage:
    """The one-vs-rest logistic cost ``(1/W) sum_k sum_p w_p log(1 + exp(-y_pk f_pk))``.

    Labels are +-1; ``F`` and ``Y`` are (n_samples, n_models) float64 with one model for two
    classes (the logistic model of ``classes_[1]``) and one per class otherwise.

    Parameters
    ----------
    n_classes : int >= 2
        Number of classes: one model for two, one per class otherwise.
    max_iter : int
        Newton passes per round at most.
    tol : float
        Newton stops when every candidate's step is below ``tol * (1 + |a|)``.
    """

    def __init__(self, n_classes, max_iter, tol):
        self.n_classes = int(n_classes)
        self.max_iter, self.tol = int(max_iter), float(tol)
        self._warm = None  # the last round's solutions, the next round's starting point

    def targets(self, codes, xp):
        """+-1 labels of the models.

        Parameters
        ----------
        codes : ndarray of shape (n_samples,), int
            Class codes 0..n_classes-1.
        xp : module
            Array namespace of the result.

        Returns
        -------
        Y : ndarray of shape (n_samples, n_models), float64
            ``Y[p, k] = +1`` when row p is of model k's class, else -1 (two classes: one model,
            the class ``1``).
        """
        enc = to_host(codes)
        if self.n_classes == 2:
            Y = np.where(enc == 1, 1.0, -1.0)[:, None]
        else:
            Y = np.where(enc[:, None] == np.arange(self.n_classes)[None, :], 1.0, -1.0)
        return xp.asarray(Y, dtype=xp.float64)

    def bias(self, Y, w, W, xp):
        """The best constant models: the log-odds of each model's weighted positive frequency.

        Parameters
        ----------
        Y : ndarray of shape (n_samples, n_models), float64
            +-1 labels.
        w : ndarray of shape (n_samples,), float64
        W : float
            ``w``'s sum.
        xp : module

        Returns
        -------
        ndarray of shape (n_models,), float64
        """
        return log_odds((w @ (Y > 0).astype(xp.float64)) / W)

    def cost(self, F, Y, w, W, xp):
        """The one-vs-rest logistic cost of margins ``F``, summed over the models.

        Parameters
        ----------
        F, Y : ndarray of shape (n_samples, n_models), float64
            Margins and targets.
        w : ndarray of shape (n_samples,), float64
            Row weights.
        W : float
            Their sum.
        xp : module
            The arrays' namespace.

        Returns
        -------
        float
        """
        return float((w @ _softplus_neg(Y * F)).sum()) / W

    def _sweep(self, X, F, Y, w, mean, inv_std, A, mode, xp, device):
        """One pass over X for every (model, feature) candidate at trial weights A.

        ``A`` (n_models, n_features): trial weights on the standardized features; candidate
        (k, j) has margins ``F[:, k] + A[k, j] * z_j``. ``mode="grad"`` returns ``(G, H)``, the
        weighted sums of the first and second derivatives in A of ``log(1 + exp(-y f))``;
        ``mode="loss"`` returns ``L``, the weighted sum of the loss. All (n_models, n_features).
        """
        n, d = X.shape
        K = A.shape[0]
        out = [xp.zeros((K, d), dtype=xp.float64) for _ in range(1 if mode == "loss" else 2)]
        for sl in _row_chunks(n, d, device):
            ws = w[sl]
            Z = X[sl] - mean
            Z *= inv_std  # standardized chunk (m, d)
            Z2 = Z * Z if mode == "grad" else None
            for k in range(K):
                T = Z * A[k]
                T += F[sl, k, None]
                T *= Y[sl, k, None]  # t = y * margin
                if mode == "loss":
                    out[0][k] += ws @ _softplus_neg(T)
                    continue
                S = sigmoid(-T)  # sigma(-t)
                # d/da log(1 + e^{-t}) = -y z sigma(-t); d2/da2 = z^2 sigma(t) sigma(-t)
                out[0][k] -= (ws * Y[sl, k]) @ (S * Z)
                S *= 1.0 - S
                S *= Z2
                out[1][k] += ws @ S
        return out[0] if mode == "loss" else (out[0], out[1])

    def candidates(self, X, F, Y, w, W, mean, inv_std, active, xp, device):
        """Every (model, feature) one-weight logistic fit by bracketed Newton's method.

        Each Newton pass is one sweep for gradient and Hessian. The derivative is increasing
        (the cost is convex), so its sign at every evaluated point narrows a bracket around the
        minimum; a Newton step that leaves the bracket is replaced by bisection. The test uses
        derivatives only: near the minimum, cost differences fall below rounding while the
        derivative stays accurate. One last sweep evaluates the costs; a candidate whose cost
        came out above the cost at a = 0 (possible only when stopped by ``max_iter``) falls
        back to a = 0. The solutions warm-start the next round's call.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Raw (not standardized) data, float32 or float64.
        F, Y : ndarray of shape (n_samples, n_models), float64
            Margins and +-1 labels.
        w : ndarray of shape (n_samples,), float64
        W : float
            ``w``'s sum.
        mean, inv_std : ndarray of shape (n_features,), float64
            The standardization.
        active : ndarray of shape (n_features,), bool
            The candidates whose convergence counts.
        xp : module
            The arrays' namespace.
        device : {"cpu", "gpu"}
            Sizes the row chunks of the sweeps.

        Returns
        -------
        a, cost : ndarray of shape (n_models, n_features), float64
            The weights and the evaluated costs
            ``(1/W) sum_p w_p log(1 + exp(-y_p (F_p + a z_p)))``.
        """
        K = F.shape[1]
        d = X.shape[1]
        cost0 = (w @ _softplus_neg(Y * F)) / W  # (K,): the cost at a = 0
        a = (
            xp.zeros((K, d), dtype=xp.float64)
            if self._warm is None
            else xp.array(self._warm, dtype=xp.float64)
        )
        lo = xp.full((K, d), -xp.inf)
        hi = xp.full((K, d), xp.inf)
        for _ in range(self.max_iter):
            G, H = self._sweep(X, F, Y, w, mean, inv_std, a, "grad", xp, device)
            lo = xp.where(G < 0, xp.maximum(lo, a), lo)
            hi = xp.where(G > 0, xp.minimum(hi, a), hi)
            nxt = a - _newton_step(G, H, xp)
            # Evaluating at a made a one end of the bracket, and Newton moves toward the
            # minimum, so it can only overshoot the other end: bisect then.
            both = xp.isfinite(lo) & xp.isfinite(hi)
            mid = 0.5 * (xp.where(both, lo, 0.0) + xp.where(both, hi, 0.0))
            nxt = xp.where(((nxt < lo) | (nxt > hi)) & both, mid, nxt)
            done = bool(
                ((xp.abs(nxt - a) <= self.tol * (1.0 + xp.abs(a))) | ~active[None, :]).all()
            )
            a = nxt
            if done:
                break
        cost = self._sweep(X, F, Y, w, mean, inv_std, a, "loss", xp, device) / W
        worse = cost > cost0[:, None]
        a = xp.where(worse, 0.0, a)
        cost = xp.where(worse, cost0[:, None], cost)
        self._warm = a
        return a, cost


#: Columns whose largest |value| is within 2**+-this keep their scale; the others are scaled
#: by a power of two for the fit (their squares and sums would leave the dtype's range).
_SAFE_EXPONENT = {"float64": 256, "float32": 40}


def _column_exponents(X, xp):
    """int64 (n_features,) host: e with max |X[:, j]| in [2**(e-1), 2**e) for the columns
    outside ``_SAFE_EXPONENT``, 0 for the others (and for all-zero columns)."""
    import warnings

    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-missing column: nan
        top = np.maximum(
            np.abs(to_host(xp.nanmax(X, axis=0))), np.abs(to_host(xp.nanmin(X, axis=0)))
        )
    top = np.nan_to_num(top, nan=0.0)
    e = np.frexp(top.astype(np.float64))[1].astype(np.int64)
    return np.where(np.abs(e) > _SAFE_EXPONENT[np.dtype(X.dtype).name], e, 0)


def _scale_columns(X, col_exp, xp):
    """X (n, d) * 2**-col_exp per column, exactly (a new array)."""
    return xp.ldexp(X, xp.asarray(-col_exp, dtype=xp.int32)[None, :]).astype(X.dtype, copy=False)


def _check_raw_units(coef, intercept):
    """The model in X's units must be finite: a column so small (subnormal) that its weight
    per unit overflows float64 is named."""
    bad = np.flatnonzero(~np.isfinite(coef).all(axis=0))
    if bad.size:
        raise ValueError(
            f"the weights of columns {bad[:8].tolist()} overflow float64 in X's units (their "
            f"values are below float64's normal range, about 2.2e-308): rescale those columns "
            "(for example multiply them by 1e300, or use sklearn's StandardScaler)."
        )
    if not np.isfinite(intercept).all():
        raise ValueError(
            "the intercept overflows float64 in X's units (the selected columns' "
            "means are too large for their weights): center or rescale X (for "
            "example with sklearn's StandardScaler)."
        )


def _constant_target(Y, w, xp):
    """True when every model's target (Y (n, n_models)) takes one value on the rows of
    positive weight w (n,): then no feature can lower the cost, and none is selected."""
    rows = w > 0
    return bool(xp.all(xp.max(Y[rows], axis=0) == xp.min(Y[rows], axis=0)))


# --------------------------------------------------------------------------------------------
# Categorical columns: one group of one-hot indicators each
# --------------------------------------------------------------------------------------------


def _category_index(codes, n_codes, xp):
    """int64 (n,) index of each row's category, ``n_codes`` for a missing one (a slot whose
    weight is always 0)."""
    return xp.where(xp.isnan(codes), n_codes, xp.nan_to_num(codes)).astype(xp.int64)


def _category_candidates(stage, idx, n_codes, F, Y, w, W, xp, max_iter=50, tol=1e-10):
    """The group fit of one categorical column: one weight per category and model.

    ``idx`` (n,) from ``_category_index``; F, Y (n, n_models); w (n,) with sum W. Returns
    ``(a, cost)``: a (n_models, n_codes + 1) float64 (the last entry, the missing slot, is 0)
    and the cost of the model with those weights added (summed over models, a float)."""
    K = F.shape[1]
    a = xp.zeros((K, n_codes + 1), dtype=xp.float64)
    if isinstance(stage, LeastSquaresStage):
        r = Y[:, 0] - F[:, 0]
        wr = w * r
        S = xp.bincount(idx, weights=wr, minlength=n_codes + 1)[:n_codes]
        Wc = xp.bincount(idx, weights=w, minlength=n_codes + 1)[:n_codes]
        pos = Wc > 0
        a[0, :n_codes] = xp.where(pos, S / xp.where(pos, Wc, 1.0), 0.0)
        gain = float((xp.where(pos, S * S / xp.where(pos, Wc, 1.0), 0.0)).sum())
        return a, max(float(wr @ r) - gain, 0.0) / W
    # logistic: per category, Newton on log(1 + exp(-y (f + a_c))) (convex, one dimension)
    for k in range(K):
        for _ in range(max_iter):
            t = Y[:, k] * (F[:, k] + a[k, idx])
            s = sigmoid(-t)
            G = xp.bincount(idx, weights=-w * Y[:, k] * s, minlength=n_codes + 1)[:n_codes]
            H = xp.bincount(idx, weights=w * s * (1.0 - s), minlength=n_codes + 1)[:n_codes]
            step = _newton_step(G, H, xp)
            a[k, :n_codes] -= step
            if bool((xp.abs(step) <= tol * (1.0 + xp.abs(a[k, :n_codes]))).all()):
                break
    cost = stage.cost(F + a[xp.arange(K)[None, :], idx[:, None]], Y, w, W, xp)
    return a, cost


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------


#: Folds of the cross-fitted cost that ranks a categorical column (scikit-learn's
#: ``TargetEncoder`` cross-fits its encoding with 5 folds too).
CATEGORY_FOLDS = 5


def _category_folds(n, xp):
    """int64 (n,) fold 0..CATEGORY_FOLDS-1 of every row for :func:`_category_heldout_cost`:
    a fixed permutation (seed 0) of the rows dealt into the folds, so a fit's folds depend on
    its number of rows only (no ``random_state``: the selection is repeatable)."""
    folds = np.random.default_rng(0).permutation(n) % CATEGORY_FOLDS
    return xp.asarray(folds.astype(np.int64))


def _category_heldout_cost(stage, idx, n_codes, F, Y, w, W, folds, xp):
    """The cross-fitted cost of a categorical column's group fit: each fold's rows scored
    with the category weights fitted (``_category_candidates``) on the other folds' rows.

    The training cost of a group fit falls with the number of categories even when they
    carry nothing (a column of L random categories lowers the least-squares cost by about
    L / n of the residual variance, a one-weight column by 1 / n), so a many-level noise
    column would win a round over a real signal. Held out, a noise category's weights only
    add error, and a real one's still help (CatBoost's ordered target statistics and
    scikit-learn's ``TargetEncoder`` cross-fitting rest on the same idea). A category absent
    from the other folds gets weight 0 there.

    ``idx`` (n,) from ``_category_index``; F, Y (n, n_models); w (n,) with sum W; ``folds``
    (n,) from :func:`_category_folds`. Returns the summed held-out cost over W (a float, in
    the unit of ``stage.cost``)."""
    K = F.shape[1]
    total = 0.0
    for f in range(CATEGORY_FOLDS):
        out = folds == f
        w_in = xp.where(out, 0.0, w)
        W_in = float(w_in.sum())
        rows = xp.flatnonzero(out)
        if W_in > 0:
            a, _ = _category_candidates(stage, idx, n_codes, F, Y, w_in, W_in, xp)
            Fo = F[rows] + a[xp.arange(K)[None, :], idx[rows][:, None]]
        else:
            Fo = F[rows]
        total += stage.cost(Fo, Y[rows], w[rows], 1.0, xp)
    return total / W
