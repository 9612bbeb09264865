"""Linear algebra and sketching of the tree-weight lasso (``gpufs.lasso._linalg``): the
chunked Gram matrix, the top eigenvalue, and the three row sketches."""

import numpy as np
import pytest

from gpufs.lasso import _linalg


def _data(m=300, n=6, seed=0):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(m, n)) * rng.uniform(0.5, 3.0, n) + rng.uniform(-2, 2, n)
    v = rng.normal(size=m)
    r = rng.uniform(0.1, 2.0, m)
    return B, v, r


@pytest.mark.parametrize("chunk", [1 << 23, 64])
def test_gram_matches_the_explicit_products(monkeypatch, chunk):
    monkeypatch.setattr(_linalg, "_CHUNK_ELEMS", chunk)  # 64 elements: many row chunks
    B, v, r = _data()
    abar = (r @ B) / r.sum()
    K, c, yy = _linalg._gram(np, B, v, r, abar)
    Bc = B - abar
    np.testing.assert_allclose(K, Bc.T @ (Bc * r[:, None]), rtol=1e-12)
    np.testing.assert_allclose(c, (Bc * r[:, None]).T @ v, rtol=1e-12)
    assert yy == pytest.approx(float((v * r) @ v), rel=1e-12)
    assert np.array_equal(K, K.T)
    K0, c0, yy0 = _linalg._gram(np, B, None, None, None)
    np.testing.assert_allclose(K0, B.T @ B, rtol=1e-12)
    assert c0 is None and yy0 == 0.0


def test_top_eigenvalue_exact_and_by_power_iteration():
    B, _, _ = _data(n=12)
    K = B.T @ B
    top = np.linalg.eigvalsh(K)[-1]
    assert _linalg._top_eig_sym(np, K) == pytest.approx(top, rel=1e-12)
    est = _linalg._power_top_eig(np, lambda x: K @ x, K.shape[0])
    # an upper estimate (a step 1/L that is too long would make FISTA diverge), and a close one
    assert top <= est <= 1.05 * top
    assert _linalg._top_eig_sym(np, np.zeros((0, 0))) == 0.0


def test_count_and_row_sketches_of_full_size_keep_the_problem():
    """With s = m, CountSketch puts one row in each bucket (a signed permutation) and row
    sampling takes every row: B'B and B'v equal the unsketched centered, weighted products."""
    B, v, r = _data(m=200)
    abar = (r @ B) / r.sum()
    vc = v - (r @ v) / r.sum()
    K, c, _ = _linalg._gram(np, B, vc, r, abar)
    for kind in ("count", "rows"):
        Bs, vs = _linalg._sketch_square(np, B, vc, r, abar, kind, 200, np.random.default_rng(0))
        assert Bs.shape == (200, B.shape[1]) and vs.shape == (200,)
        np.testing.assert_allclose(Bs.T @ Bs, K, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(Bs.T @ vs, c, rtol=1e-10, atol=1e-10)


def test_gaussian_sketch_is_unbiased_and_seeded():
    B, v, r = _data(m=400, n=4)
    abar = (r @ B) / r.sum()
    K, _, _ = _linalg._gram(np, B, v, r, abar)
    Bs, _ = _linalg._sketch_square(np, B, v, r, abar, "gaussian", 4000, np.random.default_rng(1))
    # E[S'S] = I: B'B of a large sketch is close to the unsketched Gram matrix
    assert np.linalg.norm(Bs.T @ Bs - K) <= 0.1 * np.linalg.norm(K)
    again, _ = _linalg._sketch_square(np, B, v, r, abar, "gaussian", 4000, np.random.default_rng(1))
    assert np.array_equal(again, Bs)


def test_check_sketch():
    assert _linalg._check_sketch(None, None, "squared", 50, 3) == (None, None)
    assert _linalg._check_sketch("count", None, "squared", 50, 3) == ("count", 50)
    assert _linalg._check_sketch("rows", None, "logistic", 5000, 3) == ("rows", 1000)
    with pytest.raises(ValueError, match="sketch must be None or one of"):
        _linalg._check_sketch_kind("srht", "squared")
    with pytest.raises(ValueError, match="only defined for the squared loss"):
        _linalg._check_sketch_kind("count", "logistic")
    with pytest.raises(ValueError, match=r"sketch_size must be an integer in \[1, 50\]"):
        _linalg._check_sketch("count", 0, "squared", 50, 3)
