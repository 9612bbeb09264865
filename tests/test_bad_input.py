"""Every rejected input, with the message it gets, and the user's data left untouched."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from gpufs import (
    ControlBurnClassifier,
    ControlBurnRegressor,
    GBFSClassifier,
    GBFSRegressor,
    SelectionWarning,
    StagewiseClassifier,
    StagewiseRegressor,
)
from gpufs._device import gpu_available

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 4))
Y_REG = X[:, 0] + 0.1 * RNG.normal(size=40)
Y_CLS = (X[:, 0] > 0).astype(int)


@pytest.fixture(scope="module")
def fitted():
    return GBFSClassifier(n_estimators=3, device="cpu").fit(X, Y_CLS)


def _both(**kw):
    return [GBFSRegressor(device="cpu", **kw), GBFSClassifier(device="cpu", **kw)]


# --- n_features_to_select above the number of features ----------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: StagewiseRegressor(9, device="cpu"),
        lambda: GBFSRegressor(n_features_to_select=9, n_estimators=3, device="cpu"),
        lambda: ControlBurnRegressor(n_features_to_select=9, device="cpu"),
    ],
    ids=["stagewise", "gbfs", "controlburn"],
)
def test_k_above_the_features_is_said_at_once_by_every_family(make):
    """Issue 36, item 7: one rule for every family, before any work. Stagewise raised;
    ControlBurn said so only after about 60 s of lasso solves. With the warning made an error,
    fit stops at it: nothing (no forest, no bins, no weights) was fitted before."""
    est = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionWarning)
        with pytest.raises(
            SelectionWarning,
            match=r"n_features_to_select=9 is larger than the "
            r"number of features in X \(4\): selecting all 4",
        ):
            est.fit(X, Y_REG)
    assert not [a for a in ("forest_", "bin_mapper_", "coef_", "mean_") if hasattr(est, a)]


# --- y ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad,match",
    [(np.nan, "y contains NaN"), (np.inf, "y contains infinity"), (-np.inf, "y contains infinity")],
)
@pytest.mark.parametrize("est", _both(n_estimators=2), ids=["reg", "cls"])
def test_nan_or_inf_in_y(est, bad, match):
    y = Y_REG.copy() if isinstance(est, GBFSRegressor) else Y_CLS.astype(float)
    y[3] = bad
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


def test_single_class():
    with pytest.raises(ValueError, match=r"only 1 class \(1\).*at least 2 classes"):
        GBFSClassifier(device="cpu").fit(X, np.ones(40, int))
    # a text label: the message itself raised AttributeError (found by tests/test_input_fuzz)
    with pytest.raises(ValueError, match=r"only 1 class \('yes'\)"):
        GBFSClassifier(device="cpu").fit(X, np.array(["yes"] * 40, dtype=object))


def test_integer_column_names_with_a_categorical_column():
    """pd.DataFrame(...) with integer column names and a categorical column: the category
    columns were fetched by name, and an integer name read as a row index (AttributeError or
    IndexError; found by tests/test_input_fuzz)."""
    df = pd.DataFrame(
        {0: pd.Categorical(np.array(["u", "v", "w"])[np.arange(40) % 3]), 1: X[:, 1], 2: X[:, 2]}
    )
    y = (df[0] == "v").to_numpy().astype(int)
    est = GBFSClassifier(n_estimators=5, device="cpu").fit(df, y)
    assert list(est.is_categorical_) == [True, False, False]
    assert (est.predict(df) == y).mean() == 1.0


def test_continuous_target_for_classifier():
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        GBFSClassifier(device="cpu").fit(X, Y_REG)


@pytest.mark.parametrize("cls", [GBFSClassifier, StagewiseClassifier, ControlBurnClassifier])
@pytest.mark.parametrize(
    "labels,kinds",
    [
        (np.array(["a", 1] * 20, dtype=object), "number, string"),
        (pd.Series(["a", 2.5] * 20), "number, string"),
        (np.array([None, 1] * 20, dtype=object), "NoneType, number"),
    ],
)
def test_mixed_label_types(cls, labels, kinds):
    with pytest.raises(
        ValueError,
        match=rf"y has labels of mixed types \({kinds}\); a "
        r"classifier needs labels of one type",
    ):
        cls(device="cpu").fit(X, labels)


def test_eval_set_labels_of_another_type():
    with pytest.raises(ValueError, match=r"eval_set has labels not seen in y: \['a'\]"):
        GBFSClassifier(device="cpu").fit(X, Y_CLS, eval_set=(X[:10], np.array(["a"] * 10)))


def test_non_numeric_regression_target():
    with pytest.raises(ValueError, match="regressor needs a numeric target"):
        GBFSRegressor(device="cpu").fit(X, np.array(["a", "b"] * 20))


def test_2d_y():
    with pytest.raises(ValueError, match=r"y must be 1-D \(n_samples,\); got shape \(40, 2\)"):
        GBFSRegressor(device="cpu").fit(X, np.stack([Y_REG, Y_REG], 1))


# --- X ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_inf_in_X(bad):
    Xb = X.copy()
    Xb[5, 2] = bad
    with pytest.raises(ValueError, match="X contains infinity"):
        GBFSRegressor(device="cpu").fit(Xb, Y_REG)


def test_nan_and_inf_found_in_strided_X_chunk_by_chunk(monkeypatch):
    """A strided X (neither C nor F order) is scanned in C-order chunks: a value in any
    chunk, the last row's included, is found."""
    import gpufs.data._input as door

    monkeypatch.setattr(door, "CHUNK_ELEMENTS_NONFINITE", 8)  # chunks of 2 rows of 4 columns
    wide = np.zeros((7, 8))
    assert door._nonfinite(wide[:, ::2], np) == (False, False)
    wide[6, 2] = np.inf
    assert door._nonfinite(wide[:, ::2], np) == (False, True)
    wide[3, 0] = np.nan
    assert door._nonfinite(wide[:, ::2], np) == (True, True)
    wide[3, 1] = np.nan  # a column the slice skips
    wide[3, 0] = 0.0
    assert door._nonfinite(wide[:, ::2], np) == (False, True)
    Xb = np.repeat(X, 2, axis=1)
    Xb[5, 4] = np.inf
    with pytest.raises(ValueError, match="X contains infinity"):
        GBFSRegressor(device="cpu").fit(Xb[:, ::2], Y_REG)


