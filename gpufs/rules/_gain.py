"""The one split-gain formula and bin scan, the split, tree-walk and binning rules, as plain
scalar Python.

Both backends compile these same functions: the CPU backend with ``numba.njit`` and the GPU
kernels with ``numba.cuda.jit(device=True)``. Nothing else in gpufs computes a gain.

Why the formulas are written this way: the GPU must pick bit-for-bit the same split as the CPU.
CUDA contracts ``a * b + c`` into one fused multiply-add, which rounds differently from a
multiply then an add. Every expression below therefore feeds a product only into a division or
a comparison, never straight into an addition or subtraction, so no backend can fuse it:
``candidate`` divides the gain (instead of multiplying by a reciprocal) and the penalty vector
arrives precomputed (``mu * cost`` is formed once on the host in ``penalties.py``).
"""

import math

from .._types import MAX_VALUE_BINS, MISSING_BIN

#: The cut matrix's columns (``bin_of``): at most ``MAX_VALUE_BINS - 1`` cut points per
#: feature, padded with +inf.
CUT_COLUMNS = MAX_VALUE_BINS - 1


def parent_term(g_parent, h_parent, reg_lambda):
    """G^2 / (H + lambda): the parent's part of every candidate's gain (computed once per
    node; the same operations as inside the gain, so the same bits)."""
    return (g_parent * g_parent) / (h_parent + reg_lambda)


def candidate(
    g_left_q,
    h_left_q,
    h_parent_q,
    g_parent,
    h_parent,
    parent,
    g_inv,
    h_inv,
    reg_lambda,
    gain_divisor,
    min_child_weight,
    penalty,
):
    """Gain and penalized score of one split candidate; score is -inf when it is not valid.

    Inputs: the candidate's left sums (G_L, H_L) and the node's H, in fixed point (int64);
    the node's (G, H) as float64 and ``parent = parent_term(G, H, lambda)``; ``g_inv`` and
    ``h_inv``, the reciprocals of the power-of-two fixed-point scales (exact, so multiplying
    by them rounds exactly as dividing by the scales would); ``gain_divisor`` (1 for GBFS,
    the root's largest gain for A-GBM) and ``penalty`` (the penalty vector's entry for the
    candidate's feature, 0 when free).

    Valid: both children hold hessian > 0 and >= ``min_child_weight``. Then
      gain  = 1/2 * (G_L^2/(H_L+lambda) + G_R^2/(H_R+lambda) - G^2/(H+lambda))
      score = gain / gain_divisor - penalty
    The split searches of both backends call this one function and keep the best score with
    a strict ``>``, so an invalid candidate (-inf) is never chosen.

    Fused multiply-adds: ``G_L = g_left_q * g_inv`` and ``H_L`` are exact products (a power
    of two times an integer-valued double), so a GPU contracting ``G - G_L`` or ``H_L + l``
    into an FMA rounds exactly as the CPU's separate operations do.
    """
    # No helper calls: both backends compile this function as it stands, and a jitted
    # function cannot call a plain Python one.
    if h_left_q <= 0 or h_parent_q - h_left_q <= 0:
        return 0.0, -math.inf
    h_left = h_left_q * h_inv
    if h_left < min_child_weight or (h_parent_q - h_left_q) * h_inv < min_child_weight:
        return 0.0, -math.inf
    g_left = g_left_q * g_inv
    g_right = g_parent - g_left
    h_right = h_parent - h_left
    twice = (
        (g_left * g_left) / (h_left + reg_lambda)
        + (g_right * g_right) / (h_right + reg_lambda)
        - parent
    )
    gain = twice / 2.0
    if gain_divisor == 1.0:  # x / 1 == x exactly: skip the division
        return gain, gain - penalty
    return gain, gain / gain_divisor - penalty


def leaf_value(g_sum, h_sum, reg_lambda, learning_rate):
    """Leaf output: -G / (H + lambda), scaled by the learning rate."""
    return (-g_sum / (h_sum + reg_lambda)) * learning_rate


def goes_left(b, threshold, missing_left):
    """The partition / prediction rule on bins: the missing bin follows ``missing_left``,
    any other bin goes left iff ``b <= threshold``."""
    if b == MISSING_BIN:
        return missing_left != 0  # callers pass a bool or an int64 from a packed table
    return b <= threshold


