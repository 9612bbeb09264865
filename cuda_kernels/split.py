"""Split search and decisions of one tree level: one launch, the CPU's rule bit for bit.

``search_kernel(hist, prev, bld, derive, nodes, active, n_active, feats2, fcur, ctrl, offset,
n_bins, penalty, allowed, used, scal, cat_slot, cat_order, pf_f, pf_i, decide, fmask2,
active_next, admitted_now, rows_per_task, dec_f, dec_i, spl, out_i, out_f)``
  scal (N_SCAL,) float64 (``gpufs._types.SEARCH_SCALARS``): g_scale, h_scale, reg_lambda,
  gain_divisor, min_child_weight, min_split_gain, max_cat_to_onehot, cat_smooth, cat_l2,
  min_data_per_group, max_cat_threshold, the level's feature budget (-1: none) -- in device
  memory, so a level's launch arguments are the same from tree to tree.
  One block per (slot, feature of the list): the best split of that feature at that node,
  the result of ``_gain``'s one bin scan (``scan_feature``: candidates, order, tie-break),
  exactly as the CPU's ``_search_pair``, by the block's threads (``_scan_block``: int64
  block scans of the bins, then a reduction); a categorical feature (``cat_slot[f] >= 0``) by
  ``_categorical``'s scan, which writes its scan order to ``cat_order[k, cat_slot[f]]``
  ((S, n_categorical, 256) uint8 scratch; pf_i's bin is then the size of the left set).
  Features neither allowed nor in Omega score -inf.
  With ``derive`` set, a slot that is the sibling of a built child (the previous level's
  build table ``bld``: built slot, sibling slot, parent slot) first gets its histogram of the
  feature as parent - built (``prev`` holds the parents'): the subtraction is fused into the
  search, so no launch and no extra pass over the siblings' histograms (neighbouring threads
  subtract neighbouring slots).
  hist (S, n_slots, 2) int64 in the layout of ``offset`` ((d + 1,) int64: feature f's bins at
  slots offset[f] .. offset[f + 1] - 1, ``gpufs.rules._hist_layout``; the subtraction and the scan
  touch only those); nodes (N_NODE_ROWS, n_nodes) int64 node table (the NODE_* rows);
  active (n_active,) int64 the level's nodes in node order; feats2 (2, d) int32 and
  ctrl[CTRL_N_FEATS + fcur] the feature list; n_bins (d,) int32; penalty (d,) float64;
  allowed, used (d,) bool. Writes pf_f (2, S, d) float64 [score, gain] and pf_i (4, S, d)
  int64 [bin, missing_left, G_L, H_L] (the PF_* rows) at the listed features. Launch: 1-D,
  any number of blocks (each takes pairs block-stride), a power of two <=
  ``MAX_SEARCH_THREADS`` threads.
  With ``decide`` set, the last block to finish (a ticket in ctrl[CTRL_TICKET], zero between
  launches, after a ``threadfence``) then decides the level (``_decide``, below), so search and
  decision are one launch.

``_decide`` (the same arguments; run by one block, any size)
  Thread k runs ``_level.best_over_features`` for slot k; thread 0 then runs
  ``_level.decide_level`` (the shared rule: feature budget, Omega-only fallback, leaf or split)
  and, in slot order, writes the level's results, the split table and the children's sums.
  Outputs:
    out_i / out_f  views of one int64 / float64 buffer (the level's one device -> host copy):
                   (the OUT_* words of ``gpufs._types``) admitted count, splits,
                   features of the next list, d admitted features in order, then
                   n_active entries each of feature (-1: leaf), bin, missing_left, gain
                   (float64), left count (written by ``partition_plan_kernel``), G_L, H_L,
                   then CAT_WORDS fields: the bitset of a categorical split (``left_word``
                   of its scan order; its bin is 0), zeros otherwise
    spl (SPL_ROWS, S) int64 split table: node, slot, feature, bin, missing_left, segment
                   start, segment count, first partition task, the CAT_WORDS words of a
                   categorical split's bitset, 1 for a categorical split (else 0)
    nodes          children's G_q, H_q (their start and count come from the partition)
    active_next    the next level's nodes: children of the splits, left then right
    feats2[1 - fcur], ctrl[CTRL_N_FEATS + 1 - fcur]  the next level's feature list: this
                   one, or only Omega's once the budget is spent (the CPU's rule);
                   fmask2[1 - fcur] (d,) uint8 the same list as a mask
                   (``histogram.histogram_kernel`` reads it)
    ctrl[CTRL_N_SEGMENTS] splits, ctrl[CTRL_SPLIT_TASKS] partition tasks
  dec_f (2, S) float64 / dec_i (3, S) int64 and admitted_now (d,) bool are scratch.
"""

