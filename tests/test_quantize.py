"""Fixed point (``gpufs.engine.quantize``): the power-of-two scales and their headroom, rounding,
the exact two-word sums, and the fused gradient preparation against the array-by-array route."""

import math

import numpy as np
import pytest

from gpufs.backends.cpu import CPUBackend
from gpufs.engine.penalties import PenaltyState
from gpufs.engine.quantize import (
    PACK_CHUNK_ROWS,
    QGRAD_BOUND,
    correctly_rounded_sum,
    exact_mean,
    exact_sum,
    exact_sum_words,
    fixed_point_scale,
    pack,
    prepare_gradients,
    quantize,
    scale_for,
    unpack,
)

CPU = CPUBackend()


# --- scales -------------------------------------------------------------------------------------


def test_scale_for_hand_computed():
    # 2**(min(15, 62 - row_bits) - exp_max), max_abs < 2**exp_max (frexp):
    # max_abs = 1 (< 2**1): 2**(15 - 1), whatever the (small) row count
    assert scale_for(1.0, 1) == scale_for(1.0, 10**9) == 2.0**14
    # max_abs = 0.75 (< 2**0): 2**15
    assert scale_for(0.75, 3) == 2.0**15
    # max_abs = 5 (< 2**3): 2**12
    assert scale_for(5.0, 1000) == 2.0**12
    # 2**51 - 1 rows (51 bits): the int64 headroom binds, 2**(62 - 51 - 1)
    assert scale_for(1.0, 2**51 - 1) == 2.0**10
    for bad in (0.0, math.inf, math.nan):
        assert scale_for(bad, 10) == 1.0


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 10**6, 2**47, 2**55])
@pytest.mark.parametrize("max_abs", [2.0**-500, 3e-7, 0.25, 1.0, 7.5, 1e12, 1e300])
def test_scale_bounds_every_row_and_is_the_largest_power_of_two(n, max_abs):
    # 2**-500: the smallest weighted gradient the estimators accept (``gpufs.data._scales``).
    s = scale_for(max_abs, n)
    assert math.frexp(s)[0] == 0.5  # a power of two
    # every row's value rounds to at most QGRAD_BOUND = 2**15 in magnitude...
    assert max_abs * s < 2.0**15
    assert abs(int(np.rint(max_abs * s))) <= QGRAD_BOUND == 2**15
    assert abs(int(quantize(np.array([-max_abs, max_abs]), s).max())) <= QGRAD_BOUND
    # ...n values of magnitude max_abs, scaled, stay below 2**62 (int64 sums cannot overflow)
    assert n * (max_abs * s) < 2.0**62
    # and twice the scale breaks one of the two bounds (the worst row count of n's bit width)
    rows_bound = 2 ** max(1, math.ceil(math.log2(n + 1)))
    assert max_abs * 2 * s >= 2.0**15 or rows_bound * (max_abs * 2 * s) >= 2.0**62


def test_the_largest_rounded_value_reaches_the_bound():
    # just below a power of two the scaled value is just below 2**15 and rounds up to it:
    # the bound is 2**15 inclusive, not 2**15 - 1, and the chunk size accounts for that
    m = 1.0 - 2.0**-20
    s = scale_for(m, 10)
    assert s == 2.0**15 and int(quantize(np.array([m, -m]), s)[0]) == 2**15


def test_chunk_of_bounded_rows_fits_32_signed_bits():
    assert PACK_CHUNK_ROWS == 2**16 - 1
    assert PACK_CHUNK_ROWS * QGRAD_BOUND <= 2**31 - 1  # int32 holds the worst chunk sum
    assert (PACK_CHUNK_ROWS + 1) * QGRAD_BOUND > 2**31 - 1  # and no longer chunk would


@pytest.mark.parametrize("sign", [1, -1])
def test_packed_sums_are_exact_at_the_worst_chunk(sign):
    """A chunk of PACK_CHUNK_ROWS rows, each at the bound (the worst case) or random, summed
    as packed int64 words gives (sum g, sum h) exactly, h of either sign."""
    n = PACK_CHUNK_ROWS
    for g, h in (
        (np.full(n, sign * QGRAD_BOUND), np.full(n, QGRAD_BOUND)),
        (np.full(n, sign * QGRAD_BOUND), np.full(n, -QGRAD_BOUND)),
        (np.full(n, -sign * QGRAD_BOUND), np.zeros(n, np.int64)),
    ):
        g, h = g.astype(np.int64), h.astype(np.int64)
        words = pack(g, h)
        assert unpack(int(words.sum())) == (int(g.sum()), int(h.sum()))
        assert abs(int(g.sum())) == n * QGRAD_BOUND or int(g.sum()) == 0
    rng = np.random.default_rng(11)
    for _ in range(20):
        g = rng.integers(-QGRAD_BOUND, QGRAD_BOUND + 1, n)
        h = rng.integers(0, QGRAD_BOUND + 1, n) * sign
        gs, hs = unpack(np.cumsum(pack(g, h)))  # every prefix of the chunk, vectorized
        np.testing.assert_array_equal(gs, np.cumsum(g))
        np.testing.assert_array_equal(hs, np.cumsum(h))


