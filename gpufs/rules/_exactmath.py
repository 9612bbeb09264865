"""exp, log, log1p, softplus, sigmoid and the objectives' per-row formulas, bit-identical on
every device.

Why: a GPU must give the CPU's trees bit for bit, and logistic / softmax gradients go through
``exp``. glibc's ``exp`` and CUDA's libdevice ``exp`` differ by up to an ulp, and a one-ulp
difference in one gradient can move a fixed-point sum, then a split. So gpufs does not call
either: the functions below are written with nothing but +, -, *, / on float64, comparisons
and integer operations, each of which IEEE 754 defines exactly (round to nearest even), so
every device that follows IEEE 754 computes the same bits.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import math
import struct as _struct
from types import SimpleNamespace

#: ln 2 in two parts (fdlibm): LN2_HI has 21 trailing zero bits, so k * LN2_HI is exact for
#: |k| < 2**21; LN2_HI + LN2_LO = ln 2 within 1.2e-26.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e00
SQRT2 = 1.4142135623730951
SQRT2_HALF = SQRT2 * 0.5
#: exp(x) overflows above EXP_OVERFLOW and rounds to 0 below EXP_UNDERFLOW.
EXP_OVERFLOW = 709.782712893384
EXP_UNDERFLOW = -745.1332191019412
#: Below this |u|, log1p(u) = u to within half an ulp.
LOG1P_TINY = 2.0**-54
#: e^r: Taylor coefficients 1/n!, n = 12 .. 0, for Horner's rule after 1/13!.
_EXP_TOP = 1.0 / math.factorial(13)
_EXP_COEFFS = tuple(1.0 / math.factorial(n) for n in range(12, -1, -1))
#: log: R = z (2/3 + z (2/5 + ... + z 2/21)), Horner's rule from 2/21 down to 2/3.
_LOG_TOP = 2.0 / 21.0
_LOG_COEFFS = tuple(2.0 / (2 * n + 1) for n in range(9, 0, -1))
_TWO_64 = 2.0**64
#: The smallest positive normal double: below it a value is subnormal.
_TWO_M1022 = 2.0**-1022
#: IEEE 754 binary64 fields: 52 fraction bits, the biased exponent above them.
_FRACTION_MASK = (1 << 52) - 1
_EXPONENT_ONE = 1023 << 52  # the bits of 1.0


def make_exact_math(mul, add, jit, to_bits, from_bits):
    """The functions of this module's docstring, compiled with ``jit``.

    Parameters
    ----------
    mul, add : callables (a, b) -> float64, the product and the sum rounded to nearest, never
        fused (``docs/module_notes.rst`` gives each backend's binding)
    jit : decorator compiling a scalar Python function for the backend (``numba.njit(...)``,
        ``numba.cuda.jit(device=True)``, or the identity for plain Python)
    to_bits, from_bits : callables float64 -> int64 and int64 -> float64 reinterpreting the
        IEEE 754 bit pattern (no conversion): powers of two and exponents are read and built
        from the bits instead of by loops of exact multiplications, which gives the same
        values without data-dependent loops (``python_to_bits`` / ``python_from_bits`` for
        plain Python)

    Returns
    -------
    SimpleNamespace with pow2, scale2, exp, log, log1p, softplus, sigmoid, sigmoid_pq,
    logistic_grad_hess, logistic_loss, squared_error_loss, softmax_grad_hess_row,
    softmax_loss_row, and the fused logistic_grad_hess_loss / softmax_grad_hess_loss_row
    (gradients and loss of a row from one set of exponentials, bit-identical to the separate
    functions). Kernels refer to them through module-level names (numba resolves
    globals, not attributes of arbitrary objects).
    """
    inf = math.inf
    nan = math.nan

    @jit
    def pow2(j):
        """2.0 ** j exactly, for -1022 <= j <= 1023: its IEEE bit pattern."""
        return from_bits((j + 1023) << 52)

    @jit
    def scale2(x, k):
        """x * 2**k rounded once, for 0.5 <= |x| < 2 and -1100 <= k <= 1100."""
        k1 = k >> 1
        return mul(mul(x, pow2(k1)), pow2(k - k1))  # the first product is exact

    @jit
    def exp(x):
        if x != x:
            return x
        if x > EXP_OVERFLOW:
            return inf
        if x < EXP_UNDERFLOW:
            return 0.0
        t = mul(x, INV_LN2)
        if t >= 0.0:
            k = int(add(t, 0.5))
        else:
            k = -int(add(0.5, -t))
        kf = float(k)
        hi = add(x, -mul(kf, LN2_HI))  # exact
        r = add(hi, -mul(kf, LN2_LO))
        p = _EXP_TOP
        for c in _EXP_COEFFS:
            p = add(c, mul(r, p))
        return scale2(p, k)

    @jit
    def exp_nonpositive(a):
        """``exp(a)`` for a <= 0 or NaN, bit for bit, without branches: every path is
        computed and the result selected, so a compiler can vectorize a loop over rows (the
        objectives only exponentiate non-positive numbers: e^-|z|, e^(z - max))."""
        nan_in = a != a
        under = a < EXP_UNDERFLOW
        ac = EXP_UNDERFLOW if (under or nan_in) else a
        t = mul(ac, INV_LN2)
        k = -int(add(0.5, -t))  # exp's rounding of t to the nearest integer, for t <= 0
        kf = float(k)
        hi = add(ac, -mul(kf, LN2_HI))
        r = add(hi, -mul(kf, LN2_LO))
        p = _EXP_TOP
        for c in _EXP_COEFFS:
            p = add(c, mul(r, p))
        e = scale2(p, k)
        e = 0.0 if under else e
        return a if nan_in else e

    @jit
    def normalize(x):
        """(m, k) with x = m * 2**k exactly and SQRT2/2 <= m < SQRT2; x positive and finite.

        Read from the bits: the biased exponent gives k, the fraction with the exponent of
        1.0 gives m in [1, 2) (a subnormal x is first made normal by the exact product with
        2**64); m >= SQRT2 is halved, exactly."""
        k = -1023
        if x < _TWO_M1022:
            x = mul(x, _TWO_64)
            k = -1087
        b = to_bits(x)
        k += (b >> 52) & 0x7FF
        m = from_bits((b & _FRACTION_MASK) | _EXPONENT_ONE)
        if m >= SQRT2:
            m = mul(m, 0.5)
            k += 1
        return m, k

    @jit
    def log_reduced(f, k, c):
        """log(2**k * (1 + f)) + c for SQRT2/2 - 1 <= f < SQRT2 - 1 and a tiny correction c."""
        s = f / add(2.0, f)
        z = mul(s, s)
        r = _LOG_TOP
        for coeff in _LOG_COEFFS:
            r = add(coeff, mul(z, r))
        r = mul(z, r)
        hfsq = mul(mul(0.5, f), f)
        kf = float(k)
        t = add(mul(s, add(hfsq, r)), add(mul(kf, LN2_LO), c))
        return add(mul(kf, LN2_HI), add(f, -add(hfsq, -t)))

    @jit
    def log(x):
        if x != x or x < 0.0:
            return nan
        if x == 0.0:
            return -inf
        if x == inf:
            return inf
        m, k = normalize(x)
        return log_reduced(add(m, -1.0), k, 0.0)  # m - 1 is exact (Sterbenz)

    @jit
    def log1p(u):
        if u != u or u < -1.0:
            return nan
        if u == -1.0:
            return -inf
        if u == inf:
            return inf
        if -LOG1P_TINY < u < LOG1P_TINY:
            return u
        w = add(1.0, u)
        # TwoSum: e = (1 + u) - w exactly
        bv = add(w, -1.0)
        av = add(w, -bv)
        e = add(add(1.0, -av), add(u, -bv))
        m, k = normalize(w)
        return log_reduced(add(m, -1.0), k, e / w)

    @jit
    def log1p_unit(u):
        """``log1p(u)`` for 0 <= u <= 1 or NaN, bit for bit, without branches (u = e^-|z|
        in the logistic loss): ``normalize`` of w = 1 + u in [1, 2] is read from its bits."""
        w = add(1.0, u)
        bv = add(w, -1.0)
        av = add(w, -bv)
        e = add(add(1.0, -av), add(u, -bv))
        b = to_bits(w)
        k = ((b >> 52) & 0x7FF) - 1023
        m = from_bits((b & _FRACTION_MASK) | _EXPONENT_ONE)
        big = m >= SQRT2
        m = mul(m, 0.5) if big else m
        k = k + 1 if big else k
        res = log_reduced(add(m, -1.0), k, e / w)
        return u if u < LOG1P_TINY else res

    @jit
    def softplus(x):
        """log(1 + e^x), never overflowing: x + log1p(e^-x) for x > 0, log1p(e^x) else."""
        lg = log1p_unit(exp_nonpositive(-abs(x)))
        res = add(x, lg) if x > 0.0 else lg
        return x if x != x else res

    @jit
    def sigmoid_pq(x):
        """(p, q) = (1 / (1 + e^-x), 1 / (1 + e^x)), each accurate (q = 1 - p): with
        e = e^-|x|, (1, e) / (1 + e) for x >= 0 and (e, 1) / (1 + e) else."""
        e = exp_nonpositive(-abs(x))
        d = add(1.0, e)
        r1 = 1.0 / d
        r2 = e / d
        pos = x >= 0.0
        return (r1 if pos else r2), (r2 if pos else r1)

    @jit
    def sigmoid(x):
        p, q = sigmoid_pq(x)
        return p

    @jit
    def logistic_grad_hess(z, y):
        """(g, h) of the log loss on the logit z for a label y in [0, 1] (float)."""
        p, q = sigmoid_pq(z)
        g = add(mul(p, add(1.0, -y)), -mul(q, y))  # p - y
        return g, mul(p, q)

    @jit
    def logistic_loss(z, y):
        """log(1 + e^z) - y z, as (1 - y) softplus(z) + y softplus(-z) (no cancellation)."""
        if y == 0.0:
            return softplus(z)
        if y == 1.0:
            return softplus(-z)
        return add(mul(add(1.0, -y), softplus(z)), mul(y, softplus(-z)))

    @jit
    def squared_error_loss(z, y):
        d = add(z, -y)
        return mul(d, d)

    @jit
    def row_max_sumexp(raw, i):
        """(m, s): the row's largest raw score and sum_k e^(raw[i, k] - m), k in order."""
        n_classes = raw.shape[1]
        m = raw[i, 0]
        for k in range(1, n_classes):
            v = raw[i, k]
            if v > m:
                m = v
        s = 0.0
        for k in range(n_classes):
            s = add(s, exp_nonpositive(add(raw[i, k], -m)))
        return m, s

    @jit
    def softmax_grad_hess_at(raw, i, y, g, h, m, s):
        """g[k, i], h[k, i] of row i from its ``row_max_sumexp`` (m, s)."""
        for k in range(raw.shape[1]):
            p = exp_nonpositive(add(raw[i, k], -m)) / s
            t = 1.0 if k == y else 0.0
            g[k, i] = add(p, -t)
            h[k, i] = mul(p, add(1.0, -p))

    @jit
    def softmax_loss_at(raw, i, y, m, s):
        """-log p_y of row i from its ``row_max_sumexp`` (m, s): log(s) + (m - raw[i, y]),
        both terms >= 0."""
        return add(log(s), add(m, -raw[i, y]))

    @jit
    def softmax_grad_hess_row(raw, i, y, g, h):
        """g[k, i], h[k, i] for every class k of row i with class code y (int)."""
        m, s = row_max_sumexp(raw, i)
        softmax_grad_hess_at(raw, i, y, g, h, m, s)

    @jit
    def softmax_loss_row(raw, i, y):
        """-log p_y of row i."""
        m, s = row_max_sumexp(raw, i)
        return softmax_loss_at(raw, i, y, m, s)

    @jit
    def logistic_grad_hess_loss(z, y):
        """(g, h, loss) of one row: ``logistic_grad_hess`` and ``logistic_loss`` bit for bit,
        sharing their one exponential e^-|z| and its log1p, without branches (both results
        are computed and selected), so a loop over rows vectorizes on the CPU."""
        e = exp_nonpositive(-abs(z))
        d = add(1.0, e)
        r1 = 1.0 / d
        r2 = e / d
        pos = z >= 0.0
        p = r1 if pos else r2
        q = r2 if pos else r1
        g = add(mul(p, add(1.0, -y)), -mul(q, y))
        lg = log1p_unit(e)
        l0 = add(z, lg) if z > 0.0 else lg  # softplus(z)
        nz = -z
        l1 = add(nz, lg) if nz > 0.0 else lg  # softplus(-z)
        mixed = add(mul(add(1.0, -y), l0), mul(y, l1))
        loss = l0 if y == 0.0 else (l1 if y == 1.0 else mixed)
        return g, mul(p, q), loss

    @jit
    def softmax_grad_hess_loss_row(raw, i, y, g, h):
        """``softmax_grad_hess_row`` and returns ``softmax_loss_row``, bit for bit, from one
        pass over the row's exponentials."""
        m, s = row_max_sumexp(raw, i)
        softmax_grad_hess_at(raw, i, y, g, h, m, s)
        return softmax_loss_at(raw, i, y, m, s)

    return SimpleNamespace(
        pow2=pow2,
        scale2=scale2,
        exp=exp,
        exp_nonpositive=exp_nonpositive,
        normalize=normalize,
        log=log,
        log1p=log1p,
        log1p_unit=log1p_unit,
        softplus=softplus,
        sigmoid=sigmoid,
        sigmoid_pq=sigmoid_pq,
        logistic_grad_hess=logistic_grad_hess,
        logistic_loss=logistic_loss,
        squared_error_loss=squared_error_loss,
        softmax_grad_hess_row=softmax_grad_hess_row,
        softmax_loss_row=softmax_loss_row,
        logistic_grad_hess_loss=logistic_grad_hess_loss,
        softmax_grad_hess_loss_row=softmax_grad_hess_loss_row,
    )


def make_fixed_point(rint, to_int64, jit):
    """The per-row arithmetic of ``quantize.prepare_gradients``, compiled with ``jit``.

    ``rint`` rounds a float64 to the nearest integer value, ties to even (``numpy.rint`` on
    the CPU, libdevice's ``rint`` on the GPU: both IEEE ``roundToIntegralTiesToEven``);
    ``to_int64`` converts that integer-valued float64 to int64 (exact). Every expression is a
    product, a quotient or a difference fed into ``rint``, never a product fed into a sum, so
    no compiler can contract it into a fused multiply-add: both backends round each operation
    as IEEE 754 says.

    Returns a SimpleNamespace with
      ``weighted(g, h, w, has_w, unit_hessian, i)`` -> (g_i w_i, h_i w_i) of row i (h_i = 1
          with ``unit_hessian``, w_i = 1 without weights);
      ``fixed(x, scale)`` -> int64 rint(x * scale), the fixed-point value of x;
      ``two_word(x_scaled, low_scale)`` -> ``quantize.exact_sum``'s two int64 words of a value
          already multiplied by its power-of-two scale.
    """

    @jit
    def weighted(g, h, w, has_w, unit_hessian, i):
        gi = g[i]
        hi = 1.0 if unit_hessian else h[i]
        if has_w:
            gi = gi * w[i]
            hi = hi * w[i]
        return gi, hi

    @jit
    def fixed(x, scale):
        return to_int64(rint(x * scale))

    @jit
    def two_word(x_scaled, low_scale):
        hi = rint(x_scaled)
        lo = rint((x_scaled - hi) * low_scale)
        return to_int64(hi), to_int64(lo)

    return SimpleNamespace(weighted=weighted, fixed=fixed, two_word=two_word)


def py_mul(a, b):
    """``mul`` for the CPU (numba never fuses it into an FMA) and for plain Python."""
    return a * b


def py_add(a, b):
    """``add`` for the CPU and for plain Python."""
    return a + b


def python_to_bits(x):
    """The IEEE 754 bits of a float64 as a signed int64 (plain Python)."""
    return _struct.unpack("<q", _struct.pack("<d", x))[0]


def python_from_bits(b):
    """The float64 whose IEEE 754 bits are the int64 ``b`` (plain Python)."""
    return _struct.unpack("<d", _struct.pack("<q", b))[0]


def python_exact_math():
    """The functions in plain Python (float64 arithmetic, no compilation): the reference the
    compiled versions must reproduce bit for bit."""
    return make_exact_math(py_mul, py_add, lambda f: f, python_to_bits, python_from_bits)
