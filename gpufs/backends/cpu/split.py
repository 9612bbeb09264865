"""The CPU's split search: the best split of every (node, feature) pair of a level.

Owns ``_search_range`` (one run of (slot, feature) pairs, scanned by ``gpufs.rules._gain``'s bin
scan, in its blocked form ``make_scan_feature_blocked`` for pairs of many bins, or by
``gpufs.rules._categorical``'s scan) and its two drivers, ``_search_par`` (``prange`` over tasks
of pairs) and ``_search_ser``, with the sizes that choose between them. The decision over the
per-feature results is ``gpufs.rules._level``'s, in ``level.py``. The GPU's counterpart is
``cuda_kernels/split.py``.

Arguments in named tuples (``_args``): ``SearchSlots`` (``hist`` (n_slots, layout.n_slots, 2)
int64, ...), ``SplitArgs``, and ``PerFeature`` (n_slots, n_features) per-feature results.
"""

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from ..._types import HIST_DTYPE, MISSING_BIN, N_HIST_BINS
from ...rules._hist_layout import split_input
from ._args import PerFeature, SearchSlots, split_args
from ._device_fns import _scan_categorical, _scan_feature, _scan_feature_blocked

#: A (slot, feature) pair whose node has fewer rows than this many times the feature's value
#: bins is scanned over a compacted copy of its bins (``_compact_bins``): at least one of its
#: bins is empty, and the copy skips empty bins without a branch, where the scan's own skip
#: mispredicts about once per filled bin. Which pairs are compacted changes no result.
COMPACT_ROWS_PER_BIN = 1.0
#: Bins (of a pair, after compaction) from which the pair is scanned by the blocked scan
#: (``_gain.make_scan_feature_blocked``); fewer go to the scalar scan, which returns the same
#: bits. Below about 32 bins the blocked scan's three passes cost more per pair than its vector
#: loops save (bench/bench_scan.py, this 2-core box, blocked / scalar time per pair: 2-16 bins
#: 0.91-1.36, 32 bins 0.84-1.00, 64 bins 0.79-0.93, 255 bins 0.54-0.63).
BLOCKED_SCAN_MIN_BINS = 32


@njit(inline="always")
def _compact_bins(hist, k, lo, last, nb, hist_c, kept):
    """Copy the bins of one (slot, feature) that the bin scan (``_gain.make_scan_feature``)
    can score into ``hist_c[0]``, in order, and their bin numbers into ``kept``; returns
    their count ``m``: the value bins are ``hist_c[0, :m]``, the missing bin
    ``hist_c[0, m]``.

    Kept: bin 0 (the scan scores its threshold even when empty), every nonempty bin (g or h
    not 0), and the last value bin nb - 1 (the scan's end: it has no missing-left candidate
    there, and scores its missing-right one only when the bin is not empty or is bin 0). The
    scan of the copy scores the same candidates, with the same sums, in the same order, as
    the scan of the full bins; an empty bin's candidates equal those of the kept bin before
    it, which scored first, so they can never win the scan's strict ``>``. Its bin ``t`` is
    bin ``kept[t]`` of the feature.
    """
    hist_c[0, 0, 0] = hist[k, lo, 0]
    hist_c[0, 0, 1] = hist[k, lo, 1]
    kept[0] = 0
    m = 1
    for t in range(1, nb - 1):
        g = hist[k, lo + t, 0]
        h = hist[k, lo + t, 1]
        hist_c[0, m, 0] = g
        hist_c[0, m, 1] = h
        kept[m] = t
        m += np.int64((g | h) != 0)  # no branch: the next bin overwrites an empty one
    if nb > 1:
        hist_c[0, m, 0] = hist[k, lo + nb - 1, 0]
        hist_c[0, m, 1] = hist[k, lo + nb - 1, 1]
        kept[m] = nb - 1
        m += 1
    hist_c[0, m, 0] = hist[k, last, 0]
    hist_c[0, m, 1] = hist[k, last, 1]
    return m


