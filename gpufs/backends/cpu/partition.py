"""The CPU's partition: a stable in-place left/right split of each split node's rows.

Owns ``_partition`` and its task bodies: a count pass (which rows go left, by
``gpufs.rules._categorical.split_goes_left``, and the children's sums of the rows' gain-bound terms)
and a scatter pass (lefts, then rights, each in their original order, for any chunking), each
with a ``prange`` and a serial driver. The GPU's counterpart is ``cuda_kernels/partition.py``.

Shapes: ``Xb_cols`` (n_features, n_samples) uint8; ``rows`` (n_samples,) int32, one segment
per node; the splits in a ``SplitRule`` (``_args``), (n_split,) per field.
"""

import numpy as np
from numba import njit, prange

from ._device_fns import _split_goes_left
from .histogram import TASKS_PER_THREAD, task_table


@njit(inline="always")
def _part_count_task(t, Xb_cols, rows, tasks, rule, go_left, t_left, q, t_q):
    t_seg, t_lo, t_hi = tasks
    s = t_seg[t]
    col = Xb_cols[rule.feature[s]]  # the split feature's bins, contiguous: one byte per row
    thr = rule.bin[s]
    ml = rule.missing_left[s]
    cat = rule.is_cat[s]
    bits = rule.cat_bits[s]
    nl = 0
    # Branch-free bodies: whether a row goes left is data, as good as random to the branch
    # predictor, and a branch on it ran 3-4x slower (1,000,000 rows, one thread: 6.6 against
    # 1.6 ms). Adding 0.0 to a sum leaves its bits as they were.
    if q.shape[0] == 0:
        for j in range(t_lo[t], t_hi[t]):
            gl = np.uint8(_split_goes_left(col[rows[j]], thr, ml, cat, bits))
            go_left[j] = gl
            nl += gl
    else:  # also the children's sums of the rows' bound terms (``_gain_bound_pays``)
        ql = 0.0
        qr = 0.0
        for j in range(t_lo[t], t_hi[t]):
            r = rows[j]
            gl = _split_goes_left(col[r], thr, ml, cat, bits)
            go_left[j] = np.uint8(gl)
            nl += np.int64(gl)
            v = q[r]
            ql += v if gl else 0.0
            qr += 0.0 if gl else v
        t_q[t, 0] = ql
        t_q[t, 1] = qr
    t_left[t] = nl


# The tasks' outputs (go_left, t_left, t_q) are plain arguments: numba's prange loses a write
# through a named tuple's field in the loop body (numba 0.68, checked).
@njit(parallel=True, cache=True, nogil=True)
def _part_count_par(Xb_cols, rows, tasks, rule, go_left, t_left, q, t_q):
    for t in prange(tasks[0].shape[0]):
        _part_count_task(t, Xb_cols, rows, tasks, rule, go_left, t_left, q, t_q)


@njit(cache=True, nogil=True)
def _part_count_ser(Xb_cols, rows, tasks, rule, go_left, t_left, q, t_q):
    for t in range(tasks[0].shape[0]):
        _part_count_task(t, Xb_cols, rows, tasks, rule, go_left, t_left, q, t_q)


@njit(inline="always")
def _part_scatter_task(t, rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out):
    """A task writes its left rows after the earlier tasks' lefts and its right rows after all
    the segment's lefts and the earlier tasks' rights: a stable partition for any chunking."""
    lo = t_lo[t]
    hi = t_hi[t]
    a = left_dst[t]
    b = right_dst[t]
    for j in range(lo, hi):
        # one store at a selected index, not a branch (see ``_part_count_task``): 1.6x faster
        gl = np.int64(go_left[j])
        out[a if gl else b] = rows[j]
        a += gl
        b += 1 - gl


@njit(parallel=True, cache=True, nogil=True)
def _part_scatter_par(rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out):
    for t in prange(t_seg.shape[0]):
        _part_scatter_task(t, rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out)
    for t in prange(t_seg.shape[0]):
        for j in range(t_lo[t], t_hi[t]):
            rows[j] = out[j]


@njit(cache=True, nogil=True)
def _part_scatter_ser(rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out):
    for t in range(t_seg.shape[0]):
        _part_scatter_task(t, rows, go_left, t_seg, t_lo, t_hi, left_dst, right_dst, out)
    for t in range(t_seg.shape[0]):
        for j in range(t_lo[t], t_hi[t]):
            rows[j] = out[j]


@njit(cache=True, nogil=True)
def _partition(run, Xb_cols, rows, scratch, go_left, seg_start, seg_count, rule, q, seg_q):
    """Stable in-place partition of each segment by its split (``rule``, a ``SplitRule``);
    returns left counts (m,). ``run`` (a ``Run``) says whether it runs on the thread pool.

    Reads the column-major copy of the bins (``Xb_cols`` (n_features, n_samples) uint8): a
    row-major read would fetch a cache line per row for one byte (measured 9x slower at
    1,000,000 x 100). With bound terms ``q`` (n_samples,) float64 (empty: none), also writes
    each segment's (left, right) sums of them into ``seg_q`` (m, 2)."""
    parallel = run.parallel
    n_tasks_max = TASKS_PER_THREAD * run.n_threads if parallel else 1
    t_seg, t_lo, t_hi, _ = task_table(seg_start, seg_count, n_tasks_max, run.rows_per_task)
    T = t_seg.shape[0]
    t_left = np.empty(T, np.int64)
    t_q = np.zeros((T, 2), np.float64)
    if parallel:
        _part_count_par(Xb_cols, rows, (t_seg, t_lo, t_hi), rule, go_left, t_left, q, t_q)
    else:
        _part_count_ser(Xb_cols, rows, (t_seg, t_lo, t_hi), rule, go_left, t_left, q, t_q)
    m = seg_start.shape[0]
    left = np.zeros(m, np.int64)
    for t in range(T):
        left[t_seg[t]] += t_left[t]
    if q.shape[0] > 0:
        seg_q[:m] = 0.0
        for t in range(T):
            seg_q[t_seg[t], 0] += t_q[t, 0]
            seg_q[t_seg[t], 1] += t_q[t, 1]
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
