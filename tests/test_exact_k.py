"""GBFS's exact k by contribution (``selectors._exact_k``) and ``stability_rounds``
(``selectors._stability``): the planted families over several seeds, the final model's
features, the price still mattering, selection frequencies and their plot. Quality numbers
live in ``bench/bench_quality.py``, not here."""

import numba
import numpy as np
import pytest

from gpufs import GBFSClassifier, GBFSRegressor


def sinusoids(seed, n=1500, d=300):
    """The issue's planted problem, smaller: y = sum_i (i + 1) sin(3 x_f_i) over 5 planted
    columns f_i of uniform noise; the weakest one carries 1/55 of the signal's variance."""
    rng = np.random.default_rng(100 + seed)
    X = rng.random((n, d)).astype(np.float32)
    planted = sorted(rng.choice(d, 5, replace=False).tolist())
    y = sum((i + 1) * np.sin(3 * X[:, f]) for i, f in enumerate(planted))
    return X, y + 0.1 * rng.normal(size=n), planted


def _split_features(est):
    s = est.ensemble_.stacked()
    return set(np.unique(s["feature"][s["feature"] >= 0]).tolist())


@pytest.mark.parametrize("seed", range(4))
def test_sinusoids_all_planted_found_where_the_first_k_admitted_miss_one(seed):
    X, y, planted = sinusoids(seed)
    est = GBFSRegressor(
        n_estimators=60, max_depth=3, n_features_to_select=5, random_state=0, device="cpu"
    ).fit(X, y)
    assert sorted(est.selected_features_.tolist()) == planted
    # the model uses exactly those: no split on any other feature
    assert _split_features(est) == set(planted)
    assert set(np.flatnonzero(est.feature_importances_).tolist()) == set(planted)
    # the gain ranking of a plain fit finds them too (the goal's condition) ...
    plain = GBFSRegressor(n_estimators=60, max_depth=3, mu=0.0, random_state=0, device="cpu").fit(
        X, y
    )
    assert sorted(np.argsort(-plain.feature_importances_)[:5].tolist()) == planted
    pool = est.selection_pool_
    assert sorted(pool["chosen"]) == planted and len(pool["features"]) > 5
    assert pool["refit_mu"] == est.mu_


def first_k_admitted(X, y, k, **params):
    """The selection before exact k by contribution: the largest price at which k features
    enter within half the rounds, then a fit with the budget k there (the first k to enter)."""
    from gpufs.backends import get_backend
    from gpufs.engine.boosting import BoostingParams, DeviceRows, fit_boosting
    from gpufs.engine.grower import TreeParams
    from gpufs.engine.penalties import PenaltyState
    from gpufs.selectors._boost_setup import BoostSetup
    from gpufs.selectors._mu_search import gbfs_mu_search

    est = GBFSRegressor(
        n_estimators=1,
        device="cpu",
        random_state=0,
        **{key: v for key, v in params.items() if key != "n_estimators"},
    ).fit(X, y)
    backend = get_backend("cpu")
    rows = DeviceRows(backend, est.bin_mapper_.transform(X, backend), np.asarray(y, float))
    bp = BoostingParams(
        n_estimators=params["n_estimators"], tree=TreeParams(max_depth=params["max_depth"])
    )
    d = X.shape[1]
    costs, groups = np.ones(d), np.arange(d, dtype=np.int32)
    setup = BoostSetup(
        backend, rows, est._objective, est.bin_mapper_, bp, costs, groups, "root_sse"
    )
    search = gbfs_mu_search(setup, k, 0.05)
    pen = PenaltyState(search.mu, costs, groups, "root_sse", k)
    fit_boosting(backend, rows, est._objective, pen, est.bin_mapper_, bp, resume=search.checkpoint)
    return sorted(pen.order)


def test_the_first_k_admitted_miss_a_planted_sinusoid():
    """The budget alone (the first k to enter at the largest price that admits k within half
    the rounds: gpufs before exact k by contribution) keeps a noise column in place of the weak
    signal on every seed here, so the test above is not passed by any k search."""
    for seed in range(4):
        X, y, planted = sinusoids(seed)
        first = first_k_admitted(X, y, 5, n_estimators=60, max_depth=3)
        assert len(first) == 5 and first != planted and planted[0] not in first


