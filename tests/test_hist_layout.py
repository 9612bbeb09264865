"""The compact histogram layout (gpufs/rules/_hist_layout.py) and the CPU's ways of filling it.

A feature takes its value bins + 1 slots (the missing bin last); a sparse feature's most
frequent bin is derived from the node's totals; histograms are filled row-wise or column-wise.
Every way must give the histogram of the full (dense, 256 per feature) layout, bit for bit,
and the same trees.
"""

import pickle

import numpy as np
import pytest

from gpufs import GBFSClassifier
from gpufs.backends.cpu import CPUBackend
from gpufs.backends.cpu.histogram import sparse_rows
from gpufs.engine.binning import BinMapper
from gpufs.rules._hist_layout import HistLayout, slot_of


def test_compact_layout_offsets_and_slots():
    lay = HistLayout.from_n_bins([3, 1, 255, 7])
    np.testing.assert_array_equal(lay.offset, [0, 4, 6, 262, 270])
    np.testing.assert_array_equal(lay.widths, [4, 2, 256, 8])
    assert lay.n_slots == 270 and not lay.has_most_freq and not lay.is_full
    np.testing.assert_array_equal(
        lay.slots_of([1, 3]), [4, 5, 262, 263, 264, 265, 266, 267, 268, 269]
    )
    assert lay.slots_of([]).shape == (0,)
    # value bin b at lo + b, the missing bin (255) at the feature's last slot
    assert [slot_of(b, 6, 261) for b in (0, 254, 255)] == [6, 260, 261]
    assert [slot_of(b, 0, 3) for b in (0, 2, 255)] == [0, 2, 3]


def test_full_layout_is_the_dense_histogram():
    lay = HistLayout.full(3)
    assert lay.is_full and lay.n_slots == 768
    rng = np.random.default_rng(0)
    dense = rng.integers(-9, 9, size=(2, 3, 256, 2))
    np.testing.assert_array_equal(lay.compact(dense), dense.reshape(2, 768, 2))
    np.testing.assert_array_equal(lay.dense(lay.compact(dense)), dense)


def test_dense_and_compact_are_inverse_on_the_bins_that_exist():
    lay = HistLayout.from_n_bins([2, 5])
    rng = np.random.default_rng(1)
    compact = rng.integers(-9, 9, size=(4, lay.n_slots, 2))
    dense = lay.dense(compact)
    assert dense.shape == (4, 2, 256, 2)
    np.testing.assert_array_equal(dense[:, 0, 2:255], 0)
    np.testing.assert_array_equal(dense[:, 0, 255], compact[:, 2])  # feature 0's missing bin
    np.testing.assert_array_equal(lay.compact(dense), compact)


def test_most_frequent_bins_make_sparse_features():
    lay = HistLayout.from_n_bins(
        [3, 3, 3, 4], most_freq_bin=[0, 2, 255, 1], most_freq_frac=[0.95, 0.5, 0.85, 0.8]
    )
    # 80% is enough (LightGBM's sparse_threshold); the missing bin is the last slot
    np.testing.assert_array_equal(lay.most_freq, [0, -1, 3, 1])
    assert lay.has_most_freq and not lay.without_most_freq().has_most_freq
    np.testing.assert_array_equal(lay.without_most_freq().offset, lay.offset)


@pytest.mark.parametrize(
    "bad",
    [
        dict(offset=[1, 3]),
        dict(offset=[0, 1]),
        dict(offset=[0, 300]),
        dict(offset=[0, 3, 6], most_freq=[0, 3]),
        dict(offset=[0, 3], most_freq=[0, 0]),
    ],
)
def test_invalid_layouts_are_refused(bad):
    with pytest.raises(ValueError):
        HistLayout(**bad)


def test_layouts_compare_hash_and_pickle_by_content():
    a = HistLayout.from_n_bins([3, 4], [0, 1], [0.9, 0.1])
    b = HistLayout.from_n_bins([3, 4], [0, 1], [0.9, 0.1])
    c = HistLayout.from_n_bins([3, 4])
    assert a == b and hash(a) == hash(b) and a != c
    assert {a: 1}[b] == 1
    again = pickle.loads(pickle.dumps(a))
    assert again == a and again.has_most_freq


