"""Reaching k features: the lambda descent and the geometric bisection of ControlBurn (Liu,
Xie, Udell, "ControlBurn: Feature Selection by Sparse Forests", KDD 2021, section 4.2.1), for
one k (:func:`select_k`) or every k up to k_max (:func:`selections_by_k`). Zero-cost trees are
free: their features are selected at every lambda and count toward k."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import math
import numbers
import warnings

import numpy as np

from .._device import to_host
from .._warnings import warn_from_caller
from . import _docs
from ._costs import _as_masks, selected_features, tree_costs, usage_discount
from ._options import Datafit, FeatureCosts, KSearch, Reweighting, SolverOptions, _keywords
from ._results import Selection, SelectionsByK, UnreachableKError
from ._solver import TreeLasso, _geometric_grid

__all__ = ["select_at_lambda", "select_k", "selections_by_k"]

#: select_k's descent stops below this fraction of lambda_max (its default).
SELECT_K_LAMBDA_MIN_RATIO = 1e-6
#: selections_by_k's grid ends at this fraction of lambda_max (its default).
GRID_LAMBDA_MIN_RATIO = 1e-4
#: Reweighting stops early once no cost factor moves by more than this between two steps.
DISCOUNT_RTOL = 1e-3
#: A reweighting step's lambda bisection stops at this relative width at finest.
STEP_BISECT_RTOL = 1e-4


def _n(count, noun="feature"):
    """``"1 feature"``, ``"3 features"``: a count with its noun in the right number."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


#: A callable ``(lam, n_selected)`` told of every lasso solve of a search (see :func:`reporting`).
_LISTENER = contextvars.ContextVar("gpufs_lasso_listener", default=None)
#: The solutions searches share within a :func:`_sharing` block (None: outside one).
_SHARED = contextvars.ContextVar("gpufs_lasso_shared", default=None)


@contextlib.contextmanager
def _sharing():
    """Within this block a search that repeats the steps of an earlier one takes that one's
    solutions instead of solving again: a solve depends only on the problem, its costs, the
    search's seed and the lambdas the search solved before (in order), which give its warm
    start, so a search that begins with the same lambdas as an earlier search, on the same
    problem and costs, gets the same solutions bit for bit. The searches for k = 1, 2, ...
    of :func:`selections_by_k` all descend from lambda_max by the same halvings and bisect
    the same brackets until their targets part, and the reweighting steps of the k that one
    jump of the path steps over start from the same selection below it. An inner block
    shares its outer block's solutions."""
    if _SHARED.get() is not None:
        yield
        return
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


