"""Fixed point: exact, order-independent sums on every device.

Owns the map float64 g -> int64 g_q = rint(g * scale), ``scale`` a power of two chosen per
tree so that every row's |g_q| (and h_q) is at most ``QGRAD_BOUND`` = 2**15 and int64 sums of
all rows cannot overflow. Integer sums are the same in any order, so a GPU's atomics give the
CPU's histograms, and the per-row bound lets a run of ``PACK_CHUNK_ROWS`` rows accumulate in
32-bit words (GPU shared memory) or packed int64 pairs (``pack`` / ``unpack``).
Also owns the fixed-point float reductions that steer fitting (``exact_sum``,
``exact_mean``, ``correctly_rounded_sum``). The rules in full: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .._device import namespace_of, to_host
from .._types import QGRAD_DTYPE
from ..backends.base import largest_magnitude, word_sums

_HEADROOM_BITS = 62

#: Bits of a fixed-point gradient's magnitude: max|g| * scale < 2**QGRAD_BITS, so after rounding
#: |g_q| <= QGRAD_BOUND (the rounding of a value below 2**15 reaches 2**15 at most).
QGRAD_BITS = 15
#: The largest magnitude of one row's fixed-point value (g_q or h_q), whatever the row count.
QGRAD_BOUND = 1 << QGRAD_BITS
#: The most rows whose values one 32-bit word sums without overflow:
#: PACK_CHUNK_ROWS * QGRAD_BOUND = 2**31 - 2**15 < 2**31 (int32 g; uint32 h a fortiori).
PACK_CHUNK_ROWS = (1 << (31 - QGRAD_BITS)) - 1
_LOW32 = (1 << 32) - 1
_SIGN32 = 1 << 31


def _row_bits(n_rows: int) -> int:
    return max(1, math.ceil(math.log2(n_rows + 1)))


def scale_for(max_abs: float, n_rows: int) -> float:
    """The power-of-two fixed-point scale for values of largest magnitude ``max_abs``.

    Parameters
    ----------
    max_abs : float
        The largest magnitude of the values.
    n_rows : int
        How many of them are summed.

    Returns
    -------
    float
        ``2**(b - exp_max)`` with ``max_abs < 2**exp_max`` (``frexp``) and
        ``b = min(QGRAD_BITS, 62 - row_bits)``, ``row_bits`` the bits of ``n_rows``: the
        largest power of two with ``max_abs * 2**k < 2**15`` (so every rounded value is at most
        ``QGRAD_BOUND``) and ``n_rows * max_abs * 2**k < 2**62`` (int64 sums cannot
        overflow; binding only past 2**47 rows); 1.0 for 0, inf or NaN.
    """
    if max_abs == 0.0 or not math.isfinite(max_abs):
        return 1.0
    _, exp_max = math.frexp(max_abs)  # max_abs < 2**exp_max
    bits = min(QGRAD_BITS, _HEADROOM_BITS - _row_bits(n_rows))
    return math.ldexp(1.0, bits - exp_max)


def pack(g_q, h_q):
    """(g, h) fixed-point values as one int64 word each: ``g * 2**32 + h``.

    Words of at most ``PACK_CHUNK_ROWS`` rows add as int64 without overflow, and ``unpack`` of
    their sum gives (sum g, sum h) exactly: both sums fit 32 signed bits, the low half's is
    sign-extended and its borrow taken back from the high half (so h may be negative too).

    Parameters
    ----------
    g_q, h_q : int or ndarray of int64
        Magnitudes at most ``QGRAD_BOUND``.

    Returns
    -------
    int or ndarray of int64
    """
    return (g_q << 32) + h_q


def unpack(word):
    """The (g sum, h sum) of a sum of at most ``PACK_CHUNK_ROWS`` ``pack`` words.

    Parameters
    ----------
    word : int or ndarray of int64

    Returns
    -------
    g, h : int or ndarray of int64
    """
    h = ((word & _LOW32) ^ _SIGN32) - _SIGN32  # the low 32 bits, sign-extended
    return (word - h) >> 32, h


def fixed_point_scale(a, n_rows: int) -> float:
    """The power-of-two scale (``scale_for``) of the values of an array.

    Parameters
    ----------
    a : ndarray of shape (n,), float64
        numpy or cupy.
    n_rows : int
        How many values are summed.

    Returns
    -------
    float
    """
    xp = namespace_of(a)
    max_abs = float(xp.abs(a).max()) if a.size else 0.0
    return scale_for(max_abs, n_rows)


def quantize(a, scale: float):
    """Fixed-point values: ``rint(a * scale)``, ties to even.

    Parameters
    ----------
    a : ndarray, float64
        numpy or cupy.
    scale : float
        A power of two, so ``a * scale`` is exact.

    Returns
    -------
    ndarray of a's shape, int64
        On a's device.
    """
    xp = namespace_of(a)
    return xp.rint(a * scale).astype(QGRAD_DTYPE)


def exact_sum(a) -> float:
    """``sum(a)`` as a host float, the same on every device and in any order of the values.

    Two-word fixed point: with ``2**e = fixed_point_scale(a, n)`` and ``L = 62 - row_bits``,
    x = a * 2**e (exact), hi = rint(x), lo = rint((x - hi) * 2**L) (x - hi is exact, in
    [-1/2, 1/2]); both int64 sums are exact and cannot overflow, and
    sum = (sum(hi) * 2**L + sum(lo)) / 2**(e + L), converted once (Python integers, correctly
    rounded). Each value contributes an error of at most 2**-(e + L + 1), so the total error is
    below n**3 * max|a| * 2**-123 (half an ulp of max|a| up to about 10 million values) plus
    the final rounding: as accurate as a float sum, and usually the correctly rounded sum.
    With infinite or NaN values the result is what any float summation gives: NaN, inf or -inf.

    Parameters
    ----------
    a : ndarray, float64
        numpy or cupy, any shape (flattened).

    Returns
    -------
    float
    """
    xp = namespace_of(a)
    a = a.reshape(-1)
    n = int(a.shape[0])
    if n == 0:
        return 0.0
    max_abs = largest_magnitude(a)
    if not math.isfinite(max_abs):  # what any order of float additions gives
        return nonfinite_sum(
            bool(xp.isnan(a).any()), bool((a == math.inf).any()), bool((a == -math.inf).any())
        )
    if max_abs == 0.0:
        return 0.0
    return exact_sum_from_words(*exact_sum_words(a, max_abs, n), max_abs, n)


def exact_sum_words(a, max_abs: float, n: int) -> tuple[int, int]:
    """``exact_sum``'s two integer word sums of some of the values summed.

    Values split over several processes (``gpufs.dask``) give word sums that add exactly:
    with the scales fixed by the largest magnitude and the count of *all* the values,
    ``exact_sum_from_words(sum of his, sum of los, max_abs, n)`` is ``exact_sum`` of all of
    them, bit for bit.

    Parameters
    ----------
    a : ndarray of shape (m,), float64
        Finite values (numpy or cupy), a part of those summed.
    max_abs : float
        The largest magnitude of all the values summed, > 0.
    n : int
        How many values are summed in all.

    Returns
    -------
    hi_sum, lo_sum : int
        The sums of the high and the low words of ``a``'s values.
    """
    f1, f2, low_scale, _, _ = _sum_factors(max_abs, n)
    return word_sums(a, f1, f2, low_scale)


def exact_sum_from_words(hi_sum: int, lo_sum: int, max_abs: float, n: int) -> float:
    """The float ``exact_sum`` returns from its word sums (``exact_sum_words``).

    Parameters
    ----------
    hi_sum, lo_sum : int
        The word sums of all the values.
    max_abs : float
        Their largest magnitude, > 0.
    n : int
        Their count.

    Returns
    -------
    float
    """
    _, _, _, e, low_bits = _sum_factors(max_abs, n)
    return _combine(hi_sum, lo_sum, e, low_bits)


#: Values per chunk of ``correctly_rounded_sum``: chunk x 2**27 < 2**53, so float64 sums of its
#: integer parts are exact in any order.
_FSUM_CHUNK = 1 << 25


def correctly_rounded_sum(a) -> float:
    """``math.fsum(a)`` (the correctly rounded sum) computed where ``a`` lives.

    Each finite double is q * 2**(e - 53), q an integer with |q| < 2**53 (``frexp``); q splits
    into a high part q >> 27 and a low part q & (2**27 - 1), each of magnitude < 2**27. Per
    chunk of 2**25 values the parts are summed per exponent by ``bincount`` in float64: every
    partial sum is an integer below 2**53, so exact in any order (cupy's atomics included).
    The host adds the per-exponent sums as Python integers and rounds once
    (``_int_times_pow2``): the exactly rounded sum, which is what ``math.fsum`` returns, so a
    GPU gives the host's bits. With a non-finite value, or a sum that overflows, the host's
    ``math.fsum`` of a copy decides (its own rules).

    Parameters
    ----------
    a : ndarray, float64
        numpy or cupy, any shape (flattened).

    Returns
    -------
    float
    """
    xp = namespace_of(a)
    a = xp.asarray(a, dtype=xp.float64).reshape(-1)
    n = int(a.shape[0])
    if n == 0:
        return 0.0
    m, e = xp.frexp(a)
    finite = bool(xp.isfinite(a).all())
    if not finite:
        return math.fsum(to_host(a))
    e = e.astype(xp.int64)
    e_min, e_max = (int(v) for v in to_host(xp.stack([e.min(), e.max()])))
    q = xp.ldexp(m, 53).astype(xp.int64)  # exact: m has at most 53 significant bits
    parts = (q >> 27, q & ((1 << 27) - 1))
    bucket = e - e_min
    nb = e_max - e_min + 1
    sums = xp.zeros((2, nb), dtype=xp.int64)  # < n x 2**27: no overflow below 2**36 values
    for lo in range(0, n, _FSUM_CHUNK):
        hi = min(n, lo + _FSUM_CHUNK)
        for i, p in enumerate(parts):
            sums[i] += xp.bincount(
                bucket[lo:hi], weights=p[lo:hi].astype(xp.float64), minlength=nb
            ).astype(xp.int64)
    host = to_host(sums)
    total = 0
    for b in range(nb - 1, -1, -1):  # Horner in powers of two, exact Python integers
        total = (total << 1) + (int(host[0, b]) << 27) + int(host[1, b])
    out = _int_times_pow2(total, e_min - 53)
    if not math.isfinite(out):
        return math.fsum(to_host(a))
    return out


def nonfinite_sum(has_nan: bool, has_pos_inf: bool, has_neg_inf: bool) -> float:
    """What any order of float additions gives for values with an infinity or a NaN.

    Parameters
    ----------
    has_nan, has_pos_inf, has_neg_inf : bool
        Whether some value is NaN, +inf, -inf.

    Returns
    -------
    float
        NaN (a NaN, or infinities of both signs), else the infinity's sign.
    """
    if has_nan or (has_pos_inf and has_neg_inf):
        return math.nan
    return math.inf if has_pos_inf else -math.inf


def _sum_factors(max_abs: float, n: int):
    """``exact_sum``'s scaling for n finite values of largest magnitude max_abs > 0: the two
    exact power-of-two factors of 2**e (2**e alone may not be a finite double), the low word's
    scale 2**L, and e, L."""
    _, exp_max = math.frexp(max_abs)
    row_bits = _row_bits(n)
    e = _HEADROOM_BITS - row_bits - exp_max
    low_bits = _HEADROOM_BITS - row_bits
    e1 = e // 2
    return math.ldexp(1.0, e1), math.ldexp(1.0, e - e1), math.ldexp(1.0, low_bits), e, low_bits


def _combine(hi_sum: int, lo_sum: int, e: int, low_bits: int) -> float:
    """(sum(hi) * 2**L + sum(lo)) / 2**(e + L), correctly rounded."""
    return _int_times_pow2((hi_sum << low_bits) + lo_sum, -(e + low_bits))


def _int_times_pow2(total: int, k: int) -> float:
    """total * 2**k correctly rounded to a float (total an exact Python integer)."""
    try:
        # int / int is correctly rounded in Python, whatever the sizes.
        return total / (1 << -k) if k < 0 else float(total << k)
    except OverflowError:
        return math.copysign(math.inf, total)


def exact_mean(a, w=None) -> float:
    """``sum(a) / n``, or ``sum(a * w) / sum(w)``, from ``exact_sum`` (device- and
    order-free).

    ``a * w`` is one IEEE multiplication per row on either device, so its bits are the same.

    Parameters
    ----------
    a : ndarray of shape (n,), float64
    w : ndarray of shape (n,), float64, or None

    Returns
    -------
    float
        NaN for an empty ``a``.
    """
    n = int(a.shape[0])
    if n == 0:
        return math.nan
    if w is None:
        return exact_sum(a) / n
    return exact_sum(a * w) / exact_sum(w)


class PreparedGradients(NamedTuple):
    """One tree's fixed-point gradients and the exact sums that steer its growth.

    Parameters
    ----------
    gh : ndarray of shape (n_samples, 2), int64
        ``rint(g w * g_scale)`` and ``rint(h w * h_scale)``, on the backend's device.
    G_q, H_q : int
        The exact sums of the two columns of ``gh`` (the root's sums).
    g_scale, h_scale : float
        The power-of-two scales (``fixed_point_scale`` of g w and h w).
    gain_divisor : float, default=1.0
        The A-GBM divisor ``0.5 * (sum g^2/h - G^2/H)`` over rows with h > 0
        (``penalties.PenaltyState.gain_divisor``'s value), or 1.0 when not asked for.
    """

    gh: object
    G_q: int
    H_q: int
    g_scale: float
    h_scale: float
    gain_divisor: float = 1.0


class QuantizedSums(NamedTuple):
    """The int64 sums ``backend.quantize_gradients`` returns (its ``sums``, shape (8,)), by
    name: the two words (``exact_sum_words``) of sum g w, sum h w and sum q (q = g^2 w / h,
    the A-GBM divisor's terms; zeros when not asked for), then the exact sums of the two
    columns of ``gh``.

    Parameters
    ----------
    g_hi, g_lo, h_hi, h_lo, q_hi, q_lo, G_q, H_q : int
    """

    g_hi: int
    g_lo: int
    h_hi: int
    h_lo: int
    q_hi: int
    q_lo: int
    G_q: int
    H_q: int

    @classmethod
    def of(cls, sums) -> QuantizedSums:
        """The named sums of a backend's (8,) array (host or device).

        Parameters
        ----------
        sums : ndarray of shape (8,), int64

        Returns
        -------
        QuantizedSums
        """
        return cls(*to_host(sums).tolist())  # int64 -> Python int, exactly

    def words(self, i: int) -> tuple[int, int]:
        """The (hi, lo) word sums of quantity i: 0 for g w, 1 for h w, 2 for q.

        Parameters
        ----------
        i : int

        Returns
        -------
        tuple of int
        """
        return self[2 * i], self[2 * i + 1]


def prepare_gradients(backend, g, h, w=None, *, unit_hessian=False, divisor=False):
    """Weights, fixed point and the exact root sums of one tree, in two passes over the rows.

    The results are exactly what the array-by-array route gives --
    ``quantize(g * w, fixed_point_scale(g * w, n))`` and likewise for h, and
    ``PenaltyState.gain_divisor(g * w, h * w)`` -- computed by the backend's fused kernels: one
    pass for the largest magnitudes (the scales), one for the fixed-point values and the
    two-word sums of ``exact_sum``.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    g, h : ndarray of shape (n_samples,), float64
        Gradients and hessians, on the backend's device.
    w : ndarray of shape (n_samples,), float64, or None
        Sample weights.
    unit_hessian : bool, default=False
        Every hessian is 1 (``h`` is not read).
    divisor : bool, default=False
        Compute the A-GBM gain divisor too.

    Returns
    -------
    PreparedGradients
    """
    n = int(g.shape[0])
    mg, mh, mq = backend.gradient_extremes(g, h, w, unit_hessian, divisor)
    g_scale, h_scale = scale_for(mg, n), scale_for(mh, n)
    finite = math.isfinite(mg) and math.isfinite(mh) and math.isfinite(mq)
    factors = [
        _sum_factors(m, n) if finite and m > 0 else (1.0, 1.0, 1.0, 0, 0) for m in (mg, mh, mq)
    ]
    gh, raw_sums = backend.quantize_gradients(
        g,
        h,
        w,
        unit_hessian,
        g_scale,
        h_scale,
        [f[0] for f in factors],
        [f[1] for f in factors],
        [f[2] for f in factors],
        divisor,
    )
    sums = QuantizedSums.of(raw_sums)
    gain_divisor = 1.0
    if divisor:
        if finite:
            G, H, total = (
                _combine(*sums.words(i), f[3], f[4]) if m > 0 else 0.0
                for i, (m, f) in enumerate(zip((mg, mh, mq), factors))
            )
        else:  # inf / NaN gradients: the array route says what a float sum gives
            xp = namespace_of(g)
            gw = g if w is None else g * w
            hw = xp.ones_like(g) if unit_hessian else h
            hw = hw if w is None else hw * w
            pos = hw > 0
            G, H = exact_sum(gw), exact_sum(hw)
            total = exact_sum(xp.where(pos, gw * gw / xp.where(pos, hw, 1.0), 0.0))
        div = 0.5 * (total - G * G / H) if H > 0 else 0.0
        gain_divisor = div if div > 0 else 1.0
    return PreparedGradients(gh, sums.G_q, sums.H_q, g_scale, h_scale, gain_divisor)
