"""gpufs.rules._exactmath: accuracy against 50-digit ``decimal`` references and numpy, special
values, and exact reproducibility (the numba CPU build = plain Python, bit for bit).

The GPU build of the same source is checked bit for bit against the CPU under the CUDA
simulator (tests/_cudasim_kernels.py::test_objective) and for its instructions in PTX
(tests/test_cuda_kernels_sim.py::test_kernels_compile_to_ptx).
"""

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

from gpufs.backends.cpu import CPUBackend
from gpufs.backends.cpu.objective import _em as NJ
from gpufs.rules._exactmath import python_exact_math

PY = python_exact_math()
CPU = CPUBackend()


def _ln1p(u):
    """ln(1 + u) for a Decimal u, exact to ~45 digits even for tiny u."""
    if abs(u) < Decimal("1e-12"):
        return u - u * u / 2 + u * u * u / 3 - u**4 / 4
    return (1 + u).ln()


def _ulps(got, exact):
    """|got - exact| in ulps of the double nearest to ``exact`` (a Decimal)."""
    return float(abs(Decimal(float(got)) - exact) / Decimal(math.ulp(float(exact))))


REFERENCES = {
    "exp": lambda x: x.exp(),
    "softplus": lambda x: x + _ln1p((-x).exp()) if x > 0 else _ln1p(x.exp()),
    "sigmoid": lambda x: 1 / (1 + (-x).exp()),
    "q": lambda x: 1 / (1 + x.exp()),  # the second output of sigmoid_pq: 1 - p
    "log": lambda u: u.ln(),
    "log1p": _ln1p,
}
MAX_ULPS = {"exp": 1.5, "softplus": 1.5, "sigmoid": 2.5, "q": 2.5, "log": 1.0, "log1p": 1.0}


