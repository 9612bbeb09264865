"""Exactly k features by what they contribute: GBFS's ``n_features_to_select = k``.

1. Price: the ``mu`` search (``_mu_search``) brackets the largest price at which 2 k features
   enter within half the rounds (steps of 8, at most four probes) and takes its lower end.
2. Over-admit: the pool fit runs at that price over all rounds without a budget.
3. Choose: by held-out saving (``pool_ranking="heldout"``, ``rank_by_heldout``: ranking fits
   on the pool's features, each scored by permutations on rows it did not see -- one seeded
   70 / 30 split, or ``CROSS_FIT_FOLDS`` folds where 30 % would hold out fewer than
   ``CROSS_FIT_ROWS`` rows (``heldout_folds``) -- the saving less ``HELDOUT_Z`` standard
   errors), or by training gain (``"gain"``), per unit of cost; with ``stability_rounds``, by
   selection frequency first.
4. Refit at the same price on the k chosen, resumed from the pool fit where the first
   left-out feature entered; again at ``mu = 0`` if a chosen one did not enter.
5. Fill (``fill_candidates``): fewer than k in the model: the best remaining root splits.
Why: see ``docs/guide/gbfs.rst`` (the budget alone keeps the first k to enter).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .._device import to_host
from ..cli._compile_watch import clock
from ..engine.boosting import BoostingCheckpoint
from ..engine.penalties import PenaltyState
from ._mu_search import MuSearch, gbfs_mu_search

__all__ = [
    "ExactK",
    "Pool",
    "PoolBins",
    "RestrictedPenalty",
    "fill_candidates",
    "fit_exact_k",
    "heldout_folds",
    "heldout_permutation_gains",
    "per_cost",
    "pool_size",
    "rank_by_heldout",
    "ranking_rounds",
    "split_heldout",
    "take_rows",
    "total_gains",
]


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
        As for :class:`gpufs.engine.penalties.PenaltyState`.
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


@dataclass(frozen=True)
class Pool:
    """The pool of an exact-k fit and how it was ranked (``selection_pool_``, by ``as_dict``).

    features : list of int, the pool, in the order its features entered the pool fit
    gain : list of float, their total split gain in the pool fit
    heldout_gain : list of float or None, what they save on the held-out rows
        (``pool_ranking="heldout"``, ``rank_by_heldout``), else None
    heldout_se : list of float or None, the standard errors of those savings, or None
    frequency : list of float or None, their ``selection_frequency_``, or None
    chosen : list of int, the k, best first
    ranked : list of int, the whole pool in the order it was ranked (``chosen`` is its first
        k)
    resumed_round : int, where the final fit started from the pool fit's trees (0: from the
        first round)
    refit_mu : float, the final fit's price
    trees_grown : dict, trees grown per phase: "probes", "pool", "stability", "heldout" (the
        ranking fit), "final"
    """

    features: list
    gain: list
    heldout_gain: list | None
    heldout_se: list | None
    frequency: list | None
    chosen: list
    ranked: list
    resumed_round: int
    refit_mu: float
    trees_grown: dict

    def as_dict(self) -> dict:
        """The estimator's ``selection_pool_``: the fields by name (copies), in this order.

        Returns
        -------
        dict
        """
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ExactK:
    """The outcome of :func:`fit_exact_k`.

    ensemble, record, n_rounds : ``fit_boosting``'s return of the final fit
    penalties : RestrictedPenalty or PenaltyState of the final fit (its ``order``: the
        selection in order of first use)
    mu : the price of the final fit (the search's, or 0 after the fallback)
    search : MuSearch of the pool
    pool : Pool
    frequency : ndarray of shape (n_features,) or None, the stability refits' selection
        frequencies (``selection_frequency_``), None without ``frequency``
    """

    ensemble: object
    record: object
    n_rounds: int
    penalties: object
    mu: float
    search: object
    pool: Pool
    frequency: object = None


def _checkpoint_at(rows, ensemble, record, penalties, rounds):
    """The pool fit's state at the start of round ``rounds``, rebuilt from its trees: Omega as
    it was then (``PenaltyState.snapshot``), and the raw scores as the first ``rounds`` rounds'
    trees predict them (the same additions in the same order as when they were grown)."""
    n_trees = rounds * ensemble.n_outputs
    rows.start_raw(np.asarray(ensemble.base_score, dtype=np.float64))
    if n_trees:
        rows.add_trees(ensemble, 0, n_trees)
    return BoostingCheckpoint(
        rounds=rounds,
        trees=ensemble.trees,
        tree_column=ensemble.tree_column,
        raw=rows.snapshot_raw(),
        record=record,
        penalty=penalties.snapshot(n_trees),
    )


def fit_exact_k(
    setup,
    k: int,
    mu_start: float,
    *,
    eval_rows=None,
    known=(),
    frequency=None,
    times=None,
    heldout=None,
    heldout_seed=0,
) -> ExactK:
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
        "stability" (the frequencies), "heldout" (the ranking fit and the held-out
        savings) and "boost" (the final fit).
    heldout : list of (ndarray, ndarray) pairs, or None, default=None
        (fit rows, held-out rows) of each fold, as row indices (``heldout_folds``): the
        pool is ranked by what its features save on the held-out rows (``rank_by_heldout``:
        a ranking fit on each fold's fit rows, permutations drawn from ``heldout_seed``).
        The search, the pool fit and the final fit run on all the rows either way. None:
        the pool ranked by its training gain.
    heldout_seed : int, default=0

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
        # most MAX_PROBES probes of half a fit each (a quarter where one is given up), the pool
        # fit and the final fit: at most four fits' trees in all.
        search = gbfs_mu_search(
            setup,
            k_pool,
            mu_start,
            rtol=POOL_STEP - 1.0,
            max_probes=MAX_PROBES,
            step=POOL_STEP,
            known=known,
        )
    else:  # every feature in the pool: the price that admits them all is 0
        search = MuSearch(None, [], d)
    lap("mu_search")
    times["mu_probes"] = [p.seconds for p in search.probes]
    mu = 0.0 if search.mu is None else float(search.mu)
    grown = {"probes": sum(p.n_trees for p in search.probes)}
    # Until the search's probe stopped, the unbudgeted pool fit is that probe.
    pool_pen = setup.penalties(mu)
    pool_ens, pool_rec, _ = setup.fit(pool_pen, resume=search.checkpoint)
    K = pool_ens.n_outputs
    grown["pool"] = pool_ens.n_trees - (search.checkpoint.rounds * K if search.checkpoint else 0)
    lap("pool")
    pool = list(pool_pen.order)
    train_gains = total_gains(pool_ens)
    saving = se = None
    if heldout is not None:
        saving, se, grown["heldout"] = rank_by_heldout(setup, heldout, mu, pool, heldout_seed)
        lap("heldout")
    freq = None
    if frequency is not None:  # also when the pool holds k or fewer: the frequencies are
        # the refits' evidence, promised whenever stability_rounds > 0
        freq, grown["stability"] = frequency(mu, k)
        lap("stability")
    gain_value = per_cost(train_gains, costs)
    if saving is None:
        evidence = lambda f: (-gain_value[f],)  # noqa: E731
    else:
        # By the lower confidence bound of the held-out saving (``rank_by_heldout``); equal
        # bounds (features the ranking fit did not use: 0) by training gain.
        held_value = per_cost(saving - HELDOUT_Z * se, costs)

        def evidence(f):
            return (-held_value[f], -gain_value[f])

    rank = sorted(
        pool,
        key=lambda f: ((-freq[f],) if freq is not None else ()) + evidence(f) + (pool.index(f),),
    )
    chosen = rank[:k]
    if len(pool) <= k:
        # Nothing to leave out: the pool fit is the final fit (its last round's state is
        # rebuilt only to replay the validation losses).
        pen, rounds = pool_pen, pool_ens.n_trees // K
    else:
        # The pool fit's trees are the final fit's until the first left-out feature entered.
        out = next(f for f in pool if f not in chosen)
        pen = RestrictedPenalty(mu, costs, groups, scaling, k, chosen)
        rounds = int(pool_pen.first_use_tree[out]) // K
    resume = _checkpoint_at(rows, pool_ens, pool_rec, pool_pen, rounds)
    ensemble, record, n_rounds = setup.fit(pen, eval_rows, resume=resume)
    grown["final"] = ensemble.n_trees - rounds * K
    if len(pen.order) < min(k, len(pool)) and mu > 0.0:
        # A chosen feature did not pay the price without the left-out ones: at mu = 0 every
        # chosen feature with a positive gain enters.
        mu, rounds = 0.0, 0
        pen = RestrictedPenalty(0.0, costs, groups, scaling, k, chosen)
        ensemble, record, n_rounds = setup.fit(pen, eval_rows)
        grown["final"] += ensemble.n_trees
    lap("boost")
    info = Pool(
        features=pool,
        gain=[float(train_gains[f]) for f in pool],
        heldout_gain=None if saving is None else [float(saving[f]) for f in pool],
        heldout_se=None if se is None else [float(se[f]) for f in pool],
        frequency=None if freq is None else [float(freq[f]) for f in pool],
        chosen=chosen,
        ranked=list(rank),
        resumed_round=rounds,
        refit_mu=mu,
        trees_grown=grown,
    )
    return ExactK(ensemble, record, n_rounds, pen, mu, search, info, freq)


class _Lap:
    """``lap(name)`` adds the seconds since the last lap to ``times[name]``."""

    def __init__(self, times):
        self.times, self.t0 = times, clock()

    def __call__(self, name):
        t = clock()  # compilation left out (gpufs.cli._compile_watch)
        self.times[name] = self.times.get(name, 0.0) + t - self.t0
        self.t0 = t


def fill_candidates(setup, ensemble, selected, n_fill) -> list:
    """The ``n_fill`` features that fill an exact-k selection the model could not reach:
    the rule of ``selection_filled_``.

    Outside ``selected``, the features of largest root-split gain on the final model's
    gradients (the best split of each feature over all rows, at the raw scores of
    ``ensemble``, with no penalty; summed over the outputs of a multiclass model): the
    features whose split a further round's root would gain most from. Ties go to the lower
    index; a feature with no valid split (a constant column) is never a candidate, so fewer
    than ``n_fill`` come back when fewer have one. The histograms are built by the fit's
    backend (either device) and scanned by the level step's scans on the host.

    Parameters
    ----------
    setup : BoostSetup
    ensemble : TreeEnsemble
        The final model.
    selected : sequence of int
        The features the model selected.
    n_fill : int >= 0

    Returns
    -------
    list of int
        Best first.
    """
    from .._types import ROW_INDEX_DTYPE
    from ..backends.base import SplitParams, categorical_slots
    from ..backends.cpu.split import feature_gains
    from ..engine.quantize import prepare_gradients
    from ..rules._hist_layout import layout_of

    rows, backend, params = setup.rows, setup.backend, setup.params
    Xb = getattr(rows, "Xb", None)
    if n_fill <= 0 or Xb is None:  # (a cluster's rows: no fill, the warning stays)
        return []
    n, d = int(rows.shape[0]), int(rows.shape[1])
    bm = setup.bin_mapper
    n_bins = np.asarray(bm.n_bins_, np.int32)
    cat_slot, n_cat = categorical_slots(getattr(bm, "is_categorical_", None), d)
    tree = params.tree
    rows.start_raw(np.asarray(ensemble.base_score, dtype=np.float64))
    if ensemble.n_trees:
        rows.add_trees(ensemble, 0, ensemble.n_trees)
    G, Hs, _ = rows.round_gradients(setup.objective)
    xp = backend.xp
    all_rows = xp.arange(n, dtype=ROW_INDEX_DTYPE)
    one = np.zeros(1, np.int64)
    layout = layout_of(bm, n_bins, d)
    total = np.zeros(d)
    valid = np.zeros(d, bool)
    for c in range(ensemble.n_outputs):
        prep = prepare_gradients(backend, G[c], Hs[c], rows.w, unit_hessian=not params.hessian)
        hist = backend.histograms(
            Xb, prep.gh, all_rows, one, np.array([n], np.int64), one, layout=layout
        )
        split = SplitParams(
            n_bins=n_bins,
            g_scale=float(prep.g_scale),
            h_scale=float(prep.h_scale),
            reg_lambda=float(tree.reg_lambda),
            gain_divisor=1.0,
            min_child_weight=float(tree.min_child_weight),
            min_split_gain=0.0,
            cat_slot=cat_slot,
            n_cat=n_cat,
            cat_smooth=float(tree.cat_smooth),
            cat_l2=float(tree.cat_l2),
            min_data_per_group=float(tree.min_data_per_group),
            max_cat_threshold=int(tree.max_cat_threshold),
            layout=layout,
        )
        gains = feature_gains(
            np.asarray(to_host(hist)), [int(prep.G_q)], [int(prep.H_q)], [n], split
        )[0]
        ok = gains > -np.inf
        valid |= ok
        total += np.where(ok, gains, 0.0)
    taken = {int(f) for f in selected}
    cands = [f for f in range(d) if valid[f] and f not in taken]
    cands.sort(key=lambda f: (-total[f], f))
    return cands[:n_fill]


#: The share of the rows the held-out ranking of the pool keeps out of its ranking fit
#: (``rank_by_heldout``).
HELDOUT_FRACTION = 0.3
#: Permutations of each column (``heldout_permutation_gains``), averaged: at most this many,
#: and about PERMUTED_ROWS rows in all (one permutation of 10,000 held-out rows is already
#: steady; 8 of 900 rows were needed on the planted noise of ``tests/_planted_noise.py``).
N_PERMUTATIONS = 8
PERMUTED_ROWS = 10_000
#: The pool is ranked by the held-out saving minus this many standard errors, a lower
#: confidence bound (about one-sided 98 %; ``rank_by_heldout``). On the planted noise of
#: ``tests/_planted_noise.py`` (27 fits of 2,100 rows, ranked on one 30 % split, before the
#: cross-fitting of ``heldout_folds``) a noise column came ahead of a signal in 3 fits with
#: 1.5 to 3, 4 to 5 with 0 to 1 (the saving alone) and 6 with 4.
HELDOUT_Z = 2.0


def split_heldout(setup, seed, fraction=HELDOUT_FRACTION):
    """(fit rows, held-out rows) of ``setup.rows``: a seeded random ``fraction`` of the rows
    held out (at least one row on each side), as sorted int64 row indices on the host; None
    for too few rows. Rows that are not in this process (a cluster's) are refused: the draw
    is made here, and a fit ranked by gain instead would differ from the one-process fit
    without a word (the Dask estimators refuse ``pool_ranking="heldout"`` first)."""
    n = _local_rows(setup)
    n_out = round(fraction * n)
    if n_out < 1 or n - n_out < 2:
        return None
    perm = np.random.default_rng([int(seed), 35]).permutation(n)
    return np.sort(perm[n_out:]), np.sort(perm[:n_out])


#: Held-out rows a single split should give the ranking: where 30 % of the rows are fewer, the
#: ranking is cross-fitted over ``CROSS_FIT_FOLDS`` folds, so that every row is held out once
#: (``heldout_folds``). On the churn table of ``tests/_planted_noise.py`` (2,100 rows, 24 fits
#: of 8 seeds x k = 3, 4, 5) one 30 % split put a noise column ahead of a real signal in 6 fits,
#: 3 folds in 2, 5 folds in none: a weak signal's saving on 630 rows is within its standard
#: error of a noise column's. A 10,000-row split is steady (``PERMUTED_ROWS``).
CROSS_FIT_ROWS = 10_000
CROSS_FIT_FOLDS = 5
#: The ranking fits grow this fraction of the pool fit's rounds (at least one). They only have
#: to show, on rows they did not see, what each pool feature saves; half the rounds did that
#: as well as all of them on the ten real tables of ``bench/bench_quality.py`` (5 splits x k
#: = 3, 5, 10, GBFS's refit score within 0.005 of the best peer's in 23 cells instead of 21;
#: mean change +0.0002, the largest -0.023 and +0.022; 90 of 150 selections the same) and
#: on its planted-noise families (no noise column ahead of a signal in 27 fits), for 42 %
#: less selection time (``bench/results/quality_s9_rank*.jsonl``).
RANKING_ROUNDS = 0.5
#: ... but never fewer rounds than make this much shrunken step (rounds x learning rate: 50
#: rounds at 0.1), unless the pool fit has fewer: 30 of 60 rounds at 0.1 left the weakest of
#: five planted sinusoids unused and ranked it below noise in 4 of 4 seeds
#: (``tests/test_exact_k.py``); 50 found all five.
RANKING_MIN_STEP = 5.0


def ranking_rounds(n_estimators: int, learning_rate: float) -> int:
    """The rounds of each ranking fit (``RANKING_ROUNDS``, ``RANKING_MIN_STEP``)."""
    floor = math.ceil(RANKING_MIN_STEP / learning_rate - 1e-9)
    return max(1, min(n_estimators, max(math.ceil(RANKING_ROUNDS * n_estimators), floor)))


def heldout_folds(setup, seed):
    """The (fit rows, held-out rows) pairs the held-out ranking scores the pool on: one pair,
    :func:`split_heldout`'s, where its held-out share has at least ``CROSS_FIT_ROWS`` rows;
    else ``CROSS_FIT_FOLDS`` pairs that hold out each row once (cross-fitting: the folds are
    consecutive slices of a seeded permutation, each fitted on the other folds' rows). None
    for too few rows, or (with a warning) where a side of a pair holds no sample weight.
    Rows not in this process are refused (``split_heldout``).

    Returns
    -------
    list of (ndarray, ndarray) of int64, or None
        Sorted row indices; the rows themselves are taken by ``rank_by_heldout``, from the
        pool's columns only.
    """
    n = _local_rows(setup)
    if round(HELDOUT_FRACTION * n) >= CROSS_FIT_ROWS or n < 2 * CROSS_FIT_FOLDS:
        single = split_heldout(setup, seed)
        return None if single is None else _weighed([single], setup.rows.w)
    folds = np.array_split(np.random.default_rng([int(seed), 35]).permutation(n), CROSS_FIT_FOLDS)
    pairs = []
    for i, held in enumerate(folds):
        fit = np.sort(np.concatenate(folds[:i] + folds[i + 1 :]))
        pairs.append((fit, np.sort(held)))
    return _weighed(pairs, setup.rows.w)


def _weighed(pairs, w):
    """``pairs``, or None with a warning where a side of one holds no sample weight: a fit
    there has no mean to start from, and held-out rows that weigh nothing measure nothing.
    Only sample weights that put (almost) all the weight on a few rows do this."""
    if w is None:
        return pairs
    w = np.asarray(to_host(w), dtype=np.float64)
    if all(w[fit].sum() > 0 and w[held].sum() > 0 for fit, held in pairs):
        return pairs
    from .._warnings import warn_from_caller

    nz = int(np.count_nonzero(w))
    warn_from_caller(
        f"pool_ranking='heldout': {nz} of {w.shape[0]} rows {'has' if nz == 1 else 'have'} a "
        f"sample weight above 0, too few for the held-out ranking's {len(pairs)} "
        f"split{'s' if len(pairs) > 1 else ''} to give every side some weight; the pool is "
        "ranked by training gain (pool_ranking='gain') instead."
    )
    return None


def _local_rows(setup) -> int:
    """The row count of ``setup.rows``, which must be in this process (``split_heldout``)."""
    from ..engine.boosting import DeviceRows

    if not isinstance(setup.rows, DeviceRows):
        raise ValueError(
            f"pool_ranking='heldout' draws its held-out rows in one process; "
            f"{type(setup.rows).__name__} rows are not in this process: use pool_ranking='gain'."
        )
    return int(setup.rows.shape[0])


def take_rows(backend, rows, idx):
    """The rows ``idx`` (sorted ndarray of int) of ``rows`` (DeviceRows) as DeviceRows."""
    from ..engine.boosting import DeviceRows

    ix = backend.xp.asarray(idx)
    return DeviceRows(backend, rows.Xb[ix], rows.y[ix], None if rows.w is None else rows.w[ix])


def rank_by_heldout(setup, heldout, mu, pool, seed):
    """What each pool feature saves on rows no split of its model was chosen on, and the
    standard error of that saving: the evidence ``pool_ranking="heldout"`` ranks the pool by.

    For each fold of ``heldout``, a ranking fit at the pool's price ``mu`` (the pool fit's
    settings on ``ranking_rounds`` of its rounds, with the exact split search), on the fold's
    fit rows and with splits on the pool's features only, is scored on its held-out rows by
    :func:`heldout_permutation_gains`; the folds' savings add up (each row's loss difference
    counted once), and so do their variances. The pool itself
    comes from all the rows (a pool grown on 70 % of them missed planted signals on a
    400-column table), so the rows are split only for the ranking: screening and cleaning
    on separate samples, as in Wasserman and Roeder, "High-dimensional variable selection",
    Annals of Statistics 37(5A), 2009. The saving is permutation importance on held-out rows
    (Breiman, "Random Forests", Machine Learning 45, 2001; with its standard error as model
    reliance in Fisher, Rudin and Dominici, "All Models are Wrong, but Many are Useful",
    JMLR 20(177), 2019): unlike the training split gain, it does not grow with the number of
    cut points a column offers (the selection bias of exhaustive split search, Strobl,
    Boulesteix, Zeileis and Hothorn, "Bias in random forest variable importance measures",
    BMC Bioinformatics 8:25, 2007; Hothorn, Hornik and Zeileis, "Unbiased recursive
    partitioning: a conditional inference framework", JCGS 15(3), 2006). A saving within
    ``HELDOUT_Z`` standard errors of 0 is no evidence: ``fit_exact_k`` ranks by the lower
    bound ``saving - HELDOUT_Z * se`` (a pessimistic, lower-confidence-bound ranking), so a
    column whose permuted splits swing the loss widely (a noise column with many cut points:
    large standard error, saving near 0) ranks below a weak signal whose small saving is
    steady.

    Parameters
    ----------
    setup : BoostSetup
        The pool fit's settings (all the rows).
    heldout : list of (ndarray, ndarray)
        (fit rows, held-out rows) of each fold, row indices, ``heldout_folds``'s.
    mu : float
        The pool's price.
    pool : sequence of int
    seed : int
        The permutations' seed.

    Returns
    -------
    saving, se : ndarray of shape (n_features,), float64
        0 outside the pool.
    n_trees : int
        Trees grown by the ranking fits.
    """
    # The ranking fits see the pool's columns only, in their order (so ties between features
    # break as on all the columns): the same trees, bit for bit, as splits restricted to the
    # pool on every column, without a histogram layout, level scratch and split scan sized by
    # all of them (a 2,100 x 1,000 table: 16 ms a ranking tree with every column, for 10).
    cols = np.sort(np.asarray(pool, dtype=np.int64))
    rounds = ranking_rounds(setup.params.n_estimators, setup.params.tree.learning_rate)
    sub = setup._replace(
        params=dataclasses.replace(setup.params, n_estimators=rounds),
        bin_mapper=PoolBins(setup.bin_mapper, cols),
        costs=setup.costs[cols],
        groups=setup.groups[cols],
        # the exact split search: every pool feature is scored at every split (GT-GBM's group
        # tests, made to find few features among many, could leave a pool feature unused)
        candidate_search=None,
    )
    local = list(range(cols.shape[0]))
    # the pool's columns once; each fold takes its rows from them
    pool_rows = _pool_columns(setup, cols)

    # The folds are independent fits, side by side on the host (``fit_independent``): one
    # fold's levels are mostly too little work for the thread pool (189 x 500, seven
    # classes, k = 3, two threads: the ranking's 1,750 trees took 0.85 s, now 0.58-0.70 s;
    # not half, as the folds' per-tree Python holds the GIL).
    def rank_fold(fold, fit_idx, held_idx):
        def fit(fold_setup, on_round_start):
            backend = fold_setup.backend
            ens, _, _ = fold_setup._replace(rows=take_rows(backend, pool_rows, fit_idx)).fit(
                fold_setup.penalties(mu, len(local)), on_round_start=on_round_start
            )
            s, se = heldout_permutation_gains(
                ens,
                take_rows(backend, pool_rows, held_idx),
                setup.objective,
                local,
                seed,
                stream=(fold,) if fold else (),
            )
            return s, se, int(ens.n_trees)

        return fit

    folds = sub.fit_independent(
        [rank_fold(fold, fit, held) for fold, (fit, held) in enumerate(heldout)],
        max(int(fit_idx.shape[0]) for fit_idx, _ in heldout) * cols.shape[0],
    )
    saving, var = np.zeros(setup.costs.shape[0]), np.zeros(setup.costs.shape[0])
    n_trees = 0
    for s, se, trees in folds:  # in fold order: the sums of a serial run, bit for bit
        saving[cols] += s
        var[cols] += se * se
        n_trees += trees
    return saving, np.sqrt(var), n_trees


class PoolBins:
    """A fitted BinMapper seen through some of its columns: the ranking fits' mapper
    (``rank_by_heldout``), whose feature ``j`` is the mapper's ``columns[j]``.

    Parameters
    ----------
    bin_mapper : BinMapper
    columns : ndarray of shape (n_columns,), int64
        Sorted.
    """

    def __init__(self, bin_mapper, columns):
        self.bin_mapper, self.columns = bin_mapper, np.asarray(columns, np.int64)
        self.n_bins_ = np.asarray(bin_mapper.n_bins_)[self.columns]
        cat = getattr(bin_mapper, "is_categorical_", None)
        #: a column is categorical when the whole mapper's is
        self.is_categorical_ = None if cat is None else np.asarray(cat)[self.columns]
        self._layout = None

    def hist_layout(self):
        """The mapper's histogram layout of these columns (``BinMapper.hist_layout``), made
        once."""
        if self._layout is None:
            from ..rules._hist_layout import HistLayout

            m, c = self.bin_mapper, self.columns
            freq, frac = getattr(m, "most_freq_bin_", None), getattr(m, "most_freq_frac_", None)
            self._layout = HistLayout.from_n_bins(
                self.n_bins_,
                None if freq is None else np.asarray(freq)[c],
                None if frac is None else np.asarray(frac)[c],
            )
        return self._layout

    def threshold_value(self, feature, bin_threshold):
        """The raw threshold of a split of column ``feature`` (``BinMapper.threshold_value``)."""
        return self.bin_mapper.threshold_value(int(self.columns[feature]), bin_threshold)

    def threshold_values(self, features, bins):
        """``threshold_value`` of many splits (``BinMapper.threshold_values``)."""
        return self.bin_mapper.threshold_values(self.columns[np.asarray(features, np.int64)], bins)


def _pool_columns(setup, cols):
    """``setup.rows`` (DeviceRows) with the columns ``cols`` of their binned matrix only."""
    from ..engine.boosting import DeviceRows

    rows = setup.rows
    Xb = rows.Xb[:, setup.backend.xp.asarray(cols)]
    return DeviceRows(setup.backend, Xb, rows.y, rows.w)


def heldout_permutation_gains(ensemble, rows, objective, features, seed, stream=()):
    """What each feature's splits save on rows the trees were not grown on: the held-out loss
    of the ensemble with the feature's column permuted among the held-out rows, minus its
    loss as it is (permutation importance, Breiman 2001), times the held-out rows' count,
    averaged over ``min(N_PERMUTATIONS, PERMUTED_ROWS // n)`` (at least 1) seeded
    permutations; and its standard error over the rows (of the rows' (weighted) loss
    differences, each averaged over the permutations).

    A feature whose splits fitted noise saves nothing there (its permuted splits fit other
    noise, as badly); a real signal's column, permuted, loses what its splits explained.

    Only the trees that split on the permuted feature can change: each tree's value on each
    row is kept (``_TreeSums``, blocks of rows), those trees are walked again, and the raw
    scores are summed again in tree order from the last sum before the first of them, with
    the float64 additions of ``add_trees``, so the savings are those of predicting every tree
    again, bit for bit.

    Parameters
    ----------
    ensemble : TreeEnsemble
    rows : DeviceRows
        The held-out rows.
    objective : SquaredError, Logistic or Softmax
    features : sequence of int
        The features to score (the others get 0).
    seed : int
        The permutation's seed.
    stream : tuple of int, default=()
        Appended to the seed (each cross-fitted fold draws its own permutations).

    Returns
    -------
    saving, se : ndarray of shape (n_features,), float64
    """
    gains = np.zeros(ensemble.n_features)
    se = np.zeros(ensemble.n_features)
    if not ensemble.n_trees:
        return gains, se
    n = int(rows.shape[0])
    backend = rows.backend
    w = np.ones(n) if rows.w is None else np.asarray(to_host(rows.w), dtype=np.float64)
    w = w * (n / w.sum())  # the losses are weighted means: row i counts w_i / mean(w)
    xp = backend.xp
    rng = np.random.default_rng([int(seed), 36, *stream])
    n_perm = max(1, min(N_PERMUTATIONS, PERMUTED_ROWS // max(n, 1)))
    perms = [xp.asarray(rng.permutation(n)) for _ in range(n_perm)]
    features = list(dict.fromkeys(int(f) for f in features))
    sums = _TreeSums(ensemble, backend, features)
    diffs = {f: np.zeros(n) for f in features}
    step = max(1, TREE_VALUE_CELLS // sums.cells(n_perm, int(rows.shape[1])))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        m, y = hi - lo, rows.y[lo:hi]
        t0 = _loss_terms(backend, objective, sums.start(rows.Xb[lo:hi]), y)
        # the block once per permutation, one under another: each feature's column is
        # permuted in every copy, its trees walked once for all, and put back after
        Xp = xp.concatenate([rows.Xb[lo:hi]] * n_perm)
        yp = xp.concatenate([y] * n_perm)
        for f in features:
            diff = diffs[f][lo:hi]
            if not sums.uses(f):  # no tree splits on f: its predictions are the rows' own
                for _ in perms:
                    diff += t0 - t0
                continue
            for p, perm in enumerate(perms):
                Xp[p * m : (p + 1) * m, f] = rows.Xb[perm[lo:hi], f]
            tp = _loss_terms(backend, objective, sums.permuted(Xp, f), yp)
            for p in range(n_perm):
                diff += tp[p * m : (p + 1) * m] - t0
                Xp[p * m : (p + 1) * m, f] = rows.Xb[lo:hi, f]
    for f in features:
        d = w * diffs[f] / len(perms)
        gains[f] = d.sum()
        se[f] = np.sqrt(n / max(n - 1, 1) * ((d - d.mean()) ** 2).sum()) if n > 1 else 0.0
    return gains, se


def _loss_terms(backend, objective, raw, y):
    return np.asarray(to_host(backend.loss_terms(objective.name, raw, y)), np.float64)


#: Float64s kept at once for the held-out rows' per-tree values and running sums
#: (``_TreeSums.cells``: 128 MiB); more rows are scored in blocks.
TREE_VALUE_CELLS = 1 << 24


class _TreeSums:
    """Raw scores of an ensemble on a block of rows from each tree's value on each row, so
    that rows with one feature's column changed are scored by walking only the trees that
    split on it (``heldout_permutation_gains``).

    ``add_trees`` (``predict_binned``, either device) starts row i's output c at
    ``base_score[c]`` and adds the value of each tree of output c, in tree order, in float64.
    That is repeated here with the same additions in the same order: the trees of each output
    in a row of a grid (outputs, positions), padded with -0.0 (x + -0.0 is x, bit for bit),
    summed position by position (``_running_sum``), and every running sum kept, so that a
    change restarts from the sums before the first changed tree's position.
    """

    def __init__(self, ensemble, backend, features):
        self.backend, self.xp = backend, backend.xp
        a = self.a = ensemble.stacked()
        self.is_cat = backend.to_device(a["is_categorical"])
        column = np.asarray(a["tree_column"], dtype=np.int64)
        n_trees = column.shape[0]
        self.base = np.asarray(ensemble.base_score, dtype=np.float64)
        per_output = [np.flatnonzero(column == c) for c in range(self.base.shape[0])]
        self.width = max(t.shape[0] for t in per_output)
        grid = np.full((self.width, len(per_output)), n_trees, dtype=np.int64)  # n_trees: -0.0
        position = np.zeros(n_trees, dtype=np.int64)  # a tree's place among its output's
        for c, trees in enumerate(per_output):
            grid[: trees.shape[0], c] = trees
            position[trees] = np.arange(trees.shape[0])
        self.grid = backend.to_device(grid)
        feature = np.asarray(a["feature"])
        self.trees = {}
        for f in features:
            used = np.flatnonzero((feature == f).any(axis=1))
            if used.size and f not in self.trees:
                # its trees' places in the grid, and the first place any of them takes
                where = [backend.to_device(position[used]), backend.to_device(column[used])]
                self.trees[f] = (where, int(position[used].min()), self._arrays(used))
        self.all = self._arrays(np.arange(n_trees))

    def cells(self, copies, n_features):
        """Float64s (about) kept per row of a block: its trees' values and running sums, and
        ``copies`` copies of the row, binned and summed again."""
        sums = (self.width + 1) * self.base.shape[0]
        return 2 * sums + copies * (2 * sums + n_features // 8 + 1)

    def _arrays(self, trees):
        a, dev = self.a, self.backend.to_device
        return [
            dev(np.ascontiguousarray(a[k][trees]))
            for k in ("feature", "bin_threshold", "missing_left", "value")
        ] + [
            dev(np.arange(trees.shape[0], dtype=np.int32)),
            dev(np.ascontiguousarray(a["cat_bits"][trees])),
        ]

    def uses(self, f):
        return f in self.trees

    def _values(self, Xb, arrays, pad=0):
        """(rows, trees + pad) each tree's value on each row (-0.0 + v is v), then -0.0."""
        feature, threshold, missing_left, value, column, cat_bits = arrays
        out = self.xp.full((Xb.shape[0], feature.shape[0] + pad), -0.0, dtype=np.float64)
        self.backend.predict_binned(
            Xb, feature, threshold, missing_left, value, column, out, self.is_cat, cat_bits
        )
        return out

    def start(self, Xb):
        """The raw scores of the rows ``Xb``, their trees' values and running sums kept."""
        xp = self.xp
        # (trees + 1, rows): each tree's values, then -0.0
        self.values = xp.ascontiguousarray(self._values(Xb, self.all, pad=1).T)
        s = xp.empty((self.width + 1, self.base.shape[0], Xb.shape[0]))
        s[0] = xp.asarray(self.base)[:, None]
        s[1:] = self.values[self.grid]
        self.running = _running_sum(xp, s)  # (positions + 1, outputs, rows)
        return xp.ascontiguousarray(s[-1].T)

    def permuted(self, Xb, f):
        """The raw scores of the rows ``Xb``: copies of ``start``'s rows, one under another,
        that differ from them in column f only."""
        xp = self.xp
        (place, output), j, arrays = self.trees[f]
        m = self.running.shape[2]
        s = xp.empty((self.width + 1 - j, self.base.shape[0], Xb.shape[0] // m, m))
        s[0] = self.running[j][:, None, :]
        s[1:] = self.values[self.grid[j:]][:, :, None, :]
        s = s.reshape(s.shape[:2] + (Xb.shape[0],))
        s[place + (1 - j), output] = self._values(Xb, arrays).T  # the trees on f, again
        return xp.ascontiguousarray(_running_sum(xp, s)[-1].T)


def _running_sum(xp, s):
    """``s`` (positions, ...) summed along its first axis in place, position by position: one
    float64 addition per element and position, in order (``np.add.accumulate`` adds in the
    same order, but one element at a time; a device's scan would add in another)."""
    for j in range(1, s.shape[0]):
        xp.add(s[j - 1], s[j], out=s[j])
    return s
