"""The lambda descent and bisection to exactly k features (``gpufs.lasso._search``): every k
reached where it can be, unreachable k reported with the reason, zero-cost trees as free
features, determinism and bad k."""

import numpy as np
import pytest

from _lasso_data import _forest, _one_feature_per_tree, small  # noqa: F401 (a fixture)
from gpufs.lasso import (
    Datafit,
    FeatureCosts,
    KSearch,
    UnreachableKError,
    select_k,
    selected_features,
    selections_by_k,
    solve_lasso,
    tree_costs,
)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_bisection_hits_every_k(loss):
    A, y, masks = _one_feature_per_tree(loss=loss)
    n = masks.shape[1]
    for k in range(1, n + 1):
        sel = select_k(A, y, masks, k, datafit=Datafit(loss=loss))
        assert sel.exact and sel.k == k and sel.features.size == k
        np.testing.assert_array_equal(sel.features, selected_features(sel.weights, masks))
        # The lambda it reports really gives those features.
        res = solve_lasso(A, y, tree_costs(masks), sel.lam, datafit=Datafit(loss=loss))
        np.testing.assert_array_equal(selected_features(res.weights, masks), sel.features)
    path = selections_by_k(A, y, masks, n, datafit=Datafit(loss=loss))
    assert path.ks == list(range(1, n + 1)) and path.unreachable == {}
    for k, sel in path.selections.items():
        assert sel.features.size == k
    assert np.all(np.diff(path.lambdas) < 0)
    assert path.lambdas[0] == pytest.approx(path.lambda_max)


def test_bisection_on_a_real_forest_with_groups():
    A, y, masks = _forest(200, 40, seed=5)
    groups = np.array([0, 0, 1, 2, 2, 3, 4, 4])
    path = selections_by_k(A, y, masks, 5, costs=FeatureCosts(groups=groups))
    # k = 1 and 4 are unreachable on this forest: a single lambda step brings two features in
    assert path.ks == [2, 3, 5] and sorted(path.unreachable) == [1, 4]
    for k, sel in path.selections.items():
        assert sel.features.size == k
        # Selected = every feature of the trees with positive weight.
        used = masks[np.asarray(sel.weights) > 0].any(axis=0)
        np.testing.assert_array_equal(np.flatnonzero(used), sel.features)
    assert path.unreachable[1].startswith("the number of selected features jumps from 0")
    assert path.unreachable[4].startswith("the number of selected features jumps from 3")
    # the nearest selections around each unreachable k, for a caller that completes it
    assert sorted(path.nearest) == [1, 4]
    below, above = path.nearest[4]
    assert below.k == 3 and above.k == 5 and not below.exact and not above.exact
    assert set(below.features.tolist()) < set(above.features.tolist())
    assert path.nearest[1][0] is None or path.nearest[1][0].k == 0


def test_unreachable_k_is_reported():
    # Every tree uses two features: the count moves in steps of 2, odd k are unreachable.
    A, y, eye = _one_feature_per_tree(n=6)
    masks = np.repeat(eye, 2, axis=1)  # tree i uses features 2i and 2i+1
    with pytest.raises(
        UnreachableKError,
        match=r"k=3 is unreachable: the number of selected "
        r"features jumps from 2 .* to 4",
    ) as info:
        select_k(A, y, masks, 3)
    assert info.value.below.k == 2 and info.value.above.k == 4
    below = select_k(A, y, masks, 3, strict=False)
    assert not below.exact and below.k == 2
    path = selections_by_k(A, y, masks, 6)
    assert path.ks == [2, 4, 6]
    assert sorted(path.unreachable) == [1, 3, 5]
    assert "jumps from 0" in path.unreachable[1]


def test_a_jump_one_tree_makes_stops_the_bisection_at_once():
    """Issue 35: when the one tree that enters between two lambdas brings more new features
    than k needs, no lambda in between gives k, and bisecting on to the relative width (1e-7,
    some 20 more solves per unreachable k) only narrows the bracket around its entry."""
    A, y, eye = _one_feature_per_tree(n=6)
    masks = np.repeat(eye, 3, axis=1)  # tree i uses features 3i, 3i+1 and 3i+2
    for k in (1, 2, 4, 5):
        with pytest.raises(
            UnreachableKError,
            match=r"the one tree that enters there brings "
            r"3 new features at once",
        ) as info:
            select_k(A, y, masks, k)
        below, above = info.value.below, info.value.above
        assert above.k - below.k == 3 and below.k < k < above.k
        # the solution below k and the next one above, as the full bisection finds them
        full = _full_bisection_bracket(A, y, masks, k)
        assert (below.k, above.k) == full
        assert above.n_solves <= 12, above.n_solves
    # the reachable k are still found
    assert select_k(A, y, masks, 6).k == 6


def _full_bisection_bracket(A, y, masks, k):
    """(k below, k above) of the bracket that bisection to the relative width finds (the rule
    switched off)."""
    from gpufs.lasso import _search

    rule = _search._Search.one_tree_jump
    _search._Search.one_tree_jump = lambda self, hi, lo, target: 0
    try:
        with pytest.raises(UnreachableKError) as info:
            select_k(A, y, masks, k)
    finally:
        _search._Search.one_tree_jump = rule
    assert info.value.above.n_solves > 20
    return info.value.below.k, info.value.above.k


