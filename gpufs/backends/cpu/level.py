"""The CPU's level step: one compiled call per tree level, and the node gain bounds.

Owns ``_level_step`` (search -> decide -> partition -> children's sums -> next histograms) and
its two halves, ``_level_decide`` (reads only histograms and node sums) and ``_level_advance``
(reads only the decisions and the rows), which a cluster runs apart (``gpufs.dask``); the
root's histogram; and the node gain bounds (``_gain_bound_pays``, ``_bound_term``) that let a
node skip the paying features' histograms. The decision rule is ``gpufs.rules._level``'s, the same
one the GPU's search kernel compiles (``cuda_kernels/split.py``).

Parallelism: a level calls the ``prange`` drivers only when it has enough work to pay for
waking threads (``PARALLEL_MIN_WORK``, ``SEARCH_PARALLEL_MIN_SLOTS``).
"""

import numpy as np
from numba import njit, prange

from ..._types import HIST_DTYPE, N_HIST_BINS
from ...rules import _level
from ._args import (
    Decisions,
    HistSource,
    LevelOut,
    LevelState,
    NodeSums,
    PerFeature,
    Rows,
    Run,
    SearchSlots,
    Segments,
    Selection,
    SplitArgs,
    SplitRule,
    TinyRows,
    TreeArrays,
)
from ._device_fns import _best_over_features, _decide_level, _left_word
from .histogram import build_histograms, row_cost, subtract_par, subtract_ser
from .partition import _partition
from .split import SEARCH_PAIRS_PER_TASK, SEARCH_PARALLEL_MIN_SLOTS, _search_par, _search_ser

#: Row x feature updates below which a level runs on the calling thread only.
PARALLEL_MIN_WORK = 1 << 18
#: A split whose node has fewer rows than this many times the layout's slots per feature
#: gives tiny children (``_is_tiny``): ``Run.tiny`` of ``CPUBackend.level_step``.
TINY_ROWS_PER_SLOT = 1.0


# cache=True as well: the backend also calls it from Python (see row_cost)
@njit(inline="always", cache=True, nogil=True)
def _gain_bound_pays(
    s_node, g_q, h_q, g_inv, h_inv, reg_lambda, n_rows, gain_divisor, pay_min, min_split_gain
):
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


# cache=True as well: the backend also calls it from Python (see row_cost)
@njit(inline="always", cache=True, nogil=True)
def _is_tiny(parent_rows, d, n_hist, tiny):
    """Whether the children of a node of ``parent_rows`` rows are tiny: they get no
    histograms (neither built nor subtracted), and the split search sums their bins from their
    rows (``split._row_bins``), when the parent has fewer rows than ``tiny`` times the
    layout's slots per feature (``n_hist / d``); the root is tiny by its own rows (its
    histogram is then not built: ``CPUBackend.start_tree``). A tiny node's children are tiny
    too. Which nodes are tiny changes no result (``tiny`` 0: none is)."""
    return parent_rows * d < tiny * n_hist


@njit(inline="always")
def _node_is_tiny(node, count, d, n_hist, tiny):
    """Whether ``node`` is tiny (``_is_tiny`` of its parent's rows, ``count`` the per-node
    row counts; the root is tiny by its own rows): the search sums its bins from its rows."""
    parent = (node - 1) // 2 if node > 0 else 0
    return tiny > 0.0 and _is_tiny(count[parent], d, n_hist, tiny)


@njit(inline="always")
def _paying_min(penalty, feats, n_feats, free):
    """The smallest penalty of the listed features that are not ``free`` (inf: none pays)."""
    m = np.inf
    for i in range(n_feats):
        f = feats[i]
        if not free[f] and penalty[f] < m:
            m = penalty[f]
    return m


