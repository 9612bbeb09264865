"""GPU shards on a real GPU: a 2-worker Dask cluster against one process, trees bit for bit.

The check for a machine with a GPU (CI runs the same code under the CUDA simulator,
``tests/test_dask_gpu_sim.py``). Fits ``GBFSRegressor(device="gpu")`` in this process and
``DaskGBFSRegressor(device="gpu")`` on a ``distributed.LocalCluster`` of 2 worker processes
sharing GPU 0 (``--cuda-cluster``: ``dask_cuda.LocalCUDACluster``, one worker per visible
GPU), twice: on numpy partitions and on cupy-backed partitions (which stay on the GPU). 200,000
x 50 float32 with 5% missing values, depth 6, 5 trees by default. Prints one JSON line (the
machine, the times, whether every tree and the selection match) and exits 1 on a mismatch.
First run on a machine: numba compiles the kernels in each process (minutes) unless the
GPU tests filled the cache first.

    python bench/dask_gpu_smoke.py
    python bench/dask_gpu_smoke.py --rows 20000 --trees 2 --out results/dask_gpu_smoke.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_info  # noqa: E402


def _mismatches(ref, est):
    """The tree fields (and "selected_features_") where ``est`` differs from ``ref``."""
    sa, sb = ref.ensemble_.stacked(), est.ensemble_.stacked()
    bad = [k for k in sa if k not in sb or not np.array_equal(sa[k], sb[k])]
    if not np.array_equal(ref.selected_features_, est.selected_features_):
        bad.append("selected_features_")
    return bad


def _cluster(args):
    import distributed

    if args.cuda_cluster:
        import dask_cuda

        return dask_cuda.LocalCUDACluster(dashboard_address=":0")
    return distributed.LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--trees", type=int, default=5)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cuda-cluster", action="store_true")
    ap.add_argument("--out", default=None, help="also append the JSON line to this file")
    args = ap.parse_args(argv)

    import dask.array as da
    import distributed

    from gpufs import GBFSRegressor
    from gpufs.dask import DaskGBFSRegressor

    rng = np.random.default_rng(0)
    n, d = args.rows, args.features
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    z = np.nan_to_num(X).astype(np.float64)
    y = z[:, 0] + 2 * z[:, 1] - z[:, 2] * z[:, 3] + 0.5 * rng.normal(size=n)
    kw = dict(n_estimators=args.trees, max_depth=args.depth, random_state=0)
    rec = {
        "bench": "dask_gpu_smoke",
        "rows": n,
        "features": d,
        "trees": args.trees,
        "depth": args.depth,
        "machine": machine_info(),
    }
    # the reference on this process's GPU; under the simulator (this script's own check) on
    # the CPU, whose trees the GPU's equal
    rec["reference_device"] = "cpu" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else "gpu"
    t0 = time.perf_counter()
    ref = GBFSRegressor(device=rec["reference_device"], **kw).fit(X, y)
    rec["single_process_s"] = time.perf_counter() - t0
    chunk = -(-n // (2 * args.workers))  # two partitions per worker
    bad = {}
    with _cluster(args) as cluster, distributed.Client(cluster) as client:
        rec["workers"] = len(client.scheduler_info()["workers"])
        Xd = da.from_array(X, chunks=(chunk, d)).persist()
        yd = da.from_array(y, chunks=chunk).persist()
        inputs = [("numpy", Xd)]
        try:  # absent under the simulator (NUMBA_ENABLE_CUDASIM=1: this script's own check)
            import cupy

            inputs.append(("cupy", Xd.map_blocks(cupy.asarray).persist()))
        except ImportError:
            rec["cupy"] = "not installed: numpy partitions only"
        for name, Xin in inputs:
            t0 = time.perf_counter()
            est = DaskGBFSRegressor(device="gpu", client=client, **kw).fit(Xin, yd)
            rec[f"dask_{name}_s"] = time.perf_counter() - t0
            rec[f"dask_{name}_shards"] = est.cluster_["shard_backends"]
            bad[name] = _mismatches(ref, est)
    rec["mismatches"] = bad
    rec["ok"] = not any(bad.values())
    line = json.dumps(rec)
    print(line)
    if args.out:
        with open(Path(__file__).resolve().parent / args.out, "a") as fh:
            fh.write(line + "\n")
    return 0 if rec["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
