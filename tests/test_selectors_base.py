"""The shared selector base (``gpufs.selectors._base``): validation split, early stopping,
eval_set pairs and lists, selection paths and names, the same in every family."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from gpufs import (
    ControlBurnRegressor,
    GBFSClassifier,
    GBFSRegressor,
    StagewiseClassifier,
    StagewiseRegressor,
)
from gpufs.selectors._base import EarlyStopping, auto_k, resolve_k, validation_split

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 5))
Y_REG = 2 * X[:, 0] - X[:, 3] + 0.3 * RNG.normal(size=300)
Y_CLS = (Y_REG > 0.5).astype(int)


# --- validation_split -------------------------------------------------------------------------


def test_validation_split_sizes_disjoint_and_deterministic():
    tr, va = validation_split(101, 0.2, seed=3)
    assert va.size == 21 and tr.size == 80  # ceil(0.2 * 101) validation rows
    assert np.intersect1d(tr, va).size == 0
    np.testing.assert_array_equal(np.sort(np.r_[tr, va]), np.arange(101))
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(va) > 0)
    tr2, va2 = validation_split(101, 0.2, seed=3)
    np.testing.assert_array_equal(va, va2)
    assert not np.array_equal(va, validation_split(101, 0.2, seed=4)[1])


def test_validation_split_is_stratified_by_class():
    y = np.r_[np.zeros(90, int), np.ones(10, int)]
    for seed in range(5):
        _, va = validation_split(100, 0.2, seed, stratify=y)
        assert np.bincount(y[va]).tolist() == [18, 2]


def test_validation_split_single_member_class_warns_and_splits_plainly():
    y = np.r_[np.zeros(49, int), 1]
    with pytest.warns(UserWarning, match="a class has a single row"):
        tr, va = validation_split(50, 0.2, 0, stratify=y)
    assert va.size == 10 and tr.size == 40


def test_validation_split_leaving_nothing_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"validation_fraction=0.99 leaves 10 validation and 0 "
        r"training rows out of 10",
    ):
        validation_split(10, 0.99, 0)


@pytest.mark.parametrize("cls", [GBFSClassifier, StagewiseClassifier])
def test_every_family_holds_out_the_same_stratified_rows(cls):
    """One rule: the classifiers of both families hold out stratified rows of the same size."""
    est = cls(validation_fraction=0.2, random_state=0, device="cpu")
    est.fit(X, Y_CLS)
    n_val = math.ceil(0.2 * X.shape[0])
    # the validation loss was computed on n_val rows: recompute it from the split rule
    rng = np.random.RandomState(0)
    seed = int(rng.randint(np.iinfo(np.int32).max))
    tr, va = validation_split(X.shape[0], 0.2, seed, stratify=Y_CLS)
    assert va.size == n_val
    assert (
        np.bincount(Y_CLS[va]).tolist()
        == np.round(np.bincount(Y_CLS) * n_val / X.shape[0]).astype(int).tolist()
    )
    assert len(est.evals_result_) == 1 and np.all(np.isfinite(est.evals_result_[0]))
    # the last validation loss is the fitted model's log loss on exactly these rows
    p = est.predict_proba(X[va])[np.arange(va.size), Y_CLS[va]]
    np.testing.assert_allclose(est.evals_result_[0][-1], -np.mean(np.log(p)), rtol=1e-9)


# --- EarlyStopping ----------------------------------------------------------------------------


def test_early_stopping_counts_rounds_without_improvement():
    es = EarlyStopping(patience=2)
    es.start(10.0)
    assert [es.update(v) for v in (9.0, 9.5, 8.0, 8.0, 8.5)] == [False, False, False, False, True]
    assert es.best_round == 3 and es.best_loss == 8.0
    never = EarlyStopping(patience=None)
    never.start(1.0)
    assert not any(never.update(2.0) for _ in range(50)) and never.best_round == 0
    tol = EarlyStopping(patience=1, tol=0.5)
    tol.start(1.0)
    assert tol.update(0.9) and tol.best_round == 0  # 0.1 better is not better than tol


# --- eval_set: a pair or a list of pairs ------------------------------------------------------


def test_gbfs_eval_set_list_records_every_pair_and_watches_the_last():
    A, B = (X[:100], Y_REG[:100]), (X[100:200], Y_REG[100:200])
    tr = slice(200, None)
    est = GBFSRegressor(n_estimators=15, device="cpu", random_state=0).fit(
        X[tr], Y_REG[tr], eval_set=[A, B]
    )
    assert len(est.evals_result_) == 2
    # the watched (last) pair is the selection record's validation loss, per round
    np.testing.assert_array_equal(est.evals_result_[1], est.selection_record_["val_loss"])
    # every pair's last entry is the loss of the final model on it
    for (Xe, ye), losses in zip((A, B), est.evals_result_):
        assert losses.shape == (15,)
        np.testing.assert_allclose(losses[-1], np.mean((est.predict(Xe) - ye) ** 2), rtol=1e-10)
    single = GBFSRegressor(n_estimators=15, device="cpu", random_state=0).fit(
        X[tr], Y_REG[tr], eval_set=B
    )
    np.testing.assert_array_equal(single.evals_result_[0], est.evals_result_[1])
    np.testing.assert_array_equal(single.predict(X), est.predict(X))


def test_gbfs_early_stopping_watches_the_last_pair():
    kw = dict(
        mu=0.0,
        max_depth=5,
        learning_rate=0.5,
        n_estimators=200,
        n_iter_no_change=3,
        device="cpu",
        random_state=0,
    )
    A, B = (X[:100], Y_REG[:100]), (X[100:200], Y_REG[100:200])
    ab = GBFSRegressor(**kw).fit(X[200:], Y_REG[200:], eval_set=[A, B])
    b = GBFSRegressor(**kw).fit(X[200:], Y_REG[200:], eval_set=B)
    ba = GBFSRegressor(**kw).fit(X[200:], Y_REG[200:], eval_set=[B, A])
    a = GBFSRegressor(**kw).fit(X[200:], Y_REG[200:], eval_set=A)
    assert ab.n_estimators_ == b.n_estimators_ and ba.n_estimators_ == a.n_estimators_
    assert ab.n_estimators_ < 200


def test_eval_set_sample_weights_are_used():
    B = (X[100:200], Y_REG[100:200])
    w = np.r_[np.zeros(50), np.ones(50)]
    est = GBFSRegressor(n_estimators=5, device="cpu").fit(
        X[200:], Y_REG[200:], eval_set=B, sample_weight_eval_set=[w]
    )
    pred = est.predict(B[0])
    np.testing.assert_allclose(
        est.evals_result_[0][-1], np.mean((pred[50:] - B[1][50:]) ** 2), rtol=1e-10
    )


def test_stagewise_eval_set_list():
    A, B = (X[:100], Y_REG[:100]), (X[100:200], Y_REG[100:200])
    est = StagewiseRegressor(3, device="cpu").fit(X[200:], Y_REG[200:], eval_set=[A, B])
    assert [e.shape for e in est.evals_result_] == [(4,), (4,)]
    np.testing.assert_array_equal(est.validation_cost_history_, est.evals_result_[1])
    for (Xe, ye), costs in zip((A, B), est.evals_result_):
        np.testing.assert_allclose(costs[-1], np.mean((est.predict(Xe) - ye) ** 2), rtol=1e-10)


# --- selection path and names -----------------------------------------------------------------


def test_selection_paths_follow_the_selection_with_names():
    df = pd.DataFrame(X, columns=["a", "b", "c", "d", "e"])
    g = GBFSRegressor(n_estimators=10, device="cpu").fit(df, Y_REG, eval_set=(df[:50], Y_REG[:50]))
    s = StagewiseRegressor(2, device="cpu").fit(df, Y_REG)
    for est in (g, s):
        p = est.selection_path_
        assert p["features"] == est.selected_features_.tolist()
        assert p["names"] == list(est.selected_feature_names_)
        assert p["k"] == list(range(1, len(p["features"]) + 1))
    assert g.selection_path_["entry_tree"] == [
        int(g.first_use_tree_[f]) for f in g.selected_features_
    ]
    assert len(g.selection_path_["val_loss"]) == len(g.selected_features_)
    assert s.selection_path_["entry_round"] == [1, 2]
    assert s.selection_path_["train_loss"] == s.cost_history_[1:].tolist()
    assert s.selection_path_["val_loss"] is None
    v = StagewiseRegressor(2, device="cpu").fit(df, Y_REG, eval_set=(df[:50], Y_REG[:50]))
    assert v.selection_path_["val_loss"] == v.validation_cost_history_[1:].tolist()


def test_n_iter_no_change_without_validation_is_an_error_in_every_family():
    for est in (
        GBFSRegressor(n_iter_no_change=2, device="cpu"),
        StagewiseRegressor(n_iter_no_change=2, device="cpu"),
    ):
        with pytest.raises(ValueError, match="n_iter_no_change needs validation data"):
            est.fit(X, Y_REG)


def test_no_warning_on_a_plain_fit():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GBFSClassifier(n_estimators=3, validation_fraction=0.2, device="cpu").fit(X, Y_CLS)
    assert [str(w.message) for w in caught] == []


# --- n_features_to_select and empty selections, the same in every family ----------------------

FAMILIES = [
    GBFSRegressor(n_estimators=10, max_depth=2, device="cpu"),
    StagewiseRegressor(device="cpu"),
    ControlBurnRegressor(max_depth=2, max_trees_per_round=10, device="cpu", random_state=0),
]


@pytest.mark.parametrize("est", FAMILIES, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("fraction, k", [(0.4, 2), (0.5, 2), (0.01, 1), (0.8, 4)])
def test_a_fraction_of_the_columns_means_the_same_in_every_family(est, fraction, k):
    assert resolve_k(fraction, 5) == k and resolve_k(1.0, 5) == 5 and resolve_k(3, 5) == 3
    y = X @ np.array([2.0, -1.0, 1.0, 0.5, 1.5]) + 0.3 * RNG.normal(size=X.shape[0])
    fitted = clone(est).set_params(n_features_to_select=fraction).fit(X, y)
    assert fitted.selected_features_.size == k


@pytest.mark.parametrize(
    "est, params, why",
    [
        (FAMILIES[0], dict(mu=0.99), "at mu=0.99 no split on any feature paid its price"),
        (
            FAMILIES[1],
            dict(tol=1e9),
            "the first round lowered the training cost by less than tol=1e\\+09",
        ),
        (FAMILIES[2], dict(alpha=1e6), "at alpha=1e\\+06 the lasso keeps no tree"),
    ],
    ids=lambda v: type(v).__name__ if hasattr(v, "fit") else "",
)
def test_an_empty_selection_warns_what_to_change_and_transform_follows_scikit_learn(
    est, params, why
):
    df = pd.DataFrame(X, columns=["a", "b", "c", "d", "e"])
    with pytest.warns(UserWarning, match=f"no feature was selected: {why}.*n_features_to_select"):
        fitted = clone(est).set_params(**params).fit(df, Y_REG)
    assert fitted.selected_features_.size == 0
    for data in (X, df):
        with pytest.warns(
            UserWarning,
            match="No features were selected: transform returns an "
            "array with no columns.*n_features_to_select",
        ):
            out = fitted.transform(data)
        assert out.shape == (X.shape[0], 0)


# --- n_features_to_select="auto" with tol (GBFS and stagewise) --------------------------------


def test_auto_k_keeps_the_first_feature_then_each_that_improves_by_more_than_tol():
    assert auto_k([], 0.1) == 0
    assert auto_k([5.0], 0.1) == 1
    assert auto_k([5.0, 4.0, 3.95, 1.0], 0.1) == 2  # stops at the first small step
    assert auto_k([5.0, 5.0], 0.0) == 1  # a tie (same tree) is no improvement
    assert auto_k([5.0, 4.0, 3.0], 0.0) == 3


def _planted(seed=0, n=600):
    rng = np.random.default_rng(seed)
    Xp = rng.normal(size=(n, 8))
    y = 3 * Xp[:, 0] + 2 * Xp[:, 1] + 1.0 * Xp[:, 2] + 0.3 * rng.normal(size=n)
    return Xp, y


@pytest.mark.parametrize("validation", [dict(validation_fraction=0.25), {}])
def test_stagewise_auto_keeps_the_features_that_lower_the_watched_cost_by_more_than_tol(validation):
    Xp, y = _planted()
    tol = 0.05
    full = StagewiseRegressor(device="cpu", random_state=0, **validation).fit(Xp, y)
    watched = (full.validation_cost_history_ if validation else full.cost_history_)[1:]
    k = auto_k(watched, tol)
    auto = StagewiseRegressor("auto", tol=tol, device="cpu", random_state=0, **validation).fit(
        Xp, y
    )
    assert k == 3 and sorted(auto.selected_features_.tolist()) == [0, 1, 2]
    assert auto.selected_features_.tolist() == full.selected_features_[:k].tolist()
    np.testing.assert_array_equal(auto.cost_history_, full.cost_history_[: k + 1])
    assert StagewiseRegressor("auto", device="cpu").fit(Xp, y).selected_features_.size == 4


@pytest.mark.parametrize("validation", [dict(validation_fraction=0.25), {}])
def test_gbfs_auto_keeps_the_features_that_lower_the_path_loss_by_more_than_tol(validation):
    Xp, y = _planted()
    tol = 0.1
    kw = dict(mu=0.01, n_estimators=100, max_depth=3, random_state=0, device="cpu", **validation)
    full = GBFSRegressor(**kw).fit(Xp, y)
    p = full.selection_path_
    k = auto_k(p["val_loss"] if validation else p["train_loss"], tol)
    # the loss once a feature is in includes the boosting until the next one enters, so the
    # noise features that enter late bring less than tol; the planted ones more
    assert k == 3 < full.selected_features_.size
    assert sorted(full.selected_features_[:k].tolist()) == [0, 1, 2]
    auto = GBFSRegressor(n_features_to_select="auto", tol=tol, **kw).fit(Xp, y)
    assert auto.selected_features_.tolist() == full.selected_features_[:k].tolist()
    assert auto.mu_ == kw["mu"] and auto.mu_search_ is None and "auto_fit" in auto.fit_times_
    assert auto.n_estimators_ == kw["n_estimators"]  # a whole model on the k features
    half = GBFSRegressor(n_features_to_select="auto", **kw).fit(Xp, y)
    assert half.selected_features_.size == 4


def test_controlburn_has_no_auto():
    with pytest.raises(
        ValueError, match="'n_features_to_select' parameter of ControlBurnRegressor must be"
    ):
        ControlBurnRegressor(n_features_to_select="auto", device="cpu").fit(X, Y_REG)


# --- exactly k on real tables, every family ------------------------------------------------


def _table(name):
    from sklearn import datasets

    if name == "breast_cancer":
        return datasets.load_breast_cancer(return_X_y=True, as_frame=True), "c"
    if name == "wine":
        return datasets.load_wine(return_X_y=True, as_frame=True), "c"
    return datasets.load_diabetes(return_X_y=True, as_frame=True), "r"


@pytest.mark.parametrize(
    "table, ks, seeds",
    [("breast_cancer", (3, 5, 10), (0, 1)), ("diabetes", (3, 5), (0,)), ("wine", (3, 5), (0,))],
)
@pytest.mark.parametrize("family", ["gbfs", "controlburn", "stagewise"])
def test_every_family_selects_exactly_k_on_real_tables(family, table, ks, seeds):
    from gpufs import ControlBurnClassifier, GBFSClassifier, StagewiseClassifier

    (Xt, yt), task = _table(table)
    cls = {
        ("gbfs", "c"): GBFSClassifier,
        ("gbfs", "r"): GBFSRegressor,
        ("controlburn", "c"): ControlBurnClassifier,
        ("controlburn", "r"): ControlBurnRegressor,
        ("stagewise", "c"): StagewiseClassifier,
        ("stagewise", "r"): StagewiseRegressor,
    }[(family, task)]
    for seed in seeds:
        est = cls(device="cpu", random_state=seed)
        if family == "controlburn":
            est.set_params(warm_start=True)
        for k in ks:
            with warnings.catch_warnings():
                # ControlBurn warns when no lambda gives exactly k and it completes the
                # selection (selection_exact_ False): still k features
                warnings.simplefilter("ignore", UserWarning)
                est.set_params(n_features_to_select=k).fit(Xt, yt)
            sel = est.selected_features_
            assert sel.size == k and np.unique(sel).size == k, (family, table, seed, k)
            assert est.transform(Xt).shape == (Xt.shape[0], k)
            assert list(est.selected_feature_names_) == [Xt.columns[j] for j in sel]


# --- the door puts y and the weights where X goes ----------------------------------------------


class _Moved(np.ndarray):
    """A host array marked as moved by ``_MarkingBackend.to_device``."""


def test_fit_data_y_and_weights_go_through_the_backends_to_device(monkeypatch):
    """A host y beside a device X broke the GPU (exact k's folds index y with a device row
    index: cupy refuses; the simulator's device arrays are numpy, so only a GPU saw it): the
    door now sends y, the weights and the eval_set's through ``backend.to_device``."""
    import gpufs.selectors._base as base
    from gpufs.backends import get_backend

    cpu = get_backend("cpu")

    class _MarkingBackend:
        def __getattr__(self, name):
            return getattr(cpu, name)

        def to_device(self, a):
            return np.asarray(a).view(_Moved)

    monkeypatch.setattr(base, "get_backend", lambda device: _MarkingBackend())
    for est, y in ((GBFSClassifier(), Y_CLS), (GBFSRegressor(), Y_REG)):
        data = est._prepare_fit(X, y, np.ones(X.shape[0]))
        assert isinstance(data.y, _Moved) and isinstance(data.sample_weight, _Moved)
        assert est._prepare_fit(X, y, None).sample_weight is None
        ((_, yv, wv),) = est._eval_sets((X[:50], y[:50]), [np.ones(50)], data)
        assert isinstance(yv, _Moved) and isinstance(wv, _Moved)
