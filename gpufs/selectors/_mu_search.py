"""Exactly k features from GBFS: the search over the feature price ``mu``.

Owns the rule that turns ``n_features_to_select = k`` into a GBFS fit. A budget of k alone is
filled greedily: with a small ``mu`` the first tree's first levels admit k features at once,
before any of them has shown that it keeps paying. Instead the search looks for the largest
``mu`` at which the boosted ensemble still brings in k features, so every selected feature has
earned its place against the highest price that still lets k of them in; the final fit runs at
that ``mu`` with the budget k, which then stops the selection at exactly k.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..cli._compile_watch import clock
from ..engine.boosting import BoostingParams, _progress
from ..engine.penalties import PenaltyState

__all__ = ["Probe", "MuSearch", "known_outcomes", "search_mu", "gbfs_mu_search"]

#: ``mu`` grows or shrinks by this factor until the bracket is found.
STEP = 4.0
#: Where the downward search gives up on positive prices and probes ``mu = 0``.
FLOOR = 1e-4
#: The start when the estimator's ``mu`` is 0 (no price to start from).
DEFAULT_START = 0.05
#: Probes grow at most this fraction of the rounds: k features must enter within it.
HORIZON = 0.5
#: At this fraction of its horizon a probe whose features, entered at the pace so far, would not
#: reach k by the horizon is given up as short (``gbfs_mu_search``): features enter fastest in
#: the first rounds, when the residuals are largest, so the pace so far is an optimistic
#: forecast. Over the quality bench's exact-k searches (``bench/bench_quality.py``, ten real
#: tables and eight planted families, 5 splits: 468 probes) the rule changed no probe's outcome
#: and saved 27 % (real tables) and 22 % (planted) of the probes' trees; checked at every round
#: after a quarter of the horizon it would have saved 47 % and changed 8 outcomes. A probe at
#: mu = 0 runs its horizon.
ABANDON_AT = 0.5


@dataclass
class Probe:
    """One fit of the search.

    mu : the price probed
    reached : True when the k-th feature entered
    n_features : features in the ensemble when the probe stopped (k when reached)
    n_trees : trees grown (the k-th feature entered in the last one when reached)
    seconds : wall time of the probe
    short_from : for a probe given up before its horizon (``ABANDON_AT``), the smallest k it
        is known to fall short of: every k its pace would not reach (a probe for such a k would
        be given up at the same round); None for a probe that ran to its end or reached k
    """

    mu: float
    reached: bool
    n_features: int
    n_trees: int
    seconds: float
    short_from: int | None = None


@dataclass
class MuSearch:
    """The outcome: ``mu`` (None when no probe reached k), the probes in order, and the most
    features any probe saw (what exists when fewer than k have a positive gain).

    ``checkpoint``: the state of the probe at ``mu`` at the start of the round in which its
    k-th feature entered (``boosting.BoostingCheckpoint``), or None; the final fit resumes
    from it instead of growing those rounds again. With ``mu`` None, the state of the probe
    at ``mu = 0`` at the start of its last round, where that probe ran (an unbudgeted fit at
    ``mu = 0`` grows the same trees until then).
    """

    mu: float | None
    probes: list
    n_features_max: int
    checkpoint: object = None

    def as_records(self) -> list:
        return [asdict(p) for p in self.probes]


def known_outcomes(records, k: int) -> list:
    """What earlier probes (``MuSearch.as_records()`` of a search for another k on the same
    data and parameters) say about k: a list of ``Probe`` whose ``reached`` is for k.

    A probe's fit does not depend on the k it was run for until it stops, so a probe that
    reached k_old (its k_old-th feature entered) has reached every k <= k_old, and one that
    fell short with f features has reached every k <= f and falls short of every k > f. A
    probe that reached k_old says nothing about a larger k; it is left out. A probe given up
    with f features falls short of every k >= ``short_from``; for f < k < ``short_from`` it
    says nothing.
    """
    out = []
    for r in records or ():
        f = int(r["n_features"])
        bound = r.get("short_from")  # absent from records older than the rule
        if f >= k:
            out.append(Probe(float(r["mu"]), True, f, int(r["n_trees"]), 0.0))
        elif not r["reached"] and (bound is None or k >= int(bound)):
            out.append(Probe(float(r["mu"]), False, f, int(r["n_trees"]), 0.0, bound))
    return out


def search_mu(
    probe,
    k: int,
    mu_start: float,
    *,
    upper: float | None = None,
    rtol: float = 0.5,
    max_probes: int = 8,
    known=(),
    step: float = STEP,
) -> MuSearch:
    """The largest ``mu`` at which ``probe`` reaches ``k`` features (``docs/module_notes.rst``).

    Parameters
    ----------
    probe : callable
        ``probe(mu) -> Probe``: a fit at price ``mu``.
    k : int >= 1
        The number of features wanted.
    mu_start : float >= 0
        The first price probed (``DEFAULT_START`` when 0).
    upper : float or None
        A price known to select nothing (1 for root-SSE scaling); never probed.
    rtol : float > 0
        Stop bisecting when short / reached <= 1 + rtol.
    max_probes : int >= 1
        Most probes; the search returns the best reached ``mu`` seen when they run out.
    known : sequence of Probe, default=()
        Outcomes for this k already known (:func:`known_outcomes`): they narrow the bracket
        before any probe runs and are not probed again (nor counted in ``probes``).
    step : float > 1, default=STEP
        The factor by which ``mu`` grows or shrinks until the bracket is found.

    Returns
    -------
    MuSearch
    """
    probes = []
    lo = None  # largest mu seen to reach k
    hi = upper  # smallest mu known to fall short (None: not known yet)
    for p in known:
        if p.reached and (lo is None or p.mu > lo):
            lo = p.mu
        elif not p.reached and (hi is None or p.mu < hi):
            hi = p.mu
    if lo is not None and hi is not None and lo < hi:
        mu_start = lo  # the bracket is known: straight to the bisection below
    elif lo is not None:  # only a lower end: go up from it (or from the start, if higher)
        mu_start = max(lo * step, mu_start)
    elif known and hi is not None:  # only an upper end: go down from below it
        mu_start = min(hi / step, mu_start) if mu_start > 0 else hi / step
    else:
        lo, hi = None, upper
    n_features_known = max((p.n_features for p in known), default=0)
    if lo is None and hi == 0.0:
        # mu = 0 was seen to fall short: fewer than k features have any positive gain
        return MuSearch(None, [], n_features_known)

    def run(mu):
        p = probe(mu)
        probes.append(p)
        return p

    mu = float(mu_start) if mu_start > 0 else DEFAULT_START
    if upper is not None and mu >= upper:
        mu = upper / step
    floor = mu * FLOOR
    bracketed = lo is not None and hi is not None and lo < hi
    # Find the bracket.
    while not bracketed and len(probes) < max_probes:
        p = run(mu)
        if p.reached:
            lo = mu
            if hi is not None:
                break
            mu *= step
        else:
            hi = mu
            if lo is not None:
                break
            if mu == 0.0:
                return MuSearch(
                    None, probes, max([q.n_features for q in probes] + [n_features_known])
                )
            # The last probe left goes to mu = 0, so a search that never reaches k ends
            # knowing whether k features exist at all.
            last = len(probes) == max_probes - 1
            mu = mu / step if mu / step >= floor and not last else 0.0
        if upper is not None and mu >= upper:
            break
    # Bisect on log(mu) inside it.
    while (
        lo is not None
        and hi is not None
        and lo > 0
        and hi / lo > 1.0 + rtol
        and len(probes) < max_probes
    ):
        mid = math.sqrt(lo * hi)
        if run(mid).reached:
            lo = mid
        else:
            hi = mid
    return MuSearch(lo, probes, max([q.n_features for q in probes] + [n_features_known]))


class _ReachedK(Exception):
    """Raised inside a probe's fit when the k-th feature enters: the probe has its answer."""


