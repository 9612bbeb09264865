"""Categorical features and tables of every library, end to end.

The engine's categorical scan is checked against the oracle in ``test_reference_grower.py``
and CPU == simulated GPU in ``_cudasim_kernels.py``; here: the planted problem (a 30-level
categorical and two numeric columns among 50 noise columns), the price of a categorical
feature, every estimator family on pandas, polars and pyarrow tables with category and string
columns, names out, ``transform`` keeping the table's kind, model round trips, unseen
categories, the input door's errors, and the command line.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import gpufs
from _categorical_data import PLANTED, one_hot, original_feature, planted
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
from gpufs.backends.base import SplitParams, categorical_slots

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- the planted problem ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted_data():
    return planted(n=2000, n_noise=50, seed=0)


@pytest.mark.parametrize("frame", ["pandas", "polars"])
def test_planted_gbfs_k3_finds_exactly_the_three(planted_data, frame):
    """GBFS with k = 3 on the table as it is (the 30-level column a string column) selects
    exactly the categorical column and the two numeric ones."""
    X, y = planted_data
    if frame == "polars":
        X = pl.from_pandas(X)
    est = GBFSRegressor(n_features_to_select=3, n_estimators=50, device="cpu", random_state=0).fit(
        X, y
    )
    assert sorted(est.selected_feature_names_) == sorted(PLANTED)
    assert est.is_categorical_.sum() == 1 and est.feature_names_in_[est.is_categorical_] == ["city"]


def test_planted_one_hot_gbfs_and_rf_top_k_miss_it(planted_data):
    """One-hot encoded, each level is its own column: GBFS's three columns and a random
    forest's three most important ones are all levels of the categorical, and miss x1, x2."""
    from sklearn.ensemble import RandomForestRegressor

    X, y = planted_data
    Xo = one_hot(X)
    gb = GBFSRegressor(n_features_to_select=3, n_estimators=50, device="cpu", random_state=0).fit(
        Xo, y
    )
    rf = RandomForestRegressor(n_estimators=60, random_state=0, n_jobs=1).fit(Xo, y)
    top = Xo.columns[np.argsort(-rf.feature_importances_)[:3]]
    for chosen in (list(gb.selected_feature_names_), list(top)):
        assert len(chosen) == 3
        assert {original_feature(c) for c in chosen} != set(PLANTED), chosen
        assert not {"x1", "x2"} <= set(chosen), chosen


def test_a_categorical_feature_pays_mu_once(planted_data):
    """The price of a split on a categorical feature is mu * cost once, however many
    categories the split sends left; once in Omega its splits at every other node (other
    category sets) are free."""
    X, y = planted_data
    mu = 1000.0  # in the units of the raw loss reduction: far above a split on x1 or x2
    est = GBFSRegressor(
        mu=mu, penalty_scaling="none", n_estimators=10, max_depth=3, device="cpu", random_state=0
    ).fit(X, y)
    f = int(np.flatnonzero(est.feature_names_in_ == "city")[0])
    s = est.ensemble_.stacked()
    on_city = s["feature"] == f
    bits = s["cat_bits"][on_city]
    n_left = np.unpackbits(bits.view(np.uint8), axis=1).sum(axis=1)
    assert list(est.selected_feature_names_) == ["city"]  # x1, x2 never pay 1000
    assert on_city.sum() > 10 and (n_left > 1).sum() > 10  # many multi-category splits
    assert len({row.tobytes() for row in bits}) > 5  # on many different category sets
    assert est.selection_record_["features_added"][0] == [f]
    # the split search: score = gain - mu * cost, once, for a split of many categories
    from gpufs.backends.cpu import CPUBackend
    from gpufs.engine.quantize import fixed_point_scale, quantize

    be = CPUBackend()
    Xc = est.bin_mapper_.transform(gpufs.data._input.check_X(est, X, reset=False), be)
    g = -(y - y.mean())
    gs, hs = fixed_point_scale(g, len(g)), fixed_point_scale(np.ones_like(g), len(g))
    gq, hq = quantize(g, gs), quantize(np.ones_like(g), hs)
    n = len(g)
    hist = be.histograms(
        Xc,
        np.stack([gq, hq], 1),
        np.arange(n, dtype=np.int32),
        np.zeros(1, np.int64),
        np.array([n]),
        np.array([0]),
    )
    d = Xc.shape[1]
    allowed = np.zeros(d, bool)
    allowed[f] = True
    for cost in (1.0, 2.5):
        pen = np.zeros(d)
        pen[f] = mu * cost
        slot, n_cat = categorical_slots(est.bin_mapper_.is_categorical_, d)
        split = SplitParams(
            n_bins=est.bin_mapper_.n_bins_,
            g_scale=gs,
            h_scale=hs,
            reg_lambda=1.0,
            gain_divisor=1.0,
            min_child_weight=1e-3,
            min_split_gain=0.0,
            cat_slot=slot,
            n_cat=n_cat,
        )
        res = be.find_splits(hist, [gq.sum()], [hq.sum()], pen, allowed, split)
        assert np.unpackbits(res.cat_bits[0].view(np.uint8)).sum() > 5
        assert res.score[0] == res.gain[0] - mu * cost


