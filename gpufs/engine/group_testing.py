"""GT-GBM: candidate features by group testing and binary search (``split_search=
"group_testing"``).

Owns Algorithm 2 of Han, Rao, Sorokina and Subbian, "Scalable Feature Selection for
(Multitask) Gradient Boosted Trees" (AISTATS 2020, Section 4, Theorem 4.1) in histogram form:
the standardized columns, the random subsets, the binary searches over them, and the callable
(:class:`GroupTestSearch`) that the grower asks for each tree's candidate set C (the
``candidate_search`` argument of ``boosting.fit_boosting``).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from .._device import to_host
from .._types import STANDARDIZED_MAX
from ..backends.cpu.group_testing import (  # noqa: F401
    CPUSteps,
    best_gains,
    concat_groups,
    pseudo_feature_bins,
    pseudo_feature_extremes,
    pseudo_feature_histograms,
    standardize_extremes,
    standardize_with,
)

__all__ = [
    "FirstStep",
    "GroupTestParams",
    "GroupTestSearch",
    "best_gains",
    "draw_subsets",
    "group_test_candidates",
    "isolation_probability",
    "n_search_steps",
    "n_subsets",
    "pseudo_feature_bins",
    "pseudo_feature_extremes",
    "pseudo_feature_histograms",
    "pseudo_features_per_tree",
    "standardize",
    "standardize_extremes",
    "standardize_with",
    "standardized_values",
    "subset_size",
    "STANDARDIZED_MAX",
]


# --- the sizes of Theorem 4.1 --------------------------------------------------------------


def n_subsets(s: int, delta: float) -> int:
    """Theorem 4.1's number of random subsets, ``ceil(e * s * log(s / delta))`` (1 for
    ``s = 1``: the one subset is every feature).

    Parameters
    ----------
    s : int >= 1
        The desired number of features.
    delta : float in (0, 1)

    Returns
    -------
    int
    """
    if s <= 1:
        return 1
    return int(math.ceil(math.e * s * math.log(s / delta)))


def subset_size(n_features: int, s: int) -> int:
    """Features per subset: ``floor(n_features / s)``, at least 1 (every feature for s = 1).

    Parameters
    ----------
    n_features, s : int

    Returns
    -------
    int
    """
    return max(1, int(n_features) // max(1, int(s)))


def n_search_steps(m: int) -> int:
    """Halvings of a binary search over ``m`` features: ``ceil(log2(m))`` (0 for m = 1).

    Parameters
    ----------
    m : int

    Returns
    -------
    int
    """
    return int(math.ceil(math.log2(m))) if m > 1 else 0


def pseudo_features_per_tree(n_features: int, s: int, delta: float) -> int:
    """Pseudo-features scored per tree: at most 2 per subset per step.

    Compare with ``n_features``, what the exact search scores per node: group testing pays off
    only when this is much smaller (small ``s``, large ``n_features``).

    Parameters
    ----------
    n_features : int
    s : int
        The desired number of features.
    delta : float in (0, 1)

    Returns
    -------
    int
    """
    m = subset_size(n_features, s)
    return 2 * n_subsets(s, delta) * n_search_steps(m)


def isolation_probability(n_features: int, s: int, p: int, m: int) -> float:
    """Probability that for every one of ``s`` given features some subset among ``p``
    independent uniform subsets of ``m`` features holds that feature and none of the others.

    Theorem 4.1 says ``p >= e s log(s / delta)`` subsets of size ``n_features / s`` make this
    at least ``1 - delta``. Exact value: a subset isolates a given feature with probability
    ``q = m/d * C(d - s, m - 1) / C(d - 1, m - 1)``; it isolates at most one feature, so by
    inclusion-exclusion P(all isolated) = sum_k (-1)^k C(s, k) (1 - k q)^p.

    Parameters
    ----------
    n_features, s, p, m : int

    Returns
    -------
    float
    """
    d = int(n_features)
    if m > d or s > d:
        raise ValueError("need m <= n_features and s <= n_features")
    # C(d - s, m - 1) / C(d - 1, m - 1) = prod_{j < m-1} (d - s - j) / (d - 1 - j)
    ratio = 1.0
    for j in range(m - 1):
        ratio *= max(0, d - s - j) / (d - 1 - j)
    q = m / d * ratio
    return float(sum((-1) ** k * math.comb(s, k) * (1.0 - k * q) ** p for k in range(s + 1)))


def draw_subsets(rng, n_features: int, s: int, delta: float) -> np.ndarray:
    """The random subsets of one tree.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_features, s : int >= 1
    delta : float in (0, 1)

    Returns
    -------
    int64 (p, m): p = ``n_subsets(s, delta)`` subsets of m = ``subset_size(n_features, s)``
    features, each uniform without replacement and in random order (row i is subset i, in
    the order its halves are taken); independent of each other.
    """
    p, m = n_subsets(s, delta), subset_size(n_features, s)
    if s <= 1:
        return rng.permutation(n_features).astype(np.int64)[None, :]
    return np.stack([rng.choice(n_features, m, replace=False) for _ in range(p)]).astype(np.int64)


# --- standardized columns ------------------------------------------------------------------


def standardize(X, backend, block: int = 64):
    """The min-max standardized columns of X in the layout ``backend``'s group tests read.

    Each value is ``rint((x - lo) / (hi - lo) * 255)`` with lo and hi the column's minimum and
    maximum (0 for missing values and constant columns): one subtraction, one division, one
    multiplication and a rounding, in float64, so numpy, numba and cupy give the same integers.

    Parameters
    ----------
    X : float (n_samples, n_features), numpy or cupy (the backend's device)
    backend : CPUBackend or GPUBackend
    block : int
        Columns converted to float64 at a time on the GPU (bounds the temporary memory).

    Returns
    -------
    CPU: uint8 (n_features, n_samples), a column per row (the CPU kernels add whole columns).
    GPU: float32 (n_samples, n_features), integer-valued (the operand of one matrix product
    per search step; float32 holds every partial sum exactly while it is below 2**24, i.e. for
    groups of up to 65,793 features).
    """
    return backend.group_test_steps().standardize(X, block)


def standardized_values(Q) -> np.ndarray:
    """The standardized values on the host, from either layout of ``standardize``.

    Parameters
    ----------
    Q : ndarray
        ``standardize``'s result (CPU or GPU layout).

    Returns
    -------
    ndarray of shape (n_samples, n_features), uint8
    """
    Q = to_host(Q)
    return np.ascontiguousarray(Q.T) if Q.dtype == np.uint8 else Q.astype(np.uint8)


class FirstStep:
    """The first step of every search, computed once (``gt_subsets="per_fit"``): the
    pseudo-features of both halves of every subset and their bins depend on the data and the
    subsets only, not on the gradients (the paper's precomputation, Section 4.2).

    Parameters
    ----------
    backend, Q : as for ``group_test_candidates``
    subsets : int64 (p, m), m >= 2
    max_bins : int

    Attributes
    ----------
    sums : the 2p pseudo-features (left halves, then right halves), in the backend's layout
    bins : uint8, their bins, in the same layout
    """

    def __init__(self, backend, Q, subsets, max_bins):
        p, m = subsets.shape
        steps = backend.group_test_steps()(backend, Q, None, p, (int(max_bins),))
        every, zero, mid, end = (
            np.arange(p),
            np.zeros(p, np.int64),
            np.full(p, m // 2, np.int64),
            np.full(p, m, np.int64),
        )
        self.sums = steps.sums(subsets, concat_groups((every, zero, mid), (every, mid, end)))
        self.bins = steps.bins(self.sums)


class GroupTestParams(NamedTuple):
    """How a group test bins and scores its pseudo-features.

    Parameters
    ----------
    max_bins : int in [2, 255], default=255
        Equal-width bins of each pseudo-feature.
    reg_lambda : float, default=1.0
        As in the tree's split search.
    min_child_weight : float, default=1e-3
        As in the tree's split search.
    """

    max_bins: int = 255
    reg_lambda: float = 1.0
    min_child_weight: float = 1e-3


def group_test_candidates(
    backend,
    Q,
    gh,
    G_q,
    H_q,
    g_scale,
    h_scale,
    subsets,
    *,
    params=GroupTestParams(),
    first=None,
    trace=None,
):
    """The binary searches of all subsets over the rows of ``gh``: where each ends.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Q : ``standardize``'s result for ``backend`` (the same rows as ``gh``, in order)
    gh : int64 (n, 2) fixed-point (gradient, hessian) on the backend's device
    G_q, H_q : int, the exact sums of ``gh``'s columns
    g_scale, h_scale : float, the power-of-two scales of ``gh``'s columns
    subsets : int64 (p, m), ``draw_subsets``'s result
    params : GroupTestParams, default=GroupTestParams()
        The bins and the scoring of the pseudo-features.
    first : FirstStep or None
        The first step's pseudo-features and bins, computed once for these subsets (the
        same numbers this function would compute).
    trace : list or None
        When given, one dict per step is appended: ``active`` (the subsets searched),
        ``left`` and ``right`` (their groups), ``gain_left`` and ``gain_right`` (float64).

    Returns
    -------
    int64 (p,): the feature each subset's search ended on (subset order; may repeat).
    """
    p, m = subsets.shape
    scan = (
        int(params.max_bins),
        int(G_q),
        int(H_q),
        1.0 / float(g_scale),
        1.0 / float(h_scale),
        float(params.reg_lambda),
        float(params.min_child_weight),
    )
    steps = backend.group_test_steps()(backend, Q, gh, p, scan)
    lo = np.zeros(p, np.int64)
    hi = np.full(p, m, np.int64)
    active = np.arange(p) if m > 1 else np.zeros(0, np.int64)
    is_first = True
    while active.size:
        mid = (lo + hi) // 2
        left = (active, lo[active], mid[active])
        right = (active, mid[active], hi[active])
        gl, gr = steps.step(
            subsets, active, left, right if is_first else None, first if is_first else None
        )
        keep_left = gl >= gr  # ties keep the left half
        steps.keep(active, keep_left)
        if trace is not None:
            trace.append(
                dict(
                    active=active.copy(),
                    left=[subsets[i, a:b] for i, a, b in zip(*left)],
                    right=[subsets[i, a:b] for i, a, b in zip(*right)],
                    gain_left=gl.copy(),
                    gain_right=gr.copy(),
                )
            )
        hi[active] = np.where(keep_left, mid[active], hi[active])
        lo[active] = np.where(keep_left, lo[active], mid[active])
        active = active[hi[active] - lo[active] > 1]
        is_first = False
    return subsets[np.arange(p), lo]


class GroupTestSearch:
    """The candidate search of a GT-GBM fit: called by the penalty state before each tree.

    Parameters
    ----------
    Q : ``standardize(X, backend)`` of the training rows that have a positive weight
    s : int >= 1, the desired number of features (Theorem 4.1's s)
    delta : float in (0, 1)
    seed : int, seeds the subsets
    max_bins : int in [2, 255], bins of each pseudo-feature
    rows : int64 array or None
        The rows of the tree's gradients that ``Q`` holds (those of positive weight; rows of
        weight 0 are not training data, as for the cut points), on the fitting device; None:
        all rows.
    subsets : {"per_tree", "per_fit"}
        "per_tree": every tree draws its own subsets, from (seed, tree index) (Algorithm 2,
        line 2, inside the tree-fitting subroutine). "per_fit": one draw, from (seed,), for
        every tree, and the first step of every search (both halves of every subset: two
        thirds of the summing and a ninth of the binning) computed once (the paper's
        precomputation, Section 4.2 and Table 1).

    Attributes
    ----------
    seconds : float
        Wall time spent in the group tests so far (``per_fit``'s precomputation included).
    """

    def __init__(self, Q, s, delta, seed, max_bins=255, rows=None, subsets="per_tree"):
        if subsets not in ("per_tree", "per_fit"):
            raise ValueError(f"subsets must be 'per_tree' or 'per_fit', got {subsets!r}.")
        self.Q = Q
        self.s = int(s)
        self.delta = float(delta)
        self.seed = int(seed)
        self.max_bins = int(max_bins)
        self.rows = rows
        self.per_fit = subsets == "per_fit"
        self.seconds = 0.0
        self._first = None

    @property
    def n_features(self) -> int:
        """The number of features the search runs over."""
        return int(self.Q.shape[0] if self.Q.dtype == np.uint8 else self.Q.shape[1])

    def subsets(self, tree_index: int) -> np.ndarray:
        """The subsets of a tree.

        Parameters
        ----------
        tree_index : int

        Returns
        -------
        ndarray of shape (p, m), int64
            ``draw_subsets`` seeded by (seed, tree), or by (seed,) for every tree with
            ``per_fit``.
        """
        key = [self.seed] if self.per_fit else [self.seed, int(tree_index)]
        return draw_subsets(np.random.default_rng(key), self.n_features, self.s, self.delta)

    def __call__(self, backend, gh, G_q, H_q, g_scale, h_scale, tree_params, tree_index):
        """int64 sorted distinct candidate features of tree ``tree_index``.

        ``gh`` (n, 2) int64 and its sums ``G_q``, ``H_q`` are the tree's fixed-point
        gradients over every row (weights applied); ``tree_params`` a
        ``grower.TreeParams``."""
        t0 = time.perf_counter()
        if self.rows is not None:
            gh = gh[self.rows]  # rows of weight 0 hold (0, 0): the sums do not change
        subsets = self.subsets(tree_index)
        first = None
        if self.per_fit and subsets.shape[1] > 1:
            if self._first is None:
                self._first = FirstStep(backend, self.Q, subsets, self.max_bins)
            first = self._first
        found = group_test_candidates(
            backend,
            self.Q,
            gh,
            G_q,
            H_q,
            g_scale,
            h_scale,
            subsets,
            params=GroupTestParams(
                self.max_bins, tree_params.reg_lambda, tree_params.min_child_weight
            ),
            first=first,
        )
        self.seconds += time.perf_counter() - t0
        return np.unique(found)