def _points(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    if name in ("log", "log1p"):
        pts = [
            np.geomspace(1e-307, 1e307, 400),
            rng.uniform(0.5, 2.0, 300),
            rng.uniform(0.0, 10.0, 200),
            np.geomspace(1e-300, 1e-8, 100),
        ]
        if name == "log1p":
            pts.append(-rng.uniform(0.0, 0.999, 200))
        return np.concatenate(pts)
    return np.concatenate(
        [
            rng.uniform(-745.0, 709.7, 600),
            rng.normal(size=400) * 3.0,
            rng.uniform(-1e-3, 1e-3, 100),
            np.geomspace(1e-300, 1.0, 60),
            -np.geomspace(1e-300, 1.0, 60),
            [0.0, -0.0, 0.5, -0.5, 1.0, 700.0, -700.0, 709.78, -744.0, -708.5, 36.0, -36.0],
        ]
    )


def _fn(ns, name):
    if name == "q":
        return lambda x: ns.sigmoid_pq(x)[1]
    return getattr(ns, name)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_accuracy_against_decimal(name):
    ref = REFERENCES[name]
    f = _fn(NJ, name)
    worst = 0.0
    with localcontext() as ctx:
        ctx.prec = 50
        for x in _points(name):
            exact = ref(Decimal(float(x)))
            got = f(float(x))
            if float(exact) == 0.0:  # the true value underflows: so must ours
                assert got == 0.0, (name, x, got)
                continue
            err = _ulps(got, exact)
            worst = max(worst, err)
            assert err <= MAX_ULPS[name], (name, float(x), got, float(exact), err)
            rel = float(abs(Decimal(float(got)) - exact) / abs(exact))
            # a few ulps relative, except where the result is subnormal
            assert rel < 1e-14 or abs(float(exact)) < 1e-300, (name, x, rel)
    assert worst > 0.0  # the test compares something


def _expit(v):
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@pytest.mark.parametrize("name", ["exp", "softplus", "sigmoid", "log", "log1p"])
def test_close_to_numpy(name):
    x = _points(name)
    ref = {
        "exp": np.exp,
        "softplus": lambda v: np.logaddexp(0.0, v),
        "sigmoid": _expit,
        "log": np.log,
        "log1p": np.log1p,
    }[name](x)
    got = np.array([getattr(NJ, name)(float(v)) for v in x])
    ok = np.abs(ref) > 1e-290
    np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", ["exp", "log", "log1p", "softplus", "sigmoid"])
def test_numba_equals_plain_python_bit_for_bit(name):
    """The numba CPU build and the plain-Python evaluation of the one source agree exactly
    (no fused multiply-adds, no reassociation), and repeated calls give the same bits."""
    x = _points(name)
    a = np.array([getattr(NJ, name)(float(v)) for v in x])
    b = np.array([getattr(PY, name)(float(v)) for v in x])
    c = np.array([getattr(NJ, name)(float(v)) for v in x])
    assert a.tobytes() == b.tobytes() == c.tobytes()


def test_special_values():
    inf, nan = math.inf, math.nan
    for ns in (NJ, PY):
        assert ns.exp(0.0) == 1.0 and ns.exp(-0.0) == 1.0
        assert ns.exp(1000.0) == inf and ns.exp(inf) == inf
        assert ns.exp(-1000.0) == 0.0 and ns.exp(-inf) == 0.0
        assert math.isnan(ns.exp(nan))
        assert 0.0 < ns.exp(-740.0) < 1e-320  # subnormal result, rounded once
        assert ns.exp(-740.0) == math.exp(-740.0)
        assert ns.log(1.0) == 0.0 and ns.log(0.0) == -inf and ns.log(inf) == inf
        assert math.isnan(ns.log(-1.0)) and math.isnan(ns.log(nan))
        assert ns.log(5e-324) == math.log(5e-324)
        assert ns.log1p(0.0) == 0.0 and ns.log1p(-1.0) == -inf and ns.log1p(inf) == inf
        assert math.isnan(ns.log1p(-2.0))
        assert ns.log1p(1e-300) == 1e-300
        assert ns.softplus(1000.0) == 1000.0 and ns.softplus(-1000.0) == 0.0
        assert ns.softplus(0.0) == math.log(2.0)
        assert ns.sigmoid_pq(0.0) == (0.5, 0.5)
        assert ns.sigmoid_pq(800.0) == (1.0, 0.0) and ns.sigmoid_pq(-800.0) == (0.0, 1.0)
        for j in (-1022, -1, 0, 1, 1023):
            assert ns.pow2(j) == 2.0**j


def test_logistic_formulas():
    z = np.concatenate([np.linspace(-40, 40, 161), [-800.0, 800.0]])
    for y in (0.0, 1.0, 0.25):
        for v in z:
            g, h = NJ.logistic_grad_hess(v, y)
            p, q = NJ.sigmoid_pq(v)
            if y == 0.0:
                assert g == p  # exact: no rounding of p - 0
            elif y == 1.0:
                assert g == -q  # exact, even where p rounds to 1
            else:
                assert g == pytest.approx(p - y, rel=1e-15, abs=1e-16)
            assert h == p * q
            loss = NJ.logistic_loss(v, y)
            with localcontext() as ctx:
                ctx.prec = 50
                V = Decimal(float(v))
                want = float(REFERENCES["softplus"](V) - Decimal(y) * V)
            assert loss == pytest.approx(want, rel=1e-14, abs=1e-300)
            assert loss >= 0.0


def test_backend_kernels_match_the_scalar_functions():
    """The CPU backend's row kernels apply the same functions, row by row."""
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(40, 3)) * 10
    y = rng.integers(0, 3, 40).astype(np.int32)
    g, h = CPU.gradients("softmax", raw, y)
    gp = np.empty_like(g)
    hp = np.empty_like(h)
    for i in range(40):
        PY.softmax_grad_hess_row(raw, i, int(y[i]), gp, hp)
    assert g.tobytes() == gp.tobytes() and h.tobytes() == hp.tobytes()
    losses = CPU.loss_terms("softmax", raw, y)
    want = np.array([PY.softmax_loss_row(raw, i, int(y[i])) for i in range(40)])
    assert losses.tobytes() == want.tobytes()
    m = raw.max(axis=1, keepdims=True)
    ref = np.log(np.exp(raw - m).sum(axis=1)) - (raw[np.arange(40), y] - m[:, 0])
    np.testing.assert_allclose(losses, ref, rtol=1e-14)
    p = np.exp(raw - m) / np.exp(raw - m).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(g.T, p - (y[:, None] == np.arange(3)), rtol=1e-13, atol=1e-16)
    yb = (y == 1).astype(np.int32)
    g1, h1 = CPU.gradients("logistic", raw[:, :1], yb)
    want = [PY.logistic_grad_hess(float(raw[i, 0]), float(yb[i])) for i in range(40)]
    assert g1[0].tolist() == [w[0] for w in want] and h1[0].tolist() == [w[1] for w in want]
    with pytest.raises(ValueError, match="no kernel"):
        CPU.gradients("squared_error", raw[:, :1], y)


