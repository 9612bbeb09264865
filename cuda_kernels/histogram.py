"""Histograms of a level's build nodes (the smaller child of each split) in one launch.

``histogram_kernel(Xb, gh, rows2, cur, bld, ctrl, feats2, fcur, rows_per_task, tile, out)``
  Xb      (n, d) uint8 binned matrix, C order
  gh      (n, 2) int64 fixed-point (gradient, hessian) per row
  rows2   (2, n) int32: the two row-index buffers; rows2[cur] holds the build nodes' rows,
          one contiguous segment per node
  bld     (6, S) int64 build table, one column per node to build: segment start, count,
          output slot, sibling slot, parent slot, first task (tasks of all nodes numbered
          consecutively; node s has ceil(count / rows_per_task) of them)
  ctrl    int64 control words on the device: ctrl[0] build nodes, ctrl[2] tasks,
          ctrl[4 + b] features in feats2[b]
  feats2  (2, d) int32: feature lists; feats2[fcur, :ctrl[4 + fcur]] are built
  out     (S, d, 256, 2) int64, zero in the build slots: out[slot, f, b] += (g, h) of every
          row of the node with bin b on feature f
Launch: grid (an upper bound on the tasks, an upper bound on the feature tiles), any block
size >= ``tile``, dynamic shared memory ``tile * FEATURE_WORDS * 4`` bytes. Blocks past the
device's counts return at once, so the host sizes the grid without reading the counts.

The siblings of the built nodes are derived by subtraction in the next level's
``split.search_kernel``.

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
    one tile, not one atomic per row.
  * Thread t works on feature ``t % nf`` of row ``t // nf``: neighbouring lanes of a warp read
    neighbouring bytes of one row and update different features' histograms, instead of a
    whole warp hammering the 256 bins of one feature.
  * A feature's tile is 4 * 256 + 1 words: the odd stride puts the lanes of one row (same bin,
    different features) on different shared-memory banks.
"""
import numpy as np
from numba import cuda, int64, uint32

from gpufs._types import N_HIST_BINS

from ._device_fns import add_split_word, find_segment, split_word_value, task_range

#: uint32 words per feature in the shared tile: (g, h) x 256 bins x (low, high), plus one
#: word of bank padding.
FEATURE_WORDS = 4 * N_HIST_BINS + 1
#: Largest tile that fits numba-cuda's 48 KB of dynamic shared memory.
MAX_TILE_FEATURES = (48 * 1024) // (FEATURE_WORDS * 4)
_GH_WORDS = 2 * N_HIST_BINS


@cuda.jit(cache=True)
def histogram_kernel(Xb, gh, rows2, cur, bld, ctrl, feats2, fcur, rows_per_task, tile, out):
    task = cuda.blockIdx.x
    i0 = cuda.blockIdx.y * tile
    n_f = ctrl[4 + fcur]
    if task >= ctrl[2] or i0 >= n_f:
        return  # the whole block leaves together, before any barrier
    sh = cuda.shared.array(0, dtype=uint32)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    nf = min(tile, n_f - i0)
    for k in range(tid, nf * FEATURE_WORDS, nt):
        sh[k] = 0
    cuda.syncthreads()

    s = find_segment(bld[5], ctrl[0], task)
    lo, hi = task_range(bld[0, s], bld[1, s], bld[5, s], rows_per_task, task)
    slot = bld[2, s]
    rows = rows2[cur]
    lanes = nt // nf          # rows in flight per block
    fl = tid % nf             # this thread's feature within the tile
    rl = tid // nf            # this thread's row lane
    if rl < lanes:            # the last nt % nf threads idle
        f = feats2[fcur, i0 + fl]
        base = fl * FEATURE_WORDS
        j = lo + rl
        while j < hi:
            r = rows[j]
            w = base + 4 * np.int64(Xb[r, f])
            add_split_word(sh, w, gh[r, 0])
            add_split_word(sh, w + 2, gh[r, 1])
            j += lanes
    cuda.syncthreads()

    for k in range(tid, nf * _GH_WORDS, nt):
        fk = k // _GH_WORDS
        w = k - fk * _GH_WORDS  # 2 * bin + (0: g, 1: h)
        v = split_word_value(sh, fk * FEATURE_WORDS + 2 * w)
        if v != 0:  # adding 0 changes nothing; most bins of a small task are empty
            cuda.atomic.add(out, (slot, feats2[fcur, i0 + fk], w >> 1, w & 1), v)
