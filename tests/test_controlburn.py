"""ControlBurnClassifier / ControlBurnRegressor: selection on planted correlated groups, exactly
k features, coverage, costs and groups, paths, determinism, bad input, scikit-learn checks."""

import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from gpufs import SelectionWarning
from gpufs._device import gpu_available
from gpufs.selectors.controlburn import ControlBurnClassifier, ControlBurnRegressor
from gpufs.selectors.gbfs import GBFSClassifier, GBFSRegressor

# Small unpruned forests (``oob_prune=None``): these tests pin the lasso's search, its
# completions and its warnings on forests that cover every feature they were written for;
# pruning (the default) and the fill of a short selection are tested in
# ``test_controlburn_prune.py`` and ``test_controlburn_fill.py``.
SMALL_C = dict(
    max_depth=2,
    max_trees_per_round=10,
    oob_prune=None,
    refit_estimator=GBFSClassifier(mu=0.0, n_estimators=10),
)
SMALL_R = dict(
    max_depth=2,
    max_trees_per_round=10,
    oob_prune=None,
    refit_estimator=GBFSRegressor(mu=0.0, n_estimators=10),
)


def planted_groups(seed, m=1000, n_groups=3, n_copies=6, noise=0.1, n_noise=6):
    """Section 5.1 style: informative binary features, each with noisy copies (+ N(0, 0.1^2)),
    plus pure-noise features. Returns X, y, group label of every column."""
    rng = np.random.RandomState(seed)
    B = rng.randint(0, 2, size=(m, n_groups)).astype(float)
    y = (2.0 * (B.sum(1) - n_groups / 2) + rng.logistic(size=m) > 0).astype(int)
    cols, groups = [], []
    for j in range(n_groups):
        cols.append(B[:, [j]] + noise * rng.randn(m, n_copies + 1))
        groups += [j] * (n_copies + 1)
    cols.append(rng.randn(m, n_noise))
    groups += list(range(n_groups, n_groups + n_noise))
    return np.hstack(cols), y, np.array(groups)


def regression_data(m=600, d=8, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, d)
    y = 2 * X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] + 0.2 * rng.randn(m)
    return X, y


# --- the paper's claim on correlated groups ----------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_one_feature_per_planted_group_where_mdi_keeps_copies(seed):
    X, y, groups = planted_groups(seed)
    k = 3
    rf = RandomForestClassifier(n_estimators=100, random_state=0).fit(X, y)
    mdi = np.argsort(-rf.feature_importances_)[:k]
    cb = ControlBurnClassifier(
        n_features_to_select=k,
        tree_type="single",
        max_depth=2,
        random_state=0,
        refit_estimator=GBFSClassifier(mu=0.0, n_estimators=10),
    ).fit(X, y)
    sel = cb.selected_features_
    assert sel.size == k and cb.selection_exact_
    # ControlBurn: one feature from each informative group; MDI: several copies of one group
    assert sorted(groups[sel].tolist()) == [0, 1, 2]
    assert len(set(groups[mdi].tolist())) < k
    # refit on each selection (the paper's protocol: a random forest, cross-validated AUC)
    auc = [
        cross_val_score(
            RandomForestClassifier(n_estimators=50, random_state=0),
            X[:, f],
            y,
            cv=3,
            scoring="roc_auc",
        ).mean()
        for f in (mdi, sel)
    ]
    assert auc[1] > auc[0] + 0.02


def planted_group_data(seed, kind, task, m=1000, n_groups=3, n_copies=2, n_noise=6):
    """Groups of ``n_copies + 1`` near-copies (+ N(0, 0.1^2); correlation > 0.95) of binary or
    Gaussian signals that all drive y, plus noise columns. Returns X, y, group of every
    column (noise columns get labels >= n_groups)."""
    rng = np.random.RandomState(seed)
    if kind == "binary":
        S = rng.randint(0, 2, size=(m, n_groups)).astype(float)
        signal = 2.0 * (S.sum(1) - n_groups / 2)
    else:
        S = rng.randn(m, n_groups)
        signal = 1.5 * S.sum(1)
    y = (
        (signal + rng.logistic(size=m) > 0).astype(int)
        if task == "classification"
        else signal + rng.randn(m)
    )
    cols = [S[:, [j]] + 0.1 * rng.randn(m, n_copies + 1) for j in range(n_groups)]
    cols.append(rng.randn(m, n_noise))
    groups = np.r_[
        np.repeat(np.arange(n_groups), n_copies + 1), np.arange(n_groups, n_groups + n_noise)
    ]
    return np.hstack(cols), y, groups


