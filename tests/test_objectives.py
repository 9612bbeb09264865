"""Objectives: gradients and hessians against finite differences of the loss, initial scores,
numerical stability, and the array-namespace functions (the softmax layout of the boosting
loop is in test_boosting.py)."""

import numpy as np
import pytest

from gpufs.engine.objectives import Logistic, Softmax, SquaredError, make_objective


def _finite_difference(loss, raw, y, w, eps=1e-6):
    """d loss / d raw[i, k] by central differences."""
    d1 = np.zeros_like(raw)
    for i in range(raw.shape[0]):
        for k in range(raw.shape[1]):
            up, down = raw.copy(), raw.copy()
            up[i, k] += eps
            down[i, k] -= eps
            d1[i, k] = (loss(up, y, w) - loss(down, y, w)) / (2 * eps)
    return d1


def _gradient_derivative(obj, raw, y, k, eps=1e-6):
    """d g_k / d raw[:, k] by central differences (row-wise: g_i depends on raw_i only)."""
    up, down = raw.copy(), raw.copy()
    up[:, k] += eps
    down[:, k] -= eps
    return (obj.grad_hess(up, y, k)[0] - obj.grad_hess(down, y, k)[0]) / (2 * eps)


def _case(kind, rng, n=12):
    if kind == "squared_error":
        return SquaredError(), rng.normal(size=(n, 1)) * 2, rng.normal(size=n)
    if kind == "logistic":
        return Logistic(), rng.normal(size=(n, 1)) * 2, rng.integers(0, 2, n).astype(float)
    return Softmax(4), rng.normal(size=(n, 4)) * 2, rng.integers(0, 4, n).astype(np.int32)


@pytest.mark.parametrize("kind", ["squared_error", "logistic", "softmax"])
@pytest.mark.parametrize("weighted", [False, True])
def test_gradients_match_finite_differences(kind, weighted):
    rng = np.random.default_rng(0)
    obj, raw, y = _case(kind, rng)
    n = raw.shape[0]
    w = rng.uniform(0.2, 3.0, n) if weighted else None
    d1 = _finite_difference(obj.loss, raw, y, w)
    # the loss is a (weighted) mean of per-row losses: d loss / d raw_i = w_i * l'_i / sum(w).
    # SquaredError reports the mean of (raw - y)^2 while its gradient is that of
    # 0.5 * (raw - y)^2: a factor 2.
    c = 2.0 if kind == "squared_error" else 1.0
    wn = (np.ones(n) if w is None else w) / (n if w is None else w.sum())
    for k in range(raw.shape[1]):
        g, h = obj.grad_hess(raw, y, k)
        assert g.shape == (n,) and h.shape == (n,)
        np.testing.assert_allclose(c * wn * g, d1[:, k], rtol=1e-6, atol=1e-9)
        # h is the second derivative: the derivative of g along raw[:, k]
        np.testing.assert_allclose(h, _gradient_derivative(obj, raw, y, k), rtol=1e-5, atol=1e-8)
        assert np.all(h > 0)


def test_init_scores():
    rng = np.random.default_rng(1)
    y = rng.normal(size=50)
    w = rng.uniform(0.5, 2, 50)
    assert SquaredError().init_score(y, None)[0] == pytest.approx(y.mean(), rel=1e-14)
    assert SquaredError().init_score(y, w)[0] == pytest.approx(np.average(y, weights=w), rel=1e-14)
    yb = (rng.random(50) < 0.3).astype(float)
    p = np.average(yb, weights=w)
    assert Logistic().init_score(yb, w)[0] == pytest.approx(np.log(p / (1 - p)), rel=1e-13)
    yc = rng.integers(0, 3, 50).astype(np.int32)
    sm = Softmax(3)
    base = sm.init_score(yc, None)
    np.testing.assert_allclose(sm.proba(base[None, :])[0], np.bincount(yc) / 50, rtol=1e-13)
    assert abs(base.sum()) < 1e-12
    # a class absent from y gets a tiny, finite probability
    base = Softmax(4).init_score(yc, None)
    assert np.all(np.isfinite(base))


def test_init_score_is_exact_and_order_free():
    """The base score is the correctly rounded mean, whatever the row order."""
    import math

    rng = np.random.default_rng(2)
    y = rng.normal(size=1001) * 1e3
    y[0] = 1e17  # a sum where float summation order matters
    y[1] = -1e17
    perm = rng.permutation(y.shape[0])
    a = SquaredError().init_score(y, None)[0]
    b = SquaredError().init_score(y[perm], None)[0]
    assert a == b == math.fsum(y) / y.shape[0]


def test_extreme_raw_scores_are_stable():
    raw = np.array([[-800.0], [-30.0], [0.0], [30.0], [800.0]])
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    lo = Logistic()
    p = lo.proba(raw)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=1), 1)
    g, h = lo.grad_hess(raw, y, 0)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(h))
    np.testing.assert_allclose(g[[0, 4]], [-1.0, 1.0])
    loss = lo.loss(raw, y, None)
    assert np.isfinite(loss) and loss == pytest.approx(
        (800 + 0 + np.log(2) + 0 + 800) / 5, rel=1e-6
    )
    sm = Softmax(3)
    raw3 = np.array([[1000.0, -1000.0, 0.0], [0.0, 0.0, 0.0]])
    p = sm.proba(raw3)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=1), 1)
    assert np.isfinite(sm.loss(raw3, np.array([1, 0], np.int32), None))


