"""Tiny nodes without histograms (``level._is_tiny``, ``split._row_bins``): the split search
reads a tiny node's rows and sums its bins itself. Every per-feature result (score, gain, bin,
missing side, left sums) must be the histogram scan's, bit for bit, numeric and categorical,
with missing values or none, one-bin and 255-bin features, in the compact and the full layout;
and whole fits must grow the same trees with tiny nodes on and off. Also the cost rule that
sends a level's search, tiny nodes counted by their rows, to the thread pool."""

import numpy as np
import pytest

from gpufs import GBFSClassifier, GBFSRegressor
from gpufs.backends.base import SplitParams
from gpufs.backends.cpu import backend as cpu_backend
from gpufs.backends.cpu._args import PerFeature, SearchSlots, split_args
from gpufs.backends.cpu.split import _search_par, _search_ser
from gpufs.rules._hist_layout import HistLayout


def _case(seed, full_layout, n=300, d=30, k=7):
    """Binned rows, gradients, and k nodes (segments of a shuffled row order) of few rows."""
    rng = np.random.default_rng(seed)
    n_bins = rng.choice([1, 2, 3, 5, 17, 64, 200, 255], size=d).astype(np.int32)
    cat = rng.random(d) < 0.25
    cat &= n_bins >= 2
    Xb = np.empty((n, d), np.uint8)
    for f in range(d):
        nb = int(n_bins[f])
        # few distinct bins on some features (repeated bins), spread on others
        pool = rng.integers(0, nb, size=rng.choice([1, 3, nb]))
        Xb[:, f] = rng.choice(pool, size=n)
        if rng.random() < 0.5:
            Xb[rng.random(n) < 0.2, f] = 255  # missing
    # coarse gradients so that ties and empty (zero-sum) bins occur; zero hessians too
    gh = np.empty((n, 2), np.int64)
    gh[:, 0] = rng.integers(-3, 4, size=n) << 18
    gh[:, 1] = rng.integers(0, 3, size=n) << 18
    rows = rng.permutation(n).astype(np.int32)
    counts = rng.choice([0, 1, 2, 5, 20, 60], size=k)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    layout = HistLayout.full(d) if full_layout else HistLayout.from_n_bins(n_bins)
    cat_slot = np.where(cat, np.cumsum(cat) - 1, -1).astype(np.int32)
    split = SplitParams(
        n_bins=n_bins,
        g_scale=2.0**20,
        h_scale=2.0**20,
        reg_lambda=1.0,
        gain_divisor=1.0,
        min_child_weight=1e-3,
        min_split_gain=0.0,
        cat_slot=cat_slot if cat.any() else None,
        n_cat=int(cat.sum()),
        max_cat_to_onehot=int(rng.choice([1, 4])),
        layout=layout,
    )
    # the nodes' histograms in the layout, by numpy
    off = layout.offset
    hist = np.zeros((k, layout.n_slots, 2), np.int64)
    for s in range(k):
        r = rows[starts[s] : starts[s] + counts[s]]
        for f in range(d):
            slot = np.minimum(off[f] + Xb[r, f].astype(np.int64), off[f + 1] - 1)
            np.add.at(hist[s], slot, gh[r])
    node_g = np.array([gh[rows[a : a + c], 0].sum() for a, c in zip(starts, counts)])
    node_h = np.array([gh[rows[a : a + c], 1].sum() for a, c in zip(starts, counts)])
    penalty = rng.choice([0.0, 0.5], size=d)
    slot_full = rng.random(k) < 0.7
    return Xb, gh, rows, starts, counts, hist, split, node_g, node_h, penalty, slot_full


def _search(case, rowwise, parallel):
    Xb, gh, rows, starts, counts, hist, split, node_g, node_h, penalty, slot_full = case
    k, d = hist.shape[0], Xb.shape[1]
    sp = split_args(split)
    pf = PerFeature(
        *(
            np.full((k, d), -7, dt)
            for dt in (np.float64, np.float64, np.int64, np.int64, np.int64, np.int64)
        )
    )
    if rowwise is not None:
        # a tiny slot's histogram is never read: garbage there must not matter
        hist = hist.copy()
        hist[rowwise] = np.int64(-(1 << 40))
    slots = SearchSlots(
        hist,
        split.hist_layout().offset,
        node_g.astype(np.int64),
        node_h.astype(np.int64),
        slot_full,
        np.zeros((k, sp.n_cat, 256), np.uint8),
        counts.astype(np.int64),
        *(
            ()
            if rowwise is None
            else (rowwise, np.ascontiguousarray(Xb.T), gh, rows, starts.astype(np.int64))
        ),
    )
    feats = np.arange(d, dtype=np.int32)
    wanted = np.random.default_rng(0).random(d) < 0.9
    (_search_par if parallel else _search_ser)(slots, feats, d, penalty, wanted, sp, pf)
    return pf


