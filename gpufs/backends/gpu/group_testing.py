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
    """``gpufs.engine.group_testing.standardize`` in the matrix-product layout.

    Each column scaled to the integers 0 .. STANDARDIZED_MAX over its finite range (NaN and
    constant columns: 0), exact in float32.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float
        The raw features, on the backend's device.
    block : int
        Columns standardized at a time (bounds the float64 scratch).

    Returns
    -------
    ndarray of shape (n_samples, n_features), float32
        On the same device as ``X``.
    """
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
    backend's ``group_test_steps()``; ``gpufs.engine.group_testing`` drives it.

    Parameters
    ----------
    backend : GPUBackend
        Its array module and histogram kernel are used.
    Q : ndarray of shape (n_samples, n_features), float32
        ``standardize``'s result, on the device.
    gh : ndarray of shape (n_samples, 2), int64, or None
        Fixed-point (gradient, hessian) of the rows, on the device; None when only
        ``sums`` and ``bins`` are used (``FirstStep``).
    p : int
        The number of subsets searched.
    scan : tuple
        ``_group_scan.best_gains``'s scan parameters: (max_bins, G_q, H_q, 1 / g_scale,
        1 / h_scale, reg_lambda, min_child_weight); only max_bins when ``gh`` is None.
    """

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
        """The pseudo-feature of each group: the sum of its columns of ``Q``.

        Parameters
        ----------
        subsets : ndarray of shape (p, m), int64
            The subsets' features, in search order.
        groups : tuple of three ndarrays of shape (n_groups,), int64
            (sub, lo, hi): group g is the features ``subsets[sub[g], lo[g]:hi[g]]``.

        Returns
        -------
        ndarray of shape (n_samples, n_groups), int64
            On the device; exact (every partial sum is an integer below 2**24).
        """
        xp = self.xp
        sub, lo, hi = groups
        pos = np.arange(subsets.shape[1])
        inside = (pos >= lo[:, None]) & (pos < hi[:, None])  # (n_groups, m)
        cols, at = np.nonzero(inside)
        ind = xp.zeros((self.d, sub.shape[0]), np.float32)
        ind[xp.asarray(subsets[sub[cols], at]), xp.asarray(cols)] = 1.0
        return xp.matmul(self.Q, ind).astype(np.int64)

    def bins(self, both):
        """Each pseudo-feature's equal-width bins, by the CPU's rule (``_bins_of``) in the
        same float64 operations, elementwise.

        Parameters
        ----------
        both : ndarray of shape (n_samples, n_columns), int64
            The step's pseudo-features (``sums``), on the device.

        Returns
        -------
        ndarray of shape (n_samples, n_columns), uint8
            Bins 0 .. max_bins - 1, C order, on the device.
        """
        xp = self.xp
        nb = self.scan[0]
        v_lo = both.min(axis=0)
        scale = nb / (both.max(axis=0).astype(np.float64) - v_lo.astype(np.float64) + 1.0)
        return xp.ascontiguousarray(((both - v_lo).astype(np.float64) * scale).astype(np.uint8))

    def step(self, subsets, active, left, right, first=None):
        """Score one step of the subsets' binary searches: both halves of each active one.

        Parameters
        ----------
        subsets : ndarray of shape (p, m), int64
            The subsets' features.
        active : ndarray of shape (k,), int64
            The subsets still searching.
        left, right : tuple of three ndarrays of shape (k,), int64
            (sub, lo, hi) of each active subset's left and right half. ``right`` None: each
            right half is the group kept at the last step (``keep``) minus its left half.
        first : FirstStep or None, default=None
            The first step's pseudo-features and bins, computed once per fit; used instead.

        Returns
        -------
        gain_left, gain_right : ndarray of shape (k,), float64
            The best split gain of each half's pseudo-feature on the rows of ``gh``.
        """
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
        """Keep the chosen half of each active subset's last step (the next step's right
        halves are derived from it).

        Parameters
        ----------
        active : ndarray of shape (k,), int64
            The subsets of the last ``step``.
        keep_left : ndarray of shape (k,), bool
            True where the left half is kept.
        """
        xp = self.xp
        a = xp.asarray(active)
        self.kept[:, a] = xp.where(xp.asarray(keep_left)[None, :], self.left, self.right)