def test_near_copies_of_unequal_cost_the_price_still_chooses():
    """The pool is ranked by gain per unit of cost: of two near-copies the expensive one is
    left out, where a plain gain ranking would take it."""
    rng = np.random.default_rng(0)
    n = 800
    z = rng.normal(size=n)
    X = np.column_stack([z, z + 0.05 * rng.normal(size=n), rng.normal(size=(n, 4))])
    y = 2 * z + 0.5 * X[:, 2] + 0.1 * rng.normal(size=n)
    costs = np.array([50.0, 1, 1, 1, 1, 1])
    est = GBFSRegressor(
        n_estimators=40, n_features_to_select=2, feature_costs=costs, random_state=0, device="cpu"
    ).fit(X, y)
    assert sorted(est.selected_features_.tolist()) == [1, 2]
    pool = est.selection_pool_
    gain = dict(zip(pool["features"], pool["gain"]))
    assert 0 not in pool["features"] or gain[0] / 50 < gain[1]
    plain = GBFSRegressor(n_estimators=40, mu=0.0, random_state=0, device="cpu").fit(X, y)
    assert np.argmax(plain.feature_importances_) == 0


def test_classifier_multiclass_exact_k_uses_exactly_the_chosen():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 12))
    y = np.argmax(X[:, :3] + 0.7 * rng.normal(size=(600, 3)), axis=1)
    est = GBFSClassifier(
        n_estimators=15, max_depth=3, n_features_to_select=4, random_state=0, device="cpu"
    ).fit(X, y)
    chosen = est.selection_pool_["chosen"]
    assert len(chosen) == 4 and set(est.selected_features_.tolist()) == set(chosen)
    assert _split_features(est) == set(chosen) and {0, 1, 2} <= set(chosen)
    grown = est.selection_pool_["trees_grown"]
    # the default held-out ranking adds its ranking fit (issue 35)
    assert set(grown) == {"probes", "pool", "heldout", "final"} and grown["final"] > 0


def test_selection_frequency_from_half_row_refits():
    X, y, planted = sinusoids(0, n=1000, d=60)
    kw = dict(n_estimators=40, max_depth=3, n_features_to_select=5, random_state=0, device="cpu")
    plain = GBFSRegressor(**kw).fit(X, y)
    assert plain.selection_frequency_ is None and plain.selection_pool_["frequency"] is None
    est = GBFSRegressor(stability_rounds=6, **kw).fit(X, y)
    f = est.selection_frequency_
    assert f.shape == (60,) and f.dtype == np.float64
    assert np.all((f >= 0) & (f <= 1)) and np.allclose(f * 6, np.round(f * 6))
    assert f.sum() == pytest.approx(5.0)  # each refit chooses 5
    # the strong signals are chosen in every refit; the weakest at least as often as noise
    assert sorted(f[planted].tolist())[1:] == [1.0] * 4
    assert f[planted].min() >= np.delete(f, planted).max()
    assert sorted(est.selected_features_.tolist()) == planted
    pool = est.selection_pool_
    assert pool["frequency"] == [float(f[j]) for j in pool["features"]]
    assert est.selection_pool_["trees_grown"]["stability"] > 0
    assert est.fit_times_["stability"] > 0
    # deterministic for a seed, and the chosen are the pool's most frequent
    again = GBFSRegressor(stability_rounds=6, **kw).fit(X, y)
    np.testing.assert_array_equal(again.selection_frequency_, f)
    top = sorted(pool["features"], key=lambda j: -f[j])[:5]
    assert {f[j] for j in top} == {f[j] for j in pool["chosen"]}


