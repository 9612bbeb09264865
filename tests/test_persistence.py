"""Model files (gpufs.io.model_io): every family round-trips bit-identically through strict JSON;
hostile or broken files are refused with one ValueError naming the field; the first format is
migrated; pickle still works."""

import copy
import json
import math
import os
import pickle
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from gpufs import (
    ControlBurnClassifier,
    ControlBurnRegressor,
    GBFSClassifier,
    GBFSRegressor,
    StagewiseClassifier,
    StagewiseRegressor,
    TreeEnsemble,
)
from gpufs.backends.cpu import CPUBackend
from gpufs.io import model_io

HERE = os.path.dirname(os.path.abspath(__file__))


def _data(kind, seed=0, n=300, nan=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)) * [1, 10, 0.1, 1e6, 1]
    if nan:
        X[rng.random(X.shape) < 0.1] = np.nan
        # a feature that is 1.0 or missing: its only split is "missing vs everything", the
        # top-bin split whose threshold is +inf
        X[:, 4] = np.where(rng.random(n) < 0.4, np.nan, 1.0)
    z = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) / 10 + 0.3 * rng.normal(size=n)
    z += 1.5 * np.isnan(X[:, 4]) if nan else 0.0
    if kind == "regressor":
        return X, z
    if kind == "binary":
        return X, np.where(z > 0.5, "pos", "neg")
    return X, np.digitize(z, [-0.7, 0.0, 0.7, 1.5])  # 5 classes


def _strict_loads(text):
    def no_constant(name):
        raise AssertionError(f"non-standard JSON token {name}")

    return json.loads(text, parse_constant=no_constant)


