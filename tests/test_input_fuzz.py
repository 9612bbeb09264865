"""Fuzzing the estimators' inputs: a random table through fit, predict, transform, save and
load gives a result or one clear error, never a crash and never a silent NaN.

Hypothesis draws a table (1 to 40 rows, 1 to 5 columns; columns of float64, float32, int,
bool, category or text, at magnitudes from 1e-300 to 1e300, with missing values, constant
columns, integer, text, repeated or escape-laden names; pandas, polars or numpy), a target
(numbers at several scales, constant, labels as integers or text, one class), sample weights
(sometimes, with zeros, at extreme scales), feature costs (sometimes, some free, from 1e-150
to 1e150) and an estimator of each family with small settings; the fitted model also
predicts new rows (shuffled, with holes and an unseen category).

Acceptable outcomes:
* ``fit`` raises ``ValueError`` or ``TypeError`` (scikit-learn's input errors) with a message,
  and the estimator is then unfitted or keeps its previous fit;
* or it fits, and then: ``predict`` gives finite numbers (a regressor) or labels of
  ``classes_``; ``predict_proba`` finite rows that sum to 1; ``transform`` the selected
  columns of each row; ``save_model`` + ``load_model`` give the same predictions.
Anything else (another exception type, a NaN, a wrong shape, a round trip that differs) fails.

``python tests/test_input_fuzz.py --census N`` runs N seeded cases per family and counts the
outcomes (and the messages of the errors) without stopping at the first failure.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _fuzz_sources import HypothesisSource, RandomSource, odd_value

SCALES = [1e-300, 1e-160, 1e-8, 1.0, 1e8, 1e160, 1e300]
NAMES = ["a", "b", "c", "d", "e", "x\x1b[31m", "é", "a b", "", "0"]


# --------------------------------------------------------------------------------------------
# Random tables and targets
# --------------------------------------------------------------------------------------------


def _column(src, kind, n, rng):
    scale = src.pick(SCALES)
    nan_share = src.pick([0.0, 0.0, 0.2, 1.0])
    if kind == "float64" or kind == "float32":
        if kind == "float32":  # within float32's range
            scale = min(max(scale, 1e-30), 1e30)
        v = rng.standard_normal(n) * scale
        if src.int(0, 5) == 0:
            v[:] = v[0]  # constant
        if nan_share:
            v[rng.random(n) < nan_share] = np.nan
        return v.astype(kind) if kind == "float32" else v
    if kind == "int":
        return rng.integers(-3, 4, n) * int(min(scale, 1e15) if scale >= 1 else 1)
    if kind == "bool":
        return rng.random(n) < 0.5
    cats = np.array(
        src.pick([["u", "v", "w"], ["p"], ["1", "2", "10"], ["é", "x\x00y"]]), dtype=object
    )
    v = cats[rng.integers(0, len(cats), n)]
    if nan_share:
        v = v.copy()
        v[rng.random(n) < nan_share] = None
    return pd.Categorical(v) if kind == "category" else v


def random_table(src, rng):
    """A pandas table (or its numpy form) of random kinds, scales, names and holes."""
    n, d = src.int(1, 40), src.int(1, 5)
    kinds = [
        src.pick(["float64", "float64", "float32", "int", "bool", "category", "text"])
        for _ in range(d)
    ]
    naming = src.pick(["str", "str", "int", "dup", "numpy", "polars"])
    if naming == "int":
        names = list(range(d))
    elif naming == "dup":
        names = [NAMES[0]] * d
    else:
        names = [src.pick(NAMES) + str(j) for j in range(d)]
    cols = {j: _column(src, k, n, rng) for j, k in enumerate(kinds)}
    df = pd.DataFrame({j: c for j, c in cols.items()})
    df.columns = names
    if naming == "numpy":
        return df.to_numpy(
            dtype=object if any(k in ("category", "text") for k in kinds) else float
        ), kinds
    if naming == "polars":
        pl = pytest.importorskip("polars")
        return pl.from_pandas(df), kinds
    return df, kinds


def random_target(src, rng, n, classify):
    if classify:
        labels = src.pick([[0, 1], [0, 1, 2], ["no", "yes"], [7]])
        y = np.array(labels, dtype=object if isinstance(labels[0], str) else None)[
            rng.integers(0, len(labels), n)
        ]
        return y
    kind = src.pick(["normal", "normal", "constant", "huge", "tiny"])
    y = rng.standard_normal(n)
    if kind == "constant":
        y[:] = 2.5
    elif kind == "huge":
        y *= 1e300
    elif kind == "tiny":
        y *= 1e-300
    return y


def _estimators():
    import gpufs

    return {
        "gbfs": lambda c: (gpufs.GBFSClassifier if c else gpufs.GBFSRegressor)(
            n_estimators=3, max_depth=2, max_bins=16, device="cpu"
        ),
        "gbfs_k": lambda c: (gpufs.GBFSClassifier if c else gpufs.GBFSRegressor)(
            n_estimators=3, max_depth=2, n_features_to_select=1, device="cpu"
        ),
        # stability_rounds with a k at, below or above the columns (the pool of k or fewer
        # features skipped the refits and left selection_frequency_ None: issue 36, item 8)
        "gbfs_stability": lambda c, k=1: (gpufs.GBFSClassifier if c else gpufs.GBFSRegressor)(
            n_estimators=3,
            max_depth=2,
            n_features_to_select=k,
            stability_rounds=2,
            random_state=0,
            device="cpu",
        ),
        # a held-out split that sparse weights can leave without weight (a ZeroDivisionError
        # in November 2026), beside exact k's folds
        "gbfs_validation": lambda c: (gpufs.GBFSClassifier if c else gpufs.GBFSRegressor)(
            n_estimators=3,
            max_depth=2,
            n_features_to_select=1,
            validation_fraction=0.3,
            n_iter_no_change=2,
            random_state=0,
            device="cpu",
        ),
        "stagewise": lambda c: (gpufs.StagewiseClassifier if c else gpufs.StagewiseRegressor)(
            n_features_to_select=2, device="cpu"
        ),
        "controlburn": lambda c: (gpufs.ControlBurnClassifier if c else gpufs.ControlBurnRegressor)(
            max_depth=2, max_trees_per_round=3, path_k_max=2, random_state=0, device="cpu"
        ),
        "multitask": lambda c: (
            gpufs.MultiTaskGBFSClassifier if c else gpufs.MultiTaskGBFSRegressor
        )(n_estimators=2, max_depth=2, device="cpu"),
    }


# --------------------------------------------------------------------------------------------
# One case: fit, use, save, load; the outcome
# --------------------------------------------------------------------------------------------


def _perturbed(X, rng):
    """New rows of X's schema: values shuffled within columns, some set missing, a category
    not seen in fit."""
    if isinstance(X, np.ndarray):
        out = X[rng.permutation(len(X))].copy()
        if out.dtype.kind == "f" and out.size:
            out[rng.random(out.shape) < 0.1] = np.nan
        return out
    if not isinstance(X, pd.DataFrame):  # polars: perturbed as pandas, given back as polars
        return type(X)(_perturbed(X.to_pandas(), rng))
    out = X.iloc[rng.permutation(len(X))].reset_index(drop=True).copy()
    for j in range(out.shape[1]):
        col = out.iloc[:, j]
        if isinstance(col.dtype, pd.CategoricalDtype) and len(out):
            out.isetitem(
                j, col.cat.add_categories(["unseen"]).where(rng.random(len(out)) < 0.8, "unseen")
            )
        elif col.dtype.kind == "f" and len(out):
            out.isetitem(j, col.where(rng.random(len(out)) < 0.9))
    return out


def _check_new_rows(est, X, task, rng):
    """Predictions for new rows: sound numbers, or a ValueError."""
    kw = {} if task is None else {"task": task}
    X2 = _perturbed(X, rng)
    try:
        pred = np.asarray(est.predict(X2, **kw))
    except ValueError:
        return None
    if hasattr(est, "classes_"):
        return None if np.isin(pred, est.classes_).all() else "new rows: a label not in classes_"
    return None if np.isfinite(pred.astype(float)).all() else "new rows: predict NaN or inf"


def _check_fitted(est, X, task, tmpdir):
    """None when every use of the fitted model is sound, else what is wrong."""
    kw = {} if task is None else {"task": task}
    n = len(X)
    pred = np.asarray(est.predict(X, **kw))
    if pred.shape != (n,):
        return f"predict shape {pred.shape}"
    if hasattr(est, "classes_"):
        if not np.isin(pred, est.classes_).all():
            return "predict gave a label not in classes_"
        proba = np.asarray(est.predict_proba(X, **kw))
        if (
            proba.shape != (n, len(est.classes_))
            or not np.isfinite(proba).all()
            or not np.allclose(proba.sum(axis=1), 1.0)
        ):
            return f"predict_proba {proba.shape}, finite={np.isfinite(proba).all()}"
    elif not np.isfinite(pred.astype(float)).all():
        return "predict returned NaN or infinity"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty selection warns
        out = est.transform(X)
    if np.shape(out) != (n, int(est.get_support().sum())):
        return f"transform shape {np.shape(out)}"
    path = os.path.join(tmpdir, "m.json")
    est.save_model(path)
    back = type(est).load_model(path)
    again = np.asarray(back.predict(X, **kw))
    if not (again.shape == pred.shape and (again == pred).all()):
        return "the loaded model predicts otherwise"
    return None


def _check_frequency(est):
    """With ``stability_rounds``: ``selection_frequency_`` is there, one share in [0, 1] per
    feature (never None), and ``plot_selection_frequency``'s data is read without error."""
    if not getattr(est, "stability_rounds", 0):
        return None
    freq = est.selection_frequency_
    if freq is None:
        return "stability_rounds > 0 but selection_frequency_ is None"
    freq = np.asarray(freq)
    if freq.shape != (est.n_features_in_,) or not ((freq >= 0) & (freq <= 1)).all():
        return f"selection_frequency_ {freq!r}"
    return None


