"""Tests of forward stagewise selection (gpufs/selectors/stagewise.py) and plot_stagewise."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from gpufs._device import gpu_available
from gpufs.selectors import _stagewise_stages as stages
from gpufs.selectors import stagewise as sw
from gpufs.selectors.stagewise import StagewiseClassifier, StagewiseRegressor

DATA = Path(__file__).parent / "data"


def boston():
    """The 506-row Boston housing table (MASS::Boston, shipped so the test runs offline)."""
    df = pd.read_csv(DATA / "boston.csv")
    return df.drop(columns=["medv"]), df["medv"]


def planted_linear(n=2000, seed=0):
    """Independent features with arbitrary offsets/scales; 3 of them drive y.

    Standardized effects: feature 3 -> 5.0, feature 11 -> -3.0, feature 7 -> 1.5.
    """
    rng = np.random.default_rng(seed)
    d = 20
    scale = rng.uniform(0.1, 100.0, d)
    offset = rng.uniform(-1000.0, 1000.0, d)
    Z = rng.standard_normal((n, d))
    X = Z * scale + offset
    beta_std = np.zeros(d)
    beta_std[[3, 11, 7]] = [5.0, -3.0, 1.5]
    y = 2.0 + Z @ beta_std + 0.1 * rng.standard_normal(n)
    return X, y, beta_std / scale


def std_cols(X, w=None):
    w = np.ones(len(X)) if w is None else w
    mu = (w @ X) / w.sum()
    sd = np.sqrt((w @ (X - mu) ** 2) / w.sum())
    return mu, sd


# ------------------------------------------------------------------------------------------
# Known answers
# ------------------------------------------------------------------------------------------


def test_boston_lstat_then_rm():
    X, y = boston()
    m = StagewiseRegressor(n_features_to_select=5, device="cpu").fit(X, y)
    names = list(m.feature_names_in_[m.selected_features_])
    assert names[:2] == ["lstat", "rm"]
    # Paper: LSTAT strongly negative, rooms positive.
    assert m.standardized_coef_[list(X.columns).index("lstat")] < 0
    assert m.standardized_coef_[list(X.columns).index("rm")] > 0
    assert np.all(np.diff(m.cost_history_) < 0)
    assert m.cost_history_[0] == pytest.approx(np.var(y.to_numpy()))
    assert len(m.cost_history_) == 6
    # Same answer from a plain numpy array; names then are x0..x12.
    m2 = StagewiseRegressor(n_features_to_select=5, device="cpu").fit(X.to_numpy(), y.to_numpy())
    np.testing.assert_array_equal(m2.selected_features_, m.selected_features_)
    assert list(m.get_feature_names_out()) == sorted(names, key=list(X.columns).index)


def test_planted_linear_order_and_coefficients():
    X, y, beta_raw = planted_linear()
    m = StagewiseRegressor(n_features_to_select=3, device="cpu").fit(X, y)
    np.testing.assert_array_equal(m.selected_features_, [3, 11, 7])
    np.testing.assert_allclose(m.coef_[[3, 11, 7]], beta_raw[[3, 11, 7]], rtol=0.05)
    np.testing.assert_allclose(m.predict(X), X @ m.coef_ + m.intercept_, rtol=1e-10)
    assert m.score(X, y) > 0.99
    assert m.weights_history_.shape == (4, 20)
    for r, j in enumerate(m.selected_features_, start=1):
        assert np.count_nonzero(m.weights_history_[r]) == r
        assert m.weights_history_[r, j] == m.standardized_coef_[j]


def _naive_stagewise(X, Y, k, logistic):
    """Slow oracle: per-feature Python loop, each one-weight problem by minimize_scalar."""
    mu, sd = std_cols(X)
    Z = (X - mu) / np.where(sd > 0, sd, 1.0)
    if logistic:
        p = np.clip((Y > 0).mean(axis=0), 1e-15, 1 - 1e-15)
        F = np.tile(np.log(p / (1 - p)), (len(X), 1))

        def cost(Fk, yk):
            return np.mean(np.logaddexp(0.0, -yk * Fk))
    else:
        F = np.tile(Y.mean(axis=0), (len(X), 1))

        def cost(Fk, yk):
            return np.mean((yk - Fk) ** 2)

    chosen, weights = [], []
    for _ in range(k):
        best = (np.inf, None, None)
        for j in range(X.shape[1]):
            if j in chosen or sd[j] == 0:
                continue
            total, aj = 0.0, []
            for c in range(Y.shape[1]):
                res = minimize_scalar(
                    lambda a: cost(F[:, c] + a * Z[:, j], Y[:, c]), bracket=(-1.0, 1.0), tol=1e-12
                )
                total += res.fun
                aj.append(res.x)
            if total < best[0]:
                best = (total, j, np.array(aj))
        _, j, aj = best
        chosen.append(j)
        weights.append(aj)
        F = F + Z[:, j][:, None] * aj[None, :]
    return chosen, np.array(weights)


def test_regressor_path_matches_bruteforce_oracle():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((150, 6)) @ rng.standard_normal((6, 6)) + rng.uniform(-5, 5, 6)
    y = X @ rng.standard_normal(6) + rng.standard_normal(150)
    m = StagewiseRegressor(n_features_to_select=4, device="cpu").fit(X, y)
    chosen, weights = _naive_stagewise(X, y[:, None], 4, logistic=False)
    np.testing.assert_array_equal(m.selected_features_, chosen)
    np.testing.assert_allclose(m.standardized_coef_[chosen], weights[:, 0], rtol=1e-6)


def test_classifier_path_matches_bruteforce_oracle():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((200, 5)) @ rng.standard_normal((5, 5))
    y = (X @ rng.standard_normal(5) + rng.logistic(size=200) > 0).astype(int)
    m = StagewiseClassifier(n_features_to_select=3, device="cpu").fit(X, y)
    chosen, weights = _naive_stagewise(X, np.where(y == 1, 1.0, -1.0)[:, None], 3, logistic=True)
    np.testing.assert_array_equal(m.selected_features_, chosen)
    np.testing.assert_allclose(m.standardized_coef_[0, chosen], weights[:, 0], rtol=1e-5)


# ------------------------------------------------------------------------------------------
# The vectorized one-weight solvers against brute-force 1-D minimization, feature by feature
# ------------------------------------------------------------------------------------------


def test_closed_form_least_squares_against_minimize_scalar():
    rng = np.random.default_rng(1)
    n, d = 300, 7
    X = rng.standard_normal((n, d)) * rng.uniform(0.5, 20, d) + rng.uniform(-50, 50, d)
    X[:, 4] = 3.25  # constant: weight 0, cost unchanged
    w = rng.uniform(0.0, 2.0, n)
    W = w.sum()
    r = rng.standard_normal(n) * 3
    r -= (w @ r) / W
    mu, sd, inv = stages._standardize_stats(X, w, W, np, "cpu")
    assert sd[4] == 0 and inv[4] == 0
    a, cost = sw.LeastSquaresStage().candidates(
        X, np.zeros((n, 1)), r[:, None], w, W, mu, inv, inv > 0, np, "cpu"
    )
    assert a.shape == cost.shape == (1, d)
    a, cost = a[0], cost[0]
    mu_ref, sd_ref = std_cols(X, w)
    for j in range(d):
        if j == 4:
            assert a[j] == 0
            assert cost[j] == pytest.approx((w @ r**2) / W, rel=1e-12)
            continue
        z = (X[:, j] - mu_ref[j]) / sd_ref[j]
        # Exact oracle: weighted least squares on one column, by lstsq.
        sw_ = np.sqrt(w)
        exact = np.linalg.lstsq((sw_ * z)[:, None], sw_ * r, rcond=None)[0][0]
        assert a[j] == pytest.approx(exact, rel=1e-10, abs=1e-12)
        # Brute-force oracle: Brent's minimizer pins x only to about sqrt(machine eps) of a
        # quadratic's flat minimum, so x is compared at that precision and the cost tightly;
        # the closed form's cost can be no worse than the minimizer's.
        res = minimize_scalar(lambda t: (w @ (r - t * z) ** 2) / W, tol=1e-12)
        assert a[j] == pytest.approx(res.x, rel=1e-6, abs=1e-10)
        assert cost[j] == pytest.approx(res.fun, rel=1e-10)
        assert cost[j] <= res.fun * (1 + 1e-12)


@pytest.mark.parametrize("K", [1, 3])
def test_newton_logistic_against_minimize_scalar(K):
    rng = np.random.default_rng(2 + K)
    n, d = 400, 6
    X = rng.standard_normal((n, d)) * rng.uniform(0.5, 5, d) + rng.uniform(-5, 5, d)
    X[:, 2] = -1.0  # constant
    X[:, 5] = np.where(rng.random(n) < 0.5, 1.0, 0.0)  # binary feature
    w = rng.uniform(0.1, 1.5, n)
    W = w.sum()
    F = rng.standard_normal((n, K)) * 0.7
    Y = np.where(rng.random((n, K)) < 0.5, 1.0, -1.0)
    Y[:, 0] = np.where(X[:, 0] + X[:, 1] + rng.logistic(size=n) > 0, 1.0, -1.0)
    mu, sd, inv = stages._standardize_stats(X, w, W, np, "cpu")
    active = inv > 0
    stage = sw.LogisticStage(2 if K == 1 else K, 50, 1e-12)
    a, cost = stage.candidates(X, F, Y, w, W, mu, inv, active, np, "cpu")
    assert a.shape == cost.shape == (K, d)
    mu_ref, sd_ref = std_cols(X, w)
    for k in range(K):
        base = (w @ np.logaddexp(0.0, -Y[:, k] * F[:, k])) / W
        for j in range(d):
            if j == 2:
                assert a[k, j] == 0 and cost[k, j] == pytest.approx(base, rel=1e-12)
                continue
            z = (X[:, j] - mu_ref[j]) / sd_ref[j]
            f = lambda t: (w @ np.logaddexp(0.0, -Y[:, k] * (F[:, k] + t * z))) / W  # noqa
            res = minimize_scalar(f, bracket=(-1, 1), tol=1e-12)
            assert a[k, j] == pytest.approx(res.x, rel=1e-6, abs=1e-8)
            assert cost[k, j] == pytest.approx(res.fun, rel=1e-12)
            assert cost[k, j] <= base + 1e-15


def test_newton_separable_feature_stays_finite_and_lowers_cost():
    # Feature 0 separates the classes perfectly: the optimum is at infinity.
    rng = np.random.default_rng(0)
    x0 = np.r_[rng.uniform(-3, -1, 50), rng.uniform(1, 3, 50)]
    X = np.c_[x0, rng.standard_normal(100)]
    y = np.r_[np.zeros(50), np.ones(50)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / divide warnings
        m = StagewiseClassifier(n_features_to_select=1, device="cpu").fit(X, y)
    assert m.selected_features_.tolist() == [0]
    assert np.isfinite(m.coef_).all()
    assert m.cost_history_[1] < 1e-3
    assert m.score(X, y) == 1.0


def test_chunked_sweeps_match_single_chunk(monkeypatch):
    X, y, _ = planted_linear(n=600)
    yc = (y > np.median(y)).astype(int)
    ref_r = StagewiseRegressor(5, device="cpu").fit(X, y)
    ref_c = StagewiseClassifier(5, device="cpu").fit(X, yc)
    monkeypatch.setitem(stages.CHUNK_ELEMENTS_STAGEWISE, "cpu", 7 * 20)  # 7 rows per chunk
    assert len(stages._row_chunks(600, 20, "cpu")) == 86
    r = StagewiseRegressor(5, device="cpu").fit(X, y)
    c = StagewiseClassifier(5, device="cpu").fit(X, yc)
    np.testing.assert_array_equal(r.selected_features_, ref_r.selected_features_)
    np.testing.assert_array_equal(c.selected_features_, ref_c.selected_features_)
    np.testing.assert_allclose(r.mean_, ref_r.mean_, rtol=1e-12)
    np.testing.assert_allclose(r.std_, ref_r.std_, rtol=1e-10)
    # Newton stops at a step below newton_tol * (1 + |a|): weights agree to that.
    np.testing.assert_allclose(c.coef_, ref_c.coef_, rtol=1e-7, atol=1e-8)


# ------------------------------------------------------------------------------------------
# Classifier
# ------------------------------------------------------------------------------------------


def test_planted_logistic_binary():
    rng = np.random.default_rng(5)
    n, d = 4000, 12
    Z = rng.standard_normal((n, d))
    X = Z * rng.uniform(1, 10, d) + rng.uniform(-10, 10, d)
    logit = 0.5 + 3.0 * Z[:, 2] - 2.0 * Z[:, 9] + 1.0 * Z[:, 4]
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    m = StagewiseClassifier(n_features_to_select=3, device="cpu").fit(X, y)
    np.testing.assert_array_equal(m.selected_features_, [2, 9, 4])
    assert list(m.classes_) == ["no", "yes"]
    assert m.coef_.shape == (1, d) and m.intercept_.shape == (1,)
    assert m.coef_[0, 2] > 0 and m.coef_[0, 9] < 0
    dec = m.decision_function(X)
    assert dec.shape == (n,)
    np.testing.assert_allclose(dec, X @ m.coef_[0] + m.intercept_[0], rtol=1e-9, atol=1e-9)
    proba = m.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-dec)), rtol=1e-12)
    np.testing.assert_array_equal(m.predict(X), np.where(dec > 0, "yes", "no"))
    assert m.score(X, y) > 0.8
    assert np.all(np.diff(m.cost_history_) < 0)
    # round 0: bias alone = log-odds of the class frequency
    p = np.mean(y == "yes")
    assert m.bias_[0] == pytest.approx(np.log(p / (1 - p)))


def test_planted_multiclass_one_vs_rest_shared_set():
    rng = np.random.default_rng(6)
    n, d = 3000, 10
    X = rng.standard_normal((n, d))
    informative = [7, 1, 4]
    scores = 3.0 * X[:, informative] + rng.gumbel(size=(n, 3))
    y = np.array(["a", "b", "c"])[scores.argmax(axis=1)]
    m = StagewiseClassifier(n_features_to_select=3, device="cpu").fit(X, y)
    assert set(m.selected_features_.tolist()) == set(informative)
    assert m.coef_.shape == (3, d)
    assert m.weights_history_.shape == (4, 3, d)
    assert m.decision_function(X).shape == (n, 3)
    proba = m.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert m.score(X, y) > 0.8
    # Each class's own feature gets that class's largest positive weight.
    for k, f in enumerate(informative):
        assert np.argmax(m.coef_[:, f]) == k
    # Summed one-vs-rest cost decreases every round.
    assert np.all(np.diff(m.cost_history_) < 0)


# ------------------------------------------------------------------------------------------
# Stopping rules
# ------------------------------------------------------------------------------------------


def test_tol_stops_before_noise_features():
    X, y, _ = planted_linear()
    m = StagewiseRegressor(device="cpu", tol=0.05).fit(X, y)
    np.testing.assert_array_equal(m.selected_features_, [3, 11, 7])
    assert len(m.cost_history_) == 4


def test_validation_fraction_early_stopping_cuts_back_to_best():
    X, y, _ = planted_linear(n=400, seed=2)
    m = StagewiseRegressor(
        device="cpu", validation_fraction=0.3, n_iter_no_change=3, random_state=0
    ).fit(X, y)
    assert m.selected_features_[:3].tolist() == [3, 11, 7]
    assert len(m.selected_features_) < 20
    v = m.validation_cost_history_
    assert v.shape == m.cost_history_.shape == (len(m.selected_features_) + 1,)
    assert np.argmin(v) == len(v) - 1  # cut back to the best validation round
    assert np.count_nonzero(m.coef_) == len(m.selected_features_)


def test_explicit_validation_set_and_fraction_count():
    X, y, _ = planted_linear(n=800, seed=4)
    m = StagewiseRegressor(device="cpu", n_iter_no_change=2).fit(
        X[:600], y[:600], eval_set=(X[600:], y[600:])
    )
    assert m.selected_features_[:3].tolist() == [3, 11, 7]
    # the deprecated keywords still work, with a FutureWarning, and give the same model
    with pytest.warns(FutureWarning, match="X_val, y_val and sample_weight_val are deprecated"):
        old = StagewiseRegressor(device="cpu", n_iter_no_change=2).fit(
            X[:600], y[:600], X_val=X[600:], y_val=y[600:]
        )
    np.testing.assert_array_equal(old.selected_features_, m.selected_features_)
    np.testing.assert_array_equal(old.validation_cost_history_, m.validation_cost_history_)
    assert m.validation_cost_history_[len(m.selected_features_)] == m.validation_cost_history_.min()
    m = StagewiseRegressor(0.25, device="cpu").fit(X, y)
    assert len(m.selected_features_) == 5


def test_classifier_validation_and_stratified_split():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((600, 8))
    y = (X[:, 3] - X[:, 5] + 0.3 * rng.standard_normal(600) > 0).astype(int)
    m = StagewiseClassifier(
        device="cpu", validation_fraction=0.25, n_iter_no_change=2, random_state=1
    ).fit(X, y)
    assert set(m.selected_features_[:2].tolist()) == {3, 5}
    assert m.validation_cost_history_ is not None


def test_constant_features_never_selected():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((100, 4))
    X[:, 1] = 7.0
    X[:, 3] = 0.1  # 0.1 is inexact in binary: still constant
    y = X[:, 0] + X[:, 2]
    with pytest.warns(UserWarning, match="Only 2 of the requested 4 features"):
        m = StagewiseRegressor(4, device="cpu").fit(X, y)
    assert sorted(m.selected_features_.tolist()) == [0, 2]
    assert m.std_[1] == 0 and m.std_[3] == 0
    assert m.coef_[1] == 0 and m.coef_[3] == 0
    assert np.isfinite(m.predict(X)).all()


def test_sample_weight_equals_repetition():
    rng = np.random.default_rng(10)
    X = rng.standard_normal((60, 5))
    y = X @ [1.0, -2.0, 0.5, 0.0, 3.0] + rng.standard_normal(60)
    reps = rng.integers(0, 3, 60)
    a = StagewiseRegressor(4, device="cpu").fit(X, y, sample_weight=reps)
    b = StagewiseRegressor(4, device="cpu").fit(np.repeat(X, reps, 0), np.repeat(y, reps))
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9)
    yc = (y > 0).astype(int)
    a = StagewiseClassifier(3, device="cpu").fit(X, yc, sample_weight=reps)
    b = StagewiseClassifier(3, device="cpu").fit(np.repeat(X, reps, 0), np.repeat(yc, reps))
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7)


def test_row_order_invariance_and_float32():
    X, y, _ = planted_linear(n=1000, seed=11)
    perm = np.random.default_rng(0).permutation(1000)
    a = StagewiseRegressor(6, device="cpu").fit(X, y)
    b = StagewiseRegressor(6, device="cpu").fit(X[perm], y[perm])
    c = StagewiseRegressor(6, device="cpu", dtype="float32").fit(X.astype(np.float32), y)
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    np.testing.assert_array_equal(a.selected_features_[:3], c.selected_features_[:3])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------------------------
# Selector API, pandas, verbose, inputs untouched
# ------------------------------------------------------------------------------------------


def test_pandas_names_transform_and_support():
    X, y = boston()
    m = StagewiseRegressor(3, device="cpu").fit(X, y)
    assert list(m.feature_names_in_) == list(X.columns)
    assert m.n_features_in_ == 13
    mask = m.get_support()
    assert mask.sum() == 3 and mask[list(X.columns).index("lstat")]
    out = m.transform(X)
    np.testing.assert_array_equal(out, X.to_numpy()[:, mask])
    assert list(m.get_feature_names_out()) == list(X.columns[mask])
    m.set_output(transform="pandas")
    assert list(m.transform(X).columns) == list(X.columns[mask])


def test_verbose_progress_bar(capsys):
    X, y, _ = planted_linear(n=200)
    StagewiseRegressor(3, device="cpu", verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "StagewiseRegressor" in err and "3/3" in err
    StagewiseRegressor(3, device="cpu").fit(X, y)
    assert capsys.readouterr().err == ""


def test_inputs_not_modified():
    X, y, _ = planted_linear(n=300)
    Xc, yc, w = X.copy(), y.copy(), np.linspace(0.5, 1.5, 300)
    wc = w.copy()
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(20)])
    dfc = df.copy()
    m = StagewiseRegressor(4, device="cpu", validation_fraction=0.2, random_state=0)
    m.fit(X, y, sample_weight=w)
    m.predict(X)
    m.transform(X)
    StagewiseRegressor(4, device="cpu").fit(df, y).transform(df)
    ylab = (y > 0).astype(int)
    ylabc = ylab.copy()
    StagewiseClassifier(3, device="cpu", validation_fraction=0.2).fit(X, ylab, sample_weight=w)
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)
    np.testing.assert_array_equal(w, wc)
    np.testing.assert_array_equal(ylab, ylabc)
    pd.testing.assert_frame_equal(df, dfc)


def test_plot_stagewise():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpufs.plotting import plot_stagewise

    X, y = boston()
    m = StagewiseRegressor(5, device="cpu").fit(X, y)
    axes = plot_stagewise(m)
    assert len(axes) == 2
    ticks = [t.get_text() for t in axes[0].get_xticklabels()]
    assert ticks[:3] == ["bias", "lstat", "rm"]
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), m.cost_history_)
    bars = [p.get_height() for p in axes[1].patches]
    np.testing.assert_allclose(bars, m.standardized_coef_[m.selected_features_])
    fig, ax = plt.subplots()
    assert plot_stagewise(m, ax=ax) == [ax]
    rng = np.random.default_rng(0)
    Xc = rng.standard_normal((300, 4))
    c = StagewiseClassifier(2, device="cpu", validation_fraction=0.2).fit(
        Xc, Xc[:, :3].argmax(axis=1)
    )
    axes = plot_stagewise(c)
    assert len(axes[1].patches) == 3 * 2  # one bar per class per feature
    assert len(axes[0].lines) == 2  # training and validation cost
    with pytest.raises(NotFittedError, match="call fit first"):
        plot_stagewise(StagewiseRegressor())
    plt.close("all")


def test_plotting_imports_matplotlib_lazily():
    code = "import sys, gpufs.plotting; assert 'matplotlib' not in sys.modules"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# ------------------------------------------------------------------------------------------
# Bad input: every rejected input says what is wrong
# ------------------------------------------------------------------------------------------

XB = np.random.default_rng(0).standard_normal((30, 4))
YB = XB[:, 0] + 1.0


def test_n_features_to_select_larger_than_the_data_warns_and_selects_all():
    """Issue 36, item 7: stagewise raised where GBFS and ControlBurn warn; now the one rule
    of every family (``feature_budget``): warn at once, select every usable feature."""
    from gpufs import SelectionWarning

    X = np.random.default_rng(1).standard_normal((60, 4))
    y = X @ np.array([3.0, -2.0, 1.0, 0.5])
    with pytest.warns(
        SelectionWarning,
        match=r"n_features_to_select=9 is larger than the "
        r"number of features in X \(4\): selecting all 4",
    ) as rec:
        m = StagewiseRegressor(9, device="cpu").fit(X, y)
    assert rec[0].filename == __file__
    assert sorted(m.selected_features_.tolist()) == [0, 1, 2, 3]


def test_bad_inputs():
    import scipy.sparse as sp

    R = StagewiseRegressor(2, device="cpu")
    Xn = XB.copy()
    Xn[3, 1] = np.nan
    Xi = XB.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        R.fit(Xi, YB)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        R.fit(XB, np.r_[np.nan, YB[1:]])
    with pytest.raises(ValueError, match="Expected 2D array"):
        R.fit(XB[:, 0], YB)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        R.fit(XB, YB[:-1])
    with pytest.raises(TypeError, match="sparse"):
        R.fit(sp.csr_matrix(XB), YB)
    with pytest.raises(ValueError, match="non-numeric columns: 'c'"):
        StagewiseRegressor(2, device="cpu", categorical_features=None).fit(
            pd.DataFrame({"a": XB[:, 0], "c": ["x"] * 30}), YB
        )
    with pytest.raises(ValueError, match=r"non-numeric columns: 'd' \(dtype Datetime"):
        R.fit(pd.DataFrame({"a": XB[:, 0], "d": pd.Timestamp("2020-01-01")}), YB)
    with pytest.raises(ValueError, match="sample_weight has negative values"):
        R.fit(XB, YB, sample_weight=-np.ones(30))
    with (
        pytest.raises(ValueError, match="X_val and y_val must be given together"),
        pytest.warns(FutureWarning),
    ):
        R.fit(XB, YB, X_val=XB)
    with pytest.raises(ValueError, match="either validation_fraction or eval_set"):
        StagewiseRegressor(validation_fraction=0.2, device="cpu").fit(XB, YB, eval_set=(XB, YB))
    with pytest.raises(ValueError, match="n_iter_no_change needs validation data"):
        StagewiseRegressor(n_iter_no_change=2, device="cpu").fit(XB, YB)
    R.fit(XB, YB)
    with pytest.raises(
        ValueError, match="X has 3 features, but StagewiseRegressor is expecting 4 features"
    ):
        R.predict(XB[:, :3])
    assert np.isfinite(R.predict(Xn)).all()  # a missing value counts at the mean
    C = StagewiseClassifier(2, device="cpu")
    with pytest.raises(ValueError, match="only 1 class"):
        C.fit(XB, np.zeros(30))
    with pytest.raises(ValueError, match="Unknown label type"):
        C.fit(XB, YB)
    with pytest.raises(ValueError, match="eval_set has labels not seen in y"):
        C.fit(XB, YB > 1, eval_set=(XB, np.full(30, 5)))


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU message")
def test_device_gpu_without_gpu_says_why():
    with pytest.raises(RuntimeError, match="no CUDA GPU is usable"):
        StagewiseRegressor(device="gpu").fit(XB, YB)


# ------------------------------------------------------------------------------------------
# scikit-learn's estimator checks
# ------------------------------------------------------------------------------------------


@parametrize_with_checks([StagewiseRegressor(device="cpu"), StagewiseClassifier(device="cpu")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ------------------------------------------------------------------------------------------
# GPU: the same selections as the CPU (run where cupy sees a GPU)
# ------------------------------------------------------------------------------------------


def test_gpu_code_path_with_numpy_as_the_device_namespace(monkeypatch):
    """Runs fit's device="gpu" branch (GPU chunk sizes, device placement) with numpy standing in
    for cupy, so the branch is exercised on machines without a GPU."""
    import gpufs._device as dev

    monkeypatch.setattr(dev, "_cupy_or_none", lambda: np)
    monkeypatch.setattr(dev, "_setup_rmm_pool_once", lambda: None)
    X, y, _ = planted_linear(n=500)
    cpu = StagewiseRegressor(4, device="cpu").fit(X, y)
    gpu = StagewiseRegressor(4, device="gpu").fit(X, y)
    assert gpu.device_ == "gpu"
    np.testing.assert_array_equal(cpu.selected_features_, gpu.selected_features_)
    np.testing.assert_allclose(cpu.coef_, gpu.coef_, rtol=1e-12)
    yc = (y > np.median(y)).astype(int)
    c = StagewiseClassifier(3, device="cpu", validation_fraction=0.2, random_state=0).fit(X, yc)
    g = StagewiseClassifier(3, device="gpu", validation_fraction=0.2, random_state=0).fit(X, yc)
    np.testing.assert_array_equal(c.selected_features_, g.selected_features_)
    np.testing.assert_allclose(c.coef_, g.coef_, rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU visible to cupy")
def test_gpu_matches_cpu():
    import cupy as cp

    X, y, _ = planted_linear(n=3000, seed=12)
    cpu = StagewiseRegressor(8, device="cpu").fit(X, y)
    gpu = StagewiseRegressor(8, device="gpu").fit(X, y)
    assert gpu.device_ == "gpu"
    np.testing.assert_array_equal(cpu.selected_features_, gpu.selected_features_)
    np.testing.assert_allclose(cpu.coef_, gpu.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(cpu.cost_history_, gpu.cost_history_, rtol=1e-9)
    Xg = cp.asarray(X)
    pred = gpu.predict(Xg)
    assert isinstance(pred, cp.ndarray)
    np.testing.assert_allclose(pred.get(), cpu.predict(X), rtol=1e-9)
    out = gpu.transform(Xg)
    assert isinstance(out, cp.ndarray)
    np.testing.assert_array_equal(out.get(), cpu.transform(X))
    # cupy input to fit
    gpu2 = StagewiseRegressor(8, device="gpu").fit(Xg, cp.asarray(y))
    np.testing.assert_array_equal(gpu2.selected_features_, cpu.selected_features_)
    # float32 on the GPU
    g32 = StagewiseRegressor(3, device="gpu", dtype="float32").fit(X, y)
    np.testing.assert_array_equal(g32.selected_features_, cpu.selected_features_[:3])

    rng = np.random.default_rng(13)
    Xc = rng.standard_normal((3000, 10))
    yb = (Xc[:, 2] - 2 * Xc[:, 6] + rng.logistic(size=3000) > 0).astype(int)
    ym = (Xc[:, [1, 4, 8]] * 3 + rng.gumbel(size=(3000, 3))).argmax(axis=1)
    for yy in (yb, ym):
        c = StagewiseClassifier(4, device="cpu").fit(Xc, yy)
        g = StagewiseClassifier(4, device="gpu").fit(Xc, yy)
        np.testing.assert_array_equal(c.selected_features_, g.selected_features_)
        np.testing.assert_allclose(c.coef_, g.coef_, rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(c.cost_history_, g.cost_history_, rtol=1e-9)
        proba = g.predict_proba(cp.asarray(Xc))
        assert isinstance(proba, cp.ndarray)
        np.testing.assert_allclose(proba.get(), c.predict_proba(Xc), rtol=1e-7, atol=1e-12)
        pred = g.predict(cp.asarray(Xc))
        assert isinstance(pred, cp.ndarray)
        np.testing.assert_array_equal(pred.get(), c.predict(Xc))


@pytest.mark.parametrize("value", [1.0, 0.1, -3e5])
@pytest.mark.parametrize("k", [None, 2])
def test_a_constant_target_selects_nothing_and_says_so(value, k):
    """Issue 26: a constant target selected every feature (or k of them) with weight 0 and no
    warning. Now nothing is selected and one warning says why, as GBFS and ControlBurn do.
    Rows of weight 0 do not count: a target constant on the weighted rows is constant."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((120, 5))
    y = np.full(120, value)
    w = np.ones(120)
    y[:10], w[:10] = rng.standard_normal(10), 0.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = StagewiseRegressor(k, device="cpu").fit(X, y, sample_weight=w)
    msgs = [str(c.message) for c in caught if issubclass(c.category, UserWarning)]
    assert len(msgs) == 1 and msgs[0].startswith(
        "no feature was selected: the target is constant (on the rows of positive weight)"
    ), msgs
    assert m.selected_features_.size == 0 and not m.coef_.any()
    np.testing.assert_allclose(m.predict(X), value)


