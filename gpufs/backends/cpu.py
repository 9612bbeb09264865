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
  hist      (n_slots, n_features, 256, 2) int64 sums of (g, h) per (feature, bin); slots are
            the nodes of one level, in node order
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

import numba
import numpy as np
from numba import njit, prange

from .. import _exactmath, _gain, _level, _tasks, _threading
from .._device import to_host
from .._types import HIST_DTYPE, MISSING_BIN, N_HIST_BINS, ROW_INDEX_DTYPE, X_BINNED_DTYPE
from .base import LevelResult, best_splits, kernel_for

_threading.configure()

_candidate = njit(inline="always")(_gain.candidate)
_scan_feature = njit(inline="always")(_gain.make_scan_feature(_candidate))
_leaf_value = njit(inline="always")(_gain.leaf_value)
_goes_left = njit(inline="always")(_gain.goes_left)
_goes_left_raw = njit(inline="always")(_gain.goes_left_raw)
_bin_of = njit(inline="always")(_gain.bin_of)
_leaf_binned = njit(inline="always")(_gain.make_leaf_of(_goes_left))
_leaf_raw = njit(inline="always")(_gain.make_leaf_of(_goes_left_raw))
_best_over_features = njit(inline="always")(_level.best_over_features)
_decide_level = njit(cache=True)(_level.decide_level)
_task_bounds = njit(inline="always")(_tasks.task_bounds)
_cpu_task_count = njit(inline="always")(_tasks.cpu_task_count)

# The objectives' exact math (``gpufs._exactmath``): plain * and +, which numba's CPU compiler
# never contracts into FMAs (no fastmath), so each rounds as IEEE 754 says, like the GPU's
# dmul_rn / dadd_rn.
_em = _exactmath.make_exact_math(njit(inline="always")(_exactmath.py_mul),
                                 njit(inline="always")(_exactmath.py_add),
                                 njit(error_model="numpy"))
_logistic_grad_hess = _em.logistic_grad_hess
_logistic_grad_hess_loss = _em.logistic_grad_hess_loss
_logistic_loss = _em.logistic_loss
_squared_error_loss = _em.squared_error_loss
_softmax_grad_hess_row = _em.softmax_grad_hess_row
_softmax_grad_hess_loss_row = _em.softmax_grad_hess_loss_row
_softmax_loss_row = _em.softmax_loss_row

#: int64 words of one feature's histogram: (g, h) x 256 bins.
_FEATURE_WORDS = 2 * N_HIST_BINS
#: Rows per histogram / partition task; smaller nodes are one task.
ROWS_PER_TASK = 16384
#: Tasks per thread a big node is cut into (load balance on a busy machine).
TASKS_PER_THREAD = 4
#: Row x feature updates below which a level runs on the calling thread only.
PARALLEL_MIN_WORK = 1 << 18
#: Rows per task of the per-row kernels (gradients, losses, binning, prediction). The fit runs
#: with numba's chunk size at one task (``gpufs._threading``), so a loop over single rows
#: would make every row a task: a million scheduler round trips per pass.
ROW_BLOCK = 4096


# --- histograms -----------------------------------------------------------------------------

@njit(inline="always")
def _hist_zero(H, feats, n_feats, full):
    if full:
        H[:] = 0
    else:
        for i in range(n_feats):
            b = np.int64(feats[i]) * _FEATURE_WORDS
            H[b:b + _FEATURE_WORDS] = 0


