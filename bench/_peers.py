"""How every GBFS benchmark runs and times its tools, in one place.

Owns: the LightGBM CEGB configuration that matches a gpufs GBFS fit (same depth, bins,
learning rate, L2, min_child_weight, and the same first-use penalty), and the timing rule used
for every tool: binning timed on its own, and per-tree time measured differentially,
(time of an N-tree fit - time of a 1-tree fit) / (N - 1), so fixed costs (input checks,
binning inside ``fit``, booster setup) cancel and the ratio compares the cost of a tree.
Each tool gets a small warm-up fit first (numba compiles on first call); the GPU is
synchronized before every timer stops.

Penalty: gpufs's gain is 1/2 * (G_L^2/(H_L+l) + G_R^2/(H_R+l) - G^2/(H+l)); LightGBM's split
gain has no 1/2, so its ``cegb_penalty_feature_coupled`` is 2 * mu for the same penalty.
"""

from __future__ import annotations

import os
import time

import numpy as np

LGB_PENALTY_SCALE = 2.0


def sync(device: str) -> None:
    if device == "gpu":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def _timed(fn, device="cpu"):
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def time_gpufs(estimator_cls, X, y, params: dict, trees: int, device: str) -> tuple[dict, object]:
    """Binning alone, a 1-tree fit and a ``trees``-tree fit of a gpufs GBFS estimator."""
    from gpufs.backends import get_backend
    from gpufs.engine.binning import BinMapper

    # Warm-up: numba compiles (or loads from its disk cache) each kernel on first use; 50,000
    # rows reach the parallel kernels too (below 32,768 rows they run serially), so no
    # compilation lands inside a timed fit.
    estimator_cls(**{**params, "n_estimators": 2}).fit(X[:50_000], y[:50_000])
    backend = get_backend(device)
    t_bin, _ = _timed(lambda: BinMapper(255, random_state=0).fit(X).transform(X, backend), device)
    t_one, _ = _timed(lambda: estimator_cls(**{**params, "n_estimators": 1}).fit(X, y), device)
    t_fit, model = _timed(
        lambda: estimator_cls(**{**params, "n_estimators": trees}).fit(X, y), device
    )
    rec = dict(
        tool=f"gpufs-{device}",
        bin_s=t_bin,
        fit_s=t_fit,
        fit_1_tree_s=t_one,
        per_tree_s=(t_fit - t_one) / (trees - 1),
        n_selected=int(len(model.selected_features_)),
        selected=model.selected_features_.tolist(),
    )
    return rec, model


def lightgbm_cegb_params(objective: str, depth: int, n_features: int, mu: float) -> dict:
    """LightGBM parameters for the same trees and the same first-use penalty as gpufs."""
    return dict(
        objective=objective,
        max_depth=depth,
        num_leaves=2**depth,
        learning_rate=0.1,
        max_bin=255,
        lambda_l2=1.0,
        min_data_in_leaf=1,
        min_sum_hessian_in_leaf=1e-3,
        num_threads=os.cpu_count(),
        verbose=-1,
        feature_pre_filter=False,
        deterministic=True,
        force_row_wise=True,
        cegb_tradeoff=1.0,
        cegb_penalty_feature_coupled=[LGB_PENALTY_SCALE * mu] * n_features,
    )


def time_lightgbm(X, y, params: dict, trees: int) -> dict:
    """Dataset construction alone, then a 1-round and a ``trees``-round training."""
    import lightgbm as lgb

    lgb.train(params, lgb.Dataset(X[:5000], y[:5000], params=params), 2)  # warm-up
    ds = lgb.Dataset(X, y, params=params, free_raw_data=False)
    t_bin, _ = _timed(ds.construct)
    t_one, _ = _timed(lambda: lgb.train(params, ds, num_boost_round=1))
    t_train, booster = _timed(lambda: lgb.train(params, ds, num_boost_round=trees))
    imp = booster.feature_importance("split")
    return dict(
        tool="lightgbm-cegb",
        bin_s=t_bin,
        fit_s=t_bin + t_train,
        fit_1_tree_s=t_one,
        per_tree_s=(t_train - t_one) / (trees - 1),
        n_selected=int((imp > 0).sum()),
        selected=np.flatnonzero(imp > 0).tolist(),
        version=lgb.__version__,
        lgb_penalty=params["cegb_penalty_feature_coupled"][0],
    )
