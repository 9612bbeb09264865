"""GPU check: host (numpy) y and weights beside device="gpu" through every family's fit,
with exact k's held-out folds, stability refits, validation_fraction and eval_set; the
selection must equal the CPU's. Prints one JSON line per case (and appends it to the file
named as the first argument, if any); exits 1 on any mismatch or error.

    python bench/gpu_door_check.py "$OUT/gpu_door_check.jsonl"     # on the GPU machine
"""

import json
import sys
import traceback

import numpy as np

import gpufs

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
]
bad = 0
for name, Est, kw, y, fit_kw in cases:
    rec = {"case": name}
    try:
        sel = {}
        for device in ("cpu", "gpu"):
            est = Est(device=device, random_state=0, **kw).fit(X, y, **fit_kw)
            sel[device] = [int(f) for f in est.selected_features_]
        rec.update(sel, same=sel["cpu"] == sel["gpu"])
    except Exception as exc:  # noqa: BLE001 - every case runs; the error is the record
        rec.update(error=f"{type(exc).__name__}: {exc}", tb=traceback.format_exc()[-1500:])
    bad += not rec.get("same", False)
    print(json.dumps(rec), flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "a") as fh:
            fh.write(json.dumps(rec) + "\n")
sys.exit(1 if bad else 0)
