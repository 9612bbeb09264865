"""The CPU's histograms: row-wise or column-wise by shape, sparse rows, sibling subtraction.

Owns how the CPU backend fills a level's histograms in the compact layout
(``gpufs.rules._hist_layout``; only the listed features' slots are zeroed, filled, reduced and
subtracted), by one of two loops chosen per build (``use_columns``; the rule and its
measurement in docs/architecture.rst):
  * row-wise: a task reads every listed feature of a run of rows (two rows interleaved, rows
    ahead prefetched); a big node's extra tasks fill private copies, added up afterwards;
  * column-wise: a task is one feature of every node, the nodes' gradients gathered once;
    the feature's slots stay in the L1 cache.
Sparse features (``HistLayout.most_freq``): when every feature is built, their bins other
than the most frequent come from a row-wise list (``sparse_rows``, CSR) and the most frequent
is the node's total minus the rest, exact in int64 (LightGBM's ``most_freq_bin``).
"""

from __future__ import annotations

import llvmlite.ir as llvm_ir
import numpy as np
from numba import njit, prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from ..._types import HIST_DTYPE, MISSING_BIN, N_HIST_BINS
from ...rules import _hist_layout, _tasks
from ._args import RowTasks

_slot = njit(inline="always")(_hist_layout.slot_of)
_task_bounds = njit(inline="always")(_tasks.task_bounds)
_cpu_task_count = njit(inline="always")(_tasks.cpu_task_count)

#: Rows per histogram / partition task; smaller nodes are one task.
ROWS_PER_TASK = 16384
#: Tasks per thread a big node is cut into (load balance on a busy machine).
TASKS_PER_THREAD = 4
#: How many rows ahead a row-wise task prefetches the rows it will read (``_rows_into``).
PREFETCH_ROWS = 16
#: A row-wise build of at most 1 / PREFETCH_LIST_SHARE of a row's features prefetches each
#: listed feature's byte of the rows ahead, a larger one the whole row (``_prefetch_listed``).
PREFETCH_LIST_SHARE = 8
#: int64 words per block of the reduction of private histograms (over every slot).
REDUCE_WORDS = 4096
#: Histogram updates per row-wise task, about, when a build has fewer than one task per
#: thread of ``rows_per_task`` rows: its nodes are then cut into tasks of
#: HIST_TASK_WORK / updates per row rows (at least 256), so a wide table of few rows still
#: gives every thread a task (8,000 rows x 50 updates: 3 tasks, not 1). Bigger builds keep
#: ``rows_per_task`` (more tasks would add private copies to add up).
HIST_TASK_WORK = 1 << 17
#: The row-wise / column-wise rule (``use_columns``): columns when a build has COLUMN_MIN_ROWS
#: to COLUMN_MAX_ROWS rows (fewer: a feature's zeroing and set-up outweigh its few rows; more:
#: the gathered gradients, 16 bytes a row, that every feature re-reads leave the caches) and
#: a node's histogram of the features read densely is larger than COLUMN_MIN_HIST_BYTES (the
#: row-wise loop's scattered updates leave the L2 cache, and its private copies cost as much
#: as the rows). Measured: bench/bench_hist_loop.py, docs/architecture.rst.
COLUMN_MIN_ROWS = 1024
COLUMN_MAX_ROWS = 65536
COLUMN_MIN_HIST_BYTES = 1 << 20
#: Columns too, in that range of rows, when a build takes the sparse features from the sparse
#: rows list, reads densely at most 1 / COLUMN_SPARSE_SHARE of the features, and its dense
#: updates are at least as many as its sparse ones: a row-wise read fetches about a cache line
#: of the row per dense feature, mostly the sparse features' bytes, while the column-wise
#: loop adds the sparse list in one task per node. Measured on two tables (this 2-core box,
#: the 20-tree fit's boosting, in one process against the loop forced row-wise): 8,000 x
#: 1,397 one-hot flags (50 dense features, 22 sparse entries a row) 0.164 -> 0.102 s on one
#: thread, 0.111 -> 0.089 s on two; 8,000 x 1,500 counts (20 dense, 29 sparse a row), which
#: the second condition leaves row-wise, was 4 % slower on one thread and 30 % on two.
COLUMN_SPARSE_SHARE = 8
#: ``use_columns``' modes: the rule, or one loop always.
AUTO, ROWS, COLUMNS = 0, 1, 2
#: int64 words of a feature with every slot (255 value bins and the missing bin): in a layout
#: of only such features, feature f's bin b sits at word ``2 * (N_HIST_BINS * f + b)`` (the
#: missing bin, 255, is the last slot by itself), the row-wise loops' constant stride.
_FULL_WORDS = 2 * N_HIST_BINS
assert MISSING_BIN == N_HIST_BINS - 1


