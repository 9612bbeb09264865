"""The backend interface: what the engine asks of a device, and the records it exchanges.

Owns the :class:`Backend` protocol (what the engine calls) that ``backends.cpu.CPUBackend``
(numba on host numpy arrays) and ``backends.gpu.GPUBackend`` (numba.cuda kernels on cupy
arrays) implement with the same names, arguments, shapes, dtypes and results, bit for bit;
:class:`BackendProbes` (the kernels one at a time, which only tests call); and the records that
cross the interface: :class:`SplitParams` (a tree's split parameters), :class:`LevelResult`
(one level's decisions), :class:`SplitPlan` (the decisions as the rows' half of a level reads
them) and :class:`SplitInfo` (each slot's best split, ``find_splits``'). Nothing outside
``gpufs/backends/`` and ``gpufs/_device.py`` branches on the device. Shapes, dtypes and the
rest: ``docs/module_notes.rst``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from .._device import namespace_of, to_host
from ..rules import _categorical, _level
from ..rules._categorical import CAT_WORDS, MAX_CAT_TO_ONEHOT
from ..rules._gain import CUT_COLUMNS
from ..rules._hist_layout import HistLayout

__all__ = [
    "Backend",
    "BackendProbes",
    "LevelResult",
    "SplitInfo",
    "SplitParams",
    "SplitPlan",
    "best_splits",
    "categorical_slots",
    "kernel_for",
]


def categorical_slots(is_categorical, n_features):
    """Where each categorical feature sits among the categorical ones.

    Parameters
    ----------
    is_categorical : array-like of shape (n_features,), bool, or None
    n_features : int

    Returns
    -------
    cat_slot : ndarray of shape (n_features,), int32
        The index of each categorical feature among the categorical ones, -1 for the others
        (the search's per-slot scratch is indexed by it).
    n_cat : int
        How many features are categorical.
    """
    slot = np.full(n_features, -1, np.int32)
    if is_categorical is None:
        return slot, 0
    cat = np.flatnonzero(np.asarray(is_categorical, np.bool_))
    slot[cat] = np.arange(cat.shape[0], dtype=np.int32)
    return slot, int(cat.shape[0])


def kernel_for(kernels, objective):
    """The kernel of ``objective`` in a backend's table.

    Parameters
    ----------
    kernels : dict
        Objective name -> kernel.
    objective : str

    Returns
    -------
    object
        The kernel; a ValueError names the objectives there are kernels for otherwise.
    """
    try:
        return kernels[objective]
    except KeyError:
        raise ValueError(
            f"no kernel for objective {objective!r}; expected one of {sorted(kernels)}"
        ) from None


def largest_magnitude(a) -> float:
    """max |a| of an array of floats (numpy or cupy, any shape), NaN when a value is NaN.

    Parameters
    ----------
    a : ndarray, float64

    Returns
    -------
    float
    """
    if isinstance(a, np.ndarray):  # one compiled pass, no temporary
        from .cpu.objective import host_max_abs  # here: the CPU backend imports this module

        return host_max_abs(a)
    return float(namespace_of(a).abs(a).max())


def word_sums(a, f1, f2, low_scale) -> tuple[int, int]:
    """The int64 sums of the two words ``hi = rint(x)``, ``lo = rint((x - hi) * low_scale)``
    of ``x = (a * f1) * f2`` (``engine.quantize.exact_sum_words``); integer sums, so the same
    on every device and in any order.

    Parameters
    ----------
    a : ndarray, float64
        Finite values, numpy or cupy.
    f1, f2, low_scale : float
        Powers of two (``quantize._sum_factors``).

    Returns
    -------
    hi_sum, lo_sum : int
    """
    if isinstance(a, np.ndarray):  # one compiled pass (the array form: seven, 14x slower)
        from .cpu.objective import host_word_sums  # here: the CPU backend imports this module

        return host_word_sums(a, f1, f2, low_scale)
    xp = namespace_of(a)
    x = (a * f1) * f2
    hi = xp.rint(x)
    lo = xp.rint((x - hi) * low_scale)
    return int(hi.astype(np.int64).sum()), int(lo.astype(np.int64).sum())


def cut_matrix(cuts_padded, n_cuts):
    """The cut matrix (n_features, ``CUT_COLUMNS``) float64 that ``rules._gain.bin_of`` reads,
    checked: ``n_cuts[f]`` (n_features,) ascending cut points in row f, then +inf. The search
    reads the whole row (no count per feature), so a row padded otherwise would bin wrongly
    without a word; the check costs a pass over 254 numbers per feature."""
    cuts = np.ascontiguousarray(to_host(cuts_padded), dtype=np.float64)
    n_cuts = np.asarray(to_host(n_cuts), dtype=np.int64)
    d = n_cuts.shape[0]
    if cuts.shape != (d, CUT_COLUMNS):
        raise ValueError(f"the cut matrix must be ({d}, {CUT_COLUMNS}), got {cuts.shape}")
    used = np.arange(CUT_COLUMNS)[None, :] < n_cuts[:, None]
    if np.any(n_cuts < 0) or np.any(n_cuts > CUT_COLUMNS):
        raise ValueError(f"cut counts must be in [0, {CUT_COLUMNS}]")
    if not np.all(np.isposinf(cuts[~used])):
        raise ValueError("the cut matrix must be padded with +inf after each feature's cuts")
    if np.any(np.isnan(cuts[used])) or np.any((cuts[:, 1:] < cuts[:, :-1]) & used[:, 1:]):
        raise ValueError("each feature's cut points must be ascending numbers")
    return cuts


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
    cat_slot : ndarray of shape (n_features,), int32, or None, default=None
        Host: each categorical feature's index among the categorical ones, -1 for numeric
        features (``categorical_slots``); None: no categorical feature.
    n_cat : int, default=0
        How many features are categorical.
    max_cat_to_onehot : int, default=4
        Categorical features with at most this many candidate categories at a node are split
        one-vs-rest (``gpufs.rules._categorical``).
    cat_smooth, cat_l2, min_data_per_group : float, default=0.0
    max_cat_threshold : int, default=256
        LightGBM's guards of a split over sorted categories (``gpufs.rules._categorical``); the
        defaults guard nothing (the estimators pass theirs).
    layout : HistLayout or None, default=None
        Where each feature's bins sit in a node's histogram (``gpufs.rules._hist_layout``; the
        grower passes the bin mapper's); None: the compact layout of ``n_bins``.
    """

    n_bins: object
    g_scale: float
    h_scale: float
    reg_lambda: float
    gain_divisor: float
    min_child_weight: float
    min_split_gain: float
    cat_slot: np.ndarray | None = None
    n_cat: int = 0
    max_cat_to_onehot: int = MAX_CAT_TO_ONEHOT
    cat_smooth: float = 0.0
    cat_l2: float = 0.0
    min_data_per_group: float = 0.0
    max_cat_threshold: int = 256
    layout: HistLayout | None = None

    def hist_layout(self):
        """The histogram layout of the tree.

        Returns
        -------
        HistLayout
            ``layout``, or the compact layout of ``n_bins`` (made on first call and kept).
        """
        if self.layout is None:
            object.__setattr__(self, "layout", HistLayout.from_n_bins(to_host(self.n_bins)))
        return self.layout

    def categorical(self):
        """The categorical features.

        Returns
        -------
        cat_slot : ndarray of shape (n_features,), int32
            As the field (all -1 when there are none).
        n_cat : int
        """
        if self.cat_slot is None:
            return np.full(len(self.n_bins), -1, np.int32), 0
        return self.cat_slot, self.n_cat


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
    cat_bits : ndarray of shape (n_level_nodes, n_words), uint32, or None
        The category bitsets of categorical splits (n_words = 0 when no feature is
        categorical).
    """

    nodes: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    gain: np.ndarray
    admitted: np.ndarray
    cat_bits: np.ndarray | None = None


class SplitPlan(NamedTuple):
    """One level's decisions as the rows' half of the level step reads them
    (``Backend.decide_level`` -> ``Backend.advance_level``): a few numbers per split.

    Parameters
    ----------
    split_slot : ndarray of shape (n_split,), int64
        Each split's slot in the level, in node order.
    feature, bin : ndarray of shape (n_split,), int64
        Its feature and threshold bin (bin 0 for a categorical split).
    missing_left, is_cat : ndarray of shape (n_split,), bool
        Where its missing values go; whether it is categorical.
    cat_bits : ndarray of shape (n_split, n_words), uint32
        The categories a categorical split sends left (n_words 0 without categorical
        features).
    left_g, left_h : ndarray of shape (n_split,), int64
        Its left child's fixed-point sums.
    n_admitted : int
        Features admitted at this level.
    admitted_now : ndarray of shape (n_features,), bool
        Which.
    search_full : ndarray of shape (n_slots,), bool
        The slots searched over the paying features too (the node gain bounds).
    next_feats : ndarray of shape (n_features,), int32
        ``next_feats[:next_n_feats]``: the features the next level's histograms cover.
    next_n_feats : int
    next_full : bool
        Whether they are all the features.
    penalty : ndarray of shape (n_features,), float64
        The level's penalty vector (the children's gain bounds read it).
    split : SplitParams
        The tree's split parameters.
    """

    split_slot: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    is_cat: np.ndarray
    cat_bits: np.ndarray
    left_g: np.ndarray
    left_h: np.ndarray
    n_admitted: int
    admitted_now: np.ndarray
    search_full: np.ndarray
    next_feats: np.ndarray
    next_n_feats: int
    next_full: bool
    penalty: np.ndarray
    split: object


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
    cat_bits : ndarray of shape (n_slots, CAT_WORDS), uint32
        The categories sent left by a categorical split (whose ``bin`` is 0); zeros
        otherwise.
    """

    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    gain: np.ndarray
    score: np.ndarray
    g_left: np.ndarray
    h_left: np.ndarray
    cat_bits: np.ndarray