def test_groups_and_costs_with_a_categorical_column(planted_data):
    """Groups ("bags") and costs are per column: x1 in city's group enters for free once city
    is in, where alone it never pays mu."""
    X, y = planted_data
    cols = list(X.columns)
    groups = np.arange(len(cols))
    groups[cols.index("x1")] = groups[cols.index("city")]
    costs = np.ones(len(cols))
    costs[cols.index("city")] = 0.5
    kw = dict(
        mu=1000.0,
        penalty_scaling="none",
        n_estimators=10,
        max_depth=3,
        device="cpu",
        random_state=0,
    )
    alone = GBFSRegressor(**kw).fit(X, y)
    grouped = GBFSRegressor(feature_groups=groups, feature_costs=costs, **kw).fit(X, y)
    assert list(alone.selected_feature_names_) == ["city"]
    assert list(grouped.selected_feature_names_)[:1] == ["city"]
    assert "x1" in grouped.selected_feature_names_ and "x2" not in grouped.selected_feature_names_


# --- every estimator, every table -------------------------------------------------------------


def _table(n=240, seed=1):
    """A pandas table: numeric a, b, c, a category column "shop" (with missing values), a
    string column "color" and a boolean; the target depends on shop, color and a."""
    rng = np.random.default_rng(seed)
    shop = rng.integers(0, 6, n)
    color = rng.integers(0, 3, n)
    df = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "shop": pd.Categorical(np.array(list("PQRSTU"), dtype=object)[shop]),
            "c": rng.normal(size=n),
            "color": np.array(["red", "green", "blue"], dtype=object)[color],
            "flag": rng.random(n) < 0.5,
        }
    )
    df.loc[rng.random(n) < 0.1, "shop"] = None
    eff = np.array([2.0, -1.0, 0.5, 1.5, -2.0, 0.0])
    y = (
        np.where(df["shop"].isna(), 0.0, eff[shop])
        + np.array([1.0, -1.0, 0.0])[color]
        + df["a"].to_numpy()
        + 0.1 * rng.normal(size=n)
    )
    return df, y


def _as(kind, df):
    if kind == "pandas":
        return df
    if kind == "polars":
        return pl.from_pandas(df)
    return pa.Table.from_pandas(df, preserve_index=False)


_SMALL = {"device": "cpu", "random_state": 0}
ESTIMATORS = [
    ("gbfs_reg", lambda: GBFSRegressor(n_estimators=15, n_features_to_select=3, **_SMALL), "reg"),
    ("gbfs_clf", lambda: GBFSClassifier(n_estimators=15, n_features_to_select=3, **_SMALL), "clf"),
    (
        "controlburn_reg",
        lambda: ControlBurnRegressor(
            n_features_to_select=3, max_depth=3, max_trees_per_round=10, **_SMALL
        ),
        "reg",
    ),
    (
        "controlburn_clf",
        lambda: ControlBurnClassifier(
            n_features_to_select=3, max_depth=3, max_trees_per_round=10, **_SMALL
        ),
        "clf",
    ),
    ("stagewise_reg", lambda: StagewiseRegressor(n_features_to_select=3, **_SMALL), "reg"),
    ("stagewise_clf", lambda: StagewiseClassifier(n_features_to_select=3, **_SMALL), "clf"),
]


