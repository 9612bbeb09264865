"""GBFSClassifier / GBFSRegressor: known answers from paper 000, bags, planted features,
agreement with other GBDTs at mu = 0, the selection record, pandas, multiclass, input
immutability and the progress bar."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from gpufs import GBFSClassifier, GBFSRegressor

# --- (a) paper 000, Figure 1 -----------------------------------------------------------------


def _figure1(seed, n=2000):
    """Paper 000, section 5.1: three features; the label is a non-linear function of x and y
    (not linearly separable in 2-D or 3-D); z is a linear combination of x and y. Here: the
    label says whether (x, y) lies in a square in the middle of the plane (half the points),
    x and y uniform on [-10, 60] as in the figure's axes."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-10, 60, n)
    y = rng.uniform(-10, 60, n)
    label = ((np.abs(x - 25) < 24.75) & (np.abs(y - 25) < 24.75)).astype(int)
    z = 0.8 * x + 0.6 * y
    X = np.stack([x, y, z], axis=1)
    # 90% train, 10% test, as in the paper
    return train_test_split(X, label, test_size=0.1, random_state=seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_figure1_gbfs_selects_x_and_y_where_l1_logistic_regression_fails(seed):
    from sklearn.linear_model import LogisticRegression

    Xtr, Xte, ytr, yte = _figure1(seed)
    gbfs = GBFSClassifier(
        mu=0.1, hessian=False, n_estimators=50, max_depth=3, learning_rate=0.3, device="cpu"
    ).fit(Xtr, ytr)
    assert sorted(gbfs.selected_features_.tolist()) == [0, 1]  # x and y, not z
    assert not gbfs.get_support()[2]
    gbfs_err = np.mean(gbfs.predict(Xte) != yte)
    assert gbfs_err <= 0.025
    # L1-regularized logistic regression, its regularization tuned on the test set itself
    # (as generous as it gets): no better than guessing the majority class
    lr_errs = []
    for C in (0.001, 0.01, 0.1, 1.0, 10.0, 100.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # liblinear convergence chatter
            lr = LogisticRegression(l1_ratio=1.0, solver="liblinear", C=C).fit(Xtr, ytr)
        lr_errs.append(np.mean(lr.predict(Xte) != yte))
    assert min(lr_errs) > 0.3
    assert min(lr_errs) > gbfs_err + 0.25


# --- (b) bags -------------------------------------------------------------------------------


def _bag_data(seed, n=1000):
    """Four bags of four features. Bag 0 holds all the signal (u1 and u2, redundantly); bag 1
    holds a cleaner copy of u2, bag 2 a noisier copy of u1, bag 3 only noise."""
    rng = np.random.default_rng(seed)
    u1, u2 = rng.normal(size=n), rng.normal(size=n)
    y = u1 + np.sign(u2) * u2**2 / 2 + 0.1 * rng.normal(size=n)

    def e(s):
        return s * rng.normal(size=n)

    cols = [
        u1 + e(0.05),
        u2 + e(0.4),
        u1 + e(0.4),
        u2 + e(0.4),
        u2 + e(0.1),
        e(1),
        e(1),
        e(1),
        u1 + e(0.3),
        e(1),
        e(1),
        e(1),
        e(1),
        e(1),
        e(1),
        e(1),
    ]
    return np.stack(cols, axis=1), y, np.repeat(np.arange(4), 4)


@pytest.mark.parametrize("seed", [0, 1])
def test_bags_selection_stays_in_one_bag(seed):
    X, y, groups = _bag_data(seed)
    kw = dict(penalty_scaling="none", mu=30.0, n_estimators=40, max_depth=3, device="cpu")
    bagged = GBFSRegressor(feature_groups=groups, **kw).fit(X, y)
    bags_used = set(groups[bagged.selected_features_].tolist())
    assert bags_used == {0}
    assert len(bagged.selected_features_) >= 2  # u1 and u2 both come from bag 0
    assert bagged.score(X, y) > 0.9
    # per-feature penalties instead pick the best single features from two bags
    single = GBFSRegressor(**kw).fit(X, y)
    assert set(single.selected_features_.tolist()) == {0, 4}
    assert set(groups[single.selected_features_].tolist()) == {0, 1}


# --- (c) planted informative features -------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_informative_features_selected_first(seed):
    X, y = make_classification(
        n_samples=1000,
        n_features=20,
        n_informative=3,
        n_redundant=0,
        n_repeated=0,
        shuffle=False,
        flip_y=0.01,
        random_state=seed,
    )
    est = GBFSClassifier(n_estimators=50, max_depth=3, device="cpu").fit(X, y)
    assert set(est.selected_features_[:3].tolist()) == {0, 1, 2}
    # and the noise columns that slip in are few and late
    assert len(est.selected_features_) <= 6


# --- (d) mu = 0 is a plain GBDT ---------------------------------------------------------------


@pytest.fixture(scope="module")
def gbdt_data():
    X, y = make_classification(
        n_samples=8000,
        n_features=20,
        n_informative=8,
        n_redundant=4,
        flip_y=0.05,
        class_sep=0.8,
        random_state=0,
    )
    return train_test_split(X, y, test_size=4000, random_state=0)


def test_mu_zero_matches_lightgbm_and_histgradientboosting(gbdt_data):
    import lightgbm
    from sklearn.ensemble import HistGradientBoostingClassifier

    Xtr, Xte, ytr, yte = gbdt_data
    depth, trees, lr = 4, 60, 0.1
    ours = GBFSClassifier(
        mu=0.0, n_estimators=trees, max_depth=depth, learning_rate=lr, device="cpu"
    ).fit(Xtr, ytr)
    acc = np.mean(ours.predict(Xte) == yte)
    assert len(ours.selected_features_) > 15  # no penalty: features are used freely
    lgb = lightgbm.LGBMClassifier(
        n_estimators=trees,
        max_depth=depth,
        num_leaves=2**depth,
        learning_rate=lr,
        reg_lambda=1.0,
        min_child_samples=1,
        min_child_weight=1e-3,
        verbose=-1,
    ).fit(Xtr, ytr)
    hgb = HistGradientBoostingClassifier(
        max_iter=trees,
        max_depth=depth,
        max_leaf_nodes=2**depth,
        learning_rate=lr,
        l2_regularization=1.0,
        min_samples_leaf=1,
        early_stopping=False,
    ).fit(Xtr, ytr)
    acc_lgb = np.mean(lgb.predict(Xte) == yte)
    acc_hgb = np.mean(hgb.predict(Xte) == yte)
    assert acc > 0.8
    assert abs(acc - acc_lgb) < 0.02, (acc, acc_lgb)
    assert abs(acc - acc_hgb) < 0.02, (acc, acc_hgb)


# --- (e) the selection record -----------------------------------------------------------------


@pytest.fixture(scope="module")
def noisy_regression():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 6))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 1.0 * rng.normal(size=600)
    return X, y