CASES = {
    "gbfs_regressor": (
        lambda: GBFSRegressor(
            n_estimators=12,
            mu=0.02,
            learning_rate=0.3,
            feature_costs=[1, 2, 1, 1, 3],
            feature_groups=[0, 0, 1, 2, 2],
            device="cpu",
        ),
        "regressor",
        True,
    ),
    "gbfs_binary_val": (
        lambda: GBFSClassifier(
            n_estimators=12,
            mu=0.0,
            learning_rate=0.3,
            validation_fraction=0.2,
            n_iter_no_change=3,
            device="cpu",
        ),
        "binary",
        True,
    ),
    "gbfs_binary_k_search": (
        lambda: GBFSClassifier(n_features_to_select=2, n_estimators=8, device="cpu"),
        "binary",
        True,
    ),
    "gbfs_multiclass": (
        lambda: GBFSClassifier(n_estimators=4, max_depth=3, device="cpu"),
        "multiclass",
        True,
    ),
    "stagewise_regressor": (
        lambda: StagewiseRegressor(n_features_to_select=3, device="cpu"),
        "regressor",
        False,
    ),
    "stagewise_binary_val": (
        lambda: StagewiseClassifier(
            n_features_to_select=4,
            validation_fraction=0.3,
            n_iter_no_change=1,
            random_state=0,
            device="cpu",
        ),
        "binary",
        False,
    ),
    "stagewise_multiclass": (
        lambda: StagewiseClassifier(n_features_to_select=3, device="cpu"),
        "multiclass",
        False,
    ),
    "controlburn_regressor": (
        lambda: ControlBurnRegressor(
            n_features_to_select=2,
            max_depth=2,
            max_trees_per_round=5,
            path_k_max=3,
            random_state=0,
            device="cpu",
        ),
        "regressor",
        True,
    ),
    "controlburn_binary_custom_gbfs_refit": (
        lambda: ControlBurnClassifier(
            n_features_to_select=2,
            max_depth=2,
            max_trees_per_round=5,
            random_state=0,
            refit_estimator=GBFSClassifier(mu=0.0, n_estimators=7, max_depth=2),
            device="cpu",
        ),
        "binary",
        True,
    ),
    "controlburn_multiclass": (
        lambda: ControlBurnClassifier(
            n_features_to_select=3,
            max_depth=2,
            max_trees_per_round=4,
            random_state=0,
            refit_estimator=GBFSClassifier(n_estimators=3, max_depth=2),
            device="cpu",
        ),
        "multiclass",
        True,
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def fitted(request):
    make, kind, nan = CASES[request.param]
    X, y = _data(kind, nan=nan)
    est = make().fit(X, y)
    Xnew, _ = _data(kind, seed=1, nan=nan)
    return request.param, type(est), est, Xnew


def _outputs(est, X):
    out = {"predict": est.predict(X), "transform": est.transform(X)}
    for m in ("predict_proba", "decision_function"):
        if hasattr(est, m):
            out[m] = getattr(est, m)(X)
    return out


_SELECTION_ATTRS = (
    "selected_features_",
    "support_",
    "first_use_tree_",
    "feature_importances_",
    "n_features_in_",
    "n_estimators_",
    "coef_",
    "intercept_",
    "standardized_coef_",
    "bias_",
    "mean_",
    "std_",
    "weights_history_",
    "cost_history_",
    "validation_cost_history_",
    "tree_weights_",
    "forest_features_",
    "forest_coverage_",
    "n_trees_",
    "lambda_",
    "selection_exact_",
    "device_",
    "selected_feature_names_",
    "mu_",
    "evals_result_",
)


def _assert_same_model(a, b, X):
    oa, ob = _outputs(a, X), _outputs(b, X)
    assert oa.keys() == ob.keys()
    for k in oa:
        assert oa[k].dtype == ob[k].dtype, k
        assert np.array_equal(oa[k], ob[k], equal_nan=oa[k].dtype.kind == "f"), k
    for attr in _SELECTION_ATTRS:
        assert hasattr(a, attr) == hasattr(b, attr), attr
        if hasattr(a, attr) and getattr(a, attr) is not None:
            np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)
    for attr in ("selection_record_", "selection_path_", "fit_times_", "mu_search_"):
        assert json.dumps(getattr(a, attr, None)) == json.dumps(getattr(b, attr, None)), attr
    if hasattr(a, "classes_"):
        np.testing.assert_array_equal(a.classes_, b.classes_)
        assert a.classes_.dtype == b.classes_.dtype
    pa, pb = a.get_params(deep=False), b.get_params(deep=False)
    assert pa.keys() == pb.keys()
    for k in pa:  # costs and groups included: a refit of the loaded model is the same model
        if hasattr(pa[k], "get_params"):
            assert repr(pa[k]) == repr(pb[k]), k
        elif pa[k] is None or pb[k] is None:
            assert pa[k] is None and pb[k] is None, k
        else:
            np.testing.assert_array_equal(pa[k], pb[k], err_msg=k)


def test_json_round_trip(fitted, tmp_path):
    name, cls, est, Xnew = fitted
    path = tmp_path / "model.json"
    est.save_model(path)
    text = path.read_text()
    doc = _strict_loads(text)  # strict JSON: no NaN / Infinity tokens
    assert doc["format"] == "gpufs.model" and doc["format_version"] == 2
    assert doc["estimator"] == cls.__name__
    loaded = cls.load_model(path)
    assert type(loaded) is cls
    _assert_same_model(est, loaded, Xnew)
    # saving the loaded model again writes the same file, byte for byte
    path2 = tmp_path / "again.json"
    loaded.save_model(path2)
    assert path2.read_text() == text
    assert sorted(os.listdir(tmp_path)) == ["again.json", "model.json"]  # no temporary left


def test_non_finite_values_are_written_as_strings(tmp_path):
    """The top-bin split's +inf threshold and the NaN validation losses are explicit strings."""
    X, y = _data("binary")
    est = GBFSClassifier(n_estimators=6, mu=0.0, device="cpu").fit(X, y)
    s = est.ensemble_.stacked()
    assert np.isinf(s["threshold"][s["feature"] >= 0]).any()  # the case is exercised
    est.save_model(tmp_path / "m.json")
    doc = _strict_loads((tmp_path / "m.json").read_text())
    assert "Infinity" in sum(doc["fitted"]["ensemble"]["trees"]["threshold"], [])
    assert set(doc["fitted"]["selection_record"]["val_loss"]) == {"NaN"}
    loaded = GBFSClassifier.load_model(tmp_path / "m.json")
    assert np.isnan(loaded.selection_record_["val_loss"]).all()
    assert np.array_equal(loaded.predict_proba(X), est.predict_proba(X))


def test_pickle_round_trip(fitted):
    name, cls, est, Xnew = fitted
    _assert_same_model(est, pickle.loads(pickle.dumps(est)), Xnew)


def test_tree_ensemble_json_round_trip():
    X, y = _data("multiclass")
    est = GBFSClassifier(n_estimators=5, device="cpu").fit(X, y)
    ens = est.ensemble_
    text = ens.to_json()
    _strict_loads(text)
    back = TreeEnsemble.from_json(text)
    assert (back.n_trees, back.max_depth, back.n_features) == (
        ens.n_trees,
        ens.max_depth,
        ens.n_features,
    )
    np.testing.assert_array_equal(back.base_score, ens.base_score)
    sa, sb = ens.stacked(), back.stacked()
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
        assert sa[k].dtype == sb[k].dtype, k
    be = CPUBackend()
    Xb = est.bin_mapper_.transform(X, be)
    assert np.array_equal(ens.predict_raw(X, be), back.predict_raw(X, be))
    assert np.array_equal(ens.predict_binned(Xb, be), back.predict_binned(Xb, be))
    with pytest.raises(ValueError, match="not a gpufs ensemble"):
        TreeEnsemble.from_dict({"format": "something else"})
    bad = json.loads(text)
    bad["trees"]["feature"][0][0] = 99
    with pytest.raises(ValueError, match=r"^ensemble\.trees\.feature\[0\]\[0\]: 99 is out"):
        TreeEnsemble.from_dict(bad)


def test_pandas_names_and_string_classes_survive(tmp_path):
    X, y = _data("binary", nan=False)
    df = pd.DataFrame(X, columns=["alpha", "beta", "gamma", "delta", "eps"])
    for est in (
        GBFSClassifier(n_estimators=5, device="cpu"),
        StagewiseClassifier(n_features_to_select=2, device="cpu"),
        ControlBurnClassifier(
            n_features_to_select=2, max_depth=2, max_trees_per_round=4, random_state=0, device="cpu"
        ),
    ):
        est.fit(df, pd.Series(y, dtype=object))  # object labels stay object
        assert est.classes_.dtype == object
        path = tmp_path / "m.json"
        est.save_model(path)
        loaded = type(est).load_model(path)
        np.testing.assert_array_equal(loaded.feature_names_in_, df.columns)
        np.testing.assert_array_equal(loaded.selected_features_, est.selected_features_)
        assert loaded.classes_.dtype == object
        assert np.array_equal(loaded.predict(df), est.predict(df))
        assert loaded.predict(df).dtype == est.predict(df).dtype


def test_controlburn_with_no_selection_saves_its_constant_model(tmp_path):
    """A forest that splits on nothing selects nothing: the refit is a constant model."""
    rng = np.random.RandomState(0)
    X = np.ones((50, 3))
    for est, y in (
        (ControlBurnRegressor(max_depth=2, random_state=0, device="cpu"), rng.randn(50)),
        (
            ControlBurnClassifier(max_depth=2, random_state=0, device="cpu"),
            np.array(["a", "b"] * 25),
        ),
    ):
        est.fit(X, y)
        assert est.selected_features_.size == 0
        est.save_model(tmp_path / "m.json")
        loaded = type(est).load_model(tmp_path / "m.json")
        _assert_same_model(est, loaded, X)


def test_custom_refit_estimator_is_refused_with_the_pickle_advice(tmp_path):
    from sklearn.linear_model import LinearRegression

    X, y = _data("regressor", nan=False)
    est = ControlBurnRegressor(
        n_features_to_select=2,
        max_depth=2,
        max_trees_per_round=4,
        refit_estimator=LinearRegression(),
        random_state=0,
        device="cpu",
    ).fit(X, y)
    with pytest.raises(ValueError, match=r"refit_estimator=LinearRegression.*pickle.*SECURITY"):
        est.save_model(tmp_path / "m.json")
    assert not os.listdir(tmp_path)  # nothing half-written
    pickle.loads(pickle.dumps(est)).predict(X)  # the advice works


def test_first_format_is_migrated():
    """A file written by gpufs 0.1.0 (NaN and Infinity tokens) loads and predicts as then."""
    with open(os.path.join(HERE, "data", "gbfs_format1_expected.json")) as fh:
        expected = json.load(fh)
    X = np.array([[np.nan if v is None else v for v in row] for row in expected["X"]])
    path = os.path.join(HERE, "data", "gbfs_format1.json")
    with open(path) as fh:
        text = fh.read()
    assert "NaN" in text and "Infinity" in text  # the old, non-strict file
    est = GBFSClassifier.load_model(path)
    # The trees are the file's, bit for bit; the probabilities go through numpy's exp, whose
    # last bit differs between CPUs (SIMD builds: AVX-512 machines differ from AVX2 ones by
    # 1 ulp of 1.0, which the complement 1 - p carries into the small class), so they are
    # compared to 4 ulp of 1.0, the labels exactly.
    np.testing.assert_allclose(
        est.predict_proba(X),
        np.array(expected["predict_proba"]),
        rtol=0,
        atol=4 * np.finfo(np.float64).eps,
    )
    assert est.predict(X).tolist() == expected["predict"]
    # migrated through the same checks: a broken old file is refused like a new one
    broken = json.loads(text, parse_constant=lambda c: {"NaN": math.nan}.get(c, math.inf))
    broken["ensemble"]["trees"]["feature"][0][0] = 7
    with pytest.raises(ValueError, match=r"fitted\.ensemble\.trees\.feature\[0\]\[0\]"):
        model_io.from_document(broken)


def test_files_written_before_evals_result_load():
    """evals_result is optional: files of format 2 written before it existed rebuild it."""
    X, y = _data("binary", nan=False)
    for est in (
        GBFSClassifier(n_estimators=5, validation_fraction=0.3, device="cpu"),
        StagewiseClassifier(
            n_features_to_select=3, validation_fraction=0.3, random_state=0, device="cpu"
        ),
    ):
        est.fit(X, y)
        assert len(est.evals_result_) == 1
        doc = model_io.to_document(est)
        del doc["fitted"]["evals_result"]
        loaded = model_io.from_document(json.loads(model_io.dumps(doc)))
        np.testing.assert_array_equal(loaded.evals_result_[0], est.evals_result_[0])


def test_exact_k_pool_and_frequencies_survive_and_older_files_load_without():
    """selection_pool_ and selection_frequency_ (what plot_pool_ranking and
    plot_selection_frequency draw) are saved; a loaded model lacked the attribute before.
    Files written before then load with None, as a fit without them."""
    X, y = _data("binary", nan=False)
    est = GBFSClassifier(
        n_estimators=8, n_features_to_select=2, stability_rounds=2, random_state=0, device="cpu"
    ).fit(X, y)
    doc = model_io.to_document(est)
    loaded = model_io.from_document(json.loads(model_io.dumps(doc)))
    assert loaded.selection_pool_ == est.selection_pool_
    assert loaded.selection_pool_["heldout_gain"] is not None
    np.testing.assert_array_equal(loaded.selection_frequency_, est.selection_frequency_)
    for key in ("selection_pool", "selection_frequency"):
        del doc["fitted"][key]
    older = model_io.from_document(json.loads(model_io.dumps(doc)))
    assert older.selection_pool_ is None and older.selection_frequency_ is None
    doc = model_io.to_document(est)
    doc["fitted"]["selection_frequency"][0] = 1.5
    with pytest.raises(model_io.ModelFileError, match="selection_frequency: a frequency above 1"):
        model_io.from_document(json.loads(model_io.dumps(doc)))
    doc["fitted"]["selection_frequency"] = [0.5]
    with pytest.raises(model_io.ModelFileError, match=r"^fitted\.selection_frequency"):
        model_io.from_document(json.loads(model_io.dumps(doc)))


@pytest.mark.parametrize("multitask", [False, True])
def test_files_written_before_the_categorical_guards_load_as_fitted(multitask):
    """A file that predates a parameter whose default changes the fit loads with the value
    that file was fitted with (guards off, pool ranked by gain), not today's default, so
    that a refit or warm start of the loaded model repeats that fit."""
    from gpufs import MultiTaskGBFSRegressor

    X, y = _data("regressor")
    if multitask:
        est = MultiTaskGBFSRegressor(n_estimators=3, max_depth=2, device="cpu").fit(
            X, y, task=np.arange(len(y)) % 2
        )
    else:
        est = GBFSRegressor(n_estimators=3, max_depth=2, device="cpu").fit(X, y)
    doc = model_io.to_document(est)
    old = ("cat_smooth", "cat_l2", "min_data_per_group", "max_cat_threshold", "pool_ranking")
    for name in old:
        doc["params"].pop(name, None)
    loaded = model_io.from_document(json.loads(model_io.dumps(doc)))
    params = loaded.get_params()
    assert (params["cat_smooth"], params["cat_l2"]) == (0.0, 0.0)
    assert (params["min_data_per_group"], params["max_cat_threshold"]) == (0, 256)
    if not multitask:
        assert params["pool_ranking"] == "gain"
    fresh = model_io.from_document(json.loads(model_io.dumps(model_io.to_document(loaded))))
    assert fresh.get_params()["cat_smooth"] == 0.0  # and it stays so when saved again
    first = GBFSClassifier.load_model(os.path.join(HERE, "data", "gbfs_format1.json"))
    assert first.get_params()["cat_l2"] == 0.0 and first.pool_ranking == "gain"


def test_wrong_class_and_not_fitted(tmp_path):
    from sklearn.exceptions import NotFittedError

    X, y = _data("regressor")
    path = tmp_path / "m.json"
    GBFSRegressor(n_estimators=2, device="cpu").fit(X, y).save_model(path)
    with pytest.raises(ValueError, match="holds a GBFSRegressor, not a GBFSClassifier"):
        GBFSClassifier.load_model(path)
    with pytest.raises(ValueError, match="holds a GBFSRegressor, not a StagewiseRegressor"):
        StagewiseRegressor.load_model(path)
    for est in (GBFSRegressor(), StagewiseRegressor(), ControlBurnRegressor()):
        with pytest.raises(NotFittedError):
            est.save_model(tmp_path / "n.json")


def test_params_json_cannot_hold_directly(tmp_path):
    """numpy scalars, a pandas Series of costs and a RandomState still save and load."""
    X, y = _data("binary")
    est = GBFSClassifier(
        n_estimators=np.int64(4),
        mu=np.float32(0.05),
        feature_costs=pd.Series([1.0, 2.0, 1.0, 1.0, 1.0]),
        random_state=np.random.RandomState(0),
        device="cpu",
    ).fit(X, y)
    path = tmp_path / "m.json"
    est.save_model(path)
    loaded = GBFSClassifier.load_model(path)
    assert loaded.get_params()["n_estimators"] == 4
    assert loaded.get_params()["random_state"] is None
    assert loaded.get_params()["feature_costs"] == [1.0, 2.0, 1.0, 1.0, 1.0]
    assert np.array_equal(loaded.predict_proba(X), est.predict_proba(X))


def test_equal_adjacent_cut_points_load():
    """Binning can give two equal cut points (three adjacent floats): such a model is valid."""
    x = np.array([np.nextafter(1.0, 0.0), 1.0, 1.0 + 2**-52] * 20)
    X = np.column_stack([x, np.arange(60.0)])
    est = GBFSRegressor(n_estimators=3, device="cpu").fit(X, np.arange(60.0))
    assert np.any(np.diff(est.bin_mapper_.cuts_[0]) == 0)
    loaded = model_io.from_document(json.loads(model_io.dumps(model_io.to_document(est))))
    assert np.array_equal(loaded.predict(X), est.predict(X))


# --- refusals: one ValueError naming the field ------------------------------------------------


@pytest.fixture(scope="module")
def gbfs_doc():
    X, y = _data("multiclass")
    est = GBFSClassifier(n_estimators=3, max_depth=3, device="cpu").fit(X, y)
    return model_io.to_document(est)


def _trees(doc):
    return doc["fitted"]["ensemble"]["trees"]


def _splits(doc):
    """(tree, node) of every split."""
    return [
        (t, i) for t, row in enumerate(_trees(doc)["feature"]) for i, v in enumerate(row) if v >= 0
    ]


def _set(field, value, pick=0):
    """Set a tree array's entry at the pick-th split."""

    def mutate(doc):
        t, i = _splits(doc)[pick]
        _trees(doc)[field][t][i] = value

    return mutate


def _set_path(value, *path):
    def mutate(doc):
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    return mutate


def _use_unused_node(doc):
    """Give a node below a leaf a leaf value."""
    f = _trees(doc)["feature"]
    t, i = next(
        (t, 2 * i + 1)
        for t, row in enumerate(f)
        for i, v in enumerate(row)
        if v < 0 and 2 * i + 1 < len(row)
    )
    _trees(doc)["value"][t][i] = 1.0


def _split_on_one_bin_feature(doc):
    """Move a split whose bin threshold is >= 1 onto feature 4, which has one bin."""
    t, i = next((t, i) for t, i in _splits(doc) if _trees(doc)["bin_threshold"][t][i] >= 1)
    _trees(doc)["feature"][t][i] = 4


def _overflowing_values(doc):
    k = doc["fitted"]["ensemble"]["n_outputs"]
    _trees(doc)["value"][0][0] = 1.7e308
    _trees(doc)["value"][k][0] = 1.7e308  # the same output column


REFUSALS = [
    # (description, mutation, message regex)
    (
        "feature index out of range",
        _set("feature", 120),
        r"^fitted\.ensemble\.trees\.feature\[\d+\]\[\d+\]: 120 is out of the allowed range "
        r"\[-1, 4\]",
    ),
    (
        "bin threshold past the feature's bins",
        _split_on_one_bin_feature,
        r"^fitted\.ensemble\.trees\.bin_threshold\[\d+\]\[\d+\]: bin threshold \d+ >= n_bins 1 "
        r"of feature 4",
    ),
    (
        "threshold off its cut point",
        _set("threshold", 0.123),
        r"^fitted\.ensemble\.trees\.threshold\[\d+\]\[\d+\]: threshold 0\.123 is not the cut "
        r"point",
    ),
    (
        "a split on the last level",
        _set_path(0, "fitted", "ensemble", "trees", "feature", 0, 14),
        r"feature\[0\]\[14\]: a split on the last level of a depth-3 tree",
    ),
    ("a node below a leaf in use", _use_unused_node, r"is below a leaf \(unused\) but holds 1\.0"),
    (
        "count not the sum of the children's",
        _set("count", 10**6),
        r"^fitted\.ensemble\.trees\.count\[\d+\]\[\d+\]: node \d+ of tree \d+ holds 1000000 rows",
    ),
    (
        "NaN leaf value",
        _set_path("NaN", "fitted", "ensemble", "trees", "value", 0, 0),
        r"^fitted\.ensemble\.trees\.value\[0\]\[0\]: expected a number",
    ),
    (
        "leaf values that overflow",
        _overflowing_values,
        r"^fitted\.ensemble\.trees\.value: leaf values so large that a prediction would overflow",
    ),
    (
        "depth over the cap",
        _set_path(40, "fitted", "ensemble", "max_depth"),
        r"^fitted\.ensemble\.max_depth: 40 is above the largest allowed value 16",
    ),
    (
        "declared trees != trees",
        _set_path(10**9, "fitted", "ensemble", "n_trees"),
        r"^fitted\.ensemble\.n_trees: 1000000000 is above the largest allowed value",
    ),
    (
        "tree column out of range",
        _set_path(9, "fitted", "ensemble", "tree_column", 0),
        r"^fitted\.ensemble\.tree_column\[0\]: 9 is out of the allowed range \[0, 4\]",
    ),
    (
        "decreasing cut points",
        _set_path(1e300, "fitted", "bins", "cuts", 0, 0),
        r"^fitted\.bins\.cuts\[0\]\[1\]: cut points must be in increasing order",
    ),
    (
        "n_features_in disagrees",
        _set_path(6, "n_features_in"),
        r"^fitted\.bins\.cuts: expected 6 entries, got 5",
    ),
    (
        "unsorted classes",
        _set_path(99, "classes", "values", 0),
        r"^classes\.values: labels must be distinct and sorted",
    ),
    (
        "selected feature without first use",
        _set_path([0, 1, 2, 3, 4], "fitted", "selected_features"),
        r"^fitted\.selected_features: the selected features are not the features with a first-use",
    ),
    (
        "unknown estimator",
        _set_path("os.system", "estimator"),
        r"^estimator: 'os\.system' is not one of",
    ),
    ("newer format", _set_path(3, "format_version"), r"^format_version: format version 3"),
    (
        "unknown parameter",
        _set_path(1, "params", "__init__"),
        r"^params: GBFSClassifier has no parameter '__init__'",
    ),
    (
        "a list where a number goes",
        _set_path([1.0], "fitted", "ensemble", "base_score", 0),
        r"^fitted\.ensemble\.base_score\[0\]: expected a number, got a list",
    ),
    (
        "huge integer",
        _set_path(2**70, "fitted", "first_use_tree", 0),
        r"^fitted\.first_use_tree\[0\]: 1180591620717411303424 is out of the allowed range",
    ),
    ("missing key", lambda doc: doc["fitted"].pop("bins"), r"^fitted: missing key 'bins'"),
    (
        "extra key",
        _set_path([], "fitted", "ensemble", "trees", "extra"),
        r"^fitted\.ensemble\.trees: unexpected key 'extra'",
    ),
]


@pytest.mark.parametrize("what,mutate,match", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused_with_the_field_named(gbfs_doc, what, mutate, match):
    doc = copy.deepcopy(gbfs_doc)
    model_io.from_document(copy.deepcopy(doc))  # the unmutated document loads
    mutate(doc)
    with pytest.raises(model_io.ModelFileError, match=match):
        model_io.from_document(json.loads(json.dumps(doc)))


def test_model_file_error_is_public_and_names_the_path_not_a_descriptor(tmp_path):
    """Issue 36: catching ModelFileError needed a private module, and load_model through a
    link to a folder said "Is a directory: 3" (the file descriptor)."""
    import gpufs

    assert gpufs.ModelFileError is model_io.ModelFileError
    assert "ModelFileError" in gpufs.__all__ and issubclass(gpufs.ModelFileError, ValueError)
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "folder", tmp_path / "m.json")
    for path in (tmp_path / "folder", tmp_path / "m.json"):
        with pytest.raises(gpufs.ModelFileError, match=f"^{path} is a folder, not a file"):
            GBFSRegressor.load_model(path)
    with pytest.raises(FileNotFoundError, match="gone.json"):
        GBFSRegressor.load_model(tmp_path / "gone.json")


@pytest.mark.parametrize(
    "text,match",
    [
        ('{"a": NaN}', r"expected a JSON object|not a gpufs model"),
        ('{"format": "gpufs.model", "format": "x"}', r"key 'format' appears twice"),
        ("[" * 100_000 + "]" * 100_000, r"nested too deeply"),
        ('{"format": ', r"not valid JSON"),
        ("1" * 5000, r"not valid JSON"),
    ],
)
def test_text_that_is_not_strict_json(tmp_path, text, match):
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        GBFSRegressor.load_model(path)


def test_nan_token_is_named(gbfs_doc, tmp_path):
    doc = copy.deepcopy(gbfs_doc)
    doc["fitted"]["ensemble"]["base_score"][0] = "__here__"
    text = model_io.dumps(doc).replace('"__here__"', "NaN")
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(
        ValueError,
        match=r"base_score\[0\]: expected a number, got the "
        r"non-standard JSON token NaN",
    ):
        GBFSClassifier.load_model(path)
    path.write_bytes(b"\xff\xfe" + text.encode())
    with pytest.raises(ValueError, match="not UTF-8"):
        GBFSClassifier.load_model(path)


def test_size_caps(gbfs_doc, tmp_path):
    path = tmp_path / "m.json"
    path.write_text(model_io.dumps(gbfs_doc))
    with pytest.raises(ValueError, match="larger than max_bytes=1000"):
        GBFSClassifier.load_model(path, max_bytes=1000)
    assert GBFSClassifier.load_model(path, max_bytes=os.path.getsize(path)).n_features_in_ == 5


def test_a_small_file_cannot_allocate_much(gbfs_doc, tmp_path):
    """The issue's case: a 4 MB file of a million empty cut lists made the loader allocate
    2.4 GiB (the padded cut matrix). Now it is refused, and the whole load stays small."""
    doc = copy.deepcopy(gbfs_doc)
    doc["n_features_in"] = 10**6
    doc["fitted"]["bins"]["cuts"] = [[]] * 10**6
    doc["fitted"]["ensemble"]["n_features"] = 10**6
    path = tmp_path / "m.json"
    path.write_text(model_io.dumps(doc))
    size = os.path.getsize(path)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"n_features_in: 1000000 is above the largest"):
            GBFSClassifier.load_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # json.loads makes one list object (about 64 bytes) per "[]," (3 bytes); nothing else of
    # that size is allocated
    assert peak < 32 * size, (peak, size)