@njit(inline="always")
def _hist_rows(Xb, gh, rows, lo, hi, feats, n_feats, full, H):
    """Add rows[lo:hi] into H, the flat (n_features * 512,) view of one histogram.

    Row-wise: each row's bins are read once, contiguously, and its (g, h) once. With all
    features, two rows are interleaved so twice as many independent read-modify-writes are in
    flight (the loop is bound by their latency, not by arithmetic).
    """
    if full:
        d = Xb.shape[1]
        j = lo
        while j + 1 < hi:
            r0 = rows[j]
            r1 = rows[j + 1]
            g0 = gh[r0, 0]
            h0 = gh[r0, 1]
            g1 = gh[r1, 0]
            h1 = gh[r1, 1]
            base = 0
            for f in range(d):
                i0 = base + 2 * np.int64(Xb[r0, f])
                i1 = base + 2 * np.int64(Xb[r1, f])
                H[i0] += g0
                H[i0 + 1] += h0
                H[i1] += g1
                H[i1 + 1] += h1
                base += _FEATURE_WORDS
            j += 2
        if j < hi:
            r = rows[j]
            g = gh[r, 0]
            h = gh[r, 1]
            base = 0
            for f in range(d):
                i = base + 2 * np.int64(Xb[r, f])
                H[i] += g
                H[i + 1] += h
                base += _FEATURE_WORDS
    else:
        for j in range(lo, hi):
            r = rows[j]
            g = gh[r, 0]
            h = gh[r, 1]
            for k in range(n_feats):
                f = np.int64(feats[k])
                i = f * _FEATURE_WORDS + 2 * np.int64(Xb[r, f])
                H[i] += g
                H[i + 1] += h


@njit(inline="always")
def _hist_task(t, Xb, gh, rows, t_slot, t_lo, t_hi, t_priv, feats, n_feats, full, out2, priv2):
    p = t_priv[t]
    H = out2[t_slot[t]] if p < 0 else priv2[p]
    _hist_zero(H, feats, n_feats, full)
    _hist_rows(Xb, gh, rows, t_lo[t], t_hi[t], feats, n_feats, full, H)


@njit(parallel=True, cache=True)
def _hist_tasks_par(Xb, gh, rows, t_slot, t_lo, t_hi, t_priv, feats, n_feats, full, out2, priv2):
    for t in prange(t_slot.shape[0]):
        _hist_task(t, Xb, gh, rows, t_slot, t_lo, t_hi, t_priv, feats, n_feats, full, out2,
                   priv2)


@njit(cache=True)
def _hist_tasks_ser(Xb, gh, rows, t_slot, t_lo, t_hi, t_priv, feats, n_feats, full, out2, priv2):
    for t in range(t_slot.shape[0]):
        _hist_task(t, Xb, gh, rows, t_slot, t_lo, t_hi, t_priv, feats, n_feats, full, out2,
                   priv2)


@njit(inline="always")
def _hist_reduce_feature(i, t_slot, t_priv, feats, out2, priv2):
    b = np.int64(feats[i]) * _FEATURE_WORDS
    for t in range(t_slot.shape[0]):
        p = t_priv[t]
        if p >= 0:
            dst = out2[t_slot[t]]
            src = priv2[p]
            for w in range(b, b + _FEATURE_WORDS):
                dst[w] += src[w]


@njit(parallel=True, cache=True)
def _hist_reduce_par(t_slot, t_priv, feats, n_feats, out2, priv2):
    for i in prange(n_feats):
        _hist_reduce_feature(i, t_slot, t_priv, feats, out2, priv2)


@njit(cache=True)
def _hist_reduce_ser(t_slot, t_priv, feats, n_feats, out2, priv2):
    for i in range(n_feats):
        _hist_reduce_feature(i, t_slot, t_priv, feats, out2, priv2)


@njit(cache=True)
def _task_table(seg_start, seg_count, n_tasks_max, rows_per_task):
    """Cut segments into tasks by ``gpufs._tasks``' CPU rule (about ``rows_per_task`` rows,
    at most ``n_tasks_max`` per segment, one per empty or small segment). Returns (t_seg,
    t_lo, t_hi, t_first) int64, ``t_first`` is 1 for the first task of its segment."""
    m = seg_start.shape[0]
    per = np.empty(m, np.int64)
    total = 0
    for s in range(m):
        k = _cpu_task_count(seg_count[s], rows_per_task, n_tasks_max)
        per[s] = k
        total += k
    t_seg = np.empty(total, np.int64)
    t_lo = np.empty(total, np.int64)
    t_hi = np.empty(total, np.int64)
    t_first = np.empty(total, np.int64)
    t = 0
    for s in range(m):
        k = per[s]
        lo = seg_start[s]
        c = seg_count[s]
        for i in range(k):
            t_seg[t] = s
            t_lo[t], t_hi[t] = _task_bounds(lo, c, k, i)
            t_first[t] = 1 if i == 0 else 0
            t += 1
    return t_seg, t_lo, t_hi, t_first