@intrinsic
def prefetch(typingctx, a, i, j):
    """Ask the CPU to bring a[i, j] (a 2-D array) into its caches (LLVM's ``llvm.prefetch``:
    a hint, no result, no fault on any address)."""

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        arr = context.make_array(aty)(context, builder, args[0])
        idx = [
            context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], signature.args[1:])
        ]
        ptr = cgutils.get_item_pointer(context, builder, aty, arr, idx)
        i8p = llvm_ir.IntType(8).as_pointer()
        i32 = llvm_ir.IntType(32)
        fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # read, high temporal locality, data cache
        builder.call(
            fn,
            [
                builder.bitcast(ptr, i8p),
                llvm_ir.Constant(i32, 0),
                llvm_ir.Constant(i32, 3),
                llvm_ir.Constant(i32, 1),
            ],
        )
        return context.get_dummy_value()

    return types.void(a, i, j), codegen


@intrinsic
def _add_pair(typingctx, H, i, g, h):
    """H[i] += g and H[i + 1] += h (H a C-contiguous 1-D int64 array; i, g, h integers) as
    one two-lane vector load, add and store: half the memory operations of two scalar
    read-modify-writes, and the same integer sums. The row-wise loops ran 20-30 % faster
    with it (1,000,000 x 100, one thread, every row: 0.91 against 0.67 ns per update; an
    eighth: 0.95 against 0.79)."""
    if not (
        isinstance(H, types.Array)
        and H.ndim == 1
        and H.layout == "C"
        and H.dtype == types.int64
        and all(isinstance(x, types.Integer) for x in (i, g, h))
    ):
        return None

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        arr = context.make_array(aty)(context, builder, args[0])
        idx = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aty, arr, [idx])
        i64 = llvm_ir.IntType(64)
        v2 = llvm_ir.VectorType(i64, 2)
        vp = builder.bitcast(ptr, v2.as_pointer())
        inc = llvm_ir.Constant(v2, llvm_ir.Undefined)
        for lane, (val, ty) in enumerate(zip(args[2:], signature.args[2:])):
            v = context.cast(builder, val, ty, types.int64)
            inc = builder.insert_element(inc, v, llvm_ir.Constant(llvm_ir.IntType(32), lane))
        builder.store(builder.add(builder.load(vp, align=8), inc), vp, align=8)
        return context.get_dummy_value()

    return types.void(H, i, g, h), codegen


@njit(inline="always")
def _prefetch_row(Xb, q, d):
    """Prefetch every cache line of row q's first d bins (Xb (n, d) uint8): a row of 100 bins
    spans two or three 64-byte lines, and a prefetch of its first byte alone left the loops
    of a node's scattered rows waiting on the rest (1,000,000 x 100, one thread, an eighth of
    the rows: 2.14 against 0.91 ns per update; every row: 0.86 against 0.81)."""
    for k in range(0, d, 64):
        prefetch(Xb, q, k)
    prefetch(Xb, q, d - 1)


@njit(inline="always")
def _prefetch_listed(Xb, q, feats, n_feats, d):
    """Prefetch the bins of row q that a build of the listed features reads: each listed
    feature's byte when they are few (at most d / PREFETCH_LIST_SHARE), else every line of the
    row (``_prefetch_row``). 1,000,000 x 100, one thread, ns per update, a sixteenth of the
    rows, the row's first line / these: 3 features 21.5 / 13.6, 5 features 5.96 / 4.21,
    34 features 2.93 / 1.66."""
    if n_feats * PREFETCH_LIST_SHARE <= d:
        for i in range(n_feats):
            prefetch(Xb, q, feats[i])
    else:
        _prefetch_row(Xb, q, d)


@njit(cache=True, nogil=True)
def task_table(seg_start, seg_count, n_tasks_max, rows_per_task):
    """Cut segments into tasks by ``gpufs.rules._tasks``' CPU rule (about ``rows_per_task`` rows,
    at most ``n_tasks_max`` per segment, one per empty or small segment). Returns (t_seg,
    t_lo, t_hi, t_first) int64, ``t_first`` is 1 for the first task of its segment."""
    m = seg_start.shape[0]
    per = np.empty(m, np.int64)
    total = 0
    for s in range(m):
        k = _cpu_task_count(seg_count[s], rows_per_task, n_tasks_max)
        per[s] = k
        total += k
    t_seg = np.empty(total, np.int64)
    t_lo = np.empty(total, np.int64)
    t_hi = np.empty(total, np.int64)
    t_first = np.empty(total, np.int64)
    t = 0
    for s in range(m):
        k = per[s]
        lo = seg_start[s]
        c = seg_count[s]
        for i in range(k):
            t_seg[t] = s
            t_lo[t], t_hi[t] = _task_bounds(lo, c, k, i)
            t_first[t] = 1 if i == 0 else 0
            t += 1
    return t_seg, t_lo, t_hi, t_first


