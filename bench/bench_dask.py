"""gpufs on a Dask LocalCluster (1, 2, 4 worker processes) vs one process vs ``xgboost.dask``.

GBFS at mu = 0 (the plain boosted trees, so XGBoost grows the same kind of tree): depth 6, 256
histogram bins, squared error, float32 features generated on the workers
(``dask.array.random``, seeded) and the same rows computed into this process for the
single-process fit. Per worker count: time per tree of the boosting phase (the fit's ``boost``
time over the trees; loading and binning reported apart), the bytes that pass through the
driver per tree (``driver_bytes_per_tree``: the arrays the shards' calls sent to the workers
plus those they and the reductions returned, measured on every call of the boosting phase,
both directions apart too), the bytes the workers sent each other summing the histograms
(``bytes_between_workers_per_tree``), the bytes the level-step formula predicts (the driver
receives per level one sum: split nodes x histogram slots x 16, and the root's histogram; the
workers send each other workers - 1 times that), the driver's round trips per tree (calls and
reductions) and the reduction tree's depth, the ratio to the
single-process estimator's time per tree measured in the same run, and ``xgboost.dask.train``
(``tree_method="hist"``) on the same cluster and the same persisted data: its time per tree
(training only, after its ``DaskQuantileDMatrix`` is built; its histograms are reduced among
the workers, so its driver sees none of them). The Dask model is checked to equal the
single-process one bit for bit. Optionally (``--controlburn-rows``) a ControlBurn forest's time
per tree and bytes per tree, single process vs the cluster.

One JSON line per configuration to ``results/dask_cpu<cores>.jsonl`` (or ``--out``), with the
machine and its load. Usage::

    python bench/bench_dask.py                          # the issue's size: 4,000,000 x 100
    python bench/bench_dask.py --rows 1000000 --trees 20 --controlburn-rows 200000
    python bench/bench_dask.py --rows 1000000 --repeat 3 --controlburn-rows 200000
    python bench/bench_dask.py --rows 20000 --trees 2 --workers 1 2   # smoke test
    # bytes through the driver against workers, small data (each worker holds rows: at least
    # two partitions per worker)
    python bench/bench_dask.py --rows 32000 --features 20 --trees 3 --workers 1 2 4 8 16 \
        --out results/dask_driver_bytes_cpu2.jsonl

On a 2-core machine the workers share two cores: 1 worker runs its kernels on 2 threads, 2 and
4 workers on 1 thread each (4 workers oversubscribe), so the cluster runs measure the
protocol's overhead, not a speed-up; scaling past one machine is estimated from the bytes.
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
from _records import append_records  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def make_data(client, n, d, n_parts, seed=0):
    """Seeded float32 features and a target that depends on 6 of them, persisted."""
    import dask.array as da

    rs = da.random.RandomState(seed)
    X = rs.normal(size=(n, d), chunks=(-(-n // n_parts), d)).astype(np.float32)
    noise = rs.normal(size=n, chunks=X.chunks[0])
    y = (
        2.0 * X[:, 0]
        - X[:, 1]
        + 0.5 * X[:, 2] * X[:, 3]
        + np.sin(X[:, 4])
        + 0.3 * X[:, 5]
        + 0.5 * noise
    ).astype(np.float64)
    X, y = client.persist([X, y])
    from distributed import wait

    wait([X, y])
    return X, y


def predicted_bytes(est, n_workers, n_slots):
    """The level-step formula, one sum of the workers' histograms: per tree, the root's
    histogram, then per level the left child of every split that has a next level: splits x
    slots x 16 (slots: those of one node's histogram, every feature's value bins and its
    missing bin, what the shards send; ``gpufs.rules._hist_layout``). The driver receives it once;
    the workers send each other ``n_workers - 1`` times it (each shard but the root sends one
    sum, ``gpufs.dask._reduce``)."""
    s = est.ensemble_.stacked()
    D = est.ensemble_.max_depth
    total = 0
    for feat in s["feature"]:
        splits_with_next = int((feat[: 2 ** (D - 1) - 1] >= 0).sum())  # depths 0..D-2
        total += (1 + splits_with_next) * n_slots * 16
    return total


def same_trees(a, b):
    sa, sb = a.ensemble_.stacked(), b.ensemble_.stacked()
    return all(np.array_equal(sa[k], sb[k]) for k in sa)


def gbfs_params(args, n_jobs):
    return dict(
        n_estimators=args.trees,
        max_depth=args.depth,
        mu=0.0,
        penalty_scaling="none",
        max_bins=255,
        learning_rate=0.1,
        reg_lambda=1.0,
        random_state=0,
        n_jobs=n_jobs,
    )


def run(args):
    import dask
    from distributed import Client, LocalCluster

    from gpufs import GBFSRegressor
    from gpufs.dask import DaskGBFSRegressor
    from gpufs.dask._reduce import depth

    cores = os.cpu_count() or 1
    out = Path(args.out) if args.out else RESULTS / f"dask_cpu{cores}.jsonl"
    if not out.is_absolute():
        out = RESULTS.parent / out
    RESULTS.mkdir(exist_ok=True)
    records = []
    for nw in args.workers:
        threads = max(1, cores // nw)
        with (
            LocalCluster(
                n_workers=nw,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=40,
            ) as cluster,
            Client(cluster) as client,
        ):
            # at least two partitions per worker, so that every worker holds rows
            n_parts = max(args.partitions, 2 * nw)
            X, y = make_data(client, args.rows, args.features, n_parts)
            # The same rows in this process, fitted right before the cluster's fit so both
            # run under the same load (the machine is shared): the ratio's denominator.
            Xh, yh = dask.compute(X, y)
            GBFSRegressor(**dict(gbfs_params(args, -1), n_estimators=1)).fit(
                Xh[:20000], yh[:20000]
            )  # warm-up (numba)
            # warm-up: every worker loads the compiled kernels
            DaskGBFSRegressor(n_estimators=1, max_depth=2, client=client).fit(X[:20000], y[:20000])
            # The single process and the cluster alternate ``--repeat`` times; the best time
            # per tree of each is kept (the shared machine's other work only slows a run).
            single_runs, dask_runs = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                single = GBFSRegressor(**gbfs_params(args, -1)).fit(Xh, yh)
                single_runs.append(
                    (
                        time.perf_counter() - t0,
                        single.fit_times_,
                        single.fit_times_["boost"] / args.trees,
                    )
                )
                t0 = time.perf_counter()
                est = DaskGBFSRegressor(client=client, **gbfs_params(args, threads)).fit(X, y)
                dask_runs.append(
                    (time.perf_counter() - t0, est.fit_times_, est.fit_times_["boost"] / args.trees)
                )
            single_wall, single_times, single_per_tree = min(single_runs, key=lambda r: r[2])
            single_rec = {
                "kind": "single_process",
                "beside_workers": nw,
                "rows": args.rows,
                "features": args.features,
                "depth": args.depth,
                "trees": args.trees,
                "fit_s": single_wall,
                "times": single_times,
                "per_tree_s": single_per_tree,
                "per_tree_s_runs": [r[2] for r in single_runs],
                "machine": machine_info(),
            }
            records.append(single_rec)
            print(json.dumps(single_rec), flush=True)
            del Xh
            wall, dask_times, per_tree = min(dask_runs, key=lambda r: r[2])
            c = est.cluster_
            n_used = len(c["workers"])
            rec = {
                "kind": "gpufs_dask",
                "workers": nw,
                "workers_holding_rows": n_used,
                "threads_per_worker": threads,
                "rows": args.rows,
                "features": args.features,
                "depth": args.depth,
                "trees": args.trees,
                "partitions": n_parts,
                "fit_s": wall,
                "times": dask_times,
                "per_tree_s": per_tree,
                "per_tree_s_runs": [r[2] for r in dask_runs],
                "ratio_to_single_process": per_tree / single_rec["per_tree_s"],
                "identical_to_single_process": bool(same_trees(single, est)),
                "driver_bytes_per_tree": (
                    c["boost_bytes_from_workers"] + c["boost_bytes_to_workers"]
                )
                / args.trees,
                "bytes_from_workers_per_tree": c["boost_bytes_from_workers"] / args.trees,
                "bytes_to_workers_per_tree": c["boost_bytes_to_workers"] / args.trees,
                "bytes_between_workers_per_tree": (c["boost_bytes_between_workers"] / args.trees),
                "calls_per_tree": c["boost_calls"] / args.trees,
                "reductions_per_tree": c["boost_reductions"] / args.trees,
                "reduce_s_per_tree": c["boost_reduce_seconds"] / args.trees,
                "reduction_depth": depth(n_used),
                "formula_bytes_per_tree": predicted_bytes(est, n_used, c["histogram_slots"])
                / args.trees,
                "formula_bytes_between_workers_per_tree": (
                    (n_used - 1) * predicted_bytes(est, n_used, c["histogram_slots"]) / args.trees
                ),
                "histogram_slots_sent": c["histogram_slots"],
                "binning_sample_bytes": c["binning_sample_bytes"],
            }
            if not args.no_xgboost:
                rec.update(xgboost_dask(client, X, y, args, threads))
                rec["gpufs_over_xgboost_per_tree"] = per_tree / rec["xgboost_per_tree_s"]
            rec["machine"] = machine_info()
            records.append(rec)
            print(json.dumps(rec), flush=True)
            if args.controlburn_rows:
                records.append(controlburn(client, args, nw, threads))
                print(json.dumps(records[-1]), flush=True)
    append_records(out, records)
    print(f"appended {len(records)} records to {out}")


def xgboost_dask(client, X, y, args, threads):
    """``xgboost.dask.train`` on the same cluster and data: hist trees of the same depth and
    bins, squared error, learning rate 0.1, lambda 1."""
    import xgboost as xgb
    import xgboost.dask  # noqa: F401  (a submodule: not imported by xgboost itself)

    params = {
        "tree_method": "hist",
        "max_depth": args.depth,
        "eta": 0.1,
        "lambda": 1.0,
        "max_bin": 256,
        "objective": "reg:squarederror",
        "nthread": threads,
        "min_child_weight": 1e-3,
    }
    t0 = time.perf_counter()
    dtrain = xgb.dask.DaskQuantileDMatrix(client, X, y, max_bin=256)
    xgb.dask.train(client, params, dtrain, num_boost_round=1)  # warm-up, builds the matrix
    build = time.perf_counter() - t0
    runs = []
    for _ in range(args.repeat):  # the best of --repeat trainings, as for gpufs
        t0 = time.perf_counter()
        xgb.dask.train(client, params, dtrain, num_boost_round=args.trees)
        runs.append(time.perf_counter() - t0)
    train = min(runs)
    return {
        "xgboost_version": xgb.__version__,
        "xgboost_matrix_and_warmup_s": build,
        "xgboost_train_s": train,
        "xgboost_per_tree_s": train / args.trees,
        "xgboost_per_tree_s_runs": [r / args.trees for r in runs],
    }


def controlburn(client, args, nw, threads):
    """ControlBurn's forest, single process vs this cluster, on ``--controlburn-rows`` rows:
    time per tree of the forest phase and the bytes per tree (each tree's fixed-point
    gradients out, its leaf per row back, the histograms)."""
    import dask
    from sklearn.linear_model import LinearRegression

    from gpufs import ControlBurnRegressor
    from gpufs.dask import DaskControlBurnRegressor

    X, y = make_data(client, args.controlburn_rows, args.features, args.partitions, seed=1)
    kw = dict(
        alpha=0.001,
        max_depth=4,
        max_trees_per_round=5,
        random_state=0,
        refit_estimator=LinearRegression(),
    )
    Xh, yh = dask.compute(X, y)
    ControlBurnRegressor(**dict(kw, max_depth=1)).fit(Xh[:5000], yh[:5000])
    ref = ControlBurnRegressor(n_jobs=-1, **kw).fit(Xh, yh)
    DaskControlBurnRegressor(client=client, **dict(kw, max_depth=1)).fit(X[:5000], y[:5000])
    est = DaskControlBurnRegressor(client=client, n_jobs=threads, **kw).fit(X, y)
    same = bool(
        np.array_equal(ref.tree_weights_, est.tree_weights_)
        and all(
            np.array_equal(a, b)
            for a, b in zip(
                ref.forest_.ensemble.stacked().values(), est.forest_.ensemble.stacked().values()
            )
        )
    )
    T = est.n_trees_
    return {
        "kind": "controlburn",
        "workers": nw,
        "threads_per_worker": threads,
        "workers_holding_rows": len(est.cluster_["workers"]),
        "rows": args.controlburn_rows,
        "features": args.features,
        "trees": T,
        "single_forest_per_tree_s": ref.fit_times_["forest"] / T,
        "dask_forest_per_tree_s": est.fit_times_["forest"] / T,
        "ratio_to_single_process": est.fit_times_["forest"] / ref.fit_times_["forest"],
        "bytes_to_workers_per_tree": est.cluster_["bytes_to_workers"] / T,
        "bytes_from_workers_per_tree": est.cluster_["bytes_from_workers"] / T,
        "identical_to_single_process": same,
        "machine": machine_info(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--controlburn-rows", type=int, default=0)
    ap.add_argument("--no-xgboost", action="store_true")
    ap.add_argument(
        "--out", default=None, help="the JSON lines file (default results/dask_cpu<cores>.jsonl)"
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="fit the single process and the cluster this many times each, "
        "alternating; keep each one's best time per tree",
    )
    run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