@pytest.mark.parametrize("name,make,task", ESTIMATORS, ids=[e[0] for e in ESTIMATORS])
def test_every_estimator_on_every_table(name, make, task, tmp_path):
    """Fit on a pandas, a polars and a pyarrow table with category and string columns, as
    they are: the same selection (by name) from each; predictions equal whatever table kind
    they are made on; ``transform`` returns the kind of table it was given with the columns
    untouched; a saved model predicts the same."""
    df, y = _table()
    if task == "clf":
        y = np.where(y > np.median(y), "high", "low")
    fits = {kind: make().fit(_as(kind, df), y) for kind in ("pandas", "polars", "pyarrow")}
    est = fits["pandas"]
    assert list(est.feature_names_in_) == list(df.columns)
    assert list(est.is_categorical_) == [False, False, True, False, True, False]
    assert "shop" in est.selected_feature_names_ and "color" in est.selected_feature_names_
    for kind, other in fits.items():
        assert list(other.selected_feature_names_) == list(est.selected_feature_names_), kind
    want = est.predict(df)
    for kind in ("polars", "pyarrow"):
        np.testing.assert_array_equal(fits[kind].predict(_as(kind, df)), want)
        np.testing.assert_array_equal(est.predict(_as(kind, df)), want)
    for kind, cls in (("pandas", pd.DataFrame), ("polars", pl.DataFrame), ("pyarrow", pa.Table)):
        out = est.transform(_as(kind, df))
        assert isinstance(out, cls), kind
        assert list(out.columns if kind != "pyarrow" else out.column_names) == [
            c for c in df.columns if c in set(est.selected_feature_names_)
        ]
    shops = est.transform(df)["shop"]
    assert isinstance(shops.dtype, pd.CategoricalDtype)  # the column as it was, not codes
    path = tmp_path / "model.json"
    est.save_model(path)
    back = type(est).load_model(path)
    np.testing.assert_array_equal(back.predict(pl.from_pandas(df)), want)
    assert list(back.is_categorical_) == list(est.is_categorical_)


@pytest.mark.parametrize("cls", [MultiTaskGBFSRegressor, MultiTaskGBFSClassifier])
def test_multitask_on_tables(cls, tmp_path):
    df, y = _table(n=300)
    if cls is MultiTaskGBFSClassifier:
        y = (y > np.median(y)).astype(int)
    task = np.arange(300) % 2
    est = cls(n_estimators=8, device="cpu", random_state=0).fit(pl.from_pandas(df), y, task=task)
    assert {"shop", "color"} <= set(est.selected_feature_names_)
    want = est.predict(df, task=task)
    est.save_model(tmp_path / "m.json")
    np.testing.assert_array_equal(
        cls.load_model(tmp_path / "m.json").predict(_as("pyarrow", df), task=task), want
    )


def test_stagewise_selects_a_categorical_column_as_one_group():
    """Stagewise: a categorical column is one candidate (its one-hot group fitted jointly);
    selected, every category has its weight, the mean residual of its rows."""
    df, y = _table(n=400)
    est = StagewiseRegressor(n_features_to_select=1, device="cpu").fit(df[["shop", "b"]], y)
    assert list(est.selected_feature_names_) == ["shop"]
    weights = est.category_coef_[0]
    codes = est.category_codes_
    resid = y - y.mean()
    for j, cat in enumerate(codes.categories(0)):
        np.testing.assert_allclose(
            weights[j], resid[(df["shop"] == cat).to_numpy()].mean(), rtol=1e-10
        )
    # missing shops get no category weight: the prediction there is the intercept alone
    miss = df["shop"].isna().to_numpy()
    np.testing.assert_allclose(est.predict(df[["shop", "b"]])[miss], est.intercept_)