# --- issue 26: the files themselves -----------------------------------------------------------
@pytest.fixture
def small_model():
    X, y = _data("regressor", n=80)
    return GBFSRegressor(n_estimators=2, max_depth=2, device="cpu").fit(X, y)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_save_model_keeps_the_targets_mode_and_uses_the_umask(small_model, tmp_path, umask_022):
    """save_model made every file 0600 (mkstemp's mode), also an existing 0644 one."""
    new = tmp_path / "new.json"
    small_model.save_model(new)
    assert oct(os.stat(new).st_mode & 0o777) == oct(0o644)
    old = tmp_path / "old.json"
    old.write_text("x")
    os.chmod(old, 0o640)
    small_model.save_model(old)
    assert oct(os.stat(old).st_mode & 0o777) == oct(0o640)
    assert GBFSRegressor.load_model(old).n_features_in_ == 5
    assert sorted(os.listdir(tmp_path)) == ["new.json", "old.json"]


def test_save_model_names_the_target_of_a_missing_folder(small_model, tmp_path):
    path = tmp_path / "no" / "such" / "m.json"
    with pytest.raises(FileNotFoundError) as info:
        small_model.save_model(path)
    assert str(path) in str(info.value) and ".gpufs-model-" not in str(info.value)


def _alarm(seconds):
    """SIGALRM raises TimeoutError in this (the main) thread: a blocked open() returns."""
    import signal

    def raise_timeout(signum, frame):
        raise TimeoutError("no answer: the call blocked")

    old = signal.signal(signal.SIGALRM, raise_timeout)
    signal.alarm(seconds)
    return old