@pytest.mark.parametrize("kind", ["binary", "gaussian"])
@pytest.mark.parametrize("task", ["classification", "regression"])
def test_default_keeps_one_feature_per_group_of_three_near_copies(kind, task):
    """The issue's case: defaults, k = number of planted groups (3 near-copies each,
    correlation > 0.95, plus noise columns): exactly one feature from each group, on several
    seeds. Measured on seeds 0-9 of these four kinds: 40 of 40 with the default reweighting,
    25 of 40 with the paper's plain lasso (``reweight_steps=0``); on seeds 10-29, 75 of 80
    against 47 of 80 (the misses are forests whose only trees on some group use several
    features)."""
    Est = ControlBurnClassifier if task == "classification" else ControlBurnRegressor
    counts, plain_counts, merged = [], [], []
    for seed in range(5):
        X, y, groups = planted_group_data(seed, kind, task)
        sel = Est(n_features_to_select=3, random_state=seed).fit(X, y).selected_features_
        counts.append(np.bincount(groups[sel], minlength=9)[:3].tolist())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # some k = 3 are completions here
            plain = Est(
                n_features_to_select=3, random_state=seed, reweight_steps=0, oob_prune=None
            ).fit(X, y)
        plain_counts.append(np.bincount(groups[plain.selected_features_], minlength=9)[:3].tolist())
        merged.append(plain.merged_near_copies_)
    assert counts == [[1, 1, 1]] * 5, counts
    # Without the reweighting the lasso's 3 hold two copies of a group on some seed, and the
    # near-copy rule (selectors._near_copies) then keeps one per group too.
    assert plain_counts == [[1, 1, 1]] * 5, plain_counts
    assert any(merged), merged
    assert all(len(g) >= 2 and len(set(groups[g])) == 1 for m in merged for g in m)


def test_unequal_groups_never_two_copies_and_mostly_one_per_group():
    """Issue 25, item 3: groups of near-copies whose signals differ in kind (main effect,
    interaction only, weak; ``tests/_near_copy_data.py``), 4 designs x 2 tasks x 3 seeds,
    defaults, k = 3. No selection holds two copies of one group (the near-copy rule), and
    every regression case keeps one per group. Before the rule, the default kept one per group
    in 9 of the 40 cases of seeds 0-4 (two copies of a strong group in most of the others);
    with the pool's importance ranking every place, 35 of 40 (the misses took a noise column
    for the weak group under logistic noise, which the pool's lasso weighs as little as noise);
    with a pool group below 1 % of the pool's importance left to the forest's importance
    summed over the group's copies, 39 of 40 (12 of 12 classification on seeds 0-2; the miss,
    seed 4, is a lasso selection without near-copies, outside the rule)."""
    from _near_copy_data import DESIGNS, near_copy_groups

    one_per_group = {"regression": 0, "classification": 0}
    for design in DESIGNS:
        for task, Est in (
            ("regression", ControlBurnRegressor),
            ("classification", ControlBurnClassifier),
        ):
            for seed in range(3):
                X, y, groups = near_copy_groups(seed, design, task)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = Est(n_features_to_select=3, random_state=seed).fit(X, y)
                hit = np.bincount(groups[est.selected_features_], minlength=9)
                assert est.selected_features_.size == 3
                assert hit.max() == 1, (design, task, seed, hit)
                one_per_group[task] += hit[:3].tolist() == [1, 1, 1]
    assert one_per_group["regression"] == 12, one_per_group
    assert one_per_group["classification"] >= 11, one_per_group


def test_near_copy_rule_leaves_a_group_below_one_percent_of_the_pool_to_the_forest():
    """The rule's choice (``selectors._near_copies.choose_k``) on a hand-made pool: features 0
    and 1 are near-copies, 2 is alone, 9 is a noise column the pool's lasso weighs at 0.2 % of
    its importance; outside the pool, 5, 6 and 7 are near-copies of a weak variable (each below
    the noise columns 8 and 9 in the forest, their sum above) and 8 is noise. The third place
    goes to the weak group by its summed forest importance, not to 9; at 2 % of the pool, 9
    keeps its place on the pool's word."""
    from gpufs.selectors._near_copies import POOL_MIN_SHARE, choose_k, n_material_groups

    cands = [0, 1, 2, 9, 5, 6, 7, 8]
    corr = np.eye(len(cands))
    for a, b in ((0, 1), (4, 5), (4, 6), (5, 6)):  # positions in cands
        corr[a, b] = corr[b, a] = 0.99
    pool_imp = np.zeros(10)
    pool_imp[[0, 1, 2, 9]] = [1.0, 0.5, 0.8, 0.005]
    forest = np.zeros(10)
    forest[[0, 1, 2, 9, 5, 6, 7, 8]] = [5.0, 3.0, 4.0, 0.9, 0.6, 0.5, 0.4, 0.8]
    assert pool_imp[9] < POOL_MIN_SHARE * pool_imp.sum()
    assert n_material_groups(cands[:4], pool_imp, corr[:4, :4]) == 2
    chosen, merged = choose_k(cands, pool_imp, corr, 3, n_pool=4, forest_importance=forest)
    assert chosen == [0, 2, 5]
    assert merged == [[0, 1], [5, 6, 7]]
    assert choose_k(cands, pool_imp, corr, 4, n_pool=4, forest_importance=forest)[0] == [
        0,
        2,
        5,
        9,
    ]
    pool_imp[9] = 0.05  # 2 % of the pool: kept on the pool's word
    assert n_material_groups(cands[:4], pool_imp, corr[:4, :4]) == 3
    chosen, _ = choose_k(cands, pool_imp, corr, 3, n_pool=4, forest_importance=forest)
    assert chosen == [0, 2, 9]


