"""Quantile binning: the cut rule of gpufs/engine/binning.py's docstring, NaN, constants, bin
counts, and the agreement of binned and raw split decisions."""

import numpy as np
import pytest

from _reference import ref_bins, ref_cuts
from gpufs import GBFSClassifier, GBFSRegressor
from gpufs._types import MISSING_BIN
from gpufs.backends.cpu import CPUBackend
from gpufs.engine.binning import BinMapper

BACKEND = CPUBackend()


def _columns(rng, n):
    """A zoo of feature columns: continuous, ties, heavy tails, NaNs, integers, rare values."""
    cols = [
        rng.normal(size=n),
        np.round(rng.normal(size=n), 1),  # many ties
        rng.standard_cauchy(size=n),  # heavy tails
        np.where(rng.random(n) < 0.3, np.nan, rng.uniform(-5, 5, n)),
        rng.integers(0, 7, n).astype(float),  # low cardinality
        np.r_[np.zeros(n - 2), 1.0, 2.0],  # rare values
        rng.exponential(size=n) * 1e-9,  # tiny scale
        rng.normal(size=n) * 1e12,  # huge scale
    ]
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("max_bins", [2, 3, 16, 255])
@pytest.mark.parametrize("n", [5, 300, 2000])
def test_cut_points_follow_the_documented_rule(max_bins, n):
    rng = np.random.default_rng(n + max_bins)
    X = _columns(rng, n)
    m = BinMapper(max_bins=max_bins, subsample=None).fit(X)
    for f in range(X.shape[1]):
        col = X[:, f]
        distinct = np.unique(col[~np.isnan(col)])
        if distinct.shape[0] <= max_bins:  # one bin per value
            expect = 0.5 * distinct[:-1] + 0.5 * distinct[1:]
        else:
            expect = ref_cuts(col, max_bins)
        np.testing.assert_array_equal(m.cuts_[f], expect, err_msg=f"feature {f}")
        assert m.n_bins_[f] == m.cuts_[f].shape[0] + 1
        assert np.all(np.diff(m.cuts_[f]) > 0)
        assert m.cuts_padded_[f, : m.cuts_[f].shape[0]].tolist() == m.cuts_[f].tolist()
        assert np.all(np.isinf(m.cuts_padded_[f, m.cuts_[f].shape[0] :]))


@pytest.mark.parametrize("max_bins", [2, 7, 64, 255])
def test_max_bins_respected(max_bins):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    m = BinMapper(max_bins=max_bins).fit(X)
    # continuous data with many distinct values: exactly max_bins value bins
    np.testing.assert_array_equal(m.n_bins_, max_bins)
    Xb = m.transform(X, BACKEND)
    assert Xb.dtype == np.uint8
    assert Xb.max() == max_bins - 1 and Xb.min() == 0
    # the bins are roughly equally full (quantiles)
    counts = np.bincount(Xb[:, 0], minlength=max_bins)
    assert counts.max() <= 3 * 3000 / max_bins + 2


def test_low_cardinality_gets_one_bin_per_value():
    rng = np.random.default_rng(1)
    n = 5000
    values = np.array([-3.0, 0.0, 0.5, 2.0, 10.0, 11.0])
    p = np.array([0.9, 0.05, 0.03, 0.0196, 0.0002, 0.0002])  # two values seen once or so
    col = rng.choice(values, size=n, p=p / p.sum())
    col[:2] = [10.0, 11.0]
    missing = rng.random(n) < 0.1
    missing[:2] = False
    X = np.stack([col, np.where(missing, np.nan, col)], axis=1)
    for max_bins in (6, 32, 255):
        m = BinMapper(max_bins=max_bins).fit(X)
        np.testing.assert_array_equal(m.n_bins_, [6, 6])
        Xb = m.transform(X, BACKEND)
        for f in range(2):
            ok = ~np.isnan(X[:, f])
            # bin k holds exactly the k-th distinct value
            np.testing.assert_array_equal(Xb[ok, f], np.searchsorted(values, X[ok, f]))
    # with fewer bins than values the quantile rule applies
    m = BinMapper(max_bins=3).fit(X)
    assert m.n_bins_[0] <= 3


