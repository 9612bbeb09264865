"""Objective kernels: per-row gradients / hessians and loss terms, bit for bit the CPU's.

The formulas are those of ``gpufs.rules._exactmath`` (exp, log, softplus, sigmoid and the per-row
objective functions written with +, -, *, / only), compiled here as device functions with
``mul`` / ``add`` bound to libdevice's ``dmul_rn`` / ``dadd_rn``: those compile to
``mul.rn.f64`` / ``add.rn.f64``, which neither NVVM nor ptxas fuses into an FMA, so every
operation rounds exactly as on the CPU (``gpufs/backends/cpu/objective.py`` compiles the same source
with plain ``*`` / ``+``). Under the CUDA simulator (whose libdevice functions are stubs) they
are plain Python ``*`` / ``+``.

``logistic_gradients_kernel(raw, y, g, h)``
  raw  (n, 1) float64 raw scores (logits); y (n,) labels in {0, 1} (any int or float dtype)
  g, h (1, n) float64: g = p - y, h = p (1 - p), p = sigmoid(raw)
``softmax_gradients_kernel(raw, y, g, h)``
  raw  (n, K) float64; y (n,) int class codes in 0..K-1
  g, h (K, n) float64: g[k] = p_k - [y == k], h[k] = p_k (1 - p_k)
``squared_error_loss_kernel(raw, y, out)``  out[i] = (raw[i, 0] - y[i])^2
``logistic_loss_kernel(raw, y, out)``       out[i] = log(1 + e^raw[i,0]) - y[i] raw[i,0]
``softmax_loss_kernel(raw, y, out)``        out[i] = -log p_{y[i]}(raw[i])
  out  (n,) float64 per-row losses (the backend averages them with ``quantize.exact_mean``)

Launch: 1-D grid-stride loops, one thread per row; any grid works, the backend sizes it.
"""

import os

from numba import cuda, float64, int64

from gpufs.rules import _exactmath

from ._device_fns import fixed, two_word, weighted

#: Block size of the reducing kernels (a power of two: their tree reductions halve it).
_REDUCE_BLOCK = 256
REDUCE_BLOCK = _REDUCE_BLOCK

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _mul, _add = _exactmath.py_mul, _exactmath.py_add
    _to_bits, _from_bits = _exactmath.python_to_bits, _exactmath.python_from_bits
else:
    from numba.cuda import libdevice

    _mul, _add = libdevice.dmul_rn, libdevice.dadd_rn
    # reinterpretations of the 64 bits (mov.b64), no conversion
    _to_bits, _from_bits = libdevice.double_as_longlong, libdevice.longlong_as_double

_em = _exactmath.make_exact_math(_mul, _add, cuda.jit(device=True), _to_bits, _from_bits)
logistic_grad_hess = _em.logistic_grad_hess
logistic_loss = _em.logistic_loss
squared_error_loss = _em.squared_error_loss
softmax_grad_hess_row = _em.softmax_grad_hess_row
softmax_loss_row = _em.softmax_loss_row


@cuda.jit(cache=True)
def logistic_gradients_kernel(raw, y, g, h):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        gi, hi = logistic_grad_hess(raw[i, 0], float(y[i]))
        g[0, i] = gi
        h[0, i] = hi
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def softmax_gradients_kernel(raw, y, g, h):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        softmax_grad_hess_row(raw, i, y[i], g, h)
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def squared_error_loss_kernel(raw, y, out):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        out[i] = squared_error_loss(raw[i, 0], float(y[i]))
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def logistic_loss_kernel(raw, y, out):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        out[i] = logistic_loss(raw[i, 0], float(y[i]))
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def softmax_loss_kernel(raw, y, out):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        out[i] = softmax_loss_row(raw, i, y[i])
        i += cuda.gridsize(1)


