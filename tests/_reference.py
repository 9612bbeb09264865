"""Slow, obviously-correct numpy oracles for the tree engine.

Nothing here imports the engine's arithmetic (``gpufs.rules._gain``, the backends): every quantity
is written out again from DESIGN.md section 4 and the ``gpufs.engine.penalties`` docstring, in plain
Python / numpy, by brute force.

``reference_grow_tree`` is an exact greedy tree grower on the binned matrix. For every node it
enumerates every feature, every threshold bin ``b`` < n_bins - 1 (left = value bins <= b) and
both missing directions, plus, when the node has missing values on the feature, the split on
missingness (b = n_bins - 1, missing right: every value left, the missing rows right);
it recomputes the child sums from the rows themselves (no histograms, no subtraction), and
keeps the candidate with the strictly largest penalized score, scanning features, then bins,
then "missing right" before "missing left": ties go to the lowest (feature, bin), missing
right first (the missingness split comes last among its feature's candidates).

A categorical feature (``is_cat``) is searched by the rule of the ``gpufs.rules._categorical``
docstring, written out again: the candidate categories are the bins holding hessian > 0 in
the node (value bins increasing, then the missing bin), their sums recomputed from the rows;
up to ``max_onehot`` of them: each one alone goes left, in that order; more: every prefix of
the candidates sorted by (G_b / (H_b + lambda), b). A left set holds value bins and perhaps
the missing bin (then missing values go left); the other rows, empty categories included, go
right.

The arithmetic is done in the same order as DESIGN.md writes it (sum of the three ratios,
then halved; gain / divisor - mu * cost), on the same fixed-point integer sums, so a correct
fast grower reproduces the oracle's gains to the last bit or very nearly.
"""

from __future__ import annotations

import numpy as np

MISSING = 255


def ref_gain(gl, hl, g, h, lam):
    """1/2 * (G_L^2/(H_L+lambda) + G_R^2/(H_R+lambda) - G^2/(H+lambda))."""
    gr = g - gl
    hr = h - hl
    return (gl * gl / (hl + lam) + gr * gr / (hr + lam) - g * g / (h + lam)) / 2.0


def ref_leaf_value(g, h, lam, lr):
    return (-g / (h + lam)) * lr


def ref_root_divisor(g, h):
    """A-GBM divisor: 0.5 * (sum_i g_i^2 / h_i - G^2 / H) over rows with h_i > 0 (1 if <= 0)."""
    g = np.asarray(g, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64)
    pos = h > 0
    total = sum(float(a) * float(a) / float(b) for a, b in zip(g[pos], h[pos]))
    G, H = float(g.sum()), float(h.sum())
    div = 0.5 * (total - G * G / H) if H > 0 else 0.0
    return div if div > 0 else 1.0


def go_left(bins, b, missing_left):
    """Rows going left for 'value bin <= b', missing rows by ``missing_left``."""
    bins = np.asarray(bins)
    miss = bins == MISSING
    return np.where(miss, bool(missing_left), bins <= b)


class RefOmega:
    """The used-feature set and budget of the penalties docstring, written out again."""

    def __init__(self, mu, costs, groups, k=None):
        self.mu = float(mu)
        self.costs = np.asarray(costs, dtype=np.float64)
        self.groups = np.asarray(groups)
        self.k = k
        self.used = np.zeros(self.costs.shape[0], dtype=bool)
        self.order = []
        self.first_use = np.full(self.costs.shape[0], -1, dtype=np.int64)

    def penalty(self, f):
        group_used = self.used[self.groups == self.groups[f]].any()
        return 0.0 if group_used else self.mu * self.costs[f]

    def budget_left(self):
        return None if self.k is None else max(0, self.k - len(self.order))

    def admit(self, f, tree_index):
        if not self.used[f]:
            self.used[f] = True
            self.order.append(int(f))
            self.first_use[f] = tree_index


def ref_cat_left_sets(col, gq, hq, n_bins, g_scale, h_scale, lam, max_onehot):
    """The candidate left sets (lists of bins, 255 = missing) of a categorical feature at a
    node whose rows have bins ``col`` and fixed-point sums ``gq``, ``hq``, in scan order."""
    sums = {}
    for b in list(range(int(n_bins))) + [MISSING]:
        sel = col == b
        sums[b] = (int(gq[sel].sum()), int(hq[sel].sum()))
    cands = [b for b in list(range(int(n_bins))) + [MISSING] if sums[b][1] > 0]
    if len(cands) <= max_onehot:
        return [[b] for b in cands]
    key = {b: (sums[b][0] / g_scale) / (sums[b][1] / h_scale + lam) for b in cands}
    ordered = sorted(cands, key=lambda b: (key[b], b))
    return [ordered[:j] for j in range(1, len(ordered))]