def test_nan_goes_to_missing_bin():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 4))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[:, 3] = np.nan  # all missing
    m = BinMapper(max_bins=255).fit(X)
    Xb = m.transform(X, BACKEND)
    assert MISSING_BIN == 255
    np.testing.assert_array_equal(Xb == 255, np.isnan(X))
    assert Xb[~np.isnan(X)].max() < 255
    assert m.n_bins_[3] == 1 and m.cuts_[3].shape[0] == 0
    # NaN does not change the cut points of the values that are present
    m2 = BinMapper(max_bins=255).fit(np.nan_to_num(X[:, :1], nan=np.nan)[~np.isnan(X[:, 0])])
    np.testing.assert_array_equal(m.cuts_[0], m2.cuts_[0])


def test_transform_matches_reference_and_bin_intervals():
    rng = np.random.default_rng(3)
    X = _columns(rng, 400)
    m = BinMapper(max_bins=20).fit(X)
    # new data: unseen values, values equal to cut points, out of range, NaN
    Xn = _columns(np.random.default_rng(4), 300)
    for f in range(X.shape[1]):
        c = m.cuts_[f]
        Xn[: c.shape[0], f] = c
        Xn[-1, f], Xn[-2, f] = -1e308, 1e308
    Xb = m.transform(Xn, BACKEND)
    for f in range(X.shape[1]):
        c = m.cuts_[f]
        np.testing.assert_array_equal(Xb[:, f], ref_bins(Xn[:, f], c))
        x, b = Xn[:, f], Xb[:, f].astype(int)
        ok = ~np.isnan(x)
        # bin b holds cuts[b-1] < x <= cuts[b]
        padded = np.r_[-np.inf, c, np.inf]
        assert np.all(padded[b[ok]] < x[ok]) and np.all(x[ok] <= padded[b[ok] + 1])


def test_threshold_value_agrees_with_bins():
    """x <= threshold  iff  bin <= bin_threshold, for every possible split threshold."""
    rng = np.random.default_rng(5)
    X = _columns(rng, 1000)
    m = BinMapper(max_bins=32).fit(X)
    Xn = np.concatenate([X, _columns(np.random.default_rng(6), 500)])
    Xb = m.transform(Xn, BACKEND)
    for f in range(X.shape[1]):
        ok = ~np.isnan(Xn[:, f])
        for b in range(int(m.n_bins_[f])):  # the top bin too: the missingness split
            thr = m.threshold_value(f, b)
            np.testing.assert_array_equal(
                Xn[ok, f] <= thr, Xb[ok, f] <= b, err_msg=f"feature {f} bin {b}"
            )
        assert m.threshold_value(f, int(m.n_bins_[f]) - 1) == np.inf


def test_fitted_model_thresholds_agree_with_bins():
    """Raw-value prediction equals binned prediction on every row (the same leaves)."""
    rng = np.random.default_rng(7)
    X = _columns(rng, 600)
    y = np.nan_to_num(X[:, 3]) + X[:, 4] + (X[:, 1] > 0) + 0.1 * rng.normal(size=600)
    est = GBFSRegressor(n_estimators=10, max_bins=16, mu=0.0, device="cpu").fit(X, y)
    ens = est.ensemble_
    s = ens.stacked()
    split = s["feature"] >= 0
    assert split.sum() > 20
    for f, b, thr in zip(s["feature"][split], s["bin_threshold"][split], s["threshold"][split]):
        assert thr == est.bin_mapper_.threshold_value(f, b)
    Xn = _columns(np.random.default_rng(8), 400)
    Xb = est.bin_mapper_.transform(Xn, BACKEND)
    np.testing.assert_array_equal(ens.predict_raw(Xn, BACKEND), ens.predict_binned(Xb, BACKEND))