def run_case(src, seed, family, tmpdir):
    """(outcome, detail): "error" (a clear ValueError / TypeError), "ok", or a finding."""
    rng = np.random.default_rng(seed)
    X, kinds = random_table(src, rng)
    n = len(X)
    classify = bool(src.int(0, 1))
    y = random_target(src, rng, n, classify)
    task = np.arange(n) % 2 if family == "multitask" else None
    est = (
        _estimators()[family](classify, src.int(1, 6))
        if family == "gbfs_stability"
        else _estimators()[family](classify)
    )
    kw = {} if task is None else {"task": task}
    if "feature_costs" in est.get_params() and src.int(0, 3) == 0:
        # costs: some free, at scales from tiny to huge (beyond [1e-100, 1e100]: refused)
        d = X.shape[1]
        costs = rng.random(d) * src.pick([1.0, 1e-150, 1e-90, 1e90, 1e150])
        costs[rng.random(d) < 0.3] = 0.0
        est.set_params(feature_costs=costs)
    if src.int(0, 3) == 0:  # weights: some zero, or all but one row
        w = rng.random(n) * src.pick([1.0, 1e-200, 1e200])
        w[rng.random(n) < src.pick([0.3, 0.99])] = 0.0
        kw["sample_weight"] = w
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(X, y, **kw)
        except (ValueError, TypeError) as exc:
            text = str(exc).strip()
            if not text:
                return "empty_message", f"{type(exc).__name__} without a message"
            return "error", f"{type(exc).__name__}: {text.splitlines()[0][:160]}"
        except Exception as exc:  # noqa: BLE001 - the finding
            return "crash", f"fit: {type(exc).__name__}: {exc}"[:400]
        try:
            bad = (
                _check_fitted(est, X, task, tmpdir)
                or _check_new_rows(est, X, task, rng)
                or _check_frequency(est)
            )
        except Exception as exc:  # noqa: BLE001
            return "crash", f"after fit: {type(exc).__name__}: {exc}"[:400]
    if bad is not None:
        return "wrong", f"{bad} (kinds {kinds})"
    return "ok", ""