@njit(cache=True)
def _build_histograms(parallel, n_threads, rows_per_task, Xb, gh, rows, seg_start, seg_count,
                      slot_of_seg, feats, n_feats, full, out, priv):
    """Histograms of the segments into ``out[slot_of_seg[s]]`` (only the listed features).

    ``priv`` is scratch (n_priv, n_features * 512) int64 for the extra tasks of big segments;
    when it is too small a bigger one is allocated and returned (callers keep it).
    """
    n_tasks_max = TASKS_PER_THREAD * n_threads if parallel else 1
    t_seg, t_lo, t_hi, t_first = _task_table(seg_start, seg_count, n_tasks_max, rows_per_task)
    T = t_seg.shape[0]
    t_slot = np.empty(T, np.int64)
    t_priv = np.empty(T, np.int64)
    n_priv = 0
    for t in range(T):
        t_slot[t] = slot_of_seg[t_seg[t]]
        if t_first[t] == 1:
            t_priv[t] = -1
        else:
            t_priv[t] = n_priv
            n_priv += 1
    width = Xb.shape[1] * _FEATURE_WORDS
    if priv.shape[0] < n_priv or priv.shape[1] != width:
        priv = np.empty((n_priv, width), HIST_DTYPE)
    out2 = out.reshape((out.shape[0], width))
    if parallel:
        _hist_tasks_par(Xb, gh, rows, t_slot, t_lo, t_hi, t_priv, feats, n_feats, full, out2,
                        priv)
        if n_priv:
            _hist_reduce_par(t_slot, t_priv, feats, n_feats, out2, priv)
    else:
        _hist_tasks_ser(Xb, gh, rows, t_slot, t_lo, t_hi, t_priv, feats, n_feats, full, out2,
                        priv)
        if n_priv:
            _hist_reduce_ser(t_slot, t_priv, feats, n_feats, out2, priv)
    return priv


@njit(inline="always")
def _subtract_pair(p, feats, n_feats, parent_slot, built_slot, sib_slot, hist, nxt):
    """nxt[sib] = hist[parent] - nxt[built] for the p-th (pair, feature-block)."""
    i = p % n_feats
    s = p // n_feats
    f = feats[i]
    a = hist[parent_slot[s], f]
    b = nxt[built_slot[s], f]
    c = nxt[sib_slot[s], f]
    for w in range(N_HIST_BINS):
        c[w, 0] = a[w, 0] - b[w, 0]
        c[w, 1] = a[w, 1] - b[w, 1]


@njit(parallel=True, cache=True)
def _subtract_par(feats, n_feats, parent_slot, built_slot, sib_slot, hist, nxt):
    for p in prange(parent_slot.shape[0] * n_feats):
        _subtract_pair(p, feats, n_feats, parent_slot, built_slot, sib_slot, hist, nxt)


@njit(cache=True)
def _subtract_ser(feats, n_feats, parent_slot, built_slot, sib_slot, hist, nxt):
    for p in range(parent_slot.shape[0] * n_feats):
        _subtract_pair(p, feats, n_feats, parent_slot, built_slot, sib_slot, hist, nxt)


# --- split search ---------------------------------------------------------------------------