def test_one_per_group_while_another_group_is_available():
    """Issue 35, item 2: three groups of four near-copies (1.5 g0 - 1.2 g1 + g2 g0), 8 noise
    columns, 3,000 rows, k = 3. The lasso's pool of 3 k held only two groups (the interaction
    group enters late), and the near-copy rule filled the third place with a second copy of
    the first group ([0, 3, 5] with merged groups [[3, 0, 2, 1], [5, 6, 4]] on the issue's
    seed; seeds 0 and 2 here). The rest now comes from features outside the pool, never a
    second member of a merged group while another group or a lone feature is left."""
    from _near_copy_data import interaction_groups

    for seed in range(3):
        X, y, groups = interaction_groups(seed, "regression")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = ControlBurnRegressor(n_features_to_select=3, random_state=seed).fit(X, y)
        sel = est.selected_features_
        assert sel.size == 3
        assert sorted(groups[sel].tolist()) == [0, 1, 2], (seed, sel, est.merged_near_copies_)
        for g in est.merged_near_copies_:
            assert len(set(g) & set(sel.tolist())) <= 1, (seed, sel, g)


def test_default_forest_finds_the_informative_features():
    X, y = regression_data()
    est = ControlBurnRegressor(
        n_features_to_select=3, max_depth=4, random_state=0, path_k_max=4
    ).fit(X, y)
    assert sorted(est.selected_features_.tolist()) == [0, 1, 2]
    assert est.selected_features_[0] == 0  # most important first
    assert est.score(X, y) > 0.9
    assert (est.tree_weights_ >= 0).all() and (est.tree_weights_ > 0).any()
    assert est.feature_importances_.sum() == pytest.approx(1.0)
    assert (est.feature_importances_[~est.support_] == 0).all()
    p = est.selection_path_
    # k = 2 is unreachable here: one lambda step brings x1 and x2 in together. The path says
    # why, and holds the completed selection a fit with n_features_to_select=2 makes.
    assert p["k"] == [1, 2, 3, 4] and sorted(p["unreachable"]) == [2]
    assert p["exact"] == {1: True, 2: False, 3: True, 4: True}
    assert p["unreachable"][2].startswith(
        "on the costs reweighted for k=2, the number of selected features jumps from 1"
    )
    for k in p["k"]:
        assert len(p["features"][k]) == k
    with pytest.warns(SelectionWarning, match="no lambda selects exactly 2 features"):
        two = ControlBurnRegressor(n_features_to_select=2, max_depth=4, random_state=0).fit(X, y)
    assert p["features"][2] == sorted(two.selected_features_.tolist())
    assert p["features"][3] == sorted(est.selected_features_.tolist())
    assert est.selection_exact_
    # The plain lasso's path (no reweighting): one cost vector, so lambda falls as k grows.
    plain = (
        ControlBurnRegressor(
            n_features_to_select=3, max_depth=4, random_state=0, path_k_max=4, reweight_steps=0
        )
        .fit(X, y)
        .selection_path_
    )
    lams = [plain["lambda"][k] for k in plain["k"]]
    assert lams == sorted(lams, reverse=True) and max(lams) < plain["lambda_max"]
    assert plain["lambda_max"] == p["lambda_max"]
    Xt = est.transform(X)
    np.testing.assert_array_equal(Xt, X[:, np.sort(est.selected_features_)])


def test_alpha_gives_the_lasso_solution_at_that_lambda():
    X, y = regression_data()
    est = ControlBurnRegressor(alpha=1e9, **SMALL_R, random_state=0).fit(X, y)
    assert est.selected_features_.size == 0 and (est.tree_weights_ == 0).all()
    est.predict(X)  # a constant model
    est = ControlBurnRegressor(alpha=1e-6, **SMALL_R, random_state=0).fit(X, y)
    assert est.selected_features_.size == est.forest_coverage_
    assert est.lambda_ == 1e-6


# --- zero costs: free features ---------------------------------------------------------------


def test_zero_feature_costs_make_free_features():
    X, y = regression_data(m=300)
    costs = np.ones(X.shape[1])
    costs[[0, 1]] = 0.0  # the two strongest features are free
    est = ControlBurnRegressor(
        n_features_to_select=3, feature_costs=costs, **SMALL_R, random_state=0
    ).fit(X, y)
    assert est.selection_exact_ and est.selected_features_.size == 3
    assert {0, 1} <= set(est.selected_features_.tolist())
    # every feature free: lambda cannot remove any, so k cannot be reached; fit says so
    with pytest.warns(
        UserWarning,
        match=r"no lambda selects exactly 2 features .*zero-cost "
        r"\(free\) trees alone select",
    ):
        est = ControlBurnRegressor(
            n_features_to_select=2, feature_costs=np.zeros(X.shape[1]), **SMALL_R, random_state=0
        ).fit(X, y)
    assert not est.selection_exact_ and est.selected_features_.size > 2
    assert est.predict(X).shape == (300,)