# cache=True as well: the backend also calls it from Python, where an uncached dispatcher
# compiles in every process (a warm cache's run then printed the compile notice)
@njit(inline="always", cache=True, nogil=True)
def row_cost(src, n_feats, full):
    """Histogram updates per row of a build over ``n_feats`` features (every feature when
    ``full``): the listed features, or the dense ones and the row's share of the sparse
    rows list (``build_histograms``' ``src``)."""
    if full and src.sparse_f.shape[0] > 0:
        n = max(src.by_row.shape[0], 1)
        return src.dense_f.shape[0] + (src.sp_slot.shape[0] + n - 1) // n
    return n_feats


@njit(inline="always")
def use_columns(mode, n_rows, hist_bytes, scattered):
    """Whether a build of ``n_rows`` rows into histograms of ``hist_bytes`` bytes (per node,
    the features read densely) runs column-wise (``AUTO``: the rule of COLUMN_MIN_ROWS,
    COLUMN_MAX_ROWS, COLUMN_MIN_HIST_BYTES and, for a build whose dense features are
    ``scattered`` among sparse ones, COLUMN_SPARSE_SHARE)."""
    if mode == ROWS:
        return False
    if mode == COLUMNS:
        return True
    return COLUMN_MIN_ROWS <= n_rows <= COLUMN_MAX_ROWS and (
        hist_bytes > COLUMN_MIN_HIST_BYTES or scattered
    )


# --- one node's histogram -------------------------------------------------------------------
# The loops over rows are called functions with explicit arrays (not bodies inlined into the
# task drivers, not a tuple unpacked inside them: numba compiled those 2-3x slower), and they
# read the layout's offsets as int32 (``off32``): int64 offset loads interleaved with the
# int64 histogram stores ran 1.5x slower (400,000 x 100: 2.1 against 1.35 ns per update).


@njit(inline="always")
def _zero(H, feats, n_feats, off, full):
    """Zero the listed features' slots of H, the flat (2 n_slots,) view of one histogram."""
    if full:
        H[:] = 0
    else:
        for i in range(n_feats):
            f = feats[i]
            H[2 * off[f] : 2 * off[f + 1]] = 0


@njit(inline="always")
def _row_sparse(r, g, h, sp_ptr, sp_slot, H):
    for e in range(sp_ptr[r], sp_ptr[r + 1]):
        s = 2 * np.int64(sp_slot[e])
        _add_pair(H, s, g, h)


@njit(cache=True, nogil=True)
def _rows_into_all(Xb, gh, rows, lo, hi, off32, H):
    """``_rows_into`` for every feature, in order: no feature list to read, each feature's
    first slot carried from the previous one's end (the narrow dense tables' loop)."""
    d = Xb.shape[1]
    j = lo
    ahead = hi - PREFETCH_ROWS - 1
    while j + 1 < hi:
        if j < ahead:
            q0 = rows[j + PREFETCH_ROWS]
            q1 = rows[j + PREFETCH_ROWS + 1]
            _prefetch_row(Xb, q0, d)
            _prefetch_row(Xb, q1, d)
            prefetch(gh, q0, 0)
            prefetch(gh, q1, 0)
        r0 = rows[j]
        r1 = rows[j + 1]
        g0 = gh[r0, 0]
        h0 = gh[r0, 1]
        g1 = gh[r1, 0]
        h1 = gh[r1, 1]
        a = np.int64(off32[0])
        for f in range(d):
            b = np.int64(off32[f + 1])
            i0 = 2 * _slot(np.int64(Xb[r0, f]), a, b - 1)
            i1 = 2 * _slot(np.int64(Xb[r1, f]), a, b - 1)
            _add_pair(H, i0, g0, h0)
            _add_pair(H, i1, g1, h1)
            a = b
        j += 2
    if j < hi:
        r = rows[j]
        g = gh[r, 0]
        h = gh[r, 1]
        for f in range(d):
            s = 2 * _slot(np.int64(Xb[r, f]), np.int64(off32[f]), np.int64(off32[f + 1]) - 1)
            _add_pair(H, s, g, h)


@njit(cache=True, nogil=True)
def _rows_into_all_full(Xb, gh, rows, lo, hi, H):
    """``_rows_into_all`` for a layout whose every feature has all 256 slots (a dense table of
    255-bin features): the slot is ``256 f + bin`` at a constant stride, no offset read and no
    clamp per update. The compact layout's loop, which reads each feature's offsets and clamps
    the missing bin, ran this 1.5-1.7x slower (500,000 x 100, one thread: most of the +38 %
    per tree that the compact layout cost dense tables); same slots, same sums."""
    d = Xb.shape[1]
    j = lo
    ahead = hi - PREFETCH_ROWS - 1
    while j + 1 < hi:
        if j < ahead:
            q0 = rows[j + PREFETCH_ROWS]
            q1 = rows[j + PREFETCH_ROWS + 1]
            _prefetch_row(Xb, q0, d)
            _prefetch_row(Xb, q1, d)
            prefetch(gh, q0, 0)
            prefetch(gh, q1, 0)
        r0 = rows[j]
        r1 = rows[j + 1]
        g0 = gh[r0, 0]
        h0 = gh[r0, 1]
        g1 = gh[r1, 0]
        h1 = gh[r1, 1]
        base = 0
        for f in range(d):
            i0 = base + 2 * np.int64(Xb[r0, f])
            i1 = base + 2 * np.int64(Xb[r1, f])
            _add_pair(H, i0, g0, h0)
            _add_pair(H, i1, g1, h1)
            base += _FULL_WORDS
        j += 2
    if j < hi:
        r = rows[j]
        g = gh[r, 0]
        h = gh[r, 1]
        base = 0
        for f in range(d):
            i = base + 2 * np.int64(Xb[r, f])
            _add_pair(H, i, g, h)
            base += _FULL_WORDS


