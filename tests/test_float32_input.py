"""A host float32 table is read as it is: no float64 copy of X, and the fit of a float64 copy.

The input door (``gpufs.data._input.check_X``) keeps float32 for the boosted families (GBFS
and multitask GBFS, ``_host_float32``), and every host kernel that reads raw X (the NaN scan,
the binning, the raw prediction, GT-GBM's standardized columns) converts bounded row chunks
to float64 (``gpufs.backends.cpu.binning.float64_rows``). float32 -> float64 is exact, so the
bins, trees, selections and predictions must equal those of the table's float64 copy, bit for
bit, whatever the row order of X; the chunks are made small here so that every pass crosses
many of them.
"""

import tracemalloc

import numpy as np
import pandas as pd
import pytest

import gpufs.backends.cpu.binning as cpu_binning
import gpufs.data._input as input_door
from gpufs import (
    ControlBurnRegressor,
    GBFSClassifier,
    GBFSRegressor,
    MultiTaskGBFSRegressor,
    StagewiseRegressor,
)
from gpufs.backends.cpu import CPUBackend
from gpufs.data._input import check_X


@pytest.fixture
def small_chunks(monkeypatch):
    """Row chunks of a few rows: a 600-row table is converted in dozens of them."""
    monkeypatch.setattr(cpu_binning, "CHUNK_ELEMENTS_FLOAT64", 97)
    monkeypatch.setattr(input_door, "CHUNK_ELEMENTS_NONFINITE", 89)


def _table(n=600, d=9, seed=0, nan=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[:, 3] = np.round(X[:, 3], 1)  # ties
    X[:, 4] *= np.float32(1e30)  # values a float32 barely holds
    if nan:
        X[rng.random((n, d)) < 0.08] = np.nan
    z = np.nan_to_num(X[:, 0].astype(np.float64)) - 0.5 * np.nan_to_num(X[:, 2])
    return X, z + 0.3 * rng.normal(size=n)


def _ordered(X, order):
    if order == "F":
        return np.asfortranarray(X)
    if order == "strided":
        wide = np.repeat(X, 2, axis=1)
        return wide[:, ::2]
    return np.ascontiguousarray(X)


def _assert_same_fit(a, b):
    np.testing.assert_array_equal(a.bin_mapper_.cuts_padded_, b.bin_mapper_.cuts_padded_)
    ta, tb = a.ensemble_.stacked(), b.ensemble_.stacked()
    assert ta.keys() == tb.keys()
    for k in ta:
        np.testing.assert_array_equal(ta[k], tb[k], err_msg=k)
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)


@pytest.mark.parametrize("order", ["C", "F", "strided"])
@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
def test_float32_fits_and_predicts_as_its_float64_copy(small_chunks, task, order):
    X, z = _table()
    if task == "regression":
        est, y = GBFSRegressor, z
    else:
        est = GBFSClassifier
        y = (z > 0).astype(int) if task == "binary" else np.digitize(z, [-0.7, 0.0, 0.7])
    X32 = _ordered(X, order)
    X64 = X32.astype(np.float64)
    kw = dict(n_estimators=6, max_depth=3, mu=0.02, device="cpu", random_state=0)
    a = est(**kw).fit(X32, y)
    b = est(**kw).fit(X64, y)
    _assert_same_fit(a, b)
    assert a.selected_features_.size >= 2
    Xt32, _ = _table(n=257, seed=1)
    Xt64 = Xt32.astype(np.float64)
    np.testing.assert_array_equal(a.predict(Xt32), b.predict(Xt64))
    if task != "regression":
        np.testing.assert_array_equal(a.predict_proba(Xt32), b.predict_proba(Xt64))
        np.testing.assert_array_equal(a.decision_function(Xt32), b.decision_function(Xt64))
    assert a.score(Xt32, a.predict(Xt64)) == 1.0
    np.testing.assert_array_equal(a.transform(Xt32), Xt32[:, np.sort(a.selected_features_)])


def test_float32_group_testing_and_validation_as_the_float64_copy(small_chunks):
    """GT-GBM's standardized columns and a validation split read float32 rows too."""
    X, z = _table(d=24)
    kw = dict(
        n_estimators=5,
        max_depth=2,
        mu=0.02,
        split_search="group_testing",
        gt_s=3,
        validation_fraction=0.25,
        device="cpu",
        random_state=0,
    )
    a = GBFSRegressor(**kw).fit(X, z)
    b = GBFSRegressor(**kw).fit(X.astype(np.float64), z)
    _assert_same_fit(a, b)
    for ca, cb in zip(a.group_test_candidates_, b.group_test_candidates_):
        np.testing.assert_array_equal(ca, cb)
    assert a.selection_record_["val_loss"] == b.selection_record_["val_loss"]


def test_float32_multitask_and_eval_set_as_the_float64_copy(small_chunks):
    X, z = _table()
    task = np.arange(X.shape[0]) % 2
    kw = dict(n_estimators=4, max_depth=2, device="cpu", random_state=0)
    a = MultiTaskGBFSRegressor(**kw).fit(X, z, task=task)
    b = MultiTaskGBFSRegressor(**kw).fit(X.astype(np.float64), z, task=task)
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    np.testing.assert_array_equal(
        a.predict(X, task=task), b.predict(X.astype(np.float64), task=task)
    )
    kw = dict(n_estimators=6, max_depth=2, n_iter_no_change=2, device="cpu", random_state=0)
    a = GBFSRegressor(**kw).fit(X[:400], z[:400], eval_set=(X[400:], z[400:]))
    Xd = X.astype(np.float64)
    b = GBFSRegressor(**kw).fit(Xd[:400], z[:400], eval_set=(Xd[400:], z[400:]))
    _assert_same_fit(a, b)
    assert a.selection_record_["val_loss"] == b.selection_record_["val_loss"]


