"""The selection problem of ControlBurn: a non-negative weighted lasso over tree weights.

Owns: the tree-weight lasso of Liu, Xie, Udell, "ControlBurn: Feature Selection by Sparse
Forests", KDD 2021 (section 3.1), and everything around it that does not touch trees: the
per-tree costs ``u`` (feature costs and feature groups, sections 3.3.1-3.3.2), the solver, row
sketching (3.3.3), ``lambda_max``, warm-started lambda paths and the bisection on lambda that
reaches exactly ``k`` selected features (4.2.1). The forest is grown elsewhere; this module
only sees its per-tree predictions ``A``, which features each tree uses and which output it
predicts.

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
balance. With ``fit_intercept=False`` (``b = 0``) the problem is exactly the paper's.
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
loss an iteration costs two passes over the working set's columns of ``A`` (O(m n)).
Everything runs in the array namespace of ``A`` (numpy or cupy), with no Python loop over
trees or rows inside an iteration.
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

Reweighting (the "pay once per feature" correction)
----------------------------------------------------
Problem (2) charges a tree ``u_i w_i`` however much weight other kept trees already put on its
features. Near-copies of one feature give near-equal columns of ``A`` at equal cost, so the
lasso is almost indifferent between a second copy of a kept feature and a feature that adds
new information, and in practice spreads weight over two copies of one group while another
group is left out (measured on planted groups: one feature per group in 25 of 40 seeded
cases). ``reweight_steps`` applies reweighted l1 minimization (Candes, Wakin, Boyd,
"Enhancing Sparsity by Reweighted l1 Minimization", J. Fourier Anal. Appl., 2008): after a
solution, every feature's (or group's) cost is multiplied by ``eps / (eps + v_j)``, where
``v_j`` is the total weight of the kept trees that use it and ``eps`` is ``reweight_eps``
times the largest ``v_j`` (:func:`usage_discount`), and the search is repeated on the
discounted costs (computed from the undiscounted ones each time). Each step's search is
warm-started from the last step's solution: it starts at the last lambda, from the last
weights, which usually gives k again at once (a few solves per step instead of a search from
``lambda_max``). Unused features keep their full cost,
so ``lambda_max`` is unchanged; features already paid for become cheap, so the weight of
near-copies collapses onto one of them and the next feature to enter must bring something
new. It is the majorize-minimize step of the concave penalty ``sum_j c_j eps log(1 + v_j /
eps)``, the tree-weight counterpart of GBFS's price paid once, at first use. The steps stop
early once no factor moves by more than 1e-3. ``reweight_steps=0`` is the paper's problem.

Modules
-------
``_results`` (the result types), ``_costs`` (tree costs from feature costs and groups; which
features a solution selects), ``_linalg`` (Gram matrices, eigenvalues, sketches),
``_models`` (the smooth part of the objective behind the :class:`SmoothModel` protocol),
``_solver`` (:class:`TreeLasso`: FISTA on working sets with a Newton polish; the one-call
front ends), ``_search`` (the lambda descent and bisection to exactly k features) and
``_problem`` (the lasso a forest poses for a regression, binary or multiclass target).
"""
from ._costs import REWEIGHT_EPS, selected_features, tree_costs, usage_discount
from ._linalg import SKETCHES
from ._models import SmoothModel
from ._problem import LassoProblem, forest_lasso_problem
from ._results import LassoResult, Selection, SelectionPath, UnreachableKError
from ._search import select_at_lambda, select_k, selection_path
from ._solver import (DEFAULT_MAX_ITER, DEFAULT_TOL, LOSSES, TreeLasso, lambda_max, lasso_path,
                      solve_lasso)

__all__ = [
    "DEFAULT_MAX_ITER",
    "DEFAULT_TOL",
    "LOSSES",
    "LassoProblem",
    "LassoResult",
    "REWEIGHT_EPS",
    "SKETCHES",
    "Selection",
    "SelectionPath",
    "SmoothModel",
    "TreeLasso",
    "UnreachableKError",
    "lambda_max",
    "forest_lasso_problem",
    "lasso_path",
    "select_at_lambda",
    "select_k",
    "selected_features",
    "selection_path",
    "solve_lasso",
    "tree_costs",
    "usage_discount",
]
