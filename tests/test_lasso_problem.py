"""The lasso a forest poses (``gpufs.lasso.forest_lasso_problem``): featureless trees left
out, the loss per target kind, and the multiclass stacking checked entry by entry."""

import numpy as np
import pytest

from gpufs.lasso import LassoProblem, forest_lasso_problem

A = np.array([[1.0, 2.0, 0.5, 4.0], [3.0, 0.0, 1.5, 4.0], [0.0, 1.0, 2.5, 4.0]])
MASKS = np.array([[True, False], [False, True], [True, True], [False, False]])  # tree 3: none


def test_regression_keeps_the_trees_with_features_and_the_squared_loss():
    y = np.array([1.0, 2.0, 3.0])
    w = np.array([1.0, 2.0, 1.0])
    p = forest_lasso_problem(A, MASKS, np.zeros(4, int), y, w, 0)
    assert isinstance(p, LassoProblem)
    assert p.trees.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(p.A, A[:, :3])
    assert p.y is y and p.sample_weight is w
    assert (p.loss, p.fit_intercept) == ("squared", True)


def test_every_tree_used_keeps_a_as_it_is():
    masks = MASKS.copy()
    masks[3, 0] = True
    p = forest_lasso_problem(A, masks, np.zeros(4, int), np.zeros(3), None, 0)
    assert p.A is A and p.trees.tolist() == [0, 1, 2, 3]


def test_two_classes_are_the_logistic_loss_on_float_codes():
    codes = np.array([0, 1, 1], np.int32)
    p = forest_lasso_problem(A, MASKS, np.zeros(4, int), codes, None, 2)
    assert (p.loss, p.fit_intercept) == ("logistic", True)
    assert p.y.dtype == np.float64 and p.y.tolist() == [0.0, 1.0, 1.0]
    assert p.sample_weight is None


@pytest.mark.parametrize("weighted", [False, True])
def test_multiclass_stacks_centred_class_blocks(weighted):
    codes = np.array([0, 2, 1], np.int32)
    output = np.array([0, 1, 2, 0])  # the class each tree predicts
    w = np.array([1.0, 3.0, 2.0]) if weighted else None
    p = forest_lasso_problem(A, MASKS, output, codes, w, 3)
    assert (p.loss, p.fit_intercept) == ("squared", False)
    assert p.trees.tolist() == [0, 1, 2] and p.A.shape == (9, 3) and p.y.shape == (9,)
    wv = np.ones(3) if w is None else w
    np.testing.assert_array_equal(p.sample_weight, np.tile(wv, 3))
    for c in range(3):
        block = slice(3 * c, 3 * c + 3)
        ind = (codes == c).astype(float)
        np.testing.assert_allclose(p.y[block], ind - (wv @ ind) / wv.sum(), rtol=0, atol=1e-15)
        for j, tree in enumerate([0, 1, 2]):
            col = p.A[block, j]
            if output[tree] == c:  # the tree's own class: its predictions, centred
                want = A[:, tree] - (wv @ A[:, tree]) / wv.sum()
                np.testing.assert_allclose(col, want, rtol=0, atol=1e-15)
                assert abs(wv @ col) < 1e-12
            else:  # another class's block: no contribution
                assert (col == 0).all()
