"""The named tuples the compiled CPU level functions take, grouped by what they carry.

Owns the argument records of ``level.py``, ``split.py``, ``partition.py``, ``histogram.py``
and ``objective.py`` (as XGBoost passes ``EvaluateSplitInputs``): how a call runs (``Run``),
per-node sums (``NodeSums``), one level (``LevelState``), the rows and their buffers (``Rows``,
``HistSource``), a histogram build's segments and tasks (``Segments``, ``RowTasks``), the
gradients' fixed point (``FixedScales``), the split parameters (``SplitArgs``), the penalties
(``Selection``), the per-slot outputs (``LevelOut``), a level's decisions (``Decisions``), a
partition's splits (``SplitRule``), the split search's slots and results (``SearchSlots``,
``PerFeature``).
numba's nopython mode takes named tuples of arrays and scalars as they are; but a write
through a tuple's field inside a ``prange`` body is lost (numba 0.68): outputs that parallel
loops write stay plain arguments or are unpacked before the loop.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Run(NamedTuple):
    """How a compiled call runs: on the thread pool or not, and its task sizes."""

    parallel: bool
    n_threads: int
    rows_per_task: int
    parallel_min_work: int
    mode: int  # the histograms' loop (``histogram.use_columns``' modes)
    #: a pair of children whose parent has fewer rows than ``tiny`` times the layout's slots
    #: per feature gets no histograms: the search reads their rows (``level._is_tiny``); 0 off
    tiny: float = 0.0


class NodeSums(NamedTuple):
    """Per node of the complete tree, (n_nodes,) each: row count, fixed-point sums G and H
    (int64) and the sum of the rows' gain-bound terms (float64)."""

    count: np.ndarray
    g: np.ndarray
    h: np.ndarray
    s: np.ndarray


class LevelState(NamedTuple):
    """One level: its nodes (n_slots,) int64 in node order, their histograms (n_slots,
    layout.n_slots, 2) int64 over ``feats[:n_feats]`` (int32; ``full``: all features), and
    which slots cover the paying features too (n_slots,) bool."""

    active: np.ndarray
    hist: np.ndarray
    feats: np.ndarray
    n_feats: int
    full: bool
    slot_full: np.ndarray


class HistSource(NamedTuple):
    """What the histogram kernels read (``histogram.build_histograms``' ``src``): the binned
    matrix by row (n, d) and by column (d, n) uint8, the gradients ``gh`` (n, 2) int64, the
    rows (n,) int32, a gather scratch ``ghs`` (n, 2) int64, and the layout's part
    (``BinnedMatrix.hist_parts``): offsets (d + 1,) int64, most frequent slots (d,) int32,
    the sparse rows list (``histogram.sparse_rows``: ``sp_ptr`` (n + 1,) int64, ``sp_slot``
    (nnz,) int32, ``dense_f`` and ``sparse_f`` int32) and the offsets as int32."""

    by_row: np.ndarray
    by_column: np.ndarray
    gh: np.ndarray
    rows: np.ndarray
    ghs: np.ndarray
    offset: np.ndarray
    most_freq: np.ndarray
    sp_ptr: np.ndarray
    sp_slot: np.ndarray
    dense_f: np.ndarray
    sparse_f: np.ndarray
    offset32: np.ndarray


class Segments(NamedTuple):
    """The row segments a histogram build fills (``histogram.build_histograms``), (m,) int64
    each: first row's position in ``rows``, row count, output slot, and the segment's sums G
    and H (exact; the sparse features' most frequent slots are derived from them)."""

    start: np.ndarray
    count: np.ndarray
    slot: np.ndarray
    g: np.ndarray
    h: np.ndarray


class RowTasks(NamedTuple):
    """A row-wise build's tasks (``histogram.task_table``), (T,) int64 each: the output slot,
    the rows' positions [lo, hi), and the private copy the task fills (-1: the slot's own)."""

    slot: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    priv: np.ndarray


class FixedScales(NamedTuple):
    """The fixed point of ``quantize.prepare_gradients`` as its compiled pass reads it: the
    scales of g and h (float64), each sum's two exact-split factors and low-word scales (3,)
    float64 (g, h, q), and whether the bound terms q are summed."""

    g_scale: float
    h_scale: float
    e1s: np.ndarray
    e2s: np.ndarray
    low_scales: np.ndarray
    divisor: bool


class Rows(NamedTuple):
    """The rows: the histogram kernels' ``HistSource``, each node's segment start (n_nodes,)
    int64, the rows' bound terms (n_samples,) float64 (empty:
    no bounds), and the partition's scratch rows (int32) and go-left flags (uint8)."""

    src: HistSource
    node_start: np.ndarray
    q: np.ndarray
    scratch: np.ndarray
    go_left: np.ndarray