@pytest.mark.parametrize("full_layout", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_row_bins_search_is_the_histogram_search(seed, full_layout):
    case = _case(seed, full_layout)
    k = case[5].shape[0]
    ref = _search(case, None, False)
    for rowwise in (np.ones(k, np.bool_), np.arange(k) % 2 == 1):
        for parallel in (False, True):
            got = _search(case, rowwise, parallel)
            for name, a, b in zip(PerFeature._fields, got, ref):
                valid = ref.score > -np.inf
                if name == "score":
                    assert np.array_equal(a, b), name
                else:  # outputs of a feature without a valid split are not read
                    assert np.array_equal(a[valid], b[valid]), name
    # the cases reach the interesting splits: categorical, missing-left, several bins
    valid = ref.score > -np.inf
    assert valid.any() and (ref.missing_left[valid] == 1).any()
    assert (case[6].cat_slot >= 0).any() and (valid & (case[6].cat_slot >= 0)).any()


def _fits(monkeypatch, make_model, X, y):
    monkeypatch.setattr(cpu_backend, "TINY_ROWS_PER_SLOT", 0.0)
    off = make_model().fit(X, y)
    monkeypatch.setattr(cpu_backend, "TINY_ROWS_PER_SLOT", 1e9)  # every node below the root
    on = make_model().fit(X, y)
    return off, on


def _assert_same_trees(a, b):
    sa, sb = a.ensemble_.stacked(), b.ensemble_.stacked()
    assert sorted(sa) == sorted(sb)
    for name in sa:
        assert np.array_equal(sa[name], sb[name]), name
    assert np.array_equal(a.selected_features_, b.selected_features_)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_tiny_nodes_grow_the_same_trees(monkeypatch, n_threads):
    from sklearn.datasets import make_classification

    X, y = make_classification(
        120, 80, n_informative=8, n_classes=3, n_clusters_per_class=1, random_state=1
    )
    X = X.astype(np.float32)
    X[::7, 3] = np.nan
    X[:, 5] = np.round(X[:, 5])  # few distinct values

    def make():
        return GBFSClassifier(
            n_estimators=12, max_depth=4, mu=0.02, device="cpu", random_state=0, n_jobs=n_threads
        )

    _assert_same_trees(*_fits(monkeypatch, make, X, y))


def test_tiny_nodes_exact_k_and_categorical(monkeypatch):
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 150
    X = pd.DataFrame(rng.normal(size=(n, 40)).astype(np.float32))
    X.columns = [f"x{i}" for i in range(40)]
    X["c"] = pd.Categorical(rng.integers(0, 9, size=n))
    y = X["x0"].to_numpy() + (X["c"].cat.codes.to_numpy() % 3) + 0.1 * rng.normal(size=n)

    def make():
        return GBFSRegressor(
            n_estimators=15, max_depth=4, n_features_to_select=3, device="cpu", random_state=0
        )

    _assert_same_trees(*_fits(monkeypatch, make, X, y))


def test_the_search_wakes_the_pool_only_for_work_that_pays():
    """``level._search_pays_threads``: a level's search work is a histogram slot of a
    searched feature per node, or a (row, feature) per tiny node (about 10 ns each), and it
    goes to the thread pool only at ``SEARCH_PARALLEL_MIN_SLOTS`` of work with two tasks of
    (slot, feature) pairs. (Which driver runs changes no result; this guards the cost rule.)"""
    from gpufs.backends.cpu._args import LevelState
    from gpufs.backends.cpu.level import TINY_ROWS_PER_SLOT, _search_pays_threads
    from gpufs.backends.cpu.split import SEARCH_PAIRS_PER_TASK, SEARCH_PARALLEL_MIN_SLOTS

    def pays(d, slots_per_feature, active, count, n_feats, tiny=TINY_ROWS_PER_SLOT):
        off = np.arange(d + 1, dtype=np.int64) * slots_per_feature
        level = LevelState(
            np.asarray(active, np.int64),
            np.empty((0, int(off[-1]), 2), np.int64),
            np.arange(n_feats, dtype=np.int32),
            n_feats,
            n_feats == d,
            np.ones(len(active), np.bool_),
        )
        return bool(_search_pays_threads(level, np.asarray(count, np.int64), off, tiny))

    big = SEARCH_PARALLEL_MIN_SLOTS
    # the root of many rows (not tiny): its histogram's slots are the work
    assert pays(500, 256, [0], [10**6], 500)
    assert not pays(500, 256, [0], [10**6], 5)  # 5 features: 1,280 slots, one task
    # a tiny root (fewer rows than slots): rows x features; 189 x 500 pays, 189 x 6 does not
    assert pays(500, 256, [0], [189], 500)
    count = np.zeros(31, np.int64)
    count[[0, 1, 2]] = 189, 100, 89
    assert not pays(500, 256, [1, 2], count, 6)  # 2 x 6 pairs: one task
    # enough pairs but little work: 60 tiny nodes of 2 rows x 30 features
    count = np.zeros(127, np.int64)
    count[:63] = 120
    count[63:] = 2
    assert 60 * 30 >= 2 * SEARCH_PAIRS_PER_TASK and 60 * 2 * 30 < big
    assert not pays(30, 256, np.arange(63, 123), count, 30)
    # without tiny nodes (``Run.tiny`` 0) the same level counts histogram slots and pays
    assert pays(30, 256, np.arange(63, 123), count, 30, tiny=0.0)
