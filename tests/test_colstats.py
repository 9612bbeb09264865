"""Weighted column statistics (``gpufs.data._colstats``): mean and variance against numpy, chunking,
float32 input, and the cancellation that ``E[x^2] - mean^2`` suffers."""

import numpy as np
import pytest

from gpufs.data._colstats import column_mean_var, matvec_T, row_slices


def test_row_slices_cover_every_row_once():
    sl = row_slices(10, 3, 7)  # 2 rows per chunk
    assert [(s.start, s.stop) for s in sl] == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert row_slices(5, 100, 10) == [slice(i, i + 1) for i in range(5)]  # at least one row
    assert row_slices(0, 3, 10) == []


@pytest.mark.parametrize("chunk", [10, 1 << 20])
def test_weighted_mean_and_variance_match_numpy(chunk):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(101, 4)) * [1.0, 10.0, 0.1, 3.0] + [0.0, 5.0, -2.0, 1e3]
    w = rng.uniform(0.0, 2.0, 101)
    mean, var = column_mean_var(X, w, w.sum(), np, row_slices(101, 4, chunk))
    np.testing.assert_allclose(mean, np.average(X, axis=0, weights=w), rtol=1e-13)
    ref = np.average((X - np.average(X, axis=0, weights=w)) ** 2, axis=0, weights=w)
    np.testing.assert_allclose(var, ref, rtol=1e-12)


def test_two_passes_keep_the_variance_of_a_large_offset():
    """A column of mean 1e8 and std 1: E[x^2] - mean^2 loses every digit, two passes do not."""
    rng = np.random.default_rng(1)
    x = 1e8 + rng.normal(size=1000)
    X = x[:, None]
    w = np.ones(1000)
    _, var = column_mean_var(X, w, 1000.0, np, row_slices(1000, 1, 64))
    assert var[0] == pytest.approx(np.var(x), rel=1e-9)
    naive = (x * x).mean() - x.mean() ** 2
    assert abs(naive - np.var(x)) > 1e-3 * np.var(x)  # what the one-pass formula gives


def test_float32_input_stays_float32_in_the_product():
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    v = np.array([1.0, 0.5, 0.0, 2.0])
    out = matvec_T(X, v, np)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, X.astype(np.float64).T @ v)
