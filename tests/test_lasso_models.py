"""The smooth part of the tree-weight lasso (``gpufs.lasso._models``): every model's gradient
and Hessian against finite differences of its value, restriction to a working set, and the
Lipschitz constant against the largest curvature."""

import numpy as np
import pytest

from gpufs.lasso import SmoothModel
from gpufs.lasso._linalg import _gram
from gpufs.lasso._models import _DirectLogistic, _DirectSquare, _GramSquare


def _models():
    rng = np.random.default_rng(0)
    m, n = 120, 5
    A = rng.normal(size=(m, n))
    r = rng.uniform(0.2, 2.0, m)
    W = float(r.sum())
    y = A @ rng.uniform(0, 1, n) + 0.3 * rng.normal(size=m)
    yb = (y > np.median(y)).astype(float)
    abar = (r @ A) / W
    yc = y - (r @ y) / W
    K, c, yy = _gram(np, A, yc, r, abar)
    return {
        "gram": (_GramSquare(np, K, c, yy, W), A),
        "direct": (_DirectSquare(np, A, yc, r, abar, W), A),
        "logistic": (_DirectLogistic(np, A, yb, r, W, True), A),
        "logistic-no-b": (_DirectLogistic(np, A, yb, r, W, False), A),
    }


MODELS = _models()


def _f(model, w, b):
    return model.value(w, model.image(w, np.asarray(b)))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradient_and_hessian_match_finite_differences(name):
    model, A = MODELS[name]
    assert isinstance(model, SmoothModel)
    rng = np.random.default_rng(1)
    w, b = rng.uniform(0, 1, model.n), 0.3
    gw, gb = model.grad(model.image(w, np.asarray(b)))
    eps = 1e-6
    for i in range(model.n):
        e = np.zeros(model.n)
        e[i] = eps
        fd = (_f(model, w + e, b) - _f(model, w - e, b)) / (2 * eps)
        assert gw[i] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    if model.has_b:
        fd = (_f(model, w, b + eps) - _f(model, w, b - eps)) / (2 * eps)
        assert float(gb) == pytest.approx(fd, rel=1e-6, abs=1e-9)
    else:
        assert gb is None
    S = np.array([0, 2, 3])
    H = model.hess_sub(S, model.image(w, np.asarray(b)))
    assert H.shape == (3 + model.has_b,) * 2
    for col, i in enumerate(S):
        e = np.zeros(model.n)
        e[i] = eps
        g_up = model.grad(model.image(w + e, np.asarray(b)))[0][S]
        g_dn = model.grad(model.image(w - e, np.asarray(b)))[0][S]
        np.testing.assert_allclose(H[:3, col], (g_up - g_dn) / (2 * eps), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_restrict_is_the_model_on_a_working_set(name):
    model, _ = MODELS[name]
    idx = np.array([1, 4])
    sub = model.restrict(idx)
    assert sub.n == 2
    w = np.zeros(model.n)
    w[idx] = [0.7, 0.2]
    b = np.asarray(0.1)
    assert sub.value(w[idx], sub.image(w[idx], b)) == pytest.approx(
        model.value(w, model.image(w, b)), rel=1e-12
    )
    np.testing.assert_allclose(
        sub.grad(sub.image(w[idx], b))[0], model.grad(model.image(w, b))[0][idx], rtol=1e-12
    )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_lipschitz_bounds_the_curvature(name):
    model, _ = MODELS[name]
    w = np.full(model.n, 0.2)
    S = np.arange(model.n)
    top = np.linalg.eigvalsh(model.hess_sub(S, model.image(w, np.asarray(0.0))))[-1]
    assert model.lipschitz() >= top * (1 - 1e-12)


def _logistic(seed=3, m=200, n=6, has_b=True):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n))
    r = rng.uniform(0.2, 2.0, m)
    y = (A @ rng.normal(size=n) + rng.normal(size=m) > 0).astype(float)
    return _DirectLogistic(np, A, y, r, float(r.sum()), has_b), A, y, r


@pytest.mark.parametrize("has_b", [True, False])
def test_logistic_working_sets_take_their_gram_block(has_b, monkeypatch):
    """A working set's Lipschitz constant comes from its block of the forest's Gram matrix
    (one pass over the rows for all working sets, not one per working set)."""
    from gpufs.lasso import _models

    model, A, y, r = _logistic(has_b=has_b)
    passes = []
    real = _models._gram_scaled
    monkeypatch.setattr(_models, "_gram_scaled", lambda *a, **k: passes.append(1) or real(*a, **k))
    subs = [model.restrict(np.array(idx)) for idx in ([0, 2, 5], [1, 2], [3])]
    lips = [sub.lipschitz() for sub in subs]
    assert len(passes) == 1
    monkeypatch.setattr(_models, "_gram_scaled", real)
    for idx, lip in zip(([0, 2, 5], [1, 2], [3]), lips):
        fresh = _DirectLogistic(np, np.ascontiguousarray(A[:, idx]), y, r, float(r.sum()), has_b)
        assert lip == pytest.approx(fresh.lipschitz(), rel=1e-12)


def test_logistic_hessian_of_every_tree_and_repeated_points():
    """``hess_sub(None)`` is the Hessian of every tree; a point asked again gives the same
    image and gradient without a new pass, and a caller's later write to its ``w`` does not
    reach the kept image."""
    model, A, y, r = _logistic()
    w, b = np.full(model.n, 0.1), np.asarray(0.2)
    z = model.image(w, b)
    np.testing.assert_allclose(
        model.hess_sub(None, z), model.hess_sub(np.arange(model.n), z), rtol=1e-13, atol=1e-15
    )
    assert model.image(w.copy(), b) is z
    assert model.grad(z) is model.grad(z)
    w[0] = 0.5
    z2 = model.image(w, b)
    np.testing.assert_allclose(z2, A @ w + 0.2, rtol=1e-14)
    p = 1.0 / (1.0 + np.exp(-z2))
    np.testing.assert_allclose(model.grad(z2)[0], A.T @ (r * (p - y)) / r.sum(), rtol=1e-12)
    assert model.image(w, np.asarray(0.3)) is not z2
