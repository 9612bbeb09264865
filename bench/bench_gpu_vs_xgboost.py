"""gpufs on the GPU vs XGBoost ``device="cuda", tree_method="hist"``: time per tree.

Same trees on both sides: depth 6 (depth-wise), 256 histogram bins (gpufs: 255 value bins + the
missing bin; XGBoost: max_bin=256), 100 trees, learning rate 0.1, lambda 1, min_child_weight 1,
squared error, mu = 0 (no feature penalty: plain boosting, the part XGBoost can also do).
Default sizes: 1,000,000 x 100 and 1,000,000 x 500 float32 rows, generated on the host with a
fixed seed and copied to the GPU before any timer starts.

Per size and tool, one JSON line:
  bin_s          binning alone (gpufs: cut points + bin transform; XGBoost: QuantileDMatrix)
  fit_s          boosting alone, after a warm-up fit (numba compiles kernels on first use)
  per_tree_s     fit_s / trees
  phases_ms_per_tree   (gpufs) gradients / start_tree / level / update_raw / host_sync, from a
                 separate profiled fit of ``--profile-trees`` trees in which every phase is
                 synchronized (so they add up to a little more than the plain fit); "other" is
                 the rest (gradients, fixed-point scaling, the grower's Python)
  memory         (gpufs) device bytes: the most in use during the profiled fit, and the pool
  kernels_ms_per_tree  (gpufs, ``--kernel-times``) device time per kernel from CUDA events
                 around every launch of another fit of ``--profile-trees`` trees (events do not
                 synchronize the host, so the launches queue as in the plain fit)
  histogram_bound      (gpufs, ``--kernel-times``) the bytes the histogram kernel must read
                 per tree (rows x (features + 20): bins, fixed-point gradients, row index),
                 the GPU's memory bandwidth (memory clock x bus width x 2) and the time
                 those bytes take at it; ``ratio`` = the kernel's measured time / that bound
  cuda_graphs    (gpufs) whether the fit replayed each level as a CUDA graph
                 (``GPUBackend(cuda_graphs=True)``; tool ``gpufs-gpu-graphs``), with the graphs
                 captured and replayed; ``--cuda-graphs both`` times both paths in one run
  hist_optin_shared (gpufs) histogram tiles sized to the opt-in shared memory
                 (``--hist-optin-shared``)
  hist_kernel    (gpufs) the histogram kernel, "bounded" or "split_word" (``--hist-kernel``)
  gpu            GPU model (nvidia-smi), with the rest of the machine
The device is synchronized (``cupy.cuda.runtime.deviceSynchronize()``) before every timer stops.
A final line holds the ratios gpufs / XGBoost per size.

On a GPU machine:
    python bench/bench_gpu_vs_xgboost.py                       # both sizes, appends to
                                                               # bench/results/gpu_vs_xgboost.jsonl
    python bench/bench_gpu_vs_xgboost.py --rows 100000 --features 100 --trees 20
    python bench/bench_gpu_vs_xgboost.py --sizes 1000000x100,10000000x100 --kernel-times
    python bench/bench_gpu_vs_xgboost.py --cuda-graphs both    # plain launches and graphs
Smoke runs without a GPU (print only; no file unless --out is given):
    python bench/bench_gpu_vs_xgboost.py --device cpu --rows 2000 --features 10 --trees 3
    NUMBA_ENABLE_CUDASIM=1 python bench/bench_gpu_vs_xgboost.py --rows 64 --features 5 \
        --trees 1 --depth 2 --profile-trees 1 --no-xgboost --out /dev/null   # GPU code path
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # bench/_machine.py; gpufs from this checkout
from _machine import machine_info  # noqa: E402
from _records import append_records  # noqa: E402


def make_data(n, d, seed):
    """float32 X (n, d) and a float64 regression target built from a few of the columns."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d).astype(np.float32)
    y = (
        X[:, 0] * X[:, 1]
        + np.sin(2 * X[:, 2])
        + 0.5 * X[:, 3]
        - 0.5 * X[:, 4] ** 2
        + 0.5 * rng.randn(n)
    ).astype(np.float64)
    return X, y


class Device:
    """Array namespace, synchronization and a timer for the chosen device."""

    def __init__(self, name):
        self.name = name
        # Under NUMBA_ENABLE_CUDASIM=1 the GPU code path runs on numpy (a smoke test only).
        self.cupy = name == "gpu" and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1"
        if self.cupy:
            import cupy

            self.xp = cupy
        else:
            self.xp = np

    def sync(self):
        if self.cupy:
            self.xp.cuda.runtime.deviceSynchronize()

    def timed(self, fn):
        self.sync()
        t0 = time.perf_counter()
        out = fn()
        self.sync()
        return out, time.perf_counter() - t0


