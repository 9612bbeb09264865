"""The CPU's objectives and fixed point: gradients, losses, and their quantization.

Owns the per-row kernels of one boosting round (gradients, hessians and losses of squared
error, logistic and softmax, in one pass or apart) by ``gpufs.rules._exactmath``'s formulas,
compiled so that each operation rounds as IEEE 754 says, like the GPU's; and the fixed-point pass of
``gpufs.engine.quantize.prepare_gradients`` (the extremes, then the int64 (g, h) and their exact
sums). The GPU's counterpart is ``cuda_kernels/objective.py``.
"""

import numpy as np
from numba import njit, prange
from numba.core import types
from numba.extending import intrinsic

from ..._types import read_only
from ...rules import _exactmath
from ._args import FixedScales
from ._device_fns import ROW_BLOCK


@intrinsic
def _f64_bits(typingctx, x):
    """The IEEE 754 bits of a float64 as an int64 (an LLVM bitcast: no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return types.int64(types.float64), codegen


@intrinsic
def _bits_f64(typingctx, b):
    """The float64 with the IEEE 754 bits of an int64 (an LLVM bitcast)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


# The objectives' exact math (``gpufs.rules._exactmath``): plain * and +, which numba's CPU compiler
# never contracts into FMAs (no fastmath), so each rounds as IEEE 754 says, like the GPU's
# dmul_rn / dadd_rn.
_em = _exactmath.make_exact_math(
    njit(inline="always")(_exactmath.py_mul),
    njit(inline="always")(_exactmath.py_add),
    njit(error_model="numpy", inline="always"),
    njit(inline="always")(lambda x: _f64_bits(x)),
    njit(inline="always")(lambda b: _bits_f64(b)),
)
_logistic_grad_hess_loss = _em.logistic_grad_hess_loss
_squared_error_loss = _em.squared_error_loss
_softmax_grad_hess_loss_row = _em.softmax_grad_hess_loss_row


# The per-row fixed-point arithmetic, shared with the GPU's kernels (``gpufs.rules._exactmath``).
_fp = _exactmath.make_fixed_point(np.rint, np.int64, njit(inline="always"))
_weighted = _fp.weighted
_fixed = _fp.fixed
_two_word = _fp.two_word


