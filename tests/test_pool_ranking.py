"""Exact k's pool ranked on held-out rows by default (issue 35, ``pool_ranking``).

The training split gain of a pool feature grows with the cut points its column offers: a
40-level random category or a column of row ids wins splits that fit noise, and ranked by
that gain it comes ahead of a weak real signal. The default ``pool_ranking="heldout"``
ranks by what each feature saves on rows its ranking fit did not see
(``_exact_k.rank_by_heldout``), less ``HELDOUT_Z`` standard errors (a lower confidence
bound; equal bounds by training gain).
"""

import numba
import numpy as np
import pytest

import _planted_noise as pn
from gpufs import GBFSClassifier, GBFSRegressor, _threading
from gpufs.engine.boosting import DeviceRows
from gpufs.selectors import _exact_k


def _select(est, X, y):
    est.fit(X, y)
    return list(X.columns[est.get_support()])


def test_default_is_heldout():
    assert GBFSRegressor().pool_ranking == "heldout"
    assert GBFSClassifier().get_params()["pool_ranking"] == "heldout"


@pytest.mark.parametrize(
    "table, k",
    [("noise_categories", 2), ("noise_categories", 3), ("integer_ids", 2)],
)
def test_default_puts_no_noise_column_ahead_of_a_weak_signal(table, k):
    """Three binary signals (weights .6, .45, .3 against unit noise) beside categorical noise
    of 10, 40 and 200 levels, or a row id and counts of up to 500, on 2,000 rows. The default
    fit selects planted signals only; the training-gain rule ("gain", the old default) puts
    a noise column ahead of a signal on the same table."""
    X, y, planted = getattr(pn, table)(0, n=2000)
    est = GBFSRegressor(n_features_to_select=k, random_state=0, device="cpu")
    sel = _select(est, X, y)
    assert not pn.noise_ahead(sel, planted), sel
    assert set(sel) <= set(planted) and len(sel) == k
    assert est.selection_pool_["heldout_gain"] is not None
    gain = _select(
        GBFSRegressor(n_features_to_select=k, random_state=0, device="cpu", pool_ranking="gain"),
        X,
        y,
    )
    assert pn.noise_ahead(gain, planted), gain


def test_rule_lower_confidence_bound_then_training_gain():
    """The chosen k follow the rule: by the held-out saving less HELDOUT_Z standard errors,
    equal bounds by training gain; the noise columns of the pool have no evidence (a saving
    within HELDOUT_Z standard errors of 0) while they have training gain."""
    X, y, planted = pn.noise_categories(1, n=2000)
    est = GBFSRegressor(n_features_to_select=3, random_state=0, device="cpu").fit(X, y)
    p = est.selection_pool_
    feats = p["features"]
    save = dict(zip(feats, p["heldout_gain"]))
    se = dict(zip(feats, p["heldout_se"]))
    gain = dict(zip(feats, p["gain"]))
    z = _exact_k.HELDOUT_Z
    sure = {f: save[f] > z * se[f] for f in feats}
    expect = sorted(feats, key=lambda f: (-(save[f] - z * se[f]), -gain[f], feats.index(f)))[:3]
    assert p["chosen"] == expect
    names = list(X.columns)
    noise = [f for f in feats if names[f] not in planted]
    assert noise and not any(sure[f] for f in noise) and all(gain[f] > 0 for f in noise)
    assert all(se[f] >= 0.0 for f in feats)


