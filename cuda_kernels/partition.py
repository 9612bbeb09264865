"""Stable partition of the split nodes' row segments: left rows in order, then right rows.

This is the CPU ``_partition``'s result exactly: within each split node's segment, the rows
going left keep their relative order and come first, the rows going right keep theirs and
follow. Two launches per level, all split nodes in each, sized by upper bounds (blocks past
the device's task count skip the work):

  1. ``partition_count_kernel``  one block per task: rows of the task going left; then the
                                 last block to finish (a ticket in ctrl[CTRL_TICKET], zero
                                 between launches, after a ``threadfence``: CUDA's
                                 threadFenceReduction pattern) plans (``_plan``):
     ``_plan``                   one block: a block-level exclusive scan of the task counts
                                 (each thread a contiguous run, one block-wide scan of the run
                                 totals) gives every task its offset and every split its left
                                 count; then the children's segments, the level's left counts
                                 (into the output buffer), and the next level's build table
                                 (the smaller child of each split; its task offsets by a
                                 second block scan)
  2. ``partition_scatter_kernel`` one block per task: a block scan of per-thread left counts
                                 gives each row its place in the other row buffer

The rows move from ``rows2[cur]`` to ``rows2[1 - cur]``: the children's rows are read from
there at the next level, and a node that stays a leaf keeps its rows in the buffer of its
depth's parity, so no copy back is needed (``update_leaves_kernel`` reads each leaf from its
buffer).

Shapes and dtypes:
  Xcols     (d, n) uint8: the binned matrix by column (the partition reads one feature of
            many rows; rows are in increasing order within a segment, so reads coalesce)
  rows2     (2, n) int32
  spl       (SPL_ROWS, S) int64 split table (``split.decide_kernel``; a categorical split's
            bitset in rows SPL_CAT_BITS .., its flag in SPL_IS_CAT); ctrl[CTRL_N_SEGMENTS]
            splits, ctrl[CTRL_SPLIT_TASKS] tasks; the rows go left by
            ``gpufs.rules._categorical.split_goes_left``
  chunk_left (T + 1,) int64 left rows per task; chunk_off (T + 1,) their exclusive sums
  nodes     (N_NODE_ROWS, n_nodes) int64 node table: the children's start and count are
            written here
  bld       (N_BLD_ROWS, S) int64 build table (``histogram.histogram_kernel``);
            ctrl[CTRL_BUILD_TASKS] its tasks
  out_i     the level's output buffer (``split.decide_kernel``), left counts at ``lc_base``
"""

from numba import cuda, int32, int64

from gpufs._types import (
    BLD_COUNT,
    BLD_FIRST_TASK,
    BLD_PARENT,
    BLD_SIBLING,
    BLD_SLOT,
    BLD_START,
    CTRL_BUILD_TASKS,
    CTRL_N_SEGMENTS,
    CTRL_SPLIT_TASKS,
    NODE_COUNT,
    NODE_START,
    SPL_BIN,
    SPL_CAT_BITS,
    SPL_COUNT,
    SPL_FEATURE,
    SPL_FIRST_TASK,
    SPL_IS_CAT,
    SPL_MISSING_LEFT,
    SPL_NODE,
    SPL_SLOT,
    SPL_START,
)

from ._device_fns import (
    MAX_BLOCK,
    block_exclusive_scan,
    block_inclusive_scan,
    find_segment,
    gpu_task_count,
    last_block_done,
    row_at,
    split_goes_left,
    task_range,
)


@cuda.jit(device=True)
def _task_split(Xcols, spl, ctrl, rows_per_task, task):
    """Task ``task``'s split ``s`` and rows [lo, hi), and the split as ``split_goes_left``
    reads it: the feature's column, threshold bin, missing-left, categorical flag, bitset."""
    s = find_segment(spl[SPL_FIRST_TASK], ctrl[CTRL_N_SEGMENTS], task)
    lo, hi = task_range(
        spl[SPL_START, s], spl[SPL_COUNT, s], spl[SPL_FIRST_TASK, s], rows_per_task, task
    )
    return (
        s,
        lo,
        hi,
        Xcols[spl[SPL_FEATURE, s]],
        spl[SPL_BIN, s],
        spl[SPL_MISSING_LEFT, s],
        spl[SPL_IS_CAT, s] != 0,
        spl[SPL_CAT_BITS:SPL_IS_CAT, s],
    )


@cuda.jit(cache=True)
def partition_count_kernel(
    Xcols,
    rows2,
    cur,
    ident,
    spl,
    ctrl,
    rows_per_task,
    chunk_left,
    chunk_off,
    nodes,
    bld,
    out_i,
    lc_base,
):
    if (
        cuda.blockIdx.x < ctrl[CTRL_SPLIT_TASKS]
    ):  # the same for the whole block: its barriers are safe
        _count(Xcols, rows2, cur, ident, spl, ctrl, rows_per_task, chunk_left)
    if not last_block_done(ctrl, cuda.shared.array(1, dtype=int32)):  # the last block plans
        return
    _plan(spl, ctrl, rows_per_task, chunk_left, chunk_off, nodes, bld, out_i, lc_base)


