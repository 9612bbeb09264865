"""Golden outputs: selections, trees and predictions pinned before a refactor.

``python tests/golden.py --write`` records them into ``tests/data/golden.json``;
``tests/test_golden.py`` recomputes them and demands:

* GBFS (fixed-point engine): every tree array and every prediction bit-identical;
* stagewise and ControlBurn (BLAS-backed linear algebra, whose last bits may depend on the
  CPU's vector width): selected features identical, in order, and predictions within 1e-9
  relative.

A refactor that claims "behaviour unchanged" must leave this test green. An intentional change
of behaviour rewrites the file in its own commit, whose message says what changed and why.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_PATH = os.path.join(HERE, "data", "golden.json")


def _data(seed, n=600, d=12, task="regression", n_classes=2):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    X[rng.rand(n, d) < 0.05] = np.nan  # missing values take the default direction
    X[:, 5] = np.round(X[:, 5])  # a few-valued feature
    z = (
        np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1])
        + np.sin(2 * np.nan_to_num(X[:, 2]))
        + 0.5 * np.nan_to_num(X[:, 3])
    )
    if task == "regression":
        return X, z + 0.3 * rng.randn(n)
    if n_classes == 2:
        return X, (z + 0.5 * rng.randn(n) > 0).astype(np.int64)
    cuts = np.quantile(z, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.searchsorted(cuts, z + 0.3 * rng.randn(n))


def _digest(arr) -> str:
    a = np.ascontiguousarray(np.asarray(arr))
    return hashlib.sha256(a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()).hexdigest()


def _gbfs_cases():
    from gpufs import GBFSClassifier, GBFSRegressor

    Xr, yr = _data(0)
    Xb, yb = _data(1, task="classification")
    Xm, ym = _data(2, task="classification", n_classes=3)
    w = np.random.RandomState(3).rand(Xr.shape[0]) + 0.5
    return {
        "gbfs_reg_root_sse": (GBFSRegressor(mu=0.005, n_estimators=25, random_state=0), Xr, yr, {}),
        "gbfs_reg_none_k3": (
            GBFSRegressor(
                mu=2.0,
                penalty_scaling="none",
                n_features_to_select=3,
                n_estimators=25,
                random_state=0,
                pool_ranking="gain",  # the pinned trees are the training-gain rule's
            ),
            Xr,
            yr,
            {},
        ),
        "gbfs_reg_weights_groups": (
            GBFSRegressor(
                mu=0.02,
                feature_groups=[0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5],
                feature_costs=np.linspace(0.5, 2, 12),
                n_estimators=20,
                max_depth=3,
                random_state=0,
            ),
            Xr,
            yr,
            {"sample_weight": w},
        ),
        "gbfs_bin_hessian": (GBFSClassifier(mu=0.01, n_estimators=25, random_state=0), Xb, yb, {}),
        "gbfs_bin_nohess_val": (
            GBFSClassifier(
                hessian=False,
                validation_fraction=0.2,
                n_iter_no_change=5,
                n_estimators=40,
                max_bins=32,
                random_state=0,
            ),
            Xb,
            yb,
            {},
        ),
        "gbfs_multiclass_k4": (
            GBFSClassifier(
                n_features_to_select=4,
                n_estimators=10,
                max_depth=3,
                random_state=0,
                pool_ranking="gain",
            ),
            Xm,
            ym,
            {},
        ),
    }


def _gbfs_record(est, X):
    s = est.ensemble_.stacked()
    rec = {k: _digest(s[k]) for k in sorted(s)}
    raw = est.ensemble_.predict_raw(np.ascontiguousarray(X), _cpu())
    rec["raw_predictions"] = _digest(raw)
    rec["selected_features"] = [int(f) for f in est.selected_features_]
    rec["n_trees"] = int(est.ensemble_.n_trees)
    return rec


def _cpu():
    from gpufs.backends import get_backend

    return get_backend("cpu")


def _linear_and_forest_cases():
    from gpufs import (
        ControlBurnClassifier,
        ControlBurnRegressor,
        StagewiseClassifier,
        StagewiseRegressor,
    )

    Xr, yr = _data(4)
    Xb, yb = _data(5, task="classification")
    Xr0, Xb0 = np.nan_to_num(Xr), np.nan_to_num(Xb)  # stagewise wants no missing values
    return {
        "stagewise_reg": (StagewiseRegressor(n_features_to_select=5), Xr0, yr, {}),
        "stagewise_clf": (StagewiseClassifier(n_features_to_select=4), Xb0, yb, {}),
        # unpruned: the default up to 0.2, pinned since before out-of-bag pruning existed
        "controlburn_reg_k3": (
            ControlBurnRegressor(
                n_features_to_select=3,
                max_depth=3,
                max_trees_per_round=5,
                oob_prune=None,
                random_state=0,
            ),
            Xr,
            yr,
            {},
        ),
        "controlburn_clf_k3_single": (
            ControlBurnClassifier(
                n_features_to_select=3,
                tree_type="single",
                max_depth=2,
                oob_prune=None,
                random_state=0,
            ),
            Xb,
            yb,
            {},
        ),
        # the default since 0.3: trees pruned out of bag at one standard error
        "controlburn_reg_k3_pruned": (
            ControlBurnRegressor(
                n_features_to_select=3, max_depth=3, max_trees_per_round=5, random_state=0
            ),
            Xr,
            yr,
            {},
        ),
        "controlburn_clf_k3_single_pruned": (
            ControlBurnClassifier(
                n_features_to_select=3, tree_type="single", max_depth=2, random_state=0
            ),
            Xb,
            yb,
            {},
        ),
    }


def _loose_record(est, X):
    pred = est.predict_proba(X)[:, 1] if hasattr(est, "predict_proba") else est.predict(X)
    return {
        "selected_features": [int(f) for f in est.selected_features_],
        "predictions_head": [float(v) for v in np.asarray(pred)[:50]],
    }


def compute() -> dict:
    out = {"gbfs": {}, "loose": {}}
    for name, (est, X, y, kw) in _gbfs_cases().items():
        est.fit(X, y, **kw)
        out["gbfs"][name] = _gbfs_record(est, X)
    for name, (est, X, y, kw) in _linear_and_forest_cases().items():
        est.fit(X, y, **kw)
        out["loose"][name] = _loose_record(est, X)
    return out


if __name__ == "__main__":
    if "--write" not in sys.argv:
        print(json.dumps(compute(), indent=1))
    else:
        with open(GOLDEN_PATH, "w") as fh:
            json.dump(compute(), fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"wrote {GOLDEN_PATH}")
