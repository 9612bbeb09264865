"""The whole stack on the card: every family on the GPU against the CPU path, and cudf + rmm.

Issue 37 asks the first GPU call of a session for ControlBurn (1M x 100), GT-GBM (100k x
5,000) and stagewise (1M x 1,000), each on the GPU against the CPU path on the machine's
cores, with the selections compared; and, in a later call, a ``cudf.DataFrame`` with
categorical and null columns through ``fit``, ``transform`` and ``predict`` with rmm's pool
in use and its peak recorded. This script does both, one JSON line per run, written as it goes:

    python bench/bench_gpu_stack.py --out "$OUT/gpu_stack.jsonl"                # the families
    python bench/bench_gpu_stack.py --cases cudf --out "$OUT/gpu_cudf.jsonl"    # cudf and rmm

``--scale 0.01 --devices cpu,cpu`` runs the same code at a hundredth of the rows on the CPU
alone (the record's ``same_selection`` then compares two CPU fits): a check of the script
itself on a machine without a GPU, not a measurement.

Each family record: family, shape, k, seconds and selection per device, ``same_selection``,
``speedup`` (CPU seconds / GPU seconds; goal >= 5 on the GPU machine's 16 cores), the machine.
A warm-up fit on a small slice comes first on each device (numba compiles on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _machine import machine_info  # noqa: E402
from _records import append_records  # noqa: E402

#: family -> (rows, columns, k, task) at --scale 1
FAMILIES = {
    "controlburn": (1_000_000, 100, 10, "classification"),
    "gtgbm": (100_000, 5_000, 10, "classification"),
    "stagewise": (1_000_000, 1_000, 10, "regression"),
}


def make_table(n, d, task, seed=0):
    """A float32 table with 8 planted signals (non-linear for the trees, linear for stagewise)."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d).astype(np.float32)
    s = min(8, d)
    z = X[:, :s].astype(np.float64) @ np.linspace(1.5, 0.5, s)
    if task == "classification":
        z = z + 0.5 * np.sin(2 * X[:, 0]) * X[:, 1 % d]
        return X, (z + rng.randn(n) > 0).astype(np.int32)
    return X, (z + rng.randn(n)).astype(np.float64)


def make_selector(family, k, device):
    from gpufs import ControlBurnClassifier, GBFSClassifier, StagewiseRegressor

    if family == "controlburn":
        return ControlBurnClassifier(
            n_features_to_select=k, max_depth=6, device=device, random_state=0
        )
    if family == "gtgbm":
        return GBFSClassifier(
            n_features_to_select=k,
            split_search="group_testing",
            n_estimators=50,
            max_depth=4,
            device=device,
            random_state=0,
        )
    return StagewiseRegressor(n_features_to_select=k, device=device, random_state=0)


def on_device(X, y, device):
    if device != "gpu":
        return X, y
    import cupy as cp

    return cp.asarray(X), cp.asarray(y)


def sync(device):
    if device == "gpu":
        import cupy as cp

        cp.cuda.Device().synchronize()


def run_family(family, scale, devices):
    n, d, k, task = FAMILIES[family]
    n = max(200, int(n * scale))
    X, y = make_table(n, d, task)
    record = {"case": family, "rows": n, "columns": d, "k": k, "devices": list(devices)}
    selections = []
    for i, device in enumerate(devices):
        Xd, yd = on_device(X, y, device)
        warm = min(n, 2_000)
        make_selector(family, k, device).fit(Xd[:warm], yd[:warm])  # compile, not timed
        sync(device)
        t0 = time.perf_counter()
        sel = make_selector(family, k, device).fit(Xd, yd)
        sync(device)
        seconds = time.perf_counter() - t0
        chosen = [int(f) for f in np.asarray(sel.selected_features_).tolist()]
        record[f"seconds_{i}_{device}"] = seconds
        record[f"selection_{i}_{device}"] = chosen
        selections.append(sorted(chosen))
        del Xd, yd
    record["same_selection"] = all(s == selections[0] for s in selections)
    if list(devices) == ["gpu", "cpu"]:
        record["speedup"] = record["seconds_1_cpu"] / record["seconds_0_gpu"]
    return record


def run_cudf(scale):
    """A cudf frame with a categorical, a text and null-holding columns through the estimator
    API under rmm's pool; the pool's peak from rmm's statistics adaptor."""
    import cudf
    import cupy as cp
    import rmm
    from rmm.allocators.cupy import rmm_cupy_allocator

    from gpufs import GBFSClassifier

    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=2**30)
    stats = rmm.mr.StatisticsResourceAdaptor(pool)
    rmm.mr.set_current_device_resource(stats)
    cp.cuda.set_allocator(rmm_cupy_allocator)

    n = max(1_000, int(200_000 * scale))
    X, y = make_table(n, 20, "classification")
    rng = np.random.RandomState(1)
    frame = cudf.DataFrame({f"x{j}": X[:, j] for j in range(20)})
    frame["plan"] = cudf.Series(rng.choice(["a", "b", "c"], n)).astype("category")
    holes = rng.rand(n) < 0.1
    frame["x3"] = frame["x3"].mask(cudf.Series(holes))
    t0 = time.perf_counter()
    sel = GBFSClassifier(n_features_to_select=5, n_estimators=30, device="gpu", random_state=0).fit(
        frame, cp.asarray(y)
    )
    out = sel.transform(frame)
    pred = sel.predict(frame)
    cp.cuda.Device().synchronize()
    return {
        "case": "cudf",
        "rows": n,
        "seconds": time.perf_counter() - t0,
        "selected": list(map(str, sel.get_feature_names_out())),
        "transform_type": type(out).__module__ + "." + type(out).__name__,
        "predict_type": type(pred).__module__ + "." + type(pred).__name__,
        "rmm_peak_bytes": int(stats.allocation_counts["peak_bytes"]),
        "cupy_uses_rmm": cp.cuda.get_allocator() is rmm_cupy_allocator,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--cases", default=",".join(FAMILIES), help=f"some of {','.join(FAMILIES)},cudf"
    )
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the rows")
    ap.add_argument("--devices", default="gpu,cpu")
    args = ap.parse_args(argv)
    devices = args.devices.split(",")
    rc = 0
    for case in args.cases.split(","):
        try:
            rec = run_cudf(args.scale) if case == "cudf" else run_family(case, args.scale, devices)
        except Exception as exc:  # a record of the failure, and the next case still runs
            rec, rc = {"case": case, "error": f"{type(exc).__name__}: {exc}"}, 1
        rec["machine"] = machine_info()
        append_records(args.out, [rec])
        print(json.dumps(rec), flush=True)
        rc = rc or int(rec.get("same_selection") is False)
    return rc


if __name__ == "__main__":
    sys.exit(main())
