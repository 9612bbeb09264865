"""One tree of the forest (``gpufs.forest._trees``): bootstrap counts as weights equal a tree
grown on resampled rows, sample weights, tree types and per-tree feature subsets."""

import numpy as np

from _forest_data import CPU, _binned, _data, _grow
from gpufs.engine.grower import TreeParams, grow_tree
from gpufs.engine.penalties import PenaltyState
from gpufs.engine.quantize import fixed_point_scale, quantize
from gpufs.forest import ForestParams, grow_forest
from gpufs.forest._trees import ColumnBins, TreeGrower


def test_bootstrap_counts_as_weights_equal_a_resampled_tree():
    X, y = _data(m=200)
    bm, Xb = _binned(X)
    f = grow_forest(
        CPU,
        Xb,
        y,
        None,
        "regression",
        0,
        bm,
        ForestParams(method="bag", max_depth=2, max_trees_per_round=5, tol=0.0),
        random_state=7,
    )
    rng = np.random.RandomState(7)
    draws = rng.randint(0, 200, size=200)
    # the same tree grown on the physically resampled rows, unit weights
    e = (y - y.mean())[draws]
    g, h = -e, np.ones_like(e)
    gs, hs = fixed_point_scale(g, 200), fixed_point_scale(h, 200)
    grown = grow_tree(
        CPU,
        np.ascontiguousarray(Xb[draws]),
        quantize(g, gs),
        quantize(h, hs),
        gs,
        hs,
        bm.n_bins_,
        bm,
        PenaltyState(0.0, np.ones(6), np.arange(6, dtype=np.int32)),
        TreeParams(max_depth=1, reg_lambda=0.0, learning_rate=1.0, min_child_weight=1.0),
        0,
    )
    t0 = f.ensemble.trees[0].arrays
    n = grown.tree.arrays["feature"].shape[0]
    np.testing.assert_array_equal(t0["feature"][:n], grown.tree.arrays["feature"])
    np.testing.assert_array_equal(t0["bin_threshold"][:n], grown.tree.arrays["bin_threshold"])
    # The two routes quantize different arrays (g x count vs the resampled g), so with 16-bit
    # fixed point (|g_q| <= 2**15) their leaf means differ by at most the two rounding steps:
    # each row is off by at most half a step (0.5 / scale), and with reg_lambda = 0 and exact
    # (integer-count) hessians a leaf value is the mean of its rows' g.
    counts = np.bincount(draws, minlength=200).astype(np.float64)
    gsw = fixed_point_scale(-(y - y.mean()) * counts, 200)
    np.testing.assert_allclose(
        t0["value"][:n], grown.tree.arrays["value"], rtol=0, atol=0.5 / gs + 0.5 / gsw
    )
    assert not np.array_equal(t0["value"][:n], grown.tree.arrays["value"])  # rounding shows


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


def test_tree_grower_subset_and_single_feature():
    X, y = _data(m=300, d=6)
    bm, Xb = _binned(X)
    ones = np.ones(300)
    resid = y - y.mean()
    grower = TreeGrower(CPU, ForestParams(max_depth=3), np.ones(6), np.arange(6, dtype=np.int32))
    subset = np.zeros(6, dtype=bool)
    subset[[3, 5]] = True
    tree, pred = grower.grow(Xb, bm.n_bins_, bm, resid, ones, 3, 0, subset=subset)
    used = set(tree.arrays["feature"][tree.arrays["feature"] >= 0].tolist())
    assert used and used <= {3, 5}
    assert pred.shape == (300,) and np.isfinite(pred).all()
    # a single-feature tree grows on one column and reports the whole matrix's feature index
    col = np.ascontiguousarray(Xb[:, 1:2])
    tree, pred = grower.grow(col, bm.n_bins_[1:2], ColumnBins(bm, 1), resid, ones, 2, 1, feature=1)
    assert set(tree.arrays["feature"][tree.arrays["feature"] >= 0].tolist()) == {1}
    ok = tree.arrays["feature"] >= 0
    np.testing.assert_array_equal(
        tree.arrays["threshold"][ok],
        [bm.threshold_value(1, b) for b in tree.arrays["bin_threshold"][ok]],
    )