@njit(inline="always")
def _row_bins(col, rr, rg, rh, m, nb, width, acc, bits, hist_c, kept, dense):
    """One (tiny slot, feature) pair's bins from its ``m`` rows, without a histogram: the
    rows ``rr[:m]`` (their gradients ``rg``, ``rh``) of the feature's column ``col`` summed
    into ``acc`` (256, 2) int64 by raw bin (255: missing), the bins met marked in ``bits``
    (4,) uint64; then read out in bin order and ``acc`` and ``bits`` left zero again.

    ``dense`` False: ``hist_c[0]`` and ``kept`` get exactly what ``_compact_bins`` makes of
    the pair's histogram (bin 0, the nonempty bins 1 .. nb - 2, bin nb - 1, the missing bin
    last; the sums are int64, so the order the rows are added in changes nothing) and the
    count ``m`` of its value bins is returned. ``dense`` True (a categorical feature):
    ``hist_c[0, :width]`` is the feature's histogram in its layout (value bin t at t, the
    missing bin at width - 1); returns width - 1.

    Work in the rows and the bins met, not in the feature's bins: no branch per row, and
    the bins met found a 64-bit word at a time (LightGBM and XGBoost build a histogram for
    every node; XGBoost's exact method scans a node's rows sorted per feature instead).
    """
    for j in range(m):
        b = np.int64(col[rr[j]])
        acc[b, 0] += rg[j]
        acc[b, 1] += rh[j]
        bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    if dense:
        for t in range(width):
            hist_c[0, t, 0] = 0
            hist_c[0, t, 1] = 0
        for w in range(4):
            word = bits[w]
            bits[w] = 0
            while word != 0:
                t = 64 * w + np.int64(trailing_zeros(word))
                word &= word - np.uint64(1)
                s = t if t < width - 1 else width - 1
                hist_c[0, s, 0] = acc[t, 0]
                hist_c[0, s, 1] = acc[t, 1]
                acc[t, 0] = 0
                acc[t, 1] = 0
        return width - 1
    hist_c[0, 0, 0] = acc[0, 0]
    hist_c[0, 0, 1] = acc[0, 1]
    kept[0] = 0
    c = 1
    for w in range(4):
        word = bits[w]
        bits[w] = 0
        while word != 0:
            t = 64 * w + np.int64(trailing_zeros(word))
            word &= word - np.uint64(1)
            if 1 <= t and t < nb - 1:
                g = acc[t, 0]
                h = acc[t, 1]
                hist_c[0, c, 0] = g
                hist_c[0, c, 1] = h
                kept[c] = t
                c += np.int64((g | h) != 0)  # as ``_compact_bins``: an empty sum is dropped
                acc[t, 0] = 0
                acc[t, 1] = 0
    if nb > 1:
        hist_c[0, c, 0] = acc[nb - 1, 0]
        hist_c[0, c, 1] = acc[nb - 1, 1]
        kept[c] = nb - 1
        c += 1
    hist_c[0, c, 0] = acc[MISSING_BIN, 0]
    hist_c[0, c, 1] = acc[MISSING_BIN, 1]
    acc[0, :] = 0
    acc[nb - 1, :] = 0
    acc[MISSING_BIN, :] = 0
    return c