# --- coverage ---------------------------------------------------------------------------------


def test_coverage_and_completion_warnings_say_what_was_selected():
    """Issue 26, item 14: the forest covers 6 features and k = 8 was asked; no lambda gives
    6 and none passes 4, so the lasso selects 4 and the fill (issue 35, item 3) adds the
    forest's other 2. One SelectionWarning says that (it said "selecting all 6 covered
    features" and a second warning "completed them with []")."""
    rng = np.random.default_rng(1)
    X = np.zeros((40, 10))
    X[:, :6] = rng.random((40, 6))
    y = ((X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=40)) > 0.9).astype(int)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        est = ControlBurnClassifier(
            n_features_to_select=8, max_depth=4, random_state=0, device="cpu", oob_prune=None
        ).fit(X, y)
    (warning,) = [w for w in rec if w.category is SelectionWarning]
    message = str(warning.message)
    assert warning.filename == __file__  # it points at the line that called fit
    n_sel = est.selected_features_.size
    # the lasso's 4, then the forest's 2 other features (selection_filled_): the 4 constant
    # columns have no split, so 6 is all the table offers
    assert est.forest_coverage_ == 6 and n_sel == 6 and not est.selection_exact_
    filled = est.selection_filled_.tolist()
    assert len(filled) == 2 and est.selected_features_[4:].tolist() == filled
    assert sorted(est.selected_features_.tolist()) == list(range(6))
    assert np.all(est.feature_importances_[filled] == 0)
    assert message.startswith(
        "the forest uses only 6 of the 10 features, fewer than "
        "n_features_to_select=8; no lambda selects exactly 6 features"
    )
    assert (
        "took the 4 features of the densest solution: no lambda, not even 0, selects more"
        in message
    )
    names = ", ".join(f"x{f}" for f in filled)
    assert (
        f"; selected 4 features, then filled the selection with 2 features ({names}) by the "
        "forest's other splits" in message
    )
    assert "(selection_filled_). Grow a more feature-diverse forest" in message
    assert "selecting all" not in message and "with []" not in message