def _sparse_table(n=301, seed=0):
    """Bins of 6 features: dense ones, two sparse ones (most frequent bin 0 and 3), one whose
    most frequent bin is the missing one, and one with a few missing values."""
    rng = np.random.default_rng(seed)
    Xb = rng.integers(0, 6, size=(n, 6)).astype(np.uint8)
    Xb[:, 1] = np.where(rng.random(n) < 0.08, rng.integers(0, 6, n), 0)
    Xb[:, 2] = np.where(rng.random(n) < 0.1, 1, 3)
    Xb[:, 4] = np.where(rng.random(n) < 0.1, 2, 255)
    Xb[rng.random(n) < 0.05, 5] = 255
    lay = HistLayout.from_n_bins(
        [6, 6, 4, 6, 6, 6],
        most_freq_bin=[0, 0, 3, 0, 255, 0],
        most_freq_frac=[0.2, 0.92, 0.9, 0.2, 0.9, 0.2],
    )
    gh = np.stack([rng.integers(-(2**40), 2**40, n), rng.integers(1, 2**20, n)], axis=1)
    return Xb, gh, lay


def test_sparse_rows_list():
    Xb, _, lay = _sparse_table()
    for n in (Xb.shape[0], 16, 7):  # the 8-bins-per-word skip and its tail
        X = Xb[:n]
        ptr, slots, dense_f, sparse_f = sparse_rows(np.ascontiguousarray(X.T), lay)
        np.testing.assert_array_equal(sparse_f, [1, 2, 4])
        np.testing.assert_array_equal(dense_f, [0, 3, 5])
        want = []
        for r in range(n):
            for f in sparse_f:
                lo, last = int(lay.offset[f]), int(lay.offset[f + 1]) - 1
                s = slot_of(int(X[r, f]), lo, last)
                if s != lo + lay.most_freq[f]:
                    want.append(s)
            assert ptr[r + 1] == len(want)
        np.testing.assert_array_equal(slots, want)


@pytest.mark.parametrize("loop", ["rows", "columns"])
@pytest.mark.parametrize("threads,rows_per_task", [(1, 16384), (2, 7)])
def test_every_way_of_filling_gives_the_dense_histogram(loop, threads, rows_per_task):
    """Row-wise (with private copies of tiny tasks) and column-wise, the sparse features read
    from the list and their most frequent bin derived, or every bin added; all features or a
    subset: the full layout's histogram, expanded, bit for bit."""
    Xb, gh, lay = _sparse_table()
    n = Xb.shape[0]
    rows = np.random.default_rng(2).permutation(n).astype(np.int32)
    start, count = np.array([0, 0, 120, 200]), np.array([n, 120, 80, 101])
    nodes = np.array([1, 2, 3, 0])
    be = CPUBackend(
        n_threads=threads, rows_per_task=rows_per_task, parallel_min_work=1, hist_loop=loop
    )
    full = be.histograms(Xb, gh, rows, start, count, nodes)
    for layout in (lay, lay.without_most_freq()):
        got = be.histograms(Xb, gh, rows, start, count, nodes, layout=layout)
        assert got.shape == (4, lay.n_slots, 2)
        np.testing.assert_array_equal(layout.dense(got), full)
        feats = np.array([1, 4, 5], np.int32)  # a subset: every bin added, the rest untouched
        sub = be.histograms(Xb, gh, rows, start, count, nodes, feats=feats, layout=layout)
        slots = lay.slots_of(feats)
        np.testing.assert_array_equal(sub[:, slots], got[:, slots])
    # a histogram sums to the node's totals on every feature (the derived bins included)
    tot = np.stack([gh[rows[start[k] : start[k] + count[k]]].sum(axis=0) for k in nodes])
    for f in range(6):
        np.testing.assert_array_equal(got[:, lay.offset[f] : lay.offset[f + 1]].sum(axis=1), tot)


def test_hist_loop_is_checked():
    with pytest.raises(ValueError, match="hist_loop"):
        CPUBackend(hist_loop="diagonal")