@njit(cache=True, nogil=True)
def _rows_into_full(Xb, gh, rows, lo, hi, feats, n_feats, H):
    """``_rows_into`` (no sparse rows list) for a layout whose every feature has all 256
    slots: the listed features' slots at ``256 f + bin`` (``_rows_into_all_full``)."""
    d = Xb.shape[1]
    j = lo
    ahead = hi - PREFETCH_ROWS - 1
    while j + 1 < hi:
        if j < ahead:
            q0 = rows[j + PREFETCH_ROWS]
            q1 = rows[j + PREFETCH_ROWS + 1]
            _prefetch_listed(Xb, q0, feats, n_feats, d)
            _prefetch_listed(Xb, q1, feats, n_feats, d)
            prefetch(gh, q0, 0)
            prefetch(gh, q1, 0)
        r0 = rows[j]
        r1 = rows[j + 1]
        g0 = gh[r0, 0]
        h0 = gh[r0, 1]
        g1 = gh[r1, 0]
        h1 = gh[r1, 1]
        for i in range(n_feats):
            f = np.int64(feats[i])
            base = f * _FULL_WORDS
            i0 = base + 2 * np.int64(Xb[r0, f])
            i1 = base + 2 * np.int64(Xb[r1, f])
            _add_pair(H, i0, g0, h0)
            _add_pair(H, i1, g1, h1)
        j += 2
    if j < hi:
        r = rows[j]
        g = gh[r, 0]
        h = gh[r, 1]
        for i in range(n_feats):
            f = np.int64(feats[i])
            w = f * _FULL_WORDS + 2 * np.int64(Xb[r, f])
            _add_pair(H, w, g, h)


@njit(cache=True, nogil=True)
def _rows_into(Xb, gh, rows, lo, hi, feats, n_feats, off32, sparse, sp_ptr, sp_slot, H):
    """Add rows[lo:hi] into H (flat (2 n_slots,)): every bin of the listed features, and with
    ``sparse`` each row's slots of the sparse rows list.

    Each row's bins are read once, contiguously, and its (g, h) once. Two rows are interleaved
    so twice as many independent read-modify-writes are in flight (the loop is bound by their
    latency, not by arithmetic). A node below the root reads a scattered subset of the rows,
    which the hardware prefetchers cannot predict: the rows ``PREFETCH_ROWS`` ahead are
    prefetched (their bins and gradients), measured 15-20% faster on subsets of a quarter of
    the rows or fewer.
    """
    d = Xb.shape[1]
    j = lo
    ahead = hi - PREFETCH_ROWS - 1
    while j + 1 < hi:
        if j < ahead:
            q0 = rows[j + PREFETCH_ROWS]
            q1 = rows[j + PREFETCH_ROWS + 1]
            _prefetch_listed(Xb, q0, feats, n_feats, d)
            _prefetch_listed(Xb, q1, feats, n_feats, d)
            prefetch(gh, q0, 0)
            prefetch(gh, q1, 0)
        r0 = rows[j]
        r1 = rows[j + 1]
        g0 = gh[r0, 0]
        h0 = gh[r0, 1]
        g1 = gh[r1, 0]
        h1 = gh[r1, 1]
        for i in range(n_feats):
            f = feats[i]
            a = np.int64(off32[f])
            z = np.int64(off32[f + 1]) - 1
            i0 = 2 * _slot(np.int64(Xb[r0, f]), a, z)
            i1 = 2 * _slot(np.int64(Xb[r1, f]), a, z)
            _add_pair(H, i0, g0, h0)
            _add_pair(H, i1, g1, h1)
        if sparse:
            _row_sparse(r0, g0, h0, sp_ptr, sp_slot, H)
            _row_sparse(r1, g1, h1, sp_ptr, sp_slot, H)
        j += 2
    if j < hi:
        r = rows[j]
        g = gh[r, 0]
        h = gh[r, 1]
        for i in range(n_feats):
            f = feats[i]
            s = 2 * _slot(np.int64(Xb[r, f]), np.int64(off32[f]), np.int64(off32[f + 1]) - 1)
            _add_pair(H, s, g, h)
        if sparse:
            _row_sparse(r, g, h, sp_ptr, sp_slot, H)