def test_constant_features_have_one_bin_and_split_only_on_missingness():
    rng = np.random.default_rng(9)
    n = 400
    signal = rng.normal(size=n)
    X = np.stack(
        [np.full(n, 3.0), signal, np.full(n, np.nan), np.where(rng.random(n) < 0.5, np.nan, -1.0)],
        axis=1,
    )
    m = BinMapper().fit(X)
    np.testing.assert_array_equal(m.n_bins_, [1, 255, 1, 1])
    Xb = m.transform(X, BACKEND)
    assert np.all(Xb[:, 0] == 0)
    # the label is the missingness of feature 3 (constant where present): only the split
    # "every value left, NaN right" (bin_threshold = n_bins - 1 = 0) can find it
    y = np.isnan(X[:, 3]).astype(int)
    est = GBFSClassifier(n_estimators=5, mu=0.0, max_depth=2, device="cpu").fit(X, y)
    s = est.ensemble_.stacked()
    assert s["feature"][0, 0] == 3
    assert s["bin_threshold"][0, 0] == 0 and not s["missing_left"][0, 0]
    assert s["threshold"][0, 0] == np.inf
    used = s["feature"]
    assert set(np.unique(used[used >= 0]).tolist()) == {3}
    np.testing.assert_array_equal(est.selected_features_, [3])
    # raw and binned prediction agree, and separate the classes perfectly; any value, however
    # large (+inf included, in the engine), goes left like -1.0
    np.testing.assert_array_equal(est.predict(X), y)
    ens = est.ensemble_
    np.testing.assert_array_equal(ens.predict_raw(X, BACKEND), ens.predict_binned(Xb, BACKEND))
    Xi = X[:4].copy()
    Xi[:, 3] = [1e300, -1e300, np.nan, 7.0]
    np.testing.assert_array_equal(est.predict(Xi), [0, 0, 1, 0])
    Xi[:2, 3] = [np.inf, -np.inf]
    raw_i = ens.predict_raw(Xi, BACKEND)
    np.testing.assert_array_equal(raw_i, ens.predict_binned(m.transform(Xi, BACKEND), BACKEND))
    np.testing.assert_array_equal(raw_i[:2], raw_i[[3, 3]])
    # the +inf threshold survives a JSON round trip
    from gpufs.engine.tree import TreeEnsemble

    again = TreeEnsemble.from_json(ens.to_json())
    np.testing.assert_array_equal(again.predict_raw(Xi, BACKEND), raw_i)
    # the same when the label also depends on another feature: both are used
    y2 = (signal > 0).astype(int) ^ np.isnan(X[:, 3]).astype(int)
    est = GBFSClassifier(n_estimators=5, mu=0.0, device="cpu").fit(X, y2)
    used = est.ensemble_.stacked()["feature"]
    assert set(np.unique(used[used >= 0]).tolist()) == {1, 3}
    # constant features without missing values, and all-NaN ones, are never split on
    est = GBFSRegressor(n_estimators=3, mu=0.0, device="cpu").fit(X[:, [0, 2]], signal)
    assert np.all(est.ensemble_.stacked()["feature"] == -1)
    assert est.selected_features_.shape == (0,)
    # leaves only: each tree's value is the mean residual, summed from gradients rounded to
    # the 16-bit fixed point (gpufs.engine.quantize), so at most max|g| / 2**15 per tree off
    # the mean (the scale is a power of two above 2**14 / max|g|), for each of the 3 trees
    max_g = np.max(np.abs(signal - signal.mean()))
    np.testing.assert_allclose(
        est.predict(X[:, [0, 2]]), signal.mean(), rtol=0, atol=3 * max_g / 2**15
    )


def test_subsample_is_seeded_and_bounded():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(5000, 2))
    a = BinMapper(max_bins=50, subsample=1000, random_state=1).fit(X)
    b = BinMapper(max_bins=50, subsample=1000, random_state=1).fit(X)
    c = BinMapper(max_bins=50, subsample=1000, random_state=2).fit(X)
    for f in range(2):
        np.testing.assert_array_equal(a.cuts_[f], b.cuts_[f])
        assert a.n_bins_[f] == 50
        # cut points are midpoints of values present in X
        assert X[:, f].min() < a.cuts_[f].min() and a.cuts_[f].max() < X[:, f].max()
    assert not np.array_equal(a.cuts_[0], c.cuts_[0])


