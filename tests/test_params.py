"""Hyperparameter validation: every numeric hyperparameter of every estimator rejects NaN,
infinities, values below its range, booleans and strings at ``fit``, with a message that names
the parameter (scikit-learn's ``_parameter_constraints`` machinery, ``gpufs._params``)."""

import math
import numbers
import warnings

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from gpufs import (
    ControlBurnClassifier,
    ControlBurnRegressor,
    GBFSClassifier,
    GBFSRegressor,
    MultiTaskGBFSClassifier,
    MultiTaskGBFSRegressor,
    StagewiseClassifier,
    StagewiseRegressor,
)
from gpufs._params import _NumberInterval, int_range, real_range

ESTIMATORS = [
    GBFSRegressor,
    GBFSClassifier,
    StagewiseRegressor,
    StagewiseClassifier,
    ControlBurnRegressor,
    ControlBurnClassifier,
]

RNG = np.random.default_rng(0)
X = RNG.normal(size=(30, 4))
Y = {False: X[:, 0] + 0.1 * RNG.normal(size=30), True: (X[:, 0] > 0).astype(int)}


def _bad_values(constraints):
    """Values outside every constraint of a numeric parameter."""
    ranges = [c for c in constraints if isinstance(c, _NumberInterval)]
    lows = [c.left for c in ranges if c.left is not None]
    bad = [math.nan, math.inf, -math.inf, True, "1"]
    if lows:
        bad.append(min(lows) - 1)
    if any(c.type is numbers.Integral and c.right is None for c in ranges) or any(
        c.type is numbers.Integral and c.right is not None and c.right >= 2**63 - 1 for c in ranges
    ):
        bad.append(10**20)  # beyond int64: an OverflowError deep in the fit (issue 26)
    return bad


def _cases():
    for cls in ESTIMATORS:
        for name, constraints in cls._parameter_constraints.items():
            if not any(isinstance(c, _NumberInterval) for c in constraints):
                continue
            for value in _bad_values(constraints):
                yield pytest.param(cls, name, value, id=f"{cls.__name__}-{name}-{value!r}")


@pytest.mark.parametrize("cls,name,value", list(_cases()))
def test_bad_numeric_hyperparameter_is_rejected_by_name(cls, name, value):
    est = cls(device="cpu").set_params(**{name: value})
    with pytest.raises(
        InvalidParameterError, match=rf"The '{name}' parameter of {cls.__name__} must be"
    ):
        est.fit(X, Y[cls in (GBFSClassifier, StagewiseClassifier, ControlBurnClassifier)])


@pytest.mark.parametrize("cls", ESTIMATORS + [MultiTaskGBFSRegressor, MultiTaskGBFSClassifier])
def test_every_parameter_has_a_constraint(cls):
    assert set(cls._parameter_constraints) == set(cls().get_params())


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize(
    "name,value", [("device", "tpu"), ("random_state", "seed"), ("verbose", "loud")]
)
def test_bad_common_parameters(cls, name, value):
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of"):
        cls(**{name: value}).fit(X, Y[False])