def goes_left_raw(x, threshold, missing_left):
    """The same rule on raw values: NaN follows ``missing_left``, else ``x <= threshold``
    (a split on bin t has threshold cuts[t], so this equals ``goes_left`` on the bin of x)."""
    if x != x:  # NaN
        return missing_left != 0
    return x <= threshold


def make_leaf_of(rule):
    """``leaf_of`` bound to a compiled split rule (``_categorical.split_goes_left`` for binned
    features, ``split_goes_left_raw`` for raw values): the one tree walk of prediction.

    A jitted function can only call jitted functions, so each backend passes its own
    compilation of the rule, as for ``make_scan_feature``.
    """

    def leaf_of(X, i, t, feature, threshold, missing_left, is_cat, cat_bits):
        """The node of tree ``t`` that row ``i`` of ``X`` ends in.

        From the root, a node with ``feature[t, node] >= 0`` sends the row to child
        ``2 * node + 1`` when ``rule(X[i, f], threshold[t, node], missing_left[t, node],
        is_cat[f], cat_bits[t, node])`` holds for its feature f, else to ``2 * node + 2``; the
        first node with feature -1 is the leaf. ``feature`` (n_trees, n_nodes) int32;
        ``threshold`` the bin (uint8) or value (float64) thresholds; ``missing_left``
        (n_trees, n_nodes) bool; ``is_cat`` (n_features,) bool; ``cat_bits`` (n_trees,
        n_nodes, words) uint32 category bitsets (words may be 0 without categorical features).
        """
        node = 0
        while feature[t, node] >= 0:
            f = feature[t, node]
            if rule(
                X[i, f], threshold[t, node], missing_left[t, node], is_cat[f], cat_bits[t, node]
            ):
                node = 2 * node + 1
            else:
                node = 2 * node + 2
        return node

    return leaf_of


def bin_of(x, cuts, f):
    """The bin of value ``x`` of feature ``f``: the number of its cut points below x, or
    ``MISSING_BIN`` for NaN. ``cuts`` is the cut matrix (n_features, ``CUT_COLUMNS``) float64,
    each row's cut points ascending and padded with +inf (``engine.binning.BinMapper``); a pad
    is below no value, so the count is that of the feature's own cut points.

    A binary search of fixed shape over the whole padded row (the branch-free search of
    Khuong and Morin, "Array Layouts for Comparison-Based Searching", ACM Journal of
    Experimental Algorithmics 22, 2017): eight probes of falling stride and a last one, each
    adding its stride when the probed cut is below x. No branch depends on the data, so
    the CPU's loop over a block of rows runs without mispredictions (it was a chain of
    eight of them per value) and a GPU warp does not diverge. NaN compares false with every
    cut; the NaN test comes last for the same reason. Strides 127 + 63 + 32 + 16 + 8 + 4 + 2
    + 1 + 1 reach 254 = ``CUT_COLUMNS``, the largest count; the largest index read is 253.
    """
    b = 0
    b += 127 * (cuts[f, b + 127] < x)
    b += 63 * (cuts[f, b + 63] < x)
    b += 32 * (cuts[f, b + 32] < x)
    b += 16 * (cuts[f, b + 16] < x)
    b += 8 * (cuts[f, b + 8] < x)
    b += 4 * (cuts[f, b + 4] < x)
    b += 2 * (cuts[f, b + 2] < x)
    b += 1 * (cuts[f, b + 1] < x)
    b += 1 * (cuts[f, b] < x)
    return b if x == x else MISSING_BIN


#: ``bin_of_few`` serves features of at most this many cut points.
FEW_CUTS = 16


def bin_of_few(x, cuts, f):
    """``bin_of`` for a feature of at most ``FEW_CUTS`` (16) cut points: its last five probes.

    From b = 0 the first four probes of ``bin_of`` read ``cuts[f, 127]``, ``[f, 63]``,
    ``[f, 32]`` and ``[f, 16]``: pads (+inf) for such a feature, below no value, so they add
    nothing and b is still 0 when the fifth probe comes; the rest is ``bin_of``'s, so the bin
    is the same. Five dependent loads instead of nine.
    """
    b = 0
    b += 8 * (cuts[f, b + 8] < x)
    b += 4 * (cuts[f, b + 4] < x)
    b += 2 * (cuts[f, b + 2] < x)
    b += 1 * (cuts[f, b + 1] < x)
    b += 1 * (cuts[f, b] < x)
    return b if x == x else MISSING_BIN


