"""The backend interface: what the engine asks of a device, and the records it exchanges.

Owns the :class:`Backend` protocol that ``backends.cpu.CPUBackend`` (numba on host numpy
arrays) and ``backends.gpu.GPUBackend`` (numba.cuda kernels on cupy arrays) implement, with the
same method names, arguments, shapes, dtypes and results, bit for bit; and the small records
that cross the interface: :class:`SplitParams` (what a tree's split search needs besides the
histograms), :class:`LevelResult` (one level's decisions) and :class:`SplitInfo` (the best split
of each histogram slot, as ``find_splits`` returns it).

Everything outside ``gpufs/backends/`` and ``gpufs/_device.py`` talks to a device through this
interface only: the grower, boosting, the forests, binning, the objectives and the estimators
never branch on the device. Array arguments live on the backend's device (its ``xp``) unless a
method says "host".

Shapes and dtypes (``gpufs._types``): ``Xb`` (n_samples, n_features) uint8 bins (255 =
missing); ``gh`` (n_samples, 2) int64 fixed-point (gradient, hessian); ``rows`` (n_samples,)
int32 row indices, one contiguous segment per tree node; ``node_*`` (n_nodes,) int64 per node
of the complete tree; ``hist`` (n_slots, n_features, 256, 2) int64 sums of (g, h) per (slot,
feature, bin); ``raw`` (n_samples, n_outputs) float64 raw scores.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .. import _level

__all__ = ["Backend", "LevelResult", "SplitInfo", "SplitParams", "best_splits",
           "kernel_for"]


def kernel_for(kernels, objective):
    """The kernel of ``objective`` in a backend's table ``kernels`` (objective name ->
    kernel), or a ValueError naming the objectives there are kernels for."""
    try:
        return kernels[objective]
    except KeyError:
        raise ValueError(f"no kernel for objective {objective!r}; expected one of "
                         f"{sorted(kernels)}") from None


@dataclass(frozen=True)
class SplitParams:
    """What the split search of one tree needs besides the histograms.

    Parameters
    ----------
    n_bins : ndarray of shape (n_features,), int32
        Value bins per feature, on the backend's device.
    g_scale, h_scale : float
        The power-of-two fixed-point scales of the gradients and the hessians.
    reg_lambda : float
        L2 regularization of the leaf values.
    gain_divisor : float
        Every gain is divided by this (the root SSE with ``penalty_scaling="root_sse"``, else 1).
    min_child_weight : float
        Least hessian sum of a child.
    min_split_gain : float
        A node splits only when its penalized gain is strictly above this.
    """

    n_bins: object
    g_scale: float
    h_scale: float
    reg_lambda: float
    gain_divisor: float
    min_child_weight: float
    min_split_gain: float


@dataclass
class LevelResult:
    """One level's decisions, host arrays over the level's nodes, in node order.

    Parameters
    ----------
    nodes : ndarray of shape (n_level_nodes,), int64
        The level's nodes (indices in the complete tree).
    feature : ndarray of shape (n_level_nodes,), int32
        Split feature; -1 when the node is a leaf.
    bin : ndarray of shape (n_level_nodes,), int32
        Split bin: rows with ``bin <= bin`` go left.
    missing_left : ndarray of shape (n_level_nodes,), bool
        Where the missing values go.
    gain : ndarray of shape (n_level_nodes,), float64
        Gain of the split (before the penalty).
    admitted : ndarray of shape (n_admitted,), int64
        The features that entered Omega at this level, in order.
    """

    nodes: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    gain: np.ndarray
    admitted: np.ndarray


@dataclass(eq=False)
class SplitInfo:
    """The best split of each histogram slot, as the level step's search finds it.

    The struct-of-arrays counterpart of scikit-learn's ``SplitInfo`` (one entry per slot
    instead of one object per node). Host arrays of shape (n_slots,).

    Parameters
    ----------
    feature : ndarray of shape (n_slots,), int32
        Best feature over the allowed ones; -1 when the slot has no valid split.
    bin : ndarray of shape (n_slots,), int32
        Its threshold bin: ``bin <= bin`` goes left.
    missing_left : ndarray of shape (n_slots,), bool
        Whether the missing values go left.
    gain : ndarray of shape (n_slots,), float64
        The split's gain (divided by the gain divisor, before the penalty); 0 without a split.
    score : ndarray of shape (n_slots,), float64
        The penalized gain the search maximized; -inf without a split.
    g_left, h_left : ndarray of shape (n_slots,), int64
        Fixed-point gradient and hessian sums of the left child; 0 without a split.
    """

    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    gain: np.ndarray
    score: np.ndarray
    g_left: np.ndarray
    h_left: np.ndarray


def best_splits(allowed, score, gain, bin, missing_left, g_left, h_left) -> SplitInfo:
    """The best feature of every slot from the per-(slot, feature) results of the search.

    The rule is the level step's (``gpufs._level.best_over_features``): the first maximum of
    ``score`` over the ``allowed`` features, in increasing feature order.

    Parameters
    ----------
    allowed : ndarray of shape (n_features,), bool
        Features the search may pick.
    score, gain : ndarray of shape (n_slots, n_features), float64
        Each (slot, feature)'s best penalized gain (-inf: no valid candidate) and its gain.
    bin, missing_left, g_left, h_left : ndarray of shape (n_slots, n_features), int64
        The threshold bin, missing-left flag (0 or 1) and left sums of that candidate.

    Returns
    -------
    SplitInfo
        Host arrays of shape (n_slots,).
    """
    score = np.asarray(score)
    k, d = score.shape
    feats = np.arange(d, dtype=np.int32)
    allowed = np.asarray(allowed, np.bool_)
    none_used = np.zeros(d, np.bool_)
    out = SplitInfo(feature=np.full(k, -1, np.int32), bin=np.zeros(k, np.int32),
                    missing_left=np.zeros(k, np.bool_), gain=np.zeros(k, np.float64),
                    score=np.full(k, -np.inf), g_left=np.zeros(k, np.int64),
                    h_left=np.zeros(k, np.int64))
    for s in range(k):
        f, sc, _, _ = _level.best_over_features(s, feats, d, allowed, none_used, score)
        if f >= 0:
            out.feature[s], out.score[s], out.gain[s] = f, sc, gain[s, f]
            out.bin[s], out.missing_left[s] = bin[s, f], missing_left[s, f] == 1
            out.g_left[s], out.h_left[s] = g_left[s, f], h_left[s, f]
    return out


@runtime_checkable
class Backend(Protocol):
    """The interface both backends implement (see the module docstring).

    Attributes
    ----------
    name : {"cpu", "gpu"}
        The device the backend computes on.
    xp : module
        The array namespace of its arrays (numpy for the CPU; cupy on a GPU, numpy under the
        CUDA simulator).
    """

    name: str
    xp: object

    # --- arrays and the device -------------------------------------------------------------
    def owns(self, a) -> bool:
        """Whether array ``a`` lives in this backend's memory (so no copy is needed)."""

    def to_device(self, a):
        """Array ``a`` (host or device) as an array of this backend (``a`` itself when it
        already is one)."""

    def synchronize(self) -> None:
        """Wait until the work queued on the device is done (a timer may stop then)."""

    def task_table(self, seg_start, seg_count):
        """How the kernels cut row segments into tasks: host int64 arrays ``(t_seg, t_lo,
        t_hi)``, task t covering positions ``[t_lo[t], t_hi[t])`` of segment ``t_seg[t]``;
        each segment's tasks tile it in order."""

    # --- binning and gradients -------------------------------------------------------------
    def bin_transform(self, X, cuts_padded, n_cuts):
        """Float X (n, d) -> uint8 bins (n, d), with the cut matrix (d, 254) padded by +inf."""

    def round_gradients(self, objective, raw, y):
        """One pass for a boosting round: ``(g, h, loss_terms)``, g and h (n_outputs, n)
        float64, loss_terms (n,) float64 of ``raw``."""

    def gradients(self, objective, raw, y):
        """Per-row ``(g, h)`` of ``objective``, each (n_outputs, n) float64."""

    def loss_terms(self, objective, raw, y):
        """Per-row losses (n,) float64 of ``objective`` at ``raw``."""

    def gradient_extremes(self, g, h, w, unit_hessian, divisor):
        """``(max |g w|, max |h w|, max |q|)`` as host floats (``quantize.prepare_gradients``)."""

    def quantize_gradients(self, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s,
                           low_scales, divisor):
        """``(gh, sums)``: gh (n, 2) int64 fixed point on the device, sums (8,) int64 host."""

    # --- growing a tree --------------------------------------------------------------------
    def prepare_binned(self, Xb):
        """The binned matrix as the tree kernels read it; prepare it once per fit."""

    def start_tree(self, data, gh, root_g, root_h, max_depth, feats):
        """Begin a tree (every row in the root, the root's histogram built); returns the tree
        state ``level_step`` advances."""

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Search, decide, partition and prepare the next level; returns a
        :class:`LevelResult`."""

    def node_sums(self, st):
        """Host ``(node_g, node_h, node_count)`` of the tree, (n_nodes,) int64 each."""

    def update_raw(self, raw_column, st, leaf_nodes, leaf_values):
        """``raw_column[row] += value of the row's leaf``, in place, from the partition."""

    # --- the level's kernels one at a time (tests; the level step runs the same) -----------
    def histograms(self, Xb, gh, rows, node_start, node_count, build_nodes, feats=None):
        """Histograms of ``build_nodes``: (len(build_nodes), d, 256, 2) int64."""

    def find_splits(self, hist, node_g, node_h, penalty, allowed, split):
        """The best split of every histogram slot, a :class:`SplitInfo`."""

    def partition(self, Xb, rows, node_start, node_count, split_nodes, split_feature,
                  split_bin, missing_left):
        """Stable in-place partition of each split node's segment; left counts (n_split,)
        int64."""

    # --- prediction ------------------------------------------------------------------------
    def predict_binned(self, Xb, feature, bin_threshold, missing_left, value, tree_column,
                       out):
        """``out[i, tree_column[t]] += leaf value of tree t at row i`` from binned features."""

    def predict_raw(self, X, feature, threshold, missing_left, value, tree_column, out):
        """As ``predict_binned`` from raw float features (NaN = missing)."""