def run_gpufs(dev, X, y, args, cuda_graphs=False):
    from gpufs.backends import get_backend
    from gpufs.engine.binning import BinMapper
    from gpufs.engine.boosting import BoostingParams, DeviceRows, fit_boosting
    from gpufs.engine.grower import TreeParams
    from gpufs.engine.objectives import SquaredError
    from gpufs.engine.penalties import PenaltyState

    if dev.name == "gpu" and (cuda_graphs or args.hist_optin_shared or args.hist_kernel):
        from gpufs.backends.gpu.backend import GPUBackend

        backend = GPUBackend(
            cuda_graphs=cuda_graphs,
            hist_optin_shared=args.hist_optin_shared,
            hist_kernel=args.hist_kernel,
        )
    else:
        backend = get_backend(dev.name)
    d = X.shape[1]

    def params(trees):
        return BoostingParams(
            n_estimators=trees,
            hessian=True,
            tree=TreeParams(
                max_depth=args.depth, reg_lambda=1.0, learning_rate=0.1, min_child_weight=1.0
            ),
        )

    def fit(Xb, bm, trees):
        pen = PenaltyState(0.0, np.ones(d), np.arange(d))
        return fit_boosting(
            backend, DeviceRows(backend, Xb, y), SquaredError(), pen, bm, params(trees)
        )

    def binning():
        bm = BinMapper(args.max_bins - 1, random_state=0).fit(X)
        # = bm.transform(X, backend), minus its same-device check (numpy X under the simulator)
        return bm, backend.bin_transform(X, bm.cuts_padded_, bm.n_bins_ - 1)

    binning()  # warm-up: compiles the bin kernel
    (bm, Xb), t_bin = dev.timed(binning)
    fit(Xb, bm, 2)  # warm-up: compiles the tree kernels
    (ens, _, _), t_fit = dev.timed(lambda: fit(Xb, bm, args.trees))
    rec = dict(
        tool=f"gpufs-{dev.name}" + ("-graphs" if cuda_graphs else ""),
        bin_s=t_bin,
        fit_s=t_fit,
        per_tree_s=t_fit / args.trees,
        n_trees=ens.n_trees,
        cuda_graphs=cuda_graphs,
        hist_optin_shared=args.hist_optin_shared,
        hist_kernel=getattr(backend, "hist_kernel", None),
    )
    if cuda_graphs:
        rec["graphs"] = dict(captured=backend.graphs.captured, replayed=backend.graphs.replayed)
    if dev.name == "gpu" and args.profile_trees > 0:
        backend.profile = True
        backend.reset_timings()
        _, t_prof = dev.timed(lambda: fit(Xb, bm, args.profile_trees))
        backend.profile = False
        phases = {k: 1e3 * v / args.profile_trees for k, v in backend.timings.items()}
        phases["other"] = 1e3 * t_prof / args.profile_trees - sum(phases.values())
        rec["phases_ms_per_tree"] = phases
        rec["launches_per_tree"] = {k: v / args.profile_trees for k, v in backend.launches.items()}
        rec["profiled_ms_per_tree"] = 1e3 * t_prof / args.profile_trees
        rec["memory"] = backend.memory_stats()
    if dev.name == "gpu" and dev.cupy and args.kernel_times and args.profile_trees > 0:
        backend.kernel_events = True
        backend.reset_timings()
        fit(Xb, bm, args.profile_trees)
        times = backend.kernel_times()
        backend.kernel_events = False
        rec["kernels_ms_per_tree"] = {k: v / args.profile_trees for k, v in times.items()}
        hist_ms = rec["kernels_ms_per_tree"].get("histogram_bounded_kernel") or rec[
            "kernels_ms_per_tree"
        ].get("histogram_kernel")
        bw = _bandwidth(dev, args)
        bytes_per_tree = backend.hist_bytes / args.profile_trees
        bound = dict(bytes_per_tree=bytes_per_tree, bandwidth_bytes_s=bw)
        if bw:
            bound["bound_ms_per_tree"] = 1e3 * bytes_per_tree / bw
            if hist_ms:
                bound["ratio"] = hist_ms / bound["bound_ms_per_tree"]
        rec["histogram_bound"] = bound
    return rec


def _bandwidth(dev, args):
    """Peak device memory bandwidth in bytes/s: ``--bandwidth-gbs``, or memory clock x bus
    width x 2 (double data rate) from the device's attributes."""
    if args.bandwidth_gbs:
        return args.bandwidth_gbs * 1e9
    rt = dev.xp.cuda.runtime
    try:
        clock_khz = rt.deviceGetAttribute(36, 0)  # cudaDevAttrMemoryClockRate
        bus_bits = rt.deviceGetAttribute(37, 0)  # cudaDevAttrGlobalMemoryBusWidth
        return 2.0 * clock_khz * 1e3 * bus_bits / 8.0
    except Exception:
        return None