@njit(inline="always")
def _derive_most_freq(H, sparse_f, off, most_freq, g_tot, h_tot):
    """Each sparse feature's most frequent slot of one node's H: the node's totals minus the
    feature's other slots (that slot was zeroed and never added to), exact in int64."""
    for i in range(sparse_f.shape[0]):
        f = sparse_f[i]
        a = off[f]
        sg = g_tot - g_tot
        sh = sg
        for s in range(a, off[f + 1]):
            sg += H[2 * s]
            sh += H[2 * s + 1]
        m = 2 * (a + most_freq[f])
        H[m] = g_tot - sg
        H[m + 1] = h_tot - sh


@njit(cache=True, nogil=True)
def _column_into(col, ghs, rows, seg_start, seg_count, slot_of_seg, a, z, out2):
    """One feature's column (its slots a..z) into every segment's histogram: zeroed, then
    read at the segment's rows; ``ghs`` the gradients gathered by position."""
    for s in range(seg_start.shape[0]):
        H = out2[slot_of_seg[s]]
        for w in range(2 * a, 2 * z + 2):
            H[w] = 0
        lo = seg_start[s]
        for j in range(lo, lo + seg_count[s]):
            _add_pair(H, 2 * _slot(np.int64(col[rows[j]]), a, z), ghs[j, 0], ghs[j, 1])


@njit(cache=True, nogil=True)
def _segment_sparse(H, rows, ghs, lo, hi, off, sparse_f, sp_ptr, sp_slot):
    """One segment's sparse rows list into its histogram H (the sparse features' slots
    zeroed first)."""
    for i in range(sparse_f.shape[0]):
        f = sparse_f[i]
        H[2 * off[f] : 2 * off[f + 1]] = 0
    for j in range(lo, hi):
        _row_sparse(rows[j], ghs[j, 0], ghs[j, 1], sp_ptr, sp_slot, H)


# --- a level's histograms -------------------------------------------------------------------


@njit(inline="always")
def _row_task(t, src, tasks, feats, n_feats, full, sparse, wide, out2, priv2):
    """Row-wise task t (``RowTasks``) of ``src`` (``HistSource``) into its slot of ``out2``
    or its private copy in ``priv2`` (plain arguments: written inside ``prange``); ``wide``:
    every feature has all 256 slots (``_rows_into_all_full``'s constant stride)."""
    p = tasks.priv[t]
    H = out2[tasks.slot[t]] if p < 0 else priv2[p]
    _zero(H, feats, n_feats, src.offset, full)
    if wide and not sparse:
        if full:
            _rows_into_all_full(src.by_row, src.gh, src.rows, tasks.lo[t], tasks.hi[t], H)
        else:
            _rows_into_full(
                src.by_row, src.gh, src.rows, tasks.lo[t], tasks.hi[t], feats, n_feats, H
            )
    elif full and not sparse:
        _rows_into_all(src.by_row, src.gh, src.rows, tasks.lo[t], tasks.hi[t], src.offset32, H)
    else:
        _rows_into(
            src.by_row,
            src.gh,
            src.rows,
            tasks.lo[t],
            tasks.hi[t],
            feats,
            n_feats,
            src.offset32,
            sparse,
            src.sp_ptr,
            src.sp_slot,
            H,
        )


@njit(parallel=True, cache=True, nogil=True)
def _row_tasks_par(src, tasks, feats, n_feats, full, sparse, wide, out2, priv2):
    for t in prange(tasks.slot.shape[0]):
        _row_task(t, src, tasks, feats, n_feats, full, sparse, wide, out2, priv2)


@njit(cache=True, nogil=True)
def _row_tasks_ser(src, tasks, feats, n_feats, full, sparse, wide, out2, priv2):
    for t in range(tasks.slot.shape[0]):
        _row_task(t, src, tasks, feats, n_feats, full, sparse, wide, out2, priv2)


@njit(inline="always")
def _reduce_range(i, r_lo, r_hi, t_slot, t_priv, out2, priv2):
    a = r_lo[i]
    b = r_hi[i]
    for t in range(t_slot.shape[0]):
        p = t_priv[t]
        if p >= 0:
            dst = out2[t_slot[t]]
            src = priv2[p]
            for w in range(a, b):
                dst[w] += src[w]


@njit(parallel=True, cache=True, nogil=True)
def _reduce_par(r_lo, r_hi, t_slot, t_priv, out2, priv2):
    for i in prange(r_lo.shape[0]):
        _reduce_range(i, r_lo, r_hi, t_slot, t_priv, out2, priv2)


@njit(cache=True, nogil=True)
def _reduce_ser(r_lo, r_hi, t_slot, t_priv, out2, priv2):
    for i in range(r_lo.shape[0]):
        _reduce_range(i, r_lo, r_hi, t_slot, t_priv, out2, priv2)


