"""The forest algorithms (``gpufs.forest._algorithms``): incremental depth bagging and
bag-boosting (ControlBurn's Algorithms 1 and 2) and their stopping rules, classification,
determinism, and the GPU backend's forests equal to the CPU's."""

import re

import numpy as np
import pytest

from _forest_data import CPU, _binned, _data, _grow
from gpufs._device import gpu_available
from gpufs.backends import get_backend
from gpufs.forest import (
    ForestParams,
    IncrementalBagBoosting,
    IncrementalBagging,
    grow_forest,
    loss_converged,
)


def test_algorithm1_tiny_case_stops_after_n_tail_trees_per_depth():
    # y is a binary feature: every bootstrap tree fits it exactly, the loss is 0 from the first
    # tree on, so each depth converges after exactly N trees.
    rng = np.random.RandomState(0)
    x = rng.randint(0, 2, size=60).astype(float)
    X = np.c_[x, rng.randn(60)]
    for n_tail in (5, 3):
        f = _grow(X, x.copy(), method="bag", max_depth=3, n_tail=n_tail, tol=1e-3)
        assert [len(s) for s in f.member_loss] == [n_tail] * 3
        assert f.round_stop == ["converged"] * 3
        assert f.tree_depth.tolist() == [1] * n_tail + [2] * n_tail + [3] * n_tail
        # a leaf's value is a mean of 16-bit fixed-point gradients (gpufs.engine.quantize):
        # off the exact fit by at most 2**-15 of the largest |g| (1 here), so the squared loss
        # of a tree that fits y is at most 2**-30
        assert all(loss <= 2.0**-30 for s in f.member_loss for loss in s)
        assert "max_depth" in f.stop_reason
        assert f.oob_improvement == []


@pytest.mark.parametrize("method", ["bag", "bagboost"])
def test_every_round_ends_exactly_when_the_rule_first_fires(method):
    X, y = _data()
    f = _grow(X, y, method=method, max_depth=3, max_trees_per_round=40)
    assert "converged" in f.round_stop  # the rule under test fired in some round
    for losses, why in zip(f.member_loss, f.round_stop):
        fired = [loss_converged(losses[:j], 5, 1e-3) for j in range(1, len(losses) + 1)]
        assert why in ("converged", "max_trees_per_round")
        # a round ends at the first tree where the rule fires, or at the cap if it never does
        assert (
            fired.index(True) + 1 == len(losses)
            if why == "converged"
            else (len(losses) == 40 and not any(fired))
        )
    if method == "bag":
        assert sorted(set(f.tree_depth.tolist())) == [1, 2, 3]


def test_max_trees_per_round_caps_a_round():
    X, y = _data()
    f = _grow(X, y, method="bag", max_depth=2, tol=0.0, max_trees_per_round=7)
    assert [len(s) for s in f.member_loss] == [7, 7]
    assert f.round_stop == ["max_trees_per_round"] * 2


# --- Algorithm 2: OOB stopping ----------------------------------------------------------------


def _oob_oracle(f, X, y, seed):
    """Recompute each round's OOB improvement from A, redrawing the bootstraps (squared loss)."""
    m = X.shape[0]
    rng = np.random.RandomState(seed)
    F = np.full(m, y.mean())
    deltas = []
    for r in range(len(f.member_loss)):
        cols = np.flatnonzero(f.tree_round == r)
        oob_sum, oob_n = np.zeros(m), np.zeros(m)
        for t in cols:
            counts = np.bincount(rng.randint(0, m, size=m), minlength=m)
            oob_sum += np.where(counts == 0, f.A[:, t], 0.0)
            oob_n += counts == 0
        rows = oob_n > 0
        before = np.mean((y[rows] - F[rows]) ** 2)
        after = np.mean((y[rows] - F[rows] - oob_sum[rows] / oob_n[rows]) ** 2)
        deltas.append(before - after)
        F = F + f.A[:, cols].mean(axis=1)
    return deltas, F