def test_stability_chooses_by_frequency_where_gain_would_not(monkeypatch):
    """The frequencies, not the gains, rank the pool when given: with frequencies that
    invert the gain ranking, the chosen are the pool's least gainful."""
    import gpufs.selectors.gbfs as gbfs_module

    X, y, planted = sinusoids(1, n=800, d=40)

    def inverted(setup, mu, k, n_refits, seed):
        return np.linspace(1.0, 0.0, setup.rows.shape[1]), 0

    monkeypatch.setattr(gbfs_module, "selection_frequency", inverted)
    est = GBFSRegressor(
        n_estimators=30,
        max_depth=3,
        n_features_to_select=3,
        stability_rounds=2,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    pool = est.selection_pool_["features"]
    assert sorted(est.selected_features_.tolist()) == sorted(pool)[:3]


def test_plot_selection_frequency():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from gpufs.plotting import plot_selection_frequency

    X, y, planted = sinusoids(2, n=800, d=40)
    est = GBFSRegressor(
        n_estimators=30,
        max_depth=3,
        n_features_to_select=5,
        stability_rounds=4,
        pool_ranking="gain",
        random_state=0,
        device="cpu",
    ).fit(X, y)
    ax = plot_selection_frequency(est)
    heights = [p.get_height() for p in ax.patches]
    assert heights == sorted(heights, reverse=True) and len(heights) >= 5
    labels = [t.get_text() for t in ax.get_xticklabels()]
    # the selected first, in colour
    assert set(labels[:5]) == {f"x{j}" for j in est.selected_features_}
    assert len({p.get_facecolor() for p in ax.patches[:5]}) == 1
    assert len(plot_selection_frequency(est, top=3).patches) == 3
    with pytest.raises(ValueError, match="stability_rounds"):
        plot_selection_frequency(
            GBFSRegressor(n_estimators=5, n_features_to_select=2, device="cpu").fit(X, y)
        )


# --- exact k means k (issue 35, item 3) ------------------------------------------------------
def _root_gains(est, X, y):
    """The fill rule recomputed in numpy: each feature's best split gain over all rows, on
    the squared error's gradients at the final model's predictions (h = 1, lambda = 1)."""
    from gpufs.backends.cpu import CPUBackend

    Xb = np.asarray(est.bin_mapper_.transform(np.asarray(X, np.float64), CPUBackend()))
    g = est.predict(X) - y
    out = np.full(X.shape[1], -np.inf)
    for f in range(X.shape[1]):
        b = Xb[:, f].astype(np.int64)
        G, H = np.bincount(b, g, 256), np.bincount(b, minlength=256).astype(float)
        gl, hl = np.cumsum(G)[:-1], np.cumsum(H)[:-1]
        ok = (hl > 0) & (H.sum() - hl > 0)
        gain = 0.5 * (
            gl**2 / (hl + 1)
            + (G.sum() - gl) ** 2 / (H.sum() - hl + 1)
            - G.sum() ** 2 / (H.sum() + 1)
        )
        if ok.any():
            out[f] = gain[ok].max()
    return out


def test_exact_k_returns_k_filled_from_the_best_remaining(tmp_path):
    """The issue's case at small size (k = 10 returned 8 at mu = 0): y is an exact sum of
    steps of 8 columns, and 30 trees of depth 2 at mu = 0 split on 6 of them only. The other
    4 come from the best remaining candidates by root-split gain on the final model's
    gradients: the two missing signals first, then the two best noise columns; they are
    marked in ``selection_filled_`` and kept in the model file; the warning stays."""
    import _planted_noise as pn
    from gpufs import SelectionWarning

    X, y, _ = pn.exact_fill(0)
    with pytest.warns(
        SelectionWarning,
        match=r"only 6 features entered the model at mu=0 .*"
        r"filled with the 4 other features",
    ):
        est = GBFSRegressor(
            n_features_to_select=10,
            mu=0.0,
            n_estimators=30,
            max_depth=2,
            random_state=0,
            device="cpu",
        ).fit(X, y)
    assert est.selected_features_.size == 10 and est.get_support().sum() == 10
    model = est.selected_features_[:6].tolist()
    assert _split_features(est) == set(model)  # the model does not split on the fill
    filled = est.selection_filled_.tolist()
    assert est.selected_features_[6:].tolist() == filled
    gains = _root_gains(est, X, y)
    rest = [f for f in range(12) if f not in model]
    assert filled == sorted(rest, key=lambda f: (-gains[f], f))[:4]
    assert set(filled[:2]) == set(range(8)) - set(model)  # the missed signals first
    path = tmp_path / "m.json"
    est.save_model(path)
    back = GBFSRegressor.load_model(path)
    np.testing.assert_array_equal(back.selected_features_, est.selected_features_)
    np.testing.assert_array_equal(back.selection_filled_, est.selection_filled_)
    np.testing.assert_array_equal(back.transform(X), est.transform(X))


def test_exact_k_no_fill_when_the_model_reaches_k():
    X, y, planted = sinusoids(0, n=600, d=30)
    est = GBFSRegressor(
        n_estimators=20, max_depth=3, n_features_to_select=5, random_state=0, device="cpu"
    ).fit(X, y)
    assert est.selection_filled_.size == 0 and est.selected_features_.size == 5


def test_the_heldout_split_refuses_rows_that_are_not_in_this_process():
    """Issue 35: a cluster fit asked for the held-out ranking once ran the gain ranking
    without a word (``split_heldout`` returned None for a cluster's rows), so its mu probes
    differed from the one-process fit's. The Dask estimators refuse it first; the split
    itself refuses too, so no other caller falls back silently."""
    from types import SimpleNamespace

    from gpufs.backends import get_backend
    from gpufs.engine.boosting import BoostingRows, DeviceRows
    from gpufs.selectors._exact_k import split_heldout

    class RemoteRows(BoostingRows):  # rows held elsewhere (a cluster's workers)
        shape = (50, 3)

    backend = get_backend("cpu")
    setup = SimpleNamespace(rows=RemoteRows(), backend=backend)
    with pytest.raises(ValueError, match="pool_ranking='heldout'.*RemoteRows"):
        split_heldout(setup, 0)
    # rows in this process split 35 / 15; two rows are too few to hold any out
    Xb = np.zeros((50, 3), np.uint8)
    local = SimpleNamespace(rows=DeviceRows(backend, Xb, np.zeros(50), None), backend=backend)
    fit, out = split_heldout(local, 0)
    assert (fit.shape[0], out.shape[0]) == (35, 15)
    tiny = SimpleNamespace(rows=DeviceRows(backend, Xb[:2], np.zeros(2), None), backend=backend)
    assert split_heldout(tiny, 0) is None


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two threads")
def test_stability_refits_side_by_side_equal_one_at_a_time(monkeypatch):
    """On two threads the small half-row refits run side by side (``run_side_by_side``):
    each refit's total gains, and so the frequencies, equal bit for bit those of one refit
    after another on the calling thread; refits above ``SIDE_BY_SIDE_MAX_CELLS`` (here: all)
    run one at a time."""
    import threading

    from gpufs import _threading
    from gpufs.selectors import _exact_k

    X, y, _ = sinusoids(0, n=600, d=30)
    kw = dict(n_estimators=20, max_depth=3, n_features_to_select=4, random_state=0)
    real_gains, real_run = _exact_k.total_gains, _threading.run_side_by_side
    in_refit, seen = threading.local(), []

    def gains(ensemble):
        g = real_gains(ensemble)
        if getattr(in_refit, "on", False):
            seen.append((threading.current_thread().name, g.tobytes()))
        return g

    def run(tasks, n_threads):
        def marked(task):
            def inner(stop):
                in_refit.on = True
                try:
                    return task(stop)
                finally:
                    in_refit.on = False

            return inner

        return real_run([marked(t) for t in tasks], n_threads)

    monkeypatch.setattr(_exact_k, "total_gains", gains)
    monkeypatch.setattr(_threading, "run_side_by_side", run)

    def fit():
        seen.clear()
        est = GBFSRegressor(stability_rounds=5, device="cpu", n_jobs=2, **kw).fit(X, y)
        return est.selection_frequency_, list(seen)

    freq_side, side = fit()
    assert len(side) == 5 and all(name.startswith("gpufs-side") for name, _ in side)
    monkeypatch.setattr(_threading, "SIDE_BY_SIDE_MAX_CELLS", 0)
    freq_one, one = fit()
    assert len(one) == 5 and {name for name, _ in one} == {threading.current_thread().name}
    np.testing.assert_array_equal(freq_side, freq_one)
    assert sorted(g for _, g in side) == sorted(g for _, g in one)
    assert len({g for _, g in one}) == 5  # five different refits, not one repeated


def test_plot_pool_ranking_draws_the_heldout_evidence_in_ranking_order():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from gpufs.plotting import plot_pool_ranking
    from gpufs.selectors._exact_k import HELDOUT_Z

    X, y, planted = sinusoids(2, n=800, d=40)
    est = GBFSRegressor(
        n_estimators=30, max_depth=3, n_features_to_select=3, random_state=0, device="cpu"
    ).fit(X, y)
    pool = est.selection_pool_
    assert pool["ranked"][:3] == pool["chosen"] and sorted(pool["ranked"]) == sorted(
        pool["features"]
    )
    ax = plot_pool_ranking(est)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == len(pool["features"])
    # the chosen first, in their order, then the rest by the lower bound
    assert labels[:3] == [f"x{j}" for j in pool["chosen"]]
    at = {f: i for i, f in enumerate(pool["features"])}
    drawn = [line.get_ydata()[0] for line in ax.lines if line.get_marker() == "o"]
    names = [int(t[1:]) for t in labels]
    assert drawn == [pool["heldout_gain"][at[f]] for f in names]
    bounds = [
        pool["heldout_gain"][at[f]] - HELDOUT_Z * pool["heldout_se"][at[f]] for f in names[3:]
    ]
    assert bounds == sorted(bounds, reverse=True)
    assert len(plot_pool_ranking(est, top=2).get_xticklabels()) == 2
    with pytest.raises(ValueError, match="pool_ranking='gain'"):
        plot_pool_ranking(
            GBFSRegressor(
                n_estimators=5, n_features_to_select=2, pool_ranking="gain", device="cpu"
            ).fit(X, y)
        )
    with pytest.raises(ValueError, match="n_features_to_select"):
        plot_pool_ranking(GBFSRegressor(n_estimators=5, device="cpu").fit(X, y))


@pytest.mark.parametrize("plot", ["plot_pool_ranking", "plot_selection_frequency"])
def test_plots_of_an_unfitted_gbfs_say_not_fitted(plot):
    pytest.importorskip("matplotlib")
    from sklearn.exceptions import NotFittedError

    import gpufs.plotting

    with pytest.raises(NotFittedError, match="call fit first"):
        getattr(gpufs.plotting, plot)(GBFSRegressor(n_features_to_select=2))


def _two_rows_weighted(n=60, d=8):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] > 0).astype(int)
    w = np.zeros(n)
    # the last row of each class, at a mean weight of 1 (so reg_lambda does not swamp them);
    # with random_state=0, the fourth half-row refit draws neither
    w[[int(np.flatnonzero(y == 0)[-1]), int(np.flatnonzero(y == 1)[-1])]] = n / 2
    return X, y, w