import math

from numba import cuda, float64, int32, int64

from gpufs._types import (  # noqa: F401 (N_OUT, OUT_FIELDS, SPL_ROWS re-exported)
    BLD_PARENT,
    BLD_SIBLING,
    BLD_SLOT,
    CAT_WORDS,
    CTRL_N_FEATS,
    CTRL_N_SEGMENTS,
    CTRL_NEW_LIST,
    CTRL_SPLIT_TASKS,
    N_OUT,
    NODE_COUNT,
    NODE_G,
    NODE_H,
    NODE_START,
    OUT_ADMITTED,
    OUT_BIN,
    OUT_CAT_BITS,
    OUT_FEATURE,
    OUT_FIELDS,
    OUT_G_LEFT,
    OUT_GAIN,
    OUT_H_LEFT,
    OUT_LEFT_COUNT,
    OUT_MISSING_LEFT,
    OUT_N_ADMITTED,
    OUT_N_NEXT,
    OUT_N_SPLITS,
    PF_BIN,
    PF_G_LEFT,
    PF_GAIN,
    PF_H_LEFT,
    PF_MISSING_LEFT,
    PF_SCORE,
    SCAL_BUDGET,
    SCAL_CAT_L2,
    SCAL_CAT_SMOOTH,
    SCAL_G_SCALE,
    SCAL_GAIN_DIVISOR,
    SCAL_H_SCALE,
    SCAL_MAX_CAT_THRESHOLD,
    SCAL_MAX_CAT_TO_ONEHOT,
    SCAL_MIN_CHILD_WEIGHT,
    SCAL_MIN_DATA_PER_GROUP,
    SCAL_MIN_SPLIT_GAIN,
    SCAL_REG_LAMBDA,
    SPL_BIN,
    SPL_CAT_BITS,
    SPL_COUNT,
    SPL_FEATURE,
    SPL_FIRST_TASK,
    SPL_IS_CAT,
    SPL_MISSING_LEFT,
    SPL_NODE,
    SPL_ROWS,
    SPL_SLOT,
    SPL_START,
)

from ._device_fns import (
    LEAF,
    TAKE_BEST,
    best_over_features,
    block_inclusive_scan,
    candidate,
    decide_level,
    gpu_task_count,
    last_block_done,
    left_word,
    scan_categorical,
)

# The layouts of ``scal``, ``ctrl``, ``bld``, ``nodes``, ``pf_f`` / ``pf_i``, the output buffer
# (OUT_FIELDS, N_OUT) and the split table (SPL_ROWS) are ``gpufs._types``', shared with the
# backend.
#: The most threads of a search block (its shared scratch's width); a power of two.
MAX_SEARCH_THREADS = 128
#: A candidate index past every real one (2 x bins + missing side).
_NO_CANDIDATE = 1 << 62


@cuda.jit(cache=True)
def search_kernel(
    hist,
    prev,
    bld,
    derive,
    nodes,
    active,
    n_active,
    feats2,
    fcur,
    ctrl,
    offset,
    n_bins,
    penalty,
    allowed,
    used,
    scal,
    cat_slot,
    cat_order,
    pf_f,
    pf_i,
    decide,
    fmask2,
    active_next,
    admitted_now,
    rows_per_task,
    dec_f,
    dec_i,
    spl,
    out_i,
    out_f,
):
    _search(
        hist,
        prev,
        bld,
        derive,
        nodes,
        active,
        n_active,
        feats2,
        fcur,
        ctrl,
        offset,
        n_bins,
        penalty,
        allowed,
        used,
        scal[SCAL_G_SCALE],
        scal[SCAL_H_SCALE],
        scal[SCAL_REG_LAMBDA],
        scal[SCAL_GAIN_DIVISOR],
        scal[SCAL_MIN_CHILD_WEIGHT],
        cat_slot,
        int64(scal[SCAL_MAX_CAT_TO_ONEHOT]),
        cat_order,
        pf_f,
        pf_i,
        scal[SCAL_CAT_SMOOTH],
        scal[SCAL_CAT_L2],
        scal[SCAL_MIN_DATA_PER_GROUP],
        int64(scal[SCAL_MAX_CAT_THRESHOLD]),
    )
    if not decide:
        return
    # The last block to finish decides (no second launch; no block reads pf_f / pf_i before
    # every block's results are visible).
    if not last_block_done(ctrl, cuda.shared.array(1, dtype=int32)):
        return
    _decide(
        pf_f,
        pf_i,
        feats2,
        fmask2,
        fcur,
        nodes,
        active,
        active_next,
        n_active,
        allowed,
        used,
        admitted_now,
        int64(scal[SCAL_BUDGET]),
        scal[SCAL_MIN_SPLIT_GAIN],
        rows_per_task,
        dec_f,
        dec_i,
        spl,
        ctrl,
        out_i,
        out_f,
        cat_slot,
        cat_order,
    )