def test_inf_in_X_at_predict(fitted):
    Xb = X.copy()
    Xb[0, 0] = np.inf
    with pytest.raises(ValueError, match="X contains infinity"):
        fitted.predict(Xb)


@pytest.mark.parametrize("n_y", [39, 41])
def test_wrong_lengths(n_y):
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[40, %d\]" % n_y):
        GBFSRegressor(device="cpu").fit(X, np.zeros(n_y))


def test_non_numeric_column_named():
    """Text columns are categorical features (``categorical_features="from_dtype"``); with
    ``categorical_features=None``, and dates always, a non-numeric column is named."""
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    df["city"] = ["x", "y"] * 20
    with pytest.raises(ValueError, match=r"non-numeric columns: 'city'"):
        GBFSRegressor(device="cpu", categorical_features=None).fit(df, Y_REG)
    GBFSRegressor(device="cpu", n_estimators=2).fit(df, Y_REG)
    df["date"] = pd.Timestamp("2020-01-01")
    with pytest.raises(ValueError, match=r"non-numeric columns: 'date'"):
        GBFSClassifier(device="cpu").fit(df, Y_CLS)
    with pytest.raises(ValueError, match=r"non-numeric columns: 'city', 'date'"):
        GBFSClassifier(device="cpu", categorical_features=None).fit(df, Y_CLS)


def test_string_array():
    with pytest.raises(ValueError, match="could not convert string to float"):
        GBFSRegressor(device="cpu").fit(np.array([["a", "b"]] * 40, dtype=object), Y_REG)


def test_zero_rows():
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        GBFSRegressor(device="cpu").fit(np.empty((0, 4)), np.empty(0))


def test_zero_columns():
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        GBFSRegressor(device="cpu").fit(np.empty((40, 0)), Y_REG)


def test_1d_X():
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        GBFSRegressor(device="cpu").fit(X[:, 0], Y_REG)


def test_3d_X():
    with pytest.raises(ValueError, match="X must be 2-D"):
        GBFSRegressor(device="cpu").fit(X.reshape(40, 2, 2), Y_REG)


def test_complex_X():
    with pytest.raises(ValueError, match="Complex data not supported"):
        GBFSRegressor(device="cpu").fit(X.astype(complex), Y_REG)


