"""Split search and decisions of one tree level: one launch, the CPU's rule bit for bit.

``search_kernel(hist, prev, bld, derive, nodes, active, n_active, feats2, fcur, ctrl, offset,
n_bins, penalty, allowed, used, g_scale, h_scale, reg_lambda, gain_divisor, min_child_weight,
cat_slot, max_onehot, cat_order, pf_f, pf_i, decide, fmask2, active_next, admitted_now,
budget, min_split_gain, rows_per_task, dec_f, dec_i, spl, out_i, out_f)``
  One thread per (slot, feature of the list): the best split of that feature at that node by
  ``_gain``'s one bin scan (``scan_feature``: candidate order, empty-bin skip, tie-break),
  exactly as the CPU's ``_search_pair``; a categorical feature (``cat_slot[f] >= 0``) by
  ``_categorical``'s scan, which writes its scan order to ``cat_order[k, cat_slot[f]]``
  ((S, n_categorical, 256) uint8 scratch; pf_i's bin is then the size of the left set).
  Features neither allowed nor in Omega score -inf.
  With ``derive`` set, a slot that is the sibling of a built child (the previous level's
  build table ``bld``: built slot, sibling slot, parent slot) first gets its histogram of the
  feature as parent - built (``prev`` holds the parents'): the subtraction is fused into the
  search, so no launch and no extra pass over the siblings' histograms.
  hist (S, n_slots, 2) int64 in the layout of ``offset`` ((d + 1,) int64: feature f's bins at
  slots offset[f] .. offset[f + 1] - 1, ``gpufs._hist_layout``; the subtraction and the scan
  touch only those); nodes (4, n_nodes) int64 node table (start, count, G_q, H_q);
  active (n_active,) int64 the level's nodes in node order; feats2 (2, d) int32 and
  ctrl[4 + fcur] the feature list; n_bins (d,) int32; penalty (d,) float64; allowed, used
  (d,) bool. Writes pf_f (2, S, d) float64 [score, gain] and pf_i (4, S, d) int64 [bin,
  missing_left, G_L, H_L] at the listed features. Launch: 1-D grid-stride, any size.
  With ``decide`` set, the last block to finish (a ticket in ctrl[7], zero between launches,
  after a ``threadfence``) then decides the level (``_decide``, below), so search and
  decision are one launch.

``_decide`` (the same arguments; run by one block, any size)
  Thread k runs ``_level.best_over_features`` for slot k; thread 0 then runs
  ``_level.decide_level`` (the shared rule: feature budget, Omega-only fallback, leaf or split)
  and, in slot order, writes the level's results, the split table and the children's sums.
  Outputs:
    out_i / out_f  views of one int64 / float64 buffer (the level's one device -> host copy):
                   [0] admitted count, [1] splits, [2] features of the next list,
                   [3:3 + d] admitted features in order, then
                   n_active entries each of feature (-1: leaf), bin, missing_left, gain
                   (float64), left count (written by ``partition_plan_kernel``), G_L, H_L,
                   then CAT_WORDS fields: the bitset of a categorical split (``left_word``
                   of its scan order; its bin is 0), zeros otherwise
    spl (SPL_ROWS, S) int64 split table: node, slot, feature, bin, missing_left, segment
                   start, segment count, first partition task, the CAT_WORDS words of a
                   categorical split's bitset, 1 for a categorical split (else 0)
    nodes          children's G_q, H_q (their start and count come from the partition)
    active_next    the next level's nodes: children of the splits, left then right
    feats2[1 - fcur], ctrl[5 - fcur]  the next level's feature list: this one, or only
                   Omega's once the budget is spent (the CPU's rule); fmask2[1 - fcur] (d,)
                   uint8 the same list as a mask (``histogram.histogram_kernel`` reads it)
    ctrl[0] splits, ctrl[1] partition tasks
  dec_f (2, S) float64 / dec_i (3, S) int64 and admitted_now (d,) bool are scratch.
"""
import math

from numba import cuda, int32

from gpufs._categorical import CAT_WORDS

from ._device_fns import (LEAF, TAKE_BEST, best_over_features, decide_level, gpu_task_count,
                          left_word, scan_categorical, scan_feature)

