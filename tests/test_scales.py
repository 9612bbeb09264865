"""Scales (gpufs.data._scales): weights x c with reg_lambda x c and min_child_weight x c give the
same trees; targets and weights whose scale would overflow are refused, and weights that leave no
split or let reg_lambda swamp the hessians are warned about, with what to do."""

import warnings

import numpy as np
import pytest

from gpufs import ControlBurnRegressor, GBFSClassifier, GBFSRegressor, StagewiseRegressor


def _data(n=512, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 6)
    X[rng.rand(n, 6) < 0.05] = np.nan
    z = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2 - 0.3 * np.nan_to_num(X[:, 2])
    return X, z + 0.1 * rng.randn(n), (z > 0.3).astype(int), rng.uniform(0.5, 1.5, n)


def _fit(est, X, y, w):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a consistently scaled fit is quiet
        return est.fit(X, y, sample_weight=w)


def _params(c, scaling):
    p = dict(
        n_estimators=5,
        max_depth=4,
        mu=0.02,
        reg_lambda=1.0 * c,
        min_child_weight=0.5 * c,
        penalty_scaling=scaling,
        device="cpu",
    )
    if scaling == "none":  # the raw gain is compared with mu and min_split_gain
        p.update(mu=0.5 * c, min_split_gain=1e-3 * c)
    return p


POWERS = [2.0**k for k in (-20, -7, 1, 14, 20)]  # 1e-6 .. 1e6


@pytest.mark.parametrize("Est", [GBFSRegressor, GBFSClassifier])
@pytest.mark.parametrize("scaling", ["root_sse", "none"])
def test_weights_scaled_by_a_power_of_two_give_bit_identical_trees(Est, scaling):
    X, yr, yc, w = _data()
    y = yr if Est is GBFSRegressor else yc
    ref = _fit(Est(**_params(1.0, scaling)), X, y, w)
    s = ref.ensemble_.stacked()
    assert (s["feature"] >= 0).sum() > 20  # real trees, not stumps
    for c in POWERS:
        est = _fit(Est(**_params(c, scaling)), X, y, w * c)
        t = est.ensemble_.stacked()
        for k in (
            "feature",
            "bin_threshold",
            "threshold",
            "missing_left",
            "value",
            "count",
            "tree_column",
        ):
            assert np.array_equal(t[k], s[k]), (c, k)
        # gains and hessian sums scale by c, exactly
        assert np.array_equal(t["gain"], s["gain"] * c), c
        assert np.array_equal(t["cover"], s["cover"] * c), c
        assert np.array_equal(est.selected_features_, ref.selected_features_)
        assert np.array_equal(est.predict(X), ref.predict(X))


@pytest.mark.parametrize("c", [1e-6, 3.7, 1e6])
def test_weights_scaled_by_other_factors_give_the_same_trees_up_to_rounding(c):
    """w * c rounds, so the fixed-point gradients may differ in their last unit: the chosen
    splits are the same unless two candidates score within rounding of each other (not so on
    this data), and leaf values agree to rounding."""
    X, y, _, w = _data()
    ref = _fit(GBFSRegressor(**_params(1.0, "root_sse")), X, y, w)
    est = _fit(GBFSRegressor(**_params(c, "root_sse")), X, y, w * c)
    s, t = ref.ensemble_.stacked(), est.ensemble_.stacked()
    for k in ("feature", "bin_threshold", "missing_left", "count"):
        assert np.array_equal(t[k], s[k]), k
    # 16-bit fixed-point gradients (gpufs.engine.quantize): each row rounds to max|g w| / 2**15
    # or finer, so a leaf value (a mean of rounded values) moves at most max|g| / 2**15 with
    # the scale of w; a gain, a difference of squared rounded sums, to within a small share of
    # the largest gain
    max_g = np.max(np.abs(y - np.average(y, weights=w)))
    np.testing.assert_allclose(t["value"], s["value"], rtol=0, atol=max_g / 2**15)
    np.testing.assert_allclose(t["gain"], s["gain"] * c, rtol=0, atol=c * s["gain"].max() / 2**10)
    assert np.array_equal(est.selected_features_, ref.selected_features_)


