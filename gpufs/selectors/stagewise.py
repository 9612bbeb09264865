"""Forward stagewise selection (linear boosting), paper 003 (Machine Learning Refined, sec. 9.6).

Owns: ``StagewiseRegressor`` (least squares) and ``StagewiseClassifier`` (logistic / two-class
softmax cost, multiclass one-vs-rest), their per-round candidate solvers, and the stopping rules.

The algorithm, as the paper describes it
----------------------------------------
1. Standard-normalize every feature: ``z_j = (x_j - mean_j) / std_j`` (weighted by
   ``sample_weight`` when given, population std, ddof=0). The mean and std are kept in the model,
   so ``predict`` works on raw inputs (``coef_`` / ``intercept_`` are in raw-input units).
   A feature whose std is zero (constant up to rounding) can never be selected; it is never
   divided by.
2. Round 0 fits the bias alone (least squares: the weighted mean of y; logistic: the log-odds of
   the weighted class frequency). The bias is not tuned again.
3. Each round m = 1, 2, ... fits ONE weight for every feature not yet selected, with every other
   weight fixed, and keeps the feature whose one-weight model has the lowest cost. Its weight is
   then frozen. A feature is selected at most once (the issue's rule "every unused feature"; the
   paper's wording for feature selection), so round m adds the m-th selected feature and the
   model after m rounds has exactly m non-zero weights.

   * Least squares: the one-weight problem ``min_a (1/W) sum_p w_p (r_p - a z_jp)^2`` (r the
     residual) has the closed form ``a_j = (z_j' W r) / (z_j' W z_j) = (z_j' W r) / W`` (the
     standardization makes ``z_j' W z_j = W = sum w``), with cost ``(r'Wr - (z_j'Wr)^2 / W) / W``.
     ``z_j' W r`` for all j at once is one matrix-vector product on the raw matrix:
     ``(X' (w*r) - mean * sum(w*r)) / std``; no standardized copy of X is made.
   * Logistic (labels +-1, cost ``(1/W) sum_p w_p log(1 + exp(-y_p f_p))``): Newton's method on
     the single weight, for all candidate features at once. Every Newton pass computes gradient
     and Hessian of all candidates in one sweep over X in row chunks (at most a chunk of rows
     times n_features is ever materialized). It is safeguarded by a bracket: the derivative is
     increasing, so its sign at each evaluated point narrows an interval around the minimum, and
     a step leaving it is replaced by bisection; steps are clipped to ``_MAX_NEWTON_STEP``
     standardized units (a separable feature has its optimum at infinity). It stops when every
     candidate's step is at most ``newton_tol * (1 + |a|)`` or after ``max_newton_iter`` passes;
     one more sweep evaluates the candidates' costs. Each round starts from the previous round's
     solutions (warm start), which typically leaves 2-4 passes per round.
   * Multiclass classification is one-vs-rest with ONE SHARED selected set: every class has its
     own stagewise path of binary logistic models, and in each round every class fits its own
     weight on each candidate; the feature chosen is the one with the lowest SUM over classes of
     the one-vs-rest costs, and all classes then get their weight on it. ``n_features_to_select``
     therefore means exactly that many features for the whole classifier. Two-class problems use
     a single logistic model for ``classes_[1]``.

All candidates are solved at once with array operations on ``xp`` (numpy on the CPU, cupy on the
GPU); there is no Python loop over features (only over row chunks and over classes).

Stopping
--------
At most ``n_features_to_select`` rounds; earlier when no candidate is left (all non-constant
features used), when a round lowers the training cost by less than ``tol`` (that feature is then
NOT added), or, with a validation set (``X_val``/``y_val`` in ``fit`` or ``validation_fraction``),
when the validation cost has not improved for ``n_iter_no_change`` rounds; the model is then cut
back to the round with the lowest validation cost.

Dtypes and memory
-----------------
X is held once on the device in ``dtype`` ("float64" by default, "float32" halves memory; with
float32 the matrix-vector products accumulate in float32 in BLAS/cuBLAS, so nearly tied candidates
may be ordered differently from float64). Every vector (residual, margins, weights, means) is
float64. Apart from X itself, full-size temporaries are avoided: the mean is a matrix-vector
product, the variance and the Newton sweeps work on row chunks of about ``_CHUNK_ELEMENTS``.
Precision note: ``X' r`` is taken on the raw (uncentered) matrix, so a feature whose mean is many
orders of magnitude larger than its std loses that many digits in its score.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from .. import _scales, model_io
from .._device import get_namespace, is_cupy_array, resolve_device, to_host
from .._input import (check_regression_target, check_sample_weight, check_X, check_y,
                      encode_classes)

__all__ = ["StagewiseRegressor", "StagewiseClassifier"]

#: Elements (rows x features) of each row chunk in the chunked sweeps, per device. A handful of
#: float64 temporaries of this size are alive at once. CPU: 1 MB each, so the dozen elementwise
#: passes of a Newton sweep run in cache (measured 3x faster than 32 MB chunks). GPU: 256 MB
#: each, so kernel-launch overhead stays small next to the work.
_CHUNK_ELEMENTS = {"cpu": 1 << 17, "gpu": 1 << 25}
#: Largest Newton step on one standardized weight (logit units per standard deviation).
_MAX_NEWTON_STEP = 10.0
#: Class frequencies are clipped to [eps, 1 - eps] before taking the log-odds for the bias, so a
#: class with zero total weight gets a large finite bias instead of -inf.
_PROB_CLIP = 1e-15
_VALID_DTYPES = ("float64", "float32")


# --------------------------------------------------------------------------------------------
# Building blocks shared by both estimators (all take and return arrays of namespace xp)
# --------------------------------------------------------------------------------------------

def _row_chunks(n_rows: int, n_cols: int, device: str):
    """Slices covering 0..n_rows in chunks of about ``_CHUNK_ELEMENTS[device]`` elements."""
    step = max(1, _CHUNK_ELEMENTS.get(device, _CHUNK_ELEMENTS["cpu"]) // max(1, n_cols))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def _matvec_T(X, v, xp):
    """``X' v`` (n_features,) float64 for X (n, d) of float32/64 and v (n,) float64.

    With float32 X, v is cast down so the product does not upcast X into a full-size float64
    temporary.
    """
    if X.dtype != v.dtype:
        v = v.astype(X.dtype)
    return (X.T @ v).astype(xp.float64, copy=False)


def _standardize_stats(X, w, W, xp, device):
    """Weighted mean and population std of every column, and 1/std (0 for constant columns).

    X (n, d); w (n,) float64 >= 0 with sum W. Returns ``mean, std, inv_std``, float64 (d,).
    The variance is a second chunked pass around the mean (not E[x^2] - mean^2, which cancels).
    A column is constant when its variance is within rounding of zero (the bound scikit-learn's
    StandardScaler uses), so constant columns never get a 1/std of 1e15.
    """
    n, d = X.shape
    mean = _matvec_T(X, w, xp) / W
    var = xp.zeros(d, dtype=xp.float64)
    for sl in _row_chunks(n, d, device):
        C = X[sl] - mean          # float64 chunk temporary
        C *= C
        var += w[sl] @ C
    var /= W
    eps = np.finfo(np.float64).eps
    n_eff = float(n)
    bound = n_eff * eps * var + (n_eff * mean * eps) ** 2
    constant = (var <= bound) | (var <= 0)
    std = xp.where(constant, 0.0, xp.sqrt(xp.maximum(var, 0.0)))
    inv_std = xp.where(constant, 0.0, 1.0 / xp.where(constant, 1.0, std))
    return mean, std, inv_std


def _ls_candidates(X, w, W, r, mean, inv_std, xp):
    """All one-weight least-squares fits against residual ``r``, in closed form.

    X (n, d) raw; w (n,) float64 weights summing to W; r (n,) float64 residual y - model;
    mean, inv_std (d,) float64. Returns ``(a, cost)``, float64 (d,): the optimal standardized
    weight of each feature alone and the weighted mean squared error it leaves,
    ``(1/W) sum_p w_p (r_p - a_j z_jp)^2``. Constant features get a = 0 and the current cost.
    """
    wr = w * r
    S = float(wr @ r)
    c = (_matvec_T(X, wr, xp) - mean * float(wr.sum())) * inv_std    # z_j' W r
    a = c / W                                                         # z_j' W z_j = W
    cost = xp.maximum(S - c * a, 0.0) / W
    return a, cost


def _softplus_neg(T, xp):
    """log(1 + exp(-T)) elementwise, overflow-free; overwrites and returns T.

    ``max(-t, 0) + log1p(exp(-|t|))``: the same value as ``logaddexp(0, -t)`` at a fraction of
    its cost in numpy (which is ten times slower than exp + log1p on large arrays).
    """
    A = xp.abs(T)
    xp.negative(A, out=A)
    xp.exp(A, out=A)
    xp.log1p(A, out=A)
    xp.negative(T, out=T)
    xp.maximum(T, 0.0, out=T)
    T += A
    return T


def _logistic_sweep(X, F, Y, w, mean, inv_std, A, mode, xp, device):
    """One pass over X for every (class, feature) candidate at trial weights A.

    X (n, d); F (n, K) float64 current margins; Y (n, K) float64 labels +-1; w (n,) float64;
    A (K, d) float64 trial weights on the standardized features. For candidate (k, j) the margin
    is ``F[:, k] + A[k, j] * z_j``. ``mode="grad"`` returns ``(G, H)``, the weighted sums of the
    first and second derivatives in A of log(1 + exp(-y f)); ``mode="loss"`` returns ``L``, the
    weighted sum of the loss itself. All float64 (K, d).
    """
    n, d = X.shape
    K = A.shape[0]
    out = [xp.zeros((K, d), dtype=xp.float64) for _ in range(1 if mode == "loss" else 2)]
    for sl in _row_chunks(n, d, device):
        ws = w[sl]
        Z = X[sl] - mean
        Z *= inv_std                                      # standardized chunk (m, d) float64
        Z2 = Z * Z if mode == "grad" else None
        for k in range(K):
            T = Z * A[k]
            T += F[sl, k, None]
            T *= Y[sl, k, None]                           # t = y * margin
            if mode == "loss":
                out[0][k] += ws @ _softplus_neg(T, xp)
                continue
            # sigma(-t) = (1 - tanh(t/2)) / 2 and sigma(t) sigma(-t) = (1 - tanh^2(t/2)) / 4:
            # overflow-free for any t, and one transcendental per element.
            T *= 0.5
            xp.tanh(T, out=T)
            U = 1.0 - T                                   # 2 sigma(-t)
            xp.subtract(2.0, U, out=T)
            T *= U                                        # 1 - tanh^2 = 4 sigma(t) sigma(-t)
            T *= Z2
            out[1][k] += 0.25 * (ws @ T)
            U *= Z
            out[0][k] -= 0.5 * ((ws * Y[sl, k]) @ U)      # d/da log(1+e^{-t}) = -y z sigma(-t)
    return out[0] if mode == "loss" else (out[0], out[1])


def _logistic_candidates(X, F, Y, w, W, mean, inv_std, active, max_iter, tol, xp, device,
                         a0=None):
    """All one-weight logistic fits by bracketed Newton's method, vectorized over features.

    X (n, d); F (n, K) margins; Y (n, K) labels +-1; w (n,) weights summing to W;
    active (d,) bool: the candidates whose convergence counts; a0 (K, d) or None: starting
    weights (the previous round's solutions warm-start the next round). Returns ``(a, cost)``
    float64 (K, d): each candidate's weight and its evaluated cost
    ``(1/W) sum_p w_p log(1 + exp(-y_p (F_p + a z_p)))``.

    Each Newton pass is one sweep for gradient and Hessian. The derivative is increasing (the
    cost is convex), so its sign at every evaluated point narrows a bracket [lo, hi] around the
    minimum; a Newton step that leaves the bracket is replaced by bisection, and steps are
    clipped to ``_MAX_NEWTON_STEP``. The test uses derivatives only: near the minimum, cost
    differences fall below rounding while the derivative stays accurate. Converged when every
    active candidate's step is at most ``tol * (1 + |a|)``. One last sweep evaluates the costs;
    a candidate whose cost came out above the cost at a = 0 (possible only when stopped by
    ``max_iter``) falls back to a = 0.
    """
    K = F.shape[1]
    d = X.shape[1]
    cost0 = (w @ _softplus_neg(Y * F, xp)) / W            # (K,): the cost at a = 0
    a = xp.zeros((K, d), dtype=xp.float64) if a0 is None else xp.array(a0, dtype=xp.float64)
    lo = xp.full((K, d), -xp.inf)
    hi = xp.full((K, d), xp.inf)
    for _ in range(max_iter):
        G, H = _logistic_sweep(X, F, Y, w, mean, inv_std, a, "grad", xp, device)
        lo = xp.where(G < 0, xp.maximum(lo, a), lo)
        hi = xp.where(G > 0, xp.minimum(hi, a), hi)
        nxt = a - _newton_step(G, H, xp)
        # Evaluating at a made a one end of the bracket, and Newton moves toward the minimum,
        # so it can only overshoot the other end: bisect then.
        both = xp.isfinite(lo) & xp.isfinite(hi)
        mid = 0.5 * (xp.where(both, lo, 0.0) + xp.where(both, hi, 0.0))
        nxt = xp.where(((nxt < lo) | (nxt > hi)) & both, mid, nxt)
        done = bool(((xp.abs(nxt - a) <= tol * (1.0 + xp.abs(a))) | ~active[None, :]).all())
        a = nxt
        if done:
            break
    cost = _logistic_sweep(X, F, Y, w, mean, inv_std, a, "loss", xp, device) / W
    worse = cost > cost0[:, None]
    a = xp.where(worse, 0.0, a)
    cost = xp.where(worse, cost0[:, None], cost)
    return a, cost


def _newton_step(G, H, xp):
    """Clipped Newton step G / H (the Hessian may underflow to 0 on separated data)."""
    tiny = np.finfo(np.float64).tiny
    step = G / xp.maximum(H, tiny)
    return xp.clip(step, -_MAX_NEWTON_STEP, _MAX_NEWTON_STEP)


def _logistic_cost(F, Y, w, W, xp):
    """Summed one-vs-rest logistic cost of margins F (n, K) for labels Y (n, K) +-1."""
    return float((w @ _softplus_neg(Y * F, xp)).sum()) / W


def _column(X, j, mean, inv_std):
    """Standardized column j of X as float64 (n,) (a gather of one column, not of X)."""
    return (X[:, j].astype(np.float64) - float(mean[j])) * float(inv_std[j])


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------

class _StagewiseBase(SelectorMixin, BaseEstimator):
    """Shared fitting loop; subclasses define the loss (``_init_loss``, ``_round``...)."""

    def _validate_hyperparameters(self, n_features: int) -> int:
        """Check every hyperparameter; return the number of rounds to run at most."""
        name = type(self).__name__
        k = self.n_features_to_select
        if k is None:
            max_rounds = n_features
        elif isinstance(k, numbers.Integral) and not isinstance(k, bool):
            if k < 1:
                raise ValueError(f"n_features_to_select must be a positive int, a float in "
                                 f"(0, 1] or None; got {k!r}.")
            if k > n_features:
                raise ValueError(f"n_features_to_select={k} is larger than the number of "
                                 f"features in X ({n_features}).")
            max_rounds = int(k)
        elif isinstance(k, numbers.Real) and not isinstance(k, bool):
            if not 0.0 < k <= 1.0:
                raise ValueError("n_features_to_select as a float is a fraction of the features "
                                 f"and must be in (0, 1]; got {k!r}.")
            max_rounds = max(1, int(k * n_features))
        else:
            raise ValueError(f"n_features_to_select must be a positive int, a float in (0, 1] "
                             f"or None; got {k!r}.")
        if self.tol is not None:
            if (not isinstance(self.tol, numbers.Real) or isinstance(self.tol, bool)
                    or not np.isfinite(self.tol) or self.tol < 0):
                raise ValueError(f"tol must be None or a finite number >= 0; got {self.tol!r}.")
        vf = self.validation_fraction
        if vf is not None:
            if (not isinstance(vf, numbers.Real) or isinstance(vf, bool)
                    or not 0.0 < vf < 1.0):
                raise ValueError(f"validation_fraction must be None or a float in (0, 1); "
                                 f"got {vf!r}.")
        nic = self.n_iter_no_change
        if not (isinstance(nic, numbers.Integral) and not isinstance(nic, bool) and nic >= 1):
            raise ValueError(f"n_iter_no_change must be an int >= 1; got {nic!r}.")
        if self.dtype not in _VALID_DTYPES:
            raise ValueError(f"dtype must be one of {_VALID_DTYPES}; got {self.dtype!r}.")
        if not isinstance(self.verbose, numbers.Integral):
            raise ValueError(f"verbose must be an int or bool; got {self.verbose!r}.")
        self._validate_extra_hyperparameters(name)
        return max_rounds

    def _validate_extra_hyperparameters(self, name):
        pass

    # -- input helpers ------------------------------------------------------------------------

    @staticmethod
    def _reject_unsupported(X, what="X"):
        if hasattr(X, "tocsr") or type(X).__module__.startswith("scipy.sparse"):
            raise TypeError(f"{what} is a sparse matrix; gpufs stagewise selection needs dense "
                            "data. Convert it with X.toarray().")

    @staticmethod
    def _warn_column_y(y):
        shape = getattr(y, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] == 1:
            warnings.warn("A column-vector y was passed when a 1d array was expected. Please "
                          "change the shape of y to (n_samples,), for example using ravel().",
                          DataConversionWarning, stacklevel=3)

    @staticmethod
    def _input_device(X) -> str:
        """Where predict/transform compute: on the GPU for cupy/cudf input, else on the CPU."""
        if is_cupy_array(X) or type(X).__module__.split(".")[0] == "cudf":
            return "gpu"
        return "cpu"

    # -- fit ------------------------------------------------------------------------------------

    def _fit(self, X, y, sample_weight, X_val, y_val, sample_weight_val):
        from tqdm.auto import tqdm

        self._reject_unsupported(X)
        device = resolve_device(self.device)
        xp = get_namespace(device)
        self._warn_column_y(y)
        Xa = check_X(self, X, device=device, reset=True, dtype=np.dtype(self.dtype),
                     allow_nan=False)
        max_rounds = self._validate_hyperparameters(Xa.shape[1])
        n, d = Xa.shape
        ya = check_y(y, n, device=device)
        Y = self._encode_target(ya, xp)                  # (n, K) float64 on device
        sw = check_sample_weight(sample_weight, n, device=device)
        _scales.check_target_scale(self, ya, sw)
        w = xp.ones(n, dtype=xp.float64) if sw is None else xp.asarray(sw, dtype=xp.float64)

        # Validation rows: explicit set, or a held-out fraction expressed as zero training
        # weight (so the training matrix is never copied).
        have_val = X_val is not None or y_val is not None
        if have_val and self.validation_fraction is not None:
            raise ValueError("Give either validation_fraction or X_val/y_val to fit, not both.")
        Xv = Yv = wv = None
        if have_val:
            if X_val is None or y_val is None:
                raise ValueError("X_val and y_val must be given together.")
            self._reject_unsupported(X_val, "X_val")
            Xv = check_X(self, X_val, device=device, reset=False, dtype=np.dtype(self.dtype),
                         allow_nan=False)
            yv = check_y(y_val, Xv.shape[0], device=device)
            Yv = self._encode_target(yv, xp, validation=True)
            swv = check_sample_weight(sample_weight_val, Xv.shape[0], device=device)
            wv = (xp.ones(Xv.shape[0], dtype=xp.float64) if swv is None
                  else xp.asarray(swv, dtype=xp.float64))
        elif self.validation_fraction is not None:
            val_idx = self._validation_rows(Y, n)
            Xv = Xa[xp.asarray(val_idx)]
            Yv = Y[xp.asarray(val_idx)]
            wv = w[xp.asarray(val_idx)]
            w = w.copy()
            w[xp.asarray(val_idx)] = 0.0
        W = float(w.sum())
        if not W > 0:
            raise ValueError("The training rows have zero total sample_weight; at least one "
                             "training row needs weight > 0.")
        Wv = float(wv.sum()) if wv is not None else None
        if wv is not None and not Wv > 0:
            raise ValueError("The validation rows have zero total sample weight.")

        mean, std, inv_std = _standardize_stats(Xa, w, W, xp, device)
        bias = self._fit_bias(Y, w, W, xp)              # (K,) float64
        K = Y.shape[1]
        F = xp.broadcast_to(bias[None, :], (n, K)).copy()
        Fv = xp.broadcast_to(bias[None, :], (Xv.shape[0], K)).copy() if Xv is not None else None

        active = inv_std > 0                             # constant features never selectable
        coef_std = np.zeros((K, d), dtype=np.float64)
        costs = [self._cost(F, Y, w, W, xp)]
        val_costs = [self._cost(Fv, Yv, wv, Wv, xp)] if Xv is not None else None
        weights_hist = [coef_std.copy()]
        selected = []
        best_val_round, no_improve = 0, 0
        warm = {}                                        # solver state carried across rounds
        stopped_early = False

        with tqdm(total=max_rounds, disable=not self.verbose, desc=type(self).__name__,
                  unit="feature") as bar:
            for _ in range(max_rounds):
                if not bool(active.any()):
                    break
                a, cand_cost = self._candidates(Xa, F, Y, w, W, mean, inv_std, active, xp,
                                                device, warm)
                total = cand_cost.sum(axis=0) if cand_cost.ndim == 2 else cand_cost
                total = xp.where(active, total, xp.inf)
                j = int(xp.argmin(total))
                new_cost = float(total[j])
                if self.tol is not None and costs[-1] - new_cost < self.tol:
                    break
                a_j = to_host(a[:, j] if a.ndim == 2 else a[j:j + 1]).astype(np.float64)
                z = _column(Xa, j, mean, inv_std)
                F += z[:, None] * xp.asarray(a_j)[None, :]
                active[j] = False
                selected.append(j)
                coef_std[:, j] = a_j
                weights_hist.append(coef_std.copy())
                # The evaluated cost of the new model (not the candidate's: equal up to rounding).
                costs.append(self._cost(F, Y, w, W, xp))
                bar.update(1)
                bar.set_postfix(cost=f"{costs[-1]:.6g}")
                if Xv is not None:
                    zv = _column(Xv, j, mean, inv_std)
                    Fv += zv[:, None] * xp.asarray(a_j)[None, :]
                    val_costs.append(self._cost(Fv, Yv, wv, Wv, xp))
                    if val_costs[-1] < val_costs[best_val_round]:
                        best_val_round, no_improve = len(selected), 0
                    else:
                        no_improve += 1
                        if no_improve >= self.n_iter_no_change:
                            stopped_early = True
                            break

        if stopped_early:
            keep = best_val_round
            for j in selected[keep:]:
                coef_std[:, j] = 0.0
            selected = selected[:keep]
            costs = costs[:keep + 1]
            val_costs = val_costs[:keep + 1]
            weights_hist = weights_hist[:keep + 1]
        elif (isinstance(self.n_features_to_select, numbers.Integral)
              and len(selected) < max_rounds and self.tol is None):
            warnings.warn(f"Only {len(selected)} of the requested {max_rounds} features could "
                          "be selected: the others are constant.", UserWarning, stacklevel=3)

        self.device_ = device
        self.mean_ = to_host(mean).astype(np.float64)
        self.std_ = to_host(std).astype(np.float64)
        inv = to_host(inv_std).astype(np.float64)
        self.selected_features_ = np.asarray(selected, dtype=np.intp)
        self.cost_history_ = np.asarray(costs, dtype=np.float64)
        self.validation_cost_history_ = (None if val_costs is None
                                         else np.asarray(val_costs, dtype=np.float64))
        bias_h = to_host(bias).astype(np.float64)
        coef = coef_std * inv[None, :]
        intercept = bias_h - coef @ self.mean_
        self._set_coefficients(coef_std, bias_h, coef, intercept, np.stack(weights_hist))
        return self

    def _validation_rows(self, Y, n):
        """Host indices of the held-out rows (stratified for classifiers when possible)."""
        from sklearn.model_selection import train_test_split

        idx = np.arange(n)
        strat = self._stratify_labels(Y)
        n_val = int(np.ceil(self.validation_fraction * n))
        if n_val < 1 or n - n_val < 1:
            raise ValueError(f"validation_fraction={self.validation_fraction} leaves no rows for "
                             f"training or validation with {n} samples.")
        try:
            _, val = train_test_split(idx, test_size=self.validation_fraction,
                                      random_state=self.random_state, stratify=strat)
        except ValueError:
            # Too few members in some class to stratify: a plain random split.
            _, val = train_test_split(idx, test_size=self.validation_fraction,
                                      random_state=self.random_state)
        return np.sort(val)

    def _stratify_labels(self, Y):
        return None

    # -- selector / prediction ----------------------------------------------------------------

    def _get_support_mask(self):
        check_is_fitted(self, "selected_features_")
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.selected_features_] = True
        return mask

    def transform(self, X):
        """Keep the selected columns of X (n_samples, n_features) -> (n_samples, n_selected).

        numpy / pandas input goes through scikit-learn's ``SelectorMixin.transform`` (dtype and
        ``set_output`` kept); cupy / cudf input gives a cupy array.
        """
        check_is_fitted(self, "selected_features_")
        if self._input_device(X) == "gpu":
            # Keep a float input dtype (as SelectorMixin.transform does on the CPU).
            dtype = X.dtype if is_cupy_array(X) and X.dtype.kind == "f" else np.float64
            Xa = check_X(self, X, device="gpu", reset=False, allow_nan=False, dtype=dtype)
            return Xa[:, get_namespace("gpu").asarray(self.get_support(indices=True))]
        self._reject_unsupported(X)
        return super().transform(X)

    def _raw_margin(self, X):
        """X (n, n_features) raw -> (margins (n, K) float64 on X's device, xp)."""
        check_is_fitted(self, "selected_features_")
        self._reject_unsupported(X)
        device = self._input_device(X)
        xp = get_namespace(device)
        Xa = check_X(self, X, device=device, reset=False, allow_nan=False)
        sel = self.selected_features_
        coef = self._coef_2d()                           # (K, d) host
        out = xp.broadcast_to(xp.asarray(self._intercept_1d())[None, :],
                              (Xa.shape[0], coef.shape[0])).copy()
        if sel.size:
            out += Xa[:, xp.asarray(sel)] @ xp.asarray(coef[:, sel].T)
        return out, xp

    # --- persistence: the model file format and its checks live in gpufs.model_io -------
    save_model = model_io.estimator_save_model
    load_model = classmethod(model_io.estimator_load_model)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags


class StagewiseRegressor(RegressorMixin, _StagewiseBase):
    """Forward stagewise (linear boosting) feature selection with the least-squares cost.

    Parameters
    ----------
    n_features_to_select : int >= 1, float in (0, 1] or None, default=None
        Rounds to run = features to select (a float is a fraction of the features). None: until
        every non-constant feature is used, unless ``tol`` or early stopping stops earlier.
    tol : float >= 0 or None, default=None
        Stop when a round lowers the training cost (weighted MSE) by less than ``tol``; that
        round's feature is not added.
    validation_fraction : float in (0, 1) or None, default=None
        Hold out this fraction of the rows (zero training weight, so X is not copied; only the
        held-out rows are) and stop when their cost has not improved for ``n_iter_no_change``
        rounds. Mutually exclusive with ``X_val``/``y_val``.
    n_iter_no_change : int >= 1, default=5
        Patience of the validation early stopping (used only with a validation set).
    device : {"auto", "cpu", "gpu"}, default="auto"
        Where ``fit`` computes ("auto": the GPU when cupy sees one). ``predict`` and
        ``transform`` compute where their input lives (cupy in, cupy out).
    dtype : {"float64", "float32"}, default="float64"
        Dtype X is held in during ``fit``.
    random_state : int, RandomState or None, default=None
        Seed of the ``validation_fraction`` split.
    verbose : int or bool, default=0
        Show a tqdm progress bar over the rounds.

    Attributes
    ----------
    selected_features_ : ndarray (n_selected,) of int
        Feature indices in the order they were selected.
    coef_ : ndarray (``n_features_in_``,) float64
        Weights in raw-input units (zero for unselected features).
    intercept_ : float
        Intercept in raw-input units: ``predict(X) = X @ coef_ + intercept_``.
    standardized_coef_ : ndarray (``n_features_in_``,) float64
        Weights on the standardized features (what the rounds fit).
    bias_ : float
        Round-0 bias (weighted mean of y).
    mean_, std_ : ndarray (``n_features_in_``,) float64
        Standardization; ``std_ == 0`` marks a constant (never selectable) feature.
    cost_history_ : ndarray (n_selected + 1,) float64
        Training cost (weighted mean squared error) after each round; entry 0 is the bias alone.
    validation_cost_history_ : ndarray (n_selected + 1,) or None
        The same on the validation set, when one was used.
    weights_history_ : ndarray (n_selected + 1, ``n_features_in_``) float64
        Standardized weights after each round (row 0: all zero). A weight never changes once
        set, so row m is row m-1 plus the weight of the m-th selected feature.
    device_ : str
        "cpu" or "gpu", where fit ran.
    n_features_in_, feature_names_in_ : as in scikit-learn.
    """

    def __init__(self, n_features_to_select=None, *, tol=None, validation_fraction=None,
                 n_iter_no_change=5, device="auto", dtype="float64", random_state=None,
                 verbose=0):
        self.n_features_to_select = n_features_to_select
        self.tol = tol
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y, sample_weight=None, X_val=None, y_val=None, sample_weight_val=None):
        """Run the stagewise rounds.

        X (n_samples, n_features) numpy/pandas/cupy/cudf; y (n_samples,) numeric;
        sample_weight (n_samples,) >= 0 or None; X_val, y_val, sample_weight_val: an optional
        validation set for early stopping. Returns self.
        """
        return self._fit(X, y, sample_weight, X_val, y_val, sample_weight_val)

    def predict(self, X):
        """X (n_samples, n_features) raw -> (n_samples,) float64 (cupy for cupy input)."""
        out, _ = self._raw_margin(X)
        return out[:, 0]

    # -- loss hooks -----------------------------------------------------------------------------

    def _encode_target(self, y, xp, validation=False):
        y = check_regression_target(y)
        return xp.asarray(y, dtype=xp.float64)[:, None]

    def _fit_bias(self, Y, w, W, xp):
        return (w @ Y) / W

    def _cost(self, F, Y, w, W, xp):
        r = Y[:, 0] - F[:, 0]
        return float((w * r) @ r) / W

    def _candidates(self, X, F, Y, w, W, mean, inv_std, active, xp, device, warm):
        return _ls_candidates(X, w, W, Y[:, 0] - F[:, 0], mean, inv_std, xp)

    def _set_coefficients(self, coef_std, bias, coef, intercept, weights_hist):
        self.standardized_coef_ = coef_std[0]
        self.bias_ = float(bias[0])
        self.coef_ = coef[0]
        self.intercept_ = float(intercept[0])
        self.weights_history_ = weights_hist[:, 0, :]

    def _coef_2d(self):
        return self.coef_[None, :]

    def _intercept_1d(self):
        return np.array([self.intercept_])