def test_sparse_X():
    import scipy.sparse

    with pytest.raises(TypeError, match="sparse"):
        GBFSRegressor(device="cpu").fit(scipy.sparse.csr_matrix(X), Y_REG)


# --- costs, groups, weights ---------------------------------------------------------------------


def test_negative_costs():
    with pytest.raises(
        ValueError,
        match=r"feature_costs must be >= 0; negative at feature "
        r"indices \[1, 3\]",
    ):
        GBFSRegressor(feature_costs=[1, -1, 0, -2], device="cpu").fit(X, Y_REG)


def test_costs_nan():
    with pytest.raises(ValueError, match="feature_costs contains NaN or infinity"):
        GBFSRegressor(feature_costs=[1, np.nan, 1, 1], device="cpu").fit(X, Y_REG)


@pytest.mark.parametrize("costs", [[1, 1, 1], [1] * 5, [[1, 1, 1, 1]]])
def test_costs_wrong_length(costs):
    with pytest.raises(
        ValueError,
        match=r"feature_costs must have one entry per feature: "
        r"expected shape \(4,\)",
    ):
        GBFSRegressor(feature_costs=costs, device="cpu").fit(X, Y_REG)


@pytest.mark.parametrize("groups", [[0, 1, 1], [0, 0, 1, 1, 2]])
def test_groups_wrong_length(groups):
    with pytest.raises(
        ValueError,
        match=r"feature_groups must give one group label per "
        r"feature: expected shape \(4,\)",
    ):
        GBFSClassifier(feature_groups=groups, device="cpu").fit(X, Y_CLS)


@pytest.mark.parametrize(
    "groups,match",
    [
        ([0, 0.5, 1, 1], "feature_groups must be integer labels"),
        (["a", "a", "b", "b"], "feature_groups must be integer labels, got dtype"),
        ([0, np.nan, 1, 1], "feature_groups contains NaN or infinity"),
    ],
)
def test_groups_not_integer(groups, match):
    with pytest.raises(ValueError, match=match):
        GBFSClassifier(feature_groups=groups, device="cpu").fit(X, Y_CLS)


def test_integer_valued_float_groups_accepted():
    est = GBFSClassifier(feature_groups=[2.0, 2.0, 7.0, 7.0], n_estimators=2, device="cpu").fit(
        X, Y_CLS
    )
    assert est.support_.shape == (4,)


@pytest.mark.parametrize(
    "w,match",
    [
        (np.r_[-1.0, np.ones(39)], "sample_weight has negative values"),
        (np.zeros(40), "sample_weight is zero everywhere"),
        (np.r_[np.nan, np.ones(39)], "sample_weight contains NaN or infinity"),
        (np.ones(39), r"sample_weight must have shape \(40,\), got \(39,\)"),
    ],
)
def test_bad_sample_weight(w, match):
    with pytest.raises(ValueError, match=match):
        GBFSRegressor(device="cpu").fit(X, Y_REG, sample_weight=w)


@pytest.mark.parametrize("cls", [GBFSClassifier, ControlBurnClassifier])
@pytest.mark.parametrize(
    "costs", [np.full(4, 1e-200), np.r_[1e300, np.ones(3)]], ids=["all_tiny", "one_huge"]
)
def test_feature_costs_beyond_the_range_the_lasso_solves(cls, costs):
    """ControlBurn's lambda search failed on such costs (a math domain error, a
    ZeroDivisionError); every family refuses them at the door, with the rescaling to do."""
    with pytest.raises(ValueError, match=r"positive costs must lie between 1e-100 and 1e\+100"):
        cls(device="cpu", feature_costs=costs).fit(X, Y_CLS)


def test_group_costs_beyond_the_range_the_lasso_solves():
    with pytest.raises(ValueError, match="group_costs runs from 1e-300 to 1"):
        ControlBurnClassifier(
            device="cpu", feature_groups=[0, 0, 1, 1], group_costs=[1e-300, 1.0]
        ).fit(X, Y_CLS)


@pytest.mark.parametrize(
    "scale,match", [(1e-310, "would underflow float64"), (1e300, "would overflow float64")]
)
def test_controlburn_classifier_weights_beyond_float64(scale, match):
    """ControlBurn's forest sums weighted gradients: denormal weights made every split NaN
    and selected nothing (no error), huge ones ended in the lasso's LinAlgError."""
    with pytest.raises(ValueError, match=match):
        ControlBurnClassifier(device="cpu", random_state=0).fit(
            X, Y_CLS, sample_weight=np.full(40, scale)
        )