@cuda.jit(device=True)
def _count(Xcols, rows2, cur, ident, spl, ctrl, rows_per_task, chunk_left):
    task = cuda.blockIdx.x
    count = cuda.shared.array(1, dtype=int32)
    t = cuda.threadIdx.x
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    s, lo, hi, col, thr, ml, cat, bits = _task_split(Xcols, spl, ctrl, rows_per_task, task)
    rows = rows2[cur]
    mine = 0
    for j in range(lo + t, hi, cuda.blockDim.x):
        if split_goes_left(col[row_at(rows, j, ident)], thr, ml, cat, bits):
            mine += 1
    if mine:
        cuda.atomic.add(count, 0, int32(mine))  # 32-bit: a task has < 2**31 rows
    cuda.syncthreads()
    if t == 0:
        chunk_left[task] = count[0]


@cuda.jit(device=True)
def _plan(spl, ctrl, rows_per_task, chunk_left, chunk_off, nodes, bld, out_i, lc_base):
    sh = cuda.shared.array(MAX_BLOCK, dtype=int64)
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n_split = ctrl[CTRL_N_SEGMENTS]
    block_exclusive_scan(chunk_left, chunk_off, ctrl[CTRL_SPLIT_TASKS], sh)
    for s in range(t, n_split, nt):
        first = spl[SPL_FIRST_TASK, s]
        count = spl[SPL_COUNT, s]
        n_t = gpu_task_count(count, rows_per_task)
        lc = chunk_off[first + n_t] - chunk_off[first]
        node = spl[SPL_NODE, s]
        start = spl[SPL_START, s]
        left = 2 * node + 1
        nodes[NODE_START, left] = start
        nodes[NODE_COUNT, left] = lc
        nodes[NODE_START, left + 1] = start + lc
        nodes[NODE_COUNT, left + 1] = count - lc
        out_i[lc_base + spl[SPL_SLOT, s]] = lc
        if lc <= count - lc:  # build the smaller child (ties: the left), as the CPU
            bld[BLD_START, s] = start
            bld[BLD_COUNT, s] = lc
            bld[BLD_SLOT, s] = 2 * s
            bld[BLD_SIBLING, s] = 2 * s + 1
        else:
            bld[BLD_START, s] = start + lc
            bld[BLD_COUNT, s] = count - lc
            bld[BLD_SLOT, s] = 2 * s + 1
            bld[BLD_SIBLING, s] = 2 * s
        bld[BLD_PARENT, s] = spl[SPL_SLOT, s]
        chunk_left[s] = gpu_task_count(bld[BLD_COUNT, s], rows_per_task)  # reused: tasks
    cuda.syncthreads()
    block_exclusive_scan(chunk_left, bld[BLD_FIRST_TASK], n_split, sh)
    if t == 0:
        ctrl[CTRL_BUILD_TASKS] = bld[BLD_FIRST_TASK, n_split]


@cuda.jit(cache=True)
def partition_scatter_kernel(Xcols, rows2, cur, ident, spl, ctrl, rows_per_task, chunk_off, nodes):
    task = cuda.blockIdx.x
    if task >= ctrl[CTRL_SPLIT_TASKS]:
        return
    sh = cuda.shared.array(MAX_BLOCK, dtype=int64)
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    s, lo, hi, col, thr, ml, cat, bits = _task_split(Xcols, spl, ctrl, rows_per_task, task)
    start = spl[SPL_START, s]
    src = rows2[cur]
    dst = rows2[1 - cur]

    # Thread t owns the consecutive positions [lo + j0, lo + j1) of the task.
    n_task = hi - lo
    per = (n_task + nt - 1) // nt
    j0 = min(t * per, n_task)
    j1 = min(j0 + per, n_task)
    mine = int64(0)
    for j in range(lo + j0, lo + j1):
        if split_goes_left(col[row_at(src, j, ident)], thr, ml, cat, bits):
            mine += 1
    lefts_before = block_inclusive_scan(sh, t, nt, mine) - mine  # within the task
    rights_before = j0 - lefts_before

    task_lefts = (
        chunk_off[task] - chunk_off[spl[SPL_FIRST_TASK, s]]
    )  # lefts of the segment before the task
    left_dst = start + task_lefts + lefts_before
    right_dst = (
        start
        + nodes[NODE_COUNT, 2 * spl[SPL_NODE, s] + 1]
        + (lo - start - task_lefts)
        + rights_before
    )
    for j in range(lo + j0, lo + j1):
        r = row_at(src, j, ident)
        if split_goes_left(col[r], thr, ml, cat, bits):
            dst[left_dst] = r
            left_dst += 1
        else:
            dst[right_dst] = r
            right_dst += 1