ACCEPTABLE = ("ok", "error")
FAMILIES = [
    "gbfs",
    "gbfs_k",
    "gbfs_stability",
    "gbfs_validation",
    "stagewise",
    "controlburn",
    "multitask",
]


@pytest.mark.parametrize("family", FAMILIES)
@settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_random_tables_give_a_result_or_one_clear_error(family, data, tmp_path_factory):
    tmpdir = str(tmp_path_factory.mktemp("input_fuzz"))
    seed = data.draw(st.integers(0, 2**32 - 1))
    outcome, detail = run_case(HypothesisSource(data), seed, family, tmpdir)
    assert outcome in ACCEPTABLE, f"{family}: {outcome}: {detail}"


def test_stability_rounds_run_when_the_pool_holds_k_or_fewer():
    """Issue 36, item 8: the pool at the searched price held k = 2 features, so the refits
    were skipped and selection_frequency_ was None although stability_rounds=5 was set."""
    import gpufs

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = 2 * X[:, 0] + X[:, 1] + 0.1 * rng.normal(size=400)
    est = gpufs.GBFSRegressor(
        n_estimators=10,
        max_depth=3,
        n_features_to_select=2,
        stability_rounds=5,
        device="cpu",
        random_state=0,
    ).fit(X, y)
    assert len(est.selection_pool_["features"]) <= 2
    freq = est.selection_frequency_
    assert freq is not None and freq.shape == (6,)
    # the refits on half the rows choose the two real signals every time
    assert freq[0] == 1.0 and freq[1] == 1.0 and freq[2:].sum() == 0.0
    assert est.selection_pool_["frequency"] == [1.0, 1.0]
    assert est.fit_times_["stability"] >= 0.0