def test_stagewise_cli_scores_a_selected_categorical_column(tmp_path, monkeypatch, capsys):
    """Issue 36, item 11: the CLI printed "score 0.0000" for a selected categorical column
    (its weights are in category_coef_, the score read coef_). Its score is now the RMS
    spread of its category weights, on the margin's scale as a numeric |weight| is."""
    import re

    from gpufs.cli import main

    rng = np.random.default_rng(0)
    n = 300
    grp = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n)
    y = np.select([grp == "a", grp == "b"], [-2.0, 0.0], 2.0) + 0.5 * x + 0.1 * rng.normal(size=n)
    pd.DataFrame({"grp": grp, "x": x, "y": y}).to_csv(tmp_path / "t.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "select",
                "t.csv",
                "--target",
                "y",
                "--method",
                "stagewise",
                "-k",
                "2",
                "--categorical",
                "grp",
                "--device",
                "cpu",
                "--report",
                "r.json",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    scores = dict(re.findall(r"^\s*\d+\. (\S+).*?\(score ([0-9.]+)", out, re.M))
    assert set(scores) == {"grp", "x"}
    # the weights are about -2, 0 and 2 about the mean: spread sqrt(8/3) = 1.63
    assert float(scores["grp"]) == pytest.approx(np.sqrt(8 / 3), rel=0.05)
    assert float(scores["x"]) == pytest.approx(0.5, rel=0.1)
    report = json.loads((tmp_path / "r.json").read_text())
    assert all(s["score"] > 0.1 for s in report["selected"])


def test_numpy_with_categorical_indices_equals_the_table():
    """Category values in a numpy array, named by index, give the same model as the table."""
    df, y = _table()
    Xn = df.astype({"shop": object}).to_numpy()
    a = GBFSRegressor(n_estimators=10, **_SMALL).fit(df, y)
    b = GBFSRegressor(n_estimators=10, categorical_features=[2, 4], **_SMALL).fit(Xn, y)
    for key, v in a.ensemble_.stacked().items():
        np.testing.assert_array_equal(v, b.ensemble_.stacked()[key], err_msg=key)
    mask = np.zeros(6, bool)
    mask[[2, 4]] = True
    c = GBFSRegressor(n_estimators=10, categorical_features=mask, **_SMALL).fit(Xn, y)
    np.testing.assert_array_equal(c.predict(Xn), a.predict(df))


def test_categorical_by_name_and_none():
    """Names choose the categorical columns (a numeric one too); None treats none as
    categorical and refuses the text columns."""
    df, y = _table()
    est = GBFSRegressor(n_estimators=5, categorical_features=["shop", "color", "c"], **_SMALL).fit(
        df, y
    )
    assert list(est.is_categorical_) == [False, False, True, True, True, False]
    with pytest.raises(ValueError, match=r"non-numeric columns: 'shop', 'color'"):
        GBFSRegressor(categorical_features=None, **_SMALL).fit(df, y)


def test_unseen_and_missing_categories_go_where_missing_values_go():
    df, y = _table()
    est = GBFSRegressor(n_estimators=10, **_SMALL).fit(df, y)
    test = df.iloc[:20].copy()
    test["color"] = "purple"  # a category not seen in fit
    missing = df.iloc[:20].copy()
    missing["color"] = None
    np.testing.assert_array_equal(est.predict(test), est.predict(missing))
    assert not np.array_equal(est.predict(test), est.predict(df.iloc[:20]))


def test_categories_given_as_their_numeric_codes_are_refused():
    """Issue 26: the text categories of fit given at predict as their pandas codes (numbers)
    were all treated as unseen: R^2 fell silently. Either direction is now an error naming the
    column; categories of the fit's kind still predict (unseen ones as missing)."""
    df, y = _table()
    est = GBFSRegressor(n_estimators=20, **_SMALL).fit(df, y)
    coded = df.assign(shop=df["shop"].cat.codes.astype(float).where(df["shop"].notna()))
    with pytest.raises(
        ValueError,
        match=r"categorical column 'shop' held text categories "
        r"in fit \(.*\) but holds numbers now",
    ):
        est.predict(coded)
    with pytest.raises(ValueError, match=r"categorical column 'color' held text categories"):
        est.predict(df.assign(color=df["color"].map({"red": 0, "green": 1, "blue": 2})))
    cols = ["a", "b", "shop", "c"]
    Xn = df[cols].assign(shop=df["shop"].cat.codes).to_numpy(dtype=float)
    numeric = GBFSRegressor(n_estimators=5, categorical_features=[2], **_SMALL).fit(Xn, y)
    with pytest.raises(
        ValueError,
        match=r"categorical column 2 held number categories in fit "
        r"\(.*\) but holds text now",
    ):
        numeric.predict(df[cols].to_numpy(dtype=object))
    assert np.isfinite(est.predict(df.assign(color="purple"))).all()


def test_rare_categories_are_pooled_and_frequent_ones_first():
    from gpufs.data._category_codes import CategoryCodes

    col = np.array(
        ["b"] * 500 + ["a"] * 300 + ["c"] * 190 + ["x", "y"] * 3 + ["z"] * 4, dtype=object
    )
    codes = CategoryCodes.learn({0: col}, 1, 255)
    assert codes.categories(0)[:3] == ["b", "a", "c"]  # most frequent first
    assert codes.n_codes[0] == 4  # x, y, z pooled in the fourth code
    enc = codes.encode(0, np.array(["b", "c", "x", "z", "new"], dtype=object), np.zeros(5, bool))
    np.testing.assert_array_equal(enc, [0, 2, 3, 3, np.nan])
    few = CategoryCodes.learn({0: col}, 1, 3)  # max_bins = 3: two codes of their own
    assert few.n_codes[0] == 3 and few.encode(0, np.array(["c"], object), [False])[0] == 2


def test_set_output_pandas_and_polars():
    df, y = _table()
    est = GBFSRegressor(n_estimators=10, n_features_to_select=3, **_SMALL).fit(df, y)
    est.set_output(transform="polars")
    out = est.transform(df)
    assert isinstance(out, pl.DataFrame) and out["color"].dtype == pl.String
    est.set_output(transform="pandas")
    out = est.transform(pl.from_pandas(df))
    assert isinstance(out, pd.DataFrame) and list(out.columns) == [
        c for c in df.columns if c in set(est.selected_feature_names_)
    ]


@pytest.mark.parametrize(
    "value, message",
    [
        (["nope"], r"categorical_features names columns that X does not have: 'nope'"),
        ([9], r"column index 9 is out of range for X with 6 columns"),
        ([True, False], r"boolean mask needs one entry per column: expected 6, got 2"),
        ([[1, 2]], r"flat list"),
    ],
)
def test_bad_categorical_features(value, message):
    df, y = _table(n=40)
    with pytest.raises(ValueError, match=message):
        GBFSRegressor(categorical_features=value, **_SMALL).fit(df, y)


def test_bad_categorical_columns():
    df, y = _table(n=40)
    with pytest.raises(ValueError, match=r"names columns, but X has no column names"):
        GBFSRegressor(categorical_features=["shop"], **_SMALL).fit(df.to_numpy(), y)
    mixed = df.astype({"color": object})
    mixed.loc[0, "color"] = 7
    with pytest.raises(ValueError, match=r"categorical column 'color' mixes value types"):
        GBFSRegressor(categorical_features=["shop", "color"], **_SMALL).fit(mixed, y)
    dated = df.assign(when=pd.Timestamp("2020-01-01"))
    with pytest.raises(ValueError, match=r"non-numeric columns: 'when' \(dtype Datetime"):
        GBFSRegressor(**_SMALL).fit(dated, y)
    # stagewise takes NaN in a numeric column now (issue 36, item 6): an all-missing one is
    # constant, never selected
    est = StagewiseRegressor(**_SMALL).fit(df.assign(a=np.nan), y)
    assert "a" not in list(est.selected_feature_names_)


# --- the command line ---------------------------------------------------------------------------


def test_cli_selects_text_and_categorical_columns_as_they_are(tmp_path):
    """``gpufs select`` on a CSV with text columns: they are categorical features, named in
    the output; the report and the written table keep them as text."""
    X, y = planted(n=600, n_noise=8, seed=2)
    X.assign(target=y).to_csv(tmp_path / "in.csv", index=False)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpufs",
            "select",
            "in.csv",
            "--target",
            "target",
            "--task",
            "regression",
            "-k",
            "3",
            "--device",
            "cpu",
            "--output",
            "out.csv",
            "--report",
            "r.json",
        ],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert sorted(s["name"] for s in report["selected"]) == sorted(PLANTED)
    out = pd.read_csv(tmp_path / "out.csv")
    assert not pd.api.types.is_numeric_dtype(out["city"])
    assert out["city"].str.startswith("c").all()