@njit(inline="always")
def _search_pair(p, hist, slot_g, slot_h, n_bins, penalty, wanted, feats, n_feats, g_scale,
                 h_scale, reg_lambda, gain_divisor, min_child_weight, pf_score, pf_gain, pf_bin,
                 pf_ml, pf_gl, pf_hl):
    k = p // n_feats
    f = feats[p % n_feats]
    if not wanted[f]:
        pf_score[k, f] = -np.inf
        return
    G_q = slot_g[k]
    H_q = slot_h[k]
    # 1 / scale is exact for a power of two (see ``_gain.candidate``)
    g_inv = 1.0 / g_scale
    h_inv = 1.0 / h_scale
    score, gain, b, ml, gl, hl = _scan_feature(
        hist, k, f, n_bins[f], G_q, H_q, G_q / g_scale, H_q / h_scale, g_inv, h_inv,
        reg_lambda, gain_divisor, min_child_weight, penalty[f])
    pf_score[k, f] = score
    pf_gain[k, f] = gain
    pf_bin[k, f] = b
    pf_ml[k, f] = ml
    pf_gl[k, f] = gl
    pf_hl[k, f] = hl


@njit(parallel=True, cache=True)
def _search_par(hist, slot_g, slot_h, n_bins, penalty, wanted, feats, n_feats, g_scale, h_scale,
                reg_lambda, gain_divisor, min_child_weight, pf_score, pf_gain, pf_bin, pf_ml,
                pf_gl, pf_hl):
    for p in prange(hist.shape[0] * n_feats):
        _search_pair(p, hist, slot_g, slot_h, n_bins, penalty, wanted, feats, n_feats, g_scale,
                     h_scale, reg_lambda, gain_divisor, min_child_weight, pf_score, pf_gain,
                     pf_bin, pf_ml, pf_gl, pf_hl)


@njit(cache=True)
def _search_ser(hist, slot_g, slot_h, n_bins, penalty, wanted, feats, n_feats, g_scale, h_scale,
                reg_lambda, gain_divisor, min_child_weight, pf_score, pf_gain, pf_bin, pf_ml,
                pf_gl, pf_hl):
    for p in range(hist.shape[0] * n_feats):
        _search_pair(p, hist, slot_g, slot_h, n_bins, penalty, wanted, feats, n_feats, g_scale,
                     h_scale, reg_lambda, gain_divisor, min_child_weight, pf_score, pf_gain,
                     pf_bin, pf_ml, pf_gl, pf_hl)


# --- partition ------------------------------------------------------------------------------

@njit(inline="always")
def _part_count_task(t, Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, go_left, t_left):
    s = t_seg[t]
    col = Xb_cols[sf[s]]  # the split feature's bins, contiguous: one byte per row read
    thr = sb[s]
    ml = sm[s]
    nl = 0
    for j in range(t_lo[t], t_hi[t]):
        if _goes_left(col[rows[j]], thr, ml):
            go_left[j] = 1
            nl += 1
        else:
            go_left[j] = 0
    t_left[t] = nl


@njit(parallel=True, cache=True)
def _part_count_par(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, go_left, t_left):
    for t in prange(t_seg.shape[0]):
        _part_count_task(t, Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, go_left, t_left)


@njit(cache=True)
def _part_count_ser(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, go_left, t_left):
    for t in range(t_seg.shape[0]):
        _part_count_task(t, Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, go_left, t_left)


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
               seg_count, sf, sb, sm):
    """Stable in-place partition of each segment by its split; returns left counts (m,).

    Reads the column-major copy of the bins (``Xb_cols`` (n_features, n_samples) uint8): a
    row-major read would fetch a cache line per row for one byte (measured 9x slower at
    1,000,000 x 100)."""
    n_tasks_max = TASKS_PER_THREAD * n_threads if parallel else 1
    t_seg, t_lo, t_hi, _ = _task_table(seg_start, seg_count, n_tasks_max, rows_per_task)
    T = t_seg.shape[0]
    t_left = np.empty(T, np.int64)
    if parallel:
        _part_count_par(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, go_left, t_left)
    else:
        _part_count_ser(Xb_cols, rows, t_seg, t_lo, t_hi, sf, sb, sm, go_left, t_left)
    m = seg_start.shape[0]
    left = np.zeros(m, np.int64)
    for t in range(T):
        left[t_seg[t]] += t_left[t]
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

