"""The tree data model (``gpufs.engine.tree``): complete-tree layout, stacking and its caches,
prediction walked by hand on raw and binned features (missing values included), output
columns, partial ensembles, and what a pickle keeps."""

import pickle

import numpy as np
import pytest

from gpufs import _types as T
from gpufs.backends.cpu import CPUBackend
from gpufs.engine.binning import BinMapper
from gpufs.engine.tree import TREE_FIELDS, Tree, TreeEnsemble, n_nodes_for_depth
from gpufs.rules._categorical import CAT_WORDS

CPU = CPUBackend()


def test_layout():
    assert [n_nodes_for_depth(d) for d in range(5)] == [1, 3, 7, 15, 31]
    t = Tree.empty(2)
    assert set(t.arrays) == set(TREE_FIELDS)
    for name, dtype in TREE_FIELDS.items():
        # cat_bits has a word axis: empty without categorical splits, CAT_WORDS with them
        want = (7, 0) if name == "cat_bits" else (7,)
        assert t.arrays[name].shape == want and t.arrays[name].dtype == dtype
    assert Tree.empty(2, categorical=True).arrays["cat_bits"].shape == (7, CAT_WORDS)
    assert (t.feature == -1).all() and (t.value == 0).all()
    assert TREE_FIELDS["feature"] == T.FEATURE_DTYPE and TREE_FIELDS["bin_threshold"] == np.uint8
    with pytest.raises(AttributeError, match="no_such_field"):
        _ = t.no_such_field


def _hand_tree():
    """Root: feature 1, 'bin <= 2' (x <= 2.5) left, missing left; node 1 a leaf (+1.0);
    node 2: feature 0, 'bin <= 0' (x <= 0.5) left, missing right; leaves 5 (+3.0), 6 (-2.0)."""
    t = Tree.empty(2)
    t.feature[[0, 2]] = [1, 0]
    t.bin_threshold[[0, 2]] = [2, 0]
    t.threshold[[0, 2]] = [2.5, 0.5]
    t.missing_left[[0, 2]] = [True, False]
    t.value[[1, 5, 6]] = [1.0, 3.0, -2.0]
    return t


# Rows and where the hand tree sends them.
X = np.array(
    [
        [0.0, 1.0],  # x1 <= 2.5: node 1           -> +1
        [0.0, 7.0],  # x1 > 2.5, x0 <= 0.5: node 5  -> +3
        [4.0, 7.0],  # x1 > 2.5, x0 > 0.5: node 6   -> -2
        [np.nan, 7.0],  # x0 missing goes right: node 6 -> -2
        [4.0, np.nan],
    ]
)  # x1 missing goes left: node 1  -> +1
LEAF_VALUES = np.array([1.0, 3.0, -2.0, -2.0, 1.0])


def _binned():
    """Bins of X under cuts x0: [0.5], x1: [0.5, 1.5, 2.5] (bin = number of cuts below x)."""
    bm = BinMapper.from_dict(
        {"max_bins": 255, "subsample": None, "random_state": 0, "cuts": [[0.5], [0.5, 1.5, 2.5]]}
    )
    return bm.transform(X, CPU)


def test_prediction_walked_by_hand_on_raw_and_binned_features():
    Xb = _binned()
    assert Xb[:, 1].tolist() == [1, 3, 3, 3, 255] and Xb[:, 0].tolist() == [0, 0, 1, 255, 1]
    ens = TreeEnsemble(max_depth=2, n_features=2, base_score=np.array([0.25]))
    ens.append(_hand_tree(), 0)
    raw = ens.predict_raw(X, CPU)
    assert raw.shape == (5, 1) and raw.dtype == np.float64
    np.testing.assert_array_equal(raw[:, 0], 0.25 + LEAF_VALUES)
    np.testing.assert_array_equal(ens.predict_binned(Xb, CPU), raw)