def test_heldout_ranking_without_weight_on_a_side_ranks_by_gain():
    """Sample weights on two of 60 rows: some cross-fitted fold holds no weight on one side
    (no mean to start a fit from: a ZeroDivisionError before). The pool is ranked by training
    gain instead, with a warning, and the fit is the gain-ranked one."""
    X, y, w = _two_rows_weighted()
    kw = dict(n_features_to_select=3, n_estimators=10, random_state=0, device="cpu")
    with pytest.warns(UserWarning, match="ranked by training gain"):
        est = GBFSClassifier(**kw).fit(X, y, sample_weight=w)
    assert est.selection_pool_["heldout_gain"] is None
    gain = GBFSClassifier(pool_ranking="gain", **kw).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(est.selected_features_, gain.selected_features_)
    assert len(est.selected_features_) == 3
    pytest.importorskip("matplotlib")
    from gpufs.plotting import plot_pool_ranking

    with pytest.raises(ValueError, match="the held-out ranking could not run"):
        plot_pool_ranking(est)


def test_stability_refit_drawing_rows_that_weigh_nothing_chooses_nothing():
    """A half-row refit whose rows all weigh 0 holds no evidence: it chooses no feature
    (counted as 0 in every frequency), with a warning, instead of failing the fit."""
    X, y, w = _two_rows_weighted()
    B = 8
    with pytest.warns(UserWarning, match=f"stability_rounds={B}: [1-9]"):
        est = GBFSClassifier(
            n_features_to_select=3,
            stability_rounds=B,
            pool_ranking="gain",
            n_estimators=10,
            random_state=0,
            device="cpu",
        ).fit(X, y, sample_weight=w)
    assert est.selection_frequency_.max() <= 1 - 1 / B
    assert len(est.selected_features_) == 3