@contextlib.contextmanager
def reporting(listener):
    """Within this block every lasso solve of the searches here calls ``listener(lam,
    n_selected)`` (a progress bar's update; None: no report)."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


class _Search:
    """Solutions at the lambdas tried so far, each warm-started from the nearest one."""

    def __init__(self, prob, masks, threshold, solver):
        self.prob, self.masks, self.threshold = prob, masks, threshold
        self.tol, self.max_iter = solver.tol, solver.max_iter
        self.points = {}  # lam -> (LassoResult, features)
        self.n_solves = 0
        self.not_converged = []
        self.seed = None  # a solution to start the first solve from (reweighting)
        self.lam_start = None  # where a search for k starts (reweighting; None: lambda_max)
        self.history = []  # (lam, cold) of every solve, in order (the key of a shared one)
        self._shared_key = None

    def _shared(self):
        """``(store, key of this search's next solve without its lambda)`` in a
        :func:`_sharing` block, else None. The key holds what a solve depends on: the problem
        (its prepared model, kept alive by the store), the costs, the seed, the solver's
        settings, the threshold and the lambdas solved so far."""
        store = _SHARED.get()
        if store is None:
            return None
        if self._shared_key is None:
            prob, seed = self.prob, self.seed
            seed_key = None
            if seed is not None:
                w = np.asarray(to_host(seed.weights), np.float64)
                seed_key = (w.tobytes(), float(seed.intercept))
            model = getattr(prob, "_model", prob)
            store.setdefault(("alive",), []).extend((model, self.masks))
            self._shared_key = (
                id(model),
                id(self.masks),
                np.asarray(prob.u_host, np.float64).tobytes(),
                seed_key,
                self.tol,
                self.max_iter,
                self.threshold,
            )
        return store, (*self._shared_key, tuple(self.history))

    def warn_if_needed(self):
        if self.not_converged:
            from sklearn.exceptions import ConvergenceWarning

            lams = ", ".join(f"{x:.6g}" for x in sorted(self.not_converged, reverse=True)[:5])
            warn_from_caller(
                f"{len(self.not_converged)} of {self.n_solves} lasso solves did not "
                f"reach tol={self.tol:.3g} (lambda = {lams}); feature counts there may "
                "be off near a support change. Raise max_iter.",
                ConvergenceWarning,
            )

    def eval(self, lam, cold=False):
        if lam in self.points:
            return self.points[lam]
        warm = None if cold else self.seed
        if self.points and not cold:
            if lam > 0:
                # Nearest in log-lambda (ties: the larger, sparser one).
                near = min(
                    self.points, key=lambda x: (abs(math.log(x / lam)) if x > 0 else math.inf, -x)
                )
            else:
                near = min(self.points)  # lambda = 0: start from the densest solution
            warm = self.points[near][0]
        shared = self._shared()
        # A solve may compute the problem's Lipschitz constant, which later solves then use:
        # whether it is known is part of the key, and a shared solution sets it as its solve did.
        lip = getattr(self.prob, "_lip", None)
        key = None if shared is None else (*shared[1], lam, bool(cold), lip)
        if shared is not None and key in shared[0]:
            res, feats, lip_after = shared[0][key]
            if lip_after is not None:
                self.prob._lip = lip_after
        else:
            with warnings.catch_warnings():
                # One summary warning is issued by the caller instead of one per solve.
                warnings.simplefilter("ignore")
                res = self.prob.solve(lam, warm_start=warm, tol=self.tol, max_iter=self.max_iter)
            feats = selected_features(res.weights, self.masks, self.threshold)
            if shared is not None:
                shared[0][key] = (res, feats, getattr(self.prob, "_lip", None))
        self.history.append((lam, bool(cold)))
        if not res.converged:
            self.not_converged.append(lam)
        self.points[lam] = (res, feats)
        self.n_solves += 1
        listener = _LISTENER.get()
        if listener is not None:
            listener(lam, int(feats.size))
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
            return None, (
                f"no lambda down to {pts[-1][0]:.6g} selects {_n(target)}; the most "
                f"selected on the path is {k_seen}"
            )
        hi, lo = bracket
        for _ in range(max_steps):
            if hi / lo - 1.0 <= rtol:
                break
            jump = self.one_tree_jump(hi, lo, target)
            if jump:
                return None, (
                    f"the number of selected features jumps from {self.k(hi)} "
                    f"(lambda={hi:.10g}) to {self.k(lo)} (lambda={lo:.10g}); no lambda "
                    f"in between gives {target}: the one tree that enters there "
                    f"brings {_n(jump, 'new feature')} at once"
                )
            mid = math.sqrt(hi * lo)
            k_mid = self.k(mid)
            if k_mid == target:
                return mid, ""
            if k_mid < target:
                hi = mid
            else:
                lo = mid
        return None, (
            f"the number of selected features jumps from {self.k(hi)} (lambda={hi:.10g}) "
            f"to {self.k(lo)} (lambda={lo:.10g}); no lambda in between gives {target} "
            f"(bisection stopped at relative width {hi / lo - 1.0:.2g})"
        )

    def one_tree_jump(self, hi, lo, target):
        """How many features the one tree that enters in the bracket ``k(hi) < target <
        k(lo)`` (lo < hi) brings, when that proves no lambda in between gives ``target``;
        else 0. Proven: every tree kept at ``hi`` is kept at ``lo`` and a single tree enters,
        with more than ``target - k(hi)`` features new to ``hi``'s selection (bisecting
        further would only narrow the bracket around that tree's entry, some 20 solves to
        the k search's relative width)."""
        (res_hi, f_hi), (res_lo, _) = self.points[hi], self.points[lo]
        kept_hi = np.asarray(to_host(res_hi.weights), np.float64) > self.threshold
        kept_lo = np.asarray(to_host(res_lo.weights), np.float64) > self.threshold
        entering = np.flatnonzero(kept_lo & ~kept_hi)
        if (kept_hi & ~kept_lo).any() or entering.size != 1:
            return 0
        old = np.zeros(self.masks.shape[1], dtype=bool)
        old[f_hi] = True
        n_new = int((self.masks[entering[0]] & ~old).sum())
        return n_new if n_new > target - f_hi.size else 0

    def selection(self, lam, exact=True):
        res, feats = self.points[lam]
        penalty = lam * float(self.prob.u_host @ np.asarray(to_host(res.weights), np.float64))
        return Selection(
            k=int(feats.size),
            lam=lam,
            features=feats,
            weights=res.weights,
            intercept=res.intercept,
            objective=res.objective,
            exact=exact,
            n_solves=self.n_solves,
            loss=float(res.objective - penalty),
        )


def _record(value, cls, name):
    """``value`` when it is a ``cls`` (one of the settings records), else a TypeError."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a gpufs.lasso.{cls.__name__}, got {type(value).__name__}")
    return value


def _prepare_selection(A, y, tree_feature_masks, costs, datafit, threshold):
    """The masks, the :class:`TreeLasso` and the number of features the forest uses."""
    costs = _record(costs, FeatureCosts, "costs")
    masks = _as_masks(tree_feature_masks)
    shape = getattr(A, "shape", None)
    n_trees = shape[1] if shape is not None and len(shape) == 2 else None
    if n_trees is not None and masks.shape[0] != n_trees:
        raise ValueError(
            f"tree_feature_masks has {masks.shape[0]} rows but A has {n_trees} "
            "columns (one per tree)"
        )
    if not (isinstance(threshold, numbers.Real) and threshold >= 0):
        raise ValueError(f"threshold must be a number >= 0, got {threshold!r}")
    store = _SHARED.get()
    if store is not None and (
        datafit.sketch is None or isinstance(datafit.random_state, numbers.Integral)
    ):
        # In a _sharing block the same inputs give the same problem (its sketch, if any, is
        # drawn from a fixed seed): each call gets a copy of one never-solved TreeLasso, as
        # a fresh one would be, whose model the shared solutions are keyed on.
        key = ("problem", id(A), id(y), id(tree_feature_masks), id(costs), id(datafit))
        if key not in store:
            u = tree_costs(masks, **_keywords(costs))
            store[key] = (masks, TreeLasso(A, y, u, datafit=datafit))
            store.setdefault(("alive",), []).extend((A, y, tree_feature_masks, costs, datafit))
        masks, pristine = store[key]
        return masks, copy.copy(pristine), int(masks.any(axis=0).sum())
    u = tree_costs(masks, **_keywords(costs))
    prob = TreeLasso(A, y, u, datafit=datafit)
    return masks, prob, int(masks.any(axis=0).sum())


class _ReweightSteps:
    """The reweighting steps of one lasso (see the package docstring): from a selection,
    discount the costs by its usage and search again, until the discount settles."""

    def __init__(self, prob, masks, costs, reweight, threshold, solver):
        reweight = _record(reweight, Reweighting, "reweight")
        self.solver = _record(solver, SolverOptions, "solver")
        self.prob, self.masks, self.groups = prob, masks, costs.groups
        self.steps, self.eps = int(reweight.steps), float(reweight.eps)
        self.threshold = threshold
        self._costs = lambda discount: tree_costs(masks, **_keywords(costs), discount=discount)

    def discount(self, basis):
        """The cost factors the usage of ``basis`` (a Selection) gives."""
        return usage_discount(basis.weights, self.masks, self.groups, self.eps)

    def search(self, discount, basis=None):
        """A fresh :class:`_Search` on the problem with costs discounted by ``discount``,
        warm-started from ``basis`` (the last step's Selection): its first solve starts from
        the basis's weights, and a search for k starts at the basis's lambda."""
        search = _Search(
            self.prob.with_costs(self._costs(discount)), self.masks, self.threshold, self.solver
        )
        if basis is not None:
            search.seed, search.lam_start = basis, float(basis.lam)
        return search

    def run(self, basis, step_search, on_search=None):
        """Up to ``steps`` steps from ``basis``: ``step_search(search)`` returns a Selection
        or raises UnreachableKError (whose ``below`` is the next basis). Returns
        ``(result, error, n_solves)``: the last step's Selection, or its error, and the
        solves all steps spent; ``on_search(search)`` sees every step's search. The steps
        stop early when the discount no longer moves (by at most ``DISCOUNT_RTOL``): a step
        that keeps the same features still moves the weight between them, so that is no
        reason to stop."""
        result, error, n_solves = basis, None, 0
        discount = self.discount(basis)
        for _ in range(self.steps):
            search = self.search(discount, basis)
            try:
                result, error = step_search(search), None
                basis = result
            except UnreachableKError as exc:
                result, error, basis = None, exc, exc.below
            finally:
                search.warn_if_needed()
                n_solves += search.n_solves
                if on_search is not None:
                    on_search(search)
            if basis is None:
                break
            previous, discount = discount, self.discount(basis)
            if float(np.max(np.abs(discount - previous), initial=0.0)) <= DISCOUNT_RTOL:
                break
        return result, error, n_solves


def _check_k(k, n_used, n_features, what="k"):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"{what} must be an integer >= 1, got {k!r}")
    if k < 1:
        raise ValueError(f"{what} must be >= 1, got {k}")
    if k > n_used:
        raise ValueError(
            f"{what}={k} is larger than the number of features the forest uses: "
            f"its trees split on {n_used} of the {_n(n_features)}"
        )


@_docs.fill
def select_k(
    A,
    y,
    tree_feature_masks,
    k,
    *,
    costs=FeatureCosts(),
    datafit=Datafit(),
    threshold=0.0,
    search=KSearch(),
    strict=True,
    reweight=Reweighting(),
    solver=SolverOptions(),
    record=None,
):
    """Find a lambda whose solution selects exactly ``k`` features (ControlBurn, section 4.2.1).

    Starting at lambda_max (only the zero-cost trees kept), lambda is halved, each solve
    warm-started from the last, until at least k features are selected (or lambda falls below
    ``search.lambda_min_ratio * lambda_max``, 1e-6 by default); a jump past k is then bisected
    geometrically between the last two lambdas until their ratio is within
    ``1 + search.bisect_rtol``. The features of zero-cost trees are selected at every lambda
    and count toward k.

    Parameters
    ----------
    $data
    $masks
    k : int >= 1
        The number of features to select.
    $costs
    $datafit
    $threshold
    search : KSearch, default=KSearch()
        The descent's floor and the bisection's width and steps (:class:`KSearch`).
    strict : bool, default=True
        If no lambda gives exactly k: True raises :class:`UnreachableKError` saying why (it
        carries the nearest selections below and above k); False returns the solution with
        the most features below k (the sparsest one when the free features alone exceed k),
        with ``exact=False``.
    $reweighting
    $solver_options
    record : dict or None, default=None
        If given, ``record["path"]`` is set (also when k is unreachable) to the
        :class:`SelectionsByK` of k' = 1..k that the lambdas this search solved give, at no
        extra solve: for each k' the largest solved lambda that selects exactly k' (with
        reweighting steps, in the latest search that hit k'); a k' no solved lambda gave is
        listed as unreachable with that reason (:func:`selections_by_k` searches every k'
        instead).

    Returns
    -------
    Selection
    """
    masks, prob, n_used = _prepare_selection(A, y, tree_feature_masks, costs, datafit, threshold)
    _check_k(k, n_used, masks.shape[1])
    search = _record(search, KSearch, "search")
    reweighting = _ReweightSteps(prob, masks, costs, reweight, threshold, solver)

    def keep_path(search):
        if record is not None:
            # Every k' the searches hit, the latest search's entry for each: a reweighting
            # step starts near the last lambda, so the smaller k' come from earlier searches
            # (each entry is on the costs of its own search).
            path = _points_path(search, k, search.prob.lambda_max())
            old = record.get("path")
            if old is not None:
                selections = {**old.selections, **path.selections}
                path = dataclasses.replace(
                    path,
                    selections=selections,
                    unreachable={
                        j: why for j, why in path.unreachable.items() if j not in selections
                    },
                    n_solves=old.n_solves + path.n_solves,
                )
            record["path"] = path

    return _select_k_reweighted(reweighting, k, search, strict, keep_path)


def _select_k_reweighted(reweighting, k, k_search, strict, on_search=None):
    """The search for k on the plain costs, then the reweighting steps from its selection (or,
    k unreachable, from the selection below k): what :func:`select_k` returns or raises.
    ``on_search(search)`` sees every search, the last one last."""
    lambda_min_ratio = k_search.ratio(SELECT_K_LAMBDA_MIN_RATIO)
    bisect_rtol, max_bisect = k_search.bisect_rtol, k_search.max_bisect

    def step(search):
        # A reweighting step bisects to STEP_BISECT_RTOL at finest: it only has to find its
        # lambda again near the last one (the plain search proved what is reachable finely).
        rtol = bisect_rtol if search.lam_start is None else max(bisect_rtol, STEP_BISECT_RTOL)
        return _select_k(
            search,
            search.prob.lambda_max(),
            k,
            lambda_min_ratio,
            rtol,
            max_bisect,
            strict,
            lam_start=search.lam_start,
        )

    search = _Search(reweighting.prob, reweighting.masks, reweighting.threshold, reweighting.solver)
    first, error = None, None
    try:
        first = step(search)
    except UnreachableKError as exc:
        error = exc
    finally:
        search.warn_if_needed()
        if on_search is not None:
            on_search(search)
    basis = first if first is not None else error.below
    if basis is None or reweighting.steps == 0:
        if first is None:
            raise error
        return first
    result, error, n_more = reweighting.run(basis, step, on_search)
    if result is None:
        raise error
    return dataclasses.replace(result, n_solves=search.n_solves + n_more)


@_docs.fill
def select_at_lambda(
    A,
    y,
    tree_feature_masks,
    lam,
    *,
    costs=FeatureCosts(),
    datafit=Datafit(),
    threshold=0.0,
    reweight=Reweighting(),
    solver=SolverOptions(),
):
    """The selection of the lasso at one ``lam`` (and its reweighting steps, each a solve
    at the same ``lam`` on the discounted costs).

    Parameters
    ----------
    $data
    $masks
    lam : float >= 0
        The lasso's lambda.
    $costs
    $datafit
    $threshold
    $reweighting
    $solver_options

    Returns
    -------
    Selection
        ``k`` is the number of features selected at ``lam``.
    """
    if not (isinstance(lam, numbers.Real) and lam >= 0 and math.isfinite(lam)):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    masks, prob, _ = _prepare_selection(A, y, tree_feature_masks, costs, datafit, threshold)
    reweighting = _ReweightSteps(prob, masks, costs, reweight, threshold, solver)
    search = _Search(prob, masks, threshold, reweighting.solver)
    search.eval(float(lam))
    search.warn_if_needed()
    first = search.selection(float(lam))
    if reweighting.steps == 0:
        return first

    def step(search):
        search.eval(float(lam))
        return search.selection(float(lam))

    result, _, n_more = reweighting.run(first, step)
    return dataclasses.replace(result, n_solves=search.n_solves + n_more)


def _points_path(search, k_max, lmax):
    """The SelectionsByK of k = 1..k_max from the lambdas ``search`` has solved."""
    selections, unreachable = {}, {}
    for k in range(1, k_max + 1):
        lam = search.hit(k)
        if lam is None:
            unreachable[k] = (
                "no lambda solved by the search for k features selects exactly "
                f"{k} (path_k_max searches every k)"
            )
        else:
            selections[k] = _without_count(search.selection(lam))
    pts = search.sorted_points()
    return SelectionsByK(
        selections=selections,
        unreachable=unreachable,
        lambda_max=lmax,
        lambdas=np.array([p[0] for p in pts]),
        n_selected=np.array([p[1] for p in pts], dtype=np.int64),
        n_solves=search.n_solves,
    )


def _select_k(search, lmax, k, lambda_min_ratio, bisect_rtol, max_bisect, strict, lam_start=None):
    """The search for k from lambda_max down (``select_k``'s docstring). With ``lam_start``
    (a reweighting step: the last step's lambda, where about k are selected again) the search
    starts there instead: up by doubling while at least k features are selected, then down
    from the first lambda with fewer, as from lambda_max: the largest lambda that gives k is
    still the one found (the sparsest way to k), a few solves from the last one."""
    if lam_start is not None and lmax > 0 and 0 < lam_start < lmax:
        lam, kk = lam_start, search.k(lam_start)
        while kk >= k and lam < lmax:
            lam = min(2.0 * lam, lmax)
            kk = search.k(lam)
        if kk < k:
            return _descend(search, lmax, k, lam, lambda_min_ratio, bisect_rtol, max_bisect, strict)
        # at least k at lambda_max: the route from lambda_max below says why
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
                "features, at every lambda",
                below=None,
                above=sparsest,
            )
        return sparsest
    if lmax <= 0:
        why = (
            "lambda_max is 0: no tree with a positive cost can improve the fit, so no more "
            f"than the {_n(k_free)} of the zero-cost trees are ever selected"
        )
        below = search.selection(0.0, exact=False)
        if strict:
            raise UnreachableKError(f"k={k} is unreachable: {why}", below=below)
        return below
    return _descend(search, lmax, k, lam, lambda_min_ratio, bisect_rtol, max_bisect, strict)


def _descend(search, lmax, k, lam, lambda_min_ratio, bisect_rtol, max_bisect, strict):
    """Halve lambda from ``lam`` (fewer than k selected there) until at least k features are
    selected, then bisect the bracket; the nearest selections when no lambda gives k."""
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
    if not strict:
        return _nearest(search, k, densest=False)[0]
    below, above = _nearest(search, k)
    raise UnreachableKError(f"k={k} is unreachable: {why}", below=below, above=above)


def _nearest(search, k, densest=True):
    """(below, above): the solved selections with the most features below k and the fewest
    above it, among equal counts the largest lambda (None where there is none). With
    ``densest``, lambda = 0 is solved first when nothing solved passes k: the one place left
    where k may be passed."""
    pts = search.sorted_points()
    if densest and not any(kk > k for _, kk in pts) and 0.0 not in search.points:
        search.eval(0.0)
        pts = search.sorted_points()
    below = [(kk, lam) for lam, kk in pts if kk < k]
    below = search.selection(max(below)[1], exact=False) if below else None
    above = [(kk, -lam) for lam, kk in pts if kk > k]
    above = search.selection(-min(above)[1], exact=False) if above else None
    return below, above


@_docs.fill
def selections_by_k(
    A,
    y,
    tree_feature_masks,
    k_max,
    *,
    costs=FeatureCosts(),
    datafit=Datafit(),
    threshold=0.0,
    n_lambdas=40,
    search=KSearch(),
    reweight=Reweighting(),
    solver=SolverOptions(),
):
    """The selected features for every k = 1..k_max, in one warm-started sweep.

    Solves on ``n_lambdas`` geometric lambdas from lambda_max down to
    ``search.lambda_min_ratio * lambda_max`` (1e-4 by default; stopping early once k_max
    features are selected), then, for every k the grid
    skipped, bisects the first (largest-lambda) bracket of neighbouring solutions whose counts
    straddle k. For each k the largest lambda found giving exactly k is kept. Ks that no lambda
    gives are listed in ``unreachable`` with the reason, never silently dropped.

    With reweighting steps every k is then searched exactly as :func:`select_k` (with its
    default ``lambda_min_ratio``) searches and reweights it: each entry is what
    ``select_k(..., k, reweight=...)`` selects, and its lambda belongs to its own
    discounted costs. ``lambdas`` and ``n_selected`` describe the plain sweep.

    Parameters
    ----------
    $data
    $masks
    k_max : int >= 1
        The largest k.
    $costs
    $datafit
    $threshold
    n_lambdas : int >= 2, default=40
        Lambdas of the geometric grid.
    search : KSearch, default=KSearch()
        The grid's smallest lambda relative to lambda_max, and the bisections' width and steps
        per k (:class:`KSearch`).
    $reweighting
    $solver_options

    Returns
    -------
    SelectionsByK
    """
    masks, prob, n_used = _prepare_selection(A, y, tree_feature_masks, costs, datafit, threshold)
    _check_k(k_max, n_used, masks.shape[1], what="k_max")
    k_search = _record(search, KSearch, "search")
    reweighting = _ReweightSteps(prob, masks, costs, reweight, threshold, solver)
    with _sharing():
        return _selections_by_k(reweighting, k_max, n_lambdas, k_search)


def _selections_by_k(reweighting, k_max, n_lambdas, k_search):
    """:func:`selections_by_k` once its arguments are checked (in a :func:`_sharing` block:
    the searches of different k share their common steps)."""
    prob, masks, threshold = reweighting.prob, reweighting.masks, reweighting.threshold
    search = _Search(prob, masks, threshold, reweighting.solver)
    lmax = prob.lambda_max()
    selections, unreachable = {}, {}
    try:
        if lmax <= 0:
            for k in range(1, k_max + 1):
                unreachable[k] = (
                    "lambda_max is 0: the trees cannot improve on the intercept, "
                    "no feature is selected"
                )
            search.eval(0.0)
        else:
            for lam in _geometric_grid(lmax, n_lambdas, k_search.ratio(GRID_LAMBDA_MIN_RATIO)):
                if search.k(lam) >= k_max:
                    break
            for k in range(1, k_max + 1):
                if search.hit(k) is None:
                    lam, why = search.bisect(k, k_search.bisect_rtol, k_search.max_bisect)
                    if lam is None:
                        unreachable[k] = why
        # Bisections for a later k can find a larger lambda for an earlier one: take, for
        # every k, the largest lambda solved that gives it.
        for k in range(1, k_max + 1):
            lam = search.hit(k)
            if lam is not None:
                selections[k] = _without_count(search.selection(lam))
                unreachable.pop(k, None)
        nearest = {
            k: tuple(
                None if s is None else _without_count(s) for s in _nearest(search, k, densest=False)
            )
            for k in unreachable
        }
    finally:
        search.warn_if_needed()
    pts = search.sorted_points()
    n_solves = search.n_solves
    if reweighting.steps and lmax > 0:
        # Every k exactly as select_k reweights it (the steps depend on where they start, so
        # the path starts each k where select_k does, not from the sweep's solutions).
        solves = []
        selections, unreachable, nearest = {}, {}, {}
        for k in range(1, k_max + 1):
            try:
                sel = _select_k_reweighted(
                    reweighting,
                    k,
                    dataclasses.replace(k_search, lambda_min_ratio=None),
                    True,
                    lambda s: solves.append(s.n_solves),
                )
                selections[k] = _without_count(sel)
            except UnreachableKError as exc:
                # Each k has costs of its own (reweighted from its own selections), so the
                # counts one k's search saw say nothing about another k: the reason says so.
                unreachable[k] = (
                    f"on the costs reweighted for k={k}, " + str(exc).split(": ", 1)[-1]
                )
                nearest[k] = tuple(
                    None if s is None else _without_count(s) for s in (exc.below, exc.above)
                )
        n_solves += sum(solves)
    return SelectionsByK(
        selections=selections,
        unreachable=unreachable,
        lambda_max=lmax,
        lambdas=np.array([p[0] for p in pts]),
        n_selected=np.array([p[1] for p in pts], dtype=np.int64),
        n_solves=n_solves,
        nearest=nearest,
    )


def _without_count(sel):
    return dataclasses.replace(sel, n_solves=0)