@cuda.jit(device=True)
def _search(
    hist,
    prev,
    bld,
    derive,
    nodes,
    active,
    n_active,
    feats2,
    fcur,
    ctrl,
    offset,
    n_bins,
    penalty,
    allowed,
    used,
    g_scale,
    h_scale,
    reg_lambda,
    gain_divisor,
    min_child_weight,
    cat_slot,
    max_onehot,
    cat_order,
    pf_f,
    pf_i,
    cat_smooth,
    cat_l2,
    min_data_per_group,
    max_cat_threshold,
):
    d = feats2.shape[1]
    n_f = ctrl[CTRL_N_FEATS + fcur]
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    sh_i = cuda.shared.array((3, MAX_SEARCH_THREADS), dtype=int64)
    sh_f = cuda.shared.array((2, MAX_SEARCH_THREADS), dtype=float64)
    # 1 / scale is exact for a power of two (see ``_gain.candidate``)
    g_inv = 1.0 / g_scale
    h_inv = 1.0 / h_scale
    p = cuda.blockIdx.x  # one block per (slot, feature): every branch below is block-uniform
    while p < n_active * d:
        k = p // d
        i = p - k * d
        if i < n_f:
            f = feats2[fcur, i]
            lo = offset[f]
            last = offset[f + 1] - 1
            s = k >> 1
            if derive and bld[BLD_SIBLING, s] == k:
                # The sibling of a built child: parent - built, exact in int64, written out
                # (the next level subtracts from it); neighbouring threads, neighbouring slots.
                parent = bld[BLD_PARENT, s]
                built = bld[BLD_SLOT, s]
                for w in range(lo + t, last + 1, nt):
                    hist[k, w, 0] = prev[parent, w, 0] - hist[built, w, 0]
                    hist[k, w, 1] = prev[parent, w, 1] - hist[built, w, 1]
                cuda.syncthreads()
            if allowed[f] or used[f]:
                node = active[k]
                G_q = nodes[NODE_G, node]
                H_q = nodes[NODE_H, node]
                c = cat_slot[f]
                if c >= 0:
                    # one thread: the scan sorts its categories in the scratch ``cat_order``
                    score, gain, b, ml, gl, hl = (
                        -math.inf,
                        0.0,
                        int64(0),
                        int64(0),
                        int64(0),
                        int64(0),
                    )
                    if t == 0:
                        score, gain, b, ml, gl, hl = scan_categorical(
                            hist,
                            k,
                            lo,
                            last,
                            n_bins[f],
                            G_q,
                            H_q,
                            G_q / g_scale,
                            H_q / h_scale,
                            g_inv,
                            h_inv,
                            reg_lambda,
                            gain_divisor,
                            min_child_weight,
                            penalty[f],
                            max_onehot,
                            cat_order[k, c],
                            float64(nodes[NODE_COUNT, node]),
                            cat_smooth,
                            cat_l2,
                            min_data_per_group,
                            max_cat_threshold,
                        )
                else:
                    score, gain, b, ml, gl, hl = _scan_block(
                        hist,
                        k,
                        lo,
                        last,
                        n_bins[f],
                        H_q,
                        G_q / g_scale,
                        H_q / h_scale,
                        g_inv,
                        h_inv,
                        reg_lambda,
                        gain_divisor,
                        min_child_weight,
                        penalty[f],
                        sh_i,
                        sh_f,
                    )
                if t == 0:
                    pf_f[PF_SCORE, k, f] = score
                    pf_f[PF_GAIN, k, f] = gain
                    pf_i[PF_BIN, k, f] = b
                    pf_i[PF_MISSING_LEFT, k, f] = ml
                    pf_i[PF_G_LEFT, k, f] = gl
                    pf_i[PF_H_LEFT, k, f] = hl
            elif t == 0:
                pf_f[PF_SCORE, k, f] = -math.inf
        cuda.syncthreads()  # the shared scratch is free again
        p += cuda.gridDim.x