@njit(inline="always")
def _col_task(
    t,
    Xb_cols,
    rows,
    ghs,
    off,
    sp_ptr,
    sp_slot,
    sparse_f,
    seg_start,
    seg_count,
    slot_of_seg,
    lf,
    n_lf,
    out2,
):
    """Task t < n_lf: feature lf[t] of every segment; the tasks after them: segment
    t - n_lf's sparse rows list."""
    if t < n_lf:
        f = lf[t]
        _column_into(
            Xb_cols[f], ghs, rows, seg_start, seg_count, slot_of_seg, off[f], off[f + 1] - 1, out2
        )
    else:
        s = t - n_lf
        lo = seg_start[s]
        _segment_sparse(
            out2[slot_of_seg[s]], rows, ghs, lo, lo + seg_count[s], off, sparse_f, sp_ptr, sp_slot
        )


@njit(parallel=True, cache=True, nogil=True)
def _col_tasks_par(
    n_tasks,
    Xb_cols,
    rows,
    ghs,
    off,
    sp_ptr,
    sp_slot,
    sparse_f,
    seg_start,
    seg_count,
    slot_of_seg,
    lf,
    n_lf,
    out2,
):
    for t in prange(n_tasks):
        _col_task(
            t,
            Xb_cols,
            rows,
            ghs,
            off,
            sp_ptr,
            sp_slot,
            sparse_f,
            seg_start,
            seg_count,
            slot_of_seg,
            lf,
            n_lf,
            out2,
        )


@njit(cache=True, nogil=True)
def _col_tasks_ser(
    n_tasks,
    Xb_cols,
    rows,
    ghs,
    off,
    sp_ptr,
    sp_slot,
    sparse_f,
    seg_start,
    seg_count,
    slot_of_seg,
    lf,
    n_lf,
    out2,
):
    for t in range(n_tasks):
        _col_task(
            t,
            Xb_cols,
            rows,
            ghs,
            off,
            sp_ptr,
            sp_slot,
            sparse_f,
            seg_start,
            seg_count,
            slot_of_seg,
            lf,
            n_lf,
            out2,
        )


@njit(parallel=True, cache=True, nogil=True)
def _gather_par(gh, rows, seg_start, seg_count, ghs):
    for s in prange(seg_start.shape[0]):
        for j in range(seg_start[s], seg_start[s] + seg_count[s]):
            r = rows[j]
            ghs[j, 0] = gh[r, 0]
            ghs[j, 1] = gh[r, 1]


@njit(cache=True, nogil=True)
def _gather_ser(gh, rows, seg_start, seg_count, ghs):
    for s in range(seg_start.shape[0]):
        for j in range(seg_start[s], seg_start[s] + seg_count[s]):
            r = rows[j]
            ghs[j, 0] = gh[r, 0]
            ghs[j, 1] = gh[r, 1]