def test_path_k_max_on_breast_cancer_holds_every_k():
    """Issue 27, item 7: path_k_max=15 on breast cancer gave k = 1-6, 9, 10, 13, 15, and the
    texts of two unreachable k seemed to contradict each other. Every k is there now, each as
    n_features_to_select=k selects it; a completed k says so and why, on its own costs."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    est = ControlBurnClassifier(n_features_to_select=5, path_k_max=15, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionWarning)  # k = 5 itself is exact
        sp = est.fit(X, y).selection_path_
    assert sp["k"] == list(range(1, 16))
    assert all(len(sp["features"][k]) == k for k in sp["k"])
    # a k no lambda gives is a completion, and not exact (nor is a k whose near-copies were
    # merged: breast cancer's radius, perimeter and area columns are near-copies)
    assert sp["unreachable"] and not any(sp["exact"][k] for k in sp["unreachable"])
    for k, why in sp["unreachable"].items():
        assert why.startswith(f"on the costs reweighted for k={k}, "), why
        # Issue 35, item 2: no k is missing for want of a finer path. Each is proven
        # unreachable: the one tree entering between two neighbouring solved lambdas brings
        # more new features than k needs (k = 7, 8, 11, 12 and 14 here).
        assert "the one tree that enters there brings" in why, why
    k = min(sp["unreachable"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectionWarning)
        fit_k = ControlBurnClassifier(n_features_to_select=k, random_state=0).fit(X, y)
    assert sp["features"][k] == sorted(fit_k.selected_features_.tolist())
    # Issue 35: which k come from one lasso solution and which from ranking
    assert sorted(sp["source"]) == sp["k"]
    assert set(sp["source"].values()) <= {"lasso", "completed", "near_copies"}
    assert all(sp["exact"][k] == (sp["source"][k] == "lasso") for k in sp["k"])
    assert all(sp["source"][k] != "lasso" for k in sp["unreachable"])
    assert "lasso" in sp["source"].values()


def test_lasso_calls_of_one_selection_share_their_solves(monkeypatch):
    """Issue 35, item 3: the k search, the near-copy rule's pools and the path's searches of
    one fit descend from lambda_max by the same steps; each step they have in common is
    solved once (``gpufs.lasso._search._sharing``). The fit is the same bit for bit as with
    every search solving alone, with fewer solves (breast cancer, path_k_max=15: 221 instead
    of 514, ``bench/results/controlburn_cpu2.jsonl``)."""
    import contextlib

    from _near_copy_data import interaction_groups
    from gpufs.lasso import TreeLasso, _search

    calls = []
    solve = TreeLasso.solve

    def counted(self, lam, **kw):
        calls.append(lam)
        return solve(self, lam, **kw)

    monkeypatch.setattr(TreeLasso, "solve", counted)
    X, y, _ = interaction_groups(0, "regression", m=1000)
    est = ControlBurnRegressor(n_features_to_select=3, path_k_max=5, random_state=0)
    est.set_params(warm_start=True)

    def fit():
        calls.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        sp = est.selection_path_
        keys = ("features", "lambda", "train_loss", "source", "unreachable")
        return (
            est.selected_features_.tolist(),
            est.tree_weights_.tolist(),
            est.merged_near_copies_,
            [sp[k] for k in keys],
        ), len(calls)

    fit()  # grows the forest
    shared, n_shared = fit()
    with monkeypatch.context() as m:
        m.setattr(_search, "_sharing", contextlib.nullcontext)
        alone, n_alone = fit()
    # the near-copy rule's pools ran (k = 4 and 5 hold two copies of some group)
    assert est.forest_reused_ and "near_copies" in est.selection_path_["source"].values()
    assert shared == alone
    assert n_shared < n_alone, (n_shared, n_alone)


def test_verbose_shows_a_bar_over_the_lasso_search(capsys):
    """Issue 36, item 12: after the forest's bar the lasso search was silent (15-20 s on a
    large table); with verbose it has a bar of its own, one tick per solve."""
    X, y = regression_data()
    ControlBurnRegressor(n_features_to_select=2, verbose=True, random_state=0, **SMALL_R).fit(X, y)
    err = capsys.readouterr().err
    assert "gpufs ControlBurn forest" in err
    assert "gpufs ControlBurn lasso search" in err and "solve" in err
    assert err.index("gpufs ControlBurn forest") < err.index("gpufs ControlBurn lasso search")
    ControlBurnRegressor(n_features_to_select=2, random_state=0, **SMALL_R).fit(X, y)
    assert "lasso search" not in capsys.readouterr().err


def test_selection_warning_is_a_filterable_user_warning():
    import gpufs

    assert issubclass(gpufs.SelectionWarning, UserWarning)
    X, y = regression_data(m=300)
    kw = dict(n_features_to_select=2, feature_costs=np.zeros(X.shape[1]), random_state=0, **SMALL_R)
    with pytest.warns(gpufs.SelectionWarning, match="no lambda selects exactly 2"):
        ControlBurnRegressor(**kw).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=gpufs.SelectionWarning)
        ControlBurnRegressor(**kw).fit(X, y)  # nothing else is raised


def test_dask_estimators_offer_predict_proba_where_the_single_process_ones_do():
    """One lazy ``predict_proba`` serves every Dask estimator (``DaskEstimatorBase``); it is
    there only where the single-process class has one (ControlBurn's: the refit model's)."""
    pytest.importorskip("dask.distributed")
    from sklearn.svm import LinearSVC

    from gpufs.dask import (
        DaskControlBurnClassifier,
        DaskControlBurnRegressor,
        DaskGBFSClassifier,
        DaskGBFSRegressor,
    )

    assert hasattr(DaskGBFSClassifier(), "predict_proba")
    assert hasattr(DaskControlBurnClassifier(), "predict_proba")
    assert not hasattr(DaskGBFSRegressor(), "predict_proba")
    assert not hasattr(DaskControlBurnRegressor(), "predict_proba")
    assert not hasattr(DaskControlBurnClassifier(refit_estimator=LinearSVC()), "predict_proba")


def test_coverage_warning_and_remedies():
    rng = np.random.RandomState(0)
    X = rng.randn(300, 8)
    y = 5 * X[:, 0] + 0.5 * X[:, 1:].sum(1)
    kw = dict(
        forest_method="bag",
        max_depth=1,
        n_features_to_select=4,
        random_state=0,
        oob_prune=None,
        refit_estimator=GBFSRegressor(mu=0.0, n_estimators=5),
    )
    with pytest.warns(UserWarning, match="max_features") as rec:
        est = ControlBurnRegressor(**kw).fit(X, y)
    assert "fewer than n_features_to_select=4" in str(rec[0].message)
    assert est.forest_coverage_ == 1 and est.forest_features_.tolist() == [0]
    assert est.selected_features_.tolist() == [0]
    for remedy in (dict(max_features=2), dict(tree_type="single")):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            est = ControlBurnRegressor(**{**kw, **remedy}).fit(X, y)
        # the lasso itself reaches 4 (not the completion of an unreachable k), with x0 first
        assert est.forest_coverage_ == 8 and est.selection_exact_
        assert est.selected_features_.size == 4 and est.selected_features_[0] == 0


# --- determinism ------------------------------------------------------------------------------


@pytest.mark.parametrize("Est, task", [(ControlBurnRegressor, "r"), (ControlBurnClassifier, "c")])
def test_determinism(Est, task):
    X, y = regression_data(m=400)
    if task == "c":
        y = (y > 0).astype(int)
    kw = dict(
        n_features_to_select=3,
        max_depth=3,
        max_features=0.5,
        random_state=3,
        refit_estimator=(GBFSClassifier if task == "c" else GBFSRegressor)(mu=0.0, n_estimators=5),
    )
    a, b = Est(**kw).fit(X, y), Est(**kw).fit(X, y)
    for k, v in a.forest_.ensemble.stacked().items():
        np.testing.assert_array_equal(v, b.forest_.ensemble.stacked()[k])
    np.testing.assert_array_equal(a.forest_.feature_masks, b.forest_.feature_masks)
    np.testing.assert_array_equal(a.tree_weights_, b.tree_weights_)
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    assert a.lambda_ == b.lambda_
    assert (a.tree_weights_ >= 0).all()
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


# --- classes, weights, costs, groups, sketching -----------------------------------------------


def test_binary_and_multiclass_k_features():
    # y depends on x0 (most), x1 and x2: the classifiers pick the strongest ones. (The size
    # alone would prove nothing: an unreachable k is completed to k features.)
    X, y = regression_data()
    yb = np.where(y > 0, "yes", "no")
    with pytest.warns(UserWarning, match="no lambda selects exactly 2 features"):
        est = ControlBurnClassifier(
            n_features_to_select=2, random_state=0, max_depth=3, oob_prune=None
        ).fit(X, yb)
    assert set(est.selected_features_.tolist()) == {0, 1} and not est.selection_exact_
    assert set(est.classes_) == {"no", "yes"}
    assert est.predict_proba(X).shape == (X.shape[0], 2)
    assert est.score(X, yb) > 0.8
    y3 = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    est = ControlBurnClassifier(
        n_features_to_select=3, random_state=0, max_depth=3, oob_prune=None
    ).fit(X, y3)
    assert sorted(est.selected_features_.tolist()) == [0, 1, 2] and est.selection_exact_
    assert est.predict_proba(X).shape == (X.shape[0], 3)
    assert set(est.forest_.tree_column.tolist()) == {0, 1, 2}


def test_sample_weight_of_ones_is_no_weight():
    X, y = regression_data(m=300)
    a = ControlBurnRegressor(n_features_to_select=2, **SMALL_R, random_state=0).fit(X, y)
    b = ControlBurnRegressor(n_features_to_select=2, **SMALL_R, random_state=0).fit(
        X, y, sample_weight=np.ones(300)
    )
    np.testing.assert_array_equal(a.tree_weights_, b.tree_weights_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_feature_costs_steer_the_choice_between_duplicates():
    X, y = regression_data()
    Xd = np.c_[X, X[:, 0] + 1e-3 * np.random.RandomState(1).randn(X.shape[0])]  # col 8 ~ col 0
    costs = np.ones(9)
    costs[0] = 50.0
    est = ControlBurnRegressor(
        n_features_to_select=3, feature_costs=costs, max_depth=3, random_state=0, max_features=0.5
    ).fit(Xd, y)
    assert 8 in est.selected_features_ and 0 not in est.selected_features_


def test_groups_with_costs_and_sketch():
    X, y = regression_data()
    groups = [0, 1, 2, 3, 3, 4, 4, 5]
    # y depends on x0, x1 and x2 (each its own group, the cheapest costs): the informative
    # features are found through the groups, costs and a count sketch. (The sizes alone would
    # prove nothing: an unreachable k is completed to k features.)
    est = ControlBurnRegressor(
        n_features_to_select=3,
        feature_groups=groups,
        feature_costs=np.arange(1, 9.0),
        max_depth=3,
        oob_prune=None,
        random_state=0,
        sketch="count",
        sketch_size=300,
    ).fit(X, y)
    assert sorted(est.selected_features_.tolist()) == [0, 1, 2] and est.selection_exact_
    with pytest.warns(UserWarning, match="no lambda selects exactly 2 features"):
        est = ControlBurnRegressor(
            n_features_to_select=2,
            feature_groups=groups,
            group_costs={0: 1, 1: 1, 2: 1, 3: 1, 4: 9, 5: 1},
            max_depth=3,
            oob_prune=None,
            random_state=0,
        ).fit(X, y)
    assert sorted(est.selected_features_.tolist()) == [0, 1]
    yb = (y > 0).astype(int)
    with pytest.warns(UserWarning, match="no lambda selects exactly 2 features"):
        est = ControlBurnClassifier(
            n_features_to_select=2,
            sketch="rows",
            sketch_size=400,
            max_depth=3,
            oob_prune=None,
            random_state=0,
        ).fit(X, yb)
    assert sorted(est.selected_features_.tolist()) == [0, 1]


def test_refit_estimator_and_pandas():
    pd = pytest.importorskip("pandas")
    X, y = regression_data()
    cols = [f"f{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols)
    yb = (y > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=10, random_state=0)
    est = ControlBurnClassifier(
        n_features_to_select=3, refit_estimator=rf, max_depth=3, random_state=0
    ).fit(df, yb)
    assert isinstance(est.refit_estimator_, RandomForestClassifier)
    assert est.refit_estimator_ is not rf
    assert set(est.selected_feature_names_) == {"f0", "f1", "f2"}
    keep = np.sort(est.selected_features_)
    np.testing.assert_array_equal(np.asarray(est.transform(df)), X[:, keep])
    out = est.set_output(transform="pandas").transform(df)
    assert list(out.columns) == [c for c in cols if c in set(est.selected_feature_names_)]
    assert est.predict_proba(df).shape == (X.shape[0], 2)
    assert list(est.get_feature_names_out()) == list(out.columns)


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, match",
    [
        (
            dict(n_features_to_select=0),
            r"'n_features_to_select' parameter of ControlBurnRegressor "
            r"must be an int in the range \[1, "
            r"9223372036854775807\], a float in the "
            r"range \(0.0, 1.0\] or None. Got 0",
        ),
        (dict(n_features_to_select=2.5), r"'n_features_to_select' parameter"),
        (dict(n_features_to_select=2, alpha=0.1), "either n_features_to_select"),
        (
            dict(alpha=-1.0),
            r"'alpha' parameter of ControlBurnRegressor must be a float in the range "
            r"\[0.0, inf\) or None. Got -1.0",
        ),
        (dict(forest_method="boost"), r"'forest_method' parameter .* must be a str among"),
        (dict(tree_type="deep"), r"'tree_type' parameter .* must be a str among"),
        (dict(max_depth=0), r"'max_depth' parameter .* must be an int in the range \[1, 16\]"),
        (dict(max_features=0), r"'max_features' parameter"),
        (dict(max_features="most"), r"'max_features' parameter"),
        (dict(tree_type="single", max_features=2), "does not apply"),
        (dict(sketch="fourier"), r"'sketch' parameter"),
        (dict(group_costs=[1, 2]), "group_costs needs feature_groups"),
        (dict(feature_groups=[0] * 8, group_costs=[1], feature_costs=np.ones(8)), "not both"),
        (dict(feature_costs=np.ones(3)), "one entry per feature"),
        (dict(feature_costs=-np.ones(8)), "must be >= 0"),
        (dict(feature_groups=[0, 1]), "one group label per feature"),
        (dict(feature_groups=[0] * 8, group_costs=[1, 2]), "one cost per group"),
        (dict(max_bins=1), r"'max_bins' parameter .* must be an int in the range \[2, 255\]"),
        (
            dict(refit_estimator="rf"),
            r"'refit_estimator' parameter .* must be an object "
            r"implementing 'fit' and 'predict'",
        ),
        (dict(device="tpu"), r"'device' parameter .* must be a str among"),
    ],
)
def test_bad_parameters(kw, match):
    X, y = regression_data(m=60)
    with pytest.raises(ValueError, match=match):
        ControlBurnRegressor(**kw).fit(X, y)


def test_bad_data():
    X, y = regression_data(m=60)
    est = ControlBurnClassifier(**SMALL_C)
    with pytest.raises(ValueError, match="Unknown label type"):
        est.fit(X, y)
    with pytest.raises(ValueError, match="only 1 class"):
        est.fit(X, np.zeros(60))
    with pytest.raises(ValueError, match="sketch='gaussian' is defined for the squared loss"):
        ControlBurnClassifier(sketch="gaussian", **SMALL_C).fit(X, (y > 0).astype(int))
    with pytest.raises(ValueError, match="Expected 2D array"):
        ControlBurnRegressor(**SMALL_R).fit(X[:, 0], y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        ControlBurnRegressor(**SMALL_R).fit(X, y[:-1])
    with pytest.raises(ValueError, match="infinity"):
        ControlBurnRegressor(**SMALL_R).fit(np.where(X > 2, np.inf, X), y)
    with pytest.raises(ValueError, match="sample_weight has negative values"):
        ControlBurnRegressor(**SMALL_R).fit(X, y, sample_weight=-np.ones(60))
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        ControlBurnRegressor().predict(X)
    est = ControlBurnRegressor(n_features_to_select=2, **SMALL_R).fit(X, y)
    with pytest.raises(ValueError, match="X has 7 features"):
        est.predict(X[:, :7])


# --- scikit-learn's estimator checks ----------------------------------------------------------

_BOOTSTRAP = (
    "the forest draws bootstrap rows uniformly and weighs them by sample_weight: an "
    "integer weight is not the same random draw as a repeated row"
)


def _expected_failures(est):
    out = {
        "check_sample_weight_equivalence_on_dense_data": _BOOTSTRAP,
        "check_sample_weight_equivalence_on_sparse_data": _BOOTSTRAP,
    }
    if isinstance(est, ControlBurnClassifier):
        out["check_classifiers_train"] = (
            "n_features_to_select=None keeps half of the features; the check's 3-blob data has "
            "2 features and needs both for its 0.83 training accuracy"
        )
    return out


@parametrize_with_checks(
    [
        ControlBurnRegressor(random_state=0, **SMALL_R),
        ControlBurnClassifier(random_state=0, **SMALL_C),
    ],
    expected_failed_checks=_expected_failures,
    xfail_strict=True,  # a documented failure that starts passing fails the suite
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


# --- GPU --------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_gpu_and_cpu_select_the_same_features():
    pytest.importorskip("gpufs.backends.gpu.backend")
    import cupy as cp

    X, y = regression_data(m=3000, d=10)
    yb = (y > 0).astype(int)
    for Est, target in ((ControlBurnRegressor, y), (ControlBurnClassifier, yb)):
        kw = dict(n_features_to_select=3, max_depth=4, random_state=0, max_features=0.5)
        c = Est(device="cpu", **kw).fit(X, target)
        g = Est(device="gpu", **kw).fit(cp.asarray(X), cp.asarray(target))
        for k, v in c.forest_.ensemble.stacked().items():
            np.testing.assert_array_equal(v, g.forest_.ensemble.stacked()[k], err_msg=k)
        np.testing.assert_array_equal(c.selected_features_, g.selected_features_)
        np.testing.assert_allclose(c.tree_weights_, g.tree_weights_, rtol=1e-6, atol=1e-9)


# --- one forest, every k -----------------------------------------------------------------------


def test_warm_start_keeps_the_forest_and_a_new_k_gives_the_cold_fits_selection():
    X, y = regression_data(seed=3)
    est = ControlBurnRegressor(
        n_features_to_select=3, warm_start=True, random_state=0, **SMALL_R
    ).fit(X, y)
    forest = est.forest_
    assert est.forest_reused_ is False
    for k in (2, 4, 1):
        est.set_params(n_features_to_select=k).fit(X, y)
        assert est.forest_ is forest and est.forest_reused_
        assert est.fit_times_["forest"] == 0.0 and "tree_predictions" in est.fit_times_
        cold = ControlBurnRegressor(n_features_to_select=k, random_state=0, **SMALL_R).fit(X, y)
        np.testing.assert_array_equal(est.selected_features_, cold.selected_features_)
        np.testing.assert_array_equal(est.tree_weights_, cold.tree_weights_)
        assert est.lambda_ == cold.lambda_
        np.testing.assert_array_equal(est.predict(X), cold.predict(X))
    # a forest parameter, other data or another seed: a new forest
    for change in (dict(max_depth=3), dict(random_state=1)):
        est.set_params(**change).fit(X, y)
        assert est.forest_ is not forest and not est.forest_reused_
        forest = est.forest_
    est.fit(X[:500], y[:500])
    assert est.forest_ is not forest and not est.forest_reused_
    # without warm_start every fit grows its forest
    cold = ControlBurnRegressor(n_features_to_select=2, random_state=0, **SMALL_R).fit(X, y)
    first = cold.forest_
    assert cold.fit(X, y).forest_ is not first


def test_default_path_is_what_the_k_search_passed_through():
    X, y = regression_data(seed=3)
    est = ControlBurnRegressor(n_features_to_select=3, random_state=0, **SMALL_R).fit(X, y)
    sp = est.selection_path_
    assert est.selection_exact_ and sp["k"] == [1, 2, 3] and sp["unreachable"] == {}
    assert sp["features"][3] == sorted(est.selected_features_.tolist())
    assert sp["lambda"][3] == est.lambda_
    # k = 4 is not reached by any lambda of the search: the path says so
    with pytest.warns(UserWarning, match="no lambda selects exactly 4"):
        est4 = ControlBurnRegressor(n_features_to_select=4, random_state=0, **SMALL_R).fit(X, y)
    assert est4.selection_path_["k"] == [1, 2, 3]
    assert "no lambda solved by the search" in est4.selection_path_["unreachable"][4]
    searched = (
        ControlBurnRegressor(n_features_to_select=3, path_k_max=4, random_state=0, **SMALL_R)
        .fit(X, y)
        .selection_path_
    )
    assert set(searched["k"]) >= set(sp["k"])  # searching every k finds at least as many
    with_alpha = ControlBurnRegressor(alpha=0.01, random_state=0, **SMALL_R).fit(X, y)
    assert with_alpha.selection_path_["k"] == []


@pytest.mark.parametrize("forest_method", ["bagboost", "bag"])
def test_bootstraps_that_draw_only_rows_of_weight_zero(forest_method):
    # 2 rows of positive weight in 30: some bootstraps draw neither (a tree of no data, with
    # reg_lambda = 0, had value 0 / 0: ZeroDivisionError), and some rounds' out-of-bag rows
    # all weigh 0 (their mean loss was 0 / 0). Such a tree is one leaf of value 0; such a
    # round has no out-of-bag row. 10 trees a round: still 15 (bagboost) and 171 (bag) trees
    # of no data over the 12 seeds, at a tenth of the default forest's cost.
    empty_trees = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        X, y = rng.normal(size=(30, 4)), rng.normal(size=30)
        w = np.zeros(30)
        w[rng.choice(30, 2, replace=False)] = 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = ControlBurnRegressor(
                forest_method=forest_method, max_trees_per_round=10, random_state=seed
            ).fit(X, y, sample_weight=w)
        assert np.isfinite(m.predict(X)).all()
        trees = m.forest_.ensemble.stacked()
        # a tree of no data: no split, value 0 (a tree of data may also have no split)
        empty = (trees["feature"] < 0).all(axis=1) & (trees["value"] == 0).all(axis=1)
        empty_trees += int(empty.sum())
    assert empty_trees > 0  # the case this test is about did occur
