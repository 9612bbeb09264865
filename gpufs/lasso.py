"""The selection problem of ControlBurn: a non-negative weighted lasso over tree weights.

Owns: Problem 2 of Liu, Xie & Udell (ControlBurn, paper 004) and everything around it that does
not touch trees: the per-tree costs ``u`` (feature costs and feature groups, section 3.3.1-3.3.2),
the solver, row sketching (3.3.3), ``lambda_max``, warm-started lambda paths and the bisection on
lambda that reaches exactly ``k`` selected features (4.2.1). The forest is grown elsewhere; this
module only sees its per-tree predictions ``A`` and which features each tree uses.

The problem
-----------
Given ``A`` (m, T) float, the predictions of the T trees on the m training rows, targets ``y``
(m,), non-negative row weights ``r`` (m,) (default 1) with ``W = sum(r)``, and tree costs
``u`` (T,) >= 0, solve::

    minimize_{w >= 0, b}   (1/W) * sum_j r_j * L((A w)_j + b, y_j)  +  lam * sum_i u_i w_i

* ``loss="squared"``:  ``L(z, y) = (y - z)^2`` (the paper's ``||y - Aw||^2 / m``, no 1/2).
* ``loss="logistic"``: ``L(z, y) = log(1 + exp(z)) - y z`` with ``y`` in {0, 1}; ``z`` is a logit.

The intercept ``b`` is free (unpenalized, uses no feature). It stands for the forest's base
prediction (bag-boosting starts from the mean, or the log-odds, of ``y``), which the paper keeps
outside the lasso; without it a logistic lasso would be forced to spend tree weight on the class
balance. With ``fit_intercept=False`` (``b = 0``) the problem is exactly the paper's Problem 2.
For the squared loss ``b`` is eliminated by (weighted) centering of ``A`` and ``y``, which is
exact; for the logistic loss it is an explicit variable of the solver.

A tree with ``w_i > 0`` is kept; a feature is *selected* when some kept tree uses it. "Kept"
means ``w_i > threshold`` with ``threshold = 0`` by default: the solver returns exact zeros (the
prox step and the support polish below both produce them), so no fuzzy cut is needed.

Solver and convergence rule
---------------------------
FISTA (accelerated proximal gradient) with the prox of ``lam*u^T w + indicator(w >= 0)``, i.e.
``w <- max(w - (grad + lam*u)/L, 0)``, a fixed step ``1/L`` from the Lipschitz constant of the
smooth part (exact ``eigvalsh`` of the Gram matrix, or power iteration with a residual bound),
gradient-based adaptive restart (O'Donoghue & Candes 2015) and warm starts. Every
``_CHECK_EVERY`` iterations it measures the KKT residual (the gradient mapping)::

    rho_i = min(g_i + lam*u_i, L*w_i)      (g = gradient of the smooth part, per tree)
    rho_b = dL/db                          (only with an explicit intercept)
    kkt   = max(|rho|) / ||g(w=0, b=b0)||_inf

and stops when ``kkt <= tol`` (default ``1e-9``). The scale is the gradient at ``w = 0``, the
quantity that sets ``lambda_max``, so ``tol`` means the same along a whole lambda path. When the
support (trees with ``w > 0``) is unchanged between two checks the solver tries a *polish*:
Newton's method on the support alone (one exact step plus refinement for the squared loss, a few
steps for the logistic loss); it is accepted only if all support weights stay positive and the
full KKT residual is ``<= tol``. Polishing makes the answers exact to rounding once the support
is right, which matters for bisection near a support change.

The trees of a forest are strongly correlated, so the Lipschitz constant of the whole forest is
far larger than the curvature on the few trees that end up with weight. FISTA therefore runs on a
*working set* (the support plus the worst KKT violators, at least 16 trees); after each
working-set solve the full gradient is checked and violators are added (the set at least
doubles), so the loop ends with the full problem's KKT conditions met in at most log2(T) rounds.
This is also the support screening: trees outside the working set cost nothing per iteration.

Squared loss runs on the T x T Gram matrix of the centered, weighted ``A`` (built once per
problem in row chunks, O(m T^2); then an iteration costs O(n^2) for a working set of n trees and
does not depend on m) whenever ``T <= m``; otherwise (more trees than rows) and for the logistic
loss an iteration costs two passes over the working set's columns of ``A`` (O(m n)). Everything runs in the array namespace of ``A`` (numpy or cupy, from
:func:`gpufs._device.namespace_of`), with no Python loop over trees or rows inside an iteration.
Host syncs happen only at the checks. Same input, same device -> bit-identical output (the
iteration has a fixed order of operations and no atomics; the sketches draw from a seeded host
RNG; BLAS must run with the same number of threads).

Sketching (squared loss)
------------------------
``sketch=`` reduces the m rows to ``s = sketch_size`` before solving (section 3.3.3). The sketch
is applied to the centered, sqrt(weight)-scaled rows, ``B = S D^(1/2) (A - a_bar)`` and
``v = S D^(1/2) (y - y_bar)``, with ``E[S^T S] = I`` so that ``||v - B w||^2 / W`` is an unbiased
estimate of the unsketched loss and ``lam`` keeps its meaning (the paper's ``1/s`` normalization
corresponds to a differently scaled ``S``). The intercept is ``y_bar - a_bar . w`` from the full
data. Kinds:

* ``"gaussian"``: dense ``S`` with N(0, 1/s) entries (the paper's example); costs O(s m T).
* ``"count"``: CountSketch with a balanced random hash (a random permutation of the rows dealt
  round-robin into s buckets) and random signs; costs O(m T) and sums in a fixed order.
* ``"rows"``: s rows drawn uniformly without replacement, scaled by sqrt(m/s); also allowed for
  the logistic loss (the subsample is then solved as is).

``LassoResult.objective`` is always the full-data objective at the returned ``(w, b)``;
``solved_objective`` is the objective of the problem actually minimized (they differ only when
sketching).
"""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._device import namespace_of, to_host
from .objectives import log_odds, sigmoid, softplus

__all__ = [
    "LassoResult",
    "Selection",
    "SelectionPath",
    "TreeLasso",
    "UnreachableKError",
    "lambda_max",
    "lasso_path",
    "select_k",
    "selected_features",
    "selection_path",
    "solve_lasso",
    "tree_costs",
]