def best_splits(
    allowed, score, gain, bin, missing_left, g_left, h_left, cat_slot=None, cat_order=None
) -> SplitInfo:
    """The best feature of every slot from the per-(slot, feature) results of the search.

    The rule is the level step's (``gpufs.rules._level.best_over_features``): the first maximum of
    ``score`` over the ``allowed`` features, in increasing feature order.

    Parameters
    ----------
    allowed : ndarray of shape (n_features,), bool
        Features the search may pick.
    score, gain : ndarray of shape (n_slots, n_features), float64
        Each (slot, feature)'s best penalized gain (-inf: no valid candidate) and its gain.
    bin, missing_left, g_left, h_left : ndarray of shape (n_slots, n_features), int64
        The threshold bin, missing-left flag (0 or 1) and left sums of that candidate; for a
        categorical feature ``bin`` is the size of the left set.
    cat_slot : ndarray of shape (n_features,), int32, or None
        ``categorical_slots``; None: no categorical feature.
    cat_order : ndarray of shape (n_slots, n_cat, 256), uint8, or None
        The categorical scan's order per (slot, categorical feature): the first ``bin``
        entries of the chosen split are the bins sent left.

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
    out = SplitInfo(
        feature=np.full(k, -1, np.int32),
        bin=np.zeros(k, np.int32),
        missing_left=np.zeros(k, np.bool_),
        gain=np.zeros(k, np.float64),
        score=np.full(k, -np.inf),
        g_left=np.zeros(k, np.int64),
        h_left=np.zeros(k, np.int64),
        cat_bits=np.zeros((k, CAT_WORDS), np.uint32),
    )
    for s in range(k):
        f, sc, _, _ = _level.best_over_features(s, feats, d, allowed, none_used, score)
        if f >= 0:
            out.feature[s], out.score[s], out.gain[s] = f, sc, gain[s, f]
            out.bin[s], out.missing_left[s] = bin[s, f], missing_left[s, f] == 1
            out.g_left[s], out.h_left[s] = g_left[s, f], h_left[s, f]
            if cat_slot is not None and cat_slot[f] >= 0:
                for w in range(CAT_WORDS):
                    out.cat_bits[s, w] = _categorical.left_word(
                        cat_order[s, cat_slot[f]], int(out.bin[s]), w
                    )
                out.bin[s] = 0
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
    grow_levels : callable or None
        ``CPUBackend.grow_levels``: the levels of a tree up to the next admission into Omega
        in one call. None: the grower calls ``level_step`` once per level.
    """

    name: str
    xp: object
    grow_levels: object

    # --- arrays and the device -------------------------------------------------------------
    def owns(self, a) -> bool:
        """Whether ``a`` lives in this backend's memory, so its kernels read it without a copy.

        Parameters
        ----------
        a : object
            An array (or anything else).

        Returns
        -------
        bool
        """

    def to_device(self, a):
        """``a`` as an array of this backend (``a`` itself when it already is one).

        Parameters
        ----------
        a : array-like
            A host or device array.

        Returns
        -------
        ndarray
            In the backend's namespace ``xp``.
        """

    def synchronize(self) -> None:
        """Wait until the work queued on the device is done (so that a timer may stop)."""

    # --- binning and gradients -------------------------------------------------------------
    def bin_transform(self, X, cuts_padded, n_cuts):
        """Bins of float features: the number of a feature's cut points below each value.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float32 or float64
            NaN marks a missing value (bin 255).
        cuts_padded : ndarray of shape (n_features, 254), float64
            Each feature's sorted cut points, padded with +inf (``cut_matrix`` checks it).
        n_cuts : ndarray of shape (n_features,), int64
            Cut points of each feature.

        Returns
        -------
        Xb : ndarray of shape (n_samples, n_features), uint8
        """

    def round_gradients(self, objective, raw, y):
        """One boosting round's gradients, hessians and per-row losses, in one pass.

        Parameters
        ----------
        objective : {"squared_error", "logistic", "softmax"}
        raw : ndarray of shape (n_samples, n_outputs), float64
            The raw scores at the round's start.
        y : ndarray of shape (n_samples,)
            Targets (float64) or class codes (int).

        Returns
        -------
        g, h : ndarray of shape (n_outputs, n_samples), float64
            Row k belongs to output column k (``gpufs.rules._exactmath``'s formulas).
        loss_terms : ndarray of shape (n_samples,), float64
            The loss of ``raw`` per row (the loss after the previous round).
        """

    def gradients(self, objective, raw, y):
        """Per-row gradients and hessians of a logistic or softmax objective.

        Parameters
        ----------
        objective : {"logistic", "softmax"}
        raw : ndarray of shape (n_samples, n_outputs), float64
        y : ndarray of shape (n_samples,)
            0/1 targets (logistic) or class codes (softmax).

        Returns
        -------
        g, h : ndarray of shape (n_outputs, n_samples), float64
        """

    def loss_terms(self, objective, raw, y):
        """Per-row losses of ``objective`` at ``raw``.

        Parameters
        ----------
        objective : {"squared_error", "logistic", "softmax"}
        raw : ndarray of shape (n_samples, n_outputs), float64
        y : ndarray of shape (n_samples,)

        Returns
        -------
        loss : ndarray of shape (n_samples,), float64
        """

    def gradient_extremes(self, g, h, w, unit_hessian, divisor):
        """The largest magnitudes that fix one tree's fixed-point scales.

        Parameters
        ----------
        g, h : ndarray of shape (n_samples,), float64
            Gradients and hessians (``h`` unused with ``unit_hessian``).
        w : ndarray of shape (n_samples,), float64, or None
            Sample weights.
        unit_hessian : bool
            Every hessian is 1.
        divisor : bool
            Also the largest ``g^2 / h`` term of the A-GBM divisor.

        Returns
        -------
        max_g, max_h, max_q : float
            ``max |g w|``, ``max |h w|`` and ``max |(g w)^2 / (h w)|`` (0 when not asked).
        """

    def quantize_gradients(
        self, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales, divisor
    ):
        """One tree's fixed-point gradients and the exact sums of ``quantize.exact_sum``.

        Parameters
        ----------
        g, h, w, unit_hessian, divisor
            As for :meth:`gradient_extremes`.
        g_scale, h_scale : float
            The power-of-two scales of ``g w`` and ``h w``.
        e1s, e2s, low_scales : sequence of 3 floats
            The two-word sums' factors (``quantize._sum_factors``) of ``g w``, ``h w`` and the
            divisor's terms.

        Returns
        -------
        gh : ndarray of shape (n_samples, 2), int64
            ``rint(g w * g_scale)`` and ``rint(h w * h_scale)``, on the device.
        sums : ndarray of shape (8,), int64
            Host: the high and low words of the three exact sums, then the sums of ``gh``'s
            two columns.
        """

    # --- growing a tree --------------------------------------------------------------------
    def prepare_binned(self, Xb):
        """The binned matrix in the layouts the tree kernels read (prepare it once per fit).

        Parameters
        ----------
        Xb : ndarray of shape (n_samples, n_features), uint8, or a prepared matrix

        Returns
        -------
        object
            The backend's prepared binned matrix (``shape`` as ``Xb``'s).
        """

    def start_tree(
        self,
        data,
        gh,
        root_g,
        root_h,
        max_depth,
        feats,
        penalty=None,
        groups=None,
        split=None,
        layout=None,
    ):
        """Begin a tree: every row in the root, whose histogram is built.

        Parameters
        ----------
        data : ndarray of shape (n_samples, n_features), uint8, or a prepared matrix
            The binned training matrix (``prepare_binned``).
        gh : ndarray of shape (n_samples, 2), int64
            The tree's fixed-point (gradient, hessian) per row.
        root_g, root_h : int
            Their exact sums.
        max_depth : int
        feats : ndarray of shape (n_feats,), int32
            Sorted indices of the features whose histograms are built.
        penalty : ndarray of shape (n_features,), float64, or None
            The level's penalty vector; with ``groups`` and ``split``, it lets a backend skip
            the paying features' histograms at nodes whose gain bound cannot pay them (the CPU
            does; no decision depends on it).
        groups : ndarray of shape (n_features,), int32, or None
            Feature groups (a feature admitted makes its group free).
        split : SplitParams or None
        layout : HistLayout or None
            The tree's histogram layout (None: ``split.hist_layout()``, else the full one).

        Returns
        -------
        object
            The tree state that :meth:`level_step` advances.
        """

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Search, decide, partition and prepare the next level of a tree.

        Parameters
        ----------
        st : object
            The tree state of :meth:`start_tree`, advanced in place.
        penalty : ndarray of shape (n_features,), float64
            Subtracted from a split's score on each feature.
        allowed : ndarray of shape (n_features,), bool
            Features a split may use.
        used : ndarray of shape (n_features,), bool
            Omega at the level's start.
        budget : int
            New features the level may still admit (< 0: no budget).
        split : SplitParams
        build_next : bool
            Build the histograms of the next level (False on the last level).

        Returns
        -------
        LevelResult
        """

    def decide_level(self, st, penalty, allowed, used, budget, split):
        """The decisions of :meth:`level_step` from the level's histograms and the nodes'
        sums; reads no rows (a cluster's driver decides once on the summed histograms).

        Parameters
        ----------
        st : object
            A tree state (:meth:`start_tree`'s, or a driver's without rows); not advanced.
        penalty, allowed, used, budget, split
            As for :meth:`level_step`.

        Returns
        -------
        result : LevelResult
        plan : SplitPlan
            What :meth:`advance_level` needs, a few numbers per split.
        """

    def advance_level(self, st, plan, build_next):
        """The rows' half of :meth:`level_step`: partition the rows by ``plan``, set the
        children's segments and sums, and build the next level's histograms of these rows.

        Parameters
        ----------
        st : object
            The tree state of :meth:`start_tree`, advanced in place to the next level.
        plan : SplitPlan
            :meth:`decide_level`'s (of this process, or of a cluster's driver).
        build_next : bool
            Build the histograms of the next level (False on the last level).

        Returns
        -------
        left_count : ndarray of shape (n_split,), int64
            Host: the rows each split sent left.
        """

    def node_sums(self, st):
        """The fixed-point sums and row counts of every node of the tree.

        Parameters
        ----------
        st : object
            A tree state.

        Returns
        -------
        node_g, node_h, node_count : ndarray of shape (n_nodes,), int64
            Host arrays.
        """

    def update_raw(self, raw_column, st, leaf_nodes, leaf_values):
        """Add each leaf's value to the raw scores of its rows, from the partition.

        Parameters
        ----------
        raw_column : ndarray of shape (n_samples,), float64
            Updated in place (may be a column of a (n_samples, n_outputs) array).
        st : object
            The grown tree's state.
        leaf_nodes : ndarray of shape (n_leaves,), int64
        leaf_values : ndarray of shape (n_leaves,), float64
        """

    def group_test_steps(self):
        """GT-GBM's group tests on this device.

        Returns
        -------
        type
            The class that standardizes columns (``standardize(X, block)``) and computes and
            scores a search step's pseudo-features (``gpufs.engine.group_testing.CPUSteps`` or
            ``DeviceSteps``).
        """

    # --- prediction ------------------------------------------------------------------------
    def predict_binned(
        self, Xb, feature, bin_threshold, missing_left, value, tree_column, out, is_cat, cat_bits
    ):
        """Add every tree's leaf value to its output column, walking the trees on bins.

        Parameters
        ----------
        Xb : ndarray of shape (n_samples, n_features), uint8
        feature : ndarray of shape (n_trees, n_nodes), int32
        bin_threshold : ndarray of shape (n_trees, n_nodes), uint8
        missing_left : ndarray of shape (n_trees, n_nodes), bool
        value : ndarray of shape (n_trees, n_nodes), float64
        tree_column : ndarray of shape (n_trees,), int32
        out : ndarray of shape (n_samples, n_outputs), float64
            Updated in place, trees in order.
        is_cat : ndarray of shape (n_features,), bool
            The categorical features.
        cat_bits : ndarray of shape (n_trees, n_nodes, n_words), uint32
            Categorical splits' bitsets (n_words may be 0 without categorical features).

        Returns
        -------
        out : ndarray of shape (n_samples, n_outputs), float64
        """

    def predict_raw(
        self, X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits
    ):
        """As :meth:`predict_binned`, on raw float features (NaN = missing).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float32 or float64
        feature : ndarray of shape (n_trees, n_nodes), int32
        threshold : ndarray of shape (n_trees, n_nodes), float64
        missing_left : ndarray of shape (n_trees, n_nodes), bool
        value : ndarray of shape (n_trees, n_nodes), float64
        tree_column : ndarray of shape (n_trees,), int32
        out : ndarray of shape (n_samples, n_outputs), float64
        is_cat, cat_bits
            As for :meth:`predict_binned` (a categorical feature's raw values are its codes).

        Returns
        -------
        out : ndarray of shape (n_samples, n_outputs), float64
        """


@runtime_checkable
class BackendProbes(Protocol):
    """The level's kernels one at a time, as the level step runs them: what tests call to
    check a backend's pieces against the oracles (the engine never calls them;
    ``tests/test_backends.py`` checks that).
    """

    def task_table(self, seg_start, seg_count):
        """How the histogram and partition kernels cut row segments into tasks.

        Every segment is cut into near-equal runs of consecutive positions
        (``gpufs.rules._tasks.task_bounds``); how many is the device's rule
        (``gpufs.rules._tasks``).

        Parameters
        ----------
        seg_start, seg_count : ndarray of shape (n_segments,), int64
            First position and number of rows of each segment of the row-index array.

        Returns
        -------
        t_seg, t_lo, t_hi : ndarray of shape (n_tasks,), int64
            Host arrays: task t covers positions ``[t_lo[t], t_hi[t])`` of segment
            ``t_seg[t]``; each segment's tasks tile it in order.
        """

    def histograms(
        self, Xb, gh, rows, node_start, node_count, build_nodes, feats=None, layout=None
    ):
        """Histograms of some nodes.

        Parameters
        ----------
        Xb : ndarray of shape (n_samples, n_features), uint8
        gh : ndarray of shape (n_samples, 2), int64
        rows : ndarray of shape (n_samples,), int32
            Row indices, one contiguous segment per node.
        node_start, node_count : ndarray of shape (n_nodes,), int64
            Each node's segment.
        build_nodes : ndarray of shape (n_build,), int64
            The nodes to build.
        feats : ndarray of shape (n_feats,), int32, default=None
            The features to build (None: all).
        layout : HistLayout or None, default=None
            The histograms' layout (None: the full layout).

        Returns
        -------
        hist : ndarray of shape (n_build, layout.n_slots, 2), int64
            Or, without a layout, (n_build, n_features, 256, 2): the full layout's array.
        """

    def find_splits(self, hist, node_g, node_h, penalty, allowed, split):
        """The best split of every histogram slot, searched as the level step searches.

        Parameters
        ----------
        hist : ndarray of shape (n_slots, layout.n_slots, 2), int64
            In ``split``'s layout (``SplitParams.hist_layout``); or the dense
            (n_slots, n_features, 256, 2), the full layout.
        node_g, node_h : ndarray of shape (n_slots,), int64
            Fixed-point sums of each slot's node.
        penalty : ndarray of shape (n_features,), float64
        allowed : ndarray of shape (n_features,), bool
        split : SplitParams

        Returns
        -------
        SplitInfo
        """

    def partition(
        self,
        Xb,
        rows,
        node_start,
        node_count,
        split_nodes,
        split_feature,
        split_bin,
        missing_left,
        split_cat=None,
        split_bits=None,
    ):
        """Stable in-place partition of each split node's segment: left rows, then right rows,
        each in their original order.

        Parameters
        ----------
        Xb : ndarray of shape (n_samples, n_features), uint8
        rows : ndarray of shape (n_samples,), int32
            Rearranged in place.
        node_start, node_count : ndarray of shape (n_nodes,), int64
        split_nodes : ndarray of shape (n_split,), int64
        split_feature, split_bin : ndarray of shape (n_split,), int
        missing_left : ndarray of shape (n_split,), bool
        split_cat : ndarray of shape (n_split,), bool, or None
            Which splits are categorical (None: none).
        split_bits : ndarray of shape (n_split, CAT_WORDS), uint32, or None
            The categorical splits' bitsets of the categories sent left.

        Returns
        -------
        left_count : ndarray of shape (n_split,), int64
        """
