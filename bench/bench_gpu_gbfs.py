"""GBFS selection (mu > 0): gpufs on the GPU vs LightGBM CEGB on the CPU vs gpufs on the CPU.

One data set (default 1,000,000 x 100 float32 rows, 5 informative columns, a regression target
rounded to multiples of 1/8 so that the base score is exact on both devices), one penalty, the
public estimator ``GBFSRegressor(penalty_scaling="none")`` on each gpufs device, and LightGBM with
``cegb_penalty_feature_coupled`` (its CPU implementation of the same first-use penalty; its CUDA
learner ignores CEGB) on all of the machine's cores.

Configuration and timing come from ``bench/_peers.py`` (shared with bench_cpu_gbfs.py): the
same trees and the same first-use penalty (LightGBM's gain has no 1/2, so it gets 2 * mu);
binning timed alone; per-tree time differential, (N-tree fit - 1-tree fit) / (N - 1); warm-up
fits first; the GPU synchronized before every timer stops. LightGBM grows leaf-wise; it gets
num_leaves = 2**depth and max_depth = depth. Per tool, one JSON line (with the selected
features, in order of first use for gpufs, and for gpufs-gpu whether its selection and trees
equal gpufs-cpu's); a final line holds the ratios.

On a GPU machine (16 CPU cores for LightGBM and gpufs-cpu):
    python bench/bench_gpu_gbfs.py            # appends to bench/results/gpu_gbfs.jsonl
Smoke run without a GPU (prints only):
    python bench/bench_gpu_gbfs.py --rows 3000 --features 20 --trees 5 --tools gpufs-cpu,lightgbm
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # bench/_machine.py; gpufs from this checkout
from _machine import machine_info  # noqa: E402
from _peers import lightgbm_cegb_params, time_gpufs, time_lightgbm  # noqa: E402
from _records import append_records  # noqa: E402

TOOLS = ("gpufs-gpu", "gpufs-cpu", "lightgbm")


def make_data(n, d, seed):
    """float32 X; y from columns 0..4 plus noise, rounded to multiples of 1/8 (exact sums)."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d).astype(np.float32)
    y = (
        X[:, 0] * X[:, 1]
        + np.sin(2 * X[:, 2])
        + 0.5 * X[:, 3]
        - 0.5 * X[:, 4] ** 2
        + 0.5 * rng.randn(n)
    )
    return X, np.rint(8.0 * y) / 8.0


def run_gpufs(device, X, y, args):
    from gpufs.selectors.gbfs import GBFSRegressor

    if device == "gpu":
        import cupy

        X, y = cupy.asarray(X), cupy.asarray(y)
    params = dict(
        mu=args.mu,
        penalty_scaling="none",
        max_depth=args.depth,
        max_bins=255,
        learning_rate=0.1,
        reg_lambda=1.0,
        min_child_weight=1e-3,
        device=device,
        random_state=0,
    )
    return time_gpufs(GBFSRegressor, X, y, params, args.trees, device)


def run_lightgbm(X, y, args):
    return time_lightgbm(
        X, y, lightgbm_cegb_params("regression", args.depth, X.shape[1], args.mu), args.trees
    )


def _same_trees(a, b):
    sa, sb = a.ensemble_.stacked(), b.ensemble_.stacked()
    return all(np.array_equal(sa[k], sb[k]) for k in sa)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--mu", type=float, default=50.0)
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"subset of {TOOLS}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out",
        default=None,
        help="JSON lines file to append to (default: "
        "bench/results/gpu_gbfs.jsonl when gpufs-gpu runs, else none)",
    )
    ap.add_argument("--note", default=None)
    args = ap.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    bad = set(tools) - set(TOOLS)
    if bad:
        ap.error(f"unknown tools {sorted(bad)}")
    out = args.out or (
        os.path.join(HERE, "results", "gpu_gbfs.jsonl") if "gpufs-gpu" in tools else None
    )
    X, y = make_data(args.rows, args.features, args.seed)
    common = dict(
        bench="gpu_gbfs",
        rows=args.rows,
        features=args.features,
        trees=args.trees,
        depth=args.depth,
        bins=256,
        mu=args.mu,
        machine=machine_info(),
        note=args.note,
    )
    records, models = [], {}
    for tool in tools:
        if tool == "lightgbm":
            rec = run_lightgbm(X, y, args)
        else:
            rec, models[tool] = run_gpufs(tool.split("-")[1], X, y, args)
        records.append({**common, **rec})
        print(json.dumps(records[-1]), flush=True)
    if "gpufs-gpu" in models and "gpufs-cpu" in models:
        for r in records:
            if r["tool"] == "gpufs-gpu":
                r["same_selection_as_cpu"] = (
                    models["gpufs-gpu"].selected_features_.tolist()
                    == models["gpufs-cpu"].selected_features_.tolist()
                )
                r["same_trees_as_cpu"] = _same_trees(models["gpufs-gpu"], models["gpufs-cpu"])
    per_tree = {r["tool"]: r["per_tree_s"] for r in records}
    ratios = {
        f"{a}/{b}": per_tree[a] / per_tree[b]
        for a in per_tree
        for b in per_tree
        if a != b and a.startswith("gpufs")
    }
    summary = dict(
        bench="gpu_gbfs",
        rows=args.rows,
        features=args.features,
        summary="per_tree_s ratios",
        ratios=ratios,
        note=args.note,
        machine=common["machine"],
    )
    records.append(summary)
    print(json.dumps({k: v for k, v in summary.items() if k != "machine"}), flush=True)
    if out:
        append_records(out, records)


if __name__ == "__main__":
    main()