def bits_of(left_set):
    """The 8 uint32 words of the value bins of a left set (the missing bin excluded)."""
    words = np.zeros(8, np.uint32)
    for b in left_set:
        if b != MISSING:
            words[b // 32] |= np.uint32(1 << (b % 32))
    return words


def best_split(
    Xb,
    rows,
    gq,
    hq,
    g_scale,
    h_scale,
    n_bins,
    allowed,
    lam,
    divisor,
    min_child_weight,
    penalties,
    is_cat=None,
    max_onehot=4,
):
    """Brute-force best split of the node holding ``rows``; None if no valid split.

    ``allowed[f]`` says which features may be used; ``penalties[f]`` is the price of f;
    ``is_cat[f]`` marks the categorical features.
    """
    Gq = int(gq[rows].sum())
    Hq = int(hq[rows].sum())
    G, H = Gq / g_scale, Hq / h_scale
    best = None
    for f in range(Xb.shape[1]):
        if not allowed[f]:
            continue
        col = Xb[rows, f]
        if is_cat is not None and is_cat[f]:
            sets = ref_cat_left_sets(
                col, gq[rows], hq[rows], n_bins[f], g_scale, h_scale, lam, max_onehot
            )
            cands = [(0, MISSING in s, s) for s in sets]
        else:
            # thresholds 0 .. n_bins - 2 both ways, then "every value left, missing right"
            # (b = n_bins - 1) when the node has missing values on f
            cands = [(b, ml, None) for b in range(int(n_bins[f]) - 1) for ml in (False, True)]
            if (col == MISSING).any():
                cands.append((int(n_bins[f]) - 1, False, None))
        for b, missing_left, left_set in cands:
            left = go_left(col, b, missing_left) if left_set is None else np.isin(col, left_set)
            glq = int(gq[rows][left].sum())
            hlq = int(hq[rows][left].sum())
            hrq = Hq - hlq
            if hlq <= 0 or hrq <= 0:
                continue
            if hlq / h_scale < min_child_weight or hrq / h_scale < min_child_weight:
                continue
            gain = ref_gain(glq / g_scale, hlq / h_scale, G, H, lam)
            score = gain / divisor - penalties[f]
            if best is None or score > best["score"]:
                best = dict(
                    feature=f,
                    bin=b,
                    missing_left=missing_left,
                    gain=gain,
                    score=score,
                    left=left,
                    bits=None if left_set is None else bits_of(left_set),
                )
    return best


def reference_grow_tree(
    Xb,
    gq,
    hq,
    g_scale,
    h_scale,
    n_bins,
    omega,
    *,
    max_depth,
    reg_lambda=1.0,
    learning_rate=0.1,
    min_child_weight=1e-3,
    min_split_gain=0.0,
    gain_divisor=1.0,
    tree_index=0,
    is_cat=None,
    max_onehot=4,
):
    """Grow one tree level by level; returns a dict of node arrays and the new features.

    ``omega`` (``RefOmega``) is updated in place. Rule (penalties docstring): penalties and the
    allowed set are fixed at the start of a level; nodes are decided in node order; a node
    whose best split would bring in a new feature beyond the budget takes its best split among
    the features in Omega at the start of the level; features first used at level l join
    Omega after the level.
    """
    Xb = np.asarray(Xb)
    gq = np.asarray(gq, dtype=np.int64)
    hq = np.asarray(hq, dtype=np.int64)
    n, d = Xb.shape
    n_nodes = 2 ** (max_depth + 1) - 1
    out = dict(
        feature=np.full(n_nodes, -1, np.int64),
        bin_threshold=np.zeros(n_nodes, np.int64),
        missing_left=np.zeros(n_nodes, bool),
        gain=np.zeros(n_nodes),
        value=np.zeros(n_nodes),
        cover=np.zeros(n_nodes),
        count=np.zeros(n_nodes, np.int64),
        cat_bits=np.zeros((n_nodes, 8), np.uint32),
    )
    node_rows = {0: np.arange(n)}
    level = [0]
    new_features = []
    n_fallbacks = 0  # nodes that had to give up a new feature for lack of budget
    for _depth in range(max_depth):
        penalties = np.array([omega.penalty(f) for f in range(d)])
        used_at_start = omega.used.copy()
        budget = omega.budget_left()
        allowed = used_at_start.copy() if budget == 0 else np.ones(d, dtype=bool)
        admitted = []
        next_level = []
        for node in level:
            rows = node_rows[node]
            best = best_split(
                Xb,
                rows,
                gq,
                hq,
                g_scale,
                h_scale,
                n_bins,
                allowed,
                reg_lambda,
                gain_divisor,
                min_child_weight,
                penalties,
                is_cat,
                max_onehot,
            )
            if best is not None:
                f = best["feature"]
                is_new = not used_at_start[f] and f not in admitted
                if is_new and budget is not None and len(admitted) >= budget:
                    n_fallbacks += 1
                    best = best_split(
                        Xb,
                        rows,
                        gq,
                        hq,
                        g_scale,
                        h_scale,
                        n_bins,
                        used_at_start,
                        reg_lambda,
                        gain_divisor,
                        min_child_weight,
                        penalties,
                        is_cat,
                        max_onehot,
                    )
            next_level += take_split(
                out, node_rows, node, best, min_split_gain, used_at_start, admitted
            )
        admit_level(omega, admitted, new_features, tree_index)
        level = next_level
        if not level:
            break
    write_leaves(out, node_rows, gq, hq, g_scale, h_scale, reg_lambda, learning_rate)
    out["node_rows"] = node_rows
    out["new_features"] = new_features
    out["n_fallbacks"] = n_fallbacks
    return out


def take_split(out, node_rows, node, best, min_split_gain, used_at_start, admitted):
    """Split ``node`` by ``best`` (``best_split``'s dict, or None) when its penalized score
    beats ``min_split_gain``: a feature not in Omega at the level's start joins ``admitted``
    (once, in node order); returns the children ([] for a leaf)."""
    if best is None or not (best["score"] > min_split_gain):
        return []
    f = best["feature"]
    if not used_at_start[f] and f not in admitted:
        admitted.append(f)
    return split_node(out, node_rows, node, best)


def split_node(out, node_rows, node, best):
    """Write ``best`` (``best_split``'s dict) into the node arrays ``out`` at ``node`` and its
    children's rows into ``node_rows``; returns the two children."""
    out["feature"][node] = best["feature"]
    out["bin_threshold"][node] = best["bin"]
    out["missing_left"][node] = best["missing_left"]
    out["gain"][node] = best["gain"]
    if best["bits"] is not None:
        out["cat_bits"][node] = best["bits"]
    rows = node_rows[node]
    node_rows[2 * node + 1] = rows[best["left"]]
    node_rows[2 * node + 2] = rows[~best["left"]]
    return [2 * node + 1, 2 * node + 2]


def admit_level(omega, admitted, new_features, tree_index):
    """After a level: the features it used first (``admitted``, in node order) join Omega;
    those new to the model are appended to ``new_features``."""
    for f in admitted:
        if not omega.used[f]:
            new_features.append(f)
        omega.admit(f, tree_index)


def write_leaves(out, node_rows, gq, hq, g_scale, h_scale, reg_lambda, learning_rate):
    """Every node's value (from its rows' integer sums), count and, where ``out`` keeps it,
    cover."""
    for node, rows in node_rows.items():
        Gq, Hq = int(gq[rows].sum()), int(hq[rows].sum())
        out["value"][node] = ref_leaf_value(Gq / g_scale, Hq / h_scale, reg_lambda, learning_rate)
        if "cover" in out:
            out["cover"][node] = Hq / h_scale
        out["count"][node] = rows.shape[0]


def ref_histogram(Xb, gq, hq, rows):
    """(n_features, 256, 2) int64 sums of (gq, hq) over ``rows``, one row at a time."""
    d = Xb.shape[1]
    hist = np.zeros((d, 256, 2), dtype=np.int64)
    for r in rows:
        for f in range(d):
            hist[f, Xb[r, f], 0] += gq[r]
            hist[f, Xb[r, f], 1] += hq[r]
    return hist


def ref_bins(x, cuts):
    """Bin of each value: the number of cut points < x (NaN -> 255)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape[0], dtype=np.int64)
    for i, v in enumerate(x):
        out[i] = MISSING if np.isnan(v) else int(sum(1 for c in cuts if c < v))
    return out


def ref_cuts(x, max_bins):
    """Cut points of one feature by the binning docstring's rule (all rows used)."""
    v = np.sort(np.asarray(x, dtype=np.float64)[~np.isnan(x)])
    n = v.shape[0]
    if n == 0:
        return np.empty(0)
    picked = [v[(i * (n - 1)) // (max_bins - 1)] for i in range(max_bins)]
    u = sorted(set(picked))
    return np.array([0.5 * a + 0.5 * b for a, b in zip(u[:-1], u[1:])])
