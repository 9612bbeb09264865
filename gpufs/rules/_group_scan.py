"""The scan of one pseudo-feature histogram of GT-GBM's group tests, for both devices.

Both backends' group-test steps (``backends/cpu/group_testing.py``, the GPU's group tests) bin
their pseudo-features and build histograms on their own device; each histogram's best
threshold gain is scored here, on the host, by the one split-gain rule of ``_gain``
(``best_gains``), so both devices' steps score alike. ``concat_groups`` joins two groups'
tables.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._gain import candidate, parent_term

_candidate = njit(inline="always")(candidate)
_parent_term = njit(inline="always")(parent_term)


@njit(inline="always")
def _best_gain(hist, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight):
    """Best gain of the thresholds 'bin <= b', b < nb - 1, of one histogram (int64 (>= nb, 2)
    of (g, h) sums); -inf when no threshold leaves both children a valid hessian."""
    G = G_q * g_inv
    H = H_q * h_inv
    parent = _parent_term(G, H, reg_lambda)
    best = -math.inf
    gl = hist[0, 0] - hist[0, 0]
    hl = gl
    for b in range(nb - 1):
        if b > 0 and hist[b, 0] == 0 and hist[b, 1] == 0:
            continue  # same left sums as b - 1, which scored first: cannot win
        gl += hist[b, 0]
        hl += hist[b, 1]
        gain, score = _candidate(
            gl, hl, H_q, G, H, parent, g_inv, h_inv, reg_lambda, 1.0, min_child_weight, 0.0
        )
        if score > best:
            best = gain
    return best


@njit(cache=True, nogil=True)
def _best_gains_of_histograms(hist, nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out):
    """``_best_gain`` of every column of one node's histograms (n_cols, 256, 2) int64."""
    for c in range(hist.shape[0]):
        out[c] = _best_gain(hist[c], nb, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight)


def best_gains(hist, scan):
    """The best threshold gain of each pseudo-feature histogram, as a search step scores it.

    Parameters
    ----------
    hist : ndarray of shape (n_columns, >= max_bins, 2), int64
    scan : tuple
        (max_bins, G_q, H_q, 1 / g_scale, 1 / h_scale, reg_lambda, min_child_weight).

    Returns
    -------
    ndarray of shape (n_columns,), float64
    """
    gains = np.empty(hist.shape[0], np.float64)
    _best_gains_of_histograms(np.ascontiguousarray(hist), *scan, gains)
    return gains


def concat_groups(a, b):
    """Two groups' tables (sub, lo, hi), one after the other."""
    return tuple(np.concatenate([x, y]) for x, y in zip(a, b))
