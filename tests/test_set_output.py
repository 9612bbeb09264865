"""``set_output(transform="pandas")`` on every selector: ``transform`` returns a DataFrame with
the selected columns' names and the input's index, as scikit-learn transformers do; "default"
gives the ndarray back."""

import numpy as np
import pytest
from sklearn.base import clone, is_classifier

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

pd = pytest.importorskip("pandas")

SELECTORS = [
    GBFSClassifier(n_features_to_select=2, n_estimators=20, device="cpu", random_state=0),
    GBFSRegressor(n_features_to_select=2, n_estimators=20, device="cpu", random_state=0),
    ControlBurnClassifier(n_features_to_select=2, max_depth=3, device="cpu", random_state=0),
    ControlBurnRegressor(n_features_to_select=2, max_depth=3, device="cpu", random_state=0),
    StagewiseClassifier(n_features_to_select=2, device="cpu"),
    StagewiseRegressor(n_features_to_select=2, device="cpu"),
]


def _data(classification):
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        rng.normal(size=(300, 5)),
        columns=["a", "b", "c", "d", "e"],
        index=pd.RangeIndex(1000, 1300, name="row"),
    )
    signal = 2.0 * X["b"] - 1.5 * X["d"]
    y = (signal > 0).astype(int) if classification else signal + 0.1 * rng.normal(size=300)
    return X, y


@pytest.mark.parametrize("selector", SELECTORS, ids=lambda s: type(s).__name__)
def test_transform_returns_a_named_dataframe_after_set_output(selector):
    X, y = _data(is_classifier(selector))
    sel = selector.set_output(transform="pandas").fit(X, y)
    out = sel.transform(X)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["b", "d"] == list(sel.get_feature_names_out())
    assert out.index.equals(X.index)
    np.testing.assert_array_equal(out.to_numpy(), X[["b", "d"]].to_numpy())

    # set_output(transform="default"): an ndarray, as scikit-learn's selectors return
    plain = sel.set_output(transform="default").transform(X)
    assert type(plain) is np.ndarray
    np.testing.assert_array_equal(plain, X[["b", "d"]].to_numpy())
    np.testing.assert_array_equal(sel.transform(X.to_numpy()), X[["b", "d"]].to_numpy())


@pytest.mark.parametrize("selector", SELECTORS[:1], ids=lambda s: type(s).__name__)
def test_transform_without_set_output_keeps_the_table(selector):
    """Never configured, ``transform`` returns the kind of table it was given, the columns
    as they are (gpufs's default, README); ``set_output(transform="default")`` asks for
    scikit-learn's ndarray instead."""
    X, y = _data(is_classifier(selector))
    sel = type(selector)(**selector.get_params()).fit(X, y)  # clone would copy set_output
    pd.testing.assert_frame_equal(sel.transform(X), X[["b", "d"]])
    assert type(sel.set_output(transform="default").transform(X)) is np.ndarray


MULTITASK = [
    MultiTaskGBFSClassifier(n_estimators=10, device="cpu", random_state=0),
    MultiTaskGBFSRegressor(n_estimators=10, device="cpu", random_state=0),
]


@pytest.mark.parametrize("selector", SELECTORS + MULTITASK, ids=lambda s: type(s).__name__)
def test_transform_of_a_frame_with_integer_column_names(selector):
    """``pd.DataFrame(ndarray)`` names its columns 0, 1, ...: transform and fit_transform
    select them by position (issue 26: narwhals refused integer names in ``frame.select``)."""
    X, y = _data(is_classifier(selector))
    X = pd.DataFrame(X.to_numpy())
    assert list(X.columns) == [0, 1, 2, 3, 4]
    kw = {"task": np.arange(len(X)) % 2} if "MultiTask" in type(selector).__name__ else {}
    fresh = type(selector)(**selector.get_params())  # clone would copy an earlier set_output
    sel = clone(fresh).fit(X, y, **kw)
    cols = np.flatnonzero(sel.get_support())
    assert cols.size
    pd.testing.assert_frame_equal(sel.transform(X), X.iloc[:, cols])
    if not kw:
        pd.testing.assert_frame_equal(clone(fresh).fit_transform(X, y), X.iloc[:, cols])
    out = sel.set_output(transform="pandas").transform(X)
    np.testing.assert_array_equal(out.to_numpy(), X.iloc[:, cols].to_numpy())