def test_zero_cost_trees_are_free_features():
    """A feature of cost 0 is free: its tree is never penalized, so it is selected at every
    lambda and counts toward k."""
    A, y, masks = _one_feature_per_tree(n=6)
    costs = np.array([1.0, 1.0, 1.0, 0.0, 1.0, 1.0])  # feature 3 is free
    for k in range(1, 7):
        sel = select_k(A, y, masks, k, costs=FeatureCosts(feature_costs=costs))
        assert sel.k == k and 3 in sel.features.tolist()
    # two free features: k = 1 cannot be reached, and says why
    costs[0] = 0.0
    with pytest.raises(
        UnreachableKError,
        match=r"k=1 is unreachable: the zero-cost \(free\) "
        r"trees alone select 2 features",
    ) as info:
        select_k(A, y, masks, 1, costs=FeatureCosts(feature_costs=costs))
    assert info.value.below is None and info.value.above.features.tolist() == [0, 3]
    sparsest = select_k(A, y, masks, 1, costs=FeatureCosts(feature_costs=costs), strict=False)
    assert not sparsest.exact and sparsest.features.tolist() == [0, 3]
    sel = select_k(A, y, masks, 2, costs=FeatureCosts(feature_costs=costs))
    assert sel.features.tolist() == [0, 3]
    # every tree free: lambda has no effect, every useful tree is kept
    with pytest.raises(UnreachableKError, match="zero-cost"):
        select_k(A, y, masks, 2, costs=FeatureCosts(feature_costs=np.zeros(6)))
    path = selections_by_k(A, y, masks, 6, costs=FeatureCosts(feature_costs=costs))
    assert path.ks == [2, 3, 4, 5, 6] and sorted(path.unreachable) == [1]


def test_path_reports_ks_beyond_the_end():
    A, y, masks = _one_feature_per_tree(n=5)
    A[:, 4] = np.random.default_rng(1).normal(size=A.shape[0])  # pure noise tree
    y = A[:, :4] @ np.ones(4)  # noiseless: at tiny lambda the noise tree may still enter
    path = selections_by_k(A, y, masks, 5, search=KSearch(lambda_min_ratio=0.5), n_lambdas=3)
    # the grid ends at lambda_max / 2, where the noise tree has not entered yet
    assert path.ks == [1, 2, 3, 4] and list(path.unreachable) == [5]
    assert path.unreachable[5] == (
        "no lambda down to 1.01477 selects 5 features; the most selected on the path is 4"
    )
    assert path.lambdas[-1] == pytest.approx(0.5 * path.lambda_max)


def test_search_is_deterministic():
    A2, y2, masks2 = _forest(150, 40, seed=6)
    sketched = Datafit(sketch="count", sketch_size=100)
    sels = [select_k(A2, y2, masks2, 3, datafit=sketched) for _ in range(2)]
    assert sels[0].weights.tobytes() == sels[1].weights.tobytes()
    assert sels[0].lam == sels[1].lam
    paths = [selections_by_k(A2, y2, masks2, 4) for _ in range(2)]
    assert paths[0].lambdas.tobytes() == paths[1].lambdas.tobytes()
    for k in paths[0].ks:
        assert paths[0].selections[k].weights.tobytes() == paths[1].selections[k].weights.tobytes()


def test_bad_k(small):
    A, y, masks, u = small
    with pytest.raises(ValueError, match="tree_feature_masks has 9 rows but A has 10 columns"):
        select_k(A, y, masks[:-1], 1)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        select_k(A, y, masks, 0)
    with pytest.raises(ValueError, match="k must be an integer"):
        select_k(A, y, masks, 2.5)
    n_used = int(masks.any(axis=0).sum())
    with pytest.raises(
        ValueError,
        match=rf"k={n_used + 1} is larger than the number of features "
        rf"the forest uses: its trees split on {n_used} of the "
        rf"{masks.shape[1]} features",
    ):
        select_k(A, y, masks, n_used + 1)
    with pytest.raises(ValueError, match="k_max must be >= 1"):
        selections_by_k(A, y, masks, 0)
    with pytest.raises(ValueError, match=rf"k_max={n_used + 1} is larger"):
        selections_by_k(A, y, masks, n_used + 1)


def test_record_keeps_the_path_the_k_search_passed_through():
    A, y, masks = _forest(200, 40, seed=5)
    groups = np.array([0, 0, 1, 2, 2, 3, 4, 4])
    full = selections_by_k(A, y, masks, 5, costs=FeatureCosts(groups=groups))
    record = {}
    sel = select_k(A, y, masks, 5, costs=FeatureCosts(groups=groups), record=record)
    points = record["path"]
    assert points.n_solves == sel.n_solves  # no solve beyond the search's own
    np.testing.assert_array_equal(points.selections[5].features, sel.features)
    assert set(points.ks) | set(points.unreachable) == {1, 2, 3, 4, 5}
    for k, s in points.selections.items():
        assert s.features.size == k
        # the lambda really gives those features
        res = solve_lasso(A, y, tree_costs(masks, groups=groups), s.lam)
        np.testing.assert_array_equal(selected_features(res.weights, masks), s.features)
    # every k the full path cannot reach is missing here too
    assert set(full.unreachable) <= set(points.unreachable)
    # an unreachable k still leaves its path in the record
    record = {}
    with pytest.raises(UnreachableKError):
        select_k(A, y, masks, 4, costs=FeatureCosts(groups=groups), record=record)
    assert 4 in record["path"].unreachable and record["path"].ks
