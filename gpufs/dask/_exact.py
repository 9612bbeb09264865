"""Exact sums that add across processes: the reductions that steer a fit, split over workers.

Owns the two mergeable forms of the exact float sums gpufs uses on one device:

* ``math.fsum`` (correctly rounded; the initial score, ``objectives._exact_weighted_mean``):
  a worker returns its values' exact sum as an integer multiple of ``2**-SHIFT``
  (:func:`fsum_part`); integers add exactly, and :func:`fsum_from_parts` rounds the total
  once, correctly, so it equals ``math.fsum`` of all the values in any order and any split;
* ``quantize.exact_sum`` (two-word fixed point; losses, the A-GBM divisor): a worker returns
  the largest magnitude and non-finite flags of its values (:func:`sum_stats`), then, with the
  scales fixed by the global maximum and count, its two int64 word sums
  (``quantize.exact_sum_words``); the driver adds the words and converts once
  (``quantize.exact_sum_from_words``).
"""

from __future__ import annotations

import math

import numpy as np

from .._device import namespace_of
from ..engine.quantize import exact_sum_from_words, nonfinite_sum

#: Every finite float64 is an integer multiple of 2**-1074; frexp's 53-bit mantissas of
#: subnormals reach 53 bits further down.
SHIFT = 1074 + 53
#: Mantissas are summed in two int64 halves of this many low bits (no overflow below 2**36
#: values per exponent).
_LOW_BITS = 26


def fsum_part(a) -> int:
    """The exact sum of the finite float64 values ``a`` (any shape) as an integer N: the sum
    is N * 2**-SHIFT exactly."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    if a.shape[0] == 0:
        return 0
    mant, exp = np.frexp(a)  # a = mant * 2**exp, |mant| in [0.5, 1)
    m = np.ldexp(mant, 53).astype(np.int64)  # exact: 53-bit integers
    e = exp.astype(np.int64) - 53 + SHIFT  # a = m * 2**(e - SHIFT), e >= 0
    e_min = int(e.min())
    idx = e - e_min
    size = int(idx.max()) + 1
    hi = np.zeros(size, np.int64)
    lo = np.zeros(size, np.int64)
    np.add.at(hi, idx, m >> _LOW_BITS)  # floor shift: m = hi * 2**26 + lo exactly
    np.add.at(lo, idx, m & ((1 << _LOW_BITS) - 1))
    total = 0
    for i in np.flatnonzero((hi != 0) | (lo != 0)).tolist():
        total += ((int(hi[i]) << _LOW_BITS) + int(lo[i])) << (i + e_min)
    return total


def fsum_from_parts(parts) -> float:
    """``math.fsum`` of all the values whose :func:`fsum_part` are ``parts``: their exact
    total, rounded once to nearest-even (Python's int / int), as ``math.fsum`` rounds."""
    total = sum(int(p) for p in parts)
    return total / (1 << SHIFT)


def sum_stats(a) -> tuple:
    """(count, largest finite-or-not magnitude, has NaN, has +inf, has -inf) of ``a``, the
    first pass of a distributed ``quantize.exact_sum``."""
    xp = namespace_of(a)  # a GPU shard's values stay on its device: a few scalars come back
    a = xp.asarray(a).reshape(-1)
    if a.shape[0] == 0:
        return 0, 0.0, False, False, False
    m = float(xp.abs(a).max())
    if math.isfinite(m):
        return int(a.shape[0]), m, False, False, False
    return (
        int(a.shape[0]),
        m,
        bool(xp.isnan(a).any()),
        bool((a == math.inf).any()),
        bool((a == -math.inf).any()),
    )


def merge_stats(stats) -> tuple:
    """Merge :func:`sum_stats` of several parts into the same tuple for all of them."""
    n = sum(s[0] for s in stats)
    flags = (any(s[2] for s in stats), any(s[3] for s in stats), any(s[4] for s in stats))
    m = math.inf if any(flags) else max((s[1] for s in stats), default=0.0)
    return (n, m) + flags


def sum_from_words(stats, words) -> float:
    """``quantize.exact_sum`` of all the parts: ``stats`` merged by :func:`merge_stats`,
    ``words`` the parts' ``exact_sum_words`` (pairs of ints; ignored when no pass 2 ran)."""
    n, m, has_nan, pos, neg = stats
    if n == 0:
        return 0.0
    if not math.isfinite(m):
        return nonfinite_sum(has_nan, pos, neg)
    if m == 0.0:
        return 0.0
    return exact_sum_from_words(sum(int(w[0]) for w in words), sum(int(w[1]) for w in words), m, n)
