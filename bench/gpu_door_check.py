"""GPU check: host (numpy) y and weights beside device="gpu" through every family's fit,
with exact k's held-out folds, stability refits, validation_fraction, eval_set, GT-GBM's
group tests and multitask; the selection and the predictions must equal the CPU's, and
``transform`` keeps numpy in, numpy out. Last, the CLI on a CSV with a text column, GPU
against CPU. Prints one JSON line per case (and appends it to the file named as the first
argument, if any); exits 1 on any mismatch or error. ``GPUFS_DOOR_SECOND=cpu`` runs the
"gpu" side on the CPU too: a check of the script itself on a machine without a GPU.

    python bench/gpu_door_check.py "$OUT/gpu_door_check.jsonl"     # on the GPU machine
"""

import json
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np

import gpufs

SECOND = os.environ.get("GPUFS_DOOR_SECOND", "gpu")
rng = np.random.RandomState(0)
X = rng.randn(4000, 12).astype(np.float32)
yr = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + X[:, 3] + 0.3 * rng.randn(4000)
yc = (yr > 0).astype(int)
y3 = np.digitize(yr, [-0.5, 0.5])
w = rng.uniform(0.5, 2, 4000)
cases = [
    ("gbfs_cls_k3", gpufs.GBFSClassifier, dict(n_features_to_select=3, n_estimators=30), yc, {}),
    ("gbfs_3cls_k3", gpufs.GBFSClassifier, dict(n_features_to_select=3, n_estimators=20), y3, {}),
    (
        "gbfs_reg_w",
        gpufs.GBFSRegressor,
        dict(n_features_to_select=3, n_estimators=30),
        yr,
        dict(sample_weight=w),
    ),
    (
        "gbfs_stab",
        gpufs.GBFSRegressor,
        dict(n_features_to_select=3, n_estimators=20, stability_rounds=4),
        yr,
        {},
    ),
    (
        "gbfs_valfrac",
        gpufs.GBFSClassifier,
        dict(n_estimators=40, validation_fraction=0.2, n_iter_no_change=5),
        yc,
        {},
    ),
    (
        "gbfs_evalset",
        gpufs.GBFSRegressor,
        dict(n_estimators=30),
        yr,
        dict(eval_set=[(X[:500], yr[:500])]),
    ),
    ("cb_cls", gpufs.ControlBurnClassifier, dict(n_features_to_select=3, max_depth=3), yc, {}),
    ("stagewise_reg", gpufs.StagewiseRegressor, dict(n_features_to_select=3), yr, {}),
    (
        "gtgbm_reg",
        gpufs.GBFSRegressor,
        dict(n_features_to_select=3, n_estimators=20, split_search="group_testing"),
        yr,
        {},
    ),
    (
        "multitask_reg",
        gpufs.MultiTaskGBFSRegressor,
        dict(n_estimators=20),
        yr,
        dict(task=np.arange(4000) % 2),
    ),
]


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _same_predictions(cpu, gpu):
    """Labels equal, or values equal to 1e-9 of their scale (the trees are the same bit
    for bit; the last bits of a float64 sum may be added in another order)."""
    a, b = _host(cpu.predict(X)), _host(gpu.predict(X))
    if a.dtype.kind in "fc":
        return bool(np.abs(a - b).max() <= 1e-9 * max(1.0, np.abs(a).max()))
    return bool(np.array_equal(a, b))


def _cli(tmp):
    """``gpufs select`` on a CSV with a text column, on each device: the selected columns."""
    import pandas as pd

    frame = pd.DataFrame(X[:, :6], columns=[f"x{j}" for j in range(6)])
    frame["plan"] = np.array(["a", "b", "c"])[rng.randint(0, 3, 4000)]
    frame["y"] = yc
    table = os.path.join(tmp, "t.csv")
    frame.to_csv(table, index=False)
    cols = {}
    for side, device in (("cpu", "cpu"), ("gpu", SECOND)):
        out = os.path.join(tmp, f"sel_{side}.csv")
        cmd = [sys.executable, "-m", "gpufs", "select", table, "--target", "y", "-k", "3"]
        cmd += ["--device", device, "--output", out, "--no-progress", "--trees", "20"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"{side}: rc {proc.returncode}: {proc.stderr[-800:]}")
        cols[side] = list(pd.read_csv(out).columns)
    return cols


def _case(name, check):
    """Run ``check() -> dict`` (with "same") as case ``name``: print and append its record;
    returns whether it failed. An exception is the record, and the next case runs."""
    rec = {"case": name}
    try:
        rec.update(check())
    except Exception as exc:  # noqa: BLE001 - every case runs; the error is the record
        rec.update(error=f"{type(exc).__name__}: {exc}", tb=traceback.format_exc()[-1500:])
    print(json.dumps(rec), flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "a") as fh:
            fh.write(json.dumps(rec) + "\n")
    return not rec.get("same", False)


def _fit_both(name, Est, kw, y, fit_kw):
    sel, fitted = {}, {}
    for side, device in (("cpu", "cpu"), ("gpu", SECOND)):
        est = fitted[side] = Est(device=device, random_state=0, **kw).fit(X, y, **fit_kw)
        sel[side] = [int(f) for f in est.selected_features_]
    same_pred = name.startswith("multitask") or _same_predictions(fitted["cpu"], fitted["gpu"])
    numpy_out = isinstance(fitted["gpu"].transform(X), np.ndarray)
    same = sel["cpu"] == sel["gpu"] and same_pred and numpy_out
    return {**sel, "same_predictions": same_pred, "transform_numpy": numpy_out, "same": same}


def _cli_both():
    with tempfile.TemporaryDirectory() as tmp:
        cols = _cli(tmp)
    return {**cols, "same": cols["cpu"] == cols["gpu"]}


bad = sum(_case(c[0], lambda c=c: _fit_both(*c)) for c in cases)
bad += _case("cli_text_column", _cli_both)
sys.exit(1 if bad else 0)