def test_quantized_gradients_pack_exactly_and_a_longer_chunk_can_overflow():
    """Gradients quantized by the rule: any chunk of PACK_CHUNK_ROWS rows packs exactly, while
    a chunk of 2**16 + 1 rows at the bound wraps (the bound is tight, not decorative)."""
    rng = np.random.default_rng(2)
    n = 3 * PACK_CHUNK_ROWS
    g = rng.normal(size=n) * 4.0
    h = rng.uniform(0.0, 0.25, size=n)
    gq, hq = quantize(g, fixed_point_scale(g, n)), quantize(h, fixed_point_scale(h, n))
    assert np.abs(gq).max() <= QGRAD_BOUND and hq.max() <= QGRAD_BOUND
    assert np.abs(gq).max() > QGRAD_BOUND // 2  # the scale is the largest: the top bit is used
    for lo in range(0, n, PACK_CHUNK_ROWS):
        c = slice(lo, lo + PACK_CHUNK_ROWS)
        assert unpack(int(pack(gq[c], hq[c]).sum())) == (int(gq[c].sum()), int(hq[c].sum()))
    over = np.full(2**16 + 1, QGRAD_BOUND, np.int64)
    assert unpack(int(pack(over, over).sum())) != (int(over.sum()), int(over.sum()))


def test_fixed_point_scale_of_an_array():
    a = np.array([0.5, -3.0, 2.0])
    assert fixed_point_scale(a, 3) == scale_for(3.0, 3)
    assert fixed_point_scale(np.zeros(0), 0) == 1.0


def test_quantize_rounds_half_to_even_into_int64():
    q = quantize(np.array([0.5, 1.5, -0.5, -2.5, 2.4, 2.6]), 1.0)
    assert q.dtype == np.int64 and q.tolist() == [0, 2, 0, -2, 2, 3]
    # a power-of-two scale is exact: the scaled value is the value times the scale
    g = np.array([0.1, -0.3])
    assert quantize(g, 2.0**40).tolist() == [round(0.1 * 2**40), round(-0.3 * 2**40)]


# --- exact sums ---------------------------------------------------------------------------------