def test_heldout_savings_and_their_standard_error_by_hand():
    """``heldout_permutation_gains`` on a one-split regression stump: the saving is the
    held-out rows' loss difference summed (the mean loss difference times n), averaged over
    the permutations, and its standard error that of a sum of n row differences."""
    rng = np.random.default_rng(0)
    X = np.c_[rng.integers(0, 2, 400), rng.normal(size=400)]
    y = 2.0 * X[:, 0] + rng.normal(size=400)
    est = GBFSRegressor(
        mu=0.0, n_estimators=1, max_depth=1, learning_rate=1.0, random_state=0, device="cpu"
    ).fit(X, y)

    from gpufs.backends import get_backend

    backend = get_backend("cpu")
    Xb = est.bin_mapper_.transform(X, backend)
    rows = DeviceRows(backend, Xb, y, None)
    obj = est._objective
    saving, se = _exact_k.heldout_permutation_gains(est.ensemble_, rows, obj, [0, 1], 3)
    # by hand: the stump's predictions, permuted the same way
    n = 400
    n_perm = max(1, min(_exact_k.N_PERMUTATIONS, _exact_k.PERMUTED_ROWS // n))
    perm_rng = np.random.default_rng([3, 36])
    perms = [perm_rng.permutation(n) for _ in range(n_perm)]
    pred = est.predict(X)
    lo, hi = pred[X[:, 0] == 0][0], pred[X[:, 0] == 1][0]
    diff = np.zeros(n)
    for perm in perms:
        pp = np.where(X[perm, 0] == 1, hi, lo)
        diff += (pp - y) ** 2 - (pred - y) ** 2
    d = diff / n_perm
    np.testing.assert_allclose(saving[0], d.sum(), rtol=1e-9)
    np.testing.assert_allclose(se[0], np.sqrt(n * d.var(ddof=1)), rtol=1e-9)
    assert saving[1] == 0.0 and se[1] == 0.0  # no split on column 1: nothing to lose
    assert saving[0] > _exact_k.HELDOUT_Z * se[0]


def test_same_choice_same_model_as_gain():
    """The search, the pool fit and the final fit (resumed from the pool fit) run on all the
    rows under both rules: where they choose the same k, the models are the same, and the
    held-out rule adds only its ranking fit (``trees_grown["heldout"]``)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 40))
    y = 1.0 * X[:, 3] + 1.3 * X[:, 10] + 1.6 * X[:, 25] + 0.3 * rng.normal(size=600)
    kw = dict(n_features_to_select=3, n_estimators=20, max_depth=3, random_state=0, device="cpu")
    held = GBFSRegressor(**kw).fit(X, y)
    gain = GBFSRegressor(**kw, pool_ranking="gain").fit(X, y)
    assert set(held.selected_features_.tolist()) == {3, 10, 25}
    assert set(held.selection_pool_["chosen"]) == set(gain.selection_pool_["chosen"])
    hp, gp = held.selection_pool_, gain.selection_pool_
    assert hp["features"] == gp["features"] and hp["resumed_round"] == gp["resumed_round"]
    assert hp["trees_grown"]["heldout"] > 0 and "heldout" not in gp["trees_grown"]
    np.testing.assert_array_equal(held.predict(X), gain.predict(X))


def _plain_permutation_gains(ensemble, rows, objective, features, seed):
    """``heldout_permutation_gains`` as it was: every tree predicted again for every
    permutation of every feature (the reference the tree-skipping route must equal)."""
    from gpufs._device import to_host

    gains = np.zeros(ensemble.n_features)
    se = np.zeros(ensemble.n_features)
    base = np.asarray(ensemble.base_score, dtype=np.float64)
    n = int(rows.shape[0])
    backend = rows.backend
    w = np.ones(n) if rows.w is None else np.asarray(to_host(rows.w), dtype=np.float64)
    w = w * (n / w.sum())

    def terms(r):
        r.start_raw(base)
        r.add_trees(ensemble, 0, ensemble.n_trees)
        return np.asarray(to_host(backend.loss_terms(objective.name, r.raw, r.y)), np.float64)

    t0 = terms(rows)
    rng = np.random.default_rng([int(seed), 36])
    n_perm = max(1, min(_exact_k.N_PERMUTATIONS, _exact_k.PERMUTED_ROWS // max(n, 1)))
    perms = [rng.permutation(n) for _ in range(n_perm)]
    Xp = np.array(rows.Xb, copy=True)
    for f in features:
        diff = np.zeros(n)
        for perm in perms:
            Xp[:, f] = rows.Xb[perm, f]
            diff += terms(DeviceRows(backend, Xp, rows.y, rows.w)) - t0
        Xp[:, f] = rows.Xb[:, f]
        d = w * diff / len(perms)
        gains[f] = d.sum()
        se[f] = np.sqrt(n / max(n - 1, 1) * ((d - d.mean()) ** 2).sum()) if n > 1 else 0.0
    return gains, se


class _CountingBackend:
    """The CPU backend, counting the tree walks of its predictions (rows x trees)."""

    def __init__(self, backend):
        self._backend, self.walks = backend, 0

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def predict_binned(self, Xb, feature, *rest):
        self.walks += Xb.shape[0] * feature.shape[0]
        return self._backend.predict_binned(Xb, feature, *rest)


def _ranking_case(kind):
    """(ensemble, held-out rows, objective, features): a small fit of each objective, scored
    on other rows with weights; the features include one no tree splits on."""
    from gpufs.backends import get_backend

    rng = np.random.default_rng(7)
    n_fit, n_held, d = 300, 97, 8
    X = rng.normal(size=(n_fit + n_held, d))
    X[:, 5] = np.round(X[:, 5])  # few distinct values: ties in the bins
    X[:, 6] = 1.0  # no tree splits on a constant
    signal = X[:, 0] + 0.8 * X[:, 1] - 0.6 * X[:, 2] + 0.4 * X[:, 3] * X[:, 4]
    kw = dict(mu=0.0, n_estimators=12, max_depth=3, random_state=0, device="cpu")
    if kind == "regression":
        y = signal + 0.5 * rng.normal(size=len(X))
        est = GBFSRegressor(**kw).fit(X[:n_fit, :7], y[:n_fit])
        y_held = y[n_fit:]
    else:
        k = 2 if kind == "binary" else 4
        y = np.digitize(signal + 0.5 * rng.normal(size=len(X)), np.linspace(-1.5, 1.5, k - 1))
        est = GBFSClassifier(**kw).fit(X[:n_fit, :7], y[:n_fit])
        y_held = np.searchsorted(est.classes_, y[n_fit:]).astype(np.int32)
    backend = get_backend("cpu")
    Xb = est.bin_mapper_.transform(X[n_fit:, :7], backend)
    w = rng.uniform(0.2, 3.0, size=n_held)
    rows = DeviceRows(backend, Xb, y_held, w)
    ens = est.ensemble_
    used = {int(f) for f in np.asarray(ens.stacked()["feature"]).ravel() if f >= 0}
    unused = [f for f in range(7) if f not in used]
    assert unused and len(used) >= 3, (used, unused)
    return ens, rows, est._objective, sorted(used) + unused


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
@pytest.mark.parametrize("cells", [None, 1])
def test_permutations_walk_only_the_trees_on_the_feature_bit_for_bit(kind, cells, monkeypatch):
    """The held-out savings and standard errors equal, bit for bit, those of predicting every
    tree again for every permutation (weights, a feature no tree splits on, one block of
    rows or one row at a time); the permutations walk only the trees that split on the
    permuted feature (plus one walk of every tree)."""
    ens, rows, objective, features = _ranking_case(kind)
    if cells is not None:
        monkeypatch.setattr(_exact_k, "TREE_VALUE_CELLS", cells)
    want = _plain_permutation_gains(ens, rows, objective, features, 5)
    counting = _CountingBackend(rows.backend)
    got = _exact_k.heldout_permutation_gains(
        ens, DeviceRows(counting, rows.Xb, rows.y, rows.w), objective, features, 5
    )
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert np.all(want[0][features[:3]] != 0.0)
    n = rows.shape[0]
    n_perm = max(1, min(_exact_k.N_PERMUTATIONS, _exact_k.PERMUTED_ROWS // n))
    feature = np.asarray(ens.stacked()["feature"])
    on_f = sum(int((feature == f).any(axis=1).sum()) for f in features)
    assert on_f < len(features) * ens.n_trees  # fewer walks than every tree each time
    assert counting.walks == n * (ens.n_trees + n_perm * on_f)


def test_running_sum_adds_in_order():
    """The running sums (position by position, vectorised over the other axes) are
    ``np.add.accumulate``'s, bit for bit and signed zeros kept, on values whose sum rounds
    differently in another order."""
    rng = np.random.default_rng(3)
    s = rng.normal(size=(40, 5, 3)) * 10.0 ** rng.integers(-8, 9, size=(40, 5, 3))
    s[:, 0, 0] = -0.0
    s[5:, 1, 1] = -0.0
    want = np.add.accumulate(s, axis=0)
    got = _exact_k._running_sum(np, s.copy())
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    assert np.signbit(got[-1, 0, 0])
    assert not np.array_equal(want[-1], np.add.accumulate(s[::-1], axis=0)[-1])  # order shows


def test_cross_fitted_folds_hold_out_every_row_once(monkeypatch):
    """Below ``CROSS_FIT_ROWS`` held-out rows, ``heldout_folds`` deals the rows into
    ``CROSS_FIT_FOLDS`` folds: each row is held out by exactly one fold and fitted on by
    the others; ``take_rows`` gives a fold its rows with their targets and weights. Above
    it, the one 70 / 30 split."""
    from types import SimpleNamespace

    from gpufs.backends import get_backend

    backend = get_backend("cpu")
    n = 103
    Xb = np.arange(n, dtype=np.uint8)[:, None].repeat(2, axis=1)
    y, w = np.arange(n) * 1.5, np.arange(n) + 1.0
    setup = SimpleNamespace(rows=DeviceRows(backend, Xb, y, w), backend=backend)
    pairs = _exact_k.heldout_folds(setup, 7)
    assert len(pairs) == _exact_k.CROSS_FIT_FOLDS
    held = np.concatenate([out for _, out in pairs])
    assert sorted(held.tolist()) == list(range(n))
    for fit_idx, out_idx in pairs:
        fit = _exact_k.take_rows(backend, setup.rows, fit_idx)
        out = _exact_k.take_rows(backend, setup.rows, out_idx)
        ids_fit, ids_out = fit.Xb[:, 0].astype(int), out.Xb[:, 0].astype(int)
        np.testing.assert_array_equal(ids_fit, fit_idx)
        assert sorted(ids_fit.tolist() + ids_out.tolist()) == list(range(n))
        np.testing.assert_array_equal(fit.y, y[ids_fit])
        np.testing.assert_array_equal(out.w, w[ids_out])
    monkeypatch.setattr(_exact_k, "CROSS_FIT_ROWS", 30)  # round(0.3 * 103) = 31 rows held out
    (single,) = _exact_k.heldout_folds(setup, 7)
    fit, out = _exact_k.split_heldout(setup, 7)
    np.testing.assert_array_equal(single[1], out)
    np.testing.assert_array_equal(single[0], fit)


def test_cross_fitting_keeps_noise_behind_a_weak_signal(monkeypatch):
    """The churn table (weak linear ``charges`` and 5-level ``region`` signals beside three
    Gaussian noise columns, 2,100 training rows), seed 1, k = 3: ranked on one 30 % split,
    a noise column's saving on 630 rows came within its standard error of ``charges``' and
    ahead of it; cross-fitted over every row, the three are planted signals."""
    from sklearn.model_selection import train_test_split

    X, y, planted = pn.churn(1)
    Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=1, stratify=y)

    def select():
        est = GBFSClassifier(n_features_to_select=3, random_state=0, device="cpu")
        return _select(est, Xtr, ytr), est.selection_pool_

    sel, pool = select()
    assert set(sel) <= set(planted), sel
    # five ranking fits, each of half the pool fit's 100 rounds (``ranking_rounds``)
    assert pool["trees_grown"]["heldout"] == 5 * 50 == 5 * _exact_k.ranking_rounds(100, 0.1)
    monkeypatch.setattr(_exact_k, "CROSS_FIT_ROWS", 0)  # one 30 % split, as before
    single, _ = select()
    assert pn.noise_ahead(single, planted), single


def _ranking_on_every_column(setup, heldout, mu, pool, seed):
    """``rank_by_heldout`` before its fits saw the pool's columns only: splits restricted to
    the pool (``RestrictedPenalty``) on all the columns, kept here as the reference."""
    d = setup.costs.shape[0]
    saving, var, n_trees = np.zeros(d), np.zeros(d), 0
    for fold, (fit_idx, held_idx) in enumerate(heldout):
        fit_rows = _exact_k.take_rows(setup.backend, setup.rows, fit_idx)
        held_rows = _exact_k.take_rows(setup.backend, setup.rows, held_idx)
        pen = _exact_k.RestrictedPenalty(
            mu, setup.costs, setup.groups, setup.scaling, len(pool), pool
        )
        ens, _, _ = setup._replace(rows=fit_rows, candidate_search=None).fit(pen)
        s, se = _exact_k.heldout_permutation_gains(
            ens, held_rows, setup.objective, pool, seed, stream=(fold,) if fold else ()
        )
        saving, var, n_trees = saving + s, var + se * se, n_trees + int(ens.n_trees)
    return saving, np.sqrt(var), n_trees


@pytest.mark.parametrize("case", ["churn_weighted_costs", "multiclass_wide", "single_split"])
def test_ranking_fits_on_the_pool_columns_equal_every_column_bit_for_bit(case, monkeypatch):
    """The ranking fits see only the pool's columns (``PoolBins``, ``_pool_columns``): their
    savings, standard errors and tree counts equal, bit for bit, those of fits on every column
    with splits restricted to the pool -- categorical columns, sample weights, feature costs
    and groups, seven classes, the cross-fitted folds and the single split."""
    from sklearn.datasets import make_classification

    if case == "churn_weighted_costs":
        X, y, _ = pn.churn(2, n=900)
        w = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
        est = GBFSClassifier(
            n_features_to_select=3,
            n_estimators=30,
            random_state=0,
            device="cpu",
            feature_costs=np.linspace(0.5, 2.0, X.shape[1]),
            feature_groups=[0, 1, 2, 3, 4, 5, 5, 6],
        )
        fit_kw = {"sample_weight": w}
    else:
        X, y = make_classification(
            150, 60, n_informative=8, n_classes=7, n_clusters_per_class=1, random_state=0
        )
        est = GBFSClassifier(n_features_to_select=3, n_estimators=15, random_state=0, device="cpu")
        fit_kw = {}
        if case == "single_split":
            monkeypatch.setattr(_exact_k, "CROSS_FIT_ROWS", 1)
    real, seen = _exact_k.rank_by_heldout, []

    def both(setup, heldout, mu, pool, seed):
        got = real(setup, heldout, mu, pool, seed)
        seen.append((got, _ranking_on_every_column(setup, heldout, mu, pool, seed), heldout))
        return got

    monkeypatch.setattr(_exact_k, "rank_by_heldout", both)
    est.fit(X, y, **fit_kw)
    ((got, want, heldout),) = seen
    assert len(heldout) == (1 if case == "single_split" else _exact_k.CROSS_FIT_FOLDS)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[2] == want[2]
    assert np.count_nonzero(got[0]) >= 2  # the pool's savings, not zeros on both sides


def test_ranking_rounds_are_half_the_rounds_with_a_floor():
    """Half the pool fit's rounds, but at least 5 / learning_rate of them (50 at 0.1) and at
    most all of them: 30 of 60 rounds ranked the weakest planted sinusoid below noise
    (``RANKING_MIN_STEP``)."""
    rounds = _exact_k.ranking_rounds
    assert [rounds(100, 0.1), rounds(200, 0.1), rounds(1000, 0.05)] == [50, 100, 500]
    assert [rounds(60, 0.1), rounds(10, 0.1), rounds(40, 0.5), rounds(3, 1.0)] == [50, 10, 20, 3]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two threads")
def test_folds_side_by_side_rank_as_one_fold_at_a_time_bit_for_bit(monkeypatch):
    """On two threads the five cross-fitted ranking fits run side by side
    (``_threading.run_side_by_side``), each with its own backend on one thread; their
    savings, standard errors and tree counts equal, bit for bit, one fold at a time on the
    calling thread (a threading layer that is not thread-safe, or folds above
    ``SIDE_BY_SIDE_MAX_CELLS``)."""
    import threading

    from sklearn.datasets import make_classification

    X, y = make_classification(
        150, 60, n_informative=8, n_classes=7, n_clusters_per_class=1, random_state=0
    )
    real_rank, real_gains = _exact_k.rank_by_heldout, _exact_k.heldout_permutation_gains
    results, threads = [], []

    def rank(*args):
        results.append(real_rank(*args))
        return results[-1]

    def gains(ens, rows, *args, **kwargs):
        threads.append((threading.current_thread().name, id(rows.backend)))
        return real_gains(ens, rows, *args, **kwargs)

    monkeypatch.setattr(_exact_k, "rank_by_heldout", rank)
    monkeypatch.setattr(_exact_k, "heldout_permutation_gains", gains)

    def fit():
        est = GBFSClassifier(
            n_features_to_select=3, n_estimators=15, random_state=0, device="cpu", n_jobs=2
        )
        return est.fit(X, y).selected_features_

    side = fit()
    assert len(threads) == _exact_k.CROSS_FIT_FOLDS
    assert all(name.startswith("gpufs-side") for name, _ in threads), threads
    assert len({b for _, b in threads}) == _exact_k.CROSS_FIT_FOLDS  # a backend per fold
    # one fold at a time: on a layer that is not thread-safe, or folds above the cells cap
    for why in ("layer", "cells"):
        threads.clear()
        with monkeypatch.context() as m:
            if why == "layer":
                m.setattr(_threading, "layer_is_thread_safe", lambda: False)
            else:
                m.setattr(_threading, "SIDE_BY_SIDE_MAX_CELLS", 100)  # 120 rows x the pool
            serial = fit()
        assert {name for name, _ in threads} == {threading.current_thread().name}, why
        np.testing.assert_array_equal(side, serial)
    (s_side, se_side, n_side), *serial_runs = results
    for s_one, se_one, n_one in serial_runs:
        np.testing.assert_array_equal(s_side, s_one)
        np.testing.assert_array_equal(se_side, se_one)
        assert n_side == n_one > 0 and np.count_nonzero(s_side) >= 2