def test_to_dict_round_trip():
    rng = np.random.default_rng(11)
    X = _columns(rng, 300)
    m = BinMapper(max_bins=40).fit(X)
    m2 = BinMapper.from_dict(m.to_dict())
    for f in range(X.shape[1]):
        np.testing.assert_array_equal(m.cuts_[f], m2.cuts_[f])
    np.testing.assert_array_equal(m.n_bins_, m2.n_bins_)
    np.testing.assert_array_equal(m.transform(X, BACKEND), m2.transform(X, BACKEND))


@pytest.mark.parametrize("max_bins", [0, 1, 256, 300])
def test_bad_max_bins(max_bins):
    with pytest.raises(ValueError, match=r"max_bins must be in \[2, 255\]"):
        BinMapper(max_bins=max_bins)


def _every_cut_count():
    """A cut matrix with every count of cut points, 0 .. 254 (feature f has f cuts), and
    values on every cut, just below and above it, infinities and NaN."""
    from gpufs.rules._gain import CUT_COLUMNS

    rng = np.random.default_rng(7)
    d = CUT_COLUMNS + 1
    n_cuts = np.arange(d, dtype=np.int64)
    cuts = np.full((d, CUT_COLUMNS), np.inf)
    for f in range(d):
        cuts[f, :f] = np.sort(rng.choice(np.arange(-400, 400) / 8.0, f, replace=False))
    rows = []
    for f in range(d):
        c = cuts[f, :f]
        col = np.r_[c, np.nextafter(c, -np.inf), np.nextafter(c, np.inf), -np.inf, np.inf, np.nan]
        col = np.r_[col, rng.uniform(-60, 60, 3 * CUT_COLUMNS + 3 - col.shape[0])]
        rows.append(col)
    return cuts, n_cuts, np.stack(rows, axis=1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bins_are_the_count_of_cuts_below_for_every_cut_count(dtype):
    """The fixed-shape search (``rules._gain.bin_of``) against np.searchsorted on every count
    of cut points a feature can have, on values on, beside and far from the cuts."""
    cuts, n_cuts, X = _every_cut_count()
    X = X.astype(dtype)
    Xb = BACKEND.bin_transform(X, cuts, n_cuts)
    for f in range(X.shape[1]):
        x = X[:, f].astype(np.float64)
        want = np.searchsorted(cuts[f, : n_cuts[f]], x, side="left")
        want[np.isnan(x)] = MISSING_BIN
        np.testing.assert_array_equal(Xb[:, f], want, err_msg=f"feature {f}")


def test_short_searches_are_the_full_search_for_few_cuts():
    """``bin_of_few`` (at most ``FEW_CUTS`` cut points) and ``bin_of_one`` (at most one), the
    CPU's shorter searches, give ``bin_of``'s bin for every value of such a feature, run as
    plain Python (the rule itself, not a compilation of it)."""
    from gpufs.rules._gain import FEW_CUTS, bin_of, bin_of_few, bin_of_one

    cuts, n_cuts, X = _every_cut_count()
    checked = 0
    for f in range(FEW_CUTS + 1):
        for x in X[:, f].tolist():
            want = bin_of(x, cuts, f)
            assert bin_of_few(x, cuts, f) == want, (f, x)
            if n_cuts[f] <= 1:
                assert bin_of_one(x, cuts, f) == want, (f, x)
            checked += 1
    assert checked == (FEW_CUTS + 1) * X.shape[0]
    # a 17th cut point is beyond the short search: it must go to the full one
    x = float(cuts[FEW_CUTS + 1, FEW_CUTS]) + 1.0
    assert bin_of(x, cuts, FEW_CUTS + 1) == FEW_CUTS + 1 != bin_of_few(x, cuts, FEW_CUTS + 1)


def test_a_cut_matrix_that_is_not_inf_padded_is_refused():
    """``bin_of`` reads the whole row, so a row padded with anything but +inf would bin
    wrongly without a word: the backend refuses it."""
    cuts, n_cuts, X = _every_cut_count()
    bad = cuts.copy()
    bad[3, 200] = 1.0
    with pytest.raises(ValueError, match="padded with \\+inf"):
        BACKEND.bin_transform(X, bad, n_cuts)
    with pytest.raises(ValueError, match="must be"):
        BACKEND.bin_transform(X, cuts[:, :100], n_cuts)
    unsorted = cuts.copy()
    unsorted[9, :2] = unsorted[9, 1::-1]
    with pytest.raises(ValueError, match="ascending"):
        BACKEND.bin_transform(X, unsorted, n_cuts)


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (255, 7), (257, 300), (3000, 5)])
def test_columns_of_is_the_transpose(shape):
    """The column-major copy the partition and column-wise histograms read, at block edges
    (``binning.COLUMN_ROWS`` rows a task) and on empty and one-cell matrices."""
    from gpufs.backends.cpu.binning import _columns_of

    Xb = np.random.default_rng(1).integers(0, 256, size=shape, dtype=np.uint8)
    out = np.full(shape[::-1], 7, np.uint8)
    _columns_of(Xb, out)
    np.testing.assert_array_equal(out, Xb.T)