class _GaveUp(Exception):
    """Raised at a probe's round start when it is given up as short (``ABANDON_AT``)."""

    def __init__(self, n_trees, short_from):
        super().__init__(n_trees, short_from)
        self.n_trees, self.short_from = n_trees, short_from


def abandon_round(horizon: int) -> int:
    """The round at whose start a probe of ``horizon`` rounds is checked (``ABANDON_AT``)."""
    return max(1, int(math.ceil(ABANDON_AT * horizon)))


def gives_up(n_features: int, rounds: int, horizon: int, k: int) -> bool:
    """Whether a probe with ``n_features`` features after ``rounds`` of its ``horizon`` rounds
    is given up: at their pace so far, fewer than ``k`` would be in by the horizon."""
    return rounds == abandon_round(horizon) and n_features * horizon < k * rounds


def short_from(n_features: int, rounds: int, horizon: int) -> int:
    """The smallest k for which ``gives_up(n_features, rounds, horizon, k)`` (at the check
    round)."""
    return n_features * horizon // rounds + 1


class _ProbePenalty(PenaltyState):
    """An unbudgeted PenaltyState that ends the fit once ``k`` features are in Omega.

    The grower calls ``admit`` after each level; raising there abandons the probe's fit, whose
    trees the search never uses.
    """

    def __init__(self, mu, costs, groups, scaling, k):
        super().__init__(mu, costs, groups, scaling, None)
        self.k_stop = int(k)
        self.tree_index = -1

    def admit(self, features, tree_index: int) -> list[int]:
        new = super().admit(features, tree_index)
        if len(self.order) >= self.k_stop:
            self.tree_index = tree_index
            raise _ReachedK
        return new