def test_normalized_weights_with_scaled_regularization_are_unit_weights():
    """The remedy the warning gives: weights summing to 1 (here 1/512, a power of two) with
    reg_lambda and min_child_weight divided by n fit the model of unit weights."""
    X, y, _, _ = _data()
    n = X.shape[0]
    unit = GBFSRegressor(n_estimators=8, device="cpu").fit(X, y)
    with pytest.warns(UserWarning, match="reg_lambda=1 swamps the hessian sums"):
        swamped = GBFSRegressor(n_estimators=8, device="cpu").fit(
            X, y, sample_weight=np.full(n, 1 / n)
        )
    assert swamped.score(X, y) < unit.score(X, y) - 0.1
    scaled = _fit(
        GBFSRegressor(n_estimators=8, reg_lambda=1 / n, min_child_weight=1e-3 / n, device="cpu"),
        X,
        y,
        np.full(n, 1 / n),
    )
    assert np.array_equal(scaled.predict(X), unit.predict(X))


@pytest.mark.parametrize("Est", [GBFSRegressor, StagewiseRegressor, ControlBurnRegressor])
@pytest.mark.parametrize("factor,match", [(1e300, "would overflow"), (1e-300, "would underflow")])
def test_a_target_out_of_float_range_is_refused(Est, factor, match):
    X, y, _, _ = _data(n=200)
    est = Est(device="cpu")
    with pytest.raises(ValueError, match=match + r".*Standardize y \(for example.*or rescale"):
        est.fit(np.nan_to_num(X), y * factor)


@pytest.mark.parametrize(
    "weight,match",
    [
        (1e300, "would overflow.*Rescale sample_weight"),
        (1e-300, "would underflow.*Rescale sample_weight"),
    ],
)
def test_weights_out_of_float_range_are_refused(weight, match):
    X, _, y, _ = _data(n=200)
    with pytest.raises(ValueError, match=match):
        GBFSClassifier(device="cpu").fit(X, y, sample_weight=np.full(200, weight))


def test_weights_too_small_for_any_split_warn():
    """The issue's case: weights of 1e-30 gave a model without splits and no word of why."""
    X, y, _, _ = _data(n=200)
    with pytest.warns(
        UserWarning,
        match=r"no split can be made: .*min_child_weight=0\.001.*"
        r"rescale sample_weight to mean 1",
    ):
        est = GBFSRegressor(n_estimators=3, device="cpu").fit(
            X, y, sample_weight=np.full(200, 1e-30)
        )
    assert (est.ensemble_.stacked()["feature"] < 0).all()  # the warning told the truth


def test_unit_and_mean_one_weights_are_quiet():
    X, y, yc, w = _data(n=200)
    _fit(GBFSRegressor(n_estimators=3, device="cpu"), X, y, None)
    _fit(GBFSRegressor(n_estimators=3, device="cpu"), X, y, w)
    _fit(GBFSClassifier(n_estimators=3, device="cpu"), X, yc, w)


@pytest.mark.parametrize("Est", [GBFSRegressor, StagewiseRegressor, ControlBurnRegressor])
def test_a_tiny_target_is_refused_whatever_the_weights(Est):
    """y spanning 1e-300 passed the check when the weights were 1e200 (the check used the
    weighted gradient only): ControlBurn's forest then crashed (OverflowError in the
    fixed-point scale) and stagewise's squared residuals underflowed to 0, so it selected
    arbitrary features. Found by tests/test_input_fuzz."""
    X, y, _, _ = _data(n=200)
    with pytest.raises(
        ValueError,
        match=r"would underflow float64: y spans 3\.\d+e-300.*"
        r"Standardize y",
    ):
        Est(device="cpu").fit(
            np.nan_to_num(X),
            (y - y.min()) / np.ptp(y) * 3.5e-300,
            sample_weight=np.full(200, 1e200),
        )
