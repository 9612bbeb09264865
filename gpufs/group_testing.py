"""GT-GBM: candidate features by group testing and binary search (``split_search=
"group_testing"``).

Owns Algorithm 2 of Han, Rao, Sorokina, Subbian, "Scalable Feature Selection for (Multitask)
Gradient Boosted Trees", AISTATS 2020 (Section 4, Theorem 4.1) in histogram form, and the
penalty state that restricts a tree's split search to Omega plus the candidates it finds.

Algorithm 2, as implemented (``group_test_candidates``):
  1. the columns are min-max standardized once per fit (``standardize``): x' = (x - min) /
     (max - min) in [0, 1] (missing values and constant columns give 0), stored in fixed point
     as integer-valued float64 (``round(x' * 2**24)``), so that every sum of columns is exact
     and a matrix product gives the same bits in any summation order (BLAS on the CPU, cuBLAS
     / cuSPARSE on the GPU);
  2. ``p = ceil(e * s * log(s / delta))`` random subsets of size ``floor(d / s)`` are drawn
     independently (each without replacement, in random order; ``s = 1``: one subset, all
     features), from a generator seeded by the fit's seed and the tree index;
  3. the binary searches of all subsets run in lockstep: at each step every subset's current
     group is halved (left: its first half in the drawn order, right: the rest); the
     pseudo-features of all 2p halves (the sums of the halves' standardized columns) come from
     ONE product ``X' @ I`` with ``I`` the sparse (d, 2p) indicator of the halves; they are
     binned with the library's quantile rule (``gpufs.binning.BinMapper``) and histogrammed
     with the backend's histogram kernel on the tree's fixed-point gradients; each half's
     score is the best gain of any split of its pseudo-feature (``gpufs._gain.candidate``, the
     one gain formula); the better half is kept (the left one on a tie) until one feature is
     left per subset;
  4. the candidate set C is the features the searches end on.

Where the group tests run: once per tree, on the tree's root (all its rows, with the tree's
gradients), before the tree is grown; every node of the tree then searches exactly over Omega
and C with the usual penalty (lines 1 and 11-16 of Algorithm 2: a feature of C enters only if
its split beats Omega's best by the penalty; the level rule ``gpufs._level`` does exactly
that). This reads Algorithm 2 as the paper titles it, a tree-fitting subroutine: the
candidate set is the tree's, not re-drawn at each node, so the tree's histograms are built only
for Omega and C and nothing in the grower or the backends changes (the grower calls
``begin_tree`` when the penalty state has one).

Where group testing misses (the paper's caveat, measured in ``tests/test_group_testing.py``):
two relevant features of opposite effect in one group cancel in the pseudo-feature, so a
search whose group holds both is blind to them until a subset isolates one; Theorem 4.1's
number of subsets makes an isolating subset likely for every one of s relevant features, not
certain.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._device import namespace_of, sparse_module, to_host
from ._gain import candidate, parent_term
from .binning import BinMapper
from .penalties import PenaltyState

__all__ = ["GroupTestingPenaltyState", "draw_subsets", "group_test_candidates", "n_subsets",
           "standardize", "FIXED_POINT_BITS"]

#: Fractional bits of the standardized columns: sums of up to 2**29 columns stay exact.
FIXED_POINT_BITS = 24

_candidate = njit(inline="always")(candidate)
_parent_term = njit(inline="always")(parent_term)


def n_subsets(s: int, delta: float) -> int:
    """Theorem 4.1's number of random subsets.

    Parameters
    ----------
    s : int
        The desired number of features.
    delta : float in (0, 1)
        The allowed failure probability.

    Returns
    -------
    int
        ``ceil(e * s * log(s / delta))``; 1 for s = 1 (the one subset is every feature).
    """
    if s <= 1:
        return 1
    return int(math.ceil(math.e * s * math.log(s / delta)))


def draw_subsets(rng, n_features: int, s: int, delta: float) -> np.ndarray:
    """The random feature subsets of one tree's group tests.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_features : int
    s : int
        The desired number of features.
    delta : float in (0, 1)
        The allowed failure probability.

    Returns
    -------
    ndarray of shape (p, m), int64
        ``p = n_subsets(s, delta)`` subsets of ``m = max(1, n_features // s)`` features, each
        drawn without replacement in random order (row i is subset i, in the order its halves
        are taken).
    """
    if s <= 1:
        return np.arange(n_features, dtype=np.int64)[None, :]
    p, m = n_subsets(s, delta), max(1, n_features // s)
    return np.stack([rng.choice(n_features, m, replace=False) for _ in range(p)]).astype(np.int64)


def standardize(X):
    """Min-max standardized columns in fixed point, the pseudo-features' raw material.

    Each value is one subtraction, one division and one exact scaling, so numpy and cupy
    give the same integers.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float
        numpy or cupy; NaN marks a missing value.

    Returns
    -------
    ndarray of shape (n_samples, n_features), float64
        The integers ``rint((x - min) / (max - min) * 2**FIXED_POINT_BITS)`` (0 for missing
        values and constant columns), on X's device.
    """
    xp = namespace_of(X)
    X = xp.asarray(X, dtype=np.float64)
    nan = xp.isnan(X)
    lo = xp.nanmin(xp.where(nan, xp.inf, X), axis=0)
    hi = xp.nanmax(xp.where(nan, -xp.inf, X), axis=0)
    span = hi - lo
    ok = xp.isfinite(span) & (span > 0)
    Z = (X - xp.where(ok, lo, 0.0)[None, :]) / xp.where(ok, span, 1.0)[None, :]
    Z = xp.where(nan | ~ok[None, :], 0.0, Z)
    return xp.rint(Z * float(2 ** FIXED_POINT_BITS))


def _indicator(xp, d, groups):
    """Sparse (d, len(groups)) 0/1 matrix: column j marks the features of groups[j]."""
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    rows = np.concatenate(groups).astype(np.int64)
    cols = np.repeat(np.arange(len(groups), dtype=np.int64), sizes)
    data = np.ones(rows.shape[0], dtype=np.float64)
    return sparse_module(xp).csc_matrix((xp.asarray(data), (xp.asarray(rows), xp.asarray(cols))),
                             shape=(d, len(groups)))


@njit(cache=True)
def _best_gains(hist, n_bins, G_q, H_q, g_inv, h_inv, reg_lambda, min_child_weight, out):
    """Best split gain of each column of one node's histogram (n_cols, 256, 2) int64, over
    the thresholds 'bin <= b' for b < n_bins[c] - 1 (pseudo-features have no missing bin);
    -inf when no valid split."""
    G = G_q * g_inv
    H = H_q * h_inv
    parent = _parent_term(G, H, reg_lambda)
    for c in range(hist.shape[0]):
        best = -math.inf
        gl = np.int64(0)
        hl = np.int64(0)
        for b in range(n_bins[c] - 1):
            gl += hist[c, b, 0]
            hl += hist[c, b, 1]
            gain, score = _candidate(gl, hl, H_q, G, H, parent, g_inv, h_inv, reg_lambda, 1.0,
                                     min_child_weight, 0.0)
            if score > best:
                best = gain
        out[c] = best


def group_test_candidates(backend, Xq, gh, root_g_q, root_h_q, g_scale, h_scale, subsets,
                          max_bins=255, reg_lambda=1.0, min_child_weight=1e-3, trace=None):
    """The binary searches of all subsets at the root of one tree: the candidate features.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Xq : ndarray of shape (n_samples, n_features), float64
        ``standardize``'s result, on the backend's device.
    gh : ndarray of shape (n_samples, 2), int64
        Fixed-point (gradient, hessian) of the tree, on the backend's device.
    root_g_q, root_h_q : int
        The exact sums of ``gh``'s columns.
    g_scale, h_scale : float
        The power-of-two scales of ``gh``'s columns.
    subsets : ndarray of shape (p, m), int64
        ``draw_subsets``'s result.
    max_bins : int, default=255
        Value bins of each pseudo-feature.
    reg_lambda, min_child_weight : float, default=1.0 and 1e-3
        As in the tree's split search.
    trace : list or None, default=None
        When given, one (left scores, right scores) pair of float64 arrays of shape (p,) is
        appended per step.

    Returns
    -------
    ndarray of shape (p,), int64
        The feature each subset's search ended on (subset order; may repeat).
    """
    xp = backend.xp
    n, d = Xq.shape
    p, m = subsets.shape
    lo = np.zeros(p, np.int64)
    hi = np.full(p, m, np.int64)
    rows = xp.arange(n, dtype=np.int64)
    start, count = np.zeros(1, np.int64), np.array([n], np.int64)
    gains = np.empty(2 * p, np.float64)
    while m > 1 and (hi - lo > 1).any():
        mid = (lo + hi) // 2
        groups = []
        for i in range(p):
            groups.append(subsets[i, lo[i]:mid[i]])
            groups.append(subsets[i, mid[i]:hi[i]])
        P = Xq @ _indicator(xp, d, groups)      # (n, 2p) pseudo-features, exact integers
        P = xp.asarray(P.toarray() if hasattr(P, "toarray") else P)
        bm = BinMapper(max_bins, subsample=None).fit(P)
        Pb = bm.transform(xp.ascontiguousarray(P), backend)
        hist = to_host(backend.histograms(Pb, gh, rows, start, count, np.zeros(1, np.int64)))
        _best_gains(hist[0], bm.n_bins_, int(root_g_q), int(root_h_q), 1.0 / g_scale,
                    1.0 / h_scale, float(reg_lambda), float(min_child_weight), gains)
        left, right = gains[0::2], gains[1::2]
        if trace is not None:
            trace.append((left.copy(), right.copy()))
        keep_left = left >= right
        hi = np.where(keep_left, mid, hi)
        lo = np.where(keep_left, lo, mid)
    return subsets[np.arange(p), lo]


class GroupTestingPenaltyState(PenaltyState):
    """A :class:`gpufs.penalties.PenaltyState` whose trees search Omega and the group tests'
    candidates only.

    ``begin_tree`` (called by the grower before each tree) runs ``group_test_candidates`` on
    the tree's gradients; ``allowed_mask`` and ``candidate_features`` then admit Omega and
    the candidates (and, once a feature budget is spent, Omega only, as without group tests).

    Parameters
    ----------
    mu, costs, groups, scaling, n_features_to_select
        As for :class:`gpufs.penalties.PenaltyState`.
    Xq : ndarray of shape (n_samples, n_features), float64
        ``standardize`` of the training rows, on the fitting device.
    s : int >= 1
        The desired number of features (Theorem 4.1's s).
    delta : float in (0, 1)
        The allowed failure probability of the group tests.
    seed : int
        Seeds the subsets (with the tree index).
    max_bins : int, default=255
        Value bins of each pseudo-feature.
    reg_lambda, min_child_weight : float, default=1.0 and 1e-3
        As in the tree's split search.
    """

    def __init__(self, mu, costs, groups, scaling, n_features_to_select, *, Xq, s, delta,
                 seed, max_bins=255, reg_lambda=1.0, min_child_weight=1e-3):
        super().__init__(mu, costs, groups, scaling, n_features_to_select)
        self.Xq = Xq
        self.s = int(s)
        self.delta = float(delta)
        self.seed = int(seed)
        self.max_bins = int(max_bins)
        self.reg_lambda = float(reg_lambda)
        self.min_child_weight = float(min_child_weight)
        self.candidates = None
        self.candidates_by_tree: list[np.ndarray] = []

    def begin_tree(self, backend, gh, root_g_q, root_h_q, g_scale, h_scale, tree_index):
        """Draw this tree's subsets and run their searches on the tree's gradients.

        Parameters
        ----------
        backend : CPUBackend or GPUBackend
        gh : ndarray of shape (n_samples, 2), int64
            The tree's fixed-point (gradient, hessian), on the backend's device.
        root_g_q, root_h_q : int
            Their exact sums.
        g_scale, h_scale : float
            Their power-of-two scales.
        tree_index : int
            Seeds the tree's subsets.
        """
        if self.budget_left() == 0:       # only Omega may be split on: nothing to search
            self.candidates = np.zeros(0, np.int64)
        else:
            rng = np.random.default_rng([self.seed, int(tree_index)])
            subsets = draw_subsets(rng, self.Xq.shape[1], self.s, self.delta)
            found = group_test_candidates(backend, self.Xq, gh, root_g_q, root_h_q, g_scale,
                                          h_scale, subsets, self.max_bins, self.reg_lambda,
                                          self.min_child_weight)
            self.candidates = np.unique(found)
        self.candidates_by_tree.append(self.candidates)

    def allowed_mask(self) -> np.ndarray:
        """The features a split may use now.

        Returns
        -------
        ndarray of shape (n_features,), bool
            Omega and this tree's candidates (Omega only once the budget is spent).
        """
        base = super().allowed_mask()
        if self.candidates is None:
            return base
        mask = self.used.copy()
        mask[self.candidates] = True
        return base & mask
