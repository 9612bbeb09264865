"""Exactly k features by what they contribute: GBFS's ``n_features_to_select = k``.

1. Price: the search over ``mu`` (``_mu_search``) brackets the largest price at which a pool
   of 2 k features enters within half the rounds (steps of 8, at most four probes, no
   bisection) and takes the bracket's lower end (0 if no probe admits them).
2. Over-admit: the pool fit runs at that price over all rounds without a budget (resuming
   from the winning probe): every feature that pays the price at some round enters.
3. Choose: the k pool features of largest total split gain per unit of cost there (with
   ``stability_rounds``, of largest selection frequency: ``_stability``).
4. Refit: the final fit runs at the same price and may split on the k chosen only (budget k);
   it resumes from the pool fit where the first left-out feature entered. If a chosen feature
   does not enter at that price, it runs again at ``mu = 0``.
Why: the budget alone keeps the first k to enter, and a noise column that wins one split in a
small deep node before a weak signal's turn keeps its slot (``docs/guide/gbfs.rst``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._compile_watch import clock
from ..boosting import BoostingCheckpoint
from ..penalties import PenaltyState
from ._mu_search import MuSearch, gbfs_mu_search

__all__ = ["ExactK", "RestrictedPenalty", "fit_exact_k", "per_cost", "pool_size", "total_gains"]


def total_gains(ensemble) -> np.ndarray:
    """Total split gain of every feature in an ensemble.

    Parameters
    ----------
    ensemble : TreeEnsemble

    Returns
    -------
    ndarray of shape (n_features,), float64
    """
    gains = np.zeros(ensemble.n_features)
    if ensemble.n_trees:
        s = ensemble.stacked()
        split = s["feature"] >= 0
        np.add.at(gains, s["feature"][split], s["gain"][split])
    return gains


#: Probes of the pool's price at most (the last one probes mu = 0 when none reached the pool).
MAX_PROBES = 4
#: The pool's price moves by this factor: three probes from the default mu = 0.05 reach
#: 0.05 / 64, below the price that admits 2 k features on most tables of the quality bench.
POOL_STEP = 8.0


def per_cost(gains, costs) -> np.ndarray:
    """Gain per unit of cost, what the pool is ranked by: the gain itself for unit costs; a
    feature of cost 0 ranks first (it is free, as the penalty treats it).

    Parameters
    ----------
    gains, costs : ndarray of shape (n_features,), float64

    Returns
    -------
    ndarray of shape (n_features,), float64
    """
    costs = np.asarray(costs, dtype=np.float64)
    return np.where(costs > 0, gains / np.where(costs > 0, costs, 1.0), np.inf)


def pool_size(k: int, n_features: int) -> int:
    """How many features the price is searched for: ``min(n_features, 2 k)``.

    Parameters
    ----------
    k : int >= 1
    n_features : int

    Returns
    -------
    int
    """
    return min(int(n_features), 2 * int(k))


class RestrictedPenalty(PenaltyState):
    """A PenaltyState whose splits may use only the features of ``allowed``.

    Parameters
    ----------
    mu, costs, groups, scaling, n_features_to_select
        As for :class:`gpufs.penalties.PenaltyState`.
    allowed : array-like of int
        The features a split may use at all.
    """

    def __init__(self, mu, costs, groups, scaling, n_features_to_select, allowed):
        super().__init__(mu, costs, groups, scaling, n_features_to_select)
        self.only = np.zeros(self.used.shape[0], dtype=bool)
        self.only[np.asarray(allowed, dtype=np.int64)] = True

    def allowed_mask(self) -> np.ndarray:
        """The parent's mask, within ``allowed``.

        Returns
        -------
        ndarray of shape (n_features,), bool
        """
        return super().allowed_mask() & self.only

    def candidate_features(self, n_features: int) -> np.ndarray:
        """The parent's candidates, within ``allowed``.

        Parameters
        ----------
        n_features : int

        Returns
        -------
        ndarray of shape (n_candidates,), int32
        """
        feats = super().candidate_features(n_features)
        return feats[self.only[feats]]


@dataclass
class ExactK:
    """The outcome of :func:`fit_exact_k`.

    ensemble, record, n_rounds : ``fit_boosting``'s return of the final fit
    penalties : RestrictedPenalty or PenaltyState of the final fit (its ``order``: the
        selection in order of first use)
    mu : the price of the final fit (the search's, or 0 after the fallback)
    search : MuSearch of the pool
    pool : dict, ``selection_pool_`` of the estimator: "features" (the pool, in the order
        they entered), "gain" (their total gain in the pool fit), "frequency" (theirs, or
        None), "chosen" (the k, best first), "resumed_round" (where the final fit started
        from the pool fit's trees), "refit_mu" (the final fit's price) and "trees_grown"
        (per phase: "probes", "pool", "stability", "final")
    """

    ensemble: object
    record: object
    n_rounds: int
    penalties: object
    mu: float
    search: object
    pool: dict


def _checkpoint_at(rows, ensemble, record, penalties, rounds):
    """The pool fit's state at the start of round ``rounds``, rebuilt from its trees: Omega as
    it was then, and the raw scores as the first ``rounds`` rounds' trees predict them (the
    same additions in the same order as when they were grown)."""
    K = ensemble.n_outputs
    n_trees = rounds * K
    first = np.where((penalties.first_use_tree >= 0) & (penalties.first_use_tree < n_trees),
                     penalties.first_use_tree, -1)
    used = first >= 0
    group_used = np.zeros_like(penalties.group_used)
    group_used[penalties.groups[used]] = True
    snap = {"used": used, "group_used": group_used, "first_use_tree": first,
            "order": [f for f in penalties.order if used[f]],
            "candidates_by_tree": list(penalties.candidates_by_tree[:n_trees])}
    rows.start_raw(np.asarray(ensemble.base_score, dtype=np.float64))
    if n_trees:
        rows.add_trees(ensemble, 0, n_trees)
    return BoostingCheckpoint(rounds=rounds, trees=ensemble.trees,
                              tree_column=ensemble.tree_column, raw=rows.snapshot_raw(),
                              record=record, penalty=snap)


def fit_exact_k(setup, k: int, mu_start: float, *, eval_rows=None, known=(), frequency=None,
                times=None) -> ExactK:
    """A GBFS fit that selects exactly k features by contribution (module docstring).

    Parameters
    ----------
    setup : BoostSetup
        The fit's settings (``_boost_setup``): rows, objective, cut points, penalty, GT-GBM's
        candidate search; its ``params`` must not stop early.
    k : int >= 1
    mu_start : float >= 0
        The search's first price.
    eval_rows : BoostingRows or None, default=None
        Validation rows of the final fit.
    known : sequence of Probe, default=()
        Outcomes for k known from earlier fits (``known_outcomes``).
    frequency : callable or None, default=None
        ``frequency(mu, k) -> (ndarray of shape (n_features,), trees grown)``: selection
        frequencies (``_stability``) that rank the pool instead of the gains (gains break
        ties).
    times : dict or None, default=None
        Filled with the wall seconds of the phases: "mu_search", "pool" (the pool fit),
        "stability" (the frequencies) and "boost" (the final fit).

    Returns
    -------
    ExactK
    """
    times = {} if times is None else times
    lap = _Lap(times)
    rows, costs, groups, scaling = setup.rows, setup.costs, setup.groups, setup.scaling
    d = int(rows.shape[1])
    k_pool = pool_size(k, d)
    if k_pool < d:
        # A bracket is enough: the pool is over-admitted anyway, so its lower end (at most
        # POOL_STEP times below the largest price that admits k_pool) needs no bisection. At
        # most MAX_PROBES probes of half a fit each, the pool fit and the final fit: at most
        # four fits' trees in all.
        search = gbfs_mu_search(setup, k_pool, mu_start, rtol=POOL_STEP - 1.0,
                                max_probes=MAX_PROBES, step=POOL_STEP, known=known)
    else:       # every feature in the pool: the price that admits them all is 0
        search = MuSearch(None, [], d)
    lap("mu_search")
    times["mu_probes"] = [p.seconds for p in search.probes]
    mu = 0.0 if search.mu is None else float(search.mu)
    grown = {"probes": sum(p.n_trees for p in search.probes)}
    # Until the search's probe stopped, the unbudgeted pool fit is that probe.
    pool_pen = setup.penalties(mu)
    pool_ens, pool_rec, _ = setup.fit(pool_pen, resume=search.checkpoint)
    K = pool_ens.n_outputs
    grown["pool"] = pool_ens.n_trees - (search.checkpoint.rounds * K if search.checkpoint
                                        else 0)
    lap("pool")
    pool = list(pool_pen.order)
    gains = total_gains(pool_ens)
    freq = None
    if frequency is not None and len(pool) > k:
        freq, grown["stability"] = frequency(mu, k)
        lap("stability")
    value = per_cost(gains, costs)
    rank = sorted(pool, key=lambda f: ((-freq[f],) if freq is not None else ())
                  + (-value[f], pool.index(f)))
    chosen = rank[:k]
    info = {"features": pool, "gain": [float(gains[f]) for f in pool],
            "frequency": None if freq is None else [float(freq[f]) for f in pool],
            "chosen": chosen, "resumed_round": None, "refit_mu": mu, "trees_grown": grown}
    if len(pool) <= k:
        # Nothing to leave out: the pool fit is the final fit (its last round's state is
        # rebuilt only to replay the validation losses).
        pen, rounds = pool_pen, pool_ens.n_trees // K
    else:
        # The pool fit's trees are the final fit's until the first left-out feature entered.
        out = next(f for f in pool if f not in chosen)
        pen = RestrictedPenalty(mu, costs, groups, scaling, k, chosen)
        rounds = int(pool_pen.first_use_tree[out]) // K
    info["resumed_round"] = rounds
    resume = _checkpoint_at(rows, pool_ens, pool_rec, pool_pen, rounds)
    ensemble, record, n_rounds = setup.fit(pen, eval_rows, resume=resume)
    grown["final"] = ensemble.n_trees - rounds * K
    if len(pen.order) < min(k, len(pool)) and mu > 0.0:
        # A chosen feature did not pay the price without the left-out ones: at mu = 0 every
        # chosen feature with a positive gain enters.
        mu = info["refit_mu"] = 0.0
        info["resumed_round"] = 0
        pen = RestrictedPenalty(0.0, costs, groups, scaling, k, chosen)
        ensemble, record, n_rounds = setup.fit(pen, eval_rows)
        grown["final"] += ensemble.n_trees
    lap("boost")
    return ExactK(ensemble, record, n_rounds, pen, mu, search, info)


class _Lap:
    """``lap(name)`` adds the seconds since the last lap to ``times[name]``."""

    def __init__(self, times):
        self.times, self.t0 = times, clock()

    def __call__(self, name):
        t = clock()  # compilation left out (gpufs._compile_watch)
        self.times[name] = self.times.get(name, 0.0) + t - self.t0
        self.t0 = t