def test_controlburn_single_feature_trees_split_categories():
    """ControlBurn's single-feature ("EBM") trees take one column at a time, a categorical
    one included: its trees split by category sets, and the selection names it."""
    df, y = _table(n=200)
    est = ControlBurnRegressor(
        n_features_to_select=3, tree_type="single", max_depth=1, max_trees_per_round=3, **_SMALL
    ).fit(df, y)
    assert {"shop", "color"} <= set(est.selected_feature_names_)
    s = est.forest_.ensemble.stacked()
    shop = list(df.columns).index("shop")
    assert (s["feature"] == shop).any() and s["cat_bits"][s["feature"] == shop].any()


def test_cudf_table():
    """cudf tables through the same door (runs where cudf and a GPU are installed)."""
    cudf = pytest.importorskip("cudf")
    df, y = _table()
    cdf = cudf.from_pandas(df)
    est = GBFSRegressor(n_estimators=10, n_features_to_select=3, random_state=0, device="gpu").fit(
        cdf, y
    )
    ref = GBFSRegressor(n_estimators=10, n_features_to_select=3, **_SMALL).fit(df, y)
    assert list(est.selected_feature_names_) == list(ref.selected_feature_names_)
    assert isinstance(est.transform(cdf), cudf.DataFrame)


# --- identifier-like columns: never a feature unnoticed ---------------------------------------