@njit(cache=True, nogil=True)
def build_histograms(parallel, run, src, segs, feats, n_feats, full, out, priv):
    """Histograms of the segments ``segs`` (``Segments``) into ``out[segs.slot[s]]`` (only
    the listed features' slots; every slot when ``full``), on the thread pool when
    ``parallel`` (``run``, a ``Run``, gives the threads, the task size and the loop mode).

    ``src`` is a ``HistSource`` (``_args``: the binned matrix both ways, the gradients, the
    rows, the layout and the sparse rows list, ``sparse_rows``; ``sparse_f`` empty when the
    tree reads none). With every feature listed and sparse features, those are read from the
    list and their most frequent slot derived from the segments' totals ``segs.g`` /
    ``segs.h`` (int64); the other features (all of them otherwise) row-wise or column-wise by
    ``use_columns(run.mode, ...)``. ``priv`` is scratch (n_priv, 2 n_slots) int64 for the
    extra row-wise tasks of big segments; when it is too small a bigger one is allocated and
    returned (callers keep it).
    """
    n_threads, rows_per_task, mode = run.n_threads, run.rows_per_task, run.mode
    seg_start, seg_count, slot_of_seg = segs.start, segs.count, segs.slot
    off, dense_f, sparse_f = src.offset, src.dense_f, src.sparse_f
    width = 2 * off[off.shape[0] - 1]
    out2 = out.reshape((out.shape[0], width))
    m = seg_start.shape[0]
    sparse = full and sparse_f.shape[0] > 0
    lf = dense_f if sparse else feats
    n_lf = dense_f.shape[0] if sparse else n_feats
    n_rows = 0
    for s in range(m):
        n_rows += seg_count[s]
    dense_words = 0
    for i in range(n_lf):
        dense_words += 2 * (off[lf[i] + 1] - off[lf[i]])
    d = off.shape[0] - 1
    scattered = (
        sparse
        and COLUMN_SPARSE_SHARE * n_lf <= d
        and n_lf * src.by_row.shape[0] >= src.sp_slot.shape[0]
    )
    if use_columns(mode, n_rows, 8 * dense_words, scattered):
        if parallel:
            _gather_par(src.gh, src.rows, seg_start, seg_count, src.ghs)
        else:
            _gather_ser(src.gh, src.rows, seg_start, seg_count, src.ghs)
        n_tasks = n_lf + (m if sparse else 0)
        if parallel:
            _col_tasks_par(
                n_tasks,
                src.by_column,
                src.rows,
                src.ghs,
                off,
                src.sp_ptr,
                src.sp_slot,
                sparse_f,
                seg_start,
                seg_count,
                slot_of_seg,
                lf,
                n_lf,
                out2,
            )
        else:
            _col_tasks_ser(
                n_tasks,
                src.by_column,
                src.rows,
                src.ghs,
                off,
                src.sp_ptr,
                src.sp_slot,
                sparse_f,
                seg_start,
                seg_count,
                slot_of_seg,
                lf,
                n_lf,
                out2,
            )
    else:
        n_tasks_max = TASKS_PER_THREAD * n_threads if parallel else 1
        rpt = rows_per_task
        if n_rows // rows_per_task < n_threads:
            rpt = min(
                rows_per_task, max(256, HIST_TASK_WORK // max(row_cost(src, n_feats, full), 1))
            )
        t_seg, t_lo, t_hi, t_first = task_table(seg_start, seg_count, n_tasks_max, rpt)
        T = t_seg.shape[0]
        t_slot = np.empty(T, np.int64)
        t_priv = np.empty(T, np.int64)
        n_priv = 0
        for t in range(T):
            t_slot[t] = slot_of_seg[t_seg[t]]
            if t_first[t] == 1:
                t_priv[t] = -1
            else:
                t_priv[t] = n_priv
                n_priv += 1
        if priv.shape[0] < n_priv or priv.shape[1] != width:
            priv = np.empty((n_priv, width), HIST_DTYPE)
        tasks = RowTasks(t_slot, t_lo, t_hi, t_priv)
        # every feature 256 slots wide (widths are at most 256): the constant-stride loops
        wide = off[off.shape[0] - 1] == N_HIST_BINS * (off.shape[0] - 1)
        if parallel:
            _row_tasks_par(src, tasks, lf, n_lf, full, sparse, wide, out2, priv)
        else:
            _row_tasks_ser(src, tasks, lf, n_lf, full, sparse, wide, out2, priv)
        if n_priv:
            # the word ranges to add up: every slot (blocks of REDUCE_WORDS) or the listed
            # features' slots
            if full:
                n_r = (width + REDUCE_WORDS - 1) // REDUCE_WORDS
                r_lo = np.empty(n_r, np.int64)
                r_hi = np.empty(n_r, np.int64)
                for i in range(n_r):
                    r_lo[i] = i * REDUCE_WORDS
                    r_hi[i] = min(width, (i + 1) * REDUCE_WORDS)
            else:
                r_lo = np.empty(n_feats, np.int64)
                r_hi = np.empty(n_feats, np.int64)
                for i in range(n_feats):
                    r_lo[i] = 2 * off[feats[i]]
                    r_hi[i] = 2 * off[feats[i] + 1]
            if parallel:
                _reduce_par(r_lo, r_hi, t_slot, t_priv, out2, priv)
            else:
                _reduce_ser(r_lo, r_hi, t_slot, t_priv, out2, priv)
    if sparse:
        for s in range(m):
            _derive_most_freq(
                out2[slot_of_seg[s]], sparse_f, off, src.most_freq, segs.g[s], segs.h[s]
            )
    return priv


# --- siblings -------------------------------------------------------------------------------

#: (pair, feature) items per task of the parallel subtraction, at least; tasks at most.
SUBTRACT_ITEMS_PER_TASK = 256
SUBTRACT_TASKS_MAX = 64


@njit(cache=True, nogil=True)
def _subtract_range(a, b, feats, n_feats, off, parent_slot, built_slot, sib_slot, hist, nxt):
    """nxt[sib] = hist[parent] - nxt[built] on the slots of items a .. b - 1 (item p: pair
    p // n_feats, feature feats[p % n_feats]).

    A called function with the loop inside, pair by pair, each run of consecutive features
    one loop over their adjacent slots (not an item body inlined into the drivers' loop over
    items, with a division and a remainder per item: 4 pairs of 1,500 features of ~4 slots,
    one thread, 116 against 52 us)."""
    p = a
    while p < b:
        s = p // n_feats
        i = p - s * n_feats
        i_end = min(n_feats, i + (b - p))
        p += i_end - i
        A = hist[parent_slot[s]]
        B = nxt[built_slot[s]]
        C = nxt[sib_slot[s]]
        while i < i_end:
            f = feats[i]
            lo = off[f]
            i += 1
            while i < i_end and feats[i] == f + 1:
                f += 1
                i += 1
            for w in range(lo, off[f + 1]):
                C[w, 0] = A[w, 0] - B[w, 0]
                C[w, 1] = A[w, 1] - B[w, 1]


@njit(parallel=True, cache=True, nogil=True)
def subtract_par(feats, n_feats, off, parent_slot, built_slot, sib_slot, hist, nxt):
    """Siblings by exact subtraction, ``nxt[sib_slot[s]] = hist[parent_slot[s]] -
    nxt[built_slot[s]]`` on the listed features' slots (hist, nxt (n, n_slots, 2) int64)."""
    total = parent_slot.shape[0] * n_feats
    n_tasks = max(1, min(SUBTRACT_TASKS_MAX, total // SUBTRACT_ITEMS_PER_TASK))
    for t in prange(n_tasks):
        _subtract_range(
            (t * total) // n_tasks,
            ((t + 1) * total) // n_tasks,
            feats,
            n_feats,
            off,
            parent_slot,
            built_slot,
            sib_slot,
            hist,
            nxt,
        )


@njit(cache=True, nogil=True)
def subtract_ser(feats, n_feats, off, parent_slot, built_slot, sib_slot, hist, nxt):
    """``subtract_par`` on the calling thread."""
    _subtract_range(
        np.int64(0),  # not 0: a literal compiles a second specialisation
        parent_slot.shape[0] * n_feats,
        feats,
        n_feats,
        off,
        parent_slot,
        built_slot,
        sib_slot,
        hist,
        nxt,
    )


@njit(inline="always")
def _column_rows(col, m, n, act, r_ptr, cnt, slots, slot_base, z):
    """Visit the rows of one column whose bin is not ``m``: count them (``act`` 0) or write
    their slots (``act`` 1; ``slot_base + bin``, the missing bin at ``z``) at each row's next
    place ``r_ptr[r]``. Eight bins are compared at once (one 64-bit word): a sparse column is
    mostly words of eight ``m``s, skipped whole."""
    words = col[: n - n % 8].view(np.uint64)
    mm = np.uint64(m) * np.uint64(0x0101010101010101)
    for w in range(words.shape[0]):
        if words[w] != mm:
            for r in range(8 * w, 8 * w + 8):
                if col[r] != m:
                    if act == 0:
                        cnt[r + 1] += 1
                    else:
                        slots[r_ptr[r]] = _slot(np.int64(col[r]), slot_base, z)
                        r_ptr[r] += 1
    for r in range(n - n % 8, n):
        if col[r] != m:
            if act == 0:
                cnt[r + 1] += 1
            else:
                slots[r_ptr[r]] = _slot(np.int64(col[r]), slot_base, z)
                r_ptr[r] += 1


@njit(cache=True, nogil=True)
def _sparse_build(Xb_cols, off, most_freq, sparse_f):
    """(ptr, slots) of ``sparse_rows`` from the binned matrix by column: one pass to count each
    row's entries, one to write them (features in order, so each row's slots are sorted)."""
    n = Xb_cols.shape[1]
    ptr = np.zeros(n + 1, np.int64)
    raw = np.empty(sparse_f.shape[0], np.uint8)
    for i in range(sparse_f.shape[0]):
        f = sparse_f[i]
        w = off[f + 1] - off[f]
        raw[i] = most_freq[f] if most_freq[f] < w - 1 else 255  # the missing bin's raw bin
    nothing = np.empty(0, np.int32)
    for i in range(sparse_f.shape[0]):
        f = sparse_f[i]
        _column_rows(Xb_cols[f], raw[i], n, 0, ptr, ptr, nothing, off[f], off[f + 1] - 1)
    for r in range(n):
        ptr[r + 1] += ptr[r]
    slots = np.empty(ptr[n], np.int32)
    at = ptr[:n].copy()
    for i in range(sparse_f.shape[0]):
        f = sparse_f[i]
        _column_rows(Xb_cols[f], raw[i], n, 1, at, ptr, slots, off[f], off[f + 1] - 1)
    return ptr, slots


def sparse_rows(Xb_cols, layout):
    """The sparse rows list of ``layout``'s sparse features: for each row, the slots of its
    bins other than the most frequent, in feature order (CSR).

    Parameters
    ----------
    Xb_cols : ndarray of shape (n_features, n_samples), uint8
        The binned matrix by column.
    layout : HistLayout

    Returns
    -------
    ptr : ndarray of shape (n_samples + 1,), int64
        Row r's slots are ``slots[ptr[r]:ptr[r + 1]]``.
    slots : ndarray of shape (nnz,), int32
    dense_f, sparse_f : ndarray, int32
        The features read densely and the sparse ones.
    """
    sparse = layout.most_freq >= 0
    sparse_f = np.flatnonzero(sparse).astype(np.int32)
    dense_f = np.flatnonzero(~sparse).astype(np.int32)
    ptr, slots = _sparse_build(
        np.ascontiguousarray(Xb_cols), layout.offset, layout.most_freq, sparse_f
    )
    return ptr, slots, dense_f, sparse_f
