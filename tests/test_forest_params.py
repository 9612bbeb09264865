"""Forest parameters (``gpufs.forest._params``): the convergence rule, the constraints of every
field, and the per-tree feature subset sizes."""

import pytest

from _forest_data import _data, _grow
from gpufs.forest import ForestParams, check_forest_params, loss_converged
from gpufs.forest._params import n_subset


def test_loss_converged_rule():
    eps = 1e-3
    assert not loss_converged([0.5] * 4, 5, eps)  # fewer than N losses
    assert loss_converged([0.5] * 5, 5, eps)  # N equal losses
    assert loss_converged([0.9, 0.5, 0.5004, 0.5009, 0.5, 0.5001], 5, eps)
    assert not loss_converged([0.9, 0.5, 0.5004, 0.5011, 0.5, 0.5001], 5, eps)  # width 1.1e-3
    assert not loss_converged([0.9, 0.5, 0.5, 0.5, 0.5], 5, eps)  # 0.9 still in the tail
    assert loss_converged([0.2, 0.2], 2, 0.0)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(method="boost"), "The 'method' parameter of ForestParams must be a str among"),
        (dict(tree_type="deep"), "The 'tree_type' parameter of ForestParams must be a str among"),
        (
            dict(max_depth=0),
            r"The 'max_depth' parameter of ForestParams must be an int in the "
            r"range \[1, 16\]",
        ),
        (dict(max_depth=17), r"'max_depth' parameter of ForestParams .* Got 17"),
        (dict(n_tail=0), "The 'n_tail' parameter of ForestParams must be an int"),
        (dict(tol=-1.0), "The 'tol' parameter of ForestParams must be a float"),
        (dict(tol=float("nan")), "The 'tol' parameter of ForestParams must be a float"),
        (dict(max_features=0), "The 'max_features' parameter of ForestParams"),
        (dict(max_features=1.5), "The 'max_features' parameter of ForestParams"),
        (dict(max_features="most"), "The 'max_features' parameter of ForestParams"),
        (dict(tree_type="single", max_features=2), "does not apply to tree_type='single'"),
    ],
)
def test_bad_forest_params(kw, match):
    X, y = _data(m=50)
    with pytest.raises(ValueError, match=match):
        _grow(X, y, **kw)


def test_valid_params_pass_and_subset_sizes():
    check_forest_params(ForestParams(max_features="sqrt", tree_type="sparse"))
    assert [n_subset(v, 10) for v in (None, "sqrt", "log2", 3, 20, 0.25, 0.01)] == [
        10,
        3,
        3,
        3,
        10,
        2,
        1,
    ]
    assert n_subset("log2", 1) == 1