def test_bin_mapper_most_frequent_bins():
    rng = np.random.default_rng(3)
    n = 1000
    X = rng.normal(size=(n, 4))
    X[:, 1] = np.where(rng.random(n) < 0.9, 0.0, rng.poisson(2.0, n) + 1.0)  # 0 in ~90%
    X[rng.random(n) < 0.85, 2] = np.nan  # missing ~85%
    X[:, 3] = rng.integers(0, 3, n)  # 3 values
    bm = BinMapper(max_bins=64).fit(X)
    assert bm.most_freq_bin_[1] == 0 and 0.85 < bm.most_freq_frac_[1] < 0.95
    assert bm.most_freq_bin_[2] == 255 and 0.8 < bm.most_freq_frac_[2] < 0.9
    b3 = int(np.argmax(np.bincount(X[:, 3].astype(int))))
    assert bm.most_freq_bin_[3] == b3 and bm.most_freq_frac_[3] < 0.5
    assert bm.most_freq_frac_[0] < 0.05
    lay = bm.hist_layout()
    np.testing.assert_array_equal(lay.widths, bm.n_bins_ + 1)
    np.testing.assert_array_equal(lay.most_freq, [-1, 0, bm.n_bins_[2], -1])
    assert bm.hist_layout() is lay  # made once per fit
    # not saved with a model: a loaded mapper derives no bin (the trees do not depend on it)
    loaded = BinMapper.from_dict(bm.to_dict())
    np.testing.assert_array_equal(loaded.hist_layout().offset, lay.offset)
    assert not loaded.hist_layout().has_most_freq
    old = pickle.loads(pickle.dumps(bm))
    state = dict(old.__dict__)
    for key in ("most_freq_bin_", "most_freq_frac_", "_hist_layout"):
        state.pop(key, None)
    older = BinMapper.__new__(BinMapper)
    older.__setstate__(state)  # a mapper pickled before the attributes existed
    assert not older.hist_layout().has_most_freq


def test_trees_do_not_depend_on_how_histograms_are_filled(monkeypatch):
    """GBFS on a wide sparse table: row-wise, column-wise, and without the sparse features'
    list (every bin added): the same trees and selection, bit for bit."""
    rng = np.random.default_rng(4)
    n, d = 600, 60
    X = rng.poisson(0.05, size=(n, d)).astype(np.float32)
    X[:, :5] = rng.poisson(1.0, size=(n, 5))
    y = (X[:, 0] - X[:, 1] + X[:, 7] + rng.normal(size=n) > 0).astype(int)
    import gpufs.backends.cpu as cpu

    results = []
    for loop, most_freq in (("auto", True), ("rows", True), ("columns", True), ("rows", False)):
        init = cpu.CPUBackend.__init__

        def patched(self, *a, _loop=loop, _mf=most_freq, **kw):
            init(self, *a, **kw)
            self.hist_loop, self.most_freq = _loop, _mf

        monkeypatch.setattr(cpu.CPUBackend, "__init__", patched)
        est = GBFSClassifier(mu=0.02, n_estimators=8, max_depth=4, device="cpu").fit(X, y)
        monkeypatch.setattr(cpu.CPUBackend, "__init__", init)
        results.append(est)
    assert results[0].bin_mapper_.hist_layout().has_most_freq
    ref = results[0].ensemble_.stacked()
    for est in results[1:]:
        s = est.ensemble_.stacked()
        for key in ref:
            np.testing.assert_array_equal(s[key], ref[key], err_msg=key)
        np.testing.assert_array_equal(est.selected_features_, results[0].selected_features_)