@pytest.mark.parametrize("cls", [GBFSClassifier, StagewiseClassifier, ControlBurnClassifier])
def test_a_class_whose_rows_all_weigh_nothing_is_said_once(cls):
    """The fit is sound, but the class is never predicted: one warning (ControlBurn's refit
    does not repeat it)."""
    y = np.array(["a", "b", "c", "d"])[np.arange(40) % 4]
    w = np.where(y == "c", 0.0, 1.0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        est = cls(device="cpu", random_state=0, n_features_to_select=1).fit(X, y, sample_weight=w)
    said = [str(m.message) for m in seen if "sample_weight is 0 on every row" in str(m.message)]
    assert said == [
        "sample_weight is 0 on every row of class 'c': the model never predicts it (probability 0)."
    ]
    assert "c" not in set(est.predict(X))


@pytest.mark.parametrize("cls", [GBFSRegressor, StagewiseRegressor])
def test_validation_fraction_drawing_rows_that_weigh_nothing(cls):
    """Weights on two rows only: the validation rows drawn weigh nothing (a validation loss
    of 0 / 0; it was a ZeroDivisionError), so the split is refused with what to do."""
    w = np.zeros(40)
    w[:2] = 1.0
    est = cls(device="cpu", validation_fraction=0.25, n_iter_no_change=2, random_state=0)
    with pytest.raises(ValueError, match="validation rows it drew all have sample weight 0"):
        est.fit(X, Y_REG, sample_weight=w)


# --- hyperparameters (each one alone: tests/test_params.py) ---------------------------------


def test_validation_fraction_leaving_no_training_rows():
    with pytest.raises(
        ValueError,
        match=r"validation_fraction=0.99 leaves 40 validation and 0 "
        r"training rows out of 40",
    ):
        GBFSRegressor(validation_fraction=0.99, device="cpu").fit(X, Y_REG)


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_gpu_requested_without_gpu():
    with pytest.raises(
        RuntimeError,
        match=r"device='gpu' was requested but no CUDA GPU is "
        r"usable.*device='cpu'",
    ):
        GBFSRegressor(device="gpu").fit(X, Y_REG)


# --- predict ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["predict", "predict_proba", "decision_function", "transform"])
def test_predict_wrong_number_of_features(fitted, method):
    with pytest.raises(
        ValueError, match="X has 3 features, but GBFSClassifier is expecting 4 features as input"
    ):
        getattr(fitted, method)(X[:, :3])


@pytest.mark.parametrize(
    "method", ["predict", "predict_proba", "decision_function", "transform", "get_support"]
)
def test_predict_before_fit(method):
    est = GBFSClassifier()
    with pytest.raises(NotFittedError, match="not fitted yet"):
        getattr(est, method)(X) if method != "get_support" else est.get_support()
    with pytest.raises(NotFittedError):
        GBFSRegressor().predict(X)
    with pytest.raises(NotFittedError):
        _ = GBFSRegressor().selected_feature_names_


def test_pandas_column_names_checked_at_predict():
    df = pd.DataFrame(X, columns=list("abcd"))
    est = GBFSRegressor(n_estimators=2, device="cpu").fit(df, Y_REG)
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df[list("badc")])


# --- eval_set ---------------------------------------------------------------------------------


def test_eval_set_unseen_labels():
    yv = Y_CLS[:10].copy()
    yv[0] = 7
    with pytest.raises(ValueError, match=r"eval_set has labels not seen in y: \[7\]"):
        GBFSClassifier(device="cpu").fit(X, Y_CLS, eval_set=(X[:10], yv))