#: Fields of one slot in the level's output buffer, in order (then CAT_WORDS bitset words).
OUT_FIELDS = ("feature", "bin", "missing_left", "gain", "left_count", "g_left", "h_left")
_N_FIELDS = len(OUT_FIELDS)
#: Fields per slot in the output buffer: OUT_FIELDS, then the category bitset's words.
N_OUT = _N_FIELDS + CAT_WORDS
#: Rows of the split table ``spl``: node, slot, feature, bin, missing_left, segment start,
#: segment count, first task, the CAT_WORDS bitset words, and 1 for a categorical split.
SPL_ROWS = 8 + CAT_WORDS + 1
_LC = 4
#: ctrl's word counting the blocks of a fused launch that are done (zero between launches).
_TICKET = 7


@cuda.jit(cache=True)
def search_kernel(hist, prev, bld, derive, nodes, active, n_active, feats2, fcur, ctrl, offset,
                  n_bins, penalty, allowed, used, g_scale, h_scale, reg_lambda, gain_divisor,
                  min_child_weight, cat_slot, max_onehot, cat_order, pf_f, pf_i, decide,
                  fmask2, active_next, admitted_now, budget, min_split_gain, rows_per_task,
                  dec_f, dec_i, spl, out_i, out_f):
    _search(hist, prev, bld, derive, nodes, active, n_active, feats2, fcur, ctrl, offset,
            n_bins, penalty, allowed, used, g_scale, h_scale, reg_lambda, gain_divisor,
            min_child_weight, cat_slot, max_onehot, cat_order, pf_f, pf_i)
    if not decide:
        return
    # The last block to finish decides (no second launch): every block makes its results
    # visible device-wide, then takes a ticket; the block holding the last one sees them all
    # (CUDA's threadFenceReduction pattern; no block reads pf_f / pf_i before that).
    cuda.threadfence()
    cuda.syncthreads()
    last = cuda.shared.array(1, dtype=int32)
    if cuda.threadIdx.x == 0:
        last[0] = 1 if cuda.atomic.add(ctrl, _TICKET, 1) == cuda.gridDim.x - 1 else 0
    cuda.syncthreads()
    if last[0] == 0:
        return
    cuda.threadfence()
    if cuda.threadIdx.x == 0:
        ctrl[_TICKET] = 0  # for the level's next fused launch
    _decide(pf_f, pf_i, feats2, fmask2, fcur, nodes, active, active_next, n_active, allowed,
            used, admitted_now, budget, min_split_gain, rows_per_task, dec_f, dec_i, spl, ctrl,
            out_i, out_f, cat_slot, cat_order)


@cuda.jit(device=True)
def _search(hist, prev, bld, derive, nodes, active, n_active, feats2, fcur, ctrl, offset,
            n_bins, penalty, allowed, used, g_scale, h_scale, reg_lambda, gain_divisor,
            min_child_weight, cat_slot, max_onehot, cat_order, pf_f, pf_i):
    d = feats2.shape[1]
    n_f = ctrl[4 + fcur]
    # 1 / scale is exact for a power of two (see ``_gain.candidate``)
    g_inv = 1.0 / g_scale
    h_inv = 1.0 / h_scale
    p = cuda.grid(1)
    while p < n_active * d:
        k = p // d
        i = p - k * d
        if i < n_f:
            f = feats2[fcur, i]
            lo = offset[f]
            last = offset[f + 1] - 1
            s = k >> 1
            if derive and bld[3, s] == k:
                # The sibling of a built child: parent - built, exact in int64, written out
                # (the next level subtracts from it) and then scanned by this same thread.
                parent = bld[4, s]
                built = bld[2, s]
                for w in range(lo, last + 1):
                    hist[k, w, 0] = prev[parent, w, 0] - hist[built, w, 0]
                    hist[k, w, 1] = prev[parent, w, 1] - hist[built, w, 1]
            if allowed[f] or used[f]:
                node = active[k]
                G_q = nodes[2, node]
                H_q = nodes[3, node]
                c = cat_slot[f]
                if c >= 0:
                    score, gain, b, ml, gl, hl = scan_categorical(
                        hist, k, lo, last, n_bins[f], G_q, H_q, G_q / g_scale, H_q / h_scale,
                        g_inv, h_inv, reg_lambda, gain_divisor, min_child_weight, penalty[f],
                        max_onehot, cat_order[k, c])
                else:
                    score, gain, b, ml, gl, hl = scan_feature(
                        hist, k, lo, last, n_bins[f], G_q, H_q, G_q / g_scale, H_q / h_scale,
                        g_inv, h_inv, reg_lambda, gain_divisor, min_child_weight, penalty[f])
                pf_f[0, k, f] = score
                pf_f[1, k, f] = gain
                pf_i[0, k, f] = b
                pf_i[1, k, f] = ml
                pf_i[2, k, f] = gl
                pf_i[3, k, f] = hl
            else:
                pf_f[0, k, f] = -math.inf
        p += cuda.gridsize(1)


