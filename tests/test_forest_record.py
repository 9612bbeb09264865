"""The forest record (``gpufs.forest._record``): the builder's bookkeeping, padding to the
deepest tree, the prediction matrix A, feature masks and per-tree gains."""

import numpy as np

from _forest_data import CPU, _binned, _data, _grow
from gpufs.engine.tree import Tree
from gpufs.forest import ForestBuilder


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


def _tree(depth, splits):
    """A tree of ``depth`` whose nodes ``splits`` (node -> feature) split, with gains 1."""
    t = Tree.empty(depth)
    for node, f in splits.items():
        t.arrays["feature"][node] = f
        t.arrays["gain"][node] = 1.0
    return t


def test_builder_records_pads_and_stacks():
    b = ForestBuilder(n_features=4)
    assert b.n_trees == 0
    b.add(_tree(1, {0: 2}), np.full(5, 1.0), column=0, depth=1, round_index=0, member=0)
    b.add(_tree(2, {0: 0, 1: 3}), np.full(5, 2.0), column=1, depth=2, round_index=1, member=3)
    assert b.n_trees == 2
    f = b.build(
        np,
        5,
        base_score=[0.5, -0.5],
        train_raw=None,
        method="bag",
        member_loss=[[1.0], [0.5]],
        round_stop=["converged"] * 2,
        oob_improvement=[],
        stop_reason="done",
    )
    assert f.n_trees == 2 and f.A.shape == (5, 2)
    np.testing.assert_array_equal(f.A[:, 1], 2.0)
    np.testing.assert_array_equal(f.feature_masks, [[0, 0, 1, 0], [1, 0, 0, 1]])
    assert f.tree_depth.tolist() == [1, 2] and f.tree_round.tolist() == [0, 1]
    assert f.tree_member.tolist() == [0, 3] and f.tree_column.tolist() == [0, 1]
    # the depth-1 tree is padded into the arrays of the deepest (depth-2) tree
    assert f.ensemble.max_depth == 2
    assert f.ensemble.trees[0].arrays["feature"].tolist() == [2, -1, -1, -1, -1, -1, -1]
    np.testing.assert_array_equal(f.tree_gains(), [[0, 0, 1, 0], [1, 0, 0, 1]])
    np.testing.assert_array_equal(f.coverage(), [True, False, True, True])
    f.drop_predictions()
    assert f.A is None and f.train_raw is None


def test_empty_builder():
    f = ForestBuilder(3).build(
        np,
        4,
        base_score=[0.0],
        train_raw=None,
        method="bag",
        member_loss=[],
        round_stop=[],
        oob_improvement=[],
        stop_reason="",
    )
    assert f.A.shape == (4, 0) and f.feature_masks.shape == (0, 3) and f.n_trees == 0
