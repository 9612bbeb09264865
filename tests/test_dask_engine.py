"""The CPU backend's level step in two halves (``decide_level`` then ``advance_level``, what a
Dask cluster runs apart) equals the fused ``level_step``, level by level, bit for bit.

One process, no cluster: every decision, category bitset, histogram, node sum, gain-bound sum,
row segment and row order of a tree grown both ways is compared, with a categorical feature,
node gain bounds that skip the paying features' histograms, feature groups, a feature budget
(the Omega-only fallback and the next level's feature subset), missing values, tiny tasks
(chunking) and the parallel drivers.
"""

import numpy as np
import pytest

from gpufs.backends.base import SplitParams
from gpufs.backends.cpu import CPUBackend
from gpufs.backends.cpu.level import TINY_ROWS_PER_SLOT, _is_tiny
from gpufs.engine.penalties import PenaltyState

N_BINS = 12


def _tree_both_ways(seed, depth, budget_k, rows_per_task, mu):
    rng = np.random.default_rng(seed)
    n, d = 3000, 9
    Xb = rng.integers(0, N_BINS, size=(n, d)).astype(np.uint8)
    Xb[rng.random((n, d)) < 0.05] = 255  # missing bin
    # feature 2 is categorical: its categories 3, 7 and 9 carry the signal
    signal = (
        Xb[:, 0].astype(float)
        + 0.5 * (Xb[:, 4] == 255)
        - 0.3 * Xb[:, 7]
        + 4.0 * np.isin(Xb[:, 2], (3, 7, 9))
    )
    g = np.rint((rng.normal(size=n) - signal) * 64).astype(np.int64)
    h = rng.integers(1, 5, size=n).astype(np.int64)
    gh = np.stack([g, h], axis=1)
    cat_slot = np.full(d, -1, np.int32)
    cat_slot[2] = 0
    split = SplitParams(
        n_bins=np.full(d, N_BINS, np.int32),
        g_scale=64.0,
        h_scale=1.0,
        reg_lambda=1.0,
        gain_divisor=1.0,
        min_child_weight=2.0,
        min_split_gain=0.0,
        cat_slot=cat_slot,
        n_cat=1,
    )
    costs = rng.random(d) * 2
    costs[[1, 5]] = 0.0  # free features
    groups = np.array([0, 1, 2, 3, 3, 4, 5, 6, 6], np.int32)
    pens = [PenaltyState(mu, costs, groups, "none", budget_k) for _ in range(2)]
    fused = CPUBackend(rows_per_task=rows_per_task, parallel_min_work=1, gain_bounds="always")
    halves = CPUBackend(rows_per_task=rows_per_task, parallel_min_work=1, gain_bounds="always")
    feats = pens[0].candidate_features(d)
    sts = [
        be.start_tree(
            Xb,
            gh,
            int(g.sum()),
            int(h.sum()),
            depth,
            feats,
            penalty=p.penalty_vector(),
            groups=p.groups,
            split=split,
        )
        for be, p in ((fused, pens[0]), (halves, pens[1]))
    ]
    st1, st2 = sts
    seen = {"splits": 0, "categorical": 0, "free_only": 0, "fewest": d, "tiny": 0}
    for level in range(depth):
        args = [
            (
                p.penalty_vector(),
                p.allowed_mask(),
                p.used.copy(),
                -1 if p.budget_left() is None else p.budget_left(),
            )
            for p in pens
        ]
        build_next = level + 1 < depth
        seen["free_only"] += int((~st1.slot_full).sum())
        r1 = fused.level_step(st1, *args[0], split, build_next)
        r2, plan = halves.decide_level(st2, *args[1], split)
        left = halves.advance_level(st2, plan, build_next)
        for field in ("nodes", "feature", "bin", "missing_left", "gain", "admitted", "cat_bits"):
            assert np.array_equal(getattr(r1, field), getattr(r2, field)), (level, field)
        assert np.array_equal(left, st2.node_count[2 * r2.nodes[r2.feature >= 0] + 1])
        for name in (
            "active",
            "node_start",
            "node_count",
            "node_g",
            "node_h",
            "node_s",
            "rows",
            "slot_full",
        ):
            assert np.array_equal(getattr(st1, name), getattr(st2, name)), (level, name)
        assert np.array_equal(st1.feats[: st1.n_feats], st2.feats[: st2.n_feats])
        assert st1.full == st2.full
        # a slot's histograms are defined on the features it covers (the rest is scratch)
        free = args[0][0] == 0.0
        n_tiny = 0
        for k in range(st1.hist.shape[0]):
            parent = max(int(st1.active[k]) - 1, 0) // 2
            if _is_tiny(st1.node_count[parent], d, st1.layout.n_slots, TINY_ROWS_PER_SLOT):
                n_tiny += 1  # a tiny node: the fused step reads its rows, builds no histogram
                continue
            covered = st1.feats[: st1.n_feats].astype(np.int64)
            if not st1.slot_full[k]:
                covered = covered[free[covered] | np.isin(groups[covered], groups[r1.admitted])]
            slots = st1.layout.slots_of(covered)
            assert np.array_equal(st1.hist[k, slots], st2.hist[k, slots]), (level, k)
        seen["tiny"] += n_tiny
        for p, r in zip(pens, (r1, r2)):
            p.admit(r.admitted, 0)
        split_nodes = r1.feature >= 0
        seen["splits"] += int(split_nodes.sum())
        seen["categorical"] += int((r1.feature[split_nodes] == 2).sum())
        seen["fewest"] = min(seen["fewest"], st1.n_feats)
        if st1.active.shape[0] == 0:
            break
    return seen, pens[0]


@pytest.mark.parametrize("rows_per_task", [7, 16384])
def test_halves_equal_the_fused_level_step(rows_per_task):
    seen, pen = _tree_both_ways(0, depth=6, budget_k=None, rows_per_task=rows_per_task, mu=40.0)
    assert seen["splits"] >= 8  # a real tree, not a stump
    assert seen["categorical"] >= 1  # with categorical splits
    assert seen["free_only"] >= 1  # and nodes whose bound skipped the paying features
    assert seen["tiny"] >= 1  # and tiny nodes, searched from their rows in the fused step


def test_halves_equal_the_fused_level_step_with_a_budget():
    seen, pen = _tree_both_ways(1, depth=4, budget_k=2, rows_per_task=11, mu=0.5)
    assert seen["splits"] >= 4 and len(pen.order) == 2  # the budget was reached and held
    # later levels' histograms covered Omega's features and the free ones only
    assert seen["fewest"] < 9