@njit(cache=True)
def _level_step(parallel, n_threads, rows_per_task, parallel_min_work, Xb, Xb_cols, gh, rows,
                scratch, go_left, priv, node_start,
                node_count, node_g, node_h, active, hist, n_bins, penalty, allowed, used,
                feats, n_feats, full, budget, g_scale, h_scale, reg_lambda, gain_divisor,
                min_child_weight, min_split_gain, build_next, out_feature, out_bin, out_ml,
                out_gain, admitted):
    """One tree level: search -> decide -> partition -> children's sums -> next histograms.

    ``active`` (n_slots,) int64: the level's nodes in node order; ``hist`` their histograms
    (valid for ``feats[:n_feats]``). Writes the decision of every slot into ``out_*``
    (feature -1: the node is a leaf) and the admitted features into ``admitted``.

    Returns (n_admitted, next_active, next_hist, next_feats, next_n_feats, next_full, priv):
    the next level's nodes (children of the splits, left then right, in node order), their
    histograms (the smaller child of each split built, its sibling by exact subtraction; an
    empty array when ``build_next`` is false) and the features they cover. Once the budget is
    spent only Omega's features can ever be split on, so the next histograms cover only them.
    """
    n_slots = active.shape[0]
    d = Xb.shape[1]
    slot_g = np.empty(n_slots, np.int64)
    slot_h = np.empty(n_slots, np.int64)
    for k in range(n_slots):
        slot_g[k] = node_g[active[k]]
        slot_h[k] = node_h[active[k]]
    wanted = np.empty(d, np.bool_)
    for f in range(d):
        wanted[f] = allowed[f] or used[f]
    pf_score = np.empty((n_slots, d), np.float64)
    pf_gain = np.empty((n_slots, d), np.float64)
    pf_bin = np.empty((n_slots, d), np.int64)
    pf_ml = np.empty((n_slots, d), np.int64)
    pf_gl = np.empty((n_slots, d), np.int64)
    pf_hl = np.empty((n_slots, d), np.int64)
    if parallel:
        _search_par(hist, slot_g, slot_h, n_bins, penalty, wanted, feats, n_feats, g_scale,
                    h_scale, reg_lambda, gain_divisor, min_child_weight, pf_score, pf_gain,
                    pf_bin, pf_ml, pf_gl, pf_hl)
    else:
        _search_ser(hist, slot_g, slot_h, n_bins, penalty, wanted, feats, n_feats, g_scale,
                    h_scale, reg_lambda, gain_divisor, min_child_weight, pf_score, pf_gain,
                    pf_bin, pf_ml, pf_gl, pf_hl)
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
    seg_start = np.empty(n_split, np.int64)
    seg_count = np.empty(n_split, np.int64)
    i = 0
    for k in range(n_slots):
        if choice[k] == _level.LEAF:
            out_feature[k] = -1
            out_bin[k] = 0
            out_ml[k] = False
            out_gain[k] = 0.0
            continue
        f = best_f[k] if choice[k] == _level.TAKE_BEST else fb_f[k]
        out_feature[k] = f
        out_bin[k] = pf_bin[k, f]
        out_ml[k] = pf_ml[k, f] == 1
        out_gain[k] = pf_gain[k, f]
        split_slot[i] = k
        sf[i] = f
        sb[i] = pf_bin[k, f]
        sm[i] = pf_ml[k, f] == 1
        seg_start[i] = node_start[active[k]]
        seg_count[i] = node_count[active[k]]
        i += 1

    left = _partition(parallel, n_threads, rows_per_task, Xb_cols, rows, scratch, go_left,
                      seg_start, seg_count, sf, sb, sm)
    next_active = np.empty(2 * n_split, np.int64)
    for i in range(n_split):
        k = split_slot[i]
        node = active[k]
        f = sf[i]
        lc = left[i]
        L = 2 * node + 1
        R = 2 * node + 2
        node_start[L] = node_start[node]
        node_count[L] = lc
        node_start[R] = node_start[node] + lc
        node_count[R] = node_count[node] - lc
        node_g[L] = pf_gl[k, f]
        node_h[L] = pf_hl[k, f]
        node_g[R] = node_g[node] - pf_gl[k, f]
        node_h[R] = node_h[node] - pf_hl[k, f]
        next_active[2 * i] = L
        next_active[2 * i + 1] = R

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

    if not build_next or n_split == 0:
        return (n_adm, next_active, np.empty((0, d, N_HIST_BINS, 2), HIST_DTYPE), next_feats,
                next_n_feats, next_full, priv)
    nxt = np.empty((2 * n_split, d, N_HIST_BINS, 2), HIST_DTYPE)
    b_start = np.empty(n_split, np.int64)
    b_count = np.empty(n_split, np.int64)
    b_slot = np.empty(n_split, np.int64)
    s_slot = np.empty(n_split, np.int64)
    work = 0
    for i in range(n_split):
        L = next_active[2 * i]
        R = next_active[2 * i + 1]
        if node_count[L] <= node_count[R]:
            b_start[i] = node_start[L]
            b_count[i] = node_count[L]
            b_slot[i] = 2 * i
            s_slot[i] = 2 * i + 1
        else:
            b_start[i] = node_start[R]
            b_count[i] = node_count[R]
            b_slot[i] = 2 * i + 1
            s_slot[i] = 2 * i
        work += b_count[i]
    par_next = parallel and work * next_n_feats >= parallel_min_work
    priv = _build_histograms(par_next, n_threads, rows_per_task, Xb, gh, rows, b_start, b_count,
                             b_slot, next_feats, next_n_feats, next_full, nxt, priv)
    if parallel:
        _subtract_par(next_feats, next_n_feats, split_slot, b_slot, s_slot, hist, nxt)
    else:
        _subtract_ser(next_feats, next_n_feats, split_slot, b_slot, s_slot, hist, nxt)
    return n_adm, next_active, nxt, next_feats, next_n_feats, next_full, priv