def _unit_problem(n=400, d=6, seed=21):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    y = 3.0 * Z[:, 0] - 2.0 * Z[:, 3] + Z[:, 5] + 0.3 * rng.standard_normal(n)
    return Z, y


@pytest.mark.parametrize("scale", [1e160, 1e-160, 1e200, 1e-200, 1e300, 1e-300, 2e307])
def test_features_of_extreme_magnitude_select_as_at_unit_scale(scale):
    """Issue 26: at 1e+-160..1e+-200 every feature was declared constant (nothing selected),
    at 1e308 the wrong features were selected and predict returned NaN. Standardization is
    scale-free, so the selection and the predictions are those of the unit-scale data."""
    Z, y = _unit_problem()
    ref = StagewiseRegressor(3, device="cpu").fit(Z, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = StagewiseRegressor(3, device="cpu").fit(Z * scale, y)
        pred = m.predict(Z * scale)
    assert m.selected_features_.tolist() == ref.selected_features_.tolist() == [0, 3, 5]
    np.testing.assert_allclose(m.standardized_coef_, ref.standardized_coef_, rtol=1e-9)
    np.testing.assert_allclose(pred, ref.predict(Z), rtol=1e-7, atol=1e-9)
    labels = (y > 0).astype(int)
    ref_c = StagewiseClassifier(2, device="cpu").fit(Z, labels)
    m_c = StagewiseClassifier(2, device="cpu").fit(Z * scale, labels)
    assert m_c.selected_features_.tolist() == ref_c.selected_features_.tolist()
    np.testing.assert_allclose(
        m_c.predict_proba(Z * scale), ref_c.predict_proba(Z), rtol=1e-6, atol=1e-9
    )


def test_columns_of_very_different_magnitudes_together(tmp_path):
    Z, y = _unit_problem()
    scales = np.array([1e-250, 1.0, 1e250, 1e120, 3.0, 1e-120])
    ref = StagewiseRegressor(3, device="cpu").fit(Z, y)
    m = StagewiseRegressor(3, device="cpu").fit(Z * scales, y)
    assert m.selected_features_.tolist() == ref.selected_features_.tolist()
    np.testing.assert_allclose(m.predict(Z * scales), ref.predict(Z), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(m.std_ / scales, ref.std_, rtol=1e-12)
    path = tmp_path / "m.json"
    m.save_model(path)
    np.testing.assert_array_equal(
        StagewiseRegressor.load_model(path).predict(Z * scales), m.predict(Z * scales)
    )


def test_subnormal_columns_are_refused_by_name():
    """Values below float64's normal range cannot carry a weight in X's units (it would
    overflow): one clear error instead of infinite coefficients."""
    Z, y = _unit_problem()
    X = Z.copy()
    X[:, 3] *= 1e-310
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"the weights of columns \[3\] overflow float64"):
            StagewiseRegressor(3, device="cpu").fit(X, y)


def test_two_categorical_columns_round_trip_bit_for_bit(tmp_path):
    """The category weights were summed in the order of selection by the fitted model and in
    column order by the loaded one: predictions differed in the last bits (found by
    tests/test_input_fuzz)."""
    rng = np.random.default_rng(4)
    n = 300
    a, b = rng.integers(0, 3, n), rng.integers(0, 4, n)
    X = pd.DataFrame(
        {
            "a": pd.Categorical(np.array(list("pqr"))[a]),
            "b": pd.Categorical(np.array(list("stuv"))[b]),
            "c": rng.standard_normal(n),
        }
    )
    y = 0.3 * a + np.array([0.1, 3.7, -2.9, 1.3])[b] + 0.1 * rng.standard_normal(n)
    m = StagewiseRegressor(2, device="cpu").fit(X, y)
    assert m.selected_features_.tolist() == [1, 0]  # b first: not column order
    path = tmp_path / "m.json"
    m.save_model(path)
    np.testing.assert_array_equal(StagewiseRegressor.load_model(path).predict(X), m.predict(X))


def test_no_feature_of_weight_zero_once_the_training_data_is_fitted():
    """Two rows: the bias and one feature fit them exactly, and every later round added a
    feature whose weight is rounding noise (all 500 of them; found probing as a new user).
    The path now ends when a round lowers the cost by nothing (below 1e-12 of the bias-alone
    cost), and a requested count says why it was not reached."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((2, 500))
    m = StagewiseRegressor(device="cpu").fit(X, [0.0, 1.0])
    assert len(m.selected_features_) == 1
    np.testing.assert_allclose(m.predict(X), [0.0, 1.0], atol=1e-12)
    Z, y = _unit_problem()
    with pytest.warns(
        UserWarning,
        match=r"Only 1 of the requested 3 features could be "
        r"selected: the model fits the training data",
    ):
        m = StagewiseRegressor(3, device="cpu").fit(Z, 1.0 + 2.0 * Z[:, 4])
    assert m.selected_features_.tolist() == [4]


# ------------------------------------------------------------------------------------------
# Missing values (issue 36, item 6): the mean plus a missing offset of the same column
# ------------------------------------------------------------------------------------------


def _holes(seed=0, n=600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    miss = rng.random(n) < 0.3
    y = 2 * X[:, 0] + X[:, 1] + 3.0 * miss + 0.1 * rng.normal(size=n)
    Xn = X.copy()
    Xn[miss, 3] = np.nan  # column 3: no signal but its missingness
    Xn[rng.random(n) < 0.2, 0] = np.nan  # column 0: the signal, with holes
    return Xn, y, miss


def test_missing_values_are_filled_with_the_mean_and_fitted_with_an_offset():
    """Stagewise refused NaN ("impute them first", naming no column) where GBFS and
    ControlBurn take it. The stated rule (docs/guide/stagewise.rst): the column's weighted
    mean of the observed training rows, plus a missing offset that belongs to the column."""
    Xn, y, miss = _holes()
    before = Xn.copy()
    m = StagewiseRegressor(3, device="cpu").fit(Xn, y)
    np.testing.assert_array_equal(Xn, before)  # the user's array untouched
    # column 3 is selected for its missingness alone: its offset selects the column
    assert set(m.selected_features_.tolist()) == {0, 1, 3}
    assert sorted(m.missing_coef_) == [0, 3]
    assert m.missing_coef_[3] > 2.0
    assert m.mean_[0] == pytest.approx(np.nanmean(Xn[:, 0]), rel=1e-12)
    # predict: the rule written out in raw units
    Xf = np.where(np.isnan(Xn), m.mean_[None, :], Xn)
    expect = (
        Xf @ m.coef_
        + m.intercept_
        + sum(np.isnan(Xn[:, f]) * a for f, a in m.missing_coef_.items())
    )
    np.testing.assert_allclose(m.predict(Xn), expect, rtol=1e-12, atol=1e-12)
    assert np.mean((m.predict(Xn) - y) ** 2) < 0.3 * np.var(y)
    # transform and get_support name the original columns; NaN passes through
    assert m.get_support().tolist() == [True, True, False, True, False]
    out = m.transform(Xn)
    assert out.shape == (600, 3) and np.isnan(out).sum() == np.isnan(Xn[:, [0, 1, 3]]).sum()


def test_missing_values_classifier_eval_set_and_round_trip(tmp_path):
    Xn, y, miss = _holes(1)
    yc = (y > 1.0).astype(int)
    c = StagewiseClassifier(3, device="cpu").fit(Xn, yc, eval_set=(Xn[:200], yc[:200]))
    assert 3 in c.selected_features_.tolist() and 3 in c.missing_coef_
    assert c.missing_coef_[3].shape == (1,)
    assert np.isfinite(c.validation_cost_history_).all()
    assert c.score(Xn, yc) > 0.75
    path = tmp_path / "m.json"
    c.save_model(path)
    back = StagewiseClassifier.load_model(path)
    np.testing.assert_array_equal(back.predict_proba(Xn), c.predict_proba(Xn))
    assert sorted(back.missing_coef_) == sorted(c.missing_coef_)
    r = StagewiseRegressor(2, device="cpu", validation_fraction=0.25, n_iter_no_change=1).fit(Xn, y)
    assert np.isfinite(r.predict(Xn)).all()


def test_a_column_missing_in_predict_only_counts_at_its_mean():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] - X[:, 2]
    m = StagewiseRegressor(2, device="cpu").fit(X, y)
    assert m.missing_coef_ == {}
    X2 = X[:5].copy()
    X2[:, 0] = np.nan
    np.testing.assert_allclose(
        m.predict(X2), m.intercept_ + m.coef_[0] * m.mean_[0] + X2[:, 2] * m.coef_[2], rtol=1e-12
    )


def test_a_constant_column_with_holes_is_selectable_by_its_offset(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    miss = rng.random(300) < 0.5
    X[:, 1] = np.where(miss, np.nan, 7.0)
    y = X[:, 0] + 2.0 * miss
    m = StagewiseRegressor(2, device="cpu").fit(X, y)
    assert sorted(m.selected_features_.tolist()) == [0, 1] and m.std_[1] == 0
    path = tmp_path / "m.json"
    m.save_model(path)
    np.testing.assert_array_equal(StagewiseRegressor.load_model(path).predict(X), m.predict(X))