@njit(cache=True, nogil=True)
def _level_step(run, data, priv, nodes, level, sp, sel, groups, build_next, out):
    """One tree level: search -> decide -> partition -> children's sums -> next histograms.

    The arguments are named tuples (``_args``): ``run`` a ``Run``; ``data`` the ``Rows``
    (``data.src`` the ``HistSource`` of ``histogram.build_histograms``: the binned matrix by
    row and by column, the gradients, the rows, the layout's offsets, ...); ``priv`` the histograms'
    scratch; ``nodes`` the ``NodeSums``; ``level`` the ``LevelState`` (``hist`` valid for
    ``feats[:n_feats]``; for a slot with ``slot_full`` False only for the free features, those
    whose penalty is 0); ``sp`` the ``SplitArgs``; ``sel`` the ``Selection``. Writes the
    decision of every slot into ``out`` (a ``LevelOut``; feature -1: the node is a leaf).
    Categorical features (``sp.cat_slot[f] >= 0``) are searched by ``_categorical``'s scan;
    their splits' bitsets go to ``out.cat_bits`` (zeros on other slots), their bin is 0.

    Histograms only where they can matter. With bound terms ``data.q`` (n_samples,) float64
    (empty: none), ``nodes.s`` holds each node's sum of them; a node whose gain bound
    (``_gain_bound_pays``) cannot pay the cheapest penalty of a feature outside Omega can only
    split on free features, so its children's histograms are built over those alone. Skipping
    a feature that cannot score above ``min_split_gain`` changes no decision: it can never be
    the node's choice, and a best split it would have displaced was a leaf anyway.
    ``groups`` (n_features,) int32: a feature admitted here makes its group free next level.

    Returns (n_admitted, next_level, priv): ``next_level`` a plain tuple in ``LevelState``'s
    field order (``_level_decide_entry`` says why) for the next
    level's nodes (children of the splits, left then right, in node order), their histograms
    (the smaller child of each split built, its sibling by exact subtraction; an empty array
    when ``build_next`` is false), the features they cover, and which of them cover the
    paying features too. Once the budget is spent only Omega's
    features can ever be split on, so the next histograms cover only them.

    The two halves are separate functions, compiled into this one call, so that a cluster can
    run them apart (``gpufs.dask``): ``_level_decide`` reads only the histograms and the
    nodes' sums, ``_level_advance`` only the decisions and the rows.
    """
    src = data.src
    par_search = run.n_threads > 1 and _search_pays_threads(
        level, nodes.count, src.offset, run.tiny
    )
    rw = TinyRows(run.tiny, src.by_column, src.gh, src.rows, data.node_start)
    dec = _level_decide(par_search, src.offset, nodes, level, sp, sel, data.q.shape[0] > 0, out, rw)
    next_level, _, priv = _level_advance(
        run, data, priv, nodes, level, sp, sel.penalty, groups, dec, build_next
    )
    return dec.n_admitted, next_level, priv


@njit(cache=True, nogil=True)
def _level_step_flat(run, data, priv, nodes, level, sp, sel, groups, build_next, out):
    """``_level_step`` called from Python with plain tuples in the named tuples' field order
    (``data``'s first field a plain ``HistSource`` too): numba types a named tuple argument in
    Python, field by field, and a plain tuple in C (this 2-core box: 12.8 against 3.3 us a
    call of the level step's arguments, which a tree of 189 rows makes 4 times)."""
    return _level_step(
        Run(*run),
        Rows(HistSource(*data[0]), data[1], data[2], data[3], data[4]),
        priv,
        NodeSums(*nodes),
        LevelState(*level),
        SplitArgs(*sp),
        Selection(*sel),
        groups,
        build_next,
        LevelOut(*out),
    )