def test_selection_record_train_and_val_loss(noisy_regression):
    X, y = noisy_regression
    Xtr, Xva, ytr, yva = X[:400], X[400:], y[:400], y[400:]
    est = GBFSRegressor(n_estimators=30, mu=0.02, device="cpu").fit(Xtr, ytr, eval_set=(Xva, yva))
    rec = est.selection_record_
    assert set(rec) == {"tree_column", "features_added", "train_loss", "val_loss"}
    assert all(len(v) == 30 for v in rec.values())
    tl = np.asarray(rec["train_loss"])
    # squared error: every tree is a (shrunk) least-squares fit, so the loss never goes up
    assert np.all(np.diff(tl) <= 1e-12)
    assert tl[-1] < 0.8 * tl[0]
    np.testing.assert_allclose(tl[-1], np.mean((est.predict(Xtr) - ytr) ** 2), rtol=1e-10)
    vl = np.asarray(rec["val_loss"])
    assert np.all(np.isfinite(vl))
    np.testing.assert_allclose(vl[-1], np.mean((est.predict(Xva) - yva) ** 2), rtol=1e-10)
    # no validation data: NaN validation losses
    plain = GBFSRegressor(n_estimators=5, device="cpu").fit(Xtr, ytr)
    assert np.all(np.isnan(plain.selection_record_["val_loss"]))
    # validation_fraction holds out rows
    vf = GBFSRegressor(n_estimators=5, validation_fraction=0.25, random_state=0, device="cpu").fit(
        X, y
    )
    assert np.all(np.isfinite(vf.selection_record_["val_loss"]))
    # trained on 450 rows: its training loss is not the loss on all 600
    assert vf.selection_record_["train_loss"][-1] != pytest.approx(
        np.mean((vf.predict(X) - y) ** 2), rel=1e-9
    )