def bin_of_one(x, cuts, f):
    """``bin_of`` for a feature of at most one cut point (a flag): its last probe. Every
    earlier probe of ``bin_of`` reads a pad from b = 0 (``bin_of_few``'s reason)."""
    b = 1 * (cuts[f, 0] < x)
    return b if x == x else MISSING_BIN


def make_scan_feature(candidate):
    """``scan_feature`` bound to a compiled ``candidate`` (a jitted function can only call
    jitted functions, so each backend passes its own compilation of ``candidate``)."""

    def scan_feature(
        hist,
        k,
        lo,
        last,
        nb,
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
    ):
        """The best split of one feature at node ``k`` of a level's histograms: the one bin
        scan.

        ``hist`` is int64 (n_nodes, n_slots, 2), fixed-point (G, H) sums per slot
        (``gpufs.rules._hist_layout``): the feature's value bin t at slot ``lo + t``, its missing
        bin at slot ``last``; ``nb`` the feature's number of value bins; (G_q, H_q) and (G, H)
        the node's sums in fixed point and as float64; ``g_inv`` / ``h_inv`` the reciprocal
        fixed-point scales. Returns ``(score, gain, bin, missing_left, g_left_q,
        h_left_q)``; score is -inf when the feature has no valid candidate.

        Candidates, in scan order: for t = 0 .. nb - 2, "bins <= t left, missing right",
        then (when the node has missing values on f) "bins <= t and missing left"; last, when
        the node has missing values, t = nb - 1 with missing right: every value left, the
        missing rows right (a split on missingness, possible even for a one-bin feature).
        The strictly best score wins, so ties go to the first candidate in this order; the
        callers scan features in increasing order with the same strict ``>``, so over a node
        ties go to the lowest (feature, bin), missing right first.

        The score ``gain / gain_divisor - penalty`` is a non-decreasing function of the gain
        (division by a positive number and subtracting a constant are monotone under IEEE
        rounding), so a candidate can beat the best so far only if its gain is strictly larger
        than the best one's. Each candidate's gain is computed with ``candidate(...,
        gain_divisor=1, penalty=0)`` (the same operations, so the same bits, as inside the full
        call), and the full score only for the few candidates whose gain is a new maximum: one
        division fewer per candidate, and the same choice, ties included, as scoring every one.
        """
        gn_q = hist[k, last, 0]
        hn_q = hist[k, last, 1]
        has_missing = gn_q != 0 or hn_q != 0
        parent = (G * G) / (H + reg_lambda)  # ``parent_term``, inlined: no helper calls
        n_thr = nb if has_missing else nb - 1
        b_score = -math.inf
        b_cmp = -math.inf  # the gain of the best candidate so far (-inf: none yet)
        b_gain = 0.0
        b_bin = 0
        b_ml = 0
        b_gl = gn_q - gn_q  # int64 zero on every device
        b_hl = b_gl
        gl_q = b_gl
        hl_q = b_gl
        for t in range(n_thr):
            bg = hist[k, lo + t, 0]
            bh = hist[k, lo + t, 1]
            if t > 0 and bg == 0 and bh == 0:
                # An empty bin leaves the left sums, hence both candidates, equal to those of
                # threshold t - 1, which scored first: they cannot win a strict ``>``.
                continue
            gl_q += bg
            hl_q += bh
            # gain, or -inf for an invalid candidate (its unpenalized score)
            _, cmp = candidate(
                gl_q, hl_q, H_q, G, H, parent, g_inv, h_inv, reg_lambda, 1.0, min_child_weight, 0.0
            )
            if cmp > b_cmp:
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
                    b_cmp = cmp
                    b_gain = gain
                    b_bin = t
                    b_ml = 0
                    b_gl = gl_q
                    b_hl = hl_q
            if has_missing and t != nb - 1:
                cg = gl_q + gn_q
                ch = hl_q + hn_q
                _, cmp = candidate(
                    cg, ch, H_q, G, H, parent, g_inv, h_inv, reg_lambda, 1.0, min_child_weight, 0.0
                )
                if cmp > b_cmp:
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
                        b_cmp = cmp
                        b_gain = gain
                        b_bin = t
                        b_ml = 1
                        b_gl = cg
                        b_hl = ch
        return b_score, b_gain, b_bin, b_ml, b_gl, b_hl

    return scan_feature