@njit(inline="always")
def _search_pays_threads(level, count, off, tiny):
    """Whether a level's split search has the work to pay for waking the thread pool: at
    least ``SEARCH_PARALLEL_MIN_SLOTS`` units of about 10 ns (a histogram slot of a searched
    feature; a (row, feature) of a tiny node, whose bins the search sums from its rows), and
    two tasks of pairs (``split._search_par``). Which driver runs changes no result."""
    d = off.shape[0] - 1
    n_hist = off[d]
    n_slots = level.active.shape[0]
    if n_slots * level.n_feats < 2 * SEARCH_PAIRS_PER_TASK:
        return False
    hist_work = n_hist * level.n_feats // d  # the searched features' slots of one node
    work = 0
    for k in range(n_slots):
        node = level.active[k]
        if _node_is_tiny(node, count, d, n_hist, tiny):
            work += count[node] * level.n_feats
        else:
            work += hist_work
    return work >= SEARCH_PARALLEL_MIN_SLOTS


@njit(cache=True, nogil=True)
def _grow_levels_flat(run, data, priv, nodes, level, sp, sel, groups, depth, max_depth, tree):
    """Levels ``depth``, ``depth + 1``, ... of one tree in one call (``_level_step`` each, the
    arguments as ``_level_step_flat``'s), until a level admits a feature into Omega (the
    caller then updates the penalties: ``sel`` holds only between admissions), no node
    splits, or the tree reaches ``max_depth``. A tree of a few hundred rows spent more time
    in Python between its level steps than in them.

    ``tree`` is a ``TreeArrays`` (plain tuple), the tree's per-node arrays: each split's
    decision is written at its node; leaves are left as they are. Returns (depth reached,
    done, admitted (n_admitted,) int64 in order, the level state as ``_level_step``'s, priv).
    """
    run = Run(*run)
    rows = Rows(HistSource(*data[0]), data[1], data[2], data[3], data[4])
    nodes = NodeSums(*nodes)
    lv = LevelState(*level)
    sp = SplitArgs(*sp)
    sel = Selection(*sel)
    tree = TreeArrays(*tree)
    admitted = np.empty(sp.n_bins.shape[0], np.int64)
    n_words = tree.cat_bits.shape[1]
    n_adm = 0
    n_split = 0
    while depth < max_depth:
        active = lv.active
        n_slots = active.shape[0]
        out = LevelOut(
            np.empty(n_slots, np.int32),
            np.empty(n_slots, np.int32),
            np.empty(n_slots, np.bool_),
            np.empty(n_slots, np.float64),
            np.empty((n_slots, n_words), np.uint32),
            admitted,
        )
        n_adm, nxt, priv = _level_step(
            run, rows, priv, nodes, lv, sp, sel, groups, depth + 1 < max_depth, out
        )
        lv = LevelState(*nxt)
        depth += 1
        n_split = 0
        for k in range(n_slots):
            if out.feature[k] < 0:
                continue
            node = active[k]
            tree.feature[node] = out.feature[k]
            tree.bin[node] = out.bin[k]
            tree.missing_left[node] = out.missing_left[k]
            tree.gain[node] = out.gain[k]
            for w in range(n_words):
                tree.cat_bits[node, w] = out.cat_bits[k, w]
            n_split += 1
        if n_adm > 0 or n_split == 0:
            break
    done = n_split == 0 or depth >= max_depth
    state = (lv.active, lv.hist, lv.feats, lv.n_feats, lv.full, lv.slot_full)
    return depth, done, admitted[:n_adm], state, priv


@njit(cache=True, nogil=True)
def _level_decide_entry(n_threads, off, nodes, level, sp, sel, bounded, out):
    """``_level_decide`` for a call from Python (a cluster's driver, which has no rows, so no
    tiny nodes), its search on the pool by ``_search_pays_threads``' rule: its ``Decisions``
    as a plain tuple, in that order. Compiled calls called from Python return no named tuple:
    numba boxes one by calling its class, Python code where a signal's handler can raise, and
    a Ctrl-C there killed the process with SIGSEGV (CLI test, 2026-11-26)."""
    parallel = n_threads > 1 and _search_pays_threads(level, nodes.count, off, 0.0)
    rw = TinyRows(
        0.0,
        np.empty((0, 0), np.uint8),
        np.empty((0, 2), np.int64),
        np.empty(0, np.int32),
        np.empty(0, np.int64),
    )
    d = _level_decide(parallel, off, nodes, level, sp, sel, bounded, out, rw)
    return (
        d.split_slot,
        d.feature,
        d.bin,
        d.missing_left,
        d.is_cat,
        d.cat_bits,
        d.left_g,
        d.left_h,
        d.n_admitted,
        d.admitted_now,
        d.search_full,
        d.next_feats,
        d.next_n_feats,
        d.next_full,
    )