@njit(cache=True)
def _root_histogram(parallel, n_threads, rows_per_task, Xb, gh, rows, feats, n_feats, full,
                    priv):
    n, d = Xb.shape
    out = np.empty((1, d, N_HIST_BINS, 2), HIST_DTYPE)
    seg_start = np.zeros(1, np.int64)
    seg_count = np.full(1, n, np.int64)
    slot = np.zeros(1, np.int64)
    priv = _build_histograms(parallel, n_threads, rows_per_task, Xb, gh, rows, seg_start,
                             seg_count, slot, feats, n_feats, full, out, priv)
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
def _predict_binned(Xb, feature, bin_threshold, missing_left, value, tree_column, out):
    """out[i, tree_column[t]] += leaf value of tree t for row i, trees in order."""
    n = Xb.shape[0]
    n_trees = feature.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for t in range(n_trees):
                node = _leaf_binned(Xb, i, t, feature, bin_threshold, missing_left)
                out[i, tree_column[t]] += value[t, node]


@njit(parallel=True, cache=True)
def _predict_raw(X, feature, threshold, missing_left, value, tree_column, out):
    """As ``_predict_binned`` on raw float features: left iff x <= threshold (NaN by default)."""
    n = X.shape[0]
    n_trees = feature.shape[0]
    for b in prange((n + ROW_BLOCK - 1) // ROW_BLOCK):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for t in range(n_trees):
                node = _leaf_raw(X, i, t, feature, threshold, missing_left)
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
        The partition reads one feature of many rows.
    """

    __slots__ = ("by_row", "by_column")

    def __init__(self, by_row, by_column):
        self.by_row = by_row
        self.by_column = by_column

    @property
    def shape(self):
        """(n_samples, n_features)."""
        return self.by_row.shape


class _CPUTree:
    """The state of one tree being grown (host arrays; see the module docstring)."""

    __slots__ = ("Xb", "Xb_cols", "gh", "rows", "node_start", "node_count", "node_g", "node_h", "active",
                 "hist", "feats", "n_feats", "full", "parallel")


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
    """

    name = "cpu"
    xp = np

    def __init__(self, n_threads=None, rows_per_task=ROWS_PER_TASK,
                 parallel_min_work=PARALLEL_MIN_WORK):
        self.n_threads = n_threads
        self.rows_per_task = int(rows_per_task)
        self.parallel_min_work = int(parallel_min_work)
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
        """``Backend.task_table``: how ``histograms`` and ``partition`` cut segments into
        tasks (the level step cuts the same way when its level runs in parallel): a segment
        of ``c`` rows into ``min(max(c // rows_per_task, 1), 4 x threads)`` near-equal runs
        with several threads, one run otherwise (``gpufs._tasks``)."""
        n_threads = self._threads()
        n_tasks_max = TASKS_PER_THREAD * n_threads if n_threads > 1 else 1
        t_seg, t_lo, t_hi, _ = _task_table(np.asarray(seg_start, np.int64),
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
        (_round_par if self._rows_parallel(n) else _round_ser)(kind, raw, np.asarray(y), g, h,
                                                               loss)
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

    def start_tree(self, data, gh, root_g, root_h, max_depth, feats):
        """Begin a tree: every row in the root, its histogram over ``feats`` (int32 sorted
        feature indices) built. ``data`` is ``prepare_binned``'s result (or the uint8 binned
        matrix, prepared here). Returns the tree state for ``level_step``."""
        data = self.prepare_binned(data)
        Xb = data.by_row
        n, d = Xb.shape
        st = _CPUTree()
        st.Xb = Xb
        st.Xb_cols = data.by_column
        st.gh = gh
        n_nodes = 2 ** (max_depth + 1) - 1
        st.rows = self._buffer("rows", (n,), ROW_INDEX_DTYPE)
        st.rows[:] = np.arange(n, dtype=ROW_INDEX_DTYPE)
        st.node_start = np.zeros(n_nodes, np.int64)
        st.node_count = np.zeros(n_nodes, np.int64)
        st.node_g = np.zeros(n_nodes, np.int64)
        st.node_h = np.zeros(n_nodes, np.int64)
        st.node_count[0] = n
        st.node_g[0] = root_g
        st.node_h[0] = root_h
        st.active = np.zeros(1, np.int64)
        st.feats = np.ascontiguousarray(feats, dtype=np.int32)
        st.n_feats = int(st.feats.shape[0])
        st.full = st.n_feats == d
        n_threads = self._threads()
        st.parallel = n_threads > 1 and n * max(st.n_feats, 1) >= self.parallel_min_work
        priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
        st.hist, self._scratch["priv"] = _root_histogram(
            st.parallel, n_threads, self.rows_per_task, Xb, gh, st.rows, st.feats, st.n_feats, st.full, priv)
        return st

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Decide, partition and prepare the next level of tree state ``st``.

        ``split`` is a ``SplitParams``. Returns a ``LevelResult`` of host arrays (the
        decisions of this level's nodes and the features that entered Omega)."""
        n_slots = st.active.shape[0]
        d = st.Xb.shape[1]
        n = st.Xb.shape[0]
        out_feature = np.empty(n_slots, np.int32)
        out_bin = np.empty(n_slots, np.int32)
        out_ml = np.empty(n_slots, np.bool_)
        out_gain = np.empty(n_slots, np.float64)
        admitted = np.empty(d, np.int64)
        priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
        (n_adm, next_active, next_hist, next_feats, next_n_feats, next_full,
         self._scratch["priv"]) = _level_step(
            st.parallel, self._threads(), self.rows_per_task, self.parallel_min_work, st.Xb,
            st.Xb_cols, st.gh, st.rows,
            self._buffer("scratch_rows", (n,), ROW_INDEX_DTYPE),
            self._buffer("go_left", (n,), np.uint8), priv, st.node_start, st.node_count,
            st.node_g, st.node_h, st.active, st.hist, split.n_bins, penalty, allowed, used,
            st.feats, st.n_feats, st.full, budget, split.g_scale, split.h_scale,
            split.reg_lambda, split.gain_divisor, split.min_child_weight, split.min_split_gain,
            build_next, out_feature, out_bin, out_ml, out_gain, admitted)
        result = LevelResult(nodes=st.active, feature=out_feature, bin=out_bin,
                             missing_left=out_ml, gain=out_gain, admitted=admitted[:n_adm])
        st.active = next_active
        st.hist = next_hist
        st.feats = next_feats
        st.n_feats = int(next_n_feats)
        st.full = bool(next_full)
        return result

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
    def histograms(self, Xb, gh, rows, node_start, node_count, build_nodes, feats=None):
        """Histograms of ``build_nodes`` -> (len(build_nodes), d, 256, 2) int64."""
        build = np.asarray(build_nodes, np.int64)
        d = Xb.shape[1]
        feats = np.arange(d, dtype=np.int32) if feats is None else np.asarray(feats, np.int32)
        out = np.zeros((build.shape[0], d, N_HIST_BINS, 2), HIST_DTYPE)
        n_threads = self._threads()
        _build_histograms(n_threads > 1, n_threads, self.rows_per_task, Xb, gh, rows,
                          np.asarray(node_start, np.int64)[build],
                          np.asarray(node_count, np.int64)[build],
                          np.arange(build.shape[0], dtype=np.int64), feats, feats.shape[0],
                          feats.shape[0] == d, out, np.empty((0, 0), HIST_DTYPE))
        return out

    def find_splits(self, hist, node_g, node_h, penalty, allowed, split):
        """``Backend.find_splits``: ``_gain``'s bin scan per (slot, feature) by the level
        step's serial driver, then ``_level``'s rule per slot (``best_splits``)."""
        k, d = hist.shape[0], hist.shape[1]
        feats = np.arange(d, dtype=np.int32)
        allowed = np.asarray(allowed, np.bool_)
        pf = [np.empty((k, d), dt) for dt in (np.float64, np.float64, np.int64, np.int64,
                                              np.int64, np.int64)]
        _search_ser(hist, np.asarray(node_g, np.int64), np.asarray(node_h, np.int64),
                    np.asarray(split.n_bins, np.int32), np.asarray(penalty, np.float64),
                    allowed, feats, d, float(split.g_scale), float(split.h_scale),
                    float(split.reg_lambda), float(split.gain_divisor),
                    float(split.min_child_weight), *pf)
        return best_splits(allowed, *pf)

    def partition(self, Xb, rows, node_start, node_count, split_nodes, split_feature,
                  split_bin, missing_left):
        """Stable in-place partition of each split node's segment (left rows, then right
        rows, each in their original order); returns left counts (n_split,) int64."""
        split_nodes = np.asarray(split_nodes, np.int64)
        n_threads = self._threads()
        return _partition(n_threads > 1, n_threads, self.rows_per_task,
                          self.prepare_binned(Xb).by_column, rows, np.empty_like(rows),
                          np.empty(rows.shape[0], np.uint8),
                          np.asarray(node_start, np.int64)[split_nodes],
                          np.asarray(node_count, np.int64)[split_nodes],
                          np.asarray(split_feature, np.int64), np.asarray(split_bin, np.int64),
                          np.asarray(missing_left, np.bool_))

    # --- prediction -----------------------------------------------------------------------
    def predict_binned(self, Xb, feature, bin_threshold, missing_left, value, tree_column, out):
        _predict_binned(Xb, feature, bin_threshold, missing_left, value, tree_column, out)
        return out

    def predict_raw(self, X, feature, threshold, missing_left, value, tree_column, out):
        X = np.asarray(X)
        if X.dtype != np.float32 and X.dtype != np.float64:
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        _predict_raw(X, feature, threshold, missing_left, value, tree_column, out)
        return out


_NO_WEIGHTS = np.empty(0, np.float64)


def _no_weights(w):
    return _NO_WEIGHTS if w is None else w