@cuda.jit(device=True)
def _scan_block(
    hist,
    k,
    lo,
    last,
    nb,
    H_q,
    G,
    H,
    g_inv,
    h_inv,
    reg_lambda,
    gain_divisor,
    min_child_weight,
    pen,
    sh_i,
    sh_f,
):
    """``_gain.scan_feature``'s result by the whole block (a power of two of threads): the
    same candidates, each scored by the same ``candidate`` call, the same choice.

    The bins go through in chunks of one per thread; an exact int64 block scan gives each
    thread its threshold's left sums (the serial scan's running sums, bit for bit). The serial
    scan keeps the first candidate of the strictly best score in its order (t ascending,
    missing right before missing left; see its docstring: an empty bin's candidates repeat
    the previous ones, and the score is non-decreasing in the gain, so its gain pre-check
    changes no choice), so each thread keeps its own first best, and a tree reduction takes
    the higher score, on equal scores the earlier candidate. Thread 0 returns the result
    (the others' values are partial)."""
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    gn_q = hist[k, last, 0]
    hn_q = hist[k, last, 1]
    has_missing = gn_q != 0 or hn_q != 0
    parent = (G * G) / (H + reg_lambda)  # ``parent_term``, as in ``scan_feature``
    n_thr = nb if has_missing else nb - 1
    b_score = -math.inf
    b_gain = 0.0
    b_idx = _NO_CANDIDATE
    b_gl = int64(0)
    b_hl = int64(0)
    carry_g = int64(0)
    carry_h = int64(0)
    for c in range(0, n_thr, nt):
        tb = c + t
        bg = int64(0)
        bh = int64(0)
        if tb < n_thr:
            bg = hist[k, lo + tb, 0]
            bh = hist[k, lo + tb, 1]
        gl_q = carry_g + block_inclusive_scan(sh_i[0], t, nt, bg)
        hl_q = carry_h + block_inclusive_scan(sh_i[1], t, nt, bh)
        carry_g += sh_i[0, nt - 1]
        carry_h += sh_i[1, nt - 1]
        cuda.syncthreads()  # every thread has read the totals before the next chunk's scan
        if tb < n_thr:
            gain, score = candidate(
                gl_q,
                hl_q,
                H_q,
                G,
                H,
                parent,
                g_inv,
                h_inv,
                reg_lambda,
                gain_divisor,
                min_child_weight,
                pen,
            )
            if score > b_score:
                b_score = score
                b_gain = gain
                b_idx = 2 * tb
                b_gl = gl_q
                b_hl = hl_q
            if has_missing and tb != nb - 1:
                cg = gl_q + gn_q
                ch = hl_q + hn_q
                gain, score = candidate(
                    cg,
                    ch,
                    H_q,
                    G,
                    H,
                    parent,
                    g_inv,
                    h_inv,
                    reg_lambda,
                    gain_divisor,
                    min_child_weight,
                    pen,
                )
                if score > b_score:
                    b_score = score
                    b_gain = gain
                    b_idx = 2 * tb + 1
                    b_gl = cg
                    b_hl = ch
    sh_f[0, t] = b_score
    sh_f[1, t] = b_gain
    sh_i[0, t] = b_idx
    sh_i[1, t] = b_gl
    sh_i[2, t] = b_hl
    cuda.syncthreads()
    half = nt >> 1
    while half > 0:
        if t < half:
            o = t + half
            if sh_f[0, o] > sh_f[0, t] or (sh_f[0, o] == sh_f[0, t] and sh_i[0, o] < sh_i[0, t]):
                sh_f[0, t] = sh_f[0, o]
                sh_f[1, t] = sh_f[1, o]
                sh_i[0, t] = sh_i[0, o]
                sh_i[1, t] = sh_i[1, o]
                sh_i[2, t] = sh_i[2, o]
        cuda.syncthreads()
        half >>= 1
    score = sh_f[0, 0]
    if score == -math.inf:  # no valid candidate: the serial scan's initial values
        return score, 0.0, int64(0), int64(0), int64(0), int64(0)
    idx = sh_i[0, 0]
    return score, sh_f[1, 0], idx >> 1, idx & 1, sh_i[1, 0], sh_i[2, 0]


