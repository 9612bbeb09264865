"""Tree costs and selected features (``gpufs.lasso._costs``): by hand, with feature costs,
groups and group costs, and every rejected input."""

import numpy as np
import pytest

from gpufs.lasso import selected_features, tree_costs

MASKS = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 1]], dtype=bool)


def test_tree_costs_by_hand():
    masks = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(tree_costs(masks), [2, 1, 0, 3])
    np.testing.assert_allclose(
        tree_costs(masks, feature_costs=[1.0, 2.0, 0.5, 4.0]), [3.0, 0.5, 0.0, 5.5]
    )
    groups = [0, 0, 1, 1]
    # One per group by default; a tree pays once per group however many members it uses.
    np.testing.assert_array_equal(tree_costs(masks, groups=groups), [1, 1, 0, 2])
    np.testing.assert_allclose(
        tree_costs(masks, groups=groups, group_costs=[3.0, 5.0]), [3.0, 5.0, 0.0, 8.0]
    )
    # Without group_costs a group costs the sum of its members' feature costs.
    np.testing.assert_allclose(
        tree_costs(masks, [1.0, 2.0, 0.5, 4.0], groups=groups), [3.0, 4.5, 0.0, 7.5]
    )


def test_selected_features_are_the_features_of_kept_trees():
    np.testing.assert_array_equal(selected_features([0.0, 0.5, 0.0, 0.0], MASKS), [2])
    np.testing.assert_array_equal(selected_features([1.0, 0.0, 3.0, 2.0], MASKS), [0, 1, 2, 3])
    # a tree that uses no feature selects nothing, however large its weight
    assert selected_features([0.0, 0.0, 9.0, 0.0], MASKS).size == 0
    # the threshold: weights at or below it do not keep a tree
    np.testing.assert_array_equal(
        selected_features([0.1, 0.2, 0.0, 0.0], MASKS, threshold=0.15), [2]
    )
    assert selected_features(np.zeros(4), MASKS).dtype == np.int64


def test_bad_costs_and_masks():
    masks = np.array([[1, 0, 1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 1, 0, 0, 1]], dtype=bool)
    with pytest.raises(ValueError, match="groups must have shape"):
        tree_costs(masks, groups=[0, 1])
    with pytest.raises(ValueError, match="tree_feature_masks must be 2-D"):
        tree_costs(masks[0])
    with pytest.raises(
        ValueError,
        match=r"weights has shape \(9,\) but tree_feature_masks "
        r"has 2 rows",
    ):
        selected_features(np.ones(9), masks)
    with pytest.raises(ValueError, match="feature_costs must be >= 0"):
        tree_costs(masks, feature_costs=-np.ones(masks.shape[1]))
    with pytest.raises(ValueError, match="group_costs must be >= 0"):
        tree_costs(masks, groups=np.zeros(masks.shape[1], int), group_costs=[-2.0])
    with pytest.raises(ValueError, match="group_costs has length 1 but groups uses labels up to 1"):
        tree_costs(masks, groups=np.arange(masks.shape[1]) % 2, group_costs=[1.0])
    with pytest.raises(ValueError, match="either feature_costs or group_costs"):
        tree_costs(
            masks, np.ones(masks.shape[1]), groups=np.zeros(masks.shape[1], int), group_costs=[1.0]
        )
    with pytest.raises(ValueError, match="group_costs was given without groups"):
        tree_costs(masks, group_costs=[1.0])
    with pytest.raises(ValueError, match="groups labels must be >= 0"):
        tree_costs(masks, groups=-np.ones(masks.shape[1], int))
    with pytest.raises(ValueError, match="boolean"):
        tree_costs(masks * 2)