# --- one boosting round's gradients, and their fixed point ----------------------------------
# ``round_*_kernel(raw, y, g, h, loss)``: gradients, hessians and per-row losses in one pass
# (``CPUBackend.round_gradients``; g, h (K, n), loss (n,)). ``extremes_kernel`` and
# ``quantize_kernel``: ``CPUBackend.gradient_extremes`` / ``quantize_gradients``, each block
# reducing its rows into one row of ``out`` / ``sums`` (max of floats and int64 sums: both
# exact in any order), which the backend brings to the host in one small copy.

logistic_grad_hess_loss = _em.logistic_grad_hess_loss
softmax_grad_hess_loss_row = _em.softmax_grad_hess_loss_row


@cuda.jit(cache=True)
def round_squared_error_kernel(raw, y, g, h, loss):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        z = raw[i, 0]
        yi = float(y[i])
        g[0, i] = z - yi  # one IEEE subtraction, as on the CPU
        h[0, i] = 1.0
        loss[i] = squared_error_loss(z, yi)
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def round_logistic_kernel(raw, y, g, h, loss):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        gi, hi, li = logistic_grad_hess_loss(raw[i, 0], float(y[i]))
        g[0, i] = gi
        h[0, i] = hi
        loss[i] = li
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def round_softmax_kernel(raw, y, g, h, loss):
    i = cuda.grid(1)
    while i < raw.shape[0]:
        loss[i] = softmax_grad_hess_loss_row(raw, i, int64(y[i]), g, h)
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def extremes_kernel(g, h, w, unit_hessian, divisor, out):
    sh = cuda.shared.array((3, _REDUCE_BLOCK), dtype=float64)
    t = cuda.threadIdx.x
    has_w = w.shape[0] > 0
    mg = 0.0
    mh = 0.0
    mq = 0.0
    i = cuda.grid(1)
    while i < g.shape[0]:
        gi, hi = weighted(g, h, w, has_w, unit_hessian, i)
        mg = max(mg, abs(gi))
        mh = max(mh, abs(hi))
        if divisor and hi > 0:
            mq = max(mq, abs(gi * gi / hi))
        i += cuda.gridsize(1)
    sh[0, t] = mg
    sh[1, t] = mh
    sh[2, t] = mq
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            for c in range(3):
                sh[c, t] = max(sh[c, t], sh[c, t + s])
        cuda.syncthreads()
        s //= 2
    if t < 3:
        out[cuda.blockIdx.x, t] = sh[t, 0]


@cuda.jit(cache=True)
def quantize_kernel(
    g,
    h,
    w,
    unit_hessian,
    g_scale,
    h_scale,
    e1g,
    e2g,
    lg,
    e1h,
    e2h,
    lh,
    e1q,
    e2q,
    lq,
    divisor,
    gh,
    sums,
):
    sh = cuda.shared.array((8, _REDUCE_BLOCK), dtype=int64)
    t = cuda.threadIdx.x
    has_w = w.shape[0] > 0
    for c in range(8):
        sh[c, t] = 0
    i = cuda.grid(1)
    while i < g.shape[0]:
        gi, hi = weighted(g, h, w, has_w, unit_hessian, i)
        a = fixed(gi, g_scale)
        b = fixed(hi, h_scale)
        gh[i, 0] = a
        gh[i, 1] = b
        sh[6, t] += a
        sh[7, t] += b
        u, v = two_word((gi * e1g) * e2g, lg)
        sh[0, t] += u
        sh[1, t] += v
        u, v = two_word((hi * e1h) * e2h, lh)
        sh[2, t] += u
        sh[3, t] += v
        if divisor:
            q = gi * gi / hi if hi > 0 else 0.0
            u, v = two_word((q * e1q) * e2q, lq)
            sh[4, t] += u
            sh[5, t] += v
        i += cuda.gridsize(1)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            for c in range(8):
                sh[c, t] += sh[c, t + s]
        cuda.syncthreads()
        s //= 2
    if t < 8:
        sums[cuda.blockIdx.x, t] = sh[t, 0]