def test_algorithm2_stops_at_first_non_positive_oob_improvement():
    rng = np.random.RandomState(1)
    X = rng.randn(300, 4)
    y = np.sign(X[:, 0]) + 0.8 * rng.randn(300)  # a stump explains y; deeper trees overfit
    f = _grow(X, y, method="bagboost", max_depth=10, seed=3)
    d = f.oob_improvement
    assert len(d) == len(f.member_loss) < 10
    assert d[-1] <= 0 and all(x > 0 for x in d[:-1])
    assert "OOB improvement" in f.stop_reason
    # every round grows trees one depth deeper than the last
    assert f.tree_depth.tolist() == (f.tree_round + 1).tolist()
    oracle, F = _oob_oracle(f, X, y, 3)
    np.testing.assert_allclose(d, oracle, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(f.train_raw[:, 0], F, rtol=1e-12, atol=1e-12)


def test_algorithm2_min_rounds_goes_past_a_negative_delta():
    rng = np.random.RandomState(1)
    X = rng.randn(300, 4)
    y = np.sign(X[:, 0]) + 0.8 * rng.randn(300)
    f1 = _grow(X, y, method="bagboost", max_depth=10, seed=3)
    f2 = _grow(X, y, method="bagboost", max_depth=10, seed=3, min_rounds=len(f1.member_loss) + 2)
    assert len(f2.member_loss) >= len(f1.member_loss) + 2
    np.testing.assert_array_equal(f2.A[:, : f1.n_trees], f1.A)


def test_algorithm2_classification_residuals_and_max_depth_stop():
    X, y = _data()
    yc = (y > np.median(y)).astype(np.int32)
    f = grow_forest(
        CPU,
        _binned(X)[1],
        yc,
        None,
        "classification",
        2,
        _binned(X)[0],
        ForestParams(method="bagboost", max_depth=2),
        random_state=0,
    )
    # both rounds improve out of bag, so the forest stops at max_depth
    assert len(f.member_loss) == 2 and f.stop_reason == "reached max_depth=2"
    assert all(d > 0 for d in f.oob_improvement) and len(f.oob_improvement) == 2
    # the first round fits y - p0 (p0 = class frequency): leaf values are mean residuals
    assert f.base_score[0] == pytest.approx(np.log(yc.mean() / (1 - yc.mean())))
    assert (np.abs(f.A) <= 1.0).all()


def test_multiclass_bagboost_one_tree_per_class_per_member():
    X, y = _data()
    y3 = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.int32)
    bm, Xb = _binned(X)
    f = grow_forest(
        CPU,
        Xb,
        y3,
        None,
        "classification",
        3,
        bm,
        ForestParams(method="bagboost", max_depth=2),
        random_state=0,
    )
    assert f.tree_column.tolist() == [0, 1, 2] * (f.n_trees // 3)
    # the three trees of a member share the bootstrap: same member index, same round
    assert (f.tree_member.reshape(-1, 3) == f.tree_member[::3, None]).all()
    f_bag = grow_forest(
        CPU,
        Xb,
        y3,
        None,
        "classification",
        3,
        bm,
        ForestParams(method="bag", max_depth=2),
        random_state=0,
    )
    assert set(f_bag.tree_column.tolist()) == {0, 1, 2}


def test_one_class_per_algorithm():
    X, y = _data(m=200)
    bm, Xb = _binned(X)
    for cls, method in ((IncrementalBagging, "bag"), (IncrementalBagBoosting, "bagboost")):
        params = ForestParams(method=method, max_depth=2, max_trees_per_round=5)
        direct = cls(CPU, params, random_state=4).grow(Xb, y, None, "regression", 0, bm)
        via = grow_forest(CPU, Xb, y, None, "regression", 0, bm, params, random_state=4)
        np.testing.assert_array_equal(direct.A, via.A)
        assert direct.method == method == cls.method


def test_forest_is_deterministic_and_seed_dependent():
    X, y = _data()
    a = _grow(X, y, method="bagboost", max_depth=3, seed=5, max_features=0.5)
    b = _grow(X, y, method="bagboost", max_depth=3, seed=5, max_features=0.5)
    c = _grow(X, y, method="bagboost", max_depth=3, seed=6, max_features=0.5)
    np.testing.assert_array_equal(a.A, b.A)
    np.testing.assert_array_equal(a.feature_masks, b.feature_masks)
    for k, v in a.ensemble.stacked().items():
        np.testing.assert_array_equal(v, b.ensemble.stacked()[k])
    assert a.oob_improvement == b.oob_improvement
    assert not np.array_equal(a.A, c.A)  # another seed: other bootstraps (shapes may differ)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_gpu_forest_equals_cpu_forest():
    pytest.importorskip("gpufs.backends.gpu.backend")
    import cupy as cp

    X, y = _data(m=2000, d=8)
    X[::13, 3] = np.nan
    bm, Xb = _binned(X)
    gpu = get_backend("gpu")
    for kw in (
        dict(method="bagboost", max_depth=4),
        dict(method="bag", max_depth=3, max_features=0.5),
        dict(method="bagboost", max_depth=2, tree_type="single"),
    ):
        fc = grow_forest(CPU, Xb, y, None, "regression", 0, bm, ForestParams(**kw), random_state=0)
        fg = grow_forest(
            gpu,
            cp.asarray(Xb),
            cp.asarray(y),
            None,
            "regression",
            0,
            bm,
            ForestParams(**kw),
            random_state=0,
        )
        np.testing.assert_array_equal(fc.feature_masks, fg.feature_masks)
        for k, v in fc.ensemble.stacked().items():
            np.testing.assert_array_equal(v, fg.ensemble.stacked()[k], err_msg=k)
        np.testing.assert_allclose(fc.A, cp.asnumpy(fg.A), rtol=1e-12, atol=1e-12)


@pytest.mark.cudasim
def test_forest_on_simulated_gpu_kernels_equals_cpu():
    """The GPU backend's kernels (numba CUDA simulator, own process, started early by
    ``_background_files``) grow the CPU's forests: ``tests/_cudasim_forest.py``."""
    import _background_files

    code, out = _background_files.result("_cudasim_forest.py")
    assert code == 0, f"simulator forest check failed:\n{out[-4000:]}"
    assert re.search(r"7 passed", out), out[-2000:]