def test_blocks_fitted_on_threads_give_the_serial_cut_points():
    """Inside a fit's thread limit the column blocks are fitted on Python threads
    (``binning._map_blocks``): the cut points and most frequent bins are the serial ones, in
    column order, with categorical columns and missing values among them, and at most T
    blocks are in flight."""
    import threading

    from gpufs._threading import thread_limit
    from gpufs.data._category_codes import CategoryCodes
    from gpufs.engine import binning

    rng = np.random.default_rng(11)
    n, d = 3000, 1200  # width max(16, 2**20 // 3000) = 349 columns: 4 blocks
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[:, ::7] = rng.integers(0, 5, size=(n, X[:, ::7].shape[1]))
    X[rng.random((n, d)) < 0.02] = np.nan
    cat = np.zeros(d, bool)
    cat[3::50] = True
    X[:, cat] = rng.integers(0, 6, size=(n, int(cat.sum())))
    feats = np.flatnonzero(cat).tolist()
    codes = CategoryCodes(d, {f: list("abcdef") for f in feats}, {f: 6 for f in feats})
    serial = BinMapper().fit(X, codes)
    names, in_flight, most = set(), [0], [0]
    lock = threading.Lock()
    fit_block = BinMapper._fit_block

    def watched(self, xp, sample):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            names.add(threading.current_thread().name.split("_")[0])
        try:
            return fit_block(self, xp, sample)
        finally:
            with lock:
                in_flight[0] -= 1

    BinMapper._fit_block = watched
    try:
        with thread_limit(2):
            threaded = BinMapper().fit(X, codes)
    finally:
        BinMapper._fit_block = fit_block
    assert names == {"gpufs-bins"} and 1 <= most[0] <= 2
    assert len(threaded.cuts_) == d
    for a, b in zip(serial.cuts_, threaded.cuts_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(serial.most_freq_bin_, threaded.most_freq_bin_)
    np.testing.assert_array_equal(serial.most_freq_frac_, threaded.most_freq_frac_)
    np.testing.assert_array_equal(serial.transform(X, BACKEND), threaded.transform(X, BACKEND))
    assert list(binning._map_blocks(lambda b: 2 * b, [0, 3, 6, 9], np)) == [0, 6, 12, 18]


def _small_int_zoo(rng, n, dtype):
    """Columns of small integers (``BinMapper._small_int_cuts`` counts them) beside columns
    that look like them in their first rows but are not, and other columns."""
    d = 16
    X = rng.integers(0, 20, size=(n, d)).astype(dtype)
    X[:, 1] = rng.integers(0, 2, n)  # flags
    X[:, 2] = -0.0  # signed zeros beside ones
    X[::3, 2] = 1
    X[:, 3] = 255.0
    X[::5, 3] = 0
    X[:, 4] = rng.integers(0, 256, n)  # 256 values: more than max_bins
    X[:, 5] = np.nan
    X[:, 6] = 7.0
    X[100:, 7] = 1.5  # not an integer, after the head
    X[200:, 8] = 256.0  # out of range, after the head
    X[300:, 9] = -1.0  # negative, after the head
    X[:, 10] = rng.normal(size=n)
    X[:, 11] = rng.integers(0, 40, n)  # 40 values: quantiles at max_bins=16
    X[rng.random((n, d)) < 0.05] = np.nan
    X[:, 12] = rng.integers(0, 6, n)  # categorical, 6 codes
    X[:, 13] = rng.integers(0, 9, n)  # categorical, 5 codes: 5..8 in the last bin
    X[:, 14] = np.where(rng.random(n) < 0.7, np.nan, 3.0)  # mostly missing
    return X


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "n, subsample, max_bins", [(3000, None, 255), (3000, 700, 16), (40, None, 255)]
)
def test_counted_small_integer_columns_get_the_sorted_cut_points(
    monkeypatch, dtype, n, subsample, max_bins
):
    """Columns of small integers get their cut points and most frequent bins from counts
    (``_small_int_cuts``), bit for bit those of the sort, on threads too; a column that only
    starts like one, or has more values than bins, is sorted."""
    from gpufs._threading import thread_limit
    from gpufs.data._category_codes import CategoryCodes
    from gpufs.engine import binning

    X = _small_int_zoo(np.random.default_rng(n + max_bins), n, dtype)
    codes = CategoryCodes(16, {12: list("abcdef"), 13: list("abcde")}, {12: 6, 13: 5})
    counted = []
    real = BinMapper._cuts_of_counts

    def watched(self, cols, *a):
        found = real(self, cols, *a)
        counted.extend(found)
        return found

    monkeypatch.setattr(BinMapper, "_cuts_of_counts", watched)
    fast = BinMapper(max_bins=max_bins, subsample=subsample).fit(X, codes)
    with thread_limit(2):
        fast2 = BinMapper(max_bins=max_bins, subsample=subsample).fit(X, codes)
    monkeypatch.setattr(binning, "_counts_small_ints", lambda xp, X: False)
    sort = BinMapper(max_bins=max_bins, subsample=subsample).fit(X, codes)
    # counted: every column whose sampled rows are NaN or integers 0..255, of at most
    # max_bins values, or categorical
    rows = fast.sample_rows(n)
    S = X if rows is None else X[rows]
    with np.errstate(invalid="ignore"):
        ints = np.isnan(S) | ((S >= 0) & (S <= 255) & (S == np.floor(S)))
    n_values = [np.unique(S[~np.isnan(S[:, f]), f]).shape[0] for f in range(16)]
    expected = {f for f in range(16) if ints[:, f].all() and n_values[f] <= max_bins}
    assert set(counted) == expected | {12, 13}
    assert {1, 2, 3, 5, 6, 14} <= expected and 10 not in expected
    for m in (fast, fast2):
        for f, (a, b) in enumerate(zip(m.cuts_, sort.cuts_)):
            assert a.dtype == b.dtype and np.array_equal(a, b), f
        np.testing.assert_array_equal(m.most_freq_bin_, sort.most_freq_bin_)
        np.testing.assert_array_equal(m.most_freq_frac_, sort.most_freq_frac_)


def test_small_int_counts_reads_the_listed_rows_and_columns():
    """``small_int_counts``: rows per value 0..255, NaN rows, and whether a column holds
    anything else; only the listed rows and columns are read."""
    from gpufs.backends.cpu.binning import small_int_counts

    X = np.array(
        [[0, 1.0, np.nan, 5], [0, 2.5, 255, -1], [3, 1.0, 255, 7], [np.nan, 256, 0, 9]],
        np.float64,
    )
    counts, n_nan, small = small_int_counts(X, None, np.array([0, 1, 2]))
    assert counts.shape == (3, 256) and n_nan.tolist() == [1, 0, 1]
    assert small.tolist() == [True, False, True]
    assert counts[0, 0] == 2 and counts[0, 3] == 1 and counts[0].sum() == 3
    assert counts[2, 255] == 2 and counts[2, 0] == 1
    counts, n_nan, small = small_int_counts(X, np.array([0, 2]), np.array([1, 3]))
    assert small.tolist() == [True, True]
    assert counts[0, 1] == 2 and counts[1, 5] == 1 and counts[1, 7] == 1 and n_nan.sum() == 0