def test_selection_record_classification_loss():
    X, y = make_classification(n_samples=500, n_features=8, random_state=3)
    est = GBFSClassifier(n_estimators=20, device="cpu").fit(X, y)
    tl = np.asarray(est.selection_record_["train_loss"])
    assert np.mean(np.diff(tl) <= 1e-12) > 0.9  # non-increasing, give or take a step
    assert tl[-1] < tl[0]
    p = est.predict_proba(X)[:, 1]
    np.testing.assert_allclose(tl[-1], -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)), rtol=1e-9)


def test_early_stopping_cuts_the_model_back(noisy_regression):
    X, y = noisy_regression
    Xtr, Xva, ytr, yva = X[:400], X[400:], y[:400], y[400:]
    kw = dict(mu=0.0, max_depth=5, learning_rate=0.5, device="cpu")
    est = GBFSRegressor(n_estimators=200, n_iter_no_change=5, **kw).fit(
        Xtr, ytr, eval_set=(Xva, yva)
    )
    best = est.n_estimators_
    assert 1 <= best < 60  # stopped long before 200 rounds
    assert est.ensemble_.n_trees == best
    vl = np.asarray(est.selection_record_["val_loss"])
    assert vl.shape == (best,)
    assert vl[-1] == vl.min()  # kept up to its best round
    # the kept model is the model trained for exactly that many rounds
    same = GBFSRegressor(n_estimators=best, **kw).fit(Xtr, ytr)
    np.testing.assert_array_equal(est.predict(Xva), same.predict(Xva))
    np.testing.assert_array_equal(est.selected_features_, same.selected_features_)
    # with validation_fraction as well
    vf = GBFSRegressor(
        n_estimators=200, n_iter_no_change=3, validation_fraction=0.3, random_state=0, **kw
    ).fit(X, y)
    assert vf.n_estimators_ < 200 and vf.ensemble_.n_trees == vf.n_estimators_


# --- (f) importances, names, pandas -----------------------------------------------------------


@pytest.fixture(scope="module")
def pandas_fit():
    rng = np.random.default_rng(7)
    n = 400
    df = pd.DataFrame(
        {
            "age": rng.normal(size=n),
            "noise_a": rng.normal(size=n),
            "income": rng.normal(size=n),
            "noise_b": rng.normal(size=n),
        },
        index=np.arange(1000, 1000 + n),
    )
    y = pd.Series(
        (df["age"] + 0.5 * df["income"] + 0.2 * rng.normal(size=n) > 0).astype(int),
        index=df.index,
        name="label",
    )
    est = GBFSClassifier(n_estimators=30, max_depth=2, device="cpu").fit(df, y)
    return df, y, est


def test_feature_importances(pandas_fit):
    df, y, est = pandas_fit
    imp = est.feature_importances_
    assert imp.shape == (4,)
    assert np.all(imp >= 0) and imp.sum() == pytest.approx(1.0)
    assert np.argmax(imp) == 0  # age
    assert np.all(imp[~est.support_] == 0)
    assert np.all(imp[est.support_] > 0)