def test_make_objective():
    assert make_objective("regression").name == "squared_error"
    assert make_objective("classification", 2).name == "logistic"
    sm = make_objective("classification", 5)
    assert sm.name == "softmax" and sm.n_outputs(5) == 5


# --- the array-namespace functions and the multi-output squared error -------------------------


def test_sigmoid_softplus_log_odds_softmax():
    from gpufs.engine.objectives import PROB_CLIP, log_odds, sigmoid, softmax, softplus

    z = np.array([-800.0, -30.0, -1.0, 0.0, 1.0, 30.0, 800.0])
    p = sigmoid(z)
    assert np.all(np.isfinite(p)) and p[3] == 0.5 and p[0] == 0.0 and p[-1] == 1.0
    np.testing.assert_allclose(p[1:-1], 1 / (1 + np.exp(-z[1:-1])), rtol=1e-15)
    np.testing.assert_allclose(p + sigmoid(-z), 1.0, rtol=1e-15)
    sp = softplus(z)
    np.testing.assert_allclose(sp, np.logaddexp(0.0, z), rtol=1e-15)
    t = z.copy()
    assert softplus(t, out=t) is t and np.array_equal(t, sp)  # in place
    assert log_odds(0.5) == 0.0 and log_odds(0.25) == pytest.approx(np.log(1 / 3), rel=1e-15)
    # the one clipping rule: a frequency of 0 or 1 gives a large, finite log-odds
    assert log_odds(0.0) == pytest.approx(np.log(PROB_CLIP / (1 - PROB_CLIP)), rel=1e-12)
    assert log_odds(1.0) == pytest.approx(-log_odds(0.0), rel=1e-5)  # 1 - 1e-12 is inexact
    np.testing.assert_allclose(
        log_odds(np.array([0.0, 0.5, 1.0])), [log_odds(0.0), 0.0, log_odds(1.0)]
    )
    s = softmax(np.array([[1000.0, -1000.0, 0.0], [0.0, 0.0, np.log(2.0)]]))
    np.testing.assert_allclose(s, [[1.0, 0.0, 0.0], [0.25, 0.25, 0.5]], atol=1e-15)


def test_logistic_loss_terms():
    from gpufs.engine.objectives import logistic_loss_terms

    z = np.array([0.0, 2.0, -3.0, 800.0, -800.0])
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    got = logistic_loss_terms(z, y)
    # log(1 + e^z) - y z, computed where it does not overflow: -log(p) for y = 1, -log(1 - p)
    want = np.where(y == 1, np.logaddexp(0.0, -z), np.logaddexp(0.0, z))
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-300)
    assert got[0] == np.log(2.0) and np.isfinite(got).all() and got[3] == 800.0


def test_squared_error_of_several_targets_is_the_sum_of_single_targets():
    rng = np.random.default_rng(5)
    raw = rng.normal(size=(30, 3))
    Y = rng.normal(size=(30, 3))
    w = rng.uniform(0.5, 2.0, 30)
    multi = SquaredError(3)
    assert multi.n_outputs(0) == 3
    single = SquaredError()
    total = sum(single.loss(np.ascontiguousarray(raw[:, k : k + 1]), Y[:, k], w) for k in range(3))
    assert multi.loss(raw, Y, w) == pytest.approx(total, rel=1e-14)
    np.testing.assert_array_equal(
        multi.init_score(Y, w), [single.init_score(Y[:, k], w)[0] for k in range(3)]
    )
    g, h = multi.gradients(raw, Y)
    np.testing.assert_array_equal(g, (raw - Y).T)
    np.testing.assert_array_equal(h, np.ones((3, 30)))
    np.testing.assert_array_equal(multi.negative_gradient(raw, Y), -(raw - Y))


@pytest.mark.parametrize("kind", ["squared_error", "logistic", "softmax"])
def test_negative_gradient_is_minus_the_gradient(kind):
    obj, raw, y = _case(kind, np.random.default_rng(6))
    g, _ = obj.gradients(raw, y)
    np.testing.assert_array_equal(obj.negative_gradient(raw, y), -g.T)


@pytest.mark.parametrize("weighted", [False, True])
def test_init_score_means_are_math_fsums(weighted):
    """The initial score's means come from ``quantize.correctly_rounded_sum`` (array
    operations, so on the rows' device): the bits of ``math.fsum`` over the host's rows."""
    import math

    from gpufs.engine.objectives import _exact_weighted_mean

    rng = np.random.default_rng(3)
    y = rng.normal(size=2001) * 2.0 ** rng.integers(-40, 40, 2001)
    if weighted:
        w = rng.uniform(0.1, 3.0, 2001)
        assert _exact_weighted_mean(y, w) == math.fsum(y * w) / math.fsum(w)
    else:
        assert _exact_weighted_mean(y, None) == math.fsum(y) / 2001