def _with_name_column(frame="pandas"):
    """Breast cancer with a text ``name`` column, a different name on every row."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.copy()
    X.insert(3, "name", [f"patient {i:03d}" for i in range(len(X))])
    return (pl.from_pandas(X) if frame == "polars" else X), y.to_numpy()


@pytest.mark.parametrize(
    "make",
    [
        lambda: GBFSClassifier(n_estimators=10, **_SMALL),
        lambda: ControlBurnClassifier(
            n_features_to_select=3, max_depth=2, max_trees_per_round=5, **_SMALL
        ),
        lambda: StagewiseClassifier(n_features_to_select=3, **_SMALL),
    ],
    ids=["gbfs", "controlburn", "stagewise"],
)
@pytest.mark.parametrize("frame", ["pandas", "polars"])
def test_an_identifier_column_is_refused_by_name(make, frame):
    """A text column with a different value on every row is no feature: GBFS selected it
    (held-out accuracy 0.37 instead of 0.92) and stagewise listed it. Every family refuses it
    at fit, naming the column and the evidence; X keeps its meaning (no column left out
    behind the user's back, so ``n_features_in_`` and ``transform`` stay scikit-learn's)."""
    X, y = _with_name_column(frame)
    with pytest.raises(
        ValueError,
        match=r"column 'name' \(569 distinct values in 569 rows\) "
        r"looks like an identifier, not a feature",
    ):
        make().fit(X, y)
    as_category = _with_name_column()[0].astype({"name": "category"})  # the dtype, not the user
    with pytest.raises(ValueError, match="looks like an identifier"):
        make().fit(as_category, y)


def test_an_identifier_column_named_by_the_user_is_used_with_a_warning():
    X, y = _with_name_column()
    with pytest.warns(
        UserWarning,
        match=r"categorical column 'name' \(569 distinct values in "
        r"569 rows\) looks like an identifier",
    ):
        est = StagewiseClassifier(
            n_features_to_select=2, categorical_features=["name"], **_SMALL
        ).fit(X, y)
    assert list(est.is_categorical_) == [c == "name" for c in X.columns]


def test_the_identifier_rule_leaves_real_categories_alone():
    from gpufs.data._identifiers import identifier_like

    assert identifier_like(569, 569) and identifier_like(300, 569)  # names; mostly unique
    assert not identifier_like(250, 569)  # fewer distinct values than half the rows
    assert not identifier_like(30, 2000)  # the planted 30-level city
    assert not identifier_like(9, 9)  # a toy table is not judged
    # a 300-level category on 600 rows (two rows each) is a category, fitted as one
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=600),
            "zip": np.array([f"z{i:03d}" for i in range(300)] * 2, dtype=object),
        }
    )
    est = GBFSRegressor(n_estimators=3, **_SMALL).fit(X, rng.normal(size=600))
    assert list(est.is_categorical_) == [False, True]


# --- identifiers and categories (issue 36, item 10) --------------------------------------------


def test_a_20_level_category_on_30_rows_is_not_an_identifier():
    """It was refused as an identifier (20 distinct values > half of 30). The rule reads the
    distinct share AND the row count: on fewer than 100 rows, over 90 % must be distinct."""
    from gpufs.data._identifiers import identifier_like

    assert not identifier_like(20, 30) and identifier_like(30, 30) and identifier_like(28, 30)
    rng = np.random.default_rng(0)
    levels = np.array([f"g{i:02d}" for i in range(20)])
    grp = np.r_[levels, rng.choice(levels, 10)]  # all 20 levels on 30 rows
    df = pd.DataFrame({"grp": grp, "x": rng.normal(size=30)})
    y = (df["grp"].isin(levels[:10]).to_numpy() * 2.0) + df["x"].to_numpy()
    est = GBFSRegressor(n_estimators=5, device="cpu").fit(df, y)
    assert est.is_categorical_.tolist() == [True, False]
    names = pd.Series([f"person {i}" for i in range(30)])
    with pytest.raises(
        ValueError,
        match=r"'name' \(30 distinct values in 30 rows\) looks like "
        r"an identifier",
    ):
        GBFSRegressor(n_estimators=5, device="cpu").fit(df.assign(name=names), y)


@pytest.mark.parametrize(
    "values, why",
    [
        (np.arange(1000, 1040), "increasing"),
        (np.arange(40)[::-1], "decreasing"),
        (np.random.default_rng(0).permutation(40) * 7_919_000_003, "spread like hashes"),
    ],
)
def test_an_integer_id_column_is_warned_about_by_name(values, why):
    """An integer id was used silently as a feature (only text ids were detected)."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {"order_id": values, "x": rng.normal(size=40), "count": rng.integers(0, 5, 40)}
    )
    with pytest.warns(
        UserWarning,
        match=rf"integer column 'order_id' \(40 distinct values in "
        rf"40 rows, {why}\) looks like an identifier",
    ) as rec:
        StagewiseRegressor(1, device="cpu").fit(df, df["x"].to_numpy())
    assert [w.filename for w in rec if "order_id" in str(w.message)] == [__file__]
    assert not any("'count'" in str(w.message) for w in rec)  # a small count is a number
    # a shuffled small-range unique column (a measurement in whole units) is not flagged
    from gpufs.data._identifiers import integer_identifier

    assert integer_identifier(rng.permutation(40) + 50) is None


