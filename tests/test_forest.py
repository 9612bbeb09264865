"""Forest growing for ControlBurn (gpufs.forest): Algorithms 1 and 2 and their stopping rules,
the per-tree prediction matrix A, bootstrap-as-weights, tree variants, determinism."""
import numpy as np
import pytest

from gpufs._device import gpu_available
from gpufs.backends import get_backend
from gpufs.binning import BinMapper
from gpufs.forest import ForestParams, grow_forest, loss_converged
from gpufs.grower import TreeParams, grow_tree
from gpufs.penalties import PenaltyState
from gpufs.quantize import fixed_point_scale, quantize

CPU = get_backend("cpu")


def _data(m=400, d=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, d)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * X[:, 2] + 0.3 * rng.randn(m)
    return X, y


def _binned(X, max_bins=255):
    bm = BinMapper(max_bins, random_state=0).fit(X)
    return bm, bm.transform(X, CPU)


def _grow(X, y, task="regression", n_classes=0, seed=0, w=None, **kw):
    bm, Xb = _binned(X)
    return grow_forest(CPU, Xb, y, w, task, n_classes, bm, ForestParams(**kw),
                       random_state=seed)


# --- the convergence rule ---------------------------------------------------------------------


def test_loss_converged_rule():
    eps = 1e-3
    assert not loss_converged([0.5] * 4, 5, eps)           # fewer than N losses
    assert loss_converged([0.5] * 5, 5, eps)               # N equal losses
    assert loss_converged([0.9, 0.5, 0.5004, 0.5009, 0.5, 0.5001], 5, eps)
    assert not loss_converged([0.9, 0.5, 0.5004, 0.5011, 0.5, 0.5001], 5, eps)  # width 1.1e-3
    assert not loss_converged([0.9, 0.5, 0.5, 0.5, 0.5], 5, eps)  # 0.9 still in the tail
    assert loss_converged([0.2, 0.2], 2, 0.0)


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
        assert all(loss == 0.0 for s in f.member_loss for loss in s)
        assert "max_depth" in f.stop_reason
        assert f.oob_improvement == []


@pytest.mark.parametrize("method", ["bag", "bagboost"])
def test_every_round_ends_exactly_when_the_rule_first_fires(method):
    X, y = _data()
    f = _grow(X, y, method=method, max_depth=3, max_trees_per_round=40)
    for losses, why in zip(f.member_loss, f.round_stop):
        fired = [loss_converged(losses[:j], 5, 1e-3) for j in range(1, len(losses) + 1)]
        if why == "converged":
            assert fired[-1] and not any(fired[:-1])
        else:
            assert why == "max_trees_per_round" and len(losses) == 40 and not any(fired)
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
    y = np.sign(X[:, 0]) + 0.8 * rng.randn(300)   # a stump explains y; deeper trees overfit
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
    f = grow_forest(CPU, _binned(X)[1], yc, None, "classification", 2, _binned(X)[0],
                    ForestParams(method="bagboost", max_depth=2), random_state=0)
    assert len(f.member_loss) <= 2
    if len(f.member_loss) == 2:
        assert "max_depth" in f.stop_reason or f.oob_improvement[-1] <= 0
    # the first round fits y - p0 (p0 = class frequency): leaf values are mean residuals
    assert f.base_score[0] == pytest.approx(np.log(yc.mean() / (1 - yc.mean())))
    assert (np.abs(f.A) <= 1.0).all()


