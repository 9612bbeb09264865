"""The Omega rule of gpufs/engine/penalties.py's docstring, on hand-built cases and on fitted
models."""

import math

import numpy as np
import pytest

from _reference import RefOmega, reference_grow_tree
from gpufs import GBFSClassifier, GBFSRegressor
from gpufs.backends.cpu import CPUBackend
from gpufs.engine.binning import BinMapper
from gpufs.engine.grower import TreeParams, grow_tree
from gpufs.engine.penalties import PenaltyState

BACKEND = CPUBackend()
SCALE = 1024.0  # exact fixed point for the hand-built gradients below


def _grid(n_bins, m, gfun):
    """m rows per cell of the full grid of bin values; gradient from gfun(cell)."""
    cells = np.array(np.meshgrid(*[np.arange(b) for b in n_bins], indexing="ij"))
    cells = cells.reshape(len(n_bins), -1).T
    Xb = np.repeat(cells, m, axis=0).astype(np.uint8)
    g = np.array([gfun(*c) for c in Xb], dtype=np.float64)
    return np.ascontiguousarray(Xb), g


def _grow(Xb, g, n_bins, ps, depth, tree_index=0):
    n_bins = np.asarray(n_bins, np.int32)
    mapper = BinMapper.from_dict(
        {
            "max_bins": 255,
            "subsample": None,
            "random_state": 0,
            "cuts": [list(np.arange(b - 1) + 0.5) for b in n_bins],
        }
    )
    gq = np.rint(g * SCALE).astype(np.int64)
    hq = np.full(g.shape[0], int(SCALE), np.int64)
    return grow_tree(
        BACKEND,
        Xb,
        gq,
        hq,
        SCALE,
        SCALE,
        n_bins,
        mapper,
        ps,
        TreeParams(max_depth=depth, reg_lambda=0.0, min_child_weight=0.0),
        tree_index=tree_index,
    )


def _ref(Xb, g, n_bins, omega, depth, tree_index=0):
    gq = np.rint(g * SCALE).astype(np.int64)
    hq = np.full(g.shape[0], int(SCALE), np.int64)
    return reference_grow_tree(
        Xb,
        gq,
        hq,
        SCALE,
        SCALE,
        np.asarray(n_bins),
        omega,
        max_depth=depth,
        reg_lambda=0.0,
        min_child_weight=0.0,
        tree_index=tree_index,
    )


# Feature 0 (4 bins) splits the rows into A (bins 0, 1) and B (bins 2, 3); feature 1 (2 bins)
# matters a lot in A and a little in B. Raw gains (lambda = 0): root f0 4000, f1 270;
# in A: f1 320, f0 0; in B: f0 20, f1 28.8; in B's left child f1 14.4.
def _level_case():
    def gfun(a, b):
        if a <= 1:
            return -10 + (4 if b else -4)
        return 10 + (1 if a == 3 else -1) + (1.2 if b else -1.2)

    return _grid([4, 2], 10, gfun)


def test_feature_chosen_at_level_l_is_free_from_level_l_plus_1():
    Xb, g = _level_case()
    mu = 15.0  # between B's margin (8.8) and everything else
    ps = PenaltyState(mu, np.ones(2), np.arange(2, dtype=np.int32))
    grown = _grow(Xb, g, [4, 2], ps, depth=3)
    f = grown.tree.feature
    assert f[0] == 0  # level 0: f0 pays mu, still by far the best
    assert f[1] == 1  # level 1, node A: f1 pays mu and wins
    # level 1, node B: f0 is free (chosen at level 0), f1 still pays (chosen at this level by
    # A): 20 > 28.8 - 15, so f0
    assert f[2] == 0
    # level 2, B's left child: f1 is free now (chosen at level 1): 14.4 > 0
    assert f[5] == 1
    assert grown.new_features == [0, 1]
    assert ps.order == [0, 1]
    np.testing.assert_array_equal(ps.first_use_tree, [0, 0])
    ref = _ref(Xb, g, [4, 2], RefOmega(mu, np.ones(2), np.arange(2)), depth=3)
    np.testing.assert_array_equal(f, ref["feature"])