class StagewiseClassifier(ClassifierMixin, _StagewiseBase):
    """Forward stagewise (linear boosting) feature selection with the logistic cost.

    Two classes: one logistic model (two-class softmax cost) for ``classes_[1]``. More classes:
    one-vs-rest, one logistic path per class, with ONE SHARED selected set: each round every
    class fits its own weight on every candidate and the feature with the lowest summed
    one-vs-rest cost is added for all classes. Each one-weight problem is solved by Newton's
    method safeguarded by bisection (see the module docstring).

    Parameters
    ----------
    n_features_to_select, tol, validation_fraction, n_iter_no_change, device, dtype,
    random_state, verbose : as in :class:`StagewiseRegressor` (the cost is the summed
        one-vs-rest logistic cost; ``validation_fraction`` splits stratified by class).
    max_newton_iter : int >= 1, default=20
        Newton passes per round at most (one sweep over X each, plus one sweep for the costs).
    newton_tol : float > 0, default=1e-8
        Newton stops when every candidate's step is below ``newton_tol * (1 + |a|)``.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    selected_features_ : ndarray (n_selected,) of int, in order of selection.
    coef_ : ndarray (1, ``n_features_in_``) for two classes, (n_classes, ``n_features_in_``) otherwise,
        raw-input units. ``intercept_``: ndarray (1,) or (n_classes,).
    standardized_coef_ : same shape as ``coef_``, on standardized features; ``bias_``: round-0 bias.
    mean_, std_, cost_history_, validation_cost_history_, device_ : as in the regressor.
    weights_history_ : ndarray (n_selected + 1, n_models, ``n_features_in_``), n_models = 1 for two
        classes, n_classes otherwise.
    """

    def __init__(self, n_features_to_select=None, *, tol=None, validation_fraction=None,
                 n_iter_no_change=5, max_newton_iter=20, newton_tol=1e-8, device="auto",
                 dtype="float64", random_state=None, verbose=0):
        self.n_features_to_select = n_features_to_select
        self.tol = tol
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.max_newton_iter = max_newton_iter
        self.newton_tol = newton_tol
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _validate_extra_hyperparameters(self, name):
        m = self.max_newton_iter
        if not (isinstance(m, numbers.Integral) and not isinstance(m, bool) and m >= 1):
            raise ValueError(f"max_newton_iter must be an int >= 1; got {m!r}.")
        t = self.newton_tol
        if (not isinstance(t, numbers.Real) or isinstance(t, bool) or not np.isfinite(t)
                or t <= 0):
            raise ValueError(f"newton_tol must be a finite number > 0; got {t!r}.")

    def fit(self, X, y, sample_weight=None, X_val=None, y_val=None, sample_weight_val=None):
        """Run the stagewise rounds.

        X (n_samples, n_features); y (n_samples,) class labels (at least 2 classes);
        sample_weight (n_samples,) >= 0 or None; X_val, y_val, sample_weight_val: an optional
        validation set for early stopping (labels must be among y's). Returns self.
        """
        return self._fit(X, y, sample_weight, X_val, y_val, sample_weight_val)

    def decision_function(self, X):
        """Margins: (n_samples,) for two classes (positive favours ``classes_[1]``), else
        (n_samples, n_classes). float64, cupy for cupy input."""
        out, _ = self._raw_margin(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict_proba(self, X):
        """(n_samples, n_classes) float64. Two classes: the logistic probability. More: the
        one-vs-rest sigmoids normalized to sum 1 (as scikit-learn's one-vs-rest models)."""
        out, xp = self._raw_margin(X)
        p = 0.5 * (1.0 + xp.tanh(0.5 * out))            # sigmoid without overflow
        if out.shape[1] == 1:
            return xp.concatenate([1.0 - p, p], axis=1)
        s = p.sum(axis=1, keepdims=True)
        # All sigmoids may underflow to 0 far from the data: fall back to uniform there.
        return xp.where(s > 0, p / xp.where(s > 0, s, 1.0), 1.0 / out.shape[1])

    def predict(self, X):
        """Class labels (n_samples,) (a cupy array for cupy input when labels are numeric)."""
        out, xp = self._raw_margin(X)
        idx = (out[:, 0] > 0).astype(xp.int64) if out.shape[1] == 1 else xp.argmax(out, axis=1)
        if xp is not np and self.classes_.dtype.kind in "biuf":
            return xp.asarray(self.classes_)[idx]
        return self.classes_[to_host(idx)]

    # -- loss hooks -----------------------------------------------------------------------------

    def _encode_target(self, y, xp, validation=False):
        y_host = to_host(y)
        check_classification_targets(y_host)
        if validation:
            pos = np.searchsorted(self.classes_, y_host)
            pos = np.clip(pos, 0, len(self.classes_) - 1)
            bad = self.classes_[pos] != y_host
            if bad.any():
                raise ValueError(f"y_val has labels not seen in y: "
                                 f"{np.unique(y_host[bad])[:5].tolist()}.")
            enc = pos
        else:
            classes, enc = encode_classes(y_host)
            self.classes_ = classes
            enc = to_host(enc)
        K = len(self.classes_)
        if K == 2:
            Y = np.where(enc == 1, 1.0, -1.0)[:, None]
        else:
            Y = np.where(enc[:, None] == np.arange(K)[None, :], 1.0, -1.0)
        return xp.asarray(Y, dtype=xp.float64)

    def _stratify_labels(self, Y):
        Yh = to_host(Y)
        return (Yh[:, 0] > 0).astype(int) if Yh.shape[1] == 1 else Yh.argmax(axis=1)

    def _fit_bias(self, Y, w, W, xp):
        p = (w @ (Y > 0).astype(xp.float64)) / W
        p = xp.clip(p, _PROB_CLIP, 1.0 - _PROB_CLIP)
        return xp.log(p) - xp.log1p(-p)

    def _cost(self, F, Y, w, W, xp):
        return _logistic_cost(F, Y, w, W, xp)

    def _candidates(self, X, F, Y, w, W, mean, inv_std, active, xp, device, warm):
        # Warm start: one feature changed the margins since last round, so last round's
        # one-weight solutions are close to this round's for most candidates.
        a, cost = _logistic_candidates(X, F, Y, w, W, mean, inv_std, active,
                                       self.max_newton_iter, self.newton_tol, xp, device,
                                       a0=warm.get("a"))
        warm["a"] = a
        return a, cost

    def _set_coefficients(self, coef_std, bias, coef, intercept, weights_hist):
        self.standardized_coef_ = coef_std
        self.bias_ = bias
        self.coef_ = coef
        self.intercept_ = intercept
        self.weights_history_ = weights_hist

    def _coef_2d(self):
        return self.coef_

    def _intercept_1d(self):
        return self.intercept_