@pytest.mark.parametrize("cls", [GBFSRegressor, StagewiseRegressor])
def test_eval_set_checks_name_the_pair(cls):
    """The input door's messages about a validation pair say which pair: an empty one read
    as scikit-learn's bare "Found array with 0 sample(s)"."""
    est = cls(device="cpu")
    with pytest.raises(ValueError, match=r"^eval_set: Found array with 0 sample\(s\)"):
        est.fit(X, Y_REG, eval_set=(X[:0], Y_REG[:0]))
    with pytest.raises(ValueError, match=r"^eval_set\[1\]: X has 3 features, but"):
        est.fit(X, Y_REG, eval_set=[(X[:10], Y_REG[:10]), (X[:10, :3], Y_REG[:10])])
    with pytest.raises(ValueError, match=r"^eval_set: .*inconsistent numbers of samples"):
        est.fit(X, Y_REG, eval_set=(X[:10], Y_REG[:9]))
    with pytest.raises(ValueError, match=r"^eval_set: sample_weight must have shape \(10,\)"):
        est.fit(X, Y_REG, eval_set=[(X[:10], Y_REG[:10])], sample_weight_eval_set=[np.ones(9)])


def test_eval_set_malformed():
    with pytest.raises(
        ValueError,
        match=r"eval_set must be a pair \(X_val, y_val\) or a "
        r"non-empty list of such pairs",
    ):
        GBFSRegressor(device="cpu").fit(X, Y_REG, eval_set=[X[:10]])
    with pytest.raises(ValueError, match=r"eval_set must be a pair"):
        GBFSRegressor(device="cpu").fit(X, Y_REG, eval_set=[])
    with pytest.raises(ValueError, match=r"sample_weight_eval_set must be a list with one entry"):
        GBFSRegressor(device="cpu").fit(
            X, Y_REG, eval_set=(X[:10], Y_REG[:10]), sample_weight_eval_set=[None, None]
        )
    with pytest.raises(ValueError, match=r"eval_set\[1\] has labels not seen in y: \[5\]"):
        GBFSClassifier(device="cpu").fit(
            X, Y_CLS, eval_set=[(X[:10], Y_CLS[:10]), (X[:10], np.full(10, 5))]
        )
    with pytest.raises(ValueError, match="either validation_fraction or eval_set"):
        GBFSRegressor(validation_fraction=0.2, device="cpu").fit(
            X, Y_REG, eval_set=(X[:10], Y_REG[:10])
        )
    with pytest.raises(ValueError, match="X has 3 features"):
        GBFSRegressor(device="cpu").fit(X, Y_REG, eval_set=(X[:10, :3], Y_REG[:10]))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        GBFSRegressor(device="cpu").fit(X, Y_REG, eval_set=(X[:10], Y_REG[:9]))


# --- nothing changes when an error is raised ------------------------------------------------


def test_user_arrays_unchanged_on_error():
    Xb = X.copy()
    Xb[1, 1] = np.nan
    Xb[2, 2] = np.inf
    y = Y_REG.copy()
    y[4] = np.nan
    w = np.r_[-1.0, np.ones(39)]
    costs = np.array([1.0, -1.0, 2.0, 3.0])
    groups = np.array([0, 0.5, 1, 1])
    saved = [a.copy() for a in (Xb, y, w, costs, groups)]
    for kw, args in [
        ({}, (Xb, Y_REG)),
        ({}, (X, y)),
        ({}, (X, Y_REG, w)),
        ({"feature_costs": costs}, (X, Y_REG)),
        ({"feature_groups": groups}, (X, Y_REG)),
    ]:
        with pytest.raises(ValueError):
            GBFSRegressor(device="cpu", **kw).fit(*args)
    for a, b in zip((Xb, y, w, costs, groups), saved):
        np.testing.assert_array_equal(a, b)
    df = pd.DataFrame(Xb, columns=list("abcd"))
    df["s"] = "x"
    df_saved = df.copy(deep=True)
    with pytest.raises(ValueError):
        GBFSRegressor(device="cpu").fit(df, Y_REG)
    pd.testing.assert_frame_equal(df, df_saved)
    # a fitted model stays as it was when a later fit fails
    est = GBFSRegressor(n_estimators=2, device="cpu").fit(X, Y_REG)
    before = est.predict(X)
    with pytest.raises(ValueError):
        est.set_params(mu=-1).fit(X, Y_REG)
    np.testing.assert_array_equal(est.predict(X), before)


def test_n_iter_no_change_without_validation_data_is_an_error():
    import numpy as np

    from gpufs import GBFSRegressor

    X = np.random.RandomState(0).randn(50, 3)
    y = X[:, 0]
    with pytest.raises(ValueError, match="n_iter_no_change needs validation data"):
        GBFSRegressor(n_estimators=3, n_iter_no_change=2).fit(X, y)