def _cli(tmp_path, monkeypatch, df, *argv):
    from gpufs.cli import main

    df.to_csv(tmp_path / "t.csv", index=False)
    monkeypatch.chdir(tmp_path)
    return main(["select", "t.csv", "--device", "cpu", "--report", "r.json", *argv])


def test_cli_categorical_needs_no_other_text_column_named(tmp_path, monkeypatch, capsys):
    """--categorical grp also required naming every other text column, so the way out of a
    refusal took two tries. The text columns not named stay categorical."""
    rng = np.random.default_rng(0)
    n = 200
    df = pd.DataFrame(
        {
            "grp": rng.integers(0, 4, n),
            "city": rng.choice(["a", "b", "c"], n),
            "x": rng.normal(size=n),
        }
    )
    df["y"] = df["grp"] * 1.0 + (df["city"] == "a") * 2.0 + 0.1 * rng.normal(size=n)
    assert (
        _cli(
            tmp_path,
            monkeypatch,
            df,
            "--target",
            "y",
            "--categorical",
            "grp",
            "-k",
            "2",
            "--method",
            "stagewise",
        )
        == 0
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert {s["name"] for s in report["selected"]} == {"grp", "city"}


def test_cli_stagewise_on_a_table_with_empty_cells(tmp_path, monkeypatch, capsys):
    """Issue 36, item 6: the CLI could not run stagewise on a table with NaN."""
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    df["y"] = 2 * df["a"] - df["c"] + 0.1 * rng.normal(size=n)
    df.loc[rng.random(n) < 0.2, "a"] = np.nan
    assert _cli(tmp_path, monkeypatch, df, "--target", "y", "-k", "2", "--method", "stagewise") == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert {s["name"] for s in report["selected"]} == {"a", "c"}