def _no_alarm(old):
    import signal

    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_load_model_refuses_a_fifo_without_blocking(tmp_path):
    """load_model on a FIFO waited forever for a writer (issue 26)."""
    fifo = tmp_path / "m.json"
    os.mkfifo(fifo)
    old = _alarm(10)
    try:
        with pytest.raises(ValueError, match=r"m.json is a FIFO \(named pipe\), not a file"):
            GBFSRegressor.load_model(fifo)
        with pytest.raises(ValueError, match=r"is a character device, not a file"):
            model_io.load_model(os.devnull)
    finally:
        _no_alarm(old)


def test_save_model_refuses_to_replace_what_is_not_a_regular_file(small_model, tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    link = tmp_path / "null.json"
    os.symlink(os.devnull, link)
    for path, kind in [(fifo, "a FIFO"), (link, "a character device"), (tmp_path, "a folder")]:
        with pytest.raises(ValueError, match=f"is {kind}"):
            small_model.save_model(path)
    assert os.path.islink(link) and os.readlink(link) == os.devnull
    import stat

    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["fifo.json", "null.json"]


# --- issue 26: parameters and evidence that contradict the file ------------------------------
def _later_first_use(doc):
    """Move the last selected feature's first use one tree later (the order stays valid)."""
    f = doc["fitted"]
    last = f["selected_features"][-1]
    f["first_use_tree"][last] += 1


def _importance_on_unselected(doc):
    f = doc["fitted"]
    off = [j for j in range(doc["n_features_in"]) if j not in f["selected_features"]]
    f["feature_importances"][off[0]] = 0.25


def _shifted_importance(doc):
    imp = doc["fitted"]["feature_importances"]
    j = doc["fitted"]["selected_features"][0]
    imp[j] = imp[j] + 0.01


def _nothing_added_by_tree_0(doc):
    doc["fitted"]["selection_record"]["features_added"][0] = []


REFUSALS_26 = [
    (
        "n_estimators as text",
        _set_path("8", "params", "n_estimators"),
        r"^params\.n_estimators: The 'n_estimators' parameter of GBFSClassifier must be an int",
    ),
    (
        "max_depth over its range",
        _set_path(100, "params", "max_depth"),
        r"^params\.max_depth: The 'max_depth' parameter of GBFSClassifier must be an int in the "
        r"range \[1, 16\]\. Got 100 instead",
    ),
    (
        "max_depth other than the trees'",
        _set_path(2, "params", "max_depth"),
        r"^fitted\.ensemble\.max_depth: the trees have depth 3, but params\.max_depth is 2",
    ),
    ("negative mu", _set_path(-1, "params", "mu"), r"^params\.mu: The 'mu' parameter"),
    (
        "random_state beyond 2**32",
        _set_path(2**70, "params", "random_state"),
        r"^params\.random_state: The 'random_state' parameter",
    ),
    (
        "feature_costs of the wrong length",
        _set_path([1.0, 2.0], "params", "feature_costs"),
        r"^params\.feature_costs: feature_costs must have one entry per feature: expected shape "
        r"\(5,\), got \(2,\)",
    ),
    (
        "feature_groups of the wrong length",
        _set_path([0, 1], "params", "feature_groups"),
        r"^params\.feature_groups: feature_groups must give one group label per feature",
    ),
    (
        "a missing parameter",
        lambda doc: doc["params"].pop("mu"),
        r"^params: missing parameter 'mu'",
    ),
    (
        "more rounds than n_estimators",
        _set_path(2, "params", "n_estimators"),
        r"^fitted\.n_estimators: 3 rounds, more than params\.n_estimators 2",
    ),
    (
        "bins of another max_bins",
        _set_path(64, "params", "max_bins"),
        r"^fitted\.bins\.max_bins: 255 differs from params\.max_bins 64",
    ),
    (
        "mu_ other than mu without a budget",
        _set_path(0.2, "params", "mu"),
        r"^fitted\.mu: 0\.05 differs from params\.mu 0\.2 \(without n_features_to_select",
    ),
    (
        "first_use_tree against the trees",
        _later_first_use,
        r"^fitted\.first_use_tree\[\d\]: feature \d is first split on by tree \d+, not \d+",
    ),
    (
        "features_added against the trees",
        _nothing_added_by_tree_0,
        r"^fitted\.selection_record\.features_added\[0\]: tree 0 first splits on features ",
    ),
    (
        "negative gain",
        _set("gain", -0.5),
        r"^fitted\.ensemble\.trees\.gain\[\d+\]\[\d+\]: a split's gain must be positive, got "
        r"-0\.5",
    ),
    (
        "negative train loss",
        _set_path(-1.0, "fitted", "selection_record", "train_loss", 0),
        r"^fitted\.selection_record\.train_loss\[0\]: -1\.0 is below the smallest allowed value",
    ),
    (
        "importances other than the trees' gains",
        _shifted_importance,
        r"^fitted\.feature_importances: not the trees' split gains",
    ),
    (
        "duplicate feature names",
        _set_path(["a", "b", "a", "c", "d"], "feature_names_in"),
        r"^feature_names_in\[2\]: name 'a' appears twice",
    ),
]


@pytest.mark.parametrize("what,mutate,match", REFUSALS_26, ids=[r[0] for r in REFUSALS_26])
def test_parameters_and_evidence_are_checked(gbfs_doc, what, mutate, match):
    """Issue 26: each of these loaded, and failed only at refit (or never)."""
    doc = copy.deepcopy(gbfs_doc)
    mutate(doc)
    with pytest.raises(model_io.ModelFileError, match=match):
        model_io.from_document(json.loads(json.dumps(doc)))


@pytest.fixture(scope="module")
def sparse_docs():
    """Documents of models that leave features out: GBFS (high mu), multitask, ControlBurn,
    stagewise."""
    from gpufs import MultiTaskGBFSRegressor

    X, y = _data("regressor")
    gb = GBFSRegressor(n_estimators=4, max_depth=2, mu=5.0, device="cpu").fit(X, y)
    assert len(gb.selected_features_) < 5
    mt = MultiTaskGBFSRegressor(n_estimators=3, max_depth=2, device="cpu").fit(
        X, y, task=np.arange(len(y)) % 2
    )
    cb = ControlBurnRegressor(
        n_features_to_select=2, max_depth=2, random_state=0, device="cpu"
    ).fit(X, y)
    sw = StagewiseRegressor(3, device="cpu").fit(np.nan_to_num(X), y)
    return {
        k: model_io.to_document(e)
        for k, e in [("gbfs", gb), ("multitask", mt), ("controlburn", cb), ("stagewise", sw)]
    }


def _rising_cost(doc):
    c = doc["fitted"]["cost_history"]
    c[-1] = c[0] * 2


def _mt_shifted_importance(doc):
    imp = doc["fitted"]["feature_importances"]
    j = doc["fitted"]["selected_features"][0]
    imp[j] = imp[j] * 0.5


OTHER_FAMILIES = [
    (
        "gbfs",
        "importance on an unselected feature",
        _importance_on_unselected,
        r"^fitted\.feature_importances: not the trees' split gains",
    ),
    (
        "multitask",
        "mu_t of the wrong length",
        _set_path([0.01, 0.01, 0.01], "params", "mu_t"),
        r"^params\.mu_t: mu_t must be a number or one price per task: 2 tasks",
    ),
    (
        "multitask",
        "mu_G of text",
        _set_path("0.05", "params", "mu_G"),
        r"^params\.mu_G: The 'mu_G' parameter",
    ),
    (
        "multitask",
        "importances other than the gains",
        _mt_shifted_importance,
        r"^fitted\.feature_importances: not the trees' split gains",
    ),
    (
        "multitask",
        "negative gain",
        _set_path(-1.0, "fitted", "ensembles", 0, "trees", "gain", 0, 0),
        r"^fitted\.ensembles\[0\]\.trees\.gain\[0\]\[0\]: a split's gain must be positive",
    ),
    (
        "controlburn",
        "negative alpha",
        _set_path(-1.0, "params", "alpha"),
        r"^params\.alpha: The 'alpha' parameter",
    ),
    (
        "controlburn",
        "the refit model's max_depth",
        _set_path(100, "fitted", "refit", "model", "params", "max_depth"),
        r"^fitted\.refit\.model\.params\.max_depth: The 'max_depth' parameter",
    ),
    (
        "controlburn",
        "a missing parameter",
        lambda doc: doc["params"].pop("max_depth"),
        r"^params: missing parameter 'max_depth'",
    ),
    ("stagewise", "a rising cost", _rising_cost, r"^fitted\.cost_history\[3\]: the cost rose"),
    (
        "stagewise",
        "dtype of another kind",
        _set_path("float16", "params", "dtype"),
        r"^params\.dtype: The 'dtype' parameter",
    ),
]


@pytest.mark.parametrize(
    "family,what,mutate,match", OTHER_FAMILIES, ids=[f"{r[0]}-{r[1]}" for r in OTHER_FAMILIES]
)
def test_parameters_and_evidence_of_every_family(sparse_docs, family, what, mutate, match):
    doc = copy.deepcopy(sparse_docs[family])
    model_io.from_document(json.loads(json.dumps(doc)))  # the unmutated document loads
    mutate(doc)
    with pytest.raises(model_io.ModelFileError, match=match):
        model_io.from_document(json.loads(json.dumps(doc)))


def test_parameters_changed_since_fit_are_refused_at_save(small_model, tmp_path):
    """A file that would not load is not written: set_params after fit changed what the
    parameters say about the fitted model."""
    path = tmp_path / "m.json"
    for params, match in [
        (
            dict(max_depth=5),
            r"cannot save GBFSRegressor: fitted\.ensemble\."
            r"max_depth: the trees have depth 2, but "
            r"params\.max_depth is 5",
        ),
        (
            dict(max_depth=100),
            r"cannot save GBFSRegressor: The 'max_depth' "
            r"parameter",
        ),
        (dict(feature_costs=[1.0, 2.0]), r"params\.feature_costs"),
    ]:
        est = copy.deepcopy(small_model).set_params(**params)
        with pytest.raises(ValueError, match=match):
            est.save_model(path)
        assert not path.exists()
    small_model.save_model(path)
    assert GBFSRegressor.load_model(path).max_depth == 2