def test_level_case_counterfactuals():
    """The case above is tight: other rules would give other trees."""
    Xb, g = _level_case()
    # if f1 were free for B (as if A's choice counted within the level), B would take f1
    ps = PenaltyState(15.0, np.ones(2), np.arange(2, dtype=np.int32))
    ps.admit([1], -1)
    assert _grow(Xb, g, [4, 2], ps, depth=2).tree.feature[2] == 1
    # if f1 only became free in the next tree, B's left child would be a leaf
    ps = PenaltyState(15.0, np.ones(2), np.arange(2, dtype=np.int32))
    t = _grow(Xb, g, [4, 2], ps, depth=3).tree
    gain_b_left = t.gain[5]
    assert 0 < gain_b_left < 15.0
    # no penalty: B takes the larger raw gain (f1)
    ps = PenaltyState(0.0, np.ones(2), np.arange(2, dtype=np.int32))
    assert _grow(Xb, g, [4, 2], ps, depth=2).tree.feature[2] == 1


def test_penalty_vector_costs_and_groups():
    costs = np.array([1.0, 2.0, 0.0, 0.5, 3.0])
    groups = np.array([0, 0, 1, 2, 2], dtype=np.int32)
    ps = PenaltyState(0.1, costs, groups)
    np.testing.assert_allclose(ps.penalty_vector(), 0.1 * costs)
    ps.admit([1], tree_index=4)
    # the whole group of feature 1 is free, but only feature 1 is in Omega
    np.testing.assert_allclose(ps.penalty_vector(), [0, 0, 0, 0.05, 0.3])
    np.testing.assert_array_equal(ps.used, [False, True, False, False, False])
    ps.admit([4, 0], tree_index=6)
    np.testing.assert_allclose(ps.penalty_vector(), 0.0)
    assert ps.order == [1, 4, 0]
    np.testing.assert_array_equal(ps.first_use_tree, [6, 4, -1, -1, 6])


def test_groups_become_free_together_in_a_tree():
    # f0 (4 bins) and f1 (2 bins) in one bag, f2 (2 bins) alone. A: f1 matters; B: f2 matters a
    # bit more than f1. Once f0 is used, f1 is free in both children.
    def gfun(a, b, c):
        if a <= 1:
            return -10 + (4 if b else -4)
        return 10 + (1.0 if b else -1.0) + (1.2 if c else -1.2)

    Xb, g = _grid([4, 2, 2], 6, gfun)
    mu = 15.0
    ps = PenaltyState(mu, np.ones(3), np.array([0, 0, 1], np.int32))
    t = _grow(Xb, g, [4, 2, 2], ps, depth=2).tree
    assert t.feature[0] == 0
    assert t.feature[1] == 1 and t.feature[2] == 1  # free through its bag, though never used
    assert ps.order == [0, 1]
    # without bags, f1 pays in both children: A still takes it, B takes the free f0 or f2
    ps = PenaltyState(mu, np.ones(3), np.arange(3, dtype=np.int32))
    t2 = _grow(Xb, g, [4, 2, 2], ps, depth=2).tree
    assert t2.feature[2] != 1
    # with bags but f2's bag already used, B takes f2 (the larger raw gain)
    ps = PenaltyState(mu, np.ones(3), np.array([0, 0, 1], np.int32))
    ps.admit([2], -1)
    assert _grow(Xb, g, [4, 2, 2], ps, depth=2).tree.feature[2] == 2


# Feature 0 splits A / B; in A feature 1 matters, in B feature 2 matters (and f0 a little).
def _budget_case():
    def gfun(a, b, c):
        if a <= 1:
            return -10 + (4 if b else -4)
        return 10 + (1 if a == 3 else -1) + (3 if c else -3)

    return _grid([4, 2, 2], 5, gfun)