def test_plot_selection_frequency_says_what_is_missing():
    """With stability_rounds set but no number of features, the message no longer asks
    for stability_rounds > 0."""
    import gpufs
    from gpufs.plotting import plot_selection_frequency

    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    est = gpufs.GBFSRegressor(n_estimators=3, stability_rounds=2, device="cpu").fit(X, X[:, 0])
    with pytest.raises(
        ValueError,
        match=r"stability_rounds=2 refits only with a number of "
        r"features to select, and n_features_to_select=None",
    ):
        plot_selection_frequency(est)


# --------------------------------------------------------------------------------------------
# gpufs.lasso's records: each field takes an odd value or refuses it by name, at once
# --------------------------------------------------------------------------------------------

_RECORD_FIELDS = {
    "Datafit": ["fit_intercept", "random_state", "sketch_size"],
    "SolverOptions": ["tol", "max_iter"],
    "KSearch": ["lambda_min_ratio", "bisect_rtol", "max_bisect"],
    "Reweighting": ["steps", "eps"],
}


def run_record_case(src):
    """("ok" | "error" | a finding, detail) for one record made with one odd field."""
    import gpufs.lasso as gl
    from _lasso_data import _forest

    record = src.pick(sorted(_RECORD_FIELDS))
    field = src.pick(_RECORD_FIELDS[record])
    value = odd_value(src)
    kw = {field: value}
    if record == "Datafit" and field != "random_state" and src.int(0, 1):
        kw["sketch"] = "gaussian"
    try:
        made = getattr(gl, record)(**kw)
    except ValueError as exc:
        # the field is named (the records' own spelling of Reweighting's fields)
        named = {"steps": "reweight_steps", "eps": "reweight_eps"}.get(field, field)
        if named not in str(exc):
            return "unnamed", f"{record}({field}={value!r}): {exc}"
        return "error", str(exc)
    except Exception as exc:  # noqa: BLE001 - the finding
        return "crash", f"{record}({field}={value!r}): {type(exc).__name__}: {exc}"
    A, y, masks = _forest(120, 10, n_features=5)
    costs = np.ones(A.shape[1])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if record in ("Datafit", "SolverOptions"):
                key = "datafit" if record == "Datafit" else "solver"
                res = gl.solve_lasso(A, y, costs, 1e-2, **{key: made})
                weights = np.asarray(res.weights)
            else:
                key = "search" if record == "KSearch" else "reweight"
                res = gl.select_k(A, y, masks, 2, strict=False, **{key: made})
                weights = np.asarray(res.weights)
    except (ValueError, TypeError) as exc:
        # a value the record took must not fail later (the records check at construction)
        if record == "Datafit" and field == "sketch_size":
            return "error", str(exc)  # checked against the rows, at the solve
        return "late", f"{record}({field}={value!r}) made, then: {type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001
        return "crash", f"{record}({field}={value!r}) then {type(exc).__name__}: {exc}"
    if not np.isfinite(weights).all():
        return "wrong", f"{record}({field}={value!r}): weights not finite"
    return "ok", ""


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_lasso_records_take_a_value_or_refuse_it_by_name(data):
    outcome, detail = run_record_case(HypothesisSource(data))
    assert outcome in ACCEPTABLE, f"{outcome}: {detail}"


def census(n, seed):
    counts = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        for family in FAMILIES:
            src = RandomSource(f"{seed}-{family}")
            c = collections.Counter()
            messages = collections.Counter()
            for _i in range(n):
                outcome, detail = run_case(src, src.int(0, 2**32 - 1), family, tmpdir)
                c[outcome] += 1
                if outcome != "ok":
                    messages[(outcome, detail[:200])] += 1
            counts[family] = (c, messages)
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--census", type=int, default=200, help="cases per family")
    ap.add_argument("--seed", default="0")
    ap.add_argument("--show", type=int, default=40)
    args = ap.parse_args(argv)
    for family, (c, messages) in census(args.census, args.seed).items():
        print(f"{family}: {dict(sorted(c.items()))}")
        for (outcome, detail), k in messages.most_common(args.show):
            if outcome != "error" or args.show > 20:
                print(f"    {k:4d} {outcome}: {detail}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
