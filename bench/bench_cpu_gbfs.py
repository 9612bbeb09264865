"""GBFS on the CPU vs LightGBM with its CEGB coupled-feature penalty (the same penalty).

Issue 2's speed goal: on the 2-core CPU box, 1,000,000 x 100 synthetic rows, depth 4,
256 bins (255 value bins + missing), 100 trees; gpufs no slower than LightGBM per tree.

Both run in this process, one after the other, on the same data, configured and timed by
``bench/_peers.py`` (same trees and penalty; binning timed alone; per-tree time differential).
LightGBM grows leaf-wise, so it gets num_leaves = 2**depth with max_depth=depth.

    python bench/bench_cpu_gbfs.py --rows 1000000 --features 100 --trees 100
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402
from _peers import lightgbm_cegb_params, time_gpufs, time_lightgbm  # noqa: E402
from _records import append_records  # noqa: E402


def make_data(n, d, seed):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d).astype(np.float32)
    logit = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] - 0.5 * X[:, 4] ** 2
    y = (logit + 0.5 * rng.randn(n) > 0).astype(np.int32)
    return X, y


def run_gpufs(X, y, args):
    from gpufs import GBFSClassifier

    params = dict(
        mu=args.mu,
        penalty_scaling="none",
        max_depth=args.depth,
        max_bins=255,
        learning_rate=0.1,
        reg_lambda=1.0,
        min_child_weight=1e-3,
        device="cpu",
        random_state=0,
        n_jobs=args.threads,
    )
    rec, model = time_gpufs(GBFSClassifier, X, y, params, args.trees, "cpu")
    rec["selected"] = rec["selected"][:20]
    return rec


def run_lightgbm(X, y, args):
    params = lightgbm_cegb_params("binary", args.depth, X.shape[1], args.mu)
    if args.threads:
        params["num_threads"] = args.threads
    return time_lightgbm(X, y, params, args.trees)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--mu", type=float, default=50.0)
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for both (LightGBM num_threads; gpufs n_jobs); default: every core",
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    X, y = make_data(args.rows, args.features, seed=0)
    common = dict(
        bench="cpu_gbfs",
        rows=args.rows,
        features=args.features,
        trees=args.trees,
        depth=args.depth,
        bins=256,
        mu=args.mu,
        threads=args.threads or os.cpu_count(),
        machine=machine_info(),
    )
    results = [run_gpufs(X, y, args), run_lightgbm(X, y, args)]
    import numba

    common["numba_threading_layer"] = numba.threading_layer()
    ratio = results[0]["per_tree_s"] / results[1]["per_tree_s"]
    out = args.out or os.path.join(os.path.dirname(__file__), "results", "cpu_gbfs.jsonl")
    records = [{**common, **r, "gpufs_over_lightgbm_per_tree": ratio} for r in results]
    for rec in records:
        print(json.dumps(rec))
    append_records(out, records)
    print(f"per-tree time ratio gpufs/LightGBM = {ratio:.3f} (<= 1.0 meets the goal)")


if __name__ == "__main__":
    main()
