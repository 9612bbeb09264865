"""Algorithm 2 of Han, Rao, Sorokina and Subbian, "Scalable Feature Selection for (Multitask)
Gradient Boosted Trees" (AISTATS 2020), written straight from the paper: slow, clear numpy.

Nothing here imports gpufs's arithmetic. The paper's steps, one function each:

* ``ref_standardize``: "We will standardize feature values by subtracting the min value and
  dividing the max value, so that all feature values are within [0, 1]" (Section 4.2, note 1),
  kept in fixed point with 8 fractional bits as gpufs documents (missing and constant: 0);
* ``ref_pseudo_feature``: "given a group of features and the samples to make the split, we sum
  the features up to obtain a new pseudo-feature" (Section 4.2), summed column by column;
* ``ref_gt``: GT(G, n_G), the best split of the pseudo-feature "in a fashion identical to the
  usual tree-splitting procedure": equal-width bins between its extremes (gpufs's histogram
  form of the paper's sort), then every threshold tried by brute force, child sums recomputed
  from the rows, the gain of DESIGN.md section 4 (``_reference.ref_gain``);
* ``ref_binary_search``: lines 5-8, "while |G| > 1: binary half split G into G_L, G_R;
  G = argmin(GT(G_L, n_G), GT(G_R, n_G))" (argmin of the loss = argmax of the gain; the first,
  G_L, on a tie);
* ``ref_candidates``: lines 3-10, C = the union of the searches' ends, one per subset;
* ``ref_gt_tree``: lines 1 and 11-16 at every node of a depth-wise tree: the free features and
  C scored exactly with the penalty (``_reference.best_split``), a feature of C entering only
  when its penalized score beats the free features' best.
"""

from __future__ import annotations

import numpy as np

from _reference import admit_level, best_split, ref_gain, take_split, write_leaves


def ref_standardize(X):
    """int64 (n, d): rint((x - min) / (max - min) * 255) per column; NaN and constant -> 0."""
    X = np.asarray(X, dtype=np.float64)
    Z = np.zeros(X.shape, dtype=np.int64)
    for f in range(X.shape[1]):
        col = X[:, f]
        ok = ~np.isnan(col)
        if not ok.any():
            continue
        lo, hi = col[ok].min(), col[ok].max()
        if not hi > lo:
            continue
        for i in np.flatnonzero(ok):
            Z[i, f] = int(np.rint((col[i] - lo) / (hi - lo) * 255.0))
    return Z


def ref_pseudo_feature(Z, rows, group):
    """Sum of the group's standardized columns over ``rows`` (int64)."""
    v = np.zeros(len(rows), dtype=np.int64)
    for f in group:
        v += Z[rows, f]
    return v


def ref_equal_width_bins(v, n_bins):
    """Bin of each value: n_bins equal-width bins between min(v) and max(v), the bin being
    trunc((v - min) * (n_bins / (max - min + 1))) in float64, as gpufs documents the rule."""
    lo, hi = int(v.min()), int(v.max())
    width = n_bins / float(hi - lo + 1)
    return np.array([int(float(int(x) - lo) * width) for x in v], dtype=np.int64)


def ref_gt(Z, rows, group, gq, hq, g_scale, h_scale, n_bins, lam, min_child_weight):
    """GT(G, n_G): the best gain of a split of the group's pseudo-feature ('bin <= b' left);
    -inf when no split leaves both children a valid hessian."""
    bins = ref_equal_width_bins(ref_pseudo_feature(Z, rows, group), n_bins)
    Gq, Hq = int(gq[rows].sum()), int(hq[rows].sum())
    G, H = Gq / g_scale, Hq / h_scale
    best = -np.inf
    for b in range(n_bins - 1):
        left = bins <= b
        glq, hlq = int(gq[rows][left].sum()), int(hq[rows][left].sum())
        if hlq <= 0 or Hq - hlq <= 0:
            continue
        if hlq / h_scale < min_child_weight or (Hq - hlq) / h_scale < min_child_weight:
            continue
        best = max(best, ref_gain(glq / g_scale, hlq / h_scale, G, H, lam))
    return best


def ref_binary_search(
    Z, rows, subset, gq, hq, g_scale, h_scale, n_bins, lam, min_child_weight, trace=None
):
    """Lines 5-8 of Algorithm 2 on one subset: the feature the halving ends on."""
    G = list(subset)
    while len(G) > 1:
        GL, GR = G[: len(G) // 2], G[len(G) // 2 :]
        sl = ref_gt(Z, rows, GL, gq, hq, g_scale, h_scale, n_bins, lam, min_child_weight)
        sr = ref_gt(Z, rows, GR, gq, hq, g_scale, h_scale, n_bins, lam, min_child_weight)
        if trace is not None:
            trace.append((list(GL), list(GR), sl, sr))
        G = GL if sl >= sr else GR
    return G[0]


def ref_candidates(
    Z,
    rows,
    subsets,
    gq,
    hq,
    g_scale,
    h_scale,
    n_bins=255,
    lam=1.0,
    min_child_weight=1e-3,
    traces=None,
):
    """Lines 3-10: the end of each subset's search (subset order)."""
    out = []
    for _i, subset in enumerate(subsets):
        trace = None if traces is None else []
        out.append(
            ref_binary_search(
                Z, rows, subset, gq, hq, g_scale, h_scale, n_bins, lam, min_child_weight, trace
            )
        )
        if traces is not None:
            traces.append(trace)
    return np.array(out, dtype=np.int64)


def ref_gt_tree(
    Xb,
    gq,
    hq,
    g_scale,
    h_scale,
    n_bins,
    omega,
    candidates,
    *,
    max_depth,
    reg_lambda=1.0,
    learning_rate=0.1,
    min_child_weight=1e-3,
    min_split_gain=0.0,
    gain_divisor=1.0,
    tree_index=0,
):
    """A depth-wise tree whose every node follows lines 1 and 11-16 of Algorithm 2: the free
    features (a used group) and the candidates C are scored exactly on the binned matrix with
    the penalty of ``omega`` (``_reference.RefOmega``, no budget), the best penalized split
    wins (so a feature of C enters only if it beats the free features' best by its price).
    Penalties and the free set are those of the level's start; features first used at a level
    enter Omega after it. Returns the node arrays and the new features."""
    Xb = np.asarray(Xb)
    n, d = Xb.shape
    n_nodes = 2 ** (max_depth + 1) - 1
    out = dict(
        feature=np.full(n_nodes, -1, np.int64),
        bin_threshold=np.zeros(n_nodes, np.int64),
        missing_left=np.zeros(n_nodes, bool),
        gain=np.zeros(n_nodes),
        value=np.zeros(n_nodes),
        count=np.zeros(n_nodes, np.int64),
    )
    node_rows = {0: np.arange(n)}
    level = [0]
    new = []
    in_c = np.zeros(d, bool)
    in_c[np.asarray(candidates, dtype=np.int64)] = True
    for _ in range(max_depth):
        penalties = np.array([omega.penalty(f) for f in range(d)])
        free = np.array([omega.used[omega.groups == omega.groups[f]].any() for f in range(d)])
        allowed = free | in_c
        used_at_start = omega.used.copy()
        admitted, next_level = [], []
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
            )
            next_level += take_split(
                out, node_rows, node, best, min_split_gain, used_at_start, admitted
            )
        admit_level(omega, admitted, new, tree_index)
        level = next_level
        if not level:
            break
    write_leaves(out, node_rows, gq, hq, g_scale, h_scale, reg_lambda, learning_rate)
    out["new_features"] = new
    return out