def _bits(a):
    return np.asarray(a, dtype=np.float64).view(np.int64)


def test_branch_free_forms_equal_the_general_functions_bit_for_bit():
    """``exp_nonpositive`` is ``exp`` on a <= 0 and ``log1p_unit`` is ``log1p`` on [0, 1],
    exactly, in the numba build and in plain Python (the objectives call the branch-free
    forms; accuracy is the general functions')."""
    rng = np.random.default_rng(11)
    a = np.concatenate(
        [
            -rng.uniform(0, 800, 3000),
            -np.abs(rng.normal(size=3000)) * 3,
            -np.geomspace(1e-320, 1e3, 400),
            [0.0, -0.0, -745.13, -745.14, -744.4, -708.4, -709.0, -np.inf],
        ]
    )
    u = np.concatenate(
        [
            rng.uniform(0, 1, 3000),
            np.geomspace(1e-320, 1.0, 400),
            [0.0, 1.0, 2.0**-54, 2.0**-53, 0.4142135623730951, 0.41421356237309515],
        ]
    )
    for ns in (NJ, PY):
        got = [ns.exp_nonpositive(float(x)) for x in a]
        want = [ns.exp(float(x)) for x in a]
        assert _bits(got).tolist() == _bits(want).tolist()
        got = [ns.log1p_unit(float(x)) for x in u]
        want = [ns.log1p(float(x)) for x in u]
        assert _bits(got).tolist() == _bits(want).tolist()
    assert math.isnan(NJ.exp_nonpositive(math.nan)) and math.isnan(NJ.log1p_unit(math.nan))
    assert math.isnan(PY.exp_nonpositive(math.nan)) and math.isnan(PY.log1p_unit(math.nan))


def test_pow2_and_normalize_from_bits():
    for ns in (NJ, PY):
        for j in range(-1022, 1024):
            assert ns.pow2(j) == 2.0**j
        for x in [
            5e-324,
            1e-310,
            2.0**-1022,
            0.7,
            1.0,
            1.4142135623730951,
            1.5,
            3.0,
            1e300,
            1.7976931348623157e308,
        ]:
            m, k = ns.normalize(x)
            assert math.sqrt(0.5) <= m < math.sqrt(2.0) and math.ldexp(m, k) == x


@pytest.mark.parametrize("n_threads", [1, 2])
def test_vectorized_logistic_round_equals_the_row_function(n_threads):
    """The CPU's vectorized logistic round gives each row exactly the scalar function's
    (plain Python) gradient, hessian and loss, soft labels and extreme logits included."""
    from gpufs._threading import thread_limit

    rng = np.random.default_rng(5)
    n = 70_000  # above the size where rows run in parallel
    raw = np.concatenate(
        [
            rng.normal(size=n - 12) * 4,
            [0.0, -0.0, 36.0, -36.0, 700.0, -700.0, 750.0, -750.0, 1e300, -1e300, 1e-310, -1e-310],
        ]
    )[:, None]
    y = (rng.random(n) < 0.5).astype(np.float64)
    y[:50] = rng.uniform(0, 1, 50)  # soft labels take the mixed formula
    with thread_limit(n_threads):
        g, h, loss = CPU.round_gradients("logistic", raw, y)
    idx = np.concatenate([np.arange(200), rng.choice(n, 2000, replace=False), np.arange(n - 12, n)])
    want = np.array([PY.logistic_grad_hess_loss(float(raw[i, 0]), float(y[i])) for i in idx])
    assert _bits(g[0, idx]).tolist() == _bits(want[:, 0]).tolist()
    assert _bits(h[0, idx]).tolist() == _bits(want[:, 1]).tolist()
    assert _bits(loss[idx]).tolist() == _bits(want[:, 2]).tolist()
    # the loss pass alone (any task's one loss kernel) gives the round's losses
    with thread_limit(n_threads):
        assert _bits(CPU.loss_terms("logistic", raw, y)).tolist() == _bits(loss).tolist()
    # and the separate gradient / loss functions agree with the fused one
    for i in idx[:300]:
        gi, hi = PY.logistic_grad_hess(float(raw[i, 0]), float(y[i]))
        assert (gi, hi) == (g[0, i], h[0, i])
        assert PY.logistic_loss(float(raw[i, 0]), float(y[i])) == loss[i]