@pytest.mark.parametrize(
    "k,expect_b,expect_order",
    [
        (None, 2, [0, 1, 2]),
        (3, 2, [0, 1, 2]),
        (2, 0, [0, 1]),  # A (first in node order) takes the last place; B falls back to f0
        (1, 0, [0]),  # after the root no new feature at all
    ],
)
def test_budget_within_one_level(k, expect_b, expect_order):
    Xb, g = _budget_case()
    ps = PenaltyState(0.0, np.ones(3), np.arange(3, dtype=np.int32), n_features_to_select=k)
    t = _grow(Xb, g, [4, 2, 2], ps, depth=2).tree
    assert t.feature[0] == 0
    assert t.feature[2] == expect_b
    assert ps.order == expect_order
    used = set(t.feature[t.feature >= 0].tolist())
    assert used == set(expect_order)
    ref_omega = RefOmega(0.0, np.ones(3), np.arange(3), k)
    ref = _ref(Xb, g, [4, 2, 2], ref_omega, depth=2)
    np.testing.assert_array_equal(t.feature, ref["feature"])
    assert ref_omega.order == ps.order
    # later trees never go beyond the budget either
    if k is not None:
        t2 = _grow(Xb, -g[::-1].copy(), [4, 2, 2], ps, depth=2, tree_index=1).tree
        assert set(t2.feature[t2.feature >= 0].tolist()) <= set(expect_order)
        assert len(ps.order) <= k


def test_budget_never_exceeded_in_fitted_models():
    rng = np.random.default_rng(0)
    for trial in range(6):
        n, d = 200, 10
        X = rng.normal(size=(n, d))
        y = X @ rng.normal(size=d) + rng.normal(size=n)
        k = int(rng.integers(1, 5))
        est = GBFSRegressor(
            n_features_to_select=k,
            mu=0.0,
            n_estimators=6,
            max_depth=3,
            device="cpu",
            random_state=trial,
        ).fit(X, y)
        s = est.ensemble_.stacked()["feature"]
        used = np.unique(s[s >= 0])
        assert len(est.selected_features_) == k  # every feature helps here: the budget binds
        assert set(used.tolist()) == set(est.selected_features_.tolist())


def test_first_use_tree_and_selection_order():
    rng = np.random.default_rng(1)
    n, d = 400, 8
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.7 * X[:, 3] - 0.5 * X[:, 5] + 0.3 * rng.normal(size=n) > 0).astype(int)
    est = GBFSClassifier(mu=0.05, n_estimators=15, max_depth=2, device="cpu").fit(X, y)
    feats = est.ensemble_.stacked()["feature"]
    for f in range(d):
        trees = np.flatnonzero((feats == f).any(axis=1))
        expect = trees[0] if trees.size else -1
        assert est.first_use_tree_[f] == expect, f
    # selected_features_ lists the used features by first tree of use
    used = np.flatnonzero(est.first_use_tree_ >= 0)
    assert set(est.selected_features_.tolist()) == set(used.tolist())
    assert np.all(np.diff(est.first_use_tree_[est.selected_features_]) >= 0)
    added = [f for fs in est.selection_record_["features_added"] for f in fs]
    assert added == est.selected_features_.tolist()
    for t, fs in enumerate(est.selection_record_["features_added"]):
        for f in fs:
            assert est.first_use_tree_[f] == t
    assert est.support_.sum() == len(est.selected_features_)
    assert 0 in est.selected_features_.tolist()


