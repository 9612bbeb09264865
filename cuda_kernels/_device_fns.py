"""Device functions shared by the kernels: the one gain formula, bin scan, decision rule,
split rule, fixed-point row arithmetic, and the block-level building blocks (scan, segment
lookup, split-word accumulation).

``candidate`` / ``scan_feature`` / ``goes_left`` / ``goes_left_raw`` / ``bin_of`` and the
tree walk (``leaf_binned`` / ``leaf_raw``) come from ``gpufs.rules._gain``, ``scan_categorical`` /
``left_word`` / ``split_goes_left`` / ``split_goes_left_raw`` from ``gpufs.rules._categorical``,
``best_over_features`` / ``decide_level`` from ``gpufs.rules._level``, the task rule
(``task_bounds`` / ``gpu_task_count``) from ``gpufs.rules._tasks``, the histogram slot of a bin
(``slot_of``) from ``gpufs.rules._hist_layout`` and the fixed-point row arithmetic
from ``gpufs.rules._exactmath``: the very functions the CPU backend
compiles with ``numba.njit``, compiled here with ``cuda.jit(device=True)``, so both devices
evaluate one formula and one rule. ``_gain``'s docstring explains why that formula cannot be
contracted into fused multiply-adds (which would round differently from the CPU).
"""

import os

import numpy as np
from numba import cuda, int64, uint32

from gpufs._types import CTRL_TICKET
from gpufs.rules import _categorical, _exactmath, _gain, _hist_layout, _level, _tasks

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _rint = np.rint  # the simulator's libdevice functions are stubs
else:
    from numba.cuda import libdevice

    _rint = libdevice.rint  # cvt.rni.f64.f64: IEEE round to integral, ties to even

_device = cuda.jit(device=True)

candidate = _device(_gain.candidate)
scan_feature = _device(_gain.make_scan_feature(candidate))
goes_left = _device(_gain.goes_left)
goes_left_raw = _device(_gain.goes_left_raw)
scan_categorical = _device(_categorical.make_scan_categorical(candidate))
left_word = _device(_categorical.left_word)
split_goes_left = _device(_categorical.split_goes_left)
split_goes_left_raw = _device(_categorical.split_goes_left_raw)
bin_of = _device(_gain.bin_of)
leaf_binned = _device(_gain.make_leaf_of(split_goes_left))
leaf_raw = _device(_gain.make_leaf_of(split_goes_left_raw))
best_over_features = _device(_level.best_over_features)
decide_level = _device(_level.decide_level)
task_bounds = _device(_tasks.task_bounds)
gpu_task_count = _device(_tasks.gpu_task_count)
slot_of = _device(_hist_layout.slot_of)
LEAF = _level.LEAF
TAKE_BEST = _level.TAKE_BEST

_fp = _exactmath.make_fixed_point(_rint, np.int64, _device)
weighted = _fp.weighted
fixed = _fp.fixed
two_word = _fp.two_word

#: Largest block of the one-block kernels (their shared scan arrays are this long).
MAX_BLOCK = 1024
_LOW32 = 0xFFFFFFFF
_TWO32 = 4294967296
_TWO31 = 2147483648


@cuda.jit(device=True)
def last_block_done(ctrl, last):
    """Whether this block is the last of its launch to finish, every block's results then
    visible to it (CUDA's threadFenceReduction pattern): each block fences its writes and takes
    a ticket in ``ctrl[CTRL_TICKET]``; the holder of the last one resets the counter for the level's
    next fused launch. ``last`` is a (1,) int32 shared array. Every thread of a block must
    call it (it holds barriers)."""
    cuda.threadfence()
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        last[0] = 1 if cuda.atomic.add(ctrl, CTRL_TICKET, 1) == cuda.gridDim.x - 1 else 0
    cuda.syncthreads()
    if last[0] == 0:
        return False
    cuda.threadfence()
    if cuda.threadIdx.x == 0:
        ctrl[CTRL_TICKET] = 0
    return True


@cuda.jit(device=True)
def find_segment(first, n, t):
    """The last s in [0, n) with first[s] <= t (``first`` non-decreasing, first[0] == 0):
    the segment that task t belongs to. Segments without tasks share their successor's
    ``first`` and are skipped, since the last of equal entries is taken."""
    lo = 0
    hi = n - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if first[mid] <= t:
            lo = mid
        else:
            hi = mid - 1
    return lo


@cuda.jit(device=True)
def row_at(rows, j, ident):
    """The row at position j of a row buffer; position j itself where ``ident`` (the root's
    rows are every row in order: no buffer holds them, so a tree starts without a launch)."""
    if ident:
        return int64(j)
    return int64(rows[j])


@cuda.jit(device=True)
def task_range(start, count, first, rows_per_task, t):
    """Positions [lo, hi) of task t of a segment (start, count) whose tasks begin at
    ``first``: ``gpufs.rules._tasks``' GPU rule, ceil(count / rows_per_task) near-equal runs."""
    return task_bounds(start, count, gpu_task_count(count, rows_per_task), t - first)


@cuda.jit(device=True)
def block_inclusive_scan(sh, t, nt, value):
    """Inclusive sum of ``value`` over threads 0..t of the block (Hillis-Steele in the shared
    int64 array ``sh`` of at least ``nt`` entries; every thread of the block must call)."""
    sh[t] = value
    cuda.syncthreads()
    off = 1
    while off < nt:
        add = int64(0)
        if t >= off:
            add = sh[t - off]
        cuda.syncthreads()
        sh[t] += add
        cuda.syncthreads()
        off *= 2
    out = sh[t]
    cuda.syncthreads()  # ``sh`` may be reused right after
    return out


@cuda.jit(device=True)
def block_exclusive_scan(src, dst, n, sh):
    """dst[i] = src[0] + ... + src[i - 1] for i in [0, n], dst[n] the total (``src`` and
    ``dst`` int64, may be the same array). Thread t of the block scans a contiguous run of
    ceil(n / blockDim) entries, and one block-wide scan of the run totals gives the runs'
    offsets. Every thread of the block must call."""
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    per = (n + nt - 1) // nt
    a = min(t * per, n)
    b = min(a + per, n)
    run = int64(0)
    for i in range(a, b):
        run += src[i]
    incl = block_inclusive_scan(sh, t, nt, run)
    acc = incl - run
    for i in range(a, b):
        v = src[i]
        dst[i] = acc
        acc += v
    if t == nt - 1:
        dst[n] = incl
    cuda.syncthreads()


@cuda.jit(device=True)
def add_split_word(sh, i, v):
    """sh[i], sh[i + 1] (uint32: low and high word) += v (int64), exactly modulo 2**64.

    Two native 32-bit shared-memory atomics instead of a 64-bit one (which the hardware
    executes as a compare-and-swap loop): the low word wraps modulo 2**32 and the thread
    whose addition wrapped it -- the atomic returns the old value, so exactly one thread sees
    each wrap -- carries one into the high word together with v's high word."""
    lo = v & _LOW32
    old = cuda.atomic.add(sh, i, uint32(lo))
    carry = (int64(old) + lo) >> 32
    hi = (v >> 32) + carry
    if hi != 0:
        cuda.atomic.add(sh, i + 1, uint32(hi & _LOW32))


@cuda.jit(device=True)
def split_word_value(sh, i):
    """The int64 sum held in sh[i] (low) and sh[i + 1] (high) by ``add_split_word``: exact
    when the true sum fits in int64 (the fixed-point scales guarantee it)."""
    hi = int64(sh[i + 1])
    if hi >= _TWO31:
        hi -= _TWO32
    return hi * _TWO32 + int64(sh[i])