@cuda.jit(device=True)
def _decide(
    pf_f,
    pf_i,
    feats2,
    fmask2,
    fcur,
    nodes,
    active,
    active_next,
    n_active,
    allowed,
    used,
    admitted_now,
    budget,
    min_split_gain,
    rows_per_task,
    dec_f,
    dec_i,
    spl,
    ctrl,
    out_i,
    out_f,
    cat_slot,
    cat_order,
):
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    d = feats2.shape[1]
    n_f = ctrl[CTRL_N_FEATS + fcur]
    fe = feats2[fcur]
    score = pf_f[PF_SCORE]
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
        n_adm = decide_level(
            n_active,
            dec_i[0],
            dec_f[0],
            dec_i[1],
            dec_f[1],
            used,
            admitted_now,
            budget,
            min_split_gain,
            dec_i[2],
            out_i[OUT_ADMITTED:],
        )
        base = OUT_ADMITTED + d
        n_split = 0
        n_tasks = 0
        for k in range(n_active):
            c = dec_i[2, k]
            if c == LEAF:
                out_i[base + OUT_FEATURE * n_active + k] = -1
                out_i[base + OUT_BIN * n_active + k] = 0
                out_i[base + OUT_MISSING_LEFT * n_active + k] = 0
                out_f[base + OUT_GAIN * n_active + k] = 0.0
                out_i[base + OUT_LEFT_COUNT * n_active + k] = 0
                out_i[base + OUT_G_LEFT * n_active + k] = 0
                out_i[base + OUT_H_LEFT * n_active + k] = 0
                for w in range(CAT_WORDS):
                    out_i[base + (OUT_CAT_BITS + w) * n_active + k] = 0
                continue
            f = dec_i[0, k] if c == TAKE_BEST else dec_i[1, k]
            node = active[k]
            gl = pf_i[PF_G_LEFT, k, f]
            hl = pf_i[PF_H_LEFT, k, f]
            b = pf_i[PF_BIN, k, f]
            cs = cat_slot[f]
            for w in range(CAT_WORDS):  # a categorical split's left set: its bitset
                word = 0
                if cs >= 0:
                    word = left_word(cat_order[k, cs], b, w)
                out_i[base + (OUT_CAT_BITS + w) * n_active + k] = word
                spl[SPL_CAT_BITS + w, n_split] = word
            if cs >= 0:
                b = 0  # a categorical split has no bin threshold
                spl[SPL_IS_CAT, n_split] = 1
            else:
                spl[SPL_IS_CAT, n_split] = 0
            out_i[base + OUT_FEATURE * n_active + k] = f
            out_i[base + OUT_BIN * n_active + k] = b
            out_i[base + OUT_MISSING_LEFT * n_active + k] = pf_i[PF_MISSING_LEFT, k, f]
            out_f[base + OUT_GAIN * n_active + k] = pf_f[PF_GAIN, k, f]
            out_i[base + OUT_G_LEFT * n_active + k] = gl
            out_i[base + OUT_H_LEFT * n_active + k] = hl
            count = nodes[NODE_COUNT, node]
            spl[SPL_NODE, n_split] = node
            spl[SPL_SLOT, n_split] = k
            spl[SPL_FEATURE, n_split] = f
            spl[SPL_BIN, n_split] = b
            spl[SPL_MISSING_LEFT, n_split] = pf_i[PF_MISSING_LEFT, k, f]
            spl[SPL_START, n_split] = nodes[NODE_START, node]
            spl[SPL_COUNT, n_split] = count
            spl[SPL_FIRST_TASK, n_split] = n_tasks
            n_tasks += gpu_task_count(count, rows_per_task)
            left = 2 * node + 1
            nodes[NODE_G, left] = gl
            nodes[NODE_H, left] = hl
            nodes[NODE_G, left + 1] = nodes[NODE_G, node] - gl
            nodes[NODE_H, left + 1] = nodes[NODE_H, node] - hl
            active_next[2 * n_split] = left
            active_next[2 * n_split + 1] = left + 1
            n_split += 1
        out_i[OUT_N_ADMITTED] = n_adm
        out_i[OUT_N_SPLITS] = n_split
        ctrl[CTRL_N_SEGMENTS] = n_split
        ctrl[CTRL_SPLIT_TASKS] = n_tasks
        # The next level's features: all of today's, or only Omega's once the budget is spent.
        if budget >= 0 and n_adm >= budget:
            m = 0
            for f in range(d):
                fmask2[nxt, f] = 0
                if used[f] or admitted_now[f]:
                    feats2[nxt, m] = f
                    fmask2[nxt, f] = 1
                    m += 1
            ctrl[CTRL_N_FEATS + nxt] = m
            ctrl[CTRL_NEW_LIST] = 1
        else:
            ctrl[CTRL_N_FEATS + nxt] = n_f
            ctrl[CTRL_NEW_LIST] = 0
        out_i[OUT_N_NEXT] = ctrl[CTRL_N_FEATS + nxt]
    cuda.syncthreads()
    if ctrl[CTRL_NEW_LIST] == 0:
        for i in range(t, n_f, nt):
            feats2[nxt, i] = fe[i]
        for f in range(t, d, nt):
            fmask2[nxt, f] = fmask2[fcur, f]