def test_selected_feature_names_and_pandas_transform(pandas_fit):
    df, y, est = pandas_fit
    np.testing.assert_array_equal(est.feature_names_in_, df.columns)
    assert est.selected_feature_names_[0] == "age"
    assert set(est.selected_feature_names_) >= {"age", "income"}
    assert list(est.selected_feature_names_) == [df.columns[i] for i in est.selected_features_]
    # the kind of table it was given: the selected columns as they are ...
    kept = est.transform(df)
    assert isinstance(kept, pd.DataFrame)
    pd.testing.assert_frame_equal(kept, df.loc[:, est.support_])
    # ... and a pandas frame with the selected columns (and the input's index) under set_output
    est.set_output(transform="pandas")
    try:
        out = est.transform(df)
    finally:
        est.set_output(transform="default")
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(est.get_feature_names_out())
    assert list(out.columns) == [c for c in df.columns if c in set(est.selected_feature_names_)]
    assert out.index.equals(df.index)
    pd.testing.assert_frame_equal(out, df[out.columns])
    # numpy in, numpy out; names fall back to x0, x1, ...
    Xn = df.to_numpy()
    est_np = GBFSClassifier(n_estimators=30, max_depth=2, device="cpu").fit(Xn, y.to_numpy())
    assert not hasattr(est_np, "feature_names_in_")
    assert est_np.selected_feature_names_[0] == "x0"
    assert isinstance(est_np.transform(Xn), np.ndarray)
    np.testing.assert_array_equal(est_np.transform(Xn), Xn[:, est_np.support_])
    # same data as numpy or pandas: the same model
    np.testing.assert_array_equal(est_np.predict_proba(Xn), est.predict_proba(df))


# --- (g) multiclass ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_class():
    rng = np.random.default_rng(8)
    n = 900
    X = rng.normal(size=(n, 8))
    scores = np.stack([2 * X[:, 0], 2 * X[:, 1], 2 * X[:, 2]], axis=1)
    y = np.array(["ant", "bee", "cat"])[np.argmax(scores + 0.3 * rng.normal(size=(n, 3)), 1)]
    return X, y


def test_multiclass_softmax(three_class):
    X, y = three_class
    est = GBFSClassifier(n_estimators=25, max_depth=3, device="cpu").fit(X, y)
    np.testing.assert_array_equal(est.classes_, ["ant", "bee", "cat"])
    assert est.ensemble_.n_trees == 75
    p = est.predict_proba(X)
    assert p.shape == (900, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert np.mean(est.predict(X) == y) > 0.85
    assert set(est.selected_features_.tolist()) == {0, 1, 2}
    # one Omega for all classes: the union of every class tree's features is the selection
    feats = est.ensemble_.stacked()["feature"]
    assert set(np.unique(feats[feats >= 0]).tolist()) == {0, 1, 2}


def test_multiclass_shares_one_budget(three_class):
    X, y = three_class
    est = GBFSClassifier(n_estimators=10, max_depth=3, n_features_to_select=2, device="cpu").fit(
        X, y
    )
    feats = est.ensemble_.stacked()["feature"]
    used = set(np.unique(feats[feats >= 0]).tolist())
    assert len(est.selected_features_) == 2
    assert used == set(est.selected_features_.tolist())
    # every class's trees draw on the same two features
    cols = np.asarray(est.ensemble_.tree_column)
    for k in range(3):
        fk = feats[cols == k]
        assert set(np.unique(fk[fk >= 0]).tolist()) <= used


def test_multiclass_feature_free_for_other_classes():
    """A feature bought by class 0's tree is free for the other class trees of the round."""
    from gpufs.engine.objectives import Softmax
    from gpufs.engine.penalties import PenaltyState

    rng = np.random.default_rng(9)
    n = 600
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] > 0, 0, np.where(X[:, 1] > 0, 1, 2))
    mu = 0.6
    est = GBFSClassifier(n_estimators=1, max_depth=1, mu=mu, device="cpu").fit(X, y)
    s = est.ensemble_.stacked()
    np.testing.assert_array_equal(s["feature"][:, 0], [0, 0, 0])
    np.testing.assert_array_equal(est.first_use_tree_, [0, -1, -1])
    # class 1's and class 2's stumps gain less than mu of their root divisor: had x0 not been
    # free for them, they would have been leaves
    raw = np.tile(est.ensemble_.base_score, (n, 1))
    for k in (1, 2):
        g, h = Softmax(3).grad_hess(raw, y, k)
        div = PenaltyState(mu, np.ones(3), np.arange(3, dtype=np.int32), "root_sse").gain_divisor(
            g, h
        )
        assert s["gain"][k, 0] / div < mu
    # as a separate one-vs-rest problem class 1 indeed selects nothing at this price
    ovr = GBFSClassifier(n_estimators=3, max_depth=1, mu=mu, device="cpu").fit(X, y == 1)
    assert ovr.selected_features_.shape == (0,)


# --- (h) inputs are never modified --------------------------------------------------------------


