"""Categorical splits: the one categorical scan, the category bitset and its go-left rule.

Plain scalar Python compiled by both backends, like ``gpufs.rules._gain``: the CPU backend with
``numba.njit`` and the GPU kernels with ``numba.cuda.jit(device=True)``, so a categorical
split is chosen, stored and followed by one rule on both devices.

A categorical feature's value bins are its category codes (``gpufs.data._category_codes``: the most
frequent category is bin 0, rare categories share the last bin); bin 255 (``MISSING_BIN``)
holds the missing values and the categories not seen in fit. A split sends a *set* of bins
left: the value bins as a bitset of ``CAT_WORDS`` uint32 words (bit ``b & 31`` of word
``b >> 5``), the missing bin by ``missing_left``.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

import math

from .._types import CAT_WORDS, MISSING_BIN  # noqa: F401  (CAT_WORDS: re-exported)

#: Categorical features with at most this many candidate categories at a node are split
#: one-vs-rest (LightGBM's ``max_cat_to_onehot`` default).
MAX_CAT_TO_ONEHOT = 4


def make_scan_categorical(candidate):
    """``scan_categorical`` bound to a compiled ``candidate`` (see ``_gain.make_scan_feature``
    for why each backend passes its own compilation)."""

    def scan_categorical(
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
        max_onehot,
        order,
        n_rows,
        cat_smooth,
        cat_l2,
        min_data_per_group,
        max_cat_threshold,
    ):
        """The best categorical split of one feature at node ``k`` of a level's histograms.

        Arguments as ``_gain.scan_feature``'s (bin t at slot ``lo + t``, the missing bin at
        slot ``last``), plus ``max_onehot``, ``order`` (a writable integer array of at
        least 256 entries), the node's row count ``n_rows`` (float; 0: unknown, the rows of
        a category are then its hessian sum) and LightGBM's four guards of a split over
        sorted categories (``cat_smooth``, ``cat_l2``, ``min_data_per_group``,
        ``max_cat_threshold``; 0, 0, 0 and >= 255 give the unguarded scan). Returns
        ``(score, gain, n_left, missing_left, g_left_q, h_left_q)``; score is -inf when no
        candidate is valid. On return ``order[:n_left]`` are the bins sent left (255 = the
        missing bin).

        With more than ``max_onehot`` categories at the node (LightGBM's rule, rows
        estimated as LightGBM does, from the hessian: a category's rows are
        ``H_b / H * n_rows``, with no rounding):

        - only categories of at least ``cat_smooth`` rows are sorted and may go left (the
          others go right);
        - they are sorted by ``G_b / (H_b + reg_lambda + cat_smooth)``;
        - the children's terms of the gain take ``reg_lambda + cat_l2`` (the parent's keeps
          ``reg_lambda``, so the extra L2 lowers the gain of every categorical split);
        - a candidate is scored only after at least ``min_data_per_group`` rows joined the
          left side since the last scored one, and only while the right side holds at least
          ``min_data_per_group`` rows;
        - at most ``max_cat_threshold`` categories go left; when that cap is below the
          number of sorted categories less one, the prefixes are taken from both ends of the
          order (low end first, so a tie keeps the low end's), else from the low end only.
        """
        m = 0
        for t in range(nb):
            if hist[k, lo + t, 1] > 0:
                order[m] = t
                m += 1
        if hist[k, last, 1] > 0:
            order[m] = MISSING_BIN
            m += 1
        parent = (G * G) / (H + reg_lambda)  # ``_gain.parent_term``, inlined
        b_score = -math.inf
        b_gain = 0.0
        b_n = 0
        b_pos = 0
        zero = G_q - G_q  # int64 zero on every device
        b_gl = zero
        b_hl = zero
        if m <= max_onehot:
            for j in range(m):
                t = order[j]
                st = min(lo + t, last)  # ``_hist_layout.slot_of``, inlined
                gl_q = hist[k, st, 0]
                hl_q = hist[k, st, 1]
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
                    b_pos = j
                    b_n = 1
                    b_gl = gl_q
                    b_hl = hl_q
            if b_n == 1:  # the chosen category first: order[:1] is the left set
                t = order[b_pos]
                order[b_pos] = order[0]
                order[0] = t
        else:
            # Rows of a fixed-point hessian sum hq: hq * per_h. Each estimate is one product
            # that only feeds a comparison, so no fused multiply-add can round it differently.
            per_h = h_inv
            if n_rows > 0.0:
                per_h = n_rows / H_q
            used = 0
            for i in range(m):
                t = order[i]
                st = min(lo + t, last)
                if hist[k, st, 1] * per_h >= cat_smooth:
                    order[used] = t
                    used += 1
            smooth = reg_lambda + cat_smooth
            lam_c = reg_lambda + cat_l2
            # Insertion sort by (G_b / (H_b + lambda + cat_smooth), b). H_b > 0, so the ratio
            # is finite even with lambda = 0. The sums are scaled by dividing by the
            # power-of-two scales (exact, and the same bits as multiplying by g_inv / h_inv),
            # so no product feeds an addition: no fused multiply-add can round the GPU's key
            # differently.
            g_scale = 1.0 / g_inv
            h_scale = 1.0 / h_inv
            for i in range(1, used):
                t = order[i]
                st = min(lo + t, last)
                kt = (hist[k, st, 0] / g_scale) / (hist[k, st, 1] / h_scale + smooth)
                j = i - 1
                while j >= 0:
                    u = order[j]
                    su = min(lo + u, last)
                    ku = (hist[k, su, 0] / g_scale) / (hist[k, su, 1] / h_scale + smooth)
                    if ku > kt or (ku == kt and u > t):
                        order[j + 1] = u
                        j -= 1
                    else:
                        break
                order[j + 1] = t
            n_dir = 1
            cap = used - 1
            if max_cat_threshold < used - 1:
                n_dir = 2
                cap = max_cat_threshold
            b_dir = 0
            for dr in range(n_dir):
                gl_q = zero
                hl_q = zero
                grp_q = zero
                for j in range(cap):
                    t = order[j] if dr == 0 else order[used - 1 - j]
                    st = min(lo + t, last)
                    gl_q += hist[k, st, 0]
                    hl_q += hist[k, st, 1]
                    grp_q += hist[k, st, 1]
                    if (H_q - hl_q) * per_h < min_data_per_group:
                        break
                    if grp_q * per_h < min_data_per_group:
                        continue
                    grp_q = zero
                    gain, score = candidate(
                        gl_q,
                        hl_q,
                        H_q,
                        G,
                        H,
                        parent,
                        g_inv,
                        h_inv,
                        lam_c,
                        gain_divisor,
                        min_child_weight,
                        pen,
                    )
                    if score > b_score:
                        b_score = score
                        b_gain = gain
                        b_n = j + 1
                        b_dir = dr
                        b_gl = gl_q
                        b_hl = hl_q
            if b_dir == 1:  # the high end's prefix first: order[:b_n] is the left set
                i = 0
                j = used - 1
                while i < j:
                    t = order[i]
                    order[i] = order[j]
                    order[j] = t
                    i += 1
                    j -= 1
        b_ml = 0
        for j in range(b_n):
            if order[j] == MISSING_BIN:
                b_ml = 1
        return b_score, b_gain, b_n, b_ml, b_gl, b_hl

    return scan_categorical


def left_word(order, n_left, w):
    """Word ``w`` of the bitset of the value bins in ``order[:n_left]`` (the missing bin is
    not in the bitset: it follows ``missing_left``), as a non-negative integer < 2**32."""
    word = 0
    for j in range(n_left):
        t = int(order[j])  # a uint8 scalar would shift in 8 bits (numpy, the simulator)
        if t != MISSING_BIN and (t >> 5) == w:
            word |= 1 << (t & 31)
    return word


def split_goes_left(b, threshold, missing_left, cat, bits):
    """The partition / prediction rule on bins, numeric and categorical splits alike: the
    missing bin follows ``missing_left``; a value bin ``b`` goes left iff its bit is set in
    ``bits`` (``CAT_WORDS`` integer words) when ``cat``, else iff ``b <= threshold``
    (``_gain.goes_left``'s rule). ``bits`` is not read for a numeric split (it may be empty)."""
    if b == MISSING_BIN:
        return missing_left != 0  # callers pass a bool or an int64 from a packed table
    if cat:
        i = int(b)
        return ((bits[i >> 5] >> (i & 31)) & 1) != 0
    return b <= threshold


def split_goes_left_raw(x, threshold, missing_left, cat, bits):
    """The same rule on raw values. A categorical feature's raw values are its category codes
    (= its bins, ``gpufs.data._category_codes``): NaN (missing, or a category not seen in fit)
    follows ``missing_left``, and so does a code outside [0, 255), which no encoded column
    holds. A numeric split sends x left iff ``x <= threshold`` (a split on bin t has threshold
    cuts[t], so this equals the rule on the bin of x)."""
    if x != x:  # NaN
        return missing_left != 0
    if cat:
        if x < 0.0 or x >= 255.0:
            return missing_left != 0
        b = int(x)
        return ((bits[b >> 5] >> (b & 31)) & 1) != 0
    return x <= threshold
