"""Benchmark: what ControlBurn's reweighted lasso costs, against the paper's plain lasso.

``reweight_steps=3`` (the default) against ``reweight_steps=0`` (the lasso before the
reweighting existed) in this one process, on the same forest and the same k, alternating which
runs first. Tables: the quality bench's real tables (70 % training split, seed 0; one
estimator per table and setting with ``warm_start=True``, so every k after the first is the
lasso search and the refit, as a user trying several k sees it) and a 100,000 x 11 binary
``make_classification`` table (5 informative, 2 redundant columns; cold fits), the size of
the issue that reported 81 s against 23 s. Records per (table, k, setting): the lasso phase
(``fit_times_["select"]``), the whole fit, the lasso solves and their iterations (counted by
wrapping ``TreeLasso.solve``; iterations do not depend on how busy the machine is), and the
selection. A ``summary`` line per table gives the ratios reweighted / plain.

    python bench/bench_cb_reweight.py                 # every table
    python bench/bench_cb_reweight.py --tables email credit --no-large
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import _machine  # noqa: E402

KS = (3, 5, 10)


class _SolveCounter:
    """Counts ``TreeLasso.solve`` calls and their FISTA iterations while installed."""

    def __init__(self):
        from gpufs.lasso import _solver

        self.solver, self.orig = _solver, _solver.TreeLasso.solve
        self.n = self.iters = 0

        def solve(lasso, lam, **kw):
            res = self.orig(lasso, lam, **kw)
            self.n += 1
            self.iters += int(res.n_iter)
            return res

        _solver.TreeLasso.solve = solve

    def take(self):
        out = (self.n, self.iters)
        self.n = self.iters = 0
        return out


def _fit(est, X, y, counter):
    counter.take()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    total = time.perf_counter() - t0
    n, iters = counter.take()
    return {
        "fit_s": total,
        "select_s": est.fit_times_["select"],
        "solves": n,
        "iterations": iters,
        "features": sorted(int(f) for f in est.selected_features_),
        "exact": bool(est.selection_exact_),
        "forest_reused": bool(est.forest_reused_),
    }


def run_table(name, X, y, task, ks, warm, machine, out, counter):
    from gpufs import ControlBurnClassifier, ControlBurnRegressor

    cls = ControlBurnRegressor if task == "regression" else ControlBurnClassifier
    ests = {rw: cls(warm_start=warm, random_state=0, reweight_steps=rw) for rw in (0, 3)}
    recs = []
    for i, k in enumerate(ks):
        for rw in (0, 3) if i % 2 == 0 else (3, 0):  # alternate who goes first
            est = ests[rw].set_params(n_features_to_select=k)
            rec = {
                "kind": "run",
                "table": name,
                "rows": int(X.shape[0]),
                "columns": int(X.shape[1]),
                "k": k,
                "reweight_steps": rw,
                **_fit(est, X, y, counter),
                "loadavg_1m": os.getloadavg()[0],
                "machine": machine,
            }
            recs.append(rec)
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(
                f"{name:14s} k={k:2d} rw={rw} select {rec['select_s']:7.2f}s fit "
                f"{rec['fit_s']:7.2f}s solves {rec['solves']:4d} iterations "
                f"{rec['iterations']:7d}",
                flush=True,
            )
    by = {rw: [r for r in recs if r["reweight_steps"] == rw] for rw in (0, 3)}
    # Cold first fits include the forest; the lasso phase alone is compared per k.
    summ = {
        "kind": "summary",
        "table": name,
        "select_ratio_median": float(
            np.median([a["select_s"] / max(b["select_s"], 1e-9) for a, b in zip(by[3], by[0])])
        ),
        "select_s": {rw: float(sum(r["select_s"] for r in by[rw])) for rw in (0, 3)},
        "fit_s": {rw: float(sum(r["fit_s"] for r in by[rw])) for rw in (0, 3)},
        "iterations": {rw: int(sum(r["iterations"] for r in by[rw])) for rw in (0, 3)},
        "same_selection": sum(a["features"] == b["features"] for a, b in zip(by[3], by[0])),
        "machine": machine,
    }
    out.write(json.dumps(summ) + "\n")
    out.flush()
    print(
        f"{name:14s} reweighted / plain: lasso {summ['select_s'][3]:.2f} / "
        f"{summ['select_s'][0]:.2f} s, fits {summ['fit_s'][3]:.2f} / {summ['fit_s'][0]:.2f} s, "
        f"iterations {summ['iterations'][3]} / {summ['iterations'][0]}",
        flush=True,
    )


def main(argv=None):
    from sklearn.model_selection import train_test_split

    from bench_quality import DATASETS, load  # noqa: E402  (sets nothing this bench needs)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--no-large", action="store_true", help="skip the 100,000-row table")
    ap.add_argument("--tag", default="cpu2")
    args = ap.parse_args(argv)
    path = os.path.join(HERE, "results", f"cb_reweight_{args.tag}.jsonl")
    machine = _machine.machine_info()
    counter = _SolveCounter()
    from gpufs import ControlBurnClassifier

    rng = np.random.default_rng(0)  # warm-up: numba compiles once
    Xw = rng.normal(size=(300, 5))
    ControlBurnClassifier(n_features_to_select=2, max_depth=2).fit(Xw, (Xw[:, 0] > 0) * 1)
    with open(path, "a") as out:
        for name in args.tables:
            X, y, task = load(name)
            Xa = X.to_numpy(dtype=np.float64)
            Xtr, _, ytr, _ = train_test_split(
                Xa,
                y,
                test_size=0.3,
                random_state=0,
                stratify=y if task == "classification" else None,
            )
            run_table(name, Xtr, ytr, task, KS, True, machine, out, counter)
        if not args.no_large:
            from sklearn.datasets import make_classification

            X, y = make_classification(
                n_samples=100_000, n_features=11, n_informative=5, n_redundant=2, random_state=0
            )
            run_table("classif_100k", X, y, "classification", (5,), False, machine, out, counter)
    print("wrote", path)


if __name__ == "__main__":
    main()