@pytest.mark.parametrize(
    "params,match",
    [
        (
            dict(penalty_scaling="foo"),
            r"'penalty_scaling' parameter of GBFSRegressor must be a str "
            r"among \{.*'root_sse'.*\}",
        ),
        (
            dict(hessian="yes"),
            r"'hessian' parameter of GBFSRegressor must be an instance of "
            r"'bool'",
        ),
        (
            dict(feature_costs=3.0),
            r"'feature_costs' parameter of GBFSRegressor must be an "
            r"array-like or None",
        ),
        (
            dict(max_depth=17),
            r"'max_depth' parameter of GBFSRegressor must be an int in the range "
            r"\[1, 16\]. Got 17",
        ),
        (
            dict(validation_fraction=1.0),
            r"'validation_fraction' parameter of GBFSRegressor must be "
            r"a float in the range \(0.0, 1.0\) or None. Got 1.0",
        ),
    ],
)
def test_gbfs_messages(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        GBFSRegressor(device="cpu", **params).fit(X, Y[False])


@pytest.mark.parametrize(
    "params,match",
    [
        (dict(dtype="float16"), r"'dtype' parameter of StagewiseRegressor must be a str among"),
        (
            dict(n_features_to_select=1.5),
            r"'n_features_to_select' parameter of StagewiseRegressor "
            r"must be None, an int in the range "
            r"\[1, 9223372036854775807\], a float "
            r"in the range \(0.0, 1.0\] or a str among \{'auto'\}",
        ),
        (dict(n_features_to_select="all"), r"'n_features_to_select' parameter"),
    ],
)
def test_stagewise_messages(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        StagewiseRegressor(device="cpu", **params).fit(X, Y[False])


@pytest.mark.parametrize(
    "params,match",
    [
        (
            dict(forest_method="boost"),
            r"'forest_method' parameter of ControlBurnRegressor must be "
            r"a str among",
        ),
        (dict(max_features="most"), r"'max_features' parameter of ControlBurnRegressor"),
        (dict(max_features=1.5), r"'max_features' parameter of ControlBurnRegressor"),
        (dict(sketch="fourier"), r"'sketch' parameter of ControlBurnRegressor must be a str among"),
        (
            dict(refit_estimator="rf"),
            r"'refit_estimator' parameter of ControlBurnRegressor must be "
            r"an object implementing 'fit' and 'predict' or None",
        ),
        (dict(group_costs="abc"), r"'group_costs' parameter of ControlBurnRegressor"),
    ],
)
def test_controlburn_messages(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        ControlBurnRegressor(device="cpu", **params).fit(X, Y[False])


def test_number_intervals_reject_nan_inf_and_booleans():
    r = real_range(0)
    assert r.is_satisfied_by(0.0) and r.is_satisfied_by(5) and r.is_satisfied_by(np.float32(2))
    for v in (math.nan, math.inf, -1e-300, True, np.bool_(False)):
        assert not r.is_satisfied_by(v)
    open_r = real_range(0, 1, closed="neither")
    assert not open_r.is_satisfied_by(0.0) and not open_r.is_satisfied_by(1.0)
    assert open_r.is_satisfied_by(0.5)
    i = int_range(1, 16)
    assert i.is_satisfied_by(1) and i.is_satisfied_by(np.int64(16))
    for v in (0, 17, 2.0, True, math.nan):
        assert not i.is_satisfied_by(v)
    unbounded = int_range(1)
    assert unbounded.is_satisfied_by(2**63 - 1)
    assert not unbounded.is_satisfied_by(2**63) and not unbounded.is_satisfied_by(10**20)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_n_features_to_select_beyond_int64_is_a_parameter_error(cls):
    """Issue 26: ``n_features_to_select=10**20`` raised OverflowError from GBFS's search."""
    est = cls(n_features_to_select=10**20, device="cpu")
    with pytest.raises(InvalidParameterError, match="'n_features_to_select' parameter"):
        est.fit(X, Y[cls in (GBFSClassifier, StagewiseClassifier, ControlBurnClassifier)])


def test_valid_parameters_fit_and_a_failed_fit_keeps_the_model():
    est = GBFSRegressor(n_estimators=2, device="cpu").fit(X, Y[False])
    before = est.predict(X)
    with pytest.raises(InvalidParameterError, match="'mu' parameter"):
        est.set_params(mu=float("nan")).fit(X, Y[False])
    np.testing.assert_array_equal(est.predict(X), before)


# --- the sweep: every parameter of every estimator, values of every wrong kind ----------------

#: Wrong in some way for every parameter (except where ``_still_valid`` says otherwise):
#: non-finite and negative numbers, a boolean, a number as text, an arbitrary object, a list of
#: the wrong length, a mapping, and arrays of one entry per feature holding NaN, infinity,
#: negative numbers or text.
SWEEP = [
    math.nan,
    math.inf,
    -math.inf,
    -1,
    -1.5,
    True,
    "1",
    object(),
    [1, 2],
    {"a": 1},
    np.full(4, math.nan),
    np.full(4, math.inf),
    np.full(4, -1.0),
    np.ones(3),
    ["a"] * 4,
]


def _still_valid(name, constraints, value):
    """The few sweep values that are legitimate for a parameter."""
    if isinstance(value, bool):  # a flag, a verbosity level or a seed
        return any(c in ("boolean", "verbose", "random_state") for c in constraints)
    if name == "n_jobs" and type(value) is int and value == -1:  # all cores (scikit-learn)
        return True
    if name == "feature_groups" and isinstance(value, np.ndarray) and value.shape == (4,):
        return bool(np.isfinite(value).all())  # group labels may be negative integers
    if name == "categorical_features" and isinstance(value, list) and value == [1, 2]:
        return True  # column indices
    return False


def _fit(cls, est):
    classifier = cls.__name__.endswith("Classifier")
    y = Y[classifier]
    if cls.__name__.startswith("MultiTask"):
        return est.fit([X[:15], X[15:]], [y[:15], y[15:]])
    return est.fit(X, y)


@pytest.mark.parametrize("cls", ESTIMATORS + [MultiTaskGBFSRegressor, MultiTaskGBFSClassifier])
def test_every_parameter_rejects_every_wrong_kind_of_value_naming_the_parameter(cls):
    """nan, inf, negative, wrong type, wrong length: a ValueError or TypeError naming the
    parameter, at fit, for all estimators (multitask included) and all their parameters."""
    problems = []
    for name, constraints in cls._parameter_constraints.items():
        for value in SWEEP:
            if _still_valid(name, constraints, value):
                continue
            est = cls(device="cpu").set_params(**{name: value})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    _fit(cls, est)
                except (ValueError, TypeError) as exc:
                    if name not in str(exc):
                        problems.append(f"{name}={value!r}: message without the name: {exc}")
                    continue
            problems.append(f"{name}={value!r} was accepted")
    assert not problems, "\n".join(problems)