def test_inputs_not_modified_numpy():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(200, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    X = np.asfortranarray(X)  # a layout the engine has to copy
    y = (np.nan_to_num(X[:, 0]) > 0).astype(np.int64)
    w = rng.uniform(0.5, 1.5, 200)
    costs = np.linspace(1, 2, 5)
    groups = np.array([0, 0, 1, 1, 2])
    Xv, yv = X[:50].copy(), y[:50].copy()
    saved = [a.copy() for a in (X, y, w, costs, groups, Xv, yv)]
    est = GBFSClassifier(n_estimators=5, feature_costs=costs, feature_groups=groups, device="cpu")
    est.fit(X, y, sample_weight=w, eval_set=(Xv, yv))
    est.predict(X)
    est.predict_proba(X)
    est.decision_function(X)
    est.transform(X)
    reg = GBFSRegressor(n_estimators=5, validation_fraction=0.2, device="cpu")
    yr = np.nan_to_num(X[:, 1]).copy()
    yr_saved = yr.copy()
    reg.fit(X, yr, sample_weight=w).predict(X)
    for a, b in zip((X, y, w, costs, groups, Xv, yv), saved):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(yr, yr_saved)
    assert X.flags.f_contiguous
    assert est.feature_costs is costs and est.feature_groups is groups


def test_inputs_not_modified_pandas():
    rng = np.random.default_rng(11)
    df = pd.DataFrame(rng.normal(size=(150, 4)), columns=list("abcd"))
    df.loc[::7, "b"] = np.nan
    df["e"] = rng.integers(0, 5, 150)  # an integer column
    y = pd.Series(np.where(df["a"] > 0, "yes", "no"))
    df_saved, y_saved = df.copy(deep=True), y.copy(deep=True)
    dtypes = df.dtypes.copy()
    est = GBFSClassifier(n_estimators=5, device="cpu").fit(df, y)
    est.predict(df)
    est.predict_proba(df)
    est.transform(df)
    pd.testing.assert_frame_equal(df, df_saved)
    pd.testing.assert_series_equal(y, y_saved)
    pd.testing.assert_series_equal(df.dtypes, dtypes)


# --- (i) progress bar -------------------------------------------------------------------------


def test_verbose_shows_a_progress_bar(capfd):
    X, y = make_classification(n_samples=100, n_features=4, random_state=0)
    GBFSClassifier(n_estimators=4, verbose=True, device="cpu").fit(X, y)
    out, err = capfd.readouterr()
    text = out + err
    assert "gpufs boosting" in text
    assert "4/4" in text


def test_quiet_prints_nothing(capfd):
    X, y = make_classification(n_samples=100, n_features=4, random_state=0)
    est = GBFSClassifier(n_estimators=4, verbose=False, device="cpu").fit(X, y)
    est.predict(X)
    est.transform(X)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


# --- sample weights -----------------------------------------------------------------------------


def test_zero_weight_rows_are_removed_rows():
    """A row of weight 0 changes nothing, not even the bin edges; weight 2 is a duplicate."""
    rng = np.random.default_rng(12)
    n = 120
    X = rng.normal(size=(n, 3))
    y = X[:, 0] + X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    w = rng.integers(0, 3, n).astype(float)
    X[w == 0] *= 3.0  # weight-0 rows sit elsewhere: they would move midpoint cuts
    keep = w > 0
    a = GBFSRegressor(n_estimators=10, device="cpu").fit(X, y, sample_weight=w)
    b = GBFSRegressor(n_estimators=10, device="cpu").fit(X[keep], y[keep], sample_weight=w[keep])
    c = GBFSRegressor(n_estimators=10, device="cpu").fit(
        np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    )
    for f in range(3):
        np.testing.assert_array_equal(a.bin_mapper_.cuts_[f], b.bin_mapper_.cuts_[f])
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    # weight 2 against two copies: one row rounds once, two copies twice, in the 16-bit
    # fixed point (gpufs.engine.quantize), so each of the 10 trees may differ by what a
    # leaf's rounding moves (at most max|g w| / 2**14, the weight-2 scale being half)
    max_g = 2 * np.max(np.abs(y - np.average(y, weights=w)))
    np.testing.assert_allclose(a.predict(X), c.predict(X), rtol=0, atol=10 * max_g / 2**14)
