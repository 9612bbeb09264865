"""Linear algebra and sketching for the tree-weight lasso: Gram matrices built in row chunks,
the largest eigenvalue of a PSD operator (exact or by power iteration), and the row sketches of
the squared loss (Gaussian, CountSketch, row sampling). Everything runs in the array namespace
of its arguments (numpy or cupy) with host-drawn random numbers, so a seed gives the same sketch
on every device."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._device import to_host

__all__ = ["SKETCHES"]

SKETCHES = ("gaussian", "count", "rows")
#: Elements per chunk when a pass over A materializes a temporary (keeps memory bounded).
_CHUNK_ELEMS = 1 << 23
#: Largest Gram matrix whose top eigenvalue is taken by a dense eigvalsh on the host.
_EIGVALSH_MAX_T = 3000


def _check_sketch_kind(sketch, loss):
    """The checks of a sketch that need no data (a :class:`Datafit` makes them)."""
    if sketch is None:
        return
    if sketch not in SKETCHES:
        raise ValueError(f"sketch must be None or one of {SKETCHES}, got {sketch!r}")
    if loss == "logistic" and sketch != "rows":
        raise ValueError(
            f"sketch={sketch!r} is only defined for the squared loss; use "
            "sketch='rows' (row subsampling) with the logistic loss"
        )


def _check_sketch(sketch, sketch_size, loss, m, n_trees):
    """``(sketch, sketch_size)`` with the size checked against (and defaulted from) the data;
    the kind was checked by the :class:`Datafit` it comes from."""
    if sketch is None:
        return None, None
    if sketch_size is None:
        sketch_size = min(m, max(10 * (n_trees + 1), 1000))
    if (
        not isinstance(sketch_size, numbers.Integral)
        or isinstance(sketch_size, bool)
        or not 1 <= sketch_size <= m
    ):
        raise ValueError(
            f"sketch_size must be an integer in [1, {m}] (the number of rows), got {sketch_size!r}"
        )
    return sketch, int(sketch_size)


def _row_chunk(n_cols):
    return max(1, _CHUNK_ELEMS // max(n_cols, 1))


def _prepared_rows(xp, A, yc, sqrt_r, abar, lo, hi):
    """sqrt(r) * [A - abar, y - ybar] for rows lo:hi, shape (hi-lo, T+1)."""
    Ac = A[lo:hi] - abar[None, :]
    block = xp.concatenate([Ac, yc[lo:hi, None]], axis=1)
    return block * sqrt_r[lo:hi, None]


def _sketch_square(xp, A, yc, r, abar, kind, s, rng):
    """(B, v) = S D^(1/2) [A - abar, y - ybar] with E[S^T S] = I; B is (s, T), v is (s,)."""
    m, n_trees = A.shape
    sqrt_r = xp.sqrt(r)
    width = n_trees + 1
    if kind == "rows":
        idx = xp.asarray(np.sort(rng.choice(m, size=s, replace=False)))
        out = A[idx] - abar[None, :]
        out = xp.concatenate([out, yc[idx][:, None]], axis=1)
        out = out * (sqrt_r[idx] * math.sqrt(m / s))[:, None]
    elif kind == "gaussian":
        out = xp.zeros((s, width))
        step = max(1, _CHUNK_ELEMS // max(s, width))
        for lo in range(0, m, step):
            hi = min(m, lo + step)
            # Drawn on the host from one seeded stream: the same sketch on every device.
            S = xp.asarray(rng.standard_normal((s, hi - lo)) / math.sqrt(s))
            out += S @ _prepared_rows(xp, A, yc, sqrt_r, abar, lo, hi)
    else:  # "count"
        perm = rng.permutation(m)
        signs = rng.integers(0, 2, size=m).astype(np.float64) * 2.0 - 1.0
        out = xp.zeros((s, width))
        # Row perm[i] goes to bucket i % s. A chunk of whole rounds of s rows is gathered,
        # padded with zero rows, reshaped to (rounds, s, T+1) and summed over rounds: a fixed
        # summation order (no scatter-add atomics), hence bit-reproducible on the GPU too.
        rounds = max(1, _CHUNK_ELEMS // max(s * width, 1))
        step = rounds * s
        for lo in range(0, m, step):
            hi = min(m, lo + step)
            idx = xp.asarray(perm[lo:hi])
            sg = xp.asarray(signs[lo:hi])
            block = A[idx] - abar[None, :]
            block = xp.concatenate([block, yc[idx][:, None]], axis=1) * (sqrt_r[idx] * sg)[:, None]
            pad = (-(hi - lo)) % s
            if pad:
                block = xp.concatenate([block, xp.zeros((pad, width))], axis=0)
            out += block.reshape(-1, s, width).sum(axis=0)
    return xp.ascontiguousarray(out[:, :n_trees]), xp.ascontiguousarray(out[:, n_trees])


def _gram(xp, B, v, r, abar):
    """K = Bc^T D Bc, c = Bc^T D v, yy = v^T D v with Bc = B - abar, in row chunks.

    B (m, n); v (m,) or None (then c is None and yy 0); r (m,) row weights or None; abar (n,)
    column means to subtract, or None.
    """
    m, n_trees = B.shape
    K = xp.zeros((n_trees, n_trees))
    c = None if v is None else xp.zeros(n_trees)
    yy = 0.0
    step = _row_chunk(n_trees)
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        # C order matters: BLAS is several times slower on the mixed layouts that fancy
        # indexing (B[:, S]) produces.
        Bc = xp.ascontiguousarray(B[lo:hi])
        if abar is not None:
            Bc = Bc - abar[None, :]
        Bw = Bc if r is None else Bc * r[lo:hi, None]
        K += Bc.T @ Bw
        if v is not None:
            vc = v[lo:hi]
            c += Bw.T @ vc
            yy += float((vc if r is None else vc * r[lo:hi]) @ vc)
    # gemm does not promise an exactly symmetric product; eigvalsh and Newton prefer one.
    K = 0.5 * (K + K.T)
    return K, c, yy


def _gram_scaled(xp, A, cols, d, ones, dtype=np.float64):
    """``B^T B`` with ``B = d * [A[:, cols], 1]`` (the ones column only with ``ones``; ``cols``
    None: every column), in row chunks: the weighted Gram matrix ``[A 1]^T D^2 [A 1]`` of the
    logistic loss's Hessian and Lipschitz constant. ``B^T B`` of one buffer is a symmetric
    rank-k update (numpy's matmul calls BLAS syrk: half the flops of gemm), and the scaled
    block is written once, with no copy of the selected columns or of the ones column.

    ``dtype`` float32 forms each chunk's product in single precision (twice the flops per
    second, half the bytes) and sums the chunks in float64: a proximal Newton step's model
    (``TreeLasso._prox_newton``), which only has to point downhill, not the Lipschitz constant
    or the polish, whose Newton steps must land on the solution."""
    m = A.shape[0]
    n = A.shape[1] if cols is None else int(cols.shape[0])
    p = n + int(bool(ones))
    K = xp.zeros((p, p))
    step = _row_chunk(p)
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        block = A[lo:hi] if cols is None else xp.take(A[lo:hi], cols, axis=1)
        B = xp.empty((hi - lo, p), dtype=dtype)
        xp.multiply(block, d[lo:hi, None], out=B[:, :n])
        if ones:
            B[:, n] = d[lo:hi]
        K += B.T @ B
    return 0.5 * (K + K.T)


def _top_eig_sym(xp, K):
    """Largest eigenvalue of the PSD matrix K (exact for moderate size)."""
    n = K.shape[0]
    if n == 0:
        return 0.0
    if n <= _EIGVALSH_MAX_T:
        return float(max(np.linalg.eigvalsh(to_host(K))[-1], 0.0))
    return _power_top_eig(xp, lambda v: K @ v, n)


def _power_top_eig(xp, op, n, max_iter=300, rtol=1e-7):
    """Upper estimate of the top eigenvalue of the PSD operator ``op`` by power iteration.

    The start vector is a fixed pseudo-random one (deterministic, and not orthogonal to the top
    eigenvector with probability 1). Returns ``(nu + ||op v - nu v||) * 1.01`` where nu is the last
    Rayleigh quotient: some eigenvalue lies within the residual of nu, and a step 1/L that is a
    little too long would make FISTA unstable while one a little too short only costs a little.
    """
    if n == 0:
        return 0.0
    v = xp.asarray(np.random.default_rng(12345).random(n) + 0.5)
    v = v / xp.sqrt(v @ v)
    nu = 0.0
    res = xp.zeros(n)
    for _ in range(max_iter):
        mv = op(v)
        nu_new = float(v @ mv)
        nrm = float(xp.sqrt(mv @ mv))
        if nrm == 0.0:
            return 0.0
        done = abs(nu_new - nu) <= rtol * abs(nu_new)
        nu = nu_new
        res = mv - nu * v
        v = mv / nrm
        if done:
            break
    return (nu + float(xp.sqrt(res @ res))) * 1.01