@njit(cache=True, nogil=True)
def _level_decide(parallel, off, nodes, level, sp, sel, bounded, out, rw):
    """The first half of ``_level_step``: search and decide. Reads no rows, but those of the
    tiny nodes (``_is_tiny`` with ``rw.tiny``; ``rw`` a ``TinyRows``), which have no
    histograms.

    ``parallel``: whether the search runs on the thread pool; ``off`` the layout's offsets
    (n_features + 1,); ``bounded`` whether the tree keeps gain bounds (``nodes.s``); the tree's
    row count, the rounding allowance of ``_gain_bound_pays``, is ``nodes.count[0]``. The
    other arguments and ``out`` are ``_level_step``'s. Returns the level's ``Decisions``: for
    each split, in node order, its slot, feature and bin (bin 0 for a categorical split),
    missing-left flag, whether it is categorical and its bitset, and its left child's
    fixed-point sums; the features admitted at this level (n_features,) bool; which slots
    were searched over the paying features too (n_slots,) bool; and the features the next
    level's histograms cover.
    """
    node_g = nodes.g
    node_h = nodes.h
    node_s = nodes.s
    n = nodes.count[0]
    active = level.active
    hist = level.hist
    feats = level.feats
    n_feats = level.n_feats
    full = level.full
    slot_full = level.slot_full
    penalty = sel.penalty
    allowed = sel.allowed
    used = sel.used
    budget = sel.budget
    n_bins = sp.n_bins
    g_scale = sp.g_scale
    h_scale = sp.h_scale
    reg_lambda = sp.reg_lambda
    gain_divisor = sp.gain_divisor
    min_split_gain = sp.min_split_gain
    cat_slot = sp.cat_slot
    n_cat = sp.n_cat
    out_feature = out.feature
    out_bin = out.bin
    out_ml = out.missing_left
    out_gain = out.gain
    out_bits = out.cat_bits
    admitted = out.admitted
    n_slots = active.shape[0]
    d = n_bins.shape[0]
    slot_g = np.empty(n_slots, np.int64)
    slot_h = np.empty(n_slots, np.int64)
    slot_n = np.empty(n_slots, np.int64)
    for k in range(n_slots):
        slot_g[k] = node_g[active[k]]
        slot_h[k] = node_h[active[k]]
        slot_n[k] = nodes.count[active[k]]
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
                search_full[k] = _gain_bound_pays(
                    node_s[node],
                    node_g[node],
                    node_h[node],
                    g_inv,
                    h_inv,
                    reg_lambda,
                    n,
                    gain_divisor,
                    pay_min,
                    min_split_gain,
                )
    pf_score = np.empty((n_slots, d), np.float64)
    pf_gain = np.empty((n_slots, d), np.float64)
    pf_bin = np.empty((n_slots, d), np.int64)
    pf_ml = np.empty((n_slots, d), np.int64)
    pf_gl = np.empty((n_slots, d), np.int64)
    pf_hl = np.empty((n_slots, d), np.int64)
    # the categorical scan's order of each (slot, categorical feature): the left set first
    cat_order = np.empty((n_slots, n_cat, N_HIST_BINS), np.uint8)
    rowwise = np.zeros(n_slots if rw.tiny > 0.0 else 0, np.bool_)
    seg_start = np.zeros(rowwise.shape[0], np.int64)
    for k in range(rowwise.shape[0]):
        if _node_is_tiny(active[k], nodes.count, d, off[d], rw.tiny):
            rowwise[k] = True
            seg_start[k] = rw.node_start[active[k]]
    slots = SearchSlots(
        hist,
        off,
        slot_g,
        slot_h,
        search_full,
        cat_order,
        slot_n,
        rowwise,
        rw.by_column,
        rw.gh,
        rw.rows,
        seg_start,
    )
    pf = PerFeature(pf_score, pf_gain, pf_bin, pf_ml, pf_gl, pf_hl)
    if parallel:
        _search_par(slots, feats, n_feats, penalty, wanted, sp, pf)
    else:
        _search_ser(slots, feats, n_feats, penalty, wanted, sp, pf)
    best_f = np.empty(n_slots, np.int64)
    best_s = np.empty(n_slots, np.float64)
    fb_f = np.empty(n_slots, np.int64)
    fb_s = np.empty(n_slots, np.float64)
    for k in range(n_slots):
        best_f[k], best_s[k], fb_f[k], fb_s[k] = _best_over_features(
            k, feats, n_feats, allowed, used, pf_score
        )
    choice = np.empty(n_slots, np.int64)
    admitted_now = np.zeros(d, np.bool_)
    n_adm = _decide_level(
        n_slots,
        best_f,
        best_s,
        fb_f,
        fb_s,
        used,
        admitted_now,
        budget,
        min_split_gain,
        choice,
        admitted,
    )

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
    return Decisions(
        split_slot,
        sf,
        sb,
        sm,
        sc,
        sbits,
        sgl,
        shl,
        n_adm,
        admitted_now,
        search_full,
        next_feats,
        next_n_feats,
        next_full,
    )