def test_multiclass_bagboost_one_tree_per_class_per_member():
    X, y = _data()
    y3 = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.int32)
    bm, Xb = _binned(X)
    f = grow_forest(CPU, Xb, y3, None, "classification", 3, bm,
                    ForestParams(method="bagboost", max_depth=2), random_state=0)
    assert f.tree_column.tolist() == [0, 1, 2] * (f.n_trees // 3)
    # the three trees of a member share the bootstrap: same member index, same round
    assert (f.tree_member.reshape(-1, 3) == f.tree_member[::3, None]).all()
    f_bag = grow_forest(CPU, Xb, y3, None, "classification", 3, bm,
                        ForestParams(method="bag", max_depth=2), random_state=0)
    assert set(f_bag.tree_column.tolist()) == {0, 1, 2}


# --- A, masks, bootstrap as weights -----------------------------------------------------------


def test_A_is_each_trees_prediction_and_masks_match_trees():
    X, y = _data()
    X[::17, 2] = np.nan
    f = _grow(X, y, method="bagboost", max_depth=3)
    P = f.tree_predictions(X, CPU)
    np.testing.assert_array_equal(P, f.A)
    bm, Xb = _binned(X)
    for t in (0, f.n_trees // 2, f.n_trees - 1):
        raw = f.ensemble.predict_binned(Xb, CPU, start=t, stop=t + 1)
        np.testing.assert_allclose(raw[:, 0] - f.base_score[0], f.A[:, t], rtol=0, atol=1e-12)
        feats = f.ensemble.trees[t].arrays["feature"]
        assert set(np.flatnonzero(f.feature_masks[t])) == set(feats[feats >= 0].tolist())
    assert f.A.shape == (X.shape[0], f.n_trees)
    assert f.feature_masks.shape == (f.n_trees, X.shape[1])


def test_bootstrap_counts_as_weights_equal_a_resampled_tree():
    X, y = _data(m=200)
    bm, Xb = _binned(X)
    f = grow_forest(CPU, Xb, y, None, "regression", 0, bm,
                    ForestParams(method="bag", max_depth=2, max_trees_per_round=5, tol=0.0),
                    random_state=7)
    rng = np.random.RandomState(7)
    draws = rng.randint(0, 200, size=200)
    # the same tree grown on the physically resampled rows, unit weights
    e = (y - y.mean())[draws]
    g, h = -e, np.ones_like(e)
    gs, hs = fixed_point_scale(g, 200), fixed_point_scale(h, 200)
    grown = grow_tree(CPU, np.ascontiguousarray(Xb[draws]), quantize(g, gs), quantize(h, hs),
                      gs, hs, bm.n_bins_, bm, PenaltyState(0.0, np.ones(6),
                                                           np.arange(6, dtype=np.int32)),
                      TreeParams(max_depth=1, reg_lambda=0.0, learning_rate=1.0,
                                 min_child_weight=1.0), 0)
    t0 = f.ensemble.trees[0].arrays
    n = grown.tree.arrays["feature"].shape[0]
    np.testing.assert_array_equal(t0["feature"][:n], grown.tree.arrays["feature"])
    np.testing.assert_array_equal(t0["bin_threshold"][:n], grown.tree.arrays["bin_threshold"])
    np.testing.assert_allclose(t0["value"][:n], grown.tree.arrays["value"], rtol=1e-9)


def test_sample_weights_of_one_change_nothing_and_zero_weight_rows_are_never_in_bag():
    X, y = _data(m=200)
    f0 = _grow(X, y, method="bagboost", max_depth=2)
    f1 = _grow(X, y, method="bagboost", max_depth=2, w=np.ones(200))
    np.testing.assert_array_equal(f0.A, f1.A)
    w = np.ones(200)
    w[:100] = 0.0
    y2 = y.copy()
    y2[:100] = 1e6  # rows with zero weight must not influence any leaf
    f2 = _grow(X, y2, method="bag", max_depth=2, w=w)
    assert np.abs(f2.A).max() < 1e3


# --- tree variants ----------------------------------------------------------------------------


def test_tree_types_sparse_single_and_feature_subsampling():
    X, y = _data(m=300, d=8)
    full = _grow(X, y, method="bagboost", max_depth=3)
    sparse = _grow(X, y, method="bagboost", max_depth=3, tree_type="sparse", sparse_mu=0.05)
    assert sparse.feature_masks.sum(1).mean() < full.feature_masks.sum(1).mean()
    single = _grow(X, y, method="bagboost", max_depth=2, tree_type="single")
    assert (single.feature_masks.sum(1) <= 1).all()
    assert single.coverage().all()
    # each member is a sweep over all features: every feature has a tree in every member
    for r, j in set(zip(single.tree_round.tolist(), single.tree_member.tolist())):
        sel = (single.tree_round == r) & (single.tree_member == j)
        assert sel.sum() == X.shape[1]
    np.testing.assert_array_equal(single.tree_predictions(X, CPU), single.A)
    # one dominant feature: plain stumps all use it; subsampled stumps reach others
    rng = np.random.RandomState(0)
    Xd = rng.randn(300, 8)
    yd = 5 * Xd[:, 0] + 0.5 * Xd[:, 1:].sum(1)
    stumps = _grow(Xd, yd, method="bag", max_depth=1)
    sub = _grow(Xd, yd, method="bag", max_depth=1, max_features=2)
    assert stumps.coverage().sum() == 1
    assert sub.coverage().sum() > 3


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
    assert a.A.shape != c.A.shape or not np.array_equal(a.A, c.A)


@pytest.mark.parametrize("kw, match", [
    (dict(method="boost"), "The 'method' parameter of ForestParams must be a str among"),
    (dict(tree_type="deep"), "The 'tree_type' parameter of ForestParams must be a str among"),
    (dict(max_depth=0), r"The 'max_depth' parameter of ForestParams must be an int in the "
                        r"range \[1, 16\]"),
    (dict(max_depth=17), r"'max_depth' parameter of ForestParams .* Got 17"),
    (dict(n_tail=0), "The 'n_tail' parameter of ForestParams must be an int"),
    (dict(tol=-1.0), "The 'tol' parameter of ForestParams must be a float"),
    (dict(tol=float("nan")), "The 'tol' parameter of ForestParams must be a float"),
    (dict(max_features=0), "The 'max_features' parameter of ForestParams"),
    (dict(max_features=1.5), "The 'max_features' parameter of ForestParams"),
    (dict(max_features="most"), "The 'max_features' parameter of ForestParams"),
    (dict(tree_type="single", max_features=2), "does not apply to tree_type='single'"),
])
def test_bad_forest_params(kw, match):
    X, y = _data(m=50)
    with pytest.raises(ValueError, match=match):
        _grow(X, y, **kw)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_gpu_forest_equals_cpu_forest():
    pytest.importorskip("gpufs.backends.gpu")
    import cupy as cp

    X, y = _data(m=2000, d=8)
    X[::13, 3] = np.nan
    bm, Xb = _binned(X)
    gpu = get_backend("gpu")
    for kw in (dict(method="bagboost", max_depth=4), dict(method="bag", max_depth=3,
                                                          max_features=0.5),
               dict(method="bagboost", max_depth=2, tree_type="single")):
        fc = grow_forest(CPU, Xb, y, None, "regression", 0, bm, ForestParams(**kw),
                         random_state=0)
        fg = grow_forest(gpu, cp.asarray(Xb), cp.asarray(y), None, "regression", 0, bm,
                         ForestParams(**kw), random_state=0)
        np.testing.assert_array_equal(fc.feature_masks, fg.feature_masks)
        for k, v in fc.ensemble.stacked().items():
            np.testing.assert_array_equal(v, fg.ensemble.stacked()[k], err_msg=k)
        np.testing.assert_allclose(fc.A, cp.asnumpy(fg.A), rtol=1e-12, atol=1e-12)


_SIM_SCRIPT = r'''
import sys
sys.path.insert(0, "tests")
import _cudasim_patch
_cudasim_patch.apply()  # the simulator's shared-array allocation races (see that module)
import numpy as np
from gpufs.backends import get_backend
from gpufs.binning import BinMapper
from gpufs.forest import ForestParams, grow_forest
cpu, gpu = get_backend("cpu"), get_backend("gpu")
rng = np.random.RandomState(0)
X = rng.randn(30, 3)
X[::7, 1] = np.nan
y = X[:, 0] + 0.3 * rng.randn(30)
bm = BinMapper(16).fit(X)
Xb = bm.transform(X, cpu)
cases = [("regression", 0, y, dict(method="bagboost", max_depth=2, max_trees_per_round=3)),
         ("regression", 0, y, dict(method="bag", max_depth=2, max_trees_per_round=3,
                                   max_features=2)),
         ("regression", 0, y, dict(method="bagboost", max_depth=1, tree_type="single",
                                   max_trees_per_round=3)),
         ("classification", 2, (y > 0).astype(np.int32),
          dict(method="bagboost", max_depth=2, max_trees_per_round=3))]
for task, nc, target, kw in cases:
    fc = grow_forest(cpu, Xb, target, None, task, nc, bm, ForestParams(**kw), random_state=0)
    fg = grow_forest(gpu, Xb, target, None, task, nc, bm, ForestParams(**kw), random_state=0)
    for k, v in fc.ensemble.stacked().items():
        assert np.array_equal(v, fg.ensemble.stacked()[k]), (kw, k)
    assert np.array_equal(fc.A, fg.A), kw
    assert np.array_equal(fc.feature_masks, fg.feature_masks), kw
    assert fc.oob_improvement == fg.oob_improvement, kw
print("SIM-FOREST-OK")
'''


@pytest.mark.cudasim
def test_forest_on_simulated_gpu_kernels_equals_cpu():
    """The GPU backend's kernels (numba CUDA simulator, own process) grow the CPU's forest."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    proc = subprocess.run([sys.executable, "-c", _SIM_SCRIPT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "SIM-FOREST-OK" in proc.stdout, proc.stderr[-4000:]