def test_trees_add_to_their_output_column_in_order():
    ens = TreeEnsemble(max_depth=2, n_features=2, base_score=np.array([0.5, -1.0, 2.0]))
    ens.append(_hand_tree(), 2)
    ens.append(_hand_tree(), 0)
    ens.append(_hand_tree(), 2)
    assert ens.n_trees == 3 and ens.n_outputs == 3 and ens.tree_column == [2, 0, 2]
    raw = ens.predict_raw(X, CPU)
    np.testing.assert_array_equal(raw[:, 0], 0.5 + LEAF_VALUES)
    np.testing.assert_array_equal(raw[:, 1], np.full(5, -1.0))
    np.testing.assert_array_equal(raw[:, 2], 2.0 + LEAF_VALUES + LEAF_VALUES)
    # a slice of the trees, added to scores given by the caller
    out = np.zeros((5, 3))
    ens.predict_raw(X, CPU, start=1, stop=2, out=out)
    np.testing.assert_array_equal(out[:, 0], LEAF_VALUES)
    assert (out[:, 1:] == 0).all()
    np.testing.assert_array_equal(
        ens.predict_binned(_binned(), CPU, start=2),
        np.array([[0.5, -1.0, 2.0]]) + np.c_[0 * LEAF_VALUES, 0 * LEAF_VALUES, LEAF_VALUES],
    )


def test_an_empty_ensemble_predicts_the_base_score():
    ens = TreeEnsemble(max_depth=3, n_features=2, base_score=np.array([1.5, -0.5]))
    np.testing.assert_array_equal(ens.predict_raw(X, CPU), np.tile([1.5, -0.5], (5, 1)))
    s = ens.stacked()
    assert s["feature"].shape == (0, 15) and s["tree_column"].shape == (0,)


def test_stacked_arrays_are_cached_until_the_next_append():
    ens = TreeEnsemble(max_depth=2, n_features=2, base_score=np.zeros(1))
    ens.append(_hand_tree(), 0)
    s1 = ens.stacked()
    assert s1 is ens.stacked()  # cached
    assert s1["feature"].shape == (1, 7) and s1["tree_column"].dtype == np.int32
    ens.predict_raw(X, CPU)
    assert set(ens._device_cache) == {"cpu"}
    ens.append(Tree.empty(2), 0)
    assert ens._device_cache is None
    s2 = ens.stacked()
    assert s2 is not s1 and s2["feature"].shape == (2, 7)
    assert ens.stacked(1)["feature"].shape == (1, 7)  # a slice is never the cached whole
    # ``stop`` at the last tree is the whole ensemble: the cached arrays, not a new stack
    # (exact k's permutations predict with stop=n_trees hundreds of times)
    assert ens.stacked(0, 2) is s2 and ens.stacked(0, 5) is s2
    assert ens.stacked(0, 1)["feature"].shape == (1, 7)
    Xb = np.zeros((3, 2), np.uint8)
    np.testing.assert_array_equal(ens.predict_binned(Xb, CPU, 0, 2), ens.predict_binned(Xb, CPU))
    assert ens._arrays_for(CPU, 0, 2) is ens._arrays_for(CPU)


def test_pickle_keeps_the_trees_and_drops_the_caches():
    ens = TreeEnsemble(max_depth=2, n_features=2, base_score=np.array([0.25]))
    ens.append(_hand_tree(), 0)
    want = ens.predict_raw(X, CPU)
    assert ens._stacked is not None and ens._device_cache is not None
    back = pickle.loads(pickle.dumps(ens))
    assert back._stacked is None and back._device_cache is None
    np.testing.assert_array_equal(back.predict_raw(X, CPU), want)


def test_json_round_trip_predicts_the_same_bits():
    ens = TreeEnsemble(max_depth=2, n_features=2, base_score=np.array([0.1]))
    t = _hand_tree()
    t.value[[1, 5, 6]] = [0.1, 1 / 3, -2 / 7]  # values without a short decimal form
    t.threshold[2] = np.inf  # the split on missingness has threshold +inf
    ens.append(t, 0)
    back = TreeEnsemble.from_json(ens.to_json())
    for name in TREE_FIELDS:
        np.testing.assert_array_equal(back.trees[0].arrays[name], t.arrays[name])
    np.testing.assert_array_equal(back.predict_raw(X, CPU), ens.predict_raw(X, CPU))
