"""GT-GBM's group tests on the GPU backend: a step's pseudo-features by one matrix product.

Owns ``DeviceSteps`` (the GPU backend's ``group_test_steps()``) and the standardized columns
in its layout, float32 (n_samples, n_features): array operations of the backend's namespace
(cupy; numpy under the CUDA simulator), the backend's histogram kernel, and the CPU's scan of
a pseudo-feature histogram (``_group_scan.best_gains``), so that both devices
score a step alike. The algorithm is ``gpufs.engine.group_testing``'s.
"""

from __future__ import annotations

import numpy as np

from ..._device import namespace_of, to_host
from ..._types import STANDARDIZED_MAX
from ...rules._group_scan import best_gains, concat_groups

__all__ = ["DeviceSteps"]


def _standardize_float32(X, block):
    """``standardize`` in the matrix-product layout: float32 (n_samples, n_features)."""
    xp = namespace_of(X)
    n, d = X.shape
    out = xp.empty((n, d), np.float32)
    for a in range(0, d, block):
        b = min(d, a + block)
        x = xp.asarray(X[:, a:b], dtype=np.float64)
        nan = xp.isnan(x)
        lo = xp.min(xp.where(nan, xp.inf, x), axis=0)
        hi = xp.max(xp.where(nan, -xp.inf, x), axis=0)
        span = hi - lo
        ok = xp.isfinite(span) & (span > 0)
        z = (x - xp.where(ok, lo, 0.0)[None, :]) / xp.where(ok, span, 1.0)[None, :]
        q = xp.rint(z * float(STANDARDIZED_MAX))
        out[:, a:b] = xp.where(nan | ~ok[None, :], 0.0, q).astype(np.float32)
    return out


class DeviceSteps:
    """The same on the GPU backend: the pseudo-features of a step are ONE matrix product
    ``Q @ I`` (float32 (n, d) times the (d, n_groups) 0/1 indicator of the groups; cuBLAS,
    exact because every partial sum is an integer below 2**24), binned with array operations,
    histogrammed with the backend's histogram kernel, and scored on the host by the same
    compiled scan as the CPU's. Under the CUDA simulator the array module is numpy. The GPU
    backend's ``group_test_steps()``."""

    standardize = staticmethod(_standardize_float32)

    def __init__(self, backend, Q, gh, p, scan):
        self.backend = backend
        self.xp = backend.xp
        self.Q = Q
        self.gh = gh
        self.n, self.d = Q.shape
        self.scan = scan
        self.kept = self.xp.zeros((self.n, p), np.int64)
        self.rows = self.xp.arange(self.n, dtype=np.int32)
        self.left = self.right = None

    def sums(self, subsets, groups):
        """int64 (n, n_groups): the pseudo-feature of each group (sub, lo, hi)."""
        xp = self.xp
        sub, lo, hi = groups
        pos = np.arange(subsets.shape[1])
        inside = (pos >= lo[:, None]) & (pos < hi[:, None])  # (n_groups, m)
        cols, at = np.nonzero(inside)
        ind = xp.zeros((self.d, sub.shape[0]), np.float32)
        ind[xp.asarray(subsets[sub[cols], at]), xp.asarray(cols)] = 1.0
        return xp.matmul(self.Q, ind).astype(np.int64)

    def bins(self, both):
        """uint8 (n, 2k): ``_bins_of``'s rule, elementwise (the same float64 operations)."""
        xp = self.xp
        nb = self.scan[0]
        v_lo = both.min(axis=0)
        scale = nb / (both.max(axis=0).astype(np.float64) - v_lo.astype(np.float64) + 1.0)
        return xp.ascontiguousarray(((both - v_lo).astype(np.float64) * scale).astype(np.uint8))

    def step(self, subsets, active, left, right, first=None):
        xp = self.xp
        k = active.shape[0]
        if first is not None:
            both, bins = first.sums, first.bins
        else:
            if right is not None:
                both = self.sums(subsets, concat_groups(left, right))
            else:
                left = self.sums(subsets, left)
                both = xp.concatenate([left, self.kept[:, xp.asarray(active)] - left], axis=1)
            bins = self.bins(both)
        self.left, self.right = both[:, :k], both[:, k:]
        hist = to_host(
            self.backend.histograms(
                bins,
                self.gh,
                self.rows,
                np.zeros(1, np.int64),
                np.array([self.n], np.int64),
                np.zeros(1, np.int64),
            )
        )
        gains = best_gains(hist[0], self.scan)
        return gains[:k], gains[k:]

    def keep(self, active, keep_left):
        xp = self.xp
        a = xp.asarray(active)
        self.kept[:, a] = xp.where(xp.asarray(keep_left)[None, :], self.left, self.right)