def make_scan_feature_blocked(candidate):
    """``scan_feature_blocked`` bound to a compiled ``candidate``: the CPU's form of
    ``make_scan_feature``'s scan, the same candidates, gains, rule and result, in three
    passes over scratch buffers so that the gains vectorize.

    The scalar scan's loop branches on every bin (the empty-bin skip, the validity tests and
    the best-so-far test), which keeps the compiler from using vector instructions: each
    candidate costs its two divisions one at a time. Here the left sums are accumulated first,
    then every candidate's gain is computed by ``candidate`` in a loop with no other work,
    which the compiler can vectorize, and last the scalar scan's decision loop runs over the
    stored gains, with ``candidate``'s full score only for a new best gain, exactly as there.
    Same operations on the same operands, so the same bits; an empty bin's candidates equal
    the ones before them, which cannot win the strict ``>`` (as the scalar scan's skip says).
    The three passes cost more per pair than they save on features of few bins, so the CPU
    search uses this form from ``backends.cpu.split.BLOCKED_SCAN_MIN_BINS`` bins
    (bench/bench_scan.py: 255 bins 0.54-0.63x the scalar scan's time on the 2-core test box).

    The GPU keeps the scalar scan (one thread per feature, no per-thread buffers).
    """

    def scan_feature_blocked(
        hist,
        k,
        lo,
        last,
        nb,
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
    ):
        """``scan_feature``'s arguments and result, with scratch: ``buf_q`` int64 (4, >= nb)
        (rows: left G, left H, and the same with the missing bin added), ``buf_gain``
        float64 (2, >= nb) (each candidate's gain, -inf when invalid: missing right, missing
        left)."""
        # one-dimensional rows: the compiler vectorizes loops over them, not over 2-D indexing
        gl = buf_q[0]
        hl = buf_q[1]
        gl_m = buf_q[2]
        hl_m = buf_q[3]
        gain_r = buf_gain[0]
        gain_l = buf_gain[1]
        gn_q = hist[k, last, 0]
        hn_q = hist[k, last, 1]
        has_missing = gn_q != 0 or hn_q != 0
        parent = (G * G) / (H + reg_lambda)
        n_thr = nb if has_missing else nb - 1
        acc_g = gn_q - gn_q  # int64 zero
        acc_h = acc_g
        for t in range(n_thr):
            acc_g += hist[k, lo + t, 0]
            acc_h += hist[k, lo + t, 1]
            gl[t] = acc_g
            hl[t] = acc_h
        for t in range(n_thr):
            _, gain_r[t] = candidate(
                gl[t],
                hl[t],
                H_q,
                G,
                H,
                parent,
                g_inv,
                h_inv,
                reg_lambda,
                1.0,
                min_child_weight,
                0.0,
            )
        n_ml = nb - 1 if has_missing else 0  # t = nb - 1 has no missing-left candidate
        for t in range(n_ml):
            gl_m[t] = gl[t] + gn_q
            hl_m[t] = hl[t] + hn_q
        for t in range(n_ml):
            _, gain_l[t] = candidate(
                gl_m[t],
                hl_m[t],
                H_q,
                G,
                H,
                parent,
                g_inv,
                h_inv,
                reg_lambda,
                1.0,
                min_child_weight,
                0.0,
            )
        b_score = -math.inf
        b_cmp = -math.inf
        b_gain = 0.0
        b_bin = 0
        b_ml = 0
        b_gl = gn_q - gn_q
        b_hl = b_gl
        for t in range(n_thr):
            cmp = gain_r[t]
            if cmp > b_cmp:
                gain, score = candidate(
                    gl[t],
                    hl[t],
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
                    b_cmp = cmp
                    b_gain = gain
                    b_bin = t
                    b_ml = 0
                    b_gl = gl[t]
                    b_hl = hl[t]
            if t < n_ml:
                cmp = gain_l[t]
                if cmp > b_cmp:
                    gain, score = candidate(
                        gl_m[t],
                        hl_m[t],
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
                        b_cmp = cmp
                        b_gain = gain
                        b_bin = t
                        b_ml = 1
                        b_gl = gl_m[t]
                        b_hl = hl_m[t]
        return b_score, b_gain, b_bin, b_ml, b_gl, b_hl

    return scan_feature_blocked