# numpy's error model: a division by zero gives inf or NaN, as on the GPU, instead of raising.
# The scans divide only by positive numbers (the validity checks come first), so no result
# changes; the check before each division, a branch the compiler kept in the scan's inner
# loop, is gone (8 x 56 features x 255 bins: 1.93 -> 1.76 ms).
@njit(cache=True, nogil=True, error_model="numpy")
def _search_range(a, b, slots, feats, n_feats, penalty, wanted, sp, pf):
    """The best split of the (slot, feature) pairs a .. b - 1 (pair p: slot p // n_feats,
    feature feats[p % n_feats]) into ``pf`` (``PerFeature``, (n_slots, n_features) each).
    ``slots`` is a ``SearchSlots``, ``sp`` a ``SplitArgs`` (``_args``); ``penalty``
    (n_features,) float64, ``wanted`` (n_features,) bool: allowed or in Omega.

    A called function with the loop inside (not a pair body inlined into each driver's loop,
    which numba compiled 5x slower: 230 against 45 ns per pair on the wide table), slot by
    slot: a slot's sums, (G, H) as float64 and output rows are read once, not per pair
    (8,000 x 1,500: 44 against 33 ns per pair)."""
    hist = slots.hist
    off = slots.off
    slot_g = slots.slot_g
    slot_h = slots.slot_h
    slot_full = slots.slot_full
    cat_order = slots.cat_order
    slot_n = slots.slot_n
    pf_score = pf.score
    pf_gain = pf.gain
    pf_bin = pf.bin
    pf_ml = pf.missing_left
    pf_gl = pf.g_left
    pf_hl = pf.h_left
    n_bins = sp.n_bins
    g_scale = sp.g_scale
    h_scale = sp.h_scale
    reg_lambda = sp.reg_lambda
    gain_divisor = sp.gain_divisor
    min_child_weight = sp.min_child_weight
    cat_slot = sp.cat_slot
    max_onehot = sp.max_onehot
    cat_smooth = sp.cat_smooth
    cat_l2 = sp.cat_l2
    min_data_per_group = sp.min_data_per_group
    max_cat_threshold = sp.max_cat_threshold
    # 1 / scale is exact for a power of two (see ``_gain.candidate``)
    g_inv = 1.0 / g_scale
    h_inv = 1.0 / h_scale
    if b <= a:
        return
    rowwise = slots.rowwise
    by_column = slots.by_column
    # the compacted bins of one (slot, feature) pair (``_compact_bins``, ``_row_bins``)
    hist_c = np.empty((1, N_HIST_BINS + 1, 2), HIST_DTYPE)
    kept = np.empty(N_HIST_BINS + 1, np.int64)
    # the blocked scan's left sums and gains (``_gain.make_scan_feature_blocked``)
    buf_q = np.empty((4, N_HIST_BINS + 1), np.int64)
    buf_gain = np.empty((2, N_HIST_BINS + 1), np.float64)
    k_first = a // n_feats
    k_last = (b - 1) // n_feats
    any_tiny = False
    m_max = 0
    for k in range(k_first, k_last + 1):
        if rowwise.shape[0] > 0 and rowwise[k]:
            any_tiny = True
            m_max = max(m_max, slot_n[k])
    # a tiny slot's rows and gradients, gathered once; the bins' sums (``_row_bins``)
    rr = np.empty(m_max, np.int64)
    rg = np.empty(m_max, np.int64)
    rh = np.empty(m_max, np.int64)
    acc = np.zeros((N_HIST_BINS if any_tiny else 0, 2), HIST_DTYPE)
    bits = np.zeros(4, np.uint64)
    for k in range(k_first, k_last + 1):
        tiny_k = any_tiny and rowwise[k]
        m_k = 0
        if tiny_k:
            m_k = slot_n[k]
            s0 = slots.seg_start[k]
            for j in range(m_k):
                r = slots.rows[s0 + j]
                rr[j] = r
                rg[j] = slots.gh[r, 0]
                rh[j] = slots.gh[r, 1]
        G_q = slot_g[k]
        H_q = slot_h[k]
        G = G_q / g_scale
        H = H_q / h_scale
        full_k = slot_full[k]
        n_rows = float(slot_n[k])
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
            # (penalty 0): no feature that pays can score there (``level._gain_bound_pays``),
            # and its bins were never built.
            if not wanted[f] or (not full_k and pen > 0.0):
                s_score[f] = -np.inf
                continue
            c = cat_slot[f]
            lo = off[f]
            last = off[f + 1] - 1
            if c >= 0:  # categorical: ``_categorical``'s scan; pf_bin holds the left set's size
                if tiny_k:
                    w = last - lo + 1
                    _row_bins(
                        by_column[f], rr, rg, rh, m_k, n_bins[f], w, acc, bits, hist_c, kept, True
                    )
                    src, k_src, lo_src, last_src = hist_c, 0, 0, w - 1
                else:
                    src, k_src, lo_src, last_src = hist, k, lo, last
                score, gain, bn, ml, gl, hl = _scan_categorical(
                    src,
                    k_src,
                    lo_src,
                    last_src,
                    n_bins[f],
                    G_q,
                    H_q,
                    G,
                    H,
                    g_inv,
                    h_inv,
                    reg_lambda,
                    gain_divisor,
                    min_child_weight,
                    pen,
                    max_onehot,
                    cat_order[k, c],
                    n_rows,
                    cat_smooth,
                    cat_l2,
                    min_data_per_group,
                    max_cat_threshold,
                )
            else:
                # A node with fewer rows than the feature has bins scans a compacted copy of
                # its bins (``_compact_bins``); either way one scan, one formula.
                compact = tiny_k or n_rows < COMPACT_ROWS_PER_BIN * n_bins[f]
                if tiny_k:
                    m = _row_bins(
                        by_column[f], rr, rg, rh, m_k, n_bins[f], 0, acc, bits, hist_c, kept, False
                    )
                    src, k_src, lo_src, last_src, nb_src = hist_c, 0, 0, m, m
                elif compact:
                    m = _compact_bins(hist, k, lo, last, n_bins[f], hist_c, kept)
                    src, k_src, lo_src, last_src, nb_src = hist_c, 0, 0, m, m
                else:
                    src, k_src, lo_src, last_src, nb_src = hist, k, lo, last, n_bins[f]
                if nb_src >= BLOCKED_SCAN_MIN_BINS:
                    score, gain, bn, ml, gl, hl = _scan_feature_blocked(
                        src,
                        k_src,
                        lo_src,
                        last_src,
                        nb_src,
                        G_q,
                        H_q,
                        G,
                        H,
                        g_inv,
                        h_inv,
                        reg_lambda,
                        gain_divisor,
                        min_child_weight,
                        pen,
                        buf_q,
                        buf_gain,
                    )
                else:
                    score, gain, bn, ml, gl, hl = _scan_feature(
                        src,
                        k_src,
                        lo_src,
                        last_src,
                        nb_src,
                        G_q,
                        H_q,
                        G,
                        H,
                        g_inv,
                        h_inv,
                        reg_lambda,
                        gain_divisor,
                        min_child_weight,
                        pen,
                    )
                if compact:
                    bn = kept[bn]
            s_score[f] = score
            s_gain[f] = gain
            s_bin[f] = bn
            s_ml[f] = ml
            s_gl[f] = gl
            s_hl[f] = hl