def gbfs_mu_search(
    setup,
    k: int,
    mu_start: float,
    *,
    rtol: float = 0.5,
    max_probes: int = 8,
    known=(),
    step: float = STEP,
) -> MuSearch:
    """``search_mu`` for a GBFS fit on binned data (``setup``: a ``_boost_setup.BoostSetup``).

    Probes run without validation data and without early stopping: whether k features enter
    is a property of the training fit alone. The search costs the trees its probes grow (see
    ``Probe.n_trees``) on top of the final fit. The setup's ``candidate_search`` (GT-GBM's
    group tests) is used by every probe as by the final fit.

    Warm start: every probe keeps the checkpoint of its latest round start, and the search
    returns the one of the probe at the answer ``mu``: the round in which that probe's k-th
    feature entered. Until that round the probe held fewer than k features, so the budget of
    the final fit at the same ``mu`` never acted there and its trees are the probe's; the
    final fit resumes at that round (``fit_boosting(resume=...)``) and the search costs
    only the probes' trees in total.
    """
    params = setup.params
    horizon = max(1, int(math.ceil(HORIZON * params.n_estimators)))
    probes = setup._replace(
        params=BoostingParams(
            n_estimators=horizon,
            tree=params.tree,
            hessian=params.hessian,
            n_iter_no_change=None,
            verbose=False,
        )
    )
    scaling = setup.scaling
    kept = {}  # mu -> checkpoint, only for the largest mu that reached k so far
    # the mu = 0 probe's last round start when it fell short: the pool fit runs at mu = 0 then
    # (fit_exact_k), unbudgeted, and grows the same trees until there
    short_at_zero = []
    n_probes = []

    def probe(mu):
        pen = _ProbePenalty(mu, setup.costs, setup.groups, scaling, k)
        latest = []
        n_probes.append(mu)
        # one bar per probe, as the boosting bar (``verbose``): its rounds, then its outcome
        bar = _progress(
            horizon, params.verbose, f"gpufs mu search, probe {len(n_probes)} (mu={mu:.4g}, k={k})"
        )

        def on_round_start(make_checkpoint):
            latest[:] = [make_checkpoint()]
            rounds, n = latest[0].rounds, len(pen.order)
            # Not at mu = 0: there the pool fit runs whatever the outcome, and resumes from
            # the probe (at 300,000 x 100 its last features entered late)
            if mu > 0 and gives_up(n, rounds, horizon, k):
                raise _GaveUp(len(latest[0].trees), short_from(n, rounds, horizon))
            if bar is not None and rounds:
                bar.update(1)

        t0 = clock()
        result = None
        try:
            try:
                ensemble = probes.fit(pen, on_round_start=on_round_start).ensemble
                result = Probe(
                    float(mu), False, len(pen.order), int(ensemble.n_trees), clock() - t0
                )
                if mu == 0.0 and latest:
                    short_at_zero[:] = latest
            except _GaveUp as gave_up:
                result = Probe(
                    float(mu),
                    False,
                    len(pen.order),
                    gave_up.n_trees,
                    clock() - t0,
                    gave_up.short_from,
                )
            except _ReachedK:
                if latest and all(mu > m for m in kept):
                    kept.clear()
                    kept[float(mu)] = latest[0]
                result = Probe(float(mu), True, len(pen.order), pen.tree_index + 1, clock() - t0)
        finally:
            if bar is not None:
                if result is not None:
                    bar.set_postfix(
                        features=result.n_features, reached="yes" if result.reached else "no"
                    )
                bar.close()
        return result

    upper = 1.0 if scaling == "root_sse" else None
    search = search_mu(
        probe,
        int(k),
        float(mu_start),
        upper=upper,
        rtol=rtol,
        max_probes=max_probes,
        known=known,
        step=step,
    )
    if search.mu is not None:
        search.checkpoint = kept.get(search.mu)
    else:
        search.checkpoint = short_at_zero[0] if short_at_zero else None
    return search
