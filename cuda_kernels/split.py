"""Split search: the best penalized split of every node of a level, in two launches.

The rule is the CPU's (``gpufs.backends.cpu._find_splits``), bit for bit:
  * a feature is skipped when ``allowed[f]`` is false, or when it has fewer than 2 value bins
    and no missing values in the node;
  * candidates are, for each threshold bin t = 0 .. n_bins[f] - 2, "missing right" (left sums
    = bins 0..t) and, when the feature has missing values in the node, "missing left" (plus the
    missing bin); last, when the feature has missing values in the node, t = n_bins[f] - 1
    with missing right: every value left, the missing rows right (a split on missingness);
  * validity, gain and score of a candidate come from ``gpufs._gain.candidate`` (compiled as a
    device function; the CPU compiles the same function);
  * the best is the highest score with strict ``>`` in the order (feature, bin, missing right
    before missing left): among equal scores the lowest feature, then the lowest bin, then
    missing right wins (the missingness split, key 2 * (n_bins[f] - 1), comes after every
    other candidate of its feature). Scores that are NaN or -inf are never chosen.

``split_per_feature_kernel`` - one block per (feature, node): grid (d, n_nodes), block size a
power of two <= 256. Thread t owns a contiguous run of thresholds; prefix sums over bins are a
per-thread running sum plus a block-wide (Hillis-Steele) exclusive scan of the run totals, in
int64, so every left sum equals the CPU's sequential sum. Each thread keeps its best candidate
(strict ``>`` in its own increasing order) and a shared-memory tree reduction picks the block's
best by (score, then lowest key = 2 * bin + missing_left). Writes per (node, feature):
  pf_score, pf_gain (float64), pf_key (int32, -1 = no valid candidate), pf_gl, pf_hl (int64).

``split_reduce_kernel`` - one block per node: grid (n_nodes,), block size a power of two <= 256.
Threads stride over features in increasing order (strict ``>``), then a tree reduction by
(score, lowest feature). Writes the per-node result arrays of ``GPUBackend.find_splits``:
feature, bin (int32), missing_left (bool), gain, score (float64), g_left, h_left (int64), with
the CPU's defaults (-1, 0, False, 0.0, -inf, 0, 0) for a node without a valid split.

Inputs: hist (n_nodes, d, 256, 2) int64; node_gh (2, n_nodes) int64 node totals (G_q, H_q);
n_bins (d,) int32; penalty (d,) float64; allowed (d,) bool; scalars g_scale, h_scale,
reg_lambda, gain_divisor, min_child_weight (float64).
"""
import math

from numba import cuda, float64, int32, int64

from gpufs._types import MISSING_BIN

from ._device_fns import candidate

#: Static shared arrays are sized for the largest block the backend launches.
MAX_BLOCK = 256


@cuda.jit(device=True)
def _better(score_a, key_a, score_b, key_b):
    """Is candidate a preferred to b? Valid (key >= 0) beats invalid; higher score; lower key."""
    if key_a < 0:
        return False
    if key_b < 0:
        return True
    if score_a > score_b:
        return True
    return score_a == score_b and key_a < key_b


