"""Histograms of a level's build nodes (the smaller child of each split) in one launch.

Two kernels with one signature, chosen by ``backends.launch_rules.HIST_KERNEL``:
``histogram_bounded_kernel`` (the default) for fixed-point values bounded per row by
``gpufs.engine.quantize.QGRAD_BOUND`` and tasks of at most ``PACK_CHUNK_ROWS`` rows, and
``histogram_kernel`` (split words), exact for any int64 values and task sizes.

``histogram_kernel(Xb, gh, rows2, cur, ident, bld, ctrl, fmask2, fcur, offset, tile_f,
rows_per_task, out)``
  Xb      (n, d) uint8 binned matrix, C order
  gh      (n, 2) int64 fixed-point (gradient, hessian) per row
  rows2   (2, n) int32: the two row-index buffers; rows2[cur] holds the build nodes' rows,
          one contiguous segment per node; with ``ident`` (the root) position j is row j
  bld     (N_BLD_ROWS, S) int64 build table (``gpufs._types``' BLD_* rows), one column per
          node to build: segment start, count, output slot, sibling slot, parent slot, first
          task (tasks of all nodes numbered consecutively; node s has
          ceil(count / rows_per_task) of them)
  ctrl    int64 control words on the device: ctrl[CTRL_N_SEGMENTS] build nodes,
          ctrl[CTRL_BUILD_TASKS] tasks
  fmask2  (2, d) uint8: fmask2[fcur, f] is 1 for the features to build
  offset  (d + 1,) int64 the histogram layout (``gpufs.rules._hist_layout``): feature f's bins at
          slots offset[f] .. offset[f + 1] - 1, value bins first, the missing bin last
  tile_f  (n_tiles + 1,) int64: tile t holds the features tile_f[t] .. tile_f[t + 1] - 1
          (``tiles``: runs of whole features of at most ``tile_slots`` slots)
  out     (S, n_slots, 2) int64, zero in the build slots: out[slot, offset[f] + b] += (g, h) of
          every row of the node with value bin b on feature f (the missing bin at the last)
Launch: grid (an upper bound on the tasks, n_tiles), any block size, dynamic shared memory
``max_tile_bytes`` (the largest tile's). Blocks past the device's task count, and tiles
without a feature to build, return at once, so the host sizes the grid without reading the
counts.

The siblings of the built nodes are derived by subtraction in the next level's
``split.search_kernel``.

Why ``histogram_bounded_kernel`` (same arguments, tiles of ``bounded_tile_words``):
  * ``gpufs.engine.quantize`` bounds every row's |g_q| and |h_q| by 2**15, and the backend cuts
    tasks of at most ``PACK_CHUNK_ROWS`` = 2**16 - 1 rows (``launch_rules.max_rows_per_task``),
    so a block's sum of either quantity in one bin stays within +-(2**31 - 2**15): one int32
    shared word per quantity holds it exactly, and each element costs two native 32-bit
    shared atomics whose results are not read (no carry, no returned value to wait for)
    instead of the split words' two to four returning atomics and carry arithmetic.
  * A slot is 2 words (g, h) and every 16 slots are followed by one word of padding
    (``bounded_tile_word``): half the shared memory per slot, so a tile holds twice the
    features and each row's gradients are read by half as many tiles.
  * Why not one 64-bit atomic on a packed (g, h) word: the hardware has none for shared
    memory. ptxas lowers PTX ``atom.shared.add.u64`` to a compare-and-swap loop
    (``ATOMS.CAST.SPIN.64``) on sm_80, sm_90 and sm_100 (checked with the CUDA 13 ptxas of
    the test extra), which is what the split words were built to avoid; the SASS test
    refuses it. (The CPU, with no atomics, can use the packed word: ``quantize.pack``.)
  * The flush sign-extends each word to int64 and adds it to the global histogram with one
    native 64-bit global atomic, as the split-word kernel does: both kernels give the CPU's
    histograms bit for bit.

Why the histogram kernel has this shape:
  * Exact integer sums without 64-bit shared atomics, which the hardware runs as
    compare-and-swap loops (``ATOMS.CAST.SPIN.64`` in the SASS): each int64 value is added
    as two native 32-bit shared atomics on a (low, high) word pair, the carry out of the low
    word detected from the value the atomic returns (``_device_fns.add_split_word``). The
    arithmetic is modulo 2**64, so no bound on rows per block is needed, and the flush turns
    each pair back into the exact int64 sum and adds it to global memory with one native
    64-bit global atomic (``RED.E.ADD.64``). Integer sums are order-free: the result equals
    the CPU's, bit for bit, and sibling subtraction is exact.
  * The block's tile lives in shared memory and is flushed once: global traffic per block is
    one tile, not one atomic per row. A tile is sized by the slots of the features it holds
    (a column with two distinct values takes 3 slots, not 256), so one tile holds about 1,000
    such columns instead of 11.
  * Thread t works on feature ``t % nf`` of row ``t // nf`` (with more features than threads,
    each thread takes every ``nt``-th feature of each row): neighbouring lanes of a warp read
    neighbouring bytes of one row and update different features' histograms, instead of a
    whole warp hammering the bins of one feature.
  * A slot is 4 words (g and h, low and high) and every 8 slots are followed by one word of
    padding (``tile_word``), which puts neighbouring features' same bins on different banks.
"""