LOSSES = ("squared", "logistic")
SKETCHES = ("gaussian", "count", "rows")

#: Default relative KKT tolerance (see the module docstring).
DEFAULT_TOL = 1e-9
DEFAULT_MAX_ITER = 20_000
#: Iterations between KKT checks (each check is one host sync and one extra gradient).
_CHECK_EVERY = 10
#: Elements per chunk when a pass over A materializes a temporary (keeps memory bounded).
_CHUNK_ELEMS = 1 << 23
#: Largest Gram matrix whose top eigenvalue is taken by a dense eigvalsh on the host.
_EIGVALSH_MAX_T = 3000
#: Up to this many columns a direct model forms its Gram matrix (m n^2 flops) for the Lipschitz
#: constant instead of running power iteration (tens to hundreds of passes of 2 m n flops).
_GRAM_LIP_MAX_T = 128
#: Working sets: at least this many trees are added per round; smaller forests are solved whole.
_WS_MIN_ADD = 16


class UnreachableKError(ValueError):
    """No lambda gives exactly k selected features (the count jumps over k).

    ``below`` / ``above``: the Selections found with the most features below k and the fewest
    above k (None when there is none: ``below`` is None when the zero-cost trees alone select
    more than k features; ``above`` is None when not even lambda = 0 passes k), so a caller can
    fall back without solving again.
    """

    def __init__(self, message, below=None, above=None):
        super().__init__(message)
        self.below = below
        self.above = above


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LassoResult:
    """One solve of Problem 2.

    weights: (T,) float64 in the namespace of ``A``, all >= 0 (exact zeros off the support).
    intercept: the free intercept ``b`` (0.0 with ``fit_intercept=False``).
    objective: full-data objective of Problem 2 at (weights, intercept).
    solved_objective: objective of the problem actually minimized (== objective unless sketched).
    lam: the lambda solved for.
    n_iter: FISTA iterations used.
    converged: whether the relative KKT residual reached ``tol``.
    kkt: relative KKT residual at return (see the module docstring).
    """

    weights: Any
    intercept: float
    objective: float
    solved_objective: float
    lam: float
    n_iter: int
    converged: bool
    kkt: float


@dataclass(frozen=True)
class Selection:
    """A set of selected features and the lasso solution that selects it.

    k: number of selected features (equals the requested k when ``exact``).
    lam: the lambda that gave them.
    features: (k,) int64, sorted indices of the selected features.
    weights: (T,) float64 tree weights (namespace of ``A``); intercept: float.
    objective: full-data objective at the solution.
    exact: False only for ``select_k(..., strict=False)`` when k was unreachable.
    n_solves: lasso solves spent (for select_k; 0 for entries of a SelectionPath).
    """

    k: int
    lam: float
    features: np.ndarray
    weights: Any
    intercept: float
    objective: float
    exact: bool = True
    n_solves: int = 0


@dataclass(frozen=True)
class SelectionPath:
    """Result of :func:`selection_path`.

    selections: k -> Selection for every k in 1..k_max that was reached.
    unreachable: k -> why it was not reached (the count jumps over k, or the path ends first).
    lambda_max: smallest lambda with no penalized tree kept.
    lambdas: (n,) every lambda solved, descending; n_selected: (n,) feature counts there.
    n_solves: lasso solves spent.
    """

    selections: dict
    unreachable: dict
    lambda_max: float
    lambdas: np.ndarray
    n_selected: np.ndarray
    n_solves: int

    @property
    def ks(self) -> list:
        """The reached k, ascending."""
        return sorted(self.selections)


# --------------------------------------------------------------------------------------------
# Input checks and costs
# --------------------------------------------------------------------------------------------