def run_xgboost(dev, X, y, args):
    try:
        import xgboost as xgb
    except ImportError:
        return dict(tool="xgboost", skipped="xgboost is not installed")
    params = dict(
        tree_method="hist",
        device="cuda" if dev.name == "gpu" else "cpu",
        max_depth=args.depth,
        max_bin=args.max_bins,
        learning_rate=0.1,
        reg_lambda=1.0,
        min_child_weight=1.0,
        objective="reg:squarederror",
        grow_policy="depthwise",
        nthread=os.cpu_count(),
    )
    dm, t_bin = dev.timed(lambda: xgb.QuantileDMatrix(X, y, max_bin=args.max_bins))
    xgb.train(params, dm, num_boost_round=2)  # warm-up
    booster, t_fit = dev.timed(lambda: xgb.train(params, dm, num_boost_round=args.trees))
    return dict(
        tool=f"xgboost-{'cuda' if dev.name == 'gpu' else 'cpu'}",
        bin_s=t_bin,
        fit_s=t_fit,
        per_tree_s=t_fit / args.trees,
        n_trees=booster.num_boosted_rounds(),
        version=xgb.__version__,
    )


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", default="100,500", help="comma-separated feature counts")
    ap.add_argument(
        "--sizes",
        default=None,
        help="comma-separated ROWSxFEATURES (overrides --rows / --features)",
    )
    ap.add_argument(
        "--kernel-times",
        action="store_true",
        help="per-kernel CUDA-event timings and the histogram bandwidth bound",
    )
    ap.add_argument(
        "--bandwidth-gbs",
        type=float,
        default=None,
        help="the GPU's memory bandwidth in GB/s (default: from the device)",
    )
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--max-bins", type=int, default=256, help="histogram bins incl. missing")
    ap.add_argument(
        "--profile-trees",
        type=int,
        default=10,
        help="trees of the separate, phase-synchronized gpufs fit (0: skip)",
    )
    ap.add_argument(
        "--device",
        default="gpu",
        choices=["gpu", "cpu"],
        help="cpu: smoke run of the same code on the CPU backends",
    )
    ap.add_argument("--no-xgboost", action="store_true")
    ap.add_argument(
        "--cuda-graphs",
        default="off",
        choices=["off", "on", "both"],
        help="gpufs on the GPU: plain launches (off), each level replayed as a "
        "CUDA graph (on), or both in one run",
    )
    ap.add_argument(
        "--hist-kernel",
        default=None,
        choices=("bounded", "split_word"),
        help="the GPU histogram kernel (default: launch_rules.HIST_KERNEL)",
    )
    ap.add_argument(
        "--hist-optin-shared",
        action="store_true",
        help="gpufs on the GPU: histogram tiles in the device's opt-in shared "
        "memory (GPUBackend(hist_optin_shared=True))",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out",
        default=None,
        help="JSON lines file to append to (default: "
        "bench/results/gpu_vs_xgboost.jsonl on the GPU, none on the CPU)",
    )
    ap.add_argument("--note", default=None, help="free text stored in every record")
    args = ap.parse_args()
    out = args.out or (
        os.path.join(HERE, "results", "gpu_vs_xgboost.jsonl") if args.device == "gpu" else None
    )
    dev = Device(args.device)
    machine = machine_info()
    records = []
    if args.sizes:
        sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    else:
        sizes = [(args.rows, int(s)) for s in args.features.split(",")]
    for rows, d in sizes:
        Xh, yh = make_data(rows, d, args.seed)
        X, y = dev.xp.asarray(Xh), dev.xp.asarray(yh)
        del Xh
        common = dict(
            bench="gpu_vs_xgboost",
            device=args.device,
            rows=rows,
            features=d,
            trees=args.trees,
            depth=args.depth,
            bins=args.max_bins,
            mu=0.0,
            simulator=args.device == "gpu" and not dev.cupy,
            machine=machine,
            note=args.note,
        )
        modes = {"off": [False], "on": [True], "both": [False, True]}[args.cuda_graphs]
        if args.device != "gpu":
            modes = [False]
        tools = []
        for m in modes:
            try:
                tools.append(run_gpufs(dev, X, y, args, cuda_graphs=m))
            except Exception as e:  # a failing opt-in mode is a record, not the end of the run
                if not m:
                    raise
                tools.append(
                    dict(
                        tool=f"gpufs-{dev.name}-graphs",
                        cuda_graphs=True,
                        error=f"{type(e).__name__}: {e}",
                    )
                )
        if not args.no_xgboost:
            tools.append(run_xgboost(dev, X, y, args))
        for r in tools:
            records.append({**common, **r})
            print(json.dumps(records[-1]), flush=True)
        del X, y
        if dev.cupy:
            dev.xp.get_default_memory_pool().free_all_blocks()
    ratios = {}
    for rows, d in sizes:
        by = {
            r["tool"].split("-")[0] + ("-graphs" if r.get("cuda_graphs") else ""): r
            for r in records
            if r["features"] == d and r["rows"] == rows
        }
        for tool in ("gpufs", "gpufs-graphs"):
            if "per_tree_s" in by.get(tool, {}) and "per_tree_s" in by.get("xgboost", {}):
                ratios[f"{rows}x{d}" + tool[5:]] = (
                    by[tool]["per_tree_s"] / by["xgboost"]["per_tree_s"]
                )
    summary = dict(
        bench="gpu_vs_xgboost",
        device=args.device,
        summary="gpufs per_tree_s / xgboost per_tree_s, by rows x features",
        ratios=ratios,
        machine=machine,
        note=args.note,
    )
    records.append(summary)
    print(json.dumps(summary), flush=True)
    if out:
        append_records(out, records)


if __name__ == "__main__":
    main()