@njit(cache=True, nogil=True)
def _level_advance(run, data, priv, nodes, level, sp, penalty, groups, dec, build_next):
    """The second half of ``_level_step``: partition the rows by ``_level_decide``'s
    decisions (and sum the children's bound terms when ``q`` is not empty), set the
    children's segments and sums, decide which children's histograms cover the paying
    features, and build the next level's histograms over ``next_feats`` (the smaller child of
    each split, by this process's row counts, and its sibling by exact subtraction from
    ``hist``; both children of a pair whose parent covered the free features only while a
    feature was admitted at this level).

    The arguments are ``_level_step``'s, with ``dec`` the ``Decisions`` of
    ``_level_decide``. Returns (next_level, left, priv): ``left`` (n_split,) int64 the rows
    each split sent left; the others as ``_level_step``'s.
    """
    parallel, parallel_min_work = run.parallel, run.parallel_min_work
    src = data.src
    node_start = data.node_start
    q = data.q
    scratch = data.scratch
    go_left = data.go_left
    node_count = nodes.count
    node_g = nodes.g
    node_h = nodes.h
    node_s = nodes.s
    active = level.active
    hist = level.hist
    g_scale = sp.g_scale
    h_scale = sp.h_scale
    reg_lambda = sp.reg_lambda
    gain_divisor = sp.gain_divisor
    min_split_gain = sp.min_split_gain
    split_slot = dec.split_slot
    sf = dec.feature
    sb = dec.bin
    sm = dec.missing_left
    sc = dec.is_cat
    sbits = dec.cat_bits
    sgl = dec.left_g
    shl = dec.left_h
    n_adm = dec.n_admitted
    admitted_now = dec.admitted_now
    search_full = dec.search_full
    next_feats = dec.next_feats
    next_n_feats = dec.next_n_feats
    next_full = dec.next_full
    Xb_cols = src.by_column
    rows = src.rows
    off = src.offset
    n, d = src.by_row.shape
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
    left = _partition(
        run,
        Xb_cols,
        rows,
        scratch,
        go_left,
        seg_start,
        seg_count,
        SplitRule(sf, sb, sm, sc, sbits),
        q,
        seg_q,
    )
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
                    need = need or _gain_bound_pays(
                        node_s[ch],
                        node_g[ch],
                        node_h[ch],
                        g_inv,
                        h_inv,
                        reg_lambda,
                        n,
                        gain_divisor,
                        pay_next,
                        min_split_gain,
                    )
            next_slot_full[2 * i] = need
            next_slot_full[2 * i + 1] = need

    if not build_next or n_split == 0:
        return (
            (
                next_active,
                np.empty((0, n_hist, 2), HIST_DTYPE),
                next_feats,
                next_n_feats,
                next_full,
                next_slot_full,
            ),
            left,
            priv,
        )
    # Tiny pairs (``_is_tiny``) get no histograms: the search reads their rows.
    tiny_pair = np.zeros(n_split, np.bool_)
    n_tiny = 0
    for i in range(n_split if run.tiny > 0.0 else 0):
        if _is_tiny(node_count[active[split_slot[i]]], d, n_hist, run.tiny):
            tiny_pair[i] = True
            n_tiny += 1
    nxt = np.empty((2 * n_split if n_tiny < n_split else 0, n_hist, 2), HIST_DTYPE)
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
            if next_slot_full[2 * i] == want_full and not tiny_pair[i]:
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
            if next_slot_full[2 * i] != want_full or tiny_pair[i]:
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
        priv = build_histograms(
            par_next,
            run,
            src,
            Segments(b_start, b_count, b_slot, b_g, b_h),
            g_feats,
            g_n,
            g_all,
            nxt,
            priv,
        )
        if direct:
            continue
        if parallel:
            subtract_par(g_feats, g_n, off, p_slot, b_slot, s_slot, hist, nxt)
        else:
            subtract_ser(g_feats, g_n, off, p_slot, b_slot, s_slot, hist, nxt)
    return ((next_active, nxt, next_feats, next_n_feats, next_full, next_slot_full), left, priv)


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