def _host_vector(x, n, what, *, allow_none=False):
    if x is None:
        if allow_none:
            return None
        raise ValueError(f"{what} is required")
    v = np.asarray(to_host(x))
    if v.dtype.kind not in "biuf":
        raise ValueError(f"{what} must be numeric, got dtype {v.dtype}")
    v = v.astype(np.float64, copy=False)
    if v.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {v.shape}")
    if n is not None and v.shape[0] != n:
        raise ValueError(f"{what} has length {v.shape[0]}, expected {n}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return v


def _nonneg(v, what):
    if v.size and v.min() < 0:
        i = int(np.argmin(v))
        raise ValueError(f"{what} must be >= 0; entry {i} is {float(v[i])!r}")
    return v


def _as_masks(tree_feature_masks):
    """(T, F) bool on the host; 0/1 numbers are accepted."""
    m = np.asarray(to_host(tree_feature_masks))
    if m.ndim != 2:
        raise ValueError("tree_feature_masks must be 2-D (n_trees, n_features), got shape "
                         f"{m.shape}")
    if m.dtype != np.bool_:
        if m.dtype.kind not in "biuf" or not np.all((m == 0) | (m == 1)):
            raise ValueError("tree_feature_masks must be boolean (or 0/1): entry [i, j] says "
                             "tree i splits on feature j")
        m = m.astype(bool)
    return m


def tree_costs(tree_feature_masks, feature_costs=None, groups=None, group_costs=None):
    """Cost ``u_i`` of each tree (paper 3.3.1 and 3.3.2).

    tree_feature_masks: (T, F) bool, ``[i, j]`` is True when tree i splits on feature j.
    feature_costs: (F,) float >= 0 or None (every feature costs 1).
    groups: (F,) int >= 0 group label of each feature, or None (every feature its own group).
    group_costs: (G,) float >= 0 indexed by group label (G > max label), or None.

    Without groups ``u_i = sum of feature_costs over the features tree i uses`` (the number of
    features when all costs are 1). With groups a tree pays once for every group it touches:
    ``u_i = sum of group_costs over the groups tree i uses``. When ``group_costs`` is None the
    cost of a group is the sum of its members' ``feature_costs`` (buying a group buys all its
    features), or 1 per group when ``feature_costs`` is None too (the paper's count of groups).
    Giving both ``feature_costs`` and ``group_costs`` is ambiguous and raises.

    Returns (T,) float64 on the host.
    """
    masks = _as_masks(tree_feature_masks)
    n_trees, n_features = masks.shape
    if groups is None:
        if group_costs is not None:
            raise ValueError("group_costs was given without groups")
        if feature_costs is None:
            costs = np.ones(n_features)
        else:
            costs = _nonneg(_host_vector(feature_costs, n_features, "feature_costs"),
                            "feature_costs")
        # Row sums in a fixed (numpy pairwise) order: deterministic and the same on every machine.
        return np.where(masks, costs[None, :], 0.0).sum(axis=1)

    g = np.asarray(to_host(groups))
    if g.ndim != 1 or g.shape[0] != n_features:
        raise ValueError(f"groups must have shape ({n_features},) (one label per feature), "
                         f"got {g.shape}")
    if g.dtype.kind not in "iub":
        if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
            g = g.astype(np.int64)
        else:
            raise ValueError(f"groups must hold integer labels, got dtype {g.dtype}")
    g = g.astype(np.int64)
    if g.size and g.min() < 0:
        raise ValueError(f"groups labels must be >= 0, got {int(g.min())}")
    n_groups = int(g.max()) + 1 if g.size else 0
    if group_costs is not None:
        if feature_costs is not None:
            raise ValueError("give either feature_costs or group_costs together with groups, not "
                             "both (a group's cost defaults to the sum of its feature costs)")
        gc = np.asarray(to_host(group_costs))
        gc = _nonneg(_host_vector(gc, None, "group_costs"), "group_costs")
        if gc.shape[0] < n_groups:
            raise ValueError(f"group_costs has length {gc.shape[0]} but groups uses labels up to "
                             f"{n_groups - 1}")
    elif feature_costs is not None:
        fc = _nonneg(_host_vector(feature_costs, n_features, "feature_costs"), "feature_costs")
        gc = np.bincount(g, weights=fc, minlength=n_groups)
    else:
        gc = np.ones(n_groups)
    # uses_group[i, k]: tree i splits on some feature of group k.
    uses_group = np.zeros((n_trees, max(n_groups, 1)), dtype=bool)
    rows, cols = np.nonzero(masks)
    uses_group[rows, g[cols]] = True
    return np.where(uses_group, gc[None, : uses_group.shape[1]], 0.0).sum(axis=1)


def selected_features(weights, tree_feature_masks, threshold=0.0):
    """Sorted indices (int64) of the features used by some tree with ``weight > threshold``."""
    w = np.asarray(to_host(weights), dtype=np.float64)
    masks = _as_masks(tree_feature_masks)
    if w.shape != (masks.shape[0],):
        raise ValueError(f"weights has shape {w.shape} but tree_feature_masks has "
                         f"{masks.shape[0]} rows (one per tree)")
    kept = w > threshold
    return np.flatnonzero(masks[kept].any(axis=0)).astype(np.int64)


def _check_sketch(sketch, sketch_size, loss, m, n_trees):
    if sketch is None:
        return None, None
    if sketch not in SKETCHES:
        raise ValueError(f"sketch must be None or one of {SKETCHES}, got {sketch!r}")
    if loss == "logistic" and sketch != "rows":
        raise ValueError(f"sketch={sketch!r} is only defined for the squared loss; use "
                         "sketch='rows' (row subsampling) with the logistic loss")
    if sketch_size is None:
        sketch_size = min(m, max(10 * (n_trees + 1), 1000))
    if (not isinstance(sketch_size, numbers.Integral) or isinstance(sketch_size, bool)
            or not 1 <= sketch_size <= m):
        raise ValueError(f"sketch_size must be an integer in [1, {m}] (the number of rows), "
                         f"got {sketch_size!r}")
    return sketch, int(sketch_size)


# --------------------------------------------------------------------------------------------
# The smooth part of the objective, in three shapes
# --------------------------------------------------------------------------------------------
# Each model exposes: has_b; n (number of tree columns); image(w, b) -> z, a linear image of the
# variables that the momentum step carries along, so the gradient at the extrapolated point needs
# no extra matvec; grad(z) -> (gw, gb); value(w, z); hess_sub(S, z), the Hessian on the support S
# (plus b); restrict(idx), the same model on a subset of the trees (a working set); lipschitz().
# Variables w (n,) and b (0-d) live in the namespace xp.


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
        K, _, _ = _gram(self.xp, self.B[:, S], None, self.r,
                        None if self.abar is None else self.abar[S])
        return (2.0 / self.W) * K

    def restrict(self, idx):
        return _DirectSquare(self.xp, self.xp.ascontiguousarray(self.B[:, idx]), self.v, self.r,
                             None if self.abar is None else self.abar[idx], self.W)

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

    def __init__(self, xp, A, y, r, W, has_b):
        self.xp, self.A, self.y, self.r, self.W, self.has_b = xp, A, y, r, W, has_b
        self.n = A.shape[1]

    def image(self, w, b):
        z = self.A @ w
        return z + b if self.has_b else z

    def grad(self, z):
        e = self.r * (sigmoid(z) - self.y) / self.W
        gb = e.sum() if self.has_b else None
        return self.A.T @ e, gb

    def value(self, w, z):
        return float((self.r * (softplus(z) - self.y * z)).sum() / self.W)

    def _with_ones(self, M):
        if not self.has_b:
            return M
        return self.xp.concatenate([M, self.xp.ones((M.shape[0], 1))], axis=1)

    def hess_sub(self, S, z):
        p = sigmoid(z)
        K, _, _ = _gram(self.xp, self._with_ones(self.A[:, S]), None, self.r * p * (1.0 - p), None)
        return K / self.W

    def restrict(self, idx):
        return _DirectLogistic(self.xp, self.xp.ascontiguousarray(self.A[:, idx]), self.y, self.r,
                               self.W, self.has_b)

    def lipschitz(self):
        xp = self.xp
        # The logistic curvature is at most 1/4.
        if self.n <= _GRAM_LIP_MAX_T:
            K, _, _ = _gram(xp, self._with_ones(self.A), None, self.r, None)
            return 0.25 / self.W * _top_eig_sym(xp, K)
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


def _top_eig_sym(xp, K):
    """Largest eigenvalue of the PSD matrix K (exact for moderate size)."""
    n = K.shape[0]
    if n == 0:
        return 0.0
    if n <= _EIGVALSH_MAX_T:
        return float(max(np.linalg.eigvalsh(to_host(K))[-1], 0.0))
    return _power_top_eig(xp, lambda v: K @ v, n)


def _power_top_eig(xp, op, n, max_iter=300, rtol=1e-7):
    """Upper estimate of the top eigenvalue of the PSD operator ``op`` by power iteration.

    The start vector is a fixed pseudo-random one (deterministic, and not orthogonal to the top
    eigenvector with probability 1). Returns ``(nu + ||op v - nu v||) * 1.01`` where nu is the last
    Rayleigh quotient: some eigenvalue lies within the residual of nu, and a step 1/L that is a
    little too long would make FISTA unstable while one a little too short only costs a little.
    """
    if n == 0:
        return 0.0
    v = xp.asarray(np.random.default_rng(12345).random(n) + 0.5)
    v = v / xp.sqrt(v @ v)
    nu = 0.0
    res = xp.zeros(n)
    for _ in range(max_iter):
        mv = op(v)
        nu_new = float(v @ mv)
        nrm = float(xp.sqrt(mv @ mv))
        if nrm == 0.0:
            return 0.0
        done = abs(nu_new - nu) <= rtol * abs(nu_new)
        nu = nu_new
        res = mv - nu * v
        v = mv / nrm
        if done:
            break
    return (nu + float(xp.sqrt(res @ res))) * 1.01


# --------------------------------------------------------------------------------------------
# Sketches and Gram matrices (row-chunked passes over A)
# --------------------------------------------------------------------------------------------


def _row_chunk(n_cols):
    return max(1, _CHUNK_ELEMS // max(n_cols, 1))


def _prepared_rows(xp, A, yc, sqrt_r, abar, lo, hi):
    """sqrt(r) * [A - abar, y - ybar] for rows lo:hi, shape (hi-lo, T+1)."""
    Ac = A[lo:hi] - abar[None, :]
    block = xp.concatenate([Ac, yc[lo:hi, None]], axis=1)
    return block * sqrt_r[lo:hi, None]


def _sketch_square(xp, A, yc, r, abar, kind, s, rng):
    """(B, v) = S D^(1/2) [A - abar, y - ybar] with E[S^T S] = I; B is (s, T), v is (s,)."""
    m, n_trees = A.shape
    sqrt_r = xp.sqrt(r)
    width = n_trees + 1
    if kind == "rows":
        idx = xp.asarray(np.sort(rng.choice(m, size=s, replace=False)))
        out = A[idx] - abar[None, :]
        out = xp.concatenate([out, yc[idx][:, None]], axis=1)
        out = out * (sqrt_r[idx] * math.sqrt(m / s))[:, None]
    elif kind == "gaussian":
        out = xp.zeros((s, width))
        step = max(1, _CHUNK_ELEMS // max(s, width))
        for lo in range(0, m, step):
            hi = min(m, lo + step)
            # Drawn on the host from one seeded stream: the same sketch on every device.
            S = xp.asarray(rng.standard_normal((s, hi - lo)) / math.sqrt(s))
            out += S @ _prepared_rows(xp, A, yc, sqrt_r, abar, lo, hi)
    else:  # "count"
        perm = rng.permutation(m)
        signs = rng.integers(0, 2, size=m).astype(np.float64) * 2.0 - 1.0
        out = xp.zeros((s, width))
        # Row perm[i] goes to bucket i % s. A chunk of whole rounds of s rows is gathered,
        # padded with zero rows, reshaped to (rounds, s, T+1) and summed over rounds: a fixed
        # summation order (no scatter-add atomics), hence bit-reproducible on the GPU too.
        rounds = max(1, _CHUNK_ELEMS // max(s * width, 1))
        step = rounds * s
        for lo in range(0, m, step):
            hi = min(m, lo + step)
            idx = xp.asarray(perm[lo:hi])
            sg = xp.asarray(signs[lo:hi])
            block = A[idx] - abar[None, :]
            block = xp.concatenate([block, yc[idx][:, None]], axis=1) * (sqrt_r[idx] * sg)[:, None]
            pad = (-(hi - lo)) % s
            if pad:
                block = xp.concatenate([block, xp.zeros((pad, width))], axis=0)
            out += block.reshape(-1, s, width).sum(axis=0)
    return xp.ascontiguousarray(out[:, :n_trees]), xp.ascontiguousarray(out[:, n_trees])


def _gram(xp, B, v, r, abar):
    """K = Bc^T D Bc, c = Bc^T D v, yy = v^T D v with Bc = B - abar, in row chunks.

    B (m, n); v (m,) or None (then c is None and yy 0); r (m,) row weights or None; abar (n,)
    column means to subtract, or None.
    """
    m, n_trees = B.shape
    K = xp.zeros((n_trees, n_trees))
    c = None if v is None else xp.zeros(n_trees)
    yy = 0.0
    step = _row_chunk(n_trees)
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        # C order matters: BLAS is several times slower on the mixed layouts that fancy
        # indexing (B[:, S]) produces.
        Bc = xp.ascontiguousarray(B[lo:hi])
        if abar is not None:
            Bc = Bc - abar[None, :]
        Bw = Bc if r is None else Bc * r[lo:hi, None]
        K += Bc.T @ Bw
        if v is not None:
            vc = v[lo:hi]
            c += Bw.T @ vc
            yy += float((vc if r is None else vc * r[lo:hi]) @ vc)
    # gemm does not promise an exactly symmetric product; eigvalsh and Newton prefer one.
    K = 0.5 * (K + K.T)
    return K, c, yy


# --------------------------------------------------------------------------------------------
# The problem object: validated data + prepared model, solved for many lambdas
# --------------------------------------------------------------------------------------------


class TreeLasso:
    """Problem 2 for one forest, prepared once and solved for any number of lambdas.

    A: (m, T) per-tree predictions on the training rows (numpy or cupy; converted to float64).
    y: (m,) targets (in {0, 1} for ``loss="logistic"``).
    costs: (T,) tree costs ``u`` >= 0 (see :func:`tree_costs`).
    loss: "squared" or "logistic".
    sample_weight: (m,) row weights >= 0 with a positive sum, or None.
    fit_intercept: include the free intercept b (see the module docstring).
    sketch, sketch_size, random_state: row sketching (module docstring). sketch_size defaults
        to min(m, max(10 (T + 1), 1000)); random_state is an int, a numpy Generator or None
        (None draws a fresh, non-reproducible sketch).

    Preparation (means, the Gram matrix or the sketch) is done here; :meth:`solve` then costs
    only iterations. Weights and arrays stay in the namespace of ``A``.
    """

    def __init__(self, A, y, costs, *, loss="squared", sample_weight=None, fit_intercept=True,
                 sketch=None, sketch_size=None, random_state=0):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        xp = namespace_of(A)
        self.xp = xp
        A = xp.asarray(A)
        if A.ndim != 2:
            raise ValueError(f"A must be 2-D (n_rows, n_trees), got shape {tuple(A.shape)}")
        if A.dtype.kind not in "biuf":
            raise ValueError(f"A must be numeric, got dtype {A.dtype}")
        m, n_trees = A.shape
        if m == 0 or n_trees == 0:
            raise ValueError("A must have at least one row and one tree, got shape "
                             f"{tuple(A.shape)}")
        A = xp.ascontiguousarray(A, dtype=xp.float64)
        if not bool(xp.all(xp.isfinite(A))):
            raise ValueError("A contains NaN or infinite values")
        y_h = _host_vector(y, None, "y")
        if y_h.shape[0] != m:
            raise ValueError(f"y has length {y_h.shape[0]} but A has {m} rows")
        u_h = _nonneg(_host_vector(costs, None, "costs"), "costs")
        if u_h.shape[0] != n_trees:
            raise ValueError(f"costs has length {u_h.shape[0]} but A has {n_trees} columns (one "
                             "per tree)")
        if sample_weight is None:
            r_h = np.ones(m)
        else:
            r_h = _nonneg(_host_vector(sample_weight, None, "sample_weight"), "sample_weight")
            if r_h.shape[0] != m:
                raise ValueError(f"sample_weight has length {r_h.shape[0]} but A has {m} rows")
        W = float(r_h.sum())
        if not W > 0:
            raise ValueError("sample_weight must have a positive sum")
        if loss == "logistic":
            if not np.all((y_h == 0) | (y_h == 1)):
                raise ValueError("loss='logistic' needs y in {0, 1}")
            pos = r_h > 0
            if fit_intercept and np.unique(y_h[pos]).size < 2:
                raise ValueError("loss='logistic' with an intercept needs both classes among the "
                                 "rows with positive weight (otherwise the intercept runs to "
                                 "infinity)")
        sketch, sketch_size = _check_sketch(sketch, sketch_size, loss, m, n_trees)

        self.loss = loss
        self.fit_intercept = bool(fit_intercept)
        self.A, self.m, self.n_trees, self.W = A, m, n_trees, W
        self.y = xp.asarray(y_h)
        self.r = xp.asarray(r_h)
        self.u = xp.asarray(u_h)
        self.u_host = u_h
        self.sketch, self.sketch_size = sketch, sketch_size
        rng = (random_state if isinstance(random_state, np.random.Generator)
               else np.random.default_rng(random_state))

        if loss == "squared":
            if self.fit_intercept:
                self.abar = (self.r @ A) / W
                self.ybar = float(self.r @ self.y) / W
            else:
                self.abar = xp.zeros(n_trees)
                self.ybar = 0.0
            yc = self.y - self.ybar
            if sketch is not None:
                B, v = _sketch_square(xp, A, yc, self.r, self.abar, sketch, sketch_size, rng)
                rows, r_model, abar_model = B.shape[0], None, None
            else:
                B, v = A, yc
                rows, r_model = m, self.r
                abar_model = self.abar if self.fit_intercept else None
            if n_trees <= rows:
                K, c, yy = _gram(xp, B, v, r_model, abar_model)
                self._model = _GramSquare(xp, K, c, yy, W)
            else:
                self._model = _DirectSquare(xp, B, v, r_model, abar_model, W)
            self._b0 = 0.0
        else:
            if sketch == "rows":
                idx = np.sort(rng.choice(m, size=sketch_size, replace=False))
                r_s = r_h[idx]
                if self.fit_intercept and (r_s.sum() <= 0 or np.unique(y_h[idx][r_s > 0]).size < 2):
                    raise ValueError("the row sketch holds a single class (or no weight); use a "
                                     "larger sketch_size")
                idx_x = xp.asarray(idx)
                As, ys, rs, Ws = A[idx_x], self.y[idx_x], self.r[idx_x], float(r_s.sum())
            else:
                As, ys, rs, Ws = A, self.y, self.r, W
                r_s, idx = r_h, slice(None)
            self._model = _DirectLogistic(xp, As, ys, rs, Ws, self.fit_intercept)
            if self.fit_intercept:
                self._b0 = log_odds(float((r_s * y_h[idx]).sum()) / float(r_s.sum()))
            else:
                self._b0 = 0.0

        # KKT scale: the gradient at w = 0 (b = b0), the quantity that sets lambda_max.
        z0 = self._model.image(xp.zeros(n_trees), xp.asarray(self._b0))
        g0, _ = self._model.grad(z0)
        scale = float(xp.max(xp.abs(g0)))
        self._scale = scale if scale > 0 else 1.0
        self._lip = None
        self._lambda_max = None

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
        """The intercept that goes with weights w (eliminated for the squared loss)."""
        if self.loss == "squared":
            return float(self.ybar - self.abar @ w) if self.fit_intercept else 0.0
        return float(b) if self.fit_intercept else 0.0

    def objective(self, w, b, lam) -> float:
        """Full-data objective of Problem 2 at weights w (T,), intercept b, penalty lam."""
        xp = self.xp
        w = xp.asarray(w, dtype=xp.float64)
        z = self.A @ w + b
        if self.loss == "squared":
            e = z - self.y
            loss = (self.r * e * e).sum() / self.W
        else:
            loss = (self.r * (softplus(z) - self.y * z)).sum() / self.W
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
        """Solve Problem 2 at ``lam`` >= 0; returns a :class:`LassoResult`.

        warm_start: a LassoResult (e.g. from a nearby lambda) to start from, or None (w = 0).
        tol: relative KKT tolerance; max_iter: cap on FISTA iterations, summed over working
        sets (a ConvergenceWarning is issued when it is hit).
        """
        lam = _check_lam(lam)
        if isinstance(tol, bool) or not (isinstance(tol, numbers.Real) and tol > 0):
            raise ValueError(f"tol must be a positive number, got {tol!r}")
        if isinstance(max_iter, bool) or not (isinstance(max_iter, numbers.Integral)
                                              and max_iter >= 1):
            raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
        w, b, n_iter, converged, kkt, fval = self._solve(lam, warm_start, float(tol), int(max_iter))
        if not converged:
            from sklearn.exceptions import ConvergenceWarning

            warnings.warn(f"lasso solve at lam={lam:.6g} stopped after {n_iter} iterations with "
                          f"relative KKT residual {kkt:.3g} > tol={tol:.3g}", ConvergenceWarning,
                          stacklevel=2)
        b_out = self.intercept_of(w, b)
        obj = self.objective(w, b_out, lam)
        solved = obj if self.sketch is None else float(fval + lam * (self.u @ w))
        return LassoResult(weights=w, intercept=b_out, objective=obj, solved_objective=solved,
                           lam=lam, n_iter=n_iter, converged=converged, kkt=kkt)

    def _start(self, warm_start):
        xp = self.xp
        if warm_start is None:
            return xp.zeros(self.n_trees), xp.asarray(self._b0)
        w = xp.asarray(warm_start.weights, dtype=xp.float64).copy()
        if w.shape != (self.n_trees,):
            raise ValueError(f"warm_start has {tuple(w.shape)} weights, expected "
                             f"({self.n_trees},)")
        if self.loss == "logistic" and self.fit_intercept:
            return w, xp.asarray(float(warm_start.intercept))
        return w, xp.asarray(0.0)

    def _solve(self, lam, warm_start, tol, max_iter, allowed=None):
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
            w_sub, b, it, conv, kkt_ws, fval = self._fista(sub, u_sub, lam, w_sub, b, tol,
                                                           max_iter - n_iter, lip)
            n_iter += it
            if whole:
                w = w_sub
            else:
                w = xp.zeros(n_trees)
                w[idx_x] = w_sub

    def lipschitz_if_known(self):
        """The full Lipschitz constant if computed already, else infinity (for a residual at a
        start point, min(g + lam u, L w) then only counts the gradient part on the support)."""
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
                if (prev_support is not None and np.array_equal(support, prev_support)
                        and (failed is None or not np.array_equal(support, failed[0])
                             or kkt < 0.1 * failed[1])):
                    pol = self._polish(model, u, lam, w, b, support, lip, tol)
                    if pol is not None:
                        w, b, z, kkt = pol
                        converged = True
                        break
                    failed = (support, kkt)
                prev_support = support
        return w, b, n_iter, converged, kkt, model.value(w, z)

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


def _check_lam(lam):
    if (isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not math.isfinite(lam)
            or lam < 0):
        raise ValueError(f"lambda must be a finite number >= 0, got {lam!r}")
    return float(lam)


# --------------------------------------------------------------------------------------------
# Functional front ends
# --------------------------------------------------------------------------------------------


def solve_lasso(A, y, costs, lam, *, loss="squared", sample_weight=None, fit_intercept=True,
                sketch=None, sketch_size=None, random_state=0, tol=DEFAULT_TOL,
                max_iter=DEFAULT_MAX_ITER, warm_start=None):
    """Solve Problem 2 once. Shapes: A (m, T), y (m,), costs (T,). Returns a LassoResult."""
    prob = TreeLasso(A, y, costs, loss=loss, sample_weight=sample_weight,
                     fit_intercept=fit_intercept, sketch=sketch, sketch_size=sketch_size,
                     random_state=random_state)
    return prob.solve(lam, warm_start=warm_start, tol=tol, max_iter=max_iter)


def lambda_max(A, y, costs, *, loss="squared", sample_weight=None, fit_intercept=True,
               sketch=None, sketch_size=None, random_state=0):
    """Smallest lambda giving w = 0 on every positive-cost tree (see TreeLasso.lambda_max)."""
    return TreeLasso(A, y, costs, loss=loss, sample_weight=sample_weight,
                     fit_intercept=fit_intercept, sketch=sketch, sketch_size=sketch_size,
                     random_state=random_state).lambda_max()


def lasso_path(A, y, costs, lams=None, *, n_lambdas=30, lambda_min_ratio=1e-3, loss="squared",
               sample_weight=None, fit_intercept=True, sketch=None, sketch_size=None,
               random_state=0, tol=DEFAULT_TOL, max_iter=DEFAULT_MAX_ITER):
    """Warm-started solutions over a grid of lambdas.

    lams: the lambdas (any order), or None for ``n_lambdas`` geometric values from
    ``lambda_max`` down to ``lambda_min_ratio * lambda_max``. They are solved from the largest
    down (each warm-started from the previous) and returned as a list of LassoResult in the
    order of ``lams``.
    """
    prob = TreeLasso(A, y, costs, loss=loss, sample_weight=sample_weight,
                     fit_intercept=fit_intercept, sketch=sketch, sketch_size=sketch_size,
                     random_state=random_state)
    if lams is None:
        lams = _geometric_grid(prob.lambda_max(), n_lambdas, lambda_min_ratio)
    lams = [_check_lam(x) for x in np.asarray(lams, dtype=np.float64).ravel()]
    order = sorted(range(len(lams)), key=lambda i: -lams[i])
    out = [None] * len(lams)
    prev = None
    for i in order:
        prev = prob.solve(lams[i], warm_start=prev, tol=tol, max_iter=max_iter)
        out[i] = prev
    return out


def _geometric_grid(lmax, n, ratio):
    if not (isinstance(n, numbers.Integral) and n >= 2):
        raise ValueError(f"n_lambdas must be an integer >= 2, got {n!r}")
    if not (0 < ratio < 1):
        raise ValueError(f"lambda_min_ratio must be in (0, 1), got {ratio!r}")
    return [lmax * ratio ** (i / (n - 1)) for i in range(n)]


# --------------------------------------------------------------------------------------------
# Reaching k features: warm-started descent and bisection on lambda (paper 4.2.1)
# --------------------------------------------------------------------------------------------


class _Search:
    """Solutions at the lambdas tried so far, each warm-started from the nearest one."""

    def __init__(self, prob, masks, threshold, tol, max_iter):
        self.prob, self.masks, self.threshold = prob, masks, threshold
        self.tol, self.max_iter = tol, max_iter
        self.points = {}  # lam -> (LassoResult, features)
        self.n_solves = 0
        self.not_converged = []

    def warn_if_needed(self):
        if self.not_converged:
            from sklearn.exceptions import ConvergenceWarning

            lams = ", ".join(f"{x:.6g}" for x in sorted(self.not_converged, reverse=True)[:5])
            warnings.warn(f"{len(self.not_converged)} of {self.n_solves} lasso solves did not "
                          f"reach tol={self.tol:.3g} (lambda = {lams}); feature counts there may "
                          "be off near a support change. Raise max_iter.", ConvergenceWarning,
                          stacklevel=3)

    def eval(self, lam, cold=False):
        if lam in self.points:
            return self.points[lam]
        warm = None
        if self.points and not cold:
            if lam > 0:
                # Nearest in log-lambda (ties: the larger, sparser one).
                near = min(self.points,
                           key=lambda x: (abs(math.log(x / lam)) if x > 0 else math.inf, -x))
            else:
                near = min(self.points)  # lambda = 0: start from the densest solution
            warm = self.points[near][0]
        with warnings.catch_warnings():
            # One summary warning is issued by the caller instead of one per solve.
            warnings.simplefilter("ignore")
            res = self.prob.solve(lam, warm_start=warm, tol=self.tol, max_iter=self.max_iter)
        if not res.converged:
            self.not_converged.append(lam)
        feats = selected_features(res.weights, self.masks, self.threshold)
        self.points[lam] = (res, feats)
        self.n_solves += 1
        return self.points[lam]

    def k(self, lam, cold=False):
        return int(self.eval(lam, cold)[1].size)

    def sorted_points(self):
        """[(lam, k)] descending in lam."""
        return [(lam, int(self.points[lam][1].size)) for lam in sorted(self.points, reverse=True)]

    def hit(self, target):
        """Largest lambda already solved that selects exactly ``target`` features, or None."""
        for lam, k in self.sorted_points():
            if k == target:
                return lam
        return None

    def bisect(self, target, rtol, max_steps):
        """Bisect (geometrically) the first bracket k(hi) < target < k(lo), lo < hi.

        Returns (lam or None, why). Brackets are taken between neighbouring solved lambdas, the
        largest lambdas first, so the sparsest way to reach ``target`` is found.
        """
        pts = self.sorted_points()
        bracket = None
        for (l_hi, k_hi), (l_lo, k_lo) in zip(pts, pts[1:]):
            if k_hi < target < k_lo:
                bracket = (l_hi, l_lo)
                break
        if bracket is None:
            k_seen = max(k for _, k in pts)
            return None, (f"no lambda down to {pts[-1][0]:.6g} selects {target} features; the most "
                          f"selected on the path is {k_seen}")
        hi, lo = bracket
        for _ in range(max_steps):
            if hi / lo - 1.0 <= rtol:
                break
            mid = math.sqrt(hi * lo)
            k_mid = self.k(mid)
            if k_mid == target:
                return mid, ""
            if k_mid < target:
                hi = mid
            else:
                lo = mid
        return None, (f"the number of selected features jumps from {self.k(hi)} (lambda={hi:.10g}) "
                      f"to {self.k(lo)} (lambda={lo:.10g}); no lambda in between gives {target} "
                      f"(bisection stopped at relative width {hi / lo - 1.0:.2g})")

    def selection(self, lam, exact=True):
        res, feats = self.points[lam]
        return Selection(k=int(feats.size), lam=lam, features=feats, weights=res.weights,
                         intercept=res.intercept, objective=res.objective, exact=exact,
                         n_solves=self.n_solves)


def _prepare_selection(A, y, tree_feature_masks, feature_costs, groups, group_costs, loss,
                       sample_weight, fit_intercept, sketch, sketch_size, random_state, threshold):
    masks = _as_masks(tree_feature_masks)
    shape = getattr(A, "shape", None)
    n_trees = shape[1] if shape is not None and len(shape) == 2 else None
    if n_trees is not None and masks.shape[0] != n_trees:
        raise ValueError(f"tree_feature_masks has {masks.shape[0]} rows but A has {n_trees} "
                         "columns (one per tree)")
    if not (isinstance(threshold, numbers.Real) and threshold >= 0):
        raise ValueError(f"threshold must be a number >= 0, got {threshold!r}")
    u = tree_costs(masks, feature_costs, groups, group_costs)
    prob = TreeLasso(A, y, u, loss=loss, sample_weight=sample_weight, fit_intercept=fit_intercept,
                     sketch=sketch, sketch_size=sketch_size, random_state=random_state)
    return masks, prob, int(masks.any(axis=0).sum())


def _check_k(k, n_used, n_features, what="k"):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"{what} must be an integer >= 1, got {k!r}")
    if k < 1:
        raise ValueError(f"{what} must be >= 1, got {k}")
    if k > n_used:
        raise ValueError(f"{what}={k} is larger than the number of features the forest uses: "
                         f"its trees split on {n_used} of the {n_features} features")


def select_k(A, y, tree_feature_masks, k, *, feature_costs=None, groups=None, group_costs=None,
             loss="squared", sample_weight=None, fit_intercept=True, threshold=0.0,
             lambda_min_ratio=1e-6, bisect_rtol=1e-7, max_bisect=60, strict=True,
             sketch=None, sketch_size=None, random_state=0, tol=DEFAULT_TOL,
             max_iter=DEFAULT_MAX_ITER):
    """Find a lambda whose solution selects exactly ``k`` features (paper 4.2.1).

    A: (m, T) per-tree predictions; y: (m,); tree_feature_masks: (T, F) bool; k: int >= 1.
    Costs come from :func:`tree_costs` (feature_costs, groups, group_costs). A feature counts as
    selected when a tree with ``weight > threshold`` uses it (with groups: every feature such a
    tree uses).

    Starting at lambda_max (no feature), lambda is halved, each solve warm-started from the last,
    until at least k features are selected (or lambda falls below lambda_min_ratio *
    lambda_max); a jump past k is then bisected geometrically between the last two lambdas until
    their ratio is within ``1 + bisect_rtol``. If no lambda gives exactly k, ``strict=True``
    raises :class:`UnreachableKError` saying between which counts it jumps (it carries the
    nearest selections below and above k); ``strict=False`` returns the solution with the most
    features below k (``exact=False``).

    Returns a :class:`Selection`.
    """
    masks, prob, n_used = _prepare_selection(A, y, tree_feature_masks, feature_costs, groups,
                                             group_costs, loss, sample_weight, fit_intercept,
                                             sketch, sketch_size, random_state, threshold)
    _check_k(k, n_used, masks.shape[1])
    if not (0 < lambda_min_ratio < 1):
        raise ValueError(f"lambda_min_ratio must be in (0, 1), got {lambda_min_ratio!r}")
    search = _Search(prob, masks, threshold, tol, max_iter)
    try:
        return _select_k(search, prob.lambda_max(), k, lambda_min_ratio, bisect_rtol, max_bisect,
                         strict)
    finally:
        search.warn_if_needed()


def _select_k(search, lmax, k, lambda_min_ratio, bisect_rtol, max_bisect, strict):
    # At lambda_max (0 when no tree is penalized) only the zero-cost trees keep weight.
    lam = max(lmax, 0.0)
    k_free = search.k(lam)
    if k_free == k:
        return search.selection(lam)
    if k_free > k and lmax > 0:
        # A tree at the boundary may keep a weight within the solver's tolerance exactly at
        # lambda_max: above it only the zero-cost trees are left (solved from w = 0, so no
        # such weight is carried over by the warm start).
        lam = 2.0 * lmax
        k_free = search.k(lam, cold=True)
        if k_free == k:
            return search.selection(lam)
    if k_free > k:
        # Free features (cost 0) are selected at every lambda: fewer than k_free is impossible.
        sparsest = search.selection(lam, exact=False)
        if strict:
            raise UnreachableKError(
                f"k={k} is unreachable: the zero-cost (free) trees alone select {k_free} "
                "features, at every lambda", below=None, above=sparsest)
        return sparsest
    if lmax <= 0:
        why = ("lambda_max is 0: no tree with a positive cost can improve the fit, so no more "
               f"than the {k_free} features of the zero-cost trees are ever selected")
        below = search.selection(0.0, exact=False)
        if strict:
            raise UnreachableKError(f"k={k} is unreachable: {why}", below=below)
        return below
    # The descent: halve lambda until at least k features are selected.
    while True:
        kk = search.k(lam)
        if kk == k:
            return search.selection(lam)
        if kk > k or lam < lmax * lambda_min_ratio:
            break
        lam *= 0.5
    found, why = search.bisect(k, bisect_rtol, max_bisect)
    if found is not None:
        return search.selection(found)
    # The most features below k (fewest above), among equal counts the largest lambda.
    pts = search.sorted_points()
    below = max((kk, lam) for lam, kk in pts if kk < k)[1]
    below = search.selection(below, exact=False)
    if not strict:
        return below
    if not any(kk > k for _, kk in pts) and 0.0 not in search.points:
        search.eval(0.0)  # the densest solution: the one place left where k may be passed
        pts = search.sorted_points()
    above = [(kk, -lam) for lam, kk in pts if kk > k]
    above = search.selection(-min(above)[1], exact=False) if above else None
    raise UnreachableKError(f"k={k} is unreachable: {why}", below=below, above=above)


def selection_path(A, y, tree_feature_masks, k_max, *, feature_costs=None, groups=None,
                   group_costs=None, loss="squared", sample_weight=None, fit_intercept=True,
                   threshold=0.0, n_lambdas=40, lambda_min_ratio=1e-4, bisect_rtol=1e-7,
                   max_bisect=60, sketch=None, sketch_size=None, random_state=0,
                   tol=DEFAULT_TOL, max_iter=DEFAULT_MAX_ITER):
    """The selected features for every k = 1..k_max, in one warm-started sweep.

    Solves on ``n_lambdas`` geometric lambdas from lambda_max down to lambda_min_ratio *
    lambda_max (stopping early once k_max features are selected), then, for every k the grid
    skipped, bisects the first (largest-lambda) bracket of neighbouring solutions whose counts
    straddle k. For each k the largest lambda found giving exactly k is kept. Ks that no lambda
    gives are listed in ``unreachable`` with the reason, never silently dropped.

    Arguments as for :func:`select_k`. Returns a :class:`SelectionPath`.
    """
    masks, prob, n_used = _prepare_selection(A, y, tree_feature_masks, feature_costs, groups,
                                             group_costs, loss, sample_weight, fit_intercept,
                                             sketch, sketch_size, random_state, threshold)
    _check_k(k_max, n_used, masks.shape[1], what="k_max")
    search = _Search(prob, masks, threshold, tol, max_iter)
    lmax = prob.lambda_max()
    selections, unreachable = {}, {}
    try:
        if lmax <= 0:
            for k in range(1, k_max + 1):
                unreachable[k] = ("lambda_max is 0: the trees cannot improve on the intercept, "
                                  "no feature is selected")
            search.eval(0.0)
        else:
            for lam in _geometric_grid(lmax, n_lambdas, lambda_min_ratio):
                if search.k(lam) >= k_max:
                    break
            for k in range(1, k_max + 1):
                if search.hit(k) is None:
                    lam, why = search.bisect(k, bisect_rtol, max_bisect)
                    if lam is None:
                        unreachable[k] = why
        # Bisections for a later k can find a larger lambda for an earlier one: take, for
        # every k, the largest lambda solved that gives it.
        for k in range(1, k_max + 1):
            lam = search.hit(k)
            if lam is not None:
                selections[k] = _without_count(search.selection(lam))
                unreachable.pop(k, None)
    finally:
        search.warn_if_needed()
    pts = search.sorted_points()
    return SelectionPath(selections=selections, unreachable=unreachable, lambda_max=lmax,
                         lambdas=np.array([p[0] for p in pts]),
                         n_selected=np.array([p[1] for p in pts], dtype=np.int64),
                         n_solves=search.n_solves)


def _without_count(sel):
    return Selection(k=sel.k, lam=sel.lam, features=sel.features, weights=sel.weights,
                     intercept=sel.intercept, objective=sel.objective, exact=sel.exact, n_solves=0)