def test_float32_frames_with_categories_as_the_float64_copy(small_chunks):
    X, z = _table()
    rng = np.random.default_rng(3)
    cats = pd.Categorical(rng.choice(["a", "b", "c", None], size=X.shape[0]))
    f32 = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])]).assign(k=cats)
    f64 = f32.astype({c: np.float64 for c in f32.columns[:-1]})
    y = z + (f32["k"] == "b").to_numpy()
    kw = dict(n_estimators=5, max_depth=3, mu=0.0, device="cpu", random_state=0)
    a = GBFSRegressor(categorical_features="from_dtype", **kw).fit(f32, y)
    b = GBFSRegressor(categorical_features="from_dtype", **kw).fit(f64, y)
    _assert_same_fit(a, b)
    np.testing.assert_array_equal(a.predict(f32), b.predict(f64))
    np.testing.assert_array_equal(a.predict(f32), b.predict(f32))
    # the door's table is float32: the codes are exact in it
    checked = check_X(a, f32, reset=False)
    assert checked.dtype == np.float32
    np.testing.assert_array_equal(checked, check_X(b, f64, reset=False))


def test_the_door_keeps_float32_for_the_boosted_families_only():
    X, z = _table(n=50, nan=False)
    for est in (GBFSRegressor(), GBFSClassifier(), MultiTaskGBFSRegressor()):
        for order in ("C", "F"):
            X32 = _ordered(X, order)
            got = check_X(est, X32, reset=True)
            assert got.dtype == np.float32 and np.shares_memory(got, X32)  # no copy at all
        ints = np.clip(np.round(X), -100, 100).astype(np.int32)  # column 4 is beyond int32
        assert check_X(est, ints, reset=True).dtype == np.float64
        assert check_X(est, pd.DataFrame(X), reset=True).dtype == np.float32
    # families whose code computes in X's dtype get float64, as before
    for est in (ControlBurnRegressor(), StagewiseRegressor()):
        assert check_X(est, X, reset=True).dtype == np.float64
        # a check that only validates keeps float32 for any estimator
        assert check_X(est, X, reset=True, dtype="floating").dtype == np.float32


@pytest.mark.parametrize("order", ["C", "F"])
def test_float64_rows_cover_x_in_float64(order):
    X, _ = _table(n=101, d=7)
    X = _ordered(X, order)
    got = list(cpu_binning.float64_rows(X, chunk_elements=30))
    assert len(got) == 26  # 4 rows of 7 columns per chunk
    for rows, chunk in got:
        assert chunk.dtype == np.float64 and chunk.flags.c_contiguous
        assert not chunk.flags.writeable
        np.testing.assert_array_equal(chunk, X[rows].astype(np.float64))
    assert np.concatenate([c for _, c in got]).shape == X.shape
    X64 = np.ascontiguousarray(X, dtype=np.float64)
    ((rows, chunk),) = cpu_binning.float64_rows(X64)  # already float64 C: itself, no copy
    assert rows == slice(0, 101) and np.shares_memory(chunk, X64)


def _traced_peak(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_float32_fit_makes_no_float64_copy_of_x(order):
    """tracemalloc sees numpy's allocations: the peak of a fit on a 100,000 x 200 float32
    table (160 MB as float64) stays far under a float64 copy of it, and so do the peaks of
    its predictions and of its transform (the whole input was copied to float64 before)."""
    n, d = 100_000, 200
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d), dtype=np.float32)
    if order == "F":
        X = np.asfortranarray(X)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int32)
    copy_bytes = n * d * 8
    est = GBFSClassifier(n_estimators=2, max_depth=2, device="cpu", random_state=0)
    # compiled before the trace (on a cold cache a fit of 2,000 rows left a kernel of the
    # whole table's fit uncompiled, and its compile's allocations counted in the peak)
    est.fit(X, y)
    for call in (est.predict, est.predict_proba, est.transform):
        call(X[:2000])
    fit_peak, _ = _traced_peak(lambda: est.fit(X, y))
    # the fit's own arrays: the binned matrix and its column-major copy (n x d bytes each,
    # 1/4 of the copy together) and the cut points' sorted float64 sample of 16 columns at
    # a time (about 3 x 16 x 8 bytes a row): under half the copy
    assert fit_peak < 0.5 * copy_bytes, (fit_peak, copy_bytes)
    for call in (est.predict, est.predict_proba, est.transform):
        peak, _ = _traced_peak(lambda call=call: call(X))
        assert peak < 0.15 * copy_bytes, (call.__name__, peak, copy_bytes)


def test_cpu_backend_bins_float32_as_its_float64_copy(small_chunks):
    X, _ = _table(n=300, d=5)
    from gpufs.engine.binning import BinMapper

    m = BinMapper(16).fit(X.astype(np.float64))
    backend = CPUBackend()
    want = m.transform(X.astype(np.float64), backend)
    for order in ("C", "F", "strided"):
        np.testing.assert_array_equal(m.transform(_ordered(X, order), backend), want)