@cuda.jit(device=True)
def _decide(pf_f, pf_i, feats2, fmask2, fcur, nodes, active, active_next, n_active, allowed,
            used, admitted_now, budget, min_split_gain, rows_per_task, dec_f, dec_i, spl, ctrl,
            out_i, out_f, cat_slot, cat_order):
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    d = feats2.shape[1]
    n_f = ctrl[4 + fcur]
    fe = feats2[fcur]
    score = pf_f[0]
    for k in range(t, n_active, nt):
        bf, bs, uf, us = best_over_features(k, fe, n_f, allowed, used, score)
        dec_i[0, k] = bf
        dec_f[0, k] = bs
        dec_i[1, k] = uf
        dec_f[1, k] = us
    for f in range(t, d, nt):
        admitted_now[f] = False
    cuda.syncthreads()
    nxt = 1 - fcur
    if t == 0:
        n_adm = decide_level(n_active, dec_i[0], dec_f[0], dec_i[1], dec_f[1], used,
                             admitted_now, budget, min_split_gain, dec_i[2], out_i[3:])
        base = 3 + d
        n_split = 0
        n_tasks = 0
        for k in range(n_active):
            c = dec_i[2, k]
            if c == LEAF:
                out_i[base + k] = -1
                out_i[base + n_active + k] = 0
                out_i[base + 2 * n_active + k] = 0
                out_f[base + 3 * n_active + k] = 0.0
                out_i[base + 4 * n_active + k] = 0
                out_i[base + 5 * n_active + k] = 0
                out_i[base + 6 * n_active + k] = 0
                for w in range(CAT_WORDS):
                    out_i[base + (_N_FIELDS + w) * n_active + k] = 0
                continue
            f = dec_i[0, k] if c == TAKE_BEST else dec_i[1, k]
            node = active[k]
            gl = pf_i[2, k, f]
            hl = pf_i[3, k, f]
            b = pf_i[0, k, f]
            cs = cat_slot[f]
            for w in range(CAT_WORDS):  # a categorical split's left set: its bitset
                word = 0
                if cs >= 0:
                    word = left_word(cat_order[k, cs], b, w)
                out_i[base + (_N_FIELDS + w) * n_active + k] = word
                spl[8 + w, n_split] = word
            if cs >= 0:
                b = 0  # a categorical split has no bin threshold
                spl[8 + CAT_WORDS, n_split] = 1
            else:
                spl[8 + CAT_WORDS, n_split] = 0
            out_i[base + k] = f
            out_i[base + n_active + k] = b
            out_i[base + 2 * n_active + k] = pf_i[1, k, f]
            out_f[base + 3 * n_active + k] = pf_f[1, k, f]
            out_i[base + 5 * n_active + k] = gl
            out_i[base + 6 * n_active + k] = hl
            count = nodes[1, node]
            spl[0, n_split] = node
            spl[1, n_split] = k
            spl[2, n_split] = f
            spl[3, n_split] = b
            spl[4, n_split] = pf_i[1, k, f]
            spl[5, n_split] = nodes[0, node]
            spl[6, n_split] = count
            spl[7, n_split] = n_tasks
            n_tasks += gpu_task_count(count, rows_per_task)
            left = 2 * node + 1
            nodes[2, left] = gl
            nodes[3, left] = hl
            nodes[2, left + 1] = nodes[2, node] - gl
            nodes[3, left + 1] = nodes[3, node] - hl
            active_next[2 * n_split] = left
            active_next[2 * n_split + 1] = left + 1
            n_split += 1
        out_i[0] = n_adm
        out_i[1] = n_split
        ctrl[0] = n_split
        ctrl[1] = n_tasks
        # The next level's features: all of today's, or only Omega's once the budget is spent.
        if budget >= 0 and n_adm >= budget:
            m = 0
            for f in range(d):
                fmask2[nxt, f] = 0
                if used[f] or admitted_now[f]:
                    feats2[nxt, m] = f
                    fmask2[nxt, f] = 1
                    m += 1
            ctrl[4 + nxt] = m
            ctrl[6] = 1
        else:
            ctrl[4 + nxt] = n_f
            ctrl[6] = 0
        out_i[2] = ctrl[4 + nxt]
    cuda.syncthreads()
    if ctrl[6] == 0:
        for i in range(t, n_f, nt):
            feats2[nxt, i] = fe[i]
        for f in range(t, d, nt):
            fmask2[nxt, f] = fmask2[fcur, f]

