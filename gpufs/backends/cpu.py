"""CPU backend: the tree engine's numba kernels on host numpy arrays.

Owns the CPU implementation of the backend interface (``gpufs.backends.base.Backend``): the
level step (one compiled call per tree level), the fused gradient preparation, binning,
prediction and the raw-score update. The GPU backend implements the same interface with the
same shapes, dtypes and results, bit for bit.

Shapes and dtypes (see ``gpufs._types``):
  Xb        (n_samples, n_features) uint8, C order; bin 255 = missing
  gh        (n_samples, 2) int64 fixed-point (gradient, hessian) of every row, packed so one
            cache line brings both
  rows      (n_samples,) int32 row indices, one contiguous segment per tree node
  node_*    (n_nodes,) int64 per node of the complete tree: segment start and count, and the
            fixed-point sums G, H
  hist      (n_slots, layout.n_slots, 2) int64 sums of (g, h) per histogram slot, in the
            tree's ``HistLayout`` (feature f at slots offset[f] .. offset[f + 1] - 1); node
            slots are the nodes of one level, in node order. Filled by ``_cpu_hist``
  raw       (n_samples, n_outputs) float64 raw scores

Parallelism. Every parallel loop runs over *tasks* (a run of rows of one node, a (node,
feature) pair, ...) and comes in two drivers compiled from one body: ``_*_par`` (``prange``,
numba's threading layer, see ``gpufs._threading``) and ``_*_ser`` (a plain loop). The level
step calls the parallel drivers only when the level has enough work to pay for waking threads
(``PARALLEL_MIN_WORK``): small fits never touch the thread pool, so they neither pay its
wake-up cost nor wait for a descheduled worker on a busy machine. Tasks are several per thread
and the chunk size is one task (``gpufs._threading``), so a thread that the OS parks does not
hold the level back: the others take its tasks.

Exactness: histograms are int64 sums (any order, any chunking gives the same bits); the split
scan (``_gain.make_scan_feature``), the decisions (``gpufs._level``), the partition rule
(``_gain.goes_left``) and the gradients (``gpufs._exactmath``) are the shared functions the
GPU compiles too.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange
from numba.core import types
from numba.extending import intrinsic

from .. import _categorical, _exactmath, _gain, _level, _threading
from .._categorical import CAT_WORDS
from .._device import to_host
from .._hist_layout import split_input, tree_layout
from .._types import HIST_DTYPE, N_HIST_BINS, ROW_INDEX_DTYPE, X_BINNED_DTYPE
from ._cpu_hist import (AUTO, COLUMNS, ROWS, ROWS_PER_TASK, TASKS_PER_THREAD,
                        build_histograms, row_cost, sparse_rows, subtract_par, subtract_ser,
                        task_table)
from .base import LevelResult, best_splits, kernel_for

_threading.configure()

_candidate = njit(inline="always")(_gain.candidate)
_scan_feature = njit(inline="always")(_gain.make_scan_feature(_candidate))
_leaf_value = njit(inline="always")(_gain.leaf_value)
_scan_categorical = njit(inline="always")(_categorical.make_scan_categorical(_candidate))
_left_word = njit(inline="always")(_categorical.left_word)
_split_goes_left = njit(inline="always")(_categorical.split_goes_left)
_split_goes_left_raw = njit(inline="always")(_categorical.split_goes_left_raw)
_bin_of = njit(inline="always")(_gain.bin_of)
_leaf_binned = njit(inline="always")(_gain.make_leaf_of(_split_goes_left))
_leaf_raw = njit(inline="always")(_gain.make_leaf_of(_split_goes_left_raw))
_best_over_features = njit(inline="always")(_level.best_over_features)
_decide_level = njit(cache=True)(_level.decide_level)

@intrinsic
def _f64_bits(typingctx, x):
    """The IEEE 754 bits of a float64 as an int64 (an LLVM bitcast: no conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def _bits_f64(typingctx, b):
    """The float64 with the IEEE 754 bits of an int64 (an LLVM bitcast)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


# The objectives' exact math (``gpufs._exactmath``): plain * and +, which numba's CPU compiler
# never contracts into FMAs (no fastmath), so each rounds as IEEE 754 says, like the GPU's
# dmul_rn / dadd_rn.
_em = _exactmath.make_exact_math(njit(inline="always")(_exactmath.py_mul),
                                 njit(inline="always")(_exactmath.py_add),
                                 njit(error_model="numpy", inline="always"),
                                 njit(inline="always")(lambda x: _f64_bits(x)),
                                 njit(inline="always")(lambda b: _bits_f64(b)))
_logistic_grad_hess = _em.logistic_grad_hess
_logistic_grad_hess_loss = _em.logistic_grad_hess_loss
_logistic_loss = _em.logistic_loss
_squared_error_loss = _em.squared_error_loss
_softmax_grad_hess_row = _em.softmax_grad_hess_row
_softmax_grad_hess_loss_row = _em.softmax_grad_hess_loss_row
_softmax_loss_row = _em.softmax_loss_row

#: Row x feature updates below which a level runs on the calling thread only.
PARALLEL_MIN_WORK = 1 << 18
#: Rows per task of the per-row kernels (gradients, losses, binning, prediction). The fit runs
#: with numba's chunk size at one task (``gpufs._threading``), so a loop over single rows
#: would make every row a task: a million scheduler round trips per pass.
ROW_BLOCK = 4096


# --- split search ---------------------------------------------------------------------------

@njit(cache=True)
def _search_range(a, b, hist, off, slot_g, slot_h, n_bins, penalty, wanted, slot_full, feats,
                  n_feats, g_scale, h_scale, reg_lambda, gain_divisor, min_child_weight,
                  cat_slot, max_onehot, cat_order, pf_score, pf_gain, pf_bin, pf_ml, pf_gl,
                  pf_hl):
    """The best split of the (slot, feature) pairs a .. b - 1 (pair p: slot p // n_feats,
    feature feats[p % n_feats]) into pf_* (n_slots, n_features).

    A called function with the loop inside (not a pair body inlined into each driver's loop,
    which numba compiled 5x slower: 230 against 45 ns per pair on the wide table), slot by
    slot: a slot's sums, (G, H) as float64 and output rows are read once, not per pair
    (8,000 x 1,500: 44 against 33 ns per pair)."""
    # 1 / scale is exact for a power of two (see ``_gain.candidate``)
    g_inv = 1.0 / g_scale
    h_inv = 1.0 / h_scale
    if b <= a:
        return
    k_first = a // n_feats
    k_last = (b - 1) // n_feats
    for k in range(k_first, k_last + 1):
        G_q = slot_g[k]
        H_q = slot_h[k]
        G = G_q / g_scale
        H = H_q / h_scale
        full_k = slot_full[k]
        i_lo = a - k * n_feats if k == k_first else 0
        i_hi = b - k * n_feats if k == k_last else n_feats
        s_score = pf_score[k]
        s_gain = pf_gain[k]
        s_bin = pf_bin[k]
        s_ml = pf_ml[k]
        s_gl = pf_gl[k]
        s_hl = pf_hl[k]
        for i in range(i_lo, i_hi):
            f = feats[i]
            pen = penalty[f]
            # A slot that is not ``slot_full`` has histograms of the free features only
            # (penalty 0): no feature that pays can score there (``_gain_bound``), and its
            # bins were never built.
            if not wanted[f] or (not full_k and pen > 0.0):
                s_score[f] = -np.inf
                continue
            c = cat_slot[f]
            lo = off[f]
            last = off[f + 1] - 1
            if c >= 0:  # categorical: ``_categorical``'s scan; pf_bin holds the left set's size
                score, gain, bn, ml, gl, hl = _scan_categorical(
                    hist, k, lo, last, n_bins[f], G_q, H_q, G, H, g_inv, h_inv, reg_lambda,
                    gain_divisor, min_child_weight, pen, max_onehot, cat_order[k, c])
            else:
                score, gain, bn, ml, gl, hl = _scan_feature(
                    hist, k, lo, last, n_bins[f], G_q, H_q, G, H, g_inv, h_inv, reg_lambda,
                    gain_divisor, min_child_weight, pen)
            s_score[f] = score
            s_gain[f] = gain
            s_bin[f] = bn
            s_ml[f] = ml
            s_gl[f] = gl
            s_hl[f] = hl


#: (slot, feature) pairs per task of the parallel split search, at least; tasks at most.
SEARCH_PAIRS_PER_TASK = 64
SEARCH_TASKS_MAX = 64
#: Histogram slots (nodes x layout slots) of a level from which its split search runs on the
#: thread pool: about 10 us of scanning per 1,000 slots, against a wake-up of the pool.
SEARCH_PARALLEL_MIN_SLOTS = 1 << 13


@njit(parallel=True, cache=True)
def _search_par(hist, off, slot_g, slot_h, n_bins, penalty, wanted, slot_full, feats,
                n_feats, g_scale, h_scale, reg_lambda, gain_divisor, min_child_weight, cat_slot,
                max_onehot, cat_order, pf_score, pf_gain, pf_bin, pf_ml, pf_gl, pf_hl):
    total = hist.shape[0] * n_feats
    n_tasks = max(1, min(SEARCH_TASKS_MAX, total // SEARCH_PAIRS_PER_TASK))
    for t in prange(n_tasks):
        _search_range((t * total) // n_tasks, ((t + 1) * total) // n_tasks, hist, off, slot_g,
                      slot_h, n_bins, penalty, wanted, slot_full, feats, n_feats, g_scale,
                      h_scale, reg_lambda, gain_divisor, min_child_weight, cat_slot, max_onehot,
                      cat_order, pf_score, pf_gain, pf_bin, pf_ml, pf_gl, pf_hl)


@njit(cache=True)
def _search_ser(hist, off, slot_g, slot_h, n_bins, penalty, wanted, slot_full, feats,
                n_feats, g_scale, h_scale, reg_lambda, gain_divisor, min_child_weight, cat_slot,
                max_onehot, cat_order, pf_score, pf_gain, pf_bin, pf_ml, pf_gl, pf_hl):
    _search_range(0, hist.shape[0] * n_feats, hist, off, slot_g, slot_h, n_bins, penalty,
                  wanted, slot_full, feats, n_feats, g_scale, h_scale, reg_lambda, gain_divisor,
                  min_child_weight, cat_slot, max_onehot, cat_order, pf_score, pf_gain, pf_bin,
                  pf_ml, pf_gl, pf_hl)


# --- partition ------------------------------------------------------------------------------

@njit(inline="always")
def _part_count_task(t, Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, sc, sbits, go_left,
                     t_left, q, t_q):
    s = t_seg[t]
    col = Xb_cols[sf[s]]  # the split feature's bins, contiguous: one byte per row read
    thr = sb[s]
    ml = sm[s]
    cat = sc[s]
    bits = sbits[s]
    nl = 0
    if q.shape[0] == 0:
        for j in range(t_lo[t], t_hi[t]):
            if _split_goes_left(col[rows[j]], thr, ml, cat, bits):
                go_left[j] = 1
                nl += 1
            else:
                go_left[j] = 0
    else:  # also the children's sums of the rows' bound terms (``_gain_bound_pays``)
        ql = 0.0
        qr = 0.0
        for j in range(t_lo[t], t_hi[t]):
            r = rows[j]
            if _split_goes_left(col[r], thr, ml, cat, bits):
                go_left[j] = 1
                nl += 1
                ql += q[r]
            else:
                go_left[j] = 0
                qr += q[r]
        t_q[t, 0] = ql
        t_q[t, 1] = qr
    t_left[t] = nl


@njit(parallel=True, cache=True)
def _part_count_par(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, sc, sbits, go_left, t_left,
                    q, t_q):
    for t in prange(t_seg.shape[0]):
        _part_count_task(t, Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, sc, sbits, go_left,
                         t_left, q, t_q)


@njit(cache=True)
def _part_count_ser(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, sc, sbits, go_left, t_left,
                    q, t_q):
    for t in range(t_seg.shape[0]):
        _part_count_task(t, Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, sc, sbits, go_left,
                         t_left, q, t_q)


@njit(inline="always")
def _part_scatter_task(t, rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out):
    """A task writes its left rows after the earlier tasks' lefts and its right rows after all
    the segment's lefts and the earlier tasks' rights: a stable partition for any chunking."""
    lo = t_lo[t]
    hi = t_hi[t]
    a = left_dst[t]
    b = right_dst[t]
    for j in range(lo, hi):
        if go_left[j]:
            out[a] = rows[j]
            a += 1
        else:
            out[b] = rows[j]
            b += 1


@njit(parallel=True, cache=True)
def _part_scatter_par(rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out):
    for t in prange(t_seg.shape[0]):
        _part_scatter_task(t, rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out)
    for t in prange(t_seg.shape[0]):
        for j in range(t_lo[t], t_hi[t]):
            rows[j] = out[j]


@njit(cache=True)
def _part_scatter_ser(rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out):
    for t in range(t_seg.shape[0]):
        _part_scatter_task(t, rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out)
    for t in range(t_seg.shape[0]):
        for j in range(t_lo[t], t_hi[t]):
            rows[j] = out[j]


@njit(cache=True)
def _partition(parallel, n_threads, rows_per_task, Xb_cols, rows, scratch, go_left, seg_start,
               seg_count, sf, sb, sm, sc, sbits, q, seg_q):
    """Stable in-place partition of each segment by its split; returns left counts (m,).

    Reads the column-major copy of the bins (``Xb_cols`` (n_features, n_samples) uint8): a
    row-major read would fetch a cache line per row for one byte (measured 9x slower at
    1,000,000 x 100). With bound terms ``q`` (n_samples,) float64 (empty: none), also writes
    each segment's (left, right) sums of them into ``seg_q`` (m, 2)."""
    n_tasks_max = TASKS_PER_THREAD * n_threads if parallel else 1
    t_seg, t_lo, t_hi, _ = task_table(seg_start, seg_count, n_tasks_max, rows_per_task)
    T = t_seg.shape[0]
    t_left = np.empty(T, np.int64)
    t_q = np.zeros((T, 2), np.float64)
    if parallel:
        _part_count_par(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, sc, sbits, go_left,
                        t_left, q, t_q)
    else:
        _part_count_ser(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, sc, sbits, go_left,
                        t_left, q, t_q)
    m = seg_start.shape[0]
    left = np.zeros(m, np.int64)
    for t in range(T):
        left[t_seg[t]] += t_left[t]
    if q.shape[0] > 0:
        seg_q[:m] = 0.0
        for t in range(T):
            seg_q[t_seg[t], 0] += t_q[t, 0]
            seg_q[t_seg[t], 1] += t_q[t, 1]
    left_dst = np.empty(T, np.int64)
    right_dst = np.empty(T, np.int64)
    lefts_before = 0
    prev = -1
    for t in range(T):
        s = t_seg[t]
        if s != prev:
            lefts_before = 0
            prev = s
        left_dst[t] = seg_start[s] + lefts_before
        # rights before this task = rows before it in the segment - lefts before it
        right_dst[t] = seg_start[s] + left[s] + (t_lo[t] - seg_start[s] - lefts_before)
        lefts_before += t_left[t]
    if parallel:
        _part_scatter_par(rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, scratch)
    else:
        _part_scatter_ser(rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, scratch)
    return left


# --- the level step -------------------------------------------------------------------------

@njit(inline="always")
def _gain_bound_pays(s_node, g_q, h_q, g_inv, h_inv, reg_lambda, n_rows, gain_divisor,
                     pay_min, min_split_gain):
    """Whether a feature that pays ``pay_min`` could split a node whose rows' bound terms
    sum to ``s_node`` (``q_i = g_i^2 / h_i`` of the fixed-point values, ``_bound_term``) and
    whose sums are (``g_q``, ``h_q``) in fixed point.

    Every split of the node gains at most B = (s_node - G^2 / (H + lambda)) / 2: with
    G_L = sum g_i over the left rows and H_L likewise, G_L^2 / (H_L + lambda) <= G_L^2 / H_L
    <= sum_L g_i^2 / h_i (Cauchy-Schwarz), the same on the right. B never grows from a node
    to its children (the parent's B adds the child's, the sibling's and a between-children
    term that is >= 0), so a node that cannot pay has no descendant that can. The factors
    cover the rounding of the float sum of n_rows terms, of G^2 / (H + lambda) and of the
    gains themselves, so the test errs only on the side of building; NaN or inf always
    builds.
    """
    g = g_q * g_inv
    parent = (g * g) / (h_q * h_inv + reg_lambda)
    bound = (s_node * (1.0 + 1e-9 + n_rows * 4.5e-16) - parent * (1.0 - 1e-12)) * 0.5
    return not (bound / gain_divisor - pay_min <= min_split_gain)


@njit(inline="always")
def _paying_min(penalty, feats, n_feats, free):
    """The smallest penalty of the listed features that are not ``free`` (inf: none pays)."""
    m = np.inf
    for i in range(n_feats):
        f = feats[i]
        if not free[f] and penalty[f] < m:
            m = penalty[f]
    return m


@njit(cache=True)
def _level_step(parallel, n_threads, rows_per_task, parallel_min_work, mode, src, scratch,
                go_left, priv, node_start, node_count, node_g, node_h, active, hist, n_bins,
                penalty, allowed, used,
                feats, n_feats, full, budget, g_scale, h_scale, reg_lambda, gain_divisor,
                min_child_weight, min_split_gain, build_next, out_feature, out_bin, out_ml,
                out_gain, admitted, cat_slot, n_cat, max_onehot, out_bits, q, node_s,
                slot_full, groups):
    """One tree level: search -> decide -> partition -> children's sums -> next histograms.

    ``src`` is the tuple of ``_cpu_hist.build_histograms`` (the binned matrix by row and by
    column, the gradients, the rows, the layout's offsets, ...) and ``mode`` its row-wise /
    column-wise choice. ``active`` (n_slots,) int64: the level's nodes in node order; ``hist``
    their histograms, (n_slots, n_slots_of_layout, 2) int64 in the layout of ``src``'s
    offsets (valid for ``feats[:n_feats]``; for a slot with ``slot_full`` False only for the
    free features, those whose penalty is 0). Writes the decision of every slot into ``out_*``
    (feature -1: the node is a leaf) and the admitted features into ``admitted``.
    Categorical features (``cat_slot[f] >= 0``, ``n_cat`` of them) are searched by
    ``_categorical``'s scan; their splits' bitsets go to ``out_bits`` (n_slots, CAT_WORDS)
    uint32 (zeros on other slots) and their ``out_bin`` is 0.

    Histograms only where they can matter. With bound terms ``q`` (n_samples,) float64 (empty:
    none), ``node_s`` holds each node's sum of them; a node whose gain bound
    (``_gain_bound_pays``) cannot pay the cheapest penalty of a feature outside Omega can only
    split on free features, so its children's histograms are built over those alone. Skipping
    a feature that cannot score above ``min_split_gain`` changes no decision: it can never be
    the node's choice, and a best split it would have displaced was a leaf anyway.
    ``groups`` (n_features,) int32: a feature admitted here makes its group free next level.

    Returns (n_admitted, next_active, next_hist, next_feats, next_n_feats, next_full, priv,
    next_slot_full): the next level's nodes (children of the splits, left then right, in node
    order), their histograms (the smaller child of each split built, its sibling by exact
    subtraction; an empty array when ``build_next`` is false), the features they cover, and
    which of them cover the paying features too. Once the budget is spent only Omega's
    features can ever be split on, so the next histograms cover only them.

    The two halves are separate functions, compiled into this one call, so that a cluster can
    run them apart (``gpufs.dask``): ``_level_decide`` reads only the histograms and the
    nodes' sums, ``_level_advance`` only the decisions and the rows.
    """
    par_search = n_threads > 1 and active.shape[0] * hist.shape[1] >= SEARCH_PARALLEL_MIN_SLOTS
    (n_adm, search_full, admitted_now, split_slot, sf, sb, sm, sc, sbits, sgl, shl, next_feats,
     next_n_feats, next_full) = _level_decide(
        par_search, src[0].shape[0], node_g, node_h, node_s, active, hist, src[5], n_bins,
        penalty, allowed, used, feats, n_feats, full, budget, g_scale, h_scale, reg_lambda,
        gain_divisor, min_child_weight, min_split_gain, q.shape[0] > 0, slot_full, cat_slot,
        n_cat, max_onehot, out_feature, out_bin, out_ml, out_gain, out_bits, admitted)
    next_active, nxt, _, priv, next_slot_full = _level_advance(
        parallel, n_threads, rows_per_task, parallel_min_work, mode, src, scratch, go_left,
        priv, node_start, node_count, node_g, node_h, active, hist, penalty, g_scale,
        h_scale, reg_lambda, gain_divisor, min_split_gain, split_slot, sf, sb, sm, sc, sbits,
        sgl, shl, n_adm, admitted_now, search_full, next_feats, next_n_feats, next_full,
        build_next, q, node_s, groups)
    return n_adm, next_active, nxt, next_feats, next_n_feats, next_full, priv, next_slot_full


@njit(cache=True)
def _level_decide(parallel, n, node_g, node_h, node_s, active, hist, off, n_bins, penalty,
                  allowed, used, feats, n_feats, full, budget, g_scale, h_scale, reg_lambda,
                  gain_divisor, min_child_weight, min_split_gain, bounded, slot_full, cat_slot,
                  n_cat, max_onehot, out_feature, out_bin, out_ml, out_gain, out_bits,
                  admitted):
    """The first half of ``_level_step``: search and decide. Reads no rows.

    ``parallel``: whether the search runs on the thread pool. ``n`` is the tree's row count
    (the rounding allowance of ``_gain_bound_pays``);
    ``bounded`` whether the tree keeps gain bounds (``node_s``). Writes ``out_*`` and
    ``admitted`` as ``_level_step`` does. Returns (n_admitted, search_full, admitted_now,
    split_slot, sf, sb, sm, sc, sbits, sgl, shl, next_feats, next_n_feats, next_full):
    which slots were searched over the paying features too (n_slots,) bool; the features
    admitted at this level (n_features,) bool; for each split, in node order, its slot,
    feature and bin (int64; bin 0 for a categorical split), missing-left flag, whether it is
    categorical and its bitset (n_split, out_bits' width) uint32, and its left child's
    fixed-point sums (int64); and the features the next level's histograms cover.
    """
    n_slots = active.shape[0]
    d = n_bins.shape[0]
    slot_g = np.empty(n_slots, np.int64)
    slot_h = np.empty(n_slots, np.int64)
    for k in range(n_slots):
        slot_g[k] = node_g[active[k]]
        slot_h[k] = node_h[active[k]]
    wanted = np.empty(d, np.bool_)
    free = np.empty(d, np.bool_)
    for f in range(d):
        wanted[f] = allowed[f] or used[f]
        free[f] = penalty[f] == 0.0
    g_inv = 1.0 / g_scale
    h_inv = 1.0 / h_scale
    search_full = slot_full.copy()
    if bounded:
        pay_min = _paying_min(penalty, feats, n_feats, free)
        for k in range(n_slots):
            node = active[k]
            if search_full[k]:
                search_full[k] = _gain_bound_pays(node_s[node], node_g[node], node_h[node],
                                                  g_inv, h_inv, reg_lambda, n, gain_divisor,
                                                  pay_min, min_split_gain)
    pf_score = np.empty((n_slots, d), np.float64)
    pf_gain = np.empty((n_slots, d), np.float64)
    pf_bin = np.empty((n_slots, d), np.int64)
    pf_ml = np.empty((n_slots, d), np.int64)
    pf_gl = np.empty((n_slots, d), np.int64)
    pf_hl = np.empty((n_slots, d), np.int64)
    # the categorical scan's order of each (slot, categorical feature): the left set first
    cat_order = np.empty((n_slots, n_cat, N_HIST_BINS), np.uint8)
    if parallel:
        _search_par(hist, off, slot_g, slot_h, n_bins, penalty, wanted, search_full, feats,
                    n_feats, g_scale, h_scale, reg_lambda, gain_divisor, min_child_weight,
                    cat_slot, max_onehot, cat_order, pf_score, pf_gain, pf_bin, pf_ml, pf_gl,
                    pf_hl)
    else:
        _search_ser(hist, off, slot_g, slot_h, n_bins, penalty, wanted, search_full, feats,
                    n_feats, g_scale, h_scale, reg_lambda, gain_divisor, min_child_weight,
                    cat_slot, max_onehot, cat_order, pf_score, pf_gain, pf_bin, pf_ml, pf_gl,
                    pf_hl)
    best_f = np.empty(n_slots, np.int64)
    best_s = np.empty(n_slots, np.float64)
    fb_f = np.empty(n_slots, np.int64)
    fb_s = np.empty(n_slots, np.float64)
    for k in range(n_slots):
        best_f[k], best_s[k], fb_f[k], fb_s[k] = _best_over_features(
            k, feats, n_feats, allowed, used, pf_score)
    choice = np.empty(n_slots, np.int64)
    admitted_now = np.zeros(d, np.bool_)
    n_adm = _decide_level(n_slots, best_f, best_s, fb_f, fb_s, used, admitted_now, budget,
                          min_split_gain, choice, admitted)

    n_split = 0
    for k in range(n_slots):
        if choice[k] != _level.LEAF:
            n_split += 1
    split_slot = np.empty(n_split, np.int64)
    sf = np.empty(n_split, np.int64)
    sb = np.empty(n_split, np.int64)
    sm = np.empty(n_split, np.bool_)
    sc = np.zeros(n_split, np.bool_)
    sbits = np.zeros((n_split, out_bits.shape[1]), np.uint32)
    sgl = np.empty(n_split, np.int64)
    shl = np.empty(n_split, np.int64)
    i = 0
    for k in range(n_slots):
        if choice[k] == _level.LEAF:
            out_feature[k] = -1
            out_bin[k] = 0
            out_ml[k] = False
            out_gain[k] = 0.0
            out_bits[k, :] = 0
            continue
        f = best_f[k] if choice[k] == _level.TAKE_BEST else fb_f[k]
        out_feature[k] = f
        out_bin[k] = pf_bin[k, f]
        out_ml[k] = pf_ml[k, f] == 1
        out_gain[k] = pf_gain[k, f]
        out_bits[k, :] = 0
        split_slot[i] = k
        sf[i] = f
        sb[i] = pf_bin[k, f]
        sm[i] = pf_ml[k, f] == 1
        c = cat_slot[f]
        if c >= 0:
            for w in range(out_bits.shape[1]):
                out_bits[k, w] = _left_word(cat_order[k, c], pf_bin[k, f], w)
                sbits[i, w] = out_bits[k, w]
            sc[i] = True
            sb[i] = 0
            out_bin[k] = 0
        sgl[i] = pf_gl[k, f]
        shl[i] = pf_hl[k, f]
        i += 1

    # The next level's features: all of today's, or only Omega's once the budget is spent.
    next_feats = feats
    next_n_feats = n_feats
    next_full = full
    if budget >= 0 and n_adm >= budget:
        next_feats = np.empty(d, feats.dtype)
        next_n_feats = 0
        for f in range(d):
            if used[f] or admitted_now[f]:
                next_feats[next_n_feats] = f
                next_n_feats += 1
        next_full = next_n_feats == d
    return (n_adm, search_full, admitted_now, split_slot, sf, sb, sm, sc, sbits, sgl, shl,
            next_feats, next_n_feats, next_full)


@njit(cache=True)
def _level_advance(parallel, n_threads, rows_per_task, parallel_min_work, mode, src, scratch,
                   go_left, priv, node_start, node_count, node_g, node_h, active, hist,
                   penalty, g_scale, h_scale, reg_lambda, gain_divisor, min_split_gain,
                   split_slot, sf, sb, sm, sc, sbits, sgl, shl, n_adm, admitted_now,
                   search_full, next_feats, next_n_feats, next_full, build_next, q, node_s,
                   groups):
    """The second half of ``_level_step``: partition the rows by ``_level_decide``'s
    decisions (and sum the children's bound terms when ``q`` is not empty), set the
    children's segments and sums, decide which children's histograms cover the paying
    features, and build the next level's histograms over ``next_feats`` (the smaller child of
    each split, by this process's row counts, and its sibling by exact subtraction from
    ``hist``; both children of a pair whose parent covered the free features only while a
    feature was admitted at this level).

    Returns (next_active, next_hist, left, priv, next_slot_full): ``left`` (n_split,) int64
    the rows each split sent left; the others as ``_level_step``'s.
    """
    Xb_cols = src[1]
    rows = src[3]
    off = src[5]
    n = src[0].shape[0]
    d = src[0].shape[1]
    n_hist = off[d]
    bounded = q.shape[0] > 0
    n_split = split_slot.shape[0]
    seg_start = np.empty(n_split, np.int64)
    seg_count = np.empty(n_split, np.int64)
    for i in range(n_split):
        seg_start[i] = node_start[active[split_slot[i]]]
        seg_count[i] = node_count[active[split_slot[i]]]
    free = np.empty(d, np.bool_)
    for f in range(d):
        free[f] = penalty[f] == 0.0
    g_inv = 1.0 / g_scale
    h_inv = 1.0 / h_scale

    seg_q = np.empty((n_split, 2), np.float64)
    left = _partition(parallel, n_threads, rows_per_task, Xb_cols, rows, scratch, go_left,
                      seg_start, seg_count, sf, sb, sm, sc, sbits, q, seg_q)
    next_active = np.empty(2 * n_split, np.int64)
    for i in range(n_split):
        k = split_slot[i]
        node = active[k]
        lc = left[i]
        L = 2 * node + 1
        R = 2 * node + 2
        node_start[L] = node_start[node]
        node_count[L] = lc
        node_start[R] = node_start[node] + lc
        node_count[R] = node_count[node] - lc
        node_g[L] = sgl[i]
        node_h[L] = shl[i]
        node_g[R] = node_g[node] - sgl[i]
        node_h[R] = node_h[node] - shl[i]
        if bounded:
            node_s[L] = seg_q[i, 0]
            node_s[R] = seg_q[i, 1]
        next_active[2 * i] = L
        next_active[2 * i + 1] = R

    # Which children need the paying features: a pair is built over all ``next_feats`` when
    # either child's bound can pay the next level's cheapest penalty, else over the features
    # free next level (free now, or in the group of a feature admitted now).
    next_slot_full = np.ones(2 * n_split, np.bool_)
    if bounded and _paying_min(penalty, next_feats, next_n_feats, free) < np.inf:
        n_groups = 0
        for f in range(d):
            n_groups = max(n_groups, groups[f] + 1)
        group_free = np.zeros(n_groups, np.bool_)
        for f in range(d):
            if admitted_now[f]:
                group_free[groups[f]] = True
        for f in range(d):
            if group_free[groups[f]]:
                free[f] = True
        pay_next = _paying_min(penalty, next_feats, next_n_feats, free)
        for i in range(n_split):
            need = search_full[split_slot[i]]
            if need:
                need = False
                for c in range(2):
                    ch = next_active[2 * i + c]
                    need = need or _gain_bound_pays(node_s[ch], node_g[ch], node_h[ch], g_inv,
                                                    h_inv, reg_lambda, n, gain_divisor,
                                                    pay_next, min_split_gain)
            next_slot_full[2 * i] = need
            next_slot_full[2 * i + 1] = need

    if not build_next or n_split == 0:
        return (next_active, np.empty((0, n_hist, 2), HIST_DTYPE), left, priv,
                next_slot_full)
    nxt = np.empty((2 * n_split, n_hist, 2), HIST_DTYPE)
    # Two groups of pairs: those built over every next feature, those over the free ones.
    free_feats = np.empty(next_n_feats, next_feats.dtype)
    n_free = 0
    for j in range(next_n_feats):
        if free[next_feats[j]]:
            free_feats[n_free] = next_feats[j]
            n_free += 1
    for group in range(2):
        want_full = group == 0
        m = 0
        for i in range(n_split):
            if next_slot_full[2 * i] == want_full:
                m += 1
        if m == 0:
            continue
        g_feats = next_feats if want_full else free_feats
        g_n = next_n_feats if want_full else n_free
        g_all = next_full if want_full else n_free == d
        # A parent built over the free features only lacks those admitted at this level
        # (free from the next level on): then both children are built, none subtracted.
        direct = (not want_full) and n_adm > 0
        n_built = 2 * m if direct else m
        b_start = np.empty(n_built, np.int64)
        b_count = np.empty(n_built, np.int64)
        b_slot = np.empty(n_built, np.int64)
        b_g = np.empty(n_built, np.int64)
        b_h = np.empty(n_built, np.int64)
        s_slot = np.empty(m, np.int64)
        p_slot = np.empty(m, np.int64)
        work = 0
        j = 0
        for i in range(n_split):
            if next_slot_full[2 * i] != want_full:
                continue
            L = next_active[2 * i]
            R = next_active[2 * i + 1]
            p_slot[j] = split_slot[i]
            if direct:
                for c in range(2):
                    ch = next_active[2 * i + c]
                    b_start[2 * j + c] = node_start[ch]
                    b_count[2 * j + c] = node_count[ch]
                    b_slot[2 * j + c] = 2 * i + c
                    b_g[2 * j + c] = node_g[ch]
                    b_h[2 * j + c] = node_h[ch]
                    work += node_count[ch]
            else:
                small, big = (0, 1) if node_count[L] <= node_count[R] else (1, 0)
                ch = next_active[2 * i + small]
                b_start[j] = node_start[ch]
                b_count[j] = node_count[ch]
                b_slot[j] = 2 * i + small
                s_slot[j] = 2 * i + big
                b_g[j] = node_g[ch]
                b_h[j] = node_h[ch]
                work += b_count[j]
            j += 1
        if g_n == 0:
            continue
        par_next = parallel and work * row_cost(src, g_n, g_all) >= parallel_min_work
        priv = build_histograms(par_next, n_threads, rows_per_task, mode, src, b_start,
                                b_count, b_slot, b_g, b_h, g_feats, g_n, g_all, nxt, priv)
        if direct:
            continue
        if parallel:
            subtract_par(g_feats, g_n, off, p_slot, b_slot, s_slot, hist, nxt)
        else:
            subtract_ser(g_feats, g_n, off, p_slot, b_slot, s_slot, hist, nxt)
    return next_active, nxt, left, priv, next_slot_full


@njit(inline="always")
def _bound_term(g_q, h_q, g_inv, h_inv):
    """q_i = g_i^2 / h_i of one row's fixed-point values (what the histograms sum): 0 for a
    zero gradient, inf for a nonzero gradient on a zero hessian (no bound then)."""
    if g_q == 0:
        return 0.0
    if h_q <= 0:
        return np.inf
    g = g_q * g_inv
    return (g * g) / (h_q * h_inv)


@njit(inline="always")
def _bound_chunk(c, n_chunks, gh, g_inv, h_inv, out, sums):
    n = gh.shape[0]
    acc = 0.0
    for i in range((c * n) // n_chunks, ((c + 1) * n) // n_chunks):
        out[i] = _bound_term(gh[i, 0], gh[i, 1], g_inv, h_inv)
        acc += out[i]
    sums[c] = acc


@njit(parallel=True, cache=True)
def _bound_terms_par(gh, g_inv, h_inv, out, sums):
    for c in prange(sums.shape[0]):
        _bound_chunk(c, sums.shape[0], gh, g_inv, h_inv, out, sums)


@njit(cache=True)
def _bound_terms_ser(gh, g_inv, h_inv, out, sums):
    for c in range(sums.shape[0]):
        _bound_chunk(c, sums.shape[0], gh, g_inv, h_inv, out, sums)


@njit(cache=True)
def _root_histogram(parallel, n_threads, rows_per_task, mode, src, root_g, root_h, feats,
                    n_feats, full, priv):
    """The root's histogram (1, n_slots, 2) int64 over the listed features (every row)."""
    n = src[0].shape[0]
    d = src[0].shape[1]
    out = np.empty((1, src[5][d], 2), HIST_DTYPE)
    priv = build_histograms(parallel, n_threads, rows_per_task, mode, src, np.zeros(1, np.int64),
                            np.full(1, n, np.int64), np.zeros(1, np.int64),
                            np.full(1, root_g, np.int64), np.full(1, root_h, np.int64), feats,
                            n_feats, full, out, priv)
    return out, priv


# --- gradients, fixed point -----------------------------------------------------------------

# The per-row fixed-point arithmetic, shared with the GPU's kernels (``gpufs._exactmath``).
_fp = _exactmath.make_fixed_point(np.rint, np.int64, njit(inline="always"))
_weighted = _fp.weighted
_fixed = _fp.fixed
_two_word = _fp.two_word


@njit(inline="always")
def _extremes_chunk(c, n_chunks, g, h, w, unit_hessian, divisor, out):
    n = g.shape[0]
    has_w = w.shape[0] > 0
    mg = 0.0
    mh = 0.0
    mq = 0.0
    for i in range((c * n) // n_chunks, ((c + 1) * n) // n_chunks):
        gi, hi = _weighted(g, h, w, has_w, unit_hessian, i)
        mg = max(mg, abs(gi))
        mh = max(mh, abs(hi))
        if divisor and hi > 0:
            mq = max(mq, abs(gi * gi / hi))
    out[c, 0] = mg
    out[c, 1] = mh
    out[c, 2] = mq


@njit(parallel=True, cache=True)
def _extremes_par(g, h, w, unit_hessian, divisor, out):
    for c in prange(out.shape[0]):
        _extremes_chunk(c, out.shape[0], g, h, w, unit_hessian, divisor, out)


@njit(cache=True)
def _extremes_ser(g, h, w, unit_hessian, divisor, out):
    for c in range(out.shape[0]):
        _extremes_chunk(c, out.shape[0], g, h, w, unit_hessian, divisor, out)


@njit(inline="always")
def _quantize_chunk(c, n_chunks, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales,
                    divisor, gh, sums):
    n = g.shape[0]
    has_w = w.shape[0] > 0
    acc = sums[c]
    acc[:] = 0
    for i in range((c * n) // n_chunks, ((c + 1) * n) // n_chunks):
        gi, hi = _weighted(g, h, w, has_w, unit_hessian, i)
        a = _fixed(gi, g_scale)
        b = _fixed(hi, h_scale)
        gh[i, 0] = a
        gh[i, 1] = b
        acc[6] += a
        acc[7] += b
        u, v = _two_word((gi * e1s[0]) * e2s[0], low_scales[0])
        acc[0] += u
        acc[1] += v
        u, v = _two_word((hi * e1s[1]) * e2s[1], low_scales[1])
        acc[2] += u
        acc[3] += v
        if divisor:
            q = gi * gi / hi if hi > 0 else 0.0
            u, v = _two_word((q * e1s[2]) * e2s[2], low_scales[2])
            acc[4] += u
            acc[5] += v


@njit(parallel=True, cache=True)
def _quantize_par(g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales, divisor, gh,
                  sums):
    for c in prange(sums.shape[0]):
        _quantize_chunk(c, sums.shape[0], g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s,
                        low_scales, divisor, gh, sums)


@njit(cache=True)
def _quantize_ser(g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales, divisor, gh,
                  sums):
    for c in range(sums.shape[0]):
        _quantize_chunk(c, sums.shape[0], g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s,
                        low_scales, divisor, gh, sums)


# --- raw scores, prediction, objectives -----------------------------------------------------

@njit(parallel=True, cache=True)
def _columns_of(Xb, out):
    """out (d, n) = Xb (n, d) transposed, in blocks of rows so both sides stay in cache."""
    n, d = Xb.shape
    block = 1024
    for b in prange((n + block - 1) // block):
        lo = b * block
        hi = min(n, lo + block)
        for f in range(d):
            for i in range(lo, hi):
                out[f, i] = Xb[i, f]


@njit(parallel=True, cache=True)
def _bin_transform(X, cuts, n_cuts, out):
    """out[i, f] = number of cuts of feature f that are < X[i, f]; NaN -> MISSING_BIN."""
    n, d = X.shape
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for f in range(d):
                out[i, f] = _bin_of(X[i, f], cuts, f, n_cuts[f])


@njit(inline="always")
def _update_leaf(s, raw, rows, node_start, node_count, leaf_nodes, leaf_values):
    node = leaf_nodes[s]
    v = leaf_values[s]
    lo = node_start[node]
    for j in range(lo, lo + node_count[node]):
        raw[rows[j]] += v


@njit(parallel=True, cache=True)
def _update_raw_par(raw, rows, node_start, node_count, leaf_nodes, leaf_values):
    """raw[row] += value of the leaf whose segment holds the row (leaves hold disjoint rows)."""
    for s in prange(leaf_nodes.shape[0]):
        _update_leaf(s, raw, rows, node_start, node_count, leaf_nodes, leaf_values)


@njit(cache=True)
def _update_raw_ser(raw, rows, node_start, node_count, leaf_nodes, leaf_values):
    for s in range(leaf_nodes.shape[0]):
        _update_leaf(s, raw, rows, node_start, node_count, leaf_nodes, leaf_values)


@njit(parallel=True, cache=True)
def _predict_binned(Xb, feature, bin_threshold, missing_left, value, tree_column, out, is_cat,
                    cat_bits):
    """out[i, tree_column[t]] += leaf value of tree t for row i, trees in order (a split on a
    categorical feature, ``is_cat`` (d,) bool, by its bitset ``cat_bits`` (n_trees, n_nodes,
    W) uint32)."""
    n = Xb.shape[0]
    n_trees = feature.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for t in range(n_trees):
                node = _leaf_binned(Xb, i, t, feature, bin_threshold, missing_left, is_cat,
                                    cat_bits)
                out[i, tree_column[t]] += value[t, node]


@njit(parallel=True, cache=True)
def _predict_raw(X, feature, threshold, missing_left, value, tree_column, out, is_cat,
                 cat_bits):
    """As ``_predict_binned`` on raw float features: left iff x <= threshold (NaN by default)."""
    n = X.shape[0]
    n_trees = feature.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for t in range(n_trees):
                node = _leaf_raw(X, i, t, feature, threshold, missing_left, is_cat, cat_bits)
                out[i, tree_column[t]] += value[t, node]


@njit(parallel=True, cache=True)
def _logistic_gradients(raw, y, g, h):
    n = raw.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            gi, hi = _logistic_grad_hess(raw[i, 0], float(y[i]))
            g[0, i] = gi
            h[0, i] = hi


@njit(parallel=True, cache=True)
def _softmax_gradients(raw, y, g, h):
    n = raw.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            _softmax_grad_hess_row(raw, i, y[i], g, h)


@njit(parallel=True, cache=True)
def _squared_error_losses(raw, y, out):
    n = raw.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            out[i] = _squared_error_loss(raw[i, 0], float(y[i]))


@njit(parallel=True, cache=True)
def _logistic_losses(raw, y, out):
    n = raw.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            out[i] = _logistic_loss(raw[i, 0], float(y[i]))


@njit(parallel=True, cache=True)
def _softmax_losses(raw, y, out):
    n = raw.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            out[i] = _softmax_loss_row(raw, i, y[i])


@njit(inline="always")
def _round_row(kind, i, raw, y, g, h, loss):
    if kind == 0:  # squared error: g = raw - y (one IEEE subtraction), h = 1
        z = raw[i, 0]
        yi = float(y[i])
        g[0, i] = z - yi
        h[0, i] = 1.0
        loss[i] = _squared_error_loss(z, yi)
    elif kind == 1:
        gi, hi, li = _logistic_grad_hess_loss(raw[i, 0], float(y[i]))
        g[0, i] = gi
        h[0, i] = hi
        loss[i] = li
    else:
        loss[i] = _softmax_grad_hess_loss_row(raw, i, np.int64(y[i]), g, h)


@njit(inline="always")
def _logistic_round_rows(lo, hi, z, y, g, h, loss):
    """Rows lo..hi-1: a loop of branch-free row functions over 1-D arrays, which the compiler
    vectorizes (``_exactmath.logistic_grad_hess_loss``; the callers compile with numpy's error
    model, so a division carries no zero check that would stop it)."""
    for i in range(lo, hi):
        gi, hi_, li = _logistic_grad_hess_loss(z[i], float(y[i]))
        g[i] = gi
        h[i] = hi_
        loss[i] = li


@njit(parallel=True, cache=True, error_model="numpy")
def _logistic_round_par(z, y, g, h, loss):
    n = z.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        _logistic_round_rows(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK), z, y, g, h, loss)


@njit(cache=True, error_model="numpy")
def _logistic_round_ser(z, y, g, h, loss):
    _logistic_round_rows(0, z.shape[0], z, y, g, h, loss)


@njit(parallel=True, cache=True)
def _round_par(kind, raw, y, g, h, loss):
    n = raw.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            _round_row(kind, i, raw, y, g, h, loss)


@njit(cache=True)
def _round_ser(kind, raw, y, g, h, loss):
    for i in range(raw.shape[0]):
        _round_row(kind, i, raw, y, g, h, loss)


_GRADIENT_KERNELS = {"logistic": _logistic_gradients, "softmax": _softmax_gradients}
_LOSS_KERNELS = {"squared_error": _squared_error_losses, "logistic": _logistic_losses,
                 "softmax": _softmax_losses}
_ROUND_KINDS = {"squared_error": 0, "logistic": 1, "softmax": 2}
_HIST_LOOPS = {"auto": AUTO, "rows": ROWS, "columns": COLUMNS}
#: Rows below which per-row kernels run on the calling thread only.
PARALLEL_MIN_ROWS = 1 << 15


class BinnedMatrix:
    """The binned training matrix in both layouts the CPU kernels read.

    LightGBM keeps the same two layouts for the same two reasons. The column copy costs
    n_samples x n_features bytes.

    Parameters
    ----------
    by_row : ndarray of shape (n_samples, n_features), uint8, C order
        The histograms read every feature of a row at once.
    by_column : ndarray of shape (n_features, n_samples), uint8, C order
        The partition and the column-wise histograms read one feature of many rows.
    """

    __slots__ = ("by_row", "by_column", "_sparse")

    def __init__(self, by_row, by_column):
        self.by_row = by_row
        self.by_column = by_column
        self._sparse = {}

    @property
    def shape(self):
        """(n_samples, n_features)."""
        return self.by_row.shape

    def hist_parts(self, layout):
        """The layout's part of the histogram kernels' inputs on this matrix (offsets, most
        frequent slots, and ``_cpu_hist.sparse_rows``: the row-wise list of the sparse
        features' bins other than the most frequent, the dense and the sparse features), made
        on first use and kept.

        Parameters
        ----------
        layout : HistLayout

        Returns
        -------
        tuple of ndarray
        """
        last = self._sparse.get("last")
        if last is not None and last[0] is layout:
            return last[1]
        got = self._sparse.get(layout)
        if got is None:
            if len(self._sparse) >= 4:  # a new layout per fit at most: keep a few
                self._sparse.clear()
            if layout.has_most_freq:
                rows_list = sparse_rows(self.by_column, layout)
            else:
                rows_list = (np.zeros(self.shape[0] + 1, np.int64), np.empty(0, np.int32),
                             np.arange(self.shape[1], dtype=np.int32), np.empty(0, np.int32))
            got = self._sparse[layout] = ((layout.offset, layout.most_freq) + rows_list
                                          + (layout.offset.astype(np.int32),))
        self._sparse["last"] = (layout, got)
        return got


class SplitPlan(NamedTuple):
    """One level's decisions as the rows' half of the level step reads them
    (``CPUBackend.decide_level`` -> ``CPUBackend.advance_level``): a few numbers per split.

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


class _CPUTree:
    """The state of one tree being grown (host arrays; see the module docstring)."""

    __slots__ = ("Xb", "Xb_cols", "gh", "rows", "node_start", "node_count", "node_g", "node_h",
                 "active", "hist", "feats", "n_feats", "full", "parallel", "q", "node_s",
                 "slot_full", "groups", "layout", "src")


class _LevelOutputs:
    """The per-slot decision arrays one level's compiled call fills (``level_step`` or
    ``decide_level``): feature, bin, missing side and gain per slot, (n_slots,) each; the
    admitted features, (d,) int64; the category bitsets, (n_slots, CAT_WORDS or 0) uint32."""

    def __init__(self, nodes, d, split):
        n_slots = nodes.shape[0]
        self.nodes = nodes
        self.feature = np.empty(n_slots, np.int32)
        self.bin = np.empty(n_slots, np.int32)
        self.missing_left = np.empty(n_slots, np.bool_)
        self.gain = np.empty(n_slots, np.float64)
        self.admitted = np.empty(d, np.int64)
        self.cat_slot, self.n_cat = split.categorical()
        self.cat_bits = np.empty((n_slots, CAT_WORDS if self.n_cat else 0), np.uint32)

    def result(self, n_admitted):
        return LevelResult(nodes=self.nodes, feature=self.feature, bin=self.bin,
                           missing_left=self.missing_left, gain=self.gain,
                           admitted=self.admitted[:n_admitted], cat_bits=self.cat_bits)


def _advance_state(st, active, hist, feats, n_feats, full, slot_full):
    """Move tree state ``st`` to the next level (what a level's compiled call returned)."""
    st.active = active
    st.hist = hist
    st.feats = feats
    st.n_feats = int(n_feats)
    st.full = bool(full)
    st.slot_full = slot_full


class CPUBackend:
    """The tree engine on host numpy arrays (numba; see the module docstring).

    Parameters
    ----------
    n_threads : int or None
        Threads the kernels may use (None: what ``numba.get_num_threads()`` says for the
        calling thread, which ``gpufs._threading.thread_limit`` sets from ``n_jobs``).
    rows_per_task : int
        Rows of one histogram or partition task (tests make it tiny to exercise chunking).
    parallel_min_work : int
        Row x feature updates below which a level runs on the calling thread only.
    gain_bounds : {"auto", "always", "never"}
        Node gain bounds that let a node skip the paying features' histograms
        (``_gain_bound_pays``): kept when they may pay off (``_bounds_may_skip``), in every
        tree with penalties, or never. No tree depends on it (tests use "always").
    hist_loop : {"auto", "rows", "columns"}
        How histograms are filled (``_cpu_hist``): by the rule of ``_cpu_hist.use_columns``,
        or always row-wise or column-wise (LightGBM's ``force_row_wise`` /
        ``force_col_wise``). No tree depends on it.
    most_freq : bool
        Read sparse features from the sparse rows list and derive their most frequent bin
        from the node's totals (``HistLayout.most_freq``); False accumulates every bin (a
        cluster's workers, whose node totals are the cluster's). No tree depends on it.
    """

    name = "cpu"
    xp = np

    def __init__(self, n_threads=None, rows_per_task=ROWS_PER_TASK,
                 parallel_min_work=PARALLEL_MIN_WORK, gain_bounds="auto", hist_loop="auto",
                 most_freq=True):
        if gain_bounds not in ("auto", "always", "never"):
            raise ValueError(f"gain_bounds must be 'auto', 'always' or 'never', got "
                             f"{gain_bounds!r}")
        if hist_loop not in _HIST_LOOPS:
            raise ValueError(f"hist_loop must be 'auto', 'rows' or 'columns', got "
                             f"{hist_loop!r}")
        self.n_threads = n_threads
        self.rows_per_task = int(rows_per_task)
        self.parallel_min_work = int(parallel_min_work)
        self.gain_bounds = gain_bounds
        self.hist_loop = hist_loop
        self.most_freq = bool(most_freq)
        self._scratch = {}

    # --- scratch buffers reused across trees of one fit ----------------------------------
    def _buffer(self, name, shape, dtype):
        buf = self._scratch.get(name)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._scratch[name] = np.empty(shape, dtype)
        return buf

    def _threads(self):
        return numba.get_num_threads() if self.n_threads is None else int(self.n_threads)

    # --- arrays and the device -------------------------------------------------------------
    def owns(self, a):
        """Whether ``a`` is a host (numpy) array, the only kind this backend computes on."""
        return isinstance(a, np.ndarray)

    def to_device(self, a):
        """``a`` as a numpy array (a host copy of a device array; ``a`` itself for numpy)."""
        return to_host(a)

    def synchronize(self):
        """Nothing to wait for: every CPU kernel has returned when its call returns."""

    def task_table(self, seg_start, seg_count):
        """``Backend.task_table``: how ``partition`` cuts segments into tasks (the level step
        cuts the same way when its level runs in parallel): a segment of ``c`` rows into
        ``min(max(c // rows_per_task, 1), 4 x threads)`` near-equal runs with several
        threads, one run otherwise (``gpufs._tasks``). The row-wise histograms cut by the
        same rule, with ``rows_per_task`` lowered to about ``_cpu_hist.HIST_TASK_WORK``
        updates per task for builds of fewer rows than threads x ``rows_per_task``."""
        n_threads = self._threads()
        n_tasks_max = TASKS_PER_THREAD * n_threads if n_threads > 1 else 1
        t_seg, t_lo, t_hi, _ = task_table(np.asarray(seg_start, np.int64),
                                           np.asarray(seg_count, np.int64), n_tasks_max,
                                           self.rows_per_task)
        return t_seg, t_lo, t_hi

    # --- binning --------------------------------------------------------------------------
    def bin_transform(self, X, cuts_padded, n_cuts):
        """Float X (n, d) -> uint8 bins (n, d) with the cut matrix (d, 254), +inf padded.

        float32 and float64 X are binned as they are (no float64 copy of float32 data)."""
        X = np.asarray(X)
        if X.dtype != np.float32 and X.dtype != np.float64:
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        out = np.empty(X.shape, dtype=X_BINNED_DTYPE)
        _bin_transform(X, cuts_padded, np.asarray(n_cuts, np.int64), out)
        return out

    # --- gradients ------------------------------------------------------------------------
    def _rows_parallel(self, n):
        return self._threads() > 1 and n >= PARALLEL_MIN_ROWS

    def round_gradients(self, objective, raw, y):
        """Gradients, hessians and per-row losses of ``objective`` at ``raw``, in one pass.

        Returns (g, h, loss_terms): g and h (n_outputs, n) float64 (row k is output column
        k), loss_terms (n,) float64 -- the loss of the raw scores *before* the round's trees,
        i.e. the loss after the previous round. The formulas are ``gpufs._exactmath``'s, so the
        GPU backend returns the same bits.
        """
        raw = np.ascontiguousarray(raw, dtype=np.float64)
        n, k = raw.shape
        g = np.empty((k, n), np.float64)
        h = np.empty((k, n), np.float64)
        loss = np.empty(n, np.float64)
        kind = kernel_for(_ROUND_KINDS, objective)
        if kind == _ROUND_KINDS["logistic"] and k == 1:
            (_logistic_round_par if self._rows_parallel(n) else _logistic_round_ser)(
                raw.reshape(n), np.asarray(y), g[0], h[0], loss)
        else:
            (_round_par if self._rows_parallel(n) else _round_ser)(kind, raw, np.asarray(y), g,
                                                                   h, loss)
        return g, h, loss

    def gradients(self, objective, raw, y):
        """Per-row gradients and hessians of ``objective`` ("logistic" or "softmax").

        raw (n, n_outputs) float64; y (n,) labels / class codes. Returns (g, h), each
        (n_outputs, n) float64: row k is output column k. The formulas are
        ``gpufs._exactmath``'s, so the GPU backend returns the same bits.
        """
        raw = np.ascontiguousarray(raw, dtype=np.float64)
        n, k = raw.shape
        g = np.empty((k, n), np.float64)
        h = np.empty((k, n), np.float64)
        kernel_for(_GRADIENT_KERNELS, objective)(raw, np.asarray(y), g, h)
        return g, h

    def loss_terms(self, objective, raw, y):
        """Per-row losses (n,) float64 of ``objective`` ("squared_error", "logistic" or
        "softmax"), by ``gpufs._exactmath``'s formulas (the same bits as the GPU backend)."""
        raw = np.ascontiguousarray(raw, dtype=np.float64)
        out = np.empty(raw.shape[0], np.float64)
        kernel_for(_LOSS_KERNELS, objective)(raw, np.asarray(y), out)
        return out

    def _chunks(self, n):
        return TASKS_PER_THREAD * self._threads() if self._rows_parallel(n) else 1

    def gradient_extremes(self, g, h, w, unit_hessian, divisor):
        """(max |g w|, max |h w|, max |q|) as host floats (``quantize.prepare_gradients``)."""
        n = g.shape[0]
        out = np.zeros((self._chunks(n), 3), np.float64)
        (_extremes_par if out.shape[0] > 1 else _extremes_ser)(
            g, _no_weights(h), _no_weights(w), bool(unit_hessian), bool(divisor), out)
        m = out.max(axis=0)
        return float(m[0]), float(m[1]), float(m[2])

    def quantize_gradients(self, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s,
                           low_scales, divisor):
        """(gh (n, 2) int64, sums int64 (8,)): see ``quantize.prepare_gradients``."""
        n = g.shape[0]
        gh = np.empty((n, 2), np.int64)
        sums = np.empty((self._chunks(n), 8), np.int64)
        (_quantize_par if sums.shape[0] > 1 else _quantize_ser)(
            g, _no_weights(h), _no_weights(w), bool(unit_hessian), float(g_scale),
            float(h_scale), np.asarray(e1s, np.float64), np.asarray(e2s, np.float64),
            np.asarray(low_scales, np.float64), bool(divisor), gh, sums)
        return gh, sums.sum(axis=0)

    # --- trees ----------------------------------------------------------------------------
    def prepare_binned(self, Xb):
        """The binned matrix as the tree kernels read it (a ``BinnedMatrix``); prepare it once
        per fit and pass it to every ``start_tree``."""
        if isinstance(Xb, BinnedMatrix):
            return Xb
        Xb = np.ascontiguousarray(Xb, dtype=X_BINNED_DTYPE)
        cols = np.empty((Xb.shape[1], Xb.shape[0]), X_BINNED_DTYPE)
        if Xb.size:
            _columns_of(Xb, cols)
        return BinnedMatrix(Xb, cols)

    def start_tree(self, data, gh, root_g, root_h, max_depth, feats, penalty=None,
                   groups=None, split=None, layout=None):
        """Begin a tree: every row in the root, its histogram over ``feats`` (int32 sorted
        feature indices) built. ``data`` is ``prepare_binned``'s result (or the uint8 binned
        matrix, prepared here). Returns the tree state for ``level_step``.

        With the level's ``penalty`` vector, the feature ``groups`` (int32 (n_features,)) and
        the tree's ``split`` parameters (``grower.SplitParams``), the tree keeps each node's
        gain bound and builds the paying features' histograms only at nodes where one of them
        could score (``_gain_bound_pays``); without them every node covers ``feats``. The
        histograms are in ``layout`` (default: ``split``'s, else the full layout).
        """
        data = self.prepare_binned(data)
        Xb = data.by_row
        n, d = Xb.shape
        st = _CPUTree()
        st.Xb = Xb
        st.Xb_cols = data.by_column
        st.gh = gh
        st.layout = tree_layout(layout, split, d)
        if not self.most_freq:
            st.layout = st.layout.without_most_freq()
        n_nodes = 2 ** (max_depth + 1) - 1
        st.rows = self._buffer("rows", (n,), ROW_INDEX_DTYPE)
        st.rows[:] = np.arange(n, dtype=ROW_INDEX_DTYPE)
        st.src = self._hist_source(data, gh, st.rows, st.layout)
        st.node_start = np.zeros(n_nodes, np.int64)
        st.node_count = np.zeros(n_nodes, np.int64)
        st.node_g = np.zeros(n_nodes, np.int64)
        st.node_h = np.zeros(n_nodes, np.int64)
        st.node_count[0] = n
        st.node_g[0] = root_g
        st.node_h[0] = root_h
        st.active = np.zeros(1, np.int64)
        feats = np.ascontiguousarray(feats, dtype=np.int32)
        st.node_s = np.zeros(n_nodes, np.float64)
        st.q = np.empty(0, np.float64)
        st.groups = (np.zeros(d, np.int32) if groups is None
                     else np.ascontiguousarray(groups, dtype=np.int32))
        st.slot_full = np.ones(1, np.bool_)
        n_threads = self._threads()
        if (penalty is not None and split is not None and n
                and self._bounds_may_skip(gh, root_g, root_h, max_depth, feats, penalty,
                                          split)):
            st.q, st.node_s[0] = self._bound_terms(gh, split, n_threads)
            free = np.asarray(penalty) == 0.0
            pay_min = float(np.asarray(penalty)[feats][~free[feats]].min())
            if not _gain_bound_pays(st.node_s[0], int(root_g), int(root_h),
                                    1.0 / split.g_scale, 1.0 / split.h_scale,
                                    float(split.reg_lambda), n, float(split.gain_divisor),
                                    pay_min, float(split.min_split_gain)):
                st.slot_full[0] = False
                feats = feats[free[feats]]
        st.feats = feats
        st.n_feats = int(st.feats.shape[0])
        st.full = st.n_feats == d
        cost = row_cost(st.src, st.n_feats, st.full)
        st.parallel = n_threads > 1 and n * max(cost, 1) >= self.parallel_min_work
        priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
        st.hist, self._scratch["priv"] = _root_histogram(
            st.parallel, n_threads, self.rows_per_task, _HIST_LOOPS[self.hist_loop], st.src,
            int(root_g), int(root_h), st.feats, st.n_feats, st.full, priv)
        return st

    def _hist_source(self, data, gh, rows, layout):
        """The histogram kernels' inputs (``_cpu_hist.build_histograms``' ``src``)."""
        return (data.by_row, data.by_column, gh, rows,
                self._buffer("ghs", (data.shape[0], 2), np.int64)) + data.hist_parts(layout)

    #: Rows of the sample that estimates a tree's root gain bound (``_bounds_may_skip``).
    BOUND_SAMPLE_ROWS = 4096

    def _bounds_may_skip(self, gh, root_g, root_h, max_depth, feats, penalty, split):
        """Whether keeping node gain bounds in this tree may let some node skip the paying
        features (a cost/benefit guess only: the decisions never depend on it).

        The bounds cost a pass over the rows and a gather per row and level. They can only
        pay off when a node at the deepest histogram level, holding about 2**-(depth - 1) of
        the rows, may have a bound below the cheapest penalty: estimated from the root's bound
        over a strided sample of the rows.
        """
        penalty = np.asarray(penalty)
        paying = penalty[feats]
        paying = paying[paying > 0]
        if paying.size == 0 or self.gain_bounds == "never":
            return False
        if self.gain_bounds == "always":
            return True
        n = gh.shape[0]
        step = max(1, n // self.BOUND_SAMPLE_ROWS)
        g = gh[::step, 0] / split.g_scale
        h = gh[::step, 1] / split.h_scale
        with np.errstate(divide="ignore", invalid="ignore"):
            s_est = float(np.where(g == 0, 0.0, g * g / h).sum()) * step
        G, H = root_g / split.g_scale, root_h / split.h_scale
        root_bound = 0.5 * (s_est - G * G / (H + split.reg_lambda))
        deepest = root_bound / 2.0 ** max(0, max_depth - 1) / split.gain_divisor
        return not deepest > 8.0 * float(paying.min()) + max(0.0, split.min_split_gain)

    def _bound_terms(self, gh, split, n_threads):
        """(q, sum q): each row's ``_bound_term`` (n,) float64 and their sum."""
        n = gh.shape[0]
        q = self._buffer("bound_terms", (n,), np.float64)
        chunks = TASKS_PER_THREAD * n_threads if self._rows_parallel(n) else 1
        sums = np.zeros(chunks, np.float64)
        (_bound_terms_par if chunks > 1 else _bound_terms_ser)(
            gh, 1.0 / split.g_scale, 1.0 / split.h_scale, q, sums)
        return q, float(sums.sum())

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Decide, partition and prepare the next level of tree state ``st``.

        ``split`` is a ``SplitParams``. Returns a ``LevelResult`` of host arrays (the
        decisions of this level's nodes and the features that entered Omega)."""
        d = st.Xb.shape[1]
        n = st.Xb.shape[0]
        out = _LevelOutputs(st.active, d, split)
        priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
        (n_adm, next_active, next_hist, next_feats, next_n_feats, next_full,
         self._scratch["priv"], next_slot_full) = _level_step(
            st.parallel, self._threads(), self.rows_per_task, self.parallel_min_work,
            _HIST_LOOPS[self.hist_loop], st.src,
            self._buffer("scratch_rows", (n,), ROW_INDEX_DTYPE),
            self._buffer("go_left", (n,), np.uint8), priv, st.node_start, st.node_count,
            st.node_g, st.node_h, st.active, st.hist, split.n_bins, penalty, allowed, used,
            st.feats, st.n_feats, st.full, budget, split.g_scale, split.h_scale,
            split.reg_lambda, split.gain_divisor, split.min_child_weight, split.min_split_gain,
            build_next, out.feature, out.bin, out.missing_left, out.gain, out.admitted,
            out.cat_slot, out.n_cat, split.max_cat_to_onehot, out.cat_bits, st.q, st.node_s,
            st.slot_full, st.groups)
        result = out.result(n_adm)
        _advance_state(st, next_active, next_hist, next_feats, next_n_feats, next_full,
                       next_slot_full)
        return result

    # --- the level step in two halves, for a cluster (``gpufs.dask``) ---------------------
    # ``level_step`` runs ``_level_decide`` then ``_level_advance`` in one compiled call. A
    # cluster runs them apart: the driver decides once on the histograms summed over the
    # workers (exact int64 sums), and every worker advances its own rows by the decisions.

    def decide_level(self, st, penalty, allowed, used, budget, split):
        """The decisions of ``level_step`` from the level's histograms and the nodes' sums;
        reads no rows.

        ``st`` needs ``active``, ``hist``, ``layout``, ``node_g``, ``node_h``, ``node_count``,
        ``node_s``, ``q``, ``slot_full``, ``feats``, ``n_feats``, ``full`` and ``parallel`` (a
        ``start_tree`` state, or a driver's state without rows, whose ``q`` is empty). The
        arguments are ``level_step``'s. Returns (``LevelResult``, ``SplitPlan``): the plan is
        what ``advance_level`` needs, a few numbers per split.
        """
        d = int(np.asarray(split.n_bins).shape[0])
        out = _LevelOutputs(st.active, d, split)
        penalty = np.asarray(penalty, np.float64)
        (n_adm, search_full, admitted_now, split_slot, sf, sb, sm, sc, sbits, sgl, shl,
         next_feats, next_n_feats, next_full) = _level_decide(
            self._search_parallel(st), int(st.node_count[0]), st.node_g, st.node_h,
            st.node_s, st.active, st.hist, st.layout.offset, split.n_bins, penalty, allowed,
            used, st.feats, st.n_feats, st.full,
            budget, split.g_scale, split.h_scale, split.reg_lambda, split.gain_divisor,
            split.min_child_weight, split.min_split_gain, st.q.shape[0] > 0, st.slot_full,
            out.cat_slot, out.n_cat, split.max_cat_to_onehot, out.feature, out.bin,
            out.missing_left, out.gain, out.cat_bits, out.admitted)
        result = out.result(n_adm)
        plan = SplitPlan(split_slot, sf, sb, sm, sc, sbits, sgl, shl, int(n_adm), admitted_now,
                         search_full, next_feats, int(next_n_feats), bool(next_full), penalty,
                         split)
        return result, plan

    def _search_parallel(self, st):
        """Whether the split search of ``st``'s level runs on the thread pool
        (``SEARCH_PARALLEL_MIN_SLOTS``)."""
        return (self._threads() > 1
                and st.active.shape[0] * st.layout.n_slots >= SEARCH_PARALLEL_MIN_SLOTS)

    def advance_level(self, st, plan, build_next):
        """The rows' half of ``level_step``: partition ``st``'s rows by ``plan``
        (``decide_level``'s), set the children's segments and sums, and (``build_next``) build
        the next level's histograms of these rows (the smaller child of each split by this
        process's row counts, its sibling by exact subtraction). Advances ``st`` to the next
        level; returns the rows each split sent left, (n_split,) int64."""
        n = st.Xb.shape[0]
        split = plan.split
        priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
        next_active, nxt, left, self._scratch["priv"], next_slot_full = _level_advance(
            st.parallel, self._threads(), self.rows_per_task, self.parallel_min_work,
            _HIST_LOOPS[self.hist_loop], st.src,
            self._buffer("scratch_rows", (n,), ROW_INDEX_DTYPE),
            self._buffer("go_left", (n,), np.uint8), priv, st.node_start, st.node_count,
            st.node_g, st.node_h, st.active, st.hist, plan.penalty, split.g_scale,
            split.h_scale, split.reg_lambda, split.gain_divisor, split.min_split_gain,
            plan.split_slot, plan.feature, plan.bin, plan.missing_left, plan.is_cat,
            plan.cat_bits, plan.left_g, plan.left_h, plan.n_admitted, plan.admitted_now,
            plan.search_full, plan.next_feats, plan.next_n_feats, plan.next_full,
            bool(build_next), st.q, st.node_s, st.groups)
        _advance_state(st, next_active, nxt, plan.next_feats, plan.next_n_feats,
                       plan.next_full, next_slot_full)
        return left

    def node_sums(self, st):
        """Host (node_g, node_h, node_count) of the tree (n_nodes,) int64 each."""
        return st.node_g, st.node_h, st.node_count

    def update_raw(self, raw_column, st, leaf_nodes, leaf_values):
        """Add each leaf's value to the raw scores of its rows (in place, no traversal)."""
        target = raw_column
        if not raw_column.flags.c_contiguous:  # a column of a (n, K) array (softmax)
            target = np.ascontiguousarray(raw_column)
        kernel = _update_raw_par if self._rows_parallel(st.rows.shape[0]) else _update_raw_ser
        kernel(target, st.rows, st.node_start, st.node_count, np.asarray(leaf_nodes, np.int64),
               np.asarray(leaf_values, np.float64))
        if target is not raw_column:
            raw_column[...] = target

    # --- kernels exposed for tests (the level step uses the same drivers) -----------------
    def histograms(self, Xb, gh, rows, node_start, node_count, build_nodes, feats=None,
                   layout=None):
        """Histograms of ``build_nodes``, by the level step's drivers: (len(build_nodes),
        layout.n_slots, 2) int64 in ``layout``; without one, in the full layout, returned as
        (len(build_nodes), d, 256, 2) (the same array). With a layout that derives the most
        frequent bins, the nodes' totals are the sums of ``gh`` over their rows."""
        build = np.asarray(build_nodes, np.int64)
        data = self.prepare_binned(Xb)
        d = data.shape[1]
        given = layout
        layout = tree_layout(layout, None, d)
        if not self.most_freq:
            layout = layout.without_most_freq()
        feats = np.arange(d, dtype=np.int32) if feats is None else np.asarray(feats, np.int32)
        gh = np.ascontiguousarray(gh, np.int64)
        rows = np.ascontiguousarray(rows, ROW_INDEX_DTYPE)
        starts = np.asarray(node_start, np.int64)[build]
        counts = np.asarray(node_count, np.int64)[build]
        totals = np.zeros((build.shape[0], 2), np.int64)
        for i in range(build.shape[0] if layout.has_most_freq else 0):  # exact int64 sums
            totals[i] = gh[rows[starts[i]: starts[i] + counts[i]]].sum(axis=0)
        out = np.zeros((build.shape[0], layout.n_slots, 2), HIST_DTYPE)
        n_threads = self._threads()
        build_histograms(n_threads > 1, n_threads, self.rows_per_task,
                         _HIST_LOOPS[self.hist_loop], self._hist_source(data, gh, rows, layout),
                         starts, counts, np.arange(build.shape[0], dtype=np.int64),
                         totals[:, 0].copy(), totals[:, 1].copy(), feats, feats.shape[0],
                         feats.shape[0] == d, out, np.empty((0, 0), HIST_DTYPE))
        if given is None:
            return out.reshape(build.shape[0], d, N_HIST_BINS, 2)
        return out

    def find_splits(self, hist, node_g, node_h, penalty, allowed, split):
        """``Backend.find_splits``: ``_gain``'s bin scan (``_categorical``'s for categorical
        features) per (slot, feature) by the level step's serial driver, then ``_level``'s
        rule per slot (``best_splits``). ``hist`` is (k, n_slots, 2) in ``split``'s layout, or
        the dense (k, d, 256, 2) (the full layout)."""
        hist, layout = split_input(np.ascontiguousarray(hist, HIST_DTYPE), split)
        k, d = hist.shape[0], layout.n_features
        feats = np.arange(d, dtype=np.int32)
        allowed = np.asarray(allowed, np.bool_)
        cat_slot, n_cat = split.categorical()
        cat_order = np.zeros((k, n_cat, N_HIST_BINS), np.uint8)
        pf = [np.empty((k, d), dt) for dt in (np.float64, np.float64, np.int64, np.int64,
                                              np.int64, np.int64)]
        _search_ser(hist, layout.offset, np.asarray(node_g, np.int64),
                    np.asarray(node_h, np.int64), np.asarray(split.n_bins, np.int32),
                    np.asarray(penalty, np.float64), allowed, np.ones(k, np.bool_), feats, d,
                    float(split.g_scale), float(split.h_scale), float(split.reg_lambda),
                    float(split.gain_divisor), float(split.min_child_weight), cat_slot,
                    int(split.max_cat_to_onehot), cat_order, *pf)
        return best_splits(allowed, *pf, cat_slot=cat_slot, cat_order=cat_order)

    def partition(self, Xb, rows, node_start, node_count, split_nodes, split_feature,
                  split_bin, missing_left, split_cat=None, split_bits=None):
        """Stable in-place partition of each split node's segment (left rows, then right
        rows, each in their original order); returns left counts (n_split,) int64.
        ``split_cat`` (n_split,) bool marks categorical splits, whose left sets are the
        bitsets ``split_bits`` (n_split, CAT_WORDS) uint32."""
        split_nodes = np.asarray(split_nodes, np.int64)
        m = split_nodes.shape[0]
        sc = np.zeros(m, np.bool_) if split_cat is None else np.asarray(split_cat, np.bool_)
        sbits = (np.zeros((m, 0), np.uint32) if split_bits is None
                 else np.ascontiguousarray(split_bits, np.uint32))
        n_threads = self._threads()
        return _partition(n_threads > 1, n_threads, self.rows_per_task,
                          self.prepare_binned(Xb).by_column, rows, np.empty_like(rows),
                          np.empty(rows.shape[0], np.uint8),
                          np.asarray(node_start, np.int64)[split_nodes],
                          np.asarray(node_count, np.int64)[split_nodes],
                          np.asarray(split_feature, np.int64), np.asarray(split_bin, np.int64),
                          np.asarray(missing_left, np.bool_), sc, sbits,
                          np.empty(0, np.float64), np.empty((len(split_nodes), 2), np.float64))

    def group_test_steps(self):
        """GT-GBM's group-test steps on this device (``group_testing.CPUSteps``: columns
        summed by numba kernels)."""
        from ..group_testing import CPUSteps

        return CPUSteps

    # --- prediction -----------------------------------------------------------------------
    def predict_binned(self, Xb, feature, bin_threshold, missing_left, value, tree_column, out,
                       is_cat, cat_bits):
        _predict_binned(Xb, feature, bin_threshold, missing_left, value, tree_column, out,
                        is_cat, cat_bits)
        return out

    def predict_raw(self, X, feature, threshold, missing_left, value, tree_column, out, is_cat,
                    cat_bits):
        X = np.asarray(X)
        if X.dtype != np.float32 and X.dtype != np.float64:
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        _predict_raw(X, feature, threshold, missing_left, value, tree_column, out, is_cat,
                     cat_bits)
        return out


_NO_WEIGHTS = np.empty(0, np.float64)


def _no_weights(w):
    return _NO_WEIGHTS if w is None else w