class SplitArgs(NamedTuple):
    """A tree's split parameters as the compiled search reads them (``split_args``)."""

    n_bins: np.ndarray  # (n_features,) int32
    g_scale: float
    h_scale: float
    reg_lambda: float
    gain_divisor: float
    min_child_weight: float
    min_split_gain: float
    cat_slot: np.ndarray  # (n_features,) int32, -1 for a numeric feature
    n_cat: int
    max_onehot: int
    cat_smooth: float  # LightGBM's guards of a sorted categorical split (``_categorical``)
    cat_l2: float
    min_data_per_group: float
    max_cat_threshold: int


class Selection(NamedTuple):
    """The level's penalties: per feature (n_features,) the penalty (float64), whether it may
    be split on (bool) and whether it is in Omega (bool); the admission budget (-1: none)."""

    penalty: np.ndarray
    allowed: np.ndarray
    used: np.ndarray
    budget: int


class LevelOut(NamedTuple):
    """Per slot (n_slots,): feature (int32, -1 leaf), bin (int32), missing-left (bool), gain
    (float64), category bitset (n_slots, W) uint32; the admitted features (n_features,) int64."""

    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    gain: np.ndarray
    cat_bits: np.ndarray
    admitted: np.ndarray


class TreeArrays(NamedTuple):
    """A tree's per-node decision arrays (``Tree``'s fields), (n_nodes,) each: split feature
    int32 (-1: leaf), bin uint8, missing-left bool, gain float64; bitsets (n_nodes, W)
    uint32."""

    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    gain: np.ndarray
    cat_bits: np.ndarray


class Decisions(NamedTuple):
    """One level's decisions, per split in node order (``backends.base.SplitPlan``'s first
    fields, in its order): slot, feature, bin (int64), missing-left, categorical (bool), bitset
    (n_split, W) uint32, left child's sums (int64); the features admitted here; the slots
    searched over the paying features; the features the next histograms cover."""

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


class SplitRule(NamedTuple):
    """The splits a partition applies, (n_split,) each: feature, bin (int64), missing-left,
    categorical (bool), and the bitsets (n_split, W) uint32."""

    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    is_cat: np.ndarray
    cat_bits: np.ndarray


_NO_BOOL = np.zeros(0, np.bool_)
_NO_COLUMNS = np.zeros((0, 0), np.uint8)
_NO_GH = np.zeros((0, 2), np.int64)
_NO_ROWS = np.zeros(0, np.int32)
_NO_START = np.zeros(0, np.int64)


class TinyRows(NamedTuple):
    """What the split search reads of a level's tiny nodes (``level._is_tiny``): the factor
    ``Run.tiny`` (0: no node is tiny), the binned matrix by column (d, n) uint8, the
    gradients (n, 2) int64, the rows (n,) int32 and each node's segment start (n_nodes,)
    int64."""

    tiny: float
    by_column: np.ndarray
    gh: np.ndarray
    rows: np.ndarray
    node_start: np.ndarray


class SearchSlots(NamedTuple):
    """The split search's slots: histograms (n_slots, layout.n_slots, 2) int64, the layout's
    offsets (n_features + 1,), each slot's sums G, H (n_slots,) int64, whether it is searched
    over the paying features (n_slots,) bool, the categorical scans' order scratch
    (n_slots, n_cat, 256) uint8, and each slot's row count (n_slots,) int64 (0: unknown; the
    categorical guards then count hessian).

    Tiny slots (``rowwise`` (n_slots,) bool; empty: none) have no histogram: their bins are
    summed from their rows, ``rows[seg_start[k] : seg_start[k] + slot_n[k]]`` (int32, (n_slots,)
    int64), of the binned matrix by column ``by_column`` (d, n) uint8 and the gradients ``gh``
    (n, 2) int64 (``split._row_bins``)."""

    hist: np.ndarray
    off: np.ndarray
    slot_g: np.ndarray
    slot_h: np.ndarray
    slot_full: np.ndarray
    cat_order: np.ndarray
    slot_n: np.ndarray
    rowwise: np.ndarray = _NO_BOOL
    by_column: np.ndarray = _NO_COLUMNS
    gh: np.ndarray = _NO_GH
    rows: np.ndarray = _NO_ROWS
    seg_start: np.ndarray = _NO_START


class PerFeature(NamedTuple):
    """The split search's result per (slot, feature), (n_slots, n_features) each: score and
    gain (float64), bin, missing-left, left G and left H (int64)."""

    score: np.ndarray
    gain: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    g_left: np.ndarray
    h_left: np.ndarray


def split_args(split):
    """``SplitArgs`` of a ``SplitParams``, each field cast to the one type the kernels are
    compiled for."""
    cat_slot, n_cat = split.categorical()
    return SplitArgs(
        np.asarray(split.n_bins, np.int32),
        float(split.g_scale),
        float(split.h_scale),
        float(split.reg_lambda),
        float(split.gain_divisor),
        float(split.min_child_weight),
        float(split.min_split_gain),
        np.asarray(cat_slot, np.int32),
        int(n_cat),
        int(split.max_cat_to_onehot),
        float(split.cat_smooth),
        float(split.cat_l2),
        float(split.min_data_per_group),
        int(split.max_cat_threshold),
    )
