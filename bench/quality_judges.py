"""Re-score stored ``bench_quality.py`` selections with other refits (judges) than its
RandomForest, to see whether a cell's verdict belongs to the selection or to the refit.

For every real-table run record (gpufs families and peers) the same columns are refit on the
same training rows of the same split and scored on its held-out rows by each judge:
  * ``lgbm_d4``: LightGBM with GBFS's default trees (100 rounds, learning rate 0.1, depth 4,
    16 leaves; LightGBM's leaf minimum of 20 rows);
  * ``lgbm_default``: LightGBM's defaults (100 rounds, 31 leaves);
  * ``rf_leaf5``: the bench's RandomForest (200 trees, seed 0) with leaves of 5 rows or more;
  * ``rf_all``: the bench's RandomForest drawing every column at each split (bagged trees):
    for classification, where its default draws sqrt(k) columns -- one at k = 3.
One file per judge is written, ``quality_<tag>_<judge>.jsonl``, of run records shaped like
``bench_quality.py``'s (``score`` the judge's), so ``quality_summary.py`` reads it alone.

Run::

    python bench/quality_judges.py bench/results/quality_cpu2_splits5.jsonl \\
        bench/results/quality_s9_rank0.5.jsonl bench/results/quality_s11_cb_default.jsonl \\
        bench/results/quality_s18_gbfs_before.jsonl --tag s20_judge
"""

from __future__ import annotations

import argparse
import json
import os

# Not bench_quality at import: importing the runner sets NUMBA_NUM_THREADS and sys.path.
from _quality_spec import GPUFS, PEERS, PLANTED_FAMILIES, SEED
from quality_summary import load_runs

#: judge -> (model family, parameters).
JUDGES = {
    "lgbm_d4": (
        "lgbm",
        {"n_estimators": 100, "learning_rate": 0.1, "max_depth": 4, "num_leaves": 16},
    ),
    "lgbm_default": ("lgbm", {"n_estimators": 100}),
    "rf_leaf5": ("rf", {"min_samples_leaf": 5}),
    "rf_all": ("rf", {"max_features": None}),
}


def judge_model(family, params, task):
    """An unfitted judge: LightGBM or the bench's RandomForest (200 trees) with ``params``."""
    if family == "lgbm":
        import lightgbm as lgb

        cls = lgb.LGBMRegressor if task == "regression" else lgb.LGBMClassifier
        return cls(random_state=SEED, n_jobs=1, verbose=-1, **params)
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestRegressor if task == "regression" else RandomForestClassifier
    return cls(n_estimators=200, random_state=SEED, n_jobs=1, **params)


def _table(name):
    """(X ndarray float64, y, task, column names) as ``bench_quality.run_table`` builds them."""
    from bench_quality import integer_coded, load

    X, y, task = load(name)
    return integer_coded(X)[0], y, task, [str(c) for c in X.columns]


def judge_scores(Xtr, ytr, Xte, yte, task, columns, judges=None):
    """{judge: held-out score (R^2 or ROC-AUC)} of each judge (default all) refit on
    ``columns``."""
    from sklearn.metrics import r2_score, roc_auc_score

    judges = list(JUDGES) if judges is None else list(judges)
    if not columns:  # nothing selected: nothing to refit
        return {judge: float("nan") for judge in judges}
    out = {}
    for judge in judges:
        model = judge_model(*JUDGES[judge], task)
        model.fit(Xtr[:, columns], ytr)
        if task == "regression":
            out[judge] = float(r2_score(yte, model.predict(Xte[:, columns])))
        else:
            out[judge] = float(roc_auc_score(yte, model.predict_proba(Xte[:, columns])[:, 1]))
    return out


def main(argv=None):
    from bench_quality import split_rows

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="+", help="bench_quality.py records (later files win)")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--judges", nargs="+", choices=list(JUDGES), default=list(JUDGES))
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args(argv)
    runs = {
        key: rec
        for key, rec in load_runs(args.records).items()
        if key[3] in GPUFS + PEERS and key[0] not in PLANTED_FAMILIES
    }
    files = {
        j: open(os.path.join(args.out_dir, f"quality_{args.tag}_{j}.jsonl"), "w")
        for j in args.judges
    }
    try:
        for table in sorted({key[0] for key in runs}):
            Xa, y, task, cols = _table(table)
            for split in sorted({key[2] for key in runs if key[0] == table}):
                Xtr, Xte, ytr, yte = split_rows(Xa, y, task, split)
                cache = {}  # by the set of columns: methods often agree
                for (t, k, s, method), rec in sorted(runs.items()):
                    if (t, s) != (table, split):
                        continue
                    columns = sorted(
                        cols.index(f) if isinstance(f, str) else int(f) for f in rec["features"]
                    )
                    key = tuple(columns)
                    if key not in cache:
                        cache[key] = judge_scores(Xtr, ytr, Xte, yte, task, columns, args.judges)
                    for judge, f in files.items():
                        run = {"kind": "run", "table": t, "k": k, "split": s, "method": method}
                        run.update(features=columns, score=cache[key][judge], judge=judge)
                        run["rf_score"] = rec["score"]
                        f.write(json.dumps(run) + "\n")
            print(table, flush=True)
    finally:
        for f in files.values():
            f.close()


if __name__ == "__main__":
    main()