@pytest.mark.parametrize("threads,rows_per_task", [(1, 16384), (2, 7)])
def test_full_width_row_loops_match_the_compact_loop(threads, rows_per_task):
    """A layout whose every feature has 256 slots (255-bin features; a dense tall table) is
    filled row-wise at a constant stride (``_rows_into_all_full``, ``_rows_into_full``): the
    same histogram as a numpy sum and as the compact layout's loop, the missing bin (255) in
    the last slot, odd row counts (the unpaired last row), all features or a subset."""
    from gpufs.backends.cpu import histogram as hmod

    rng = np.random.default_rng(5)
    n, d = 1001, 5
    Xb = rng.integers(0, 255, size=(n, d)).astype(np.uint8)
    Xb[rng.random((n, d)) < 0.05] = 255
    gh = np.stack([rng.integers(-(2**40), 2**40, n), rng.integers(1, 2**20, n)], axis=1)
    rows = rng.permutation(n).astype(np.int32)
    start, count = np.array([0, 0, 333, 600]), np.array([n, 333, 267, 401])
    nodes = np.array([0, 1, 2, 3])
    lay = HistLayout.full(d)
    want = np.zeros((4, lay.n_slots, 2), np.int64)
    for k in range(4):
        r = rows[start[k] : start[k] + count[k]]
        for f in range(d):
            np.add.at(want[k], 256 * f + Xb[r, f].astype(np.int64), gh[r])
    be = CPUBackend(
        n_threads=threads, rows_per_task=rows_per_task, parallel_min_work=1, hist_loop="rows"
    )
    got = be.histograms(Xb, gh, rows, start, count, nodes, layout=lay)
    np.testing.assert_array_equal(got, want)
    feats = np.array([0, 3, 4], np.int32)
    sub = be.histograms(Xb, gh, rows, start, count, nodes, feats=feats, layout=lay)
    slots = lay.slots_of(feats)
    np.testing.assert_array_equal(sub[:, slots], want[:, slots])
    # the compact loop on the same layout, called directly: the same slots
    H = np.zeros(2 * lay.n_slots, np.int64)
    H2 = np.zeros_like(H)
    hmod._rows_into_all(Xb, gh, rows, 0, n, lay.offset.astype(np.int32), H)
    hmod._rows_into_all_full(Xb, gh, rows, 0, n, H2)
    np.testing.assert_array_equal(H2, H)
    np.testing.assert_array_equal(H2.reshape(-1, 2), want[0])


def test_sparse_builds_of_few_dense_features_run_column_wise():
    """``use_columns``: a build that takes the sparse features from the sparse rows list,
    reads at most 1 / COLUMN_SPARSE_SHARE of the features densely and has no more sparse
    updates than dense ones runs column-wise in the rule's range of rows; and on such a
    table (one-hot flags beside a few numeric columns) the automatic loop gives the
    histograms of both forced loops and of a numpy sum."""
    from gpufs.backends.cpu import histogram as hmod

    auto = hmod.AUTO
    assert hmod.use_columns(auto, 8000, 1000, True)
    assert not hmod.use_columns(auto, 8000, 1000, False)
    assert not hmod.use_columns(auto, hmod.COLUMN_MIN_ROWS - 1, 1000, True)
    assert not hmod.use_columns(auto, hmod.COLUMN_MAX_ROWS + 1, 1000, True)
    assert not hmod.use_columns(hmod.ROWS, 8000, 1000, True)

    rng = np.random.default_rng(8)
    n, levels = 3000, [12] * 12
    codes = [rng.zipf(2.0, size=n) % k for k in levels]
    X = np.hstack([np.eye(k)[c] for k, c in zip(levels, codes)] + [rng.normal(size=(n, 2))])
    d = X.shape[1]
    bm = BinMapper().fit(X)
    lay = bm.hist_layout()
    dense = int((lay.most_freq < 0).sum())
    assert lay.has_most_freq and hmod.COLUMN_SPARSE_SHARE * dense <= d
    Xb = bm.transform(X, CPUBackend())
    _, sparse_slots, _, _ = hmod.sparse_rows(np.ascontiguousarray(Xb.T), lay)
    assert dense * n >= sparse_slots.shape[0]  # at least as many dense updates as sparse
    gh = np.stack([rng.integers(-500, 500, n), rng.integers(1, 500, n)], axis=1)
    rows = rng.permutation(n).astype(np.int32)
    start, count, nodes = np.array([0, 0, 1700]), np.array([n, 1700, 1300]), np.array([0, 1, 2])
    ref = np.zeros((3, d, 256, 2), np.int64)
    for k in range(3):
        r = rows[start[k] : start[k] + count[k]]
        for f in range(d):
            np.add.at(ref[k, f], Xb[r, f], gh[r])
    for loop in ("auto", "rows", "columns"):
        for threads in (1, 2):
            be = CPUBackend(n_threads=threads, hist_loop=loop)
            got = be.histograms(Xb, gh, rows, start, count, nodes, layout=lay)
            np.testing.assert_array_equal(lay.dense(got), ref.reshape(3, d, 256, 2))