import numpy as np
from numba import cuda, int32, int64, uint32

from gpufs._types import (
    BLD_COUNT,
    BLD_FIRST_TASK,
    BLD_SLOT,
    BLD_START,
    CTRL_BUILD_TASKS,
    CTRL_N_SEGMENTS,
)

from ._device_fns import add_split_word, find_segment, row_at, slot_of, split_word_value, task_range

#: Most histogram slots of one tile: its words (``tile_words``) fit numba-cuda's 48 KB of
#: dynamic shared memory. At least 256, the widest feature.
MAX_TILE_SLOTS = 2978


def tile_words(n_slots):
    """The uint32 words of a shared tile: 4 per slot, one padding word per 8 slots.

    Parameters
    ----------
    n_slots : int
        Histogram slots of the tile.

    Returns
    -------
    int
    """
    return 4 * n_slots + n_slots // 8 + 1


@cuda.jit(device=True)
def tile_word(s):
    """The first word of slot ``s`` of a tile: [g low, g high, h low, h high]."""
    return 4 * s + (s >> 3)


def tiles(offset, tile_slots):
    """The feature tiles of a histogram layout: runs of consecutive whole features holding at
    most ``max(tile_slots, the widest feature)`` slots, greedily.

    Parameters
    ----------
    offset : ndarray of shape (d + 1,), int64
    tile_slots : int

    Returns
    -------
    tile_f : ndarray of shape (n_tiles + 1,), int64
        Tile t holds features tile_f[t] .. tile_f[t + 1] - 1.
    max_slots : int
        Slots of the largest tile.
    """
    offset = np.asarray(offset, np.int64)
    d = offset.shape[0] - 1
    cap = max(int(tile_slots), int(np.diff(offset).max()) if d else 1)
    bounds = [0]
    for f in range(d):
        if offset[f + 1] - offset[bounds[-1]] > cap:
            bounds.append(f)
    if d:
        bounds.append(d)
    tile_f = np.asarray(bounds, np.int64)
    widths = offset[tile_f[1:]] - offset[tile_f[:-1]] if d else np.zeros(0, np.int64)
    return tile_f, int(widths.max()) if widths.size else 0


assert tile_words(MAX_TILE_SLOTS) * 4 <= 48 * 1024 < tile_words(MAX_TILE_SLOTS + 1) * 4

#: Most histogram slots of one tile of ``histogram_bounded_kernel`` within 48 KB.
MAX_BOUNDED_TILE_SLOTS = 5957


def bounded_tile_words(n_slots):
    """The int32 words of a shared tile of ``histogram_bounded_kernel``: 2 per slot, one
    padding word per 16 slots.

    Parameters
    ----------
    n_slots : int
        Histogram slots of the tile.

    Returns
    -------
    int
    """
    return 2 * n_slots + n_slots // 16 + 1


@cuda.jit(device=True)
def bounded_tile_word(s):
    """The first word of slot ``s`` of a bounded tile: [g, h]."""
    return 2 * s + (s >> 4)


assert (
    bounded_tile_words(MAX_BOUNDED_TILE_SLOTS) * 4
    <= 48 * 1024
    < bounded_tile_words(MAX_BOUNDED_TILE_SLOTS + 1) * 4
)