def test_root_sse_scores_are_fractions():
    """With penalty_scaling='root_sse' a split's gain is at most the root divisor, so mu >= 1
    admits no feature and a slightly smaller mu does."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y = 3 * X[:, 0] + 0.01 * rng.normal(size=300)
    est = GBFSRegressor(mu=1.0, n_estimators=5, device="cpu").fit(X, y)
    assert est.selected_features_.shape == (0,)
    assert np.all(est.ensemble_.stacked()["feature"] == -1)
    est = GBFSRegressor(mu=0.5, n_estimators=5, device="cpu").fit(X, y)
    assert est.selected_features_.tolist()[:1] == [0]
    # the divisor: half the residual SSE with unit hessians
    g = rng.normal(size=50)
    ps = PenaltyState(0.1, np.ones(2), np.arange(2, dtype=np.int32), "root_sse")
    assert ps.gain_divisor(g, np.ones(50)) == pytest.approx(0.5 * ((g - g.mean()) ** 2).sum())
    assert (
        PenaltyState(0.1, np.ones(2), np.arange(2, dtype=np.int32)).gain_divisor(g, np.ones(50))
        == 1.0
    )


def test_mu_zero_selects_more_than_a_large_mu():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 12))
    y = X[:, 0] + X[:, 1] + 0.5 * rng.normal(size=300)
    free = GBFSRegressor(mu=0.0, n_estimators=10, device="cpu").fit(X, y)
    thrifty = GBFSRegressor(mu=0.2, n_estimators=10, device="cpu").fit(X, y)
    assert len(thrifty.selected_features_) < len(free.selected_features_)
    assert set(thrifty.selected_features_.tolist()) <= {0, 1}
    # expensive features are avoided: make feature 0 cost 50 times more
    costs = np.ones(12)
    costs[0] = 50.0
    pricey = GBFSRegressor(mu=0.2, feature_costs=costs, n_estimators=10, device="cpu").fit(X, y)
    assert 0 not in pricey.selected_features_.tolist()
    assert 1 in pricey.selected_features_.tolist()


def test_gain_divisor_is_row_order_free():
    rng = np.random.default_rng(4)
    g = rng.normal(size=5000) + 3.0
    h = rng.uniform(0.0, 0.25, size=5000)
    h[:10] = 0.0
    ps = PenaltyState(0.1, np.ones(2), np.arange(2, dtype=np.int32), "root_sse")
    perm = rng.permutation(5000)
    d = ps.gain_divisor(g, h)
    assert d == ps.gain_divisor(g[perm], h[perm])
    pos = h > 0
    want = 0.5 * (math.fsum(g[pos] ** 2 / h[pos]) - math.fsum(g) ** 2 / math.fsum(h))
    assert d == pytest.approx(want, rel=1e-15)


def _fresh_answers(ps, d):
    """The penalty vector, allowed mask and candidate features computed anew (no memo)."""
    fresh = PenaltyState.__new__(type(ps))
    fresh.__dict__.update(ps.__dict__)
    fresh._changed()
    return fresh.penalty_vector(), fresh.allowed_mask(), fresh.candidate_features(d)


def test_memoized_answers_follow_every_change_of_omega():
    # penalty_vector, allowed_mask and candidate_features are computed once per change of
    # Omega or of the candidates: each change below must show in all three, as a fresh
    # computation gives them.
    d = 6
    ps = PenaltyState(2.0, np.arange(1.0, d + 1), np.array([0, 0, 1, 2, 3, 3]), "none", 3)

    def check():
        for got, want in zip(
            (ps.penalty_vector(), ps.allowed_mask(), ps.candidate_features(d)),
            _fresh_answers(ps, d),
        ):
            np.testing.assert_array_equal(got, want)

    check()
    before = ps.penalty_vector()
    snap = ps.snapshot()
    assert ps.admit([0], 0) == [0]
    check()
    assert ps.penalty_vector()[1] == 0.0 and before[1] == 4.0  # feature 1 shares 0's group
    assert ps.admit([0], 1) == []  # nothing new: the same answers
    check()
    ps.set_tree_candidates([4])
    check()
    assert list(ps.candidate_features(d)) == [0, 1, 4, 5]  # 5 is in 4's group
    ps.admit([2, 4], 2)  # the budget of 3 is spent: only Omega may be split on
    check()
    assert list(ps.candidate_features(d)) == [0, 2, 4]
    ps.restore(snap)
    check()
    np.testing.assert_array_equal(ps.penalty_vector(), before)