#: (slot, feature) pairs per task of the parallel split search, at least; tasks at most.
SEARCH_PAIRS_PER_TASK = 64
SEARCH_TASKS_MAX = 64
#: Work of a level's split search from which it runs on the thread pool
#: (``level._search_pays_threads``), in units of about 10 ns: a histogram slot of a searched
#: feature, or a (row, feature) of a tiny node; 8,192 units against a wake-up of the pool.
SEARCH_PARALLEL_MIN_SLOTS = 1 << 13


@njit(parallel=True, cache=True, nogil=True)
def _search_par(slots, feats, n_feats, penalty, wanted, sp, pf):
    total = slots.slot_g.shape[0] * n_feats
    n_tasks = max(1, min(SEARCH_TASKS_MAX, total // SEARCH_PAIRS_PER_TASK))
    for t in prange(n_tasks):
        _search_range(
            (t * total) // n_tasks,
            ((t + 1) * total) // n_tasks,
            slots,
            feats,
            n_feats,
            penalty,
            wanted,
            sp,
            pf,
        )


@njit(cache=True, nogil=True)
def _search_ser(slots, feats, n_feats, penalty, wanted, sp, pf):
    # np.int64(0), not 0: a literal would compile a second specialisation of _search_range
    _search_range(
        np.int64(0), slots.slot_g.shape[0] * n_feats, slots, feats, n_feats, penalty, wanted, sp, pf
    )


def feature_gains(hist, node_g, node_h, node_n, split):
    """The best split's gain of every (slot, feature): the level step's scans, without
    penalties, on host histograms (any device's ``Backend.histograms``, copied to the host:
    the scans are bit for bit the GPU's).

    Parameters
    ----------
    hist : ndarray of shape (n_slots, layout.n_slots, 2), int64
        In ``split``'s layout.
    node_g, node_h, node_n : ndarray of shape (n_slots,), int64
        Each slot's fixed-point sums and row count.
    split : SplitParams

    Returns
    -------
    ndarray of shape (n_slots, n_features), float64
        The gain; -inf where the feature has no valid split.
    """
    hist, layout = split_input(np.ascontiguousarray(hist, HIST_DTYPE), split)
    k, d = hist.shape[0], layout.n_features
    sp = split_args(split)
    pf = PerFeature(
        *(
            np.empty((k, d), dt)
            for dt in (np.float64, np.float64, np.int64, np.int64, np.int64, np.int64)
        )
    )
    slots = SearchSlots(
        hist,
        layout.offset,
        np.asarray(node_g, np.int64),
        np.asarray(node_h, np.int64),
        np.ones(k, np.bool_),
        np.zeros((k, sp.n_cat, N_HIST_BINS), np.uint8),
        np.asarray(node_n, np.int64),
    )
    _search_ser(slots, np.arange(d, dtype=np.int32), d, np.zeros(d), np.ones(d, np.bool_), sp, pf)
    return np.where(pf.score > -np.inf, pf.gain, -np.inf)
