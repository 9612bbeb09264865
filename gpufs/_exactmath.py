"""exp, log, log1p, softplus, sigmoid and the objectives' per-row formulas, bit-identical on
every device.

Why: a GPU must give the CPU's trees bit for bit, and logistic / softmax gradients go through
``exp``. glibc's ``exp`` and CUDA's libdevice ``exp`` differ by up to an ulp, and a one-ulp
difference in one gradient can move a fixed-point sum, then a split. So gpufs does not call
either: the functions below are written with nothing but +, -, *, / on float64, comparisons
and integer operations, each of which IEEE 754 defines exactly (round to nearest even), so
every device that follows IEEE 754 computes the same bits.

One source, compiled by each backend: ``make_exact_math(mul, add, jit)`` returns the
functions compiled with ``jit``; every multiplication and every addition / subtraction goes
through the ``mul(a, b)`` / ``add(a, b)`` it is given. The backends bind them as

  CPU (``numba.njit``)        plain ``a * b`` / ``a + b``: numba's CPU compiler never contracts
                              a multiply and an add into a fused multiply-add (FMA) unless
                              ``fastmath`` is on, and it is not;
  GPU (``cuda.jit(device)``)  ``numba.cuda.libdevice.dmul_rn`` / ``dadd_rn``: CUDA contracts
                              ``a * b + c`` into one FMA (rounded once, not twice), but these
                              intrinsics compile to ``mul.rn.f64`` / ``add.rn.f64``, which are
                              never contracted (``tests/test_cuda_kernels_sim.py`` checks the
                              PTX has no ``fma.rn.f64``);
  CUDA simulator, pure Python plain ``a * b`` / ``a + b`` (the simulator runs device code as
                              Python; its libdevice functions are stubs).

Divisions are plain ``/``: IEEE division is correctly rounded on the CPU and on CUDA
(``div.rn.f64``, numba's default) and cannot be fused. Nothing here divides by zero.

Accuracy (tests/test_exactmath.py, against 40-digit ``decimal`` references): ``exp``, ``log``,
``log1p`` and ``softplus`` within about 1 ulp, ``sigmoid`` within about 2 ulp; relative error
below 1e-15 over the whole double range they are defined on. The algorithms:

  exp(x)     x = k ln2 + r with k = round(x / ln2), r by Cody-Waite with a two-part ln2
             (k * LN2_HI is exact), |r| <= 0.3466; e^r by its Taylor polynomial of degree 13
             (truncation < 5e-18); then * 2^k as two exact power-of-two multiplications
             (2^j built from exact squarings), so a subnormal result is rounded once.
  log(x)     x = 2^k m with m in [sqrt(2)/2, sqrt(2)) by exact power-of-two scaling, f = m - 1
             (exact); log(1 + f) = f - f^2/2 + s (f^2/2 + R), s = f / (2 + f), R the atanh
             series 2 s^2/3 + 2 s^4/5 + ... + 2 s^20/21 (fdlibm's arrangement, plain Taylor
             coefficients; truncation < 1e-18 relative); plus k ln2 in two parts.
  log1p(u)   w = 1 + u rounded, its rounding error e by an exact TwoSum, then
             log(w) + e / w.
  softplus   log(1 + e^x) = max(x, 0) + log1p(e^-|x|).
  sigmoid    (p, q) = (1 / (1 + e^-x), e^-x / (1 + e^-x)) for x >= 0 (mirrored for x < 0): p and
             q = 1 - p are each accurate, even where one of them is tiny.

The objectives' per-row formulas (``objectives.py`` documents the losses):

  logistic_grad_hess(z, y)   g = p - y (as p (1 - y) - q y: exactly -q for y = 1 and p for
                             y = 0), h = p q
  logistic_loss(z, y)        softplus(z) for y = 0, softplus(-z) for y = 1 (= log(1 + e^z) - y z)
  squared_error_loss(z, y)   (z - y)^2
  softmax_grad_hess_row(raw, i, y, g, h)   row i: m = max_k raw[i, k], s = sum_k e^(raw[i,k] - m)
                             in class order k = 0, 1, ...; p_k = e^(raw[i,k] - m) / s;
                             g[k, i] = p_k - [y == k], h[k, i] = p_k (1 - p_k)
  softmax_loss_row(raw, i, y)  log(s) + (m - raw[i, y])  (both terms >= 0)

Caching note: the kernels that call these functions are cached on disk by numba, keyed on
their own source files only; the content of this file is therefore part of the cache folder's
name (``gpufs._numba_setup``), so an edit here recompiles every kernel.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

#: ln 2 in two parts (fdlibm): LN2_HI has 21 trailing zero bits, so k * LN2_HI is exact for
#: |k| < 2**21; LN2_HI + LN2_LO = ln 2 within 1.2e-26.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
SQRT2 = 1.4142135623730951
SQRT2_HALF = SQRT2 * 0.5
#: exp(x) overflows above EXP_OVERFLOW and rounds to 0 below EXP_UNDERFLOW.
EXP_OVERFLOW = 709.782712893384
EXP_UNDERFLOW = -745.1332191019412
#: Below this |u|, log1p(u) = u to within half an ulp.
LOG1P_TINY = 2.0 ** -54
#: e^r: Taylor coefficients 1/n!, n = 12 .. 0, for Horner's rule after 1/13!.
_EXP_TOP = 1.0 / math.factorial(13)
_EXP_COEFFS = tuple(1.0 / math.factorial(n) for n in range(12, -1, -1))
#: log: R = z (2/3 + z (2/5 + ... + z 2/21)), Horner's rule from 2/21 down to 2/3.
_LOG_TOP = 2.0 / 21.0
_LOG_COEFFS = tuple(2.0 / (2 * n + 1) for n in range(9, 0, -1))
_TWO_64 = 2.0 ** 64
_TWO_M64 = 2.0 ** -64
_TWO_16 = 2.0 ** 16
_TWO_M16 = 2.0 ** -16
_TWO_4 = 16.0
_TWO_M4 = 0.0625


def make_exact_math(mul, add, jit):
    """The functions of this module's docstring, compiled with ``jit``.

    Parameters
    ----------
    mul, add : callables (a, b) -> float64, the product and the sum rounded to nearest, never
        fused (see the module docstring for each backend's binding)
    jit : decorator compiling a scalar Python function for the backend (``numba.njit(...)``,
        ``numba.cuda.jit(device=True)``, or the identity for plain Python)

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
        """2.0 ** j exactly, for -1022 <= j <= 1023 (a product of exact powers of two)."""
        s = 1.0
        b = 2.0
        if j < 0:
            b = 0.5
            j = -j
        while j > 0:
            if j & 1:
                s = mul(s, b)
            j >>= 1
            if j > 0:
                b = mul(b, b)
        return s

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
    def normalize(x):
        """(m, k) with x = m * 2**k exactly and SQRT2/2 <= m < SQRT2; x positive and finite."""
        m = x
        k = 0
        while m >= _TWO_64:
            m = mul(m, _TWO_M64)
            k += 64
        while m >= _TWO_16:
            m = mul(m, _TWO_M16)
            k += 16
        while m >= _TWO_4:
            m = mul(m, _TWO_M4)
            k += 4
        while m >= SQRT2:
            m = mul(m, 0.5)
            k += 1
        while m < _TWO_M64:
            m = mul(m, _TWO_64)
            k -= 64
        while m < _TWO_M16:
            m = mul(m, _TWO_16)
            k -= 16
        while m < _TWO_M4:
            m = mul(m, _TWO_4)
            k -= 4
        while m < SQRT2_HALF:
            m = mul(m, 2.0)
            k -= 1
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
    def softplus(x):
        """log(1 + e^x), never overflowing."""
        if x != x:
            return x
        if x > 0.0:
            return add(x, log1p(exp(-x)))
        return log1p(exp(x))

    @jit
    def sigmoid_pq(x):
        """(p, q) = (1 / (1 + e^-x), 1 / (1 + e^x)), each accurate (q = 1 - p)."""
        if x >= 0.0:
            e = exp(-x)
            d = add(1.0, e)
            return 1.0 / d, e / d
        e = exp(x)
        d = add(1.0, e)
        return e / d, 1.0 / d

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
            s = add(s, exp(add(raw[i, k], -m)))
        return m, s

    @jit
    def softmax_grad_hess_row(raw, i, y, g, h):
        """g[k, i], h[k, i] for every class k of row i with class code y (int)."""
        m, s = row_max_sumexp(raw, i)
        for k in range(raw.shape[1]):
            p = exp(add(raw[i, k], -m)) / s
            t = 1.0 if k == y else 0.0
            g[k, i] = add(p, -t)
            h[k, i] = mul(p, add(1.0, -p))

    @jit
    def softmax_loss_row(raw, i, y):
        """-log p_y of row i: log(s) + (m - raw[i, y]), both terms >= 0."""
        m, s = row_max_sumexp(raw, i)
        return add(log(s), add(m, -raw[i, y]))

    @jit
    def logistic_grad_hess_loss(z, y):
        """(g, h, loss) of one row: ``logistic_grad_hess`` and ``logistic_loss`` bit for bit,
        sharing their one exponential e^-|z| (both compute exactly that value)."""
        if z != z or (y != 0.0 and y != 1.0):
            g, h = logistic_grad_hess(z, y)
            return g, h, logistic_loss(z, y)
        if z >= 0.0:
            e = exp(-z)
            d = add(1.0, e)
            p = 1.0 / d
            q = e / d
        else:
            e = exp(z)
            d = add(1.0, e)
            p = e / d
            q = 1.0 / d
        g = add(mul(p, add(1.0, -y)), -mul(q, y))
        # softplus(z) for y = 0 and softplus(-z) for y = 1, as ``softplus`` computes them
        x = z if y == 0.0 else -z
        if x > 0.0:
            loss = add(x, log1p(e))
        else:
            loss = log1p(e)
        return g, mul(p, q), loss

    @jit
    def softmax_grad_hess_loss_row(raw, i, y, g, h):
        """``softmax_grad_hess_row`` and returns ``softmax_loss_row``, bit for bit, from one
        pass over the row's exponentials."""
        m, s = row_max_sumexp(raw, i)
        for k in range(raw.shape[1]):
            p = exp(add(raw[i, k], -m)) / s
            t = 1.0 if k == y else 0.0
            g[k, i] = add(p, -t)
            h[k, i] = mul(p, add(1.0, -p))
        return add(log(s), add(m, -raw[i, y]))

    return SimpleNamespace(
        pow2=pow2, scale2=scale2, exp=exp, normalize=normalize, log=log, log1p=log1p,
        softplus=softplus, sigmoid=sigmoid, sigmoid_pq=sigmoid_pq,
        logistic_grad_hess=logistic_grad_hess, logistic_loss=logistic_loss,
        squared_error_loss=squared_error_loss, softmax_grad_hess_row=softmax_grad_hess_row,
        softmax_loss_row=softmax_loss_row, logistic_grad_hess_loss=logistic_grad_hess_loss,
        softmax_grad_hess_loss_row=softmax_grad_hess_loss_row)


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


def python_exact_math():
    """The functions in plain Python (float64 arithmetic, no compilation): the reference the
    compiled versions must reproduce bit for bit."""
    return make_exact_math(py_mul, py_add, lambda f: f)
