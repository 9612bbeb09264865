"""Forward stagewise selection: gpufs GPU vs gpufs CPU, and gpufs vs scikit-learn's SFS.

Issue 4's benchmark. Two comparisons, each in this one process on the same data:

1. "main": ``--rows`` x ``--features`` (default 1,000,000 x 1,000), ``--rounds`` rounds (50),
   gpufs on the GPU (when cupy sees one; X already resident on the device) and on the CPU.
2. "sfs": a subsample ``--sfs-rows`` x ``--sfs-features`` (default 10,000 x 100) on which
   scikit-learn's ``SequentialFeatureSelector(LinearRegression(), direction="forward")`` can
   finish selecting ``--sfs-select`` features (default cv=5), against gpufs running the same
   number of rounds on the same subsample.

Synthetic planted data, fixed seed: X ~ N(0, 1) with random offsets and scales, y depends on the
first 10 features with decreasing standardized effects (so the expected selections are known).
Every timed run follows a warm-up run; the device is synchronized before a timer stops. One JSON
line per run, with the machine, goes to ``bench/results/stagewise_<machine>.jsonl``.

    python bench/bench_stagewise.py                                  # full size (GPU machine)
    python bench/bench_stagewise.py --rows 200000 --features 200 --no-gpu   # small CPU box
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (bench/_machine.py: the one machine description)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

N_INFORMATIVE = 10


def machine_info() -> dict:
    return _machine.machine_info()


def machine_tag(info: dict) -> str:
    if info["gpu"]:
        tag = info["gpu"]
    else:
        tag = f"cpu{info['cpus_usable']}"
    return re.sub(r"[^A-Za-z0-9]+", "-", tag).strip("-").lower()


def make_data(n, d, seed, dtype):
    """Planted regression data, generated in row blocks to keep the peak memory at X itself."""
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.5, 5.0, d)
    offset = rng.uniform(-10.0, 10.0, d)
    k = min(N_INFORMATIVE, d)
    beta = np.zeros(d)
    beta[:k] = np.linspace(3.0, 0.3, k)  # standardized effects, decreasing
    X = np.empty((n, d), dtype=dtype)
    y = np.empty(n)
    block = max(1, (1 << 24) // d)
    for i in range(0, n, block):
        Z = rng.standard_normal((min(block, n - i), d))
        y[i : i + len(Z)] = Z @ beta + rng.standard_normal(len(Z))
        X[i : i + len(Z)] = Z * scale + offset
    return X, y


def sync(device):
    if device == "gpu":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def time_gpufs(X, y, rounds, device, dtype, repeats, task):
    from gpufs.selectors.stagewise import StagewiseClassifier, StagewiseRegressor

    cls = StagewiseRegressor if task == "regression" else StagewiseClassifier
    if task == "classification":
        xp = np if device == "cpu" else __import__("cupy")
        y = (y > xp.median(y)).astype(np.int64)
    cls(n_features_to_select=min(2, rounds), device=device, dtype=dtype).fit(X, y)  # warm-up
    sync(device)
    out = []
    for _r in range(repeats):
        t0 = time.perf_counter()
        m = cls(n_features_to_select=rounds, device=device, dtype=dtype).fit(X, y)
        sync(device)
        out.append((time.perf_counter() - t0, m.selected_features_.tolist()))
    return out


def time_sfs(X, y, k, repeats):
    from sklearn.feature_selection import SequentialFeatureSelector
    from sklearn.linear_model import LinearRegression

    SequentialFeatureSelector(LinearRegression(), n_features_to_select=1, direction="forward").fit(
        X[:2000, :10], y[:2000]
    )  # warm-up
    out = []
    for _r in range(repeats):
        t0 = time.perf_counter()
        sfs = SequentialFeatureSelector(
            LinearRegression(), n_features_to_select=k, direction="forward"
        ).fit(X, y)
        out.append((time.perf_counter() - t0, np.flatnonzero(sfs.get_support()).tolist()))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=1_000)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--sfs-rows", type=int, default=10_000)
    p.add_argument("--sfs-features", type=int, default=100)
    p.add_argument("--sfs-select", type=int, default=10)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--task", default="regression", choices=["regression", "classification"])
    p.add_argument("--no-gpu", action="store_true", help="skip the GPU runs")
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU run of the main size")
    p.add_argument("--no-sfs", action="store_true", help="skip the scikit-learn comparison")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="cap BLAS/OpenMP threads for every run (threadpoolctl); default: as is",
    )
    p.add_argument(
        "--out", default=None, help="JSONL path (default: bench/results/stagewise_<machine>.jsonl)"
    )
    args = p.parse_args(argv)

    from gpufs._device import gpu_available

    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)
    info = machine_info()
    info["blas_threads_cap"] = args.blas_threads
    devices = (["gpu"] if gpu_available() and not args.no_gpu else []) + (
        [] if args.no_cpu else ["cpu"]
    )
    out_path = (
        Path(args.out)
        if args.out
        else ROOT / "bench" / "results" / f"stagewise_{machine_tag(info)}.jsonl"
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    records = []

    def emit(rec):
        rec = {"bench": "stagewise", "time": stamp, **rec, "machine": info}
        records.append(rec)
        print(json.dumps({k: v for k, v in rec.items() if k != "machine"}), flush=True)
        with open(out_path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")

    expected = list(range(min(N_INFORMATIVE, args.features)))
    # 1. main size: GPU vs CPU
    if devices:
        t0 = time.perf_counter()
        X, y = make_data(args.rows, args.features, args.seed, np.dtype(args.dtype))
        print(f"data {X.shape} {X.dtype} in {time.perf_counter() - t0:.1f}s", flush=True)
        main_times = {}
        for device in devices:
            if device == "gpu":
                import cupy

                Xd, yd = cupy.asarray(X), cupy.asarray(y)
            else:
                Xd, yd = X, y
            for rep, (sec, sel) in enumerate(
                time_gpufs(Xd, yd, args.rounds, device, args.dtype, args.repeats, args.task)
            ):
                main_times.setdefault(device, []).append(sec)
                emit(
                    {
                        "comparison": "main",
                        "impl": f"gpufs-{device}",
                        "task": args.task,
                        "n_rows": args.rows,
                        "n_features": args.features,
                        "rounds": args.rounds,
                        "dtype": args.dtype,
                        "repeat": rep,
                        "seconds": sec,
                        "input_on_device": True,
                        "selected": sel,
                        "planted_first": sel[: len(expected)] == expected[: len(sel)],
                    }
                )
            del Xd, yd
        if "gpu" in main_times and "cpu" in main_times:
            ratio = min(main_times["cpu"]) / min(main_times["gpu"])
            emit(
                {
                    "comparison": "main",
                    "impl": "ratio",
                    "what": "cpu_seconds / gpu_seconds",
                    "n_rows": args.rows,
                    "n_features": args.features,
                    "rounds": args.rounds,
                    "value": ratio,
                }
            )
        del X, y

    # 2. scikit-learn SequentialFeatureSelector on a subsample it can finish
    if not args.no_sfs:
        Xs, ys = make_data(args.sfs_rows, args.sfs_features, args.seed + 1, np.float64)
        t_sfs = time_sfs(Xs, ys, args.sfs_select, args.repeats)
        for rep, (sec, sel) in enumerate(t_sfs):
            emit(
                {
                    "comparison": "sfs",
                    "impl": "sklearn-SFS-forward-LinearRegression-cv5",
                    "task": "regression",
                    "n_rows": args.sfs_rows,
                    "n_features": args.sfs_features,
                    "rounds": args.sfs_select,
                    "repeat": rep,
                    "seconds": sec,
                    "selected": sel,
                }
            )
        best_sfs = min(s for s, _ in t_sfs)
        for device in (["gpu"] if "gpu" in devices else []) + ["cpu"]:
            if device == "gpu":
                import cupy

                Xd, yd = cupy.asarray(Xs), cupy.asarray(ys)
            else:
                Xd, yd = Xs, ys
            runs = time_gpufs(
                Xd, yd, args.sfs_select, device, "float64", args.repeats, "regression"
            )
            for rep, (sec, sel) in enumerate(runs):
                emit(
                    {
                        "comparison": "sfs",
                        "impl": f"gpufs-{device}",
                        "task": "regression",
                        "n_rows": args.sfs_rows,
                        "n_features": args.sfs_features,
                        "rounds": args.sfs_select,
                        "repeat": rep,
                        "seconds": sec,
                        "selected": sel,
                    }
                )
            emit(
                {
                    "comparison": "sfs",
                    "impl": "ratio",
                    "what": f"sfs_seconds / gpufs_{device}_seconds",
                    "n_rows": args.sfs_rows,
                    "n_features": args.sfs_features,
                    "rounds": args.sfs_select,
                    "value": best_sfs / min(s for s, _ in runs),
                }
            )
    print(f"wrote {len(records)} records to {out_path}")


if __name__ == "__main__":
    main()