@cuda.jit(cache=True)
def histogram_kernel(
    Xb, gh, rows2, cur, ident, bld, ctrl, fmask2, fcur, offset, tile_f, rows_per_task, out
):
    task = cuda.blockIdx.x
    if task >= ctrl[CTRL_BUILD_TASKS]:
        return  # the whole block leaves together, before any barrier
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    fa = tile_f[cuda.blockIdx.y]
    fb = tile_f[cuda.blockIdx.y + 1]
    mask = fmask2[fcur]
    listed = 0
    for f in range(fa + tid, fb, nt):
        if mask[f] != 0:
            listed = 1
    if cuda.syncthreads_or(listed) == 0:
        return  # no feature of this tile is built: the whole block leaves
    t0 = offset[fa]
    n_slots = offset[fb] - t0
    sh = cuda.shared.array(0, dtype=uint32)
    for k in range(tid, 4 * n_slots + (n_slots >> 3) + 1, nt):
        sh[k] = 0
    cuda.syncthreads()

    s = find_segment(bld[BLD_FIRST_TASK], ctrl[CTRL_N_SEGMENTS], task)
    lo, hi = task_range(
        bld[BLD_START, s], bld[BLD_COUNT, s], bld[BLD_FIRST_TASK, s], rows_per_task, task
    )
    slot = bld[BLD_SLOT, s]
    rows = rows2[cur]
    nf = fb - fa
    nfs = min(nf, nt)  # features in flight per row
    lanes = nt // nfs  # rows in flight per block
    fl = tid % nfs  # this thread's first feature within the tile
    rl = tid // nfs  # this thread's row lane
    if rl < lanes:  # the last nt % nfs threads idle
        j = lo + rl
        while j < hi:
            r = row_at(rows, j, ident)
            g = gh[r, 0]
            h = gh[r, 1]
            for f in range(fa + fl, fb, nfs):
                if mask[f] != 0:
                    w = tile_word(slot_of(int64(Xb[r, f]), offset[f], offset[f + 1] - 1) - t0)
                    add_split_word(sh, w, g)
                    add_split_word(sh, w + 2, h)
            j += lanes
    cuda.syncthreads()

    for k in range(tid, 2 * n_slots, nt):
        sl = k >> 1
        v = split_word_value(sh, tile_word(sl) + 2 * (k & 1))
        if v != 0:  # adding 0 changes nothing; most bins of a small task are empty
            cuda.atomic.add(out, (slot, t0 + sl, k & 1), v)


@cuda.jit(cache=True)
def histogram_bounded_kernel(
    Xb, gh, rows2, cur, ident, bld, ctrl, fmask2, fcur, offset, tile_f, rows_per_task, out
):
    task = cuda.blockIdx.x
    if task >= ctrl[CTRL_BUILD_TASKS]:
        return  # the whole block leaves together, before any barrier
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    fa = tile_f[cuda.blockIdx.y]
    fb = tile_f[cuda.blockIdx.y + 1]
    mask = fmask2[fcur]
    listed = 0
    for f in range(fa + tid, fb, nt):
        if mask[f] != 0:
            listed = 1
    if cuda.syncthreads_or(listed) == 0:
        return  # no feature of this tile is built: the whole block leaves
    t0 = offset[fa]
    n_slots = offset[fb] - t0
    sh = cuda.shared.array(0, dtype=int32)
    for k in range(tid, 2 * n_slots + (n_slots >> 4) + 1, nt):
        sh[k] = 0
    cuda.syncthreads()

    s = find_segment(bld[BLD_FIRST_TASK], ctrl[CTRL_N_SEGMENTS], task)
    lo, hi = task_range(
        bld[BLD_START, s], bld[BLD_COUNT, s], bld[BLD_FIRST_TASK, s], rows_per_task, task
    )
    slot = bld[BLD_SLOT, s]
    rows = rows2[cur]
    nf = fb - fa
    nfs = min(nf, nt)  # features in flight per row
    lanes = nt // nfs  # rows in flight per block
    fl = tid % nfs  # this thread's first feature within the tile
    rl = tid // nfs  # this thread's row lane
    if rl < lanes:  # the last nt % nfs threads idle
        j = lo + rl
        while j < hi:
            r = row_at(rows, j, ident)
            g = int32(gh[r, 0])  # exact: |g|, |h| <= QGRAD_BOUND
            h = int32(gh[r, 1])
            for f in range(fa + fl, fb, nfs):
                if mask[f] != 0:
                    w = bounded_tile_word(
                        slot_of(int64(Xb[r, f]), offset[f], offset[f + 1] - 1) - t0
                    )
                    cuda.atomic.add(sh, w, g)
                    cuda.atomic.add(sh, w + 1, h)
            j += lanes
    cuda.syncthreads()

    for k in range(tid, 2 * n_slots, nt):
        v = int64(sh[bounded_tile_word(k >> 1) + (k & 1)])
        if v != 0:  # adding 0 changes nothing; most bins of a small task are empty
            cuda.atomic.add(out, (slot, t0 + (k >> 1), k & 1), v)