@njit(cache=True, nogil=True, error_model="numpy")
def _bound_sample_sum(gh, step, g_inv, h_inv):
    """The sum of ``_bound_term`` over the rows 0, step, 2 step, ... of ``gh`` (n, 2) int64
    fixed point: ``CPUBackend._bounds_may_skip``'s estimate, once numpy calls costing more
    than the sum on a tree of a few hundred rows."""
    acc = 0.0
    for i in range(0, gh.shape[0], step):
        acc += _bound_term(gh[i, 0], gh[i, 1], g_inv, h_inv)
    return acc


@njit(parallel=True, cache=True, nogil=True)
def _bound_terms_par(gh, g_inv, h_inv, out, sums):
    for c in prange(sums.shape[0]):
        _bound_chunk(c, sums.shape[0], gh, g_inv, h_inv, out, sums)


@njit(cache=True, nogil=True)
def _bound_terms_ser(gh, g_inv, h_inv, out, sums):
    for c in range(sums.shape[0]):
        _bound_chunk(c, sums.shape[0], gh, g_inv, h_inv, out, sums)


@njit(cache=True, nogil=True)
def _root_histogram(run, src, root_g, root_h, feats, n_feats, full, priv):
    """The root's histogram (1, n_slots, 2) int64 over the listed features (every row);
    ``run`` and ``src`` plain tuples in ``Run``'s and ``HistSource``'s field order (as
    ``_level_step_flat``'s, for the same reason)."""
    run = Run(*run)
    src = HistSource(*src)
    n, d = src.by_row.shape
    out = np.empty((1, src.offset[d], 2), HIST_DTYPE)
    segs = Segments(
        np.zeros(1, np.int64),
        np.full(1, n, np.int64),
        np.zeros(1, np.int64),
        np.full(1, root_g, np.int64),
        np.full(1, root_h, np.int64),
    )
    priv = build_histograms(run.parallel, run, src, segs, feats, n_feats, full, out, priv)
    return out, priv
