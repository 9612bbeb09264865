"""The grower (``gpufs.engine.grower``): a hand-computed tree, the penalty and budget paths, the
brute-force oracle of tests/_reference.py on random trees, and row-order invariance."""

import numpy as np
import pytest

from _reference import RefOmega, ref_root_divisor, reference_grow_tree
from gpufs.backends.base import SplitParams, categorical_slots
from gpufs.backends.cpu import CPUBackend
from gpufs.engine.binning import BinMapper
from gpufs.engine.grower import GrownTree, TreeParams, grow_tree
from gpufs.engine.penalties import PenaltyState
from gpufs.engine.quantize import fixed_point_scale, quantize
from gpufs.rules._categorical import MAX_CAT_TO_ONEHOT


class CountingBackend(CPUBackend):
    """The CPU backend, counting the level slots whose histograms skipped the paying features
    (the node gain bound could not pay them), and those at levels that also admitted a
    feature (a free-only parent's children are then built directly, not by subtraction)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.free_only_slots = 0
        self.free_only_at_admission = 0

    def level_step(self, st, *args, **kw):
        free_only = int((~st.slot_full).sum())
        res = super().level_step(st, *args, **kw)
        self.free_only_slots += free_only
        if free_only and res.admitted.shape[0] and (res.feature >= 0).any():
            self.free_only_at_admission += 1
        return res

    #: no compiled run of levels (``CPUBackend.grow_levels``): the grower calls
    #: ``level_step`` once per level, so every level is counted
    grow_levels = None


# Node gain bounds in every tree with penalties, so the skipping is checked against the oracle.
BACKEND = CountingBackend(gain_bounds="always")
#: Parallel drivers on tiny tasks: chunked histograms, partitions and reductions.
CHUNKY = CountingBackend(n_threads=3, rows_per_task=5, parallel_min_work=0, gain_bounds="always")
#: The same two growing each run of levels in one compiled call (``CPUBackend.grow_levels``).
FUSED = CPUBackend(gain_bounds="always")
FUSED_CHUNKY = CPUBackend(n_threads=3, rows_per_task=5, parallel_min_work=0, gain_bounds="always")
#: The oracle's random cases take turns: level by level (counted), then in compiled runs.
TAKING_TURNS = (BACKEND, CHUNKY, FUSED, FUSED_CHUNKY)


def _stub_mapper(n_bins, is_cat=None):
    """A BinMapper whose cut b of every feature is b + 0.5 (for the raw thresholds); the
    features of ``is_cat`` are categorical, with categories 0 .. n_bins - 1."""
    from gpufs.data._category_codes import CategoryCodes

    codes = None
    if is_cat is not None and np.any(is_cat):
        cat = np.flatnonzero(is_cat)
        codes = CategoryCodes(
            len(n_bins),
            {int(f): list(range(int(n_bins[f]))) for f in cat},
            {int(f): int(n_bins[f]) for f in cat},
        )
    return BinMapper._from_validated(
        255, None, 0, [np.arange(nb - 1) + 0.5 for nb in n_bins], codes
    )


# --- a tree small enough to grow by hand ------------------------------------------------------
#
# Four rows, gradients (-1, -1, +1, +1), unit hessians. Feature 0 has bins (0, 0, 1, 1): the
# split 'bin <= 0' separates the signs; feature 1 has bins (0, 1, 0, 1) and separates nothing.
# With reg_lambda = 0: gain = 1/2 (G_L^2/H_L + G_R^2/H_R - G^2/H) = 1/2 (4/2 + 4/2 - 0) = 2;
# leaf values -G/H * learning_rate = +1 * 0.5 (left) and -1 * 0.5 (right).
HAND_XB = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.uint8)
HAND_G = np.array([-1.0, -1.0, 1.0, 1.0])
HAND_BINS = np.array([2, 2], np.int32)


def _grow_from_gradients(backend, Xb, g, h, n_bins, bin_mapper, penalties, params, tree_index):
    """Quantize float gradients and hessians as the boosting loop does, and grow a tree."""
    n = int(g.shape[0])
    g_scale, h_scale = fixed_point_scale(g, n), fixed_point_scale(h, n)
    return grow_tree(
        backend,
        Xb,
        quantize(g, g_scale),
        quantize(h, h_scale),
        g_scale,
        h_scale,
        n_bins,
        bin_mapper,
        penalties,
        params,
        tree_index,
        gain_divisor=1.0,
    )


def _hand(mu, max_depth=1, **params):
    ps = PenaltyState(mu, np.ones(2), np.arange(2, dtype=np.int32))
    p = dict(max_depth=max_depth, reg_lambda=0.0, learning_rate=0.5, min_child_weight=1e-3)
    p.update(params)
    grown = _grow_from_gradients(
        BACKEND,
        HAND_XB,
        HAND_G,
        np.ones(4),
        HAND_BINS,
        _stub_mapper(HAND_BINS),
        ps,
        TreeParams(**p),
        tree_index=3,
    )
    return grown, ps


def test_hand_computed_stump():
    grown, ps = _hand(mu=0.0)
    assert isinstance(grown, GrownTree)
    t = grown.tree
    assert t.feature.tolist() == [0, -1, -1]
    assert t.bin_threshold[0] == 0 and t.threshold[0] == 0.5 and not t.missing_left[0]
    assert t.gain.tolist() == [2.0, 0.0, 0.0]
    assert t.value.tolist() == [0.0, 0.5, -0.5]  # the root's own value: -0/4
    assert t.cover.tolist() == [4.0, 2.0, 2.0] and t.count.tolist() == [4, 2, 2]
    assert grown.leaf_nodes.tolist() == [1, 2] and grown.leaf_values.tolist() == [0.5, -0.5]
    assert grown.new_features == [0] and ps.order == [0]
    assert ps.first_use_tree.tolist() == [3, -1]
    raw = np.zeros(4)
    grown.add_to(raw)  # from the partition, no tree walk
    assert raw.tolist() == [0.5, 0.5, -0.5, -0.5]


def test_a_penalty_above_the_gain_leaves_a_leaf_and_a_used_feature_is_free():
    grown, ps = _hand(mu=2.5)  # 2 - 2.5 < 0: no split pays
    assert grown.tree.feature.tolist() == [-1, -1, -1] and grown.new_features == []
    assert grown.leaf_nodes.tolist() == [0] and ps.order == []
    ps = PenaltyState(2.5, np.ones(2), np.arange(2, dtype=np.int32))
    ps.admit([0], -1)  # feature 0 already in Omega: free
    grown = _grow_from_gradients(
        BACKEND,
        HAND_XB,
        HAND_G,
        np.ones(4),
        HAND_BINS,
        _stub_mapper(HAND_BINS),
        ps,
        TreeParams(max_depth=1, reg_lambda=0.0),
        tree_index=0,
    )
    assert grown.tree.feature[0] == 0 and grown.new_features == []


def test_min_split_gain_min_child_weight_and_depth():
    assert _hand(0.0, min_split_gain=2.0)[0].tree.feature[0] == -1  # needs gain > 2
    assert _hand(0.0, min_split_gain=1.99)[0].tree.feature[0] == 0
    assert _hand(0.0, min_child_weight=2.5)[0].tree.feature[0] == -1  # children hold 2
    # depth 2: the children are pure (every G_L = G_R = 0 split has gain 0, not > 0): leaves
    grown, _ = _hand(0.0, max_depth=2)
    assert grown.tree.feature.tolist() == [0] + [-1] * 6
    assert grown.leaf_nodes.tolist() == [1, 2]


def _random_case(rng, *, nan, hessian, wide=False):
    n = int(rng.integers(30, 70) if wide else rng.integers(2, 70))
    d = int(rng.integers(3, 7) if wide else rng.integers(1, 6))
    n_bins = rng.integers(1, 9, size=d).astype(np.int32)
    if rng.random() < 0.1:  # one wide feature, up to the full 255 value bins
        n_bins[rng.integers(d)] = int(rng.integers(20, 256))
    Xb = np.empty((n, d), dtype=np.uint8)
    for f in range(d):
        Xb[:, f] = rng.integers(0, n_bins[f], size=n)
        if nan:
            Xb[rng.random(n) < rng.uniform(0, 0.4), f] = 255
    if rng.random() < 0.3:  # duplicated columns: exact ties between features
        Xb[:, -1] = Xb[:, 0]
        n_bins[-1] = n_bins[0]
    g = rng.normal(size=n) * (1.0 if wide else rng.choice([1e-3, 1.0, 50.0]))
    if rng.random() < 0.3:  # coarse gradients: many exact ties in the sums
        g = np.round(g)
    if hessian:
        h = rng.uniform(0.01, 0.25, size=n)
        if rng.random() < 0.3:  # zero-weight rows (h = 0, g = 0)
            z = rng.random(n) < 0.2
            g[z], h[z] = 0.0, 0.0
    else:
        h = np.ones(n)
    return Xb, g, h, n_bins


def _quantized(g, h):
    gs, hs = fixed_point_scale(g, g.shape[0]), fixed_point_scale(h, h.shape[0])
    return quantize(g, gs), quantize(h, hs), gs, hs


def _random_penalty(rng, d, *, penalty, costs, groups, budget):
    mu = float(rng.choice([0.05, 0.5, 3.0])) if penalty else 0.0
    c = rng.uniform(0, 2, size=d) if costs else np.ones(d)
    if costs and rng.random() < 0.3:
        c[rng.integers(d)] = 0.0
    grp = rng.integers(0, max(1, d // 2 + 1), size=d) if groups else np.arange(d)
    used0 = rng.random(d) < (0.3 if penalty else 0.0)
    k = None
    if budget:
        # one or two more features than already used, a small price: several nodes of a
        # level compete for the last places
        if rng.random() < 0.5:
            used0[:] = False
        k = int(used0.sum() + rng.integers(1, 3))
        mu = float(rng.choice([0.0, 0.0, 0.05]))
    return mu, c, grp, k, used0


def _run_both(
    Xb,
    g,
    h,
    n_bins,
    mu,
    costs,
    groups,
    k,
    used0,
    params,
    scaling="none",
    backend=BACKEND,
    is_cat=None,
):
    gq, hq, gs, hs = _quantized(g, h)
    ps = PenaltyState(
        mu, costs, np.unique(groups, return_inverse=True)[1].astype(np.int32), scaling, k
    )
    ro = RefOmega(mu, costs, groups, k)
    if used0.any():
        ps.admit(np.flatnonzero(used0), -1)
        for f in np.flatnonzero(used0):
            ro.admit(f, -1)
    div = ps.gain_divisor(g, h)
    if scaling == "root_sse":
        np.testing.assert_allclose(div, ref_root_divisor(g, h), rtol=1e-12)
    grown = grow_tree(
        backend,
        Xb,
        gq,
        hq,
        gs,
        hs,
        n_bins,
        _stub_mapper(n_bins, is_cat),
        ps,
        params,
        tree_index=7,
        gain_divisor=div,
    )
    ref = reference_grow_tree(
        Xb,
        gq,
        hq,
        gs,
        hs,
        n_bins,
        ro,
        max_depth=params.max_depth,
        reg_lambda=params.reg_lambda,
        learning_rate=params.learning_rate,
        min_child_weight=params.min_child_weight,
        min_split_gain=params.min_split_gain,
        gain_divisor=div,
        tree_index=7,
        is_cat=is_cat,
    )
    return grown, ref, ps, ro


def _assert_same_tree(grown, ref, ps, ro, where, n_bins, is_cat=None):
    t = grown.tree
    np.testing.assert_array_equal(t.feature, ref["feature"], err_msg=where)
    split = ref["feature"] >= 0
    np.testing.assert_array_equal(
        t.bin_threshold[split], ref["bin_threshold"][split], err_msg=where
    )
    np.testing.assert_array_equal(t.missing_left[split], ref["missing_left"][split], err_msg=where)
    cat = (
        np.zeros_like(split)
        if is_cat is None
        else np.asarray(is_cat)[np.maximum(ref["feature"], 0)] & split
    )
    if cat.any():  # the category bitsets, bit for bit
        np.testing.assert_array_equal(t.cat_bits, ref["cat_bits"], err_msg=where)
    else:
        assert not t.cat_bits.any(), where
    # the stub mapper's cut b is b + 0.5; the top bin (the split on missingness) has +inf;
    # a categorical split has threshold 0
    want_thr = np.where(top_bin(ref, n_bins), np.inf, ref["bin_threshold"] + 0.5)
    want_thr = np.where(cat, 0.0, want_thr)
    np.testing.assert_array_equal(t.threshold[split], want_thr[split], err_msg=where)
    scale = max(1e-300, np.abs(ref["gain"]).max())
    np.testing.assert_allclose(t.gain, ref["gain"], rtol=1e-12, atol=1e-12 * scale, err_msg=where)
    vscale = max(1e-300, np.abs(ref["value"]).max())
    np.testing.assert_allclose(
        t.value, ref["value"], rtol=1e-12, atol=1e-12 * vscale, err_msg=where
    )
    np.testing.assert_allclose(t.cover, ref["cover"], rtol=1e-12, err_msg=where)
    np.testing.assert_array_equal(t.count, ref["count"], err_msg=where)
    # rows of every leaf are exactly the oracle's rows
    for node in grown.leaf_nodes:
        lo, c = grown.state.node_start[node], grown.state.node_count[node]
        np.testing.assert_array_equal(
            np.sort(grown.state.rows[lo : lo + c]),
            np.sort(ref["node_rows"][int(node)]),
            err_msg=where,
        )
    assert sorted(int(x) for x in grown.leaf_nodes) == sorted(
        nd for nd in ref["node_rows"] if ref["feature"][nd] < 0
    ), where
    np.testing.assert_allclose(grown.leaf_values, t.value[grown.leaf_nodes])
    # Omega after the tree
    assert grown.new_features == ref["new_features"], where
    assert ps.order == ro.order, where
    np.testing.assert_array_equal(ps.used, ro.used, err_msg=where)
    np.testing.assert_array_equal(ps.first_use_tree, ro.first_use, err_msg=where)


def top_bin(ref, n_bins):
    """Nodes whose split sends every value left (bin_threshold = n_bins - 1)."""
    return ref["bin_threshold"] == np.asarray(n_bins)[np.maximum(ref["feature"], 0)] - 1


CONFIGS = [
    # name, nan, hessian, penalty, costs, groups, budget
    ("plain", False, False, False, False, False, False),
    ("hessian", False, True, False, False, False, False),
    ("nan", True, True, False, False, False, False),
    ("penalty", False, False, True, False, False, False),
    ("penalty_costs_nan", True, True, True, True, False, False),
    ("groups", True, False, True, True, True, False),
    ("budget", True, True, True, True, True, True),
]


@pytest.mark.parametrize(
    "name,nan,hessian,penalty,costs,groups,budget", CONFIGS, ids=[c[0] for c in CONFIGS]
)
def test_grower_matches_reference(name, nan, hessian, penalty, costs, groups, budget):
    rng = np.random.default_rng(sum(map(ord, name)))
    skipped_before = BACKEND.free_only_slots + CHUNKY.free_only_slots
    n_splits = 0
    n_penalized_choices = 0
    n_fallbacks = 0
    n_missingness = 0  # splits on missingness (every value left, missing right)
    for case in range(50):
        Xb, g, h, n_bins = _random_case(rng, nan=nan, hessian=hessian, wide=budget)
        d = Xb.shape[1]
        mu, c, grp, k, used0 = _random_penalty(
            rng, d, penalty=penalty, costs=costs, groups=groups, budget=budget
        )
        params = TreeParams(
            max_depth=int(rng.integers(2 if budget else 1, 5)),
            reg_lambda=float(rng.choice([0.0, 1.0, 0.3])),
            learning_rate=float(rng.choice([0.1, 1.0])),
            min_child_weight=float(rng.choice([0.0, 1e-3, 0.5, 2.0])),
            min_split_gain=float(rng.choice([0.0, 0.0, 0.01])),
        )
        if params.reg_lambda == 0.0 and params.min_child_weight == 0.0:
            params = TreeParams(
                params.max_depth, 1.0, params.learning_rate, 0.0, params.min_split_gain
            )
        scaling = "root_sse" if penalty and rng.random() < 0.3 else "none"
        grown, ref, ps, ro = _run_both(
            Xb,
            g,
            h,
            n_bins,
            mu,
            c,
            grp,
            k,
            used0,
            params,
            scaling,
            backend=TAKING_TURNS[case % 4],
        )
        _assert_same_tree(grown, ref, ps, ro, f"{name} case {case}", n_bins)
        n_missingness += int(((ref["feature"] >= 0) & top_bin(ref, n_bins)).sum())
        n_splits += int((ref["feature"] >= 0).sum())
        n_penalized_choices += len(ref["new_features"])
        n_fallbacks += ref["n_fallbacks"]
    # the loop exercised real trees, not just stumps or leaves, and features entered Omega
    assert n_splits > 50 and n_penalized_choices > 5
    # the budget redirected some nodes, and only with a budget
    assert n_fallbacks > 3 if budget else n_fallbacks == 0
    # the missingness split is among the candidates and sometimes wins, and only with NaNs
    assert n_missingness > 0 if nan else n_missingness == 0
    if penalty:  # nodes whose gain bound could not pay skipped the paying features' histograms
        assert BACKEND.free_only_slots + CHUNKY.free_only_slots - skipped_before > 10


def test_gain_bound_skipping_with_admissions_matches_reference():
    """Levels where some nodes' histograms skip the paying features while another node of
    the same level admits a feature: those nodes' children get the new free feature by a
    direct build (their parent never had it), and every tree still equals the oracle's."""
    rng = np.random.default_rng(123)
    counting = CountingBackend(
        n_threads=3, rows_per_task=4, parallel_min_work=0, gain_bounds="always"
    )
    cases = 0
    for case in range(120):
        n = int(rng.integers(40, 90))
        d = int(rng.integers(3, 7))
        n_bins = rng.integers(2, 9, size=d).astype(np.int32)
        Xb = np.stack([rng.integers(0, n_bins[f], size=n) for f in range(d)], axis=1).astype(
            np.uint8
        )
        # one strong feature in a third of the rows, small gradients elsewhere: that node
        # can pay, its siblings cannot
        g = 0.05 * rng.normal(size=n)
        strong = Xb[:, 0] < n_bins[0] // 2
        g[strong] += np.where(Xb[strong, 1] < n_bins[1] // 2, 3.0, -3.0)
        h = rng.uniform(0.1, 1.0, size=n)
        mu = float(rng.choice([0.5, 2.0, 5.0]))
        costs = rng.uniform(0.5, 1.5, size=d)
        groups = rng.integers(0, max(1, d // 2), size=d) if case % 3 == 0 else np.arange(d)
        used0 = np.zeros(d, bool)
        used0[0] = True
        params = TreeParams(max_depth=int(rng.integers(3, 6)), reg_lambda=1.0)
        before = counting.free_only_at_admission
        grown, ref, ps, ro = _run_both(
            Xb, g, h, n_bins, mu, costs, groups, None, used0, params, backend=counting
        )
        _assert_same_tree(grown, ref, ps, ro, f"bound case {case}", n_bins)
        cases += counting.free_only_at_admission > before
    assert counting.free_only_slots > 50
    assert cases > 5


def test_penalty_changes_the_tree_like_the_reference():
    """A case where the penalty must move a split from the best raw gain to a free feature."""
    rng = np.random.default_rng(3)
    n = 200
    x0 = rng.integers(0, 8, n)
    Xb = np.stack([x0, np.clip(x0 + rng.integers(-1, 2, n), 0, 7)], axis=1).astype(np.uint8)
    g = (x0 >= 4).astype(float) - 0.5 + 0.01 * rng.normal(size=n)
    h = np.ones(n)
    n_bins = np.array([8, 8], np.int32)
    params = TreeParams(max_depth=2, reg_lambda=1.0)
    # no penalty: feature 0 (the exact one) wins
    grown, ref, ps, ro = _run_both(
        Xb, g, h, n_bins, 0.0, np.ones(2), np.arange(2), None, np.zeros(2, bool), params
    )
    _assert_same_tree(grown, ref, ps, ro, "mu=0", n_bins)
    assert grown.tree.feature[0] == 0
    # feature 1 already used and feature 0 expensive: the root goes to feature 1
    used0 = np.array([False, True])
    grown, ref, ps, ro = _run_both(
        Xb, g, h, n_bins, 1e6, np.ones(2), np.arange(2), None, used0, params
    )
    _assert_same_tree(grown, ref, ps, ro, "mu=big", n_bins)
    assert grown.tree.feature[0] == 1
    assert grown.new_features == []


def test_split_on_missingness_like_the_reference():
    """A one-bin feature with NaNs, and a many-bin feature whose NaNs carry the signal: the
    split 'every value left, missing right' is found, with the reference's tie-breaking."""
    rng = np.random.default_rng(4)
    n = 120
    miss = rng.random(n) < 0.4
    x1 = rng.integers(0, 6, n)
    Xb = np.stack(
        [
            np.where(miss, 255, 0),  # one bin + NaN
            rng.integers(0, 6, n),  # noise
            np.where(miss, 255, x1),  # same NaNs, 6 bins
            np.where(rng.random(n) < 0.2, 255, x1),
        ],
        axis=1,
    ).astype(np.uint8)
    n_bins = np.array([1, 6, 6, 6], np.int32)
    g = np.where(miss, 1.0, -1.0) + 0.01 * rng.normal(size=n)
    h = np.ones(n)
    params = TreeParams(max_depth=3, reg_lambda=1.0)
    grown, ref, ps, ro = _run_both(
        Xb, g, h, n_bins, 0.0, np.ones(4), np.arange(4), None, np.zeros(4, bool), params
    )
    _assert_same_tree(grown, ref, ps, ro, "missingness", n_bins)
    t = grown.tree
    # features 0 and 2 split the root identically: the lower feature wins the tie
    assert t.feature[0] == 0 and t.bin_threshold[0] == 0 and not t.missing_left[0]
    assert t.threshold[0] == np.inf
    lo, c = grown.state.node_start[1], grown.state.node_count[1]
    assert not miss[grown.state.rows[lo : lo + c]].any() and c == (~miss).sum()
    # with feature 0 expensive and feature 2 free, feature 2 takes it at its top bin (5)
    grown, ref, ps, ro = _run_both(
        Xb,
        g,
        h,
        n_bins,
        1e6,
        np.ones(4),
        np.arange(4),
        None,
        np.array([False, False, True, False]),
        params,
    )
    _assert_same_tree(grown, ref, ps, ro, "missingness, penalized", n_bins)
    assert grown.tree.feature[0] == 2 and grown.tree.bin_threshold[0] == 5
    assert grown.tree.threshold[0] == np.inf


def test_grown_tree_row_order_invariant():
    rng = np.random.default_rng(11)
    for case in range(10):
        Xb, g, h, n_bins = _random_case(rng, nan=True, hessian=True)
        n, d = Xb.shape
        perm = rng.permutation(n)
        trees = []
        for p in (np.arange(n), perm):
            gq, hq, gs, hs = _quantized(g[p], h[p])
            ps = PenaltyState(0.3, np.ones(d), np.arange(d, dtype=np.int32))
            trees.append(
                grow_tree(
                    BACKEND,
                    np.ascontiguousarray(Xb[p]),
                    gq,
                    hq,
                    gs,
                    hs,
                    n_bins,
                    _stub_mapper(n_bins),
                    ps,
                    TreeParams(max_depth=3),
                    tree_index=0,
                ).tree
            )
        for key in (
            "feature",
            "bin_threshold",
            "missing_left",
            "threshold",
            "value",
            "gain",
            "cover",
            "count",
        ):
            np.testing.assert_array_equal(
                getattr(trees[0], key), getattr(trees[1], key), err_msg=f"{key} case {case}"
            )


def test_gain_bounds_auto_keeps_them_only_where_they_may_pay():
    """The cost guess: a tree whose deepest nodes' bounds must exceed every penalty keeps no
    bounds; one with a price near the root's bound keeps them. Trees are the same with the
    bounds kept always, never, or as guessed."""
    rng = np.random.default_rng(5)
    n, d = 4000, 6
    Xb = rng.integers(0, 16, size=(n, d)).astype(np.uint8)
    g = rng.normal(size=n) + (Xb[:, 0] > 7)
    h = np.ones(n)
    n_bins = np.full(d, 16, np.int32)
    params = TreeParams(max_depth=4)
    trees = {}
    for mode in ("auto", "always", "never"):
        for mu in (1e-6, 500.0):
            be = CPUBackend(gain_bounds=mode)
            gq, hq, gs, hs = _quantized(g, h)
            ps = PenaltyState(mu, np.ones(d), np.arange(d, dtype=np.int32))
            grown = grow_tree(
                be, Xb, gq, hq, gs, hs, n_bins, _stub_mapper(n_bins), ps, params, tree_index=0
            )
            trees[mode, mu] = grown
    for mu in (1e-6, 500.0):
        for mode in ("auto", "never"):
            for key in ("feature", "bin_threshold", "missing_left", "value", "gain", "count"):
                np.testing.assert_array_equal(
                    getattr(trees[mode, mu].tree, key), getattr(trees["always", mu].tree, key)
                )
    # a tiny price: the sample says the deepest nodes can pay it, no bounds kept
    assert trees["auto", 1e-6].state.q.shape[0] == 0
    # a price near the root's bound: kept
    assert trees["auto", 500.0].state.q.shape[0] == n
    assert trees["never", 500.0].state.q.shape[0] == 0
    with pytest.raises(ValueError, match="gain_bounds must be"):
        CPUBackend(gain_bounds="sometimes")


# --- categorical features -------------------------------------------------------------------

CAT_CONFIGS = [
    # name, nan, hessian, penalty, budget
    ("cat_plain", False, True, False, False),
    ("cat_nan", True, True, False, False),
    ("cat_penalty_budget", True, False, True, True),
]


@pytest.mark.parametrize(
    "name,nan,hessian,penalty,budget", CAT_CONFIGS, ids=[c[0] for c in CAT_CONFIGS]
)
def test_grower_matches_reference_categorical(name, nan, hessian, penalty, budget):
    """Trees with categorical features against the oracle: the same splits, left sets
    (bitsets) and missing directions, gains, leaves and Omega; categorical features of 1 to 40
    categories, so one-vs-rest (<= 4 candidates at a node) and sorted scans both occur."""
    rng = np.random.default_rng(sum(map(ord, name)))
    n_cat_splits = n_sorted = n_missing_left = 0
    for case in range(40):
        Xb, g, h, n_bins = _random_case(rng, nan=nan, hessian=hessian, wide=budget)
        d = Xb.shape[1]
        is_cat = rng.random(d) < 0.6
        for f in np.flatnonzero(is_cat):
            nb = int(rng.integers(1, 41))
            n_bins[f] = nb
            Xb[:, f] = np.where(Xb[:, f] == 255, 255, rng.integers(0, nb, Xb.shape[0]))
        mu, c, grp, k, used0 = _random_penalty(
            rng, d, penalty=penalty, costs=penalty, groups=False, budget=budget
        )
        params = TreeParams(
            max_depth=int(rng.integers(1, 5)),
            reg_lambda=float(rng.choice([0.0, 1.0, 0.3])),
            min_child_weight=float(rng.choice([1e-3, 0.5])),
        )
        grown, ref, ps, ro = _run_both(
            Xb,
            g,
            h,
            n_bins,
            mu,
            c,
            grp,
            k,
            used0,
            params,
            backend=TAKING_TURNS[case % 4],
            is_cat=is_cat,
        )
        _assert_same_tree(grown, ref, ps, ro, f"{name} case {case}", n_bins, is_cat)
        cat_split = (ref["feature"] >= 0) & is_cat[np.maximum(ref["feature"], 0)]
        n_cat_splits += int(cat_split.sum())
        n_sorted += int((cat_split & (np.bitwise_count(ref["cat_bits"]).sum(axis=1) > 1)).sum())
        n_missing_left += int((cat_split & ref["missing_left"]).sum())
    assert n_cat_splits > 30 and n_sorted > 5  # many categorical splits, multi-category sets
    if nan:
        assert n_missing_left > 0  # the missing bin took part and was sent left sometimes


def _gh(gq, hq):
    return np.ascontiguousarray(np.stack([gq, hq], axis=1))


def _cat_split(n_bins, gs, hs, reg_lambda, min_child_weight, onehot=MAX_CAT_TO_ONEHOT):
    """The SplitParams of a one-feature categorical search."""
    slot, n_cat = categorical_slots([True] * len(n_bins), len(n_bins))
    return SplitParams(
        n_bins=np.asarray(n_bins, np.int32),
        g_scale=gs,
        h_scale=hs,
        reg_lambda=reg_lambda,
        gain_divisor=1.0,
        min_child_weight=min_child_weight,
        min_split_gain=0.0,
        cat_slot=slot,
        n_cat=n_cat,
        max_cat_to_onehot=onehot,
    )


def _cat_hist(rng, n_cat, n=120, nan=True):
    Xb = rng.integers(0, n_cat, size=(n, 1)).astype(np.uint8)
    if nan:
        Xb[rng.random(n) < 0.1, 0] = 255
    g = rng.normal(size=n) + rng.normal(size=n_cat + 1)[np.minimum(Xb[:, 0], n_cat)]
    h = rng.uniform(0.2, 1.0, size=n)
    gq, hq, gs, hs = _quantized(g, h)
    hist = BACKEND.histograms(
        Xb,
        _gh(gq, hq),
        np.arange(n, dtype=np.int32),
        np.zeros(1, np.int64),
        np.array([n], np.int64),
        np.array([0]),
    )
    return Xb, gq, hq, gs, hs, hist


def test_sorted_categorical_scan_finds_the_best_of_all_subsets():
    """Fisher's ordering: with lambda = 0 the best prefix of the categories sorted by G/H is
    the best of ALL 2^(m-1) two-way partitions (the missing bin one more category), found by
    brute force over every subset; and the split found is the oracle's."""
    from itertools import combinations

    from _reference import ref_gain

    rng = np.random.default_rng(12)
    for case in range(12):
        n_cat = int(rng.integers(5, 10))
        Xb, gq, hq, gs, hs, hist = _cat_hist(rng, n_cat)
        res = BACKEND.find_splits(
            hist, [gq.sum()], [hq.sum()], [0.0], [True], _cat_split([n_cat], gs, hs, 0.0, 0.0)
        )
        col = Xb[:, 0]
        cats = [b for b in list(range(n_cat)) + [255] if (col == b).any()]
        G, H = gq.sum() / gs, hq.sum() / hs
        best = -np.inf
        for r in range(1, len(cats)):
            for left in combinations(cats, r):
                sel = np.isin(col, left)
                best = max(best, ref_gain(gq[sel].sum() / gs, hq[sel].sum() / hs, G, H, 0.0))
        assert res.feature[0] == 0
        np.testing.assert_allclose(res.gain[0], best, rtol=1e-10, err_msg=f"case {case}")
        # the left set found sends exactly the rows the bitset and missing_left say
        words = res.cat_bits[0]
        left_bins = [b for b in range(n_cat) if (words[b // 32] >> (b % 32)) & 1]
        sel = np.isin(col, left_bins) | ((col == 255) & res.missing_left[0])
        assert sel.any() and not sel.all()
        assert int(gq[sel].sum()) == res.g_left[0] and int(hq[sel].sum()) == res.h_left[0]


def test_one_vs_rest_below_max_cat_to_onehot():
    """At most ``max_cat_to_onehot`` candidate categories: only single categories go left
    (the best one), as the oracle enumerates them; above it, sets of several may."""
    from _reference import best_split

    rng = np.random.default_rng(13)
    for n_cat, onehot in ((4, 4), (3, 4), (7, 10), (7, 2)):
        Xb, gq, hq, gs, hs, hist = _cat_hist(rng, n_cat, nan=False)
        res = BACKEND.find_splits(
            hist,
            [gq.sum()],
            [hq.sum()],
            [0.0],
            [True],
            _cat_split([n_cat], gs, hs, 1.0, 1e-3, onehot),
        )
        ref = best_split(
            Xb,
            np.arange(Xb.shape[0]),
            gq,
            hq,
            gs,
            hs,
            [n_cat],
            [True],
            1.0,
            1.0,
            1e-3,
            [0.0],
            is_cat=[True],
            max_onehot=onehot,
        )
        np.testing.assert_array_equal(res.cat_bits[0], ref["bits"])
        n_left = int(np.bitwise_count(ref["bits"]).sum())
        if n_cat <= onehot:
            assert n_left == 1
        np.testing.assert_allclose(res.gain[0], ref["gain"], rtol=1e-12)


def _fits_for_the_compiled_runs():
    """Fits that admit features at many levels: a feature budget (exact k), feature groups,
    a categorical column, GT-GBM's group tests, several classes."""
    import pandas as pd

    import gpufs

    rng = np.random.default_rng(5)
    n, d = 400, 10
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.05] = np.nan
    region = rng.integers(0, 12, n)
    y = (np.nan_to_num(X[:, 0]) + 0.6 * np.nan_to_num(X[:, 3]) * (region % 3) > 0.2).astype(int)
    y += np.nan_to_num(X[:, 5]) > 1.0
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(d)])
    frame["region"] = pd.Categorical(region)
    common = dict(n_estimators=12, max_depth=4, device="cpu", random_state=0)
    return [
        (gpufs.GBFSClassifier(n_features_to_select=3, **common), frame, y),
        (
            gpufs.GBFSClassifier(
                mu=0.02, feature_groups=[0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5], **common
            ),
            frame,
            y,
        ),
        (
            gpufs.GBFSRegressor(mu=0.01, split_search="group_testing", **common),
            X,
            np.nan_to_num(X[:, 0]) ** 2,
        ),
        (gpufs.MultiTaskGBFSRegressor(mu_G=0.02, mu_t=0.01, **common), [X, X[::-1]], [y, y]),
    ]


@pytest.mark.parametrize("case", range(4))
def test_compiled_runs_of_levels_grow_the_trees_of_level_by_level(case, monkeypatch):
    """A whole fit grows the same trees, bit for bit, whether the CPU grows each run of
    levels between admissions in one compiled call (``CPUBackend.grow_levels``) or the grower
    calls ``level_step`` once per level (the other backends' loop)."""
    from sklearn.base import clone

    est, X, y = _fits_for_the_compiled_runs()[case]
    fused = clone(est).fit(X, y)
    monkeypatch.setattr(CPUBackend, "grow_levels", None)
    stepped = clone(est).fit(X, y)
    n_splits = 0
    for ens_a, ens_b in zip(
        *(getattr(e, "ensembles_", None) or [e.ensemble_] for e in (fused, stepped)), strict=True
    ):
        a, b = ens_a.stacked(), ens_b.stacked()
        assert a.keys() == b.keys()
        for k in a:
            assert a[k].tobytes() == b[k].tobytes(), f"tree field {k} differs"
        n_splits += int((a["feature"] >= 0).sum())
    assert n_splits > 20  # real trees, not stumps
    assert np.array_equal(fused.selected_features_, stepped.selected_features_)
    # repr of a float is its shortest round-trip form: equal reprs are equal bits
    assert repr(getattr(fused, "selection_record_", None)) == repr(
        getattr(stepped, "selection_record_", None)
    )