@njit(inline="always")
def _extremes_chunk(c, n_chunks, g, h, w, unit_hessian, divisor, out):
    n = g.shape[0]
    has_w = w.shape[0] > 0
    mg = 0.0
    mh = 0.0
    mq = 0.0
    for i in range((c * n) // n_chunks, ((c + 1) * n) // n_chunks):
        gi, hi = _weighted(g, h, w, has_w, unit_hessian, i)
        mg = max(mg, abs(gi))
        mh = max(mh, abs(hi))
        if divisor and hi > 0:
            mq = max(mq, abs(gi * gi / hi))
    out[c, 0] = mg
    out[c, 1] = mh
    out[c, 2] = mq


@njit(parallel=True, cache=True, nogil=True)
def _extremes_par(g, h, w, unit_hessian, divisor, out):
    for c in prange(out.shape[0]):
        _extremes_chunk(c, out.shape[0], g, h, w, unit_hessian, divisor, out)


@njit(cache=True, nogil=True)
def _extremes_ser(g, h, w, unit_hessian, divisor, out):
    for c in range(out.shape[0]):
        _extremes_chunk(c, out.shape[0], g, h, w, unit_hessian, divisor, out)


@njit(inline="always")
def _quantize_chunk(c, g, h, w, unit_hessian, fp, gh, sums):
    """Chunk c of sums.shape[0]: its rows' fixed-point (g, h) into ``gh`` and its exact sums
    into ``sums[c]`` by the ``FixedScales`` ``fp`` (``gh`` and ``sums`` plain arguments:
    written inside ``prange``)."""
    n = g.shape[0]
    n_chunks = sums.shape[0]
    has_w = w.shape[0] > 0
    g_scale = fp.g_scale
    h_scale = fp.h_scale
    e1s = fp.e1s
    e2s = fp.e2s
    low_scales = fp.low_scales
    divisor = fp.divisor
    acc = sums[c]
    acc[:] = 0
    for i in range((c * n) // n_chunks, ((c + 1) * n) // n_chunks):
        gi, hi = _weighted(g, h, w, has_w, unit_hessian, i)
        a = _fixed(gi, g_scale)
        b = _fixed(hi, h_scale)
        gh[i, 0] = a
        gh[i, 1] = b
        acc[6] += a
        acc[7] += b
        u, v = _two_word((gi * e1s[0]) * e2s[0], low_scales[0])
        acc[0] += u
        acc[1] += v
        u, v = _two_word((hi * e1s[1]) * e2s[1], low_scales[1])
        acc[2] += u
        acc[3] += v
        if divisor:
            q = gi * gi / hi if hi > 0 else 0.0
            u, v = _two_word((q * e1s[2]) * e2s[2], low_scales[2])
            acc[4] += u
            acc[5] += v


# ``fp`` arrives as a plain tuple in ``FixedScales``' field order: numba types a named tuple
# argument in Python, about 10 us a call (``level._level_step_flat``).
@njit(parallel=True, cache=True, nogil=True)
def _quantize_par(g, h, w, unit_hessian, fp, gh, sums):
    fp = FixedScales(*fp)
    for c in prange(sums.shape[0]):
        _quantize_chunk(c, g, h, w, unit_hessian, fp, gh, sums)


@njit(cache=True, nogil=True)
def _quantize_ser(g, h, w, unit_hessian, fp, gh, sums):
    fp = FixedScales(*fp)
    for c in range(sums.shape[0]):
        _quantize_chunk(c, g, h, w, unit_hessian, fp, gh, sums)


@njit(cache=True, nogil=True, error_model="numpy")
def _word_sums(a, f1, f2, low_scale):
    """``engine.quantize.exact_sum_words`` of a (n,) float64 on the host in one pass: the int64
    sums of ``two_word((a[i] * f1) * f2, low_scale)``'s high and low words (the numpy form
    made seven passes and four temporary arrays; integer sums, so the same result)."""
    hi_sum = np.int64(0)
    lo_sum = np.int64(0)
    for i in range(a.shape[0]):
        u, v = _two_word((a[i] * f1) * f2, low_scale)
        hi_sum += u
        lo_sum += v
    return hi_sum, lo_sum


@njit(cache=True, nogil=True, error_model="numpy")
def _max_abs(a):
    """max |a[i]| of a (n,) float64, NaN when a value is NaN (as numpy's ``abs(a).max()``)."""
    m = 0.0
    nan = False
    for i in range(a.shape[0]):
        x = abs(a[i])
        m = x if x > m else m
        nan |= x != x
    return np.nan if nan else m


def host_max_abs(a):
    """``_max_abs`` of any host array of floats (flattened; one compiled signature).

    Parameters
    ----------
    a : ndarray, float

    Returns
    -------
    float
    """
    return float(_max_abs(read_only(_host_vector(a))))


def _host_vector(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float64).reshape(-1))


def host_word_sums(a, f1, f2, low_scale):
    """``_word_sums`` of any host array of floats (flattened; one compiled signature: a
    C-ordered, read-only float64 vector).

    Parameters
    ----------
    a : ndarray, float
    f1, f2, low_scale : float
        Powers of two (``engine.quantize._sum_factors``).

    Returns
    -------
    hi_sum, lo_sum : int
    """
    hi_sum, lo_sum = _word_sums(read_only(_host_vector(a)), float(f1), float(f2), float(low_scale))
    return int(hi_sum), int(lo_sum)


# --- one round's gradients and losses ------------------------------------------------------


@njit(inline="always")
def _round_row(kind, i, raw, y, g, h, loss):
    if kind == 0:  # squared error: g = raw - y (one IEEE subtraction), h = 1
        z = raw[i, 0]
        yi = float(y[i])
        g[0, i] = z - yi
        h[0, i] = 1.0
        loss[i] = _squared_error_loss(z, yi)
    elif kind == 1:
        gi, hi, li = _logistic_grad_hess_loss(raw[i, 0], float(y[i]))
        g[0, i] = gi
        h[0, i] = hi
        loss[i] = li
    else:
        loss[i] = _softmax_grad_hess_loss_row(raw, i, np.int64(y[i]), g, h)


@njit(inline="always")
def _logistic_round_rows(lo, hi, z, y, g, h, loss):
    """Rows lo..hi-1: a loop of branch-free row functions over 1-D arrays, which the compiler
    vectorizes (``_exactmath.logistic_grad_hess_loss``; the callers compile with numpy's error
    model, so a division carries no zero check that would stop it)."""
    for i in range(lo, hi):
        gi, hi_, li = _logistic_grad_hess_loss(z[i], float(y[i]))
        g[i] = gi
        h[i] = hi_
        loss[i] = li


# One round kernel for every objective, the objective a runtime argument (the losses alone
# are its third output): a fit of a new task then compiles nothing new (each specialisation
# of a round or loss kernel cost 4-20 s of the first fit's compile). y is float64 for every
# task (class codes are exact in it), for the same reason. The logistic branch sits outside
# the row loop, so its loop still vectorizes.


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def _round_par(kind, raw, y, g, h, loss):
    n = raw.shape[0]
    n_blocks = (n + ROW_BLOCK - 1) // ROW_BLOCK
    if kind == 1 and raw.shape[1] == 1:
        z = raw.reshape(n)
        g0 = g[0]
        h0 = h[0]
        for b in prange(n_blocks):
            _logistic_round_rows(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK), z, y, g0, h0, loss)
    else:
        for b in prange(n_blocks):
            for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
                _round_row(kind, i, raw, y, g, h, loss)


@njit(cache=True, nogil=True, error_model="numpy")
def _round_ser(kind, raw, y, g, h, loss):
    n = raw.shape[0]
    if kind == 1 and raw.shape[1] == 1:
        _logistic_round_rows(0, n, raw.reshape(n), y, g[0], h[0], loss)
    else:
        for i in range(n):
            _round_row(kind, i, raw, y, g, h, loss)


_ROUND_KINDS = {"squared_error": 0, "logistic": 1, "softmax": 2}