def test_exact_sum_is_the_correctly_rounded_sum_in_any_order():
    rng = np.random.default_rng(3)
    for case in range(200):
        n = int(rng.integers(1, 3000))
        a = rng.normal(size=n) * 10.0 ** rng.integers(-20, 20, size=n)
        if case % 7 == 0:
            a[: n // 2] = np.abs(a[: n // 2])  # one-signed, as losses are
        s = exact_sum(a)
        assert s == math.fsum(a), case
        assert exact_sum(a[rng.permutation(n)]) == s
    a = np.r_[0.1, 1e17, 0.2, -1e17]
    assert exact_sum(a) == math.fsum(a) == 0.1 + 0.2 != a.sum()


def test_exact_sum_edge_cases():
    assert exact_sum(np.zeros(0)) == 0.0 and exact_sum(np.zeros(5)) == 0.0
    assert exact_sum(np.array([np.inf, 1.0])) == np.inf
    assert exact_sum(np.array([-np.inf, 1.0])) == -np.inf
    assert math.isnan(exact_sum(np.array([np.inf, -np.inf])))
    assert math.isnan(exact_sum(np.array([np.nan, 1.0])))
    assert exact_sum(np.full(4, 5e-324)) == 2e-323  # subnormals: still exact
    assert exact_sum(np.array([1e308, 1e308])) == np.inf
    assert exact_sum(np.array([[1.0, 2.0], [3.0, 4.5]])) == 10.5  # any shape, flattened


@pytest.mark.parametrize("case", ["normal", "wide", "cancel", "tiny", "ties", "ints"])
def test_correctly_rounded_sum_is_math_fsum(case):
    """The device's correctly rounded sum (``correctly_rounded_sum``, array operations only: run
    here on numpy) returns ``math.fsum``'s bits: the GPU's initial score is the CPU's."""
    rng = np.random.default_rng(7)
    a = {
        "normal": rng.normal(size=10_001),
        "wide": rng.normal(size=5000) * 2.0 ** rng.integers(-300, 300, 5000),
        "cancel": np.concatenate([[1e300, 1.0, -1e300], rng.normal(size=50) * 1e-290]),
        "tiny": np.array([5e-324, 5e-324, -1e-310, 2.2250738585072014e-308]),
        "ties": np.array([1.0, 2.0**-53, 2.0**-106, -(2.0**-160)]),
        "ints": (rng.random(1000) < 0.3).astype(np.float64),
    }[case]
    for v in (a, rng.permutation(a), -a):
        assert correctly_rounded_sum(v) == math.fsum(v)
    assert correctly_rounded_sum(np.zeros(0)) == 0.0
    assert math.isnan(correctly_rounded_sum(np.array([1.0, np.nan])))


def test_exact_mean_plain_and_weighted():
    rng = np.random.default_rng(5)
    a = rng.normal(size=100)
    w = rng.uniform(0.1, 2.0, 100)
    assert exact_mean(a) == math.fsum(a) / 100
    assert exact_mean(a, w) == math.fsum(a * w) / math.fsum(w)
    assert math.isnan(exact_mean(np.zeros(0)))


# --- the fused preparation of one tree's gradients ---------------------------------------------


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("unit_hessian", [False, True])
@pytest.mark.parametrize("divisor", [False, True])
@pytest.mark.parametrize(
    "backend", [CPU, CPUBackend(n_threads=3, rows_per_task=5)], ids=["serial", "chunked"]
)
def test_prepare_gradients_equals_the_array_route(weighted, unit_hessian, divisor, backend):
    rng = np.random.default_rng(7)
    n = 50_000 if backend.n_threads else 500  # the chunked drivers need many rows
    g = rng.normal(size=n) * 3.0
    h = rng.uniform(0.0, 0.25, size=n)
    h[:7] = 0.0
    w = rng.uniform(0.0, 2.0, size=n) if weighted else None
    prep = prepare_gradients(backend, g, h, w, unit_hessian=unit_hessian, divisor=divisor)
    gw = g if w is None else g * w
    hw = np.ones(n) if unit_hessian else h
    hw = hw if w is None else hw * w
    gs, hs = fixed_point_scale(gw, n), fixed_point_scale(hw, n)
    assert (prep.g_scale, prep.h_scale) == (gs, hs)
    assert prep.gh.dtype == np.int64 and prep.gh.shape == (n, 2)
    np.testing.assert_array_equal(prep.gh[:, 0], quantize(gw, gs))
    np.testing.assert_array_equal(prep.gh[:, 1], quantize(hw, hs))
    assert prep.G_q == int(quantize(gw, gs).sum()) and prep.H_q == int(quantize(hw, hs).sum())
    ps = PenaltyState(0.1, np.ones(2), np.arange(2, dtype=np.int32), "root_sse")
    want = ps.gain_divisor(gw, hw) if divisor else 1.0
    assert prep.gain_divisor == want
    if divisor:  # a real divisor, not the fallback 1.0
        assert prep.gain_divisor > 1.0


def test_prepare_gradients_with_zero_gradients():
    n = 20
    prep = prepare_gradients(CPU, np.zeros(n), np.ones(n), None, divisor=True)
    assert prep.g_scale == 1.0 and prep.G_q == 0 and (prep.gh[:, 0] == 0).all()
    assert prep.gain_divisor == 1.0  # nothing to divide by: the gains are 0


@pytest.mark.parametrize("scale", [1e-300, 1e-9, 1.0, 1e9, 1e300])
def test_host_word_sums_are_the_array_formula(scale):
    """The compiled one-pass word sums of host arrays (``exact_sum_words``' numpy path) give
    the words of the array formula it replaced, on magnitudes from tiny to huge, strided and
    read-only input included."""
    from gpufs.engine.quantize import _sum_factors

    rng = np.random.default_rng(11)
    a = rng.standard_cauchy(100_001) * scale
    a[::7] = 0.0
    a[3] = -a[5]
    frozen = a.copy()
    frozen.flags.writeable = False
    for x in (a, a[::3], frozen):
        max_abs, n = float(np.abs(x).max()), x.shape[0]
        f1, f2, low_scale, _, _ = _sum_factors(max_abs, n)
        y = (x * f1) * f2
        hi = np.rint(y)
        lo = np.rint((y - hi) * low_scale)
        want = (int(hi.astype(np.int64).sum()), int(lo.astype(np.int64).sum()))
        assert exact_sum_words(x, max_abs, n) == want


@pytest.mark.parametrize(
    "values",
    [[0.0], [-0.0, 0.0], [1.0, -3.0, 2.0], [1.0, np.nan, 5.0], [np.inf, 1.0], [-np.inf, np.nan]],
)
def test_host_max_abs_is_numpys(values):
    """``exact_sum``'s compiled largest magnitude on the host: numpy's ``abs(a).max()``, NaN
    and infinities included (they decide ``exact_sum``'s non-finite result)."""
    from gpufs.backends.cpu.objective import host_max_abs

    a = np.array(values * 3)
    want = float(np.abs(a).max())
    got = host_max_abs(a)
    assert (math.isnan(got) and math.isnan(want)) or got == want
