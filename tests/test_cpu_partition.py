"""The CPU partition cuts big segments into chunks for the cores; the result must still be the
stable partition (left rows in order, then right rows in order), whatever the chunking."""

import numpy as np
import pytest

from gpufs._types import MISSING_BIN
from gpufs.backends import cpu


def _goes_left(Xb, rows, f, thr, ml):
    """The split rule on bins, for the rows ``rows``: bool array."""
    b = Xb[rows, f]
    return np.where(b == MISSING_BIN, ml, b <= thr)


def _binned_rows(seed, n, d, n_bins):
    """A (n, d) uint8 table of bins 0..n_bins - 1 with about 10 % missing, and a random row
    order (n,) int32."""
    rng = np.random.default_rng(seed)
    Xb = rng.integers(0, n_bins, size=(n, d)).astype(np.uint8)
    Xb[rng.random((n, d)) < 0.1] = MISSING_BIN
    return Xb, rng.permutation(n).astype(np.int32), rng


def _stable_partition(Xb, rows, start, count, f, thr, ml):
    seg = rows[start : start + count]
    left = _goes_left(Xb, seg, f, thr, ml)
    return np.concatenate([seg[left], seg[~left]]), int(left.sum())


@pytest.mark.parametrize("min_rows, threads", [(1 << 30, 1), (4, 2), (3, 7), (1, 64)])
def test_chunked_partition_is_the_stable_partition(min_rows, threads):
    n = 500
    Xb, rows, _ = _binned_rows(3, n, 4, 20)
    # three segments split, one (rows 300..359) left alone
    node_start = np.array([0, 120, 300, 360], np.int64)
    node_count = np.array([120, 180, 60, 140], np.int64)
    split_nodes = np.array([0, 1, 3])
    feature, bins, ml = np.array([0, 2, 3]), np.array([5, 0, 10]), np.array([True, False, True])
    expect = rows.copy()
    expect_left = []
    for s, node in enumerate(split_nodes):
        lo, c = node_start[node], node_count[node]
        part, nl = _stable_partition(Xb, rows, lo, c, feature[s], bins[s], ml[s])
        expect[lo : lo + c] = part
        expect_left.append(nl)
    got_left = cpu.CPUBackend(n_threads=threads, rows_per_task=min_rows).partition(
        Xb, rows, node_start, node_count, split_nodes, feature, bins, ml
    )
    np.testing.assert_array_equal(rows, expect)
    np.testing.assert_array_equal(got_left, expect_left)
    # every split sends rows both ways, so the chunks really interleave lefts and rights
    assert all(0 < nl < c for nl, c in zip(expect_left, node_count[[0, 1, 3]]))


@pytest.mark.parametrize("min_rows, threads", [(1 << 30, 1), (7, 3)])
def test_partition_sums_the_bound_terms_of_each_side_in_row_order(min_rows, threads):
    # The count pass adds each row's gain-bound term to its side's sum without a branch on
    # the side: the sums must be those of adding the side's terms one by one, in row order
    # within each task and task after task, bit for bit.
    from gpufs.backends.cpu._args import Run, SplitRule
    from gpufs.backends.cpu.histogram import TASKS_PER_THREAD, task_table
    from gpufs.backends.cpu.partition import _partition

    n = 400
    Xb, rows, rng = _binned_rows(5, n, 3, 30)
    q = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)  # magnitudes that round
    seg_start = np.array([0, 150], np.int64)
    seg_count = np.array([150, 250], np.int64)
    feature, bins, ml = np.array([0, 2]), np.array([12, 4]), np.array([False, True])
    rule = SplitRule(feature, bins, ml, np.zeros(2, np.bool_), np.zeros((2, 0), np.uint32))
    run = Run(threads > 1, threads, min_rows, 0, 0)
    n_tasks = TASKS_PER_THREAD * threads if threads > 1 else 1
    t_seg, t_lo, t_hi, _ = task_table(seg_start, seg_count, n_tasks, min_rows)
    expect = np.zeros((2, 2))
    for t in range(t_seg.shape[0]):
        s, task_rows = t_seg[t], rows[t_lo[t] : t_hi[t]]
        side_sums = [0.0, 0.0]
        for v, left in zip(q[task_rows], _goes_left(Xb, task_rows, feature[s], bins[s], ml[s])):
            side_sums[0 if left else 1] += v
        expect[s] += side_sums
    seg_q = np.full((2, 2), np.nan)
    _partition(
        run,
        np.ascontiguousarray(Xb.T),
        rows,
        np.empty_like(rows),
        np.empty(n, np.uint8),
        seg_start,
        seg_count,
        rule,
        q,
        seg_q,
    )
    if threads > 1:  # the segments were cut into several tasks each
        assert t_seg.shape[0] > 2
    np.testing.assert_array_equal(seg_q.view(np.int64), expect.view(np.int64))
