"""A reference for the quality bench's real-table cells: greedy forward selection by the
cross-validated loss of GBFS's kind of model, refit and scored as the bench scores every method.

On each split's training rows, start from no column and add, k times, the column whose set has
the lowest 3-fold log-loss (squared error for a regression) of LightGBM with GBFS's default
trees (``quality_judges.JUDGES["lgbm_d4"]``). The first k of that order are scored by the
bench's RandomForest refit (``score``) and by ``lgbm_d4`` (``d4_score``). It costs about
k * n_features * 3 fits, so it is a yardstick, not a selector. ``--from-gbfs-pool`` chooses
among the first 2 k of GBFS's exact-k pool ranking instead of every column. ``--compare``
sets its cells beside GBFS's and the best peer's.

Run::

    python bench/quality_forward.py --tag s21
    python bench/quality_forward.py --compare bench/results/quality_s21_forward.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

# Not bench_quality at import: importing the runner sets NUMBA_NUM_THREADS and sys.path.
from _quality_spec import SEED, TOL
from quality_judges import JUDGES, judge_model
from quality_summary import load_runs, summarize

TABLES = (
    "ames",
    "breast_cancer",
    "caravan",
    "credit",
    "email",
    "friedman1",
    "lending_club",
    "mlc_churn",
    "planted_clf",
    "wa_churn",
)
#: The peers' records and GBFS's (main's selections), and their lgbm_d4 rescoring.
BASE = (
    "quality_cpu2_splits5.jsonl",
    "quality_s9_rank0.5.jsonl",
    "quality_s11_cb_default.jsonl",
    "quality_s18_gbfs_before.jsonl",
)
BASE_D4 = ("quality_s20_judge_lgbm_d4.jsonl",)


def cv_loss(X, y, task, columns, folds=3) -> float:
    """Mean 3-fold held-out log-loss (squared error for ``task == "regression"``) of the
    ``lgbm_d4`` judge on ``X[:, columns]`` (X: ndarray (n, d) float64): scikit-learn's
    ``cross_val_score`` with seeded, shuffled (stratified) folds."""
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score

    regression = task == "regression"
    split = (KFold if regression else StratifiedKFold)(folds, shuffle=True, random_state=SEED)
    scoring = "neg_mean_squared_error" if regression else "neg_log_loss"
    model = judge_model(*JUDGES["lgbm_d4"], task)
    return -float(np.mean(cross_val_score(model, X[:, columns], y, scoring=scoring, cv=split)))


def forward_order(X, y, task, k_max, candidates=None) -> list:
    """The first ``k_max`` columns of greedy forward selection by ``cv_loss`` among
    ``candidates`` (default: every column), in the order they were added (ties to the first
    candidate)."""
    rest = list(range(X.shape[1])) if candidates is None else [int(j) for j in candidates]
    chosen = []
    for _ in range(min(k_max, len(rest))):
        losses = [cv_loss(X, y, task, chosen + [j]) for j in rest]
        chosen.append(rest.pop(int(np.argmin(losses))))
    return chosen


def gbfs_pool_top(Xtr, ytr, task, k) -> list:
    """The first 2 k of GBFS's exact-k pool ranking (``selection_pool_["ranked"]``), fit as
    the bench fits GBFS on a real table."""
    from gpufs import GBFSClassifier, GBFSRegressor

    cls = GBFSRegressor if task == "regression" else GBFSClassifier
    est = cls(n_features_to_select=k, random_state=SEED).fit(Xtr, ytr)
    return [int(j) for j in est.selection_pool_["ranked"][: 2 * k]]


def run(tables, ks, splits, path, from_gbfs_pool=False):
    """Append one record per (table, k, split) to ``path``. With ``from_gbfs_pool`` each k's
    forward pass chooses among the top 2 k of GBFS's pool ranking (method
    ``forward_gbfs_pool``); otherwise one pass over every column serves every k."""
    from bench_quality import Refit, integer_coded, load, split_rows
    from quality_judges import judge_scores

    method = "forward_gbfs_pool" if from_gbfs_pool else "forward_d4"
    with open(path, "a") as out:
        for table in tables:
            X, y, task = load(table)
            names = [str(c) for c in X.columns]
            Xa = integer_coded(X)[0]
            for split in range(splits):
                Xtr, Xte, ytr, yte = split_rows(Xa, y, task, split)
                refit = Refit(Xtr, ytr, Xte, yte, task)
                chosen = {}  # k -> (columns, selection seconds)
                if from_gbfs_pool:
                    for k in ks:
                        t0 = time.perf_counter()
                        cols = forward_order(Xtr, ytr, task, k, gbfs_pool_top(Xtr, ytr, task, k))
                        chosen[k] = (cols, time.perf_counter() - t0)
                else:  # one pass serves every k: its time is each k's
                    t0 = time.perf_counter()
                    order = forward_order(Xtr, ytr, task, max(ks))
                    chosen = {k: (order[:k], time.perf_counter() - t0) for k in ks}
                for k, (cols, select_s) in chosen.items():
                    d4 = judge_scores(Xtr, ytr, Xte, yte, task, sorted(cols), ["lgbm_d4"])
                    rec = {"kind": "run", "table": table, "k": k, "split": split}
                    rec.update(method=method, features=[names[j] for j in cols])
                    rec.update(score=refit(cols), d4_score=d4["lgbm_d4"], select_s=select_s)
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                print(table, split, flush=True)


def compare(forward_path, rf_records, d4_records):
    """Per (table, k): forward selection's mean score beside GBFS's and the best peer's, under
    the RandomForest refit (``rf_records``: bench_quality records) and lgbm_d4 (``d4_records``:
    quality_judges records); returns the count of cells each meets (within TOL) per judge."""
    by_cell = {}
    for (table, k, _split, _method), rec in load_runs([forward_path]).items():
        by_cell.setdefault((table, k), []).append(rec)
    judges = {
        "rf": {(r["table"], r["k"]): r for r in summarize(load_runs(rf_records))},
        "lgbm_d4": {(r["table"], r["k"]): r for r in summarize(load_runs(d4_records))},
    }
    met = {j: {"forward": 0, "gbfs": 0, "cells": 0} for j in judges}
    print("| table | k | judge | forward | GBFS | best peer |")
    print("| --- | --- | --- | --- | --- | --- |")
    for cell in sorted(by_cell):
        recs = by_cell[cell]
        for judge, rows in judges.items():
            row = rows.get(cell)
            if row is None or len(recs) != row["splits"]:
                continue
            key = "score" if judge == "rf" else "d4_score"
            fwd = float(np.mean([r[key] for r in recs]))
            peer = row["best_peer_score"]
            met[judge]["forward"] += fwd >= peer - TOL
            met[judge]["gbfs"] += row["gbfs_met"]
            met[judge]["cells"] += 1
            gbfs = row["scores"]["gbfs"]
            print(f"| {cell[0]} | {cell[1]} | {judge} | {fwd:.4f} | {gbfs:.4f} | {peer:.4f} |")
    for judge, m in met.items():
        print(f"{judge}: forward meets {m['forward']}, GBFS {m['gbfs']} of {m['cells']} cells")
    return met


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    ap.add_argument("--tag")
    ap.add_argument("--tables", nargs="+", default=list(TABLES))
    ap.add_argument("--k", nargs="+", type=int, default=[3, 5, 10])
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--out-dir", default=here)
    ap.add_argument("--from-gbfs-pool", action="store_true", help="choose among GBFS's top 2 k")
    ap.add_argument("--compare", metavar="RECORDS", help="tabulate forward records and stop")
    args = ap.parse_args(argv)
    if args.compare:
        base = [os.path.join(here, f) for f in BASE]
        return compare(args.compare, base, [os.path.join(here, f) for f in BASE_D4])
    if not args.tag:
        ap.error("--tag is required to run")
    name = "forward_pool" if args.from_gbfs_pool else "forward"
    path = os.path.join(args.out_dir, f"quality_{args.tag}_{name}.jsonl")
    run(args.tables, args.k, args.splits, path, args.from_gbfs_pool)


if __name__ == "__main__":
    main()