@cuda.jit(cache=True)
def split_per_feature_kernel(hist, node_gh, n_bins, penalty, allowed, g_scale, h_scale,
                             reg_lambda, gain_divisor, min_child_weight,
                             pf_score, pf_gain, pf_key, pf_gl, pf_hl):
    sg = cuda.shared.array(MAX_BLOCK, dtype=int64)
    sh = cuda.shared.array(MAX_BLOCK, dtype=int64)
    r_score = cuda.shared.array(MAX_BLOCK, dtype=float64)
    r_gain = cuda.shared.array(MAX_BLOCK, dtype=float64)
    r_key = cuda.shared.array(MAX_BLOCK, dtype=int32)
    r_gl = cuda.shared.array(MAX_BLOCK, dtype=int64)
    r_hl = cuda.shared.array(MAX_BLOCK, dtype=int64)

    f = cuda.blockIdx.x
    k = cuda.blockIdx.y
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    nb = n_bins[f]
    gn_q = hist[k, f, MISSING_BIN, 0]
    hn_q = hist[k, f, MISSING_BIN, 1]
    has_missing = gn_q != 0 or hn_q != 0
    # Thresholds 0 .. nb - 2, plus nb - 1 ("missing vs everything") with missing values.
    n_thr = nb if has_missing else nb - 1
    if not allowed[f] or n_thr < 1:
        # The whole block leaves together, before any barrier.
        if t == 0:
            pf_score[k, f] = -math.inf
            pf_gain[k, f] = 0.0
            pf_key[k, f] = -1
            pf_gl[k, f] = 0
            pf_hl[k, f] = 0
        return

    G_q = node_gh[0, k]
    H_q = node_gh[1, k]
    G = G_q / g_scale
    H = H_q / h_scale
    pen = penalty[f]
    parent = (G * G) / (H + reg_lambda)  # _gain.parent_term
    g_inv = 1.0 / g_scale  # exact: the scales are powers of two
    h_inv = 1.0 / h_scale

    # This thread's thresholds: [t0, t1) within 0 .. n_thr - 1.
    per = (n_thr + nt - 1) // nt
    t0 = min(t * per, n_thr)
    t1 = min(t0 + per, n_thr)
    run_g = int64(0)
    run_h = int64(0)
    for b in range(t0, t1):
        run_g += hist[k, f, b, 0]
        run_h += hist[k, f, b, 1]

    # Block-wide inclusive scan of the run totals (Hillis-Steele; nt is a power of two).
    sg[t] = run_g
    sh[t] = run_h
    cuda.syncthreads()
    off = 1
    while off < nt:
        add_g = int64(0)
        add_h = int64(0)
        if t >= off:
            add_g = sg[t - off]
            add_h = sh[t - off]
        cuda.syncthreads()
        sg[t] += add_g
        sh[t] += add_h
        cuda.syncthreads()
        off *= 2
    gl_q = sg[t] - run_g   # exclusive: sums of bins 0 .. t0 - 1
    hl_q = sh[t] - run_h

    b_score = -math.inf
    b_gain = 0.0
    b_key = -1
    b_gl = int64(0)
    b_hl = int64(0)
    for b in range(t0, t1):
        gl_q += hist[k, f, b, 0]
        hl_q += hist[k, f, b, 1]
        for side in range(2):
            if side == 0:
                cg = gl_q
                ch = hl_q
            else:
                if not has_missing or b == nb - 1:
                    break
                cg = gl_q + gn_q
                ch = hl_q + hn_q
            gain, score = candidate(cg, ch, H_q, G, H, parent, g_inv, h_inv, reg_lambda,
                                    gain_divisor, min_child_weight, pen)
            if score > b_score:
                b_score = score
                b_gain = gain
                b_key = 2 * b + side
                b_gl = cg
                b_hl = ch

    r_score[t] = b_score
    r_gain[t] = b_gain
    r_key[t] = b_key
    r_gl[t] = b_gl
    r_hl[t] = b_hl
    cuda.syncthreads()
    s = nt // 2
    while s > 0:
        if t < s and _better(r_score[t + s], r_key[t + s], r_score[t], r_key[t]):
            r_score[t] = r_score[t + s]
            r_gain[t] = r_gain[t + s]
            r_key[t] = r_key[t + s]
            r_gl[t] = r_gl[t + s]
            r_hl[t] = r_hl[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        pf_score[k, f] = r_score[0]
        pf_gain[k, f] = r_gain[0]
        pf_key[k, f] = r_key[0]
        pf_gl[k, f] = r_gl[0]
        pf_hl[k, f] = r_hl[0]


@cuda.jit(cache=True)
def split_reduce_kernel(pf_score, pf_gain, pf_key, pf_gl, pf_hl,
                        feature, bin_, missing_left, gain, score, g_left, h_left):
    r_score = cuda.shared.array(MAX_BLOCK, dtype=float64)
    r_f = cuda.shared.array(MAX_BLOCK, dtype=int32)

    k = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    d = pf_key.shape[1]

    b_score = -math.inf
    b_f = -1
    for f in range(t, d, nt):
        if pf_key[k, f] >= 0 and pf_score[k, f] > b_score:
            b_score = pf_score[k, f]
            b_f = f
    r_score[t] = b_score
    r_f[t] = b_f
    cuda.syncthreads()
    s = nt // 2
    while s > 0:
        if t < s and _better(r_score[t + s], r_f[t + s], r_score[t], r_f[t]):
            r_score[t] = r_score[t + s]
            r_f[t] = r_f[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        f = r_f[0]
        if f < 0:
            feature[k] = -1
            bin_[k] = 0
            missing_left[k] = False
            gain[k] = 0.0
            score[k] = -math.inf
            g_left[k] = 0
            h_left[k] = 0
        else:
            key = pf_key[k, f]
            feature[k] = f
            bin_[k] = key >> 1
            missing_left[k] = (key & 1) == 1
            gain[k] = pf_gain[k, f]
            score[k] = pf_score[k, f]
            g_left[k] = pf_gl[k, f]
            h_left[k] = pf_hl[k, f]
