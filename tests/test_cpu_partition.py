"""The CPU partition cuts big segments into chunks for the cores; the result must still be the
stable partition (left rows in order, then right rows in order), whatever the chunking."""

import numpy as np
import pytest

from gpufs._types import MISSING_BIN
from gpufs.backends import cpu


def _stable_partition(Xb, rows, start, count, f, thr, ml):
    seg = rows[start : start + count]
    b = Xb[seg, f]
    left = np.where(b == MISSING_BIN, ml, b <= thr)
    return np.concatenate([seg[left], seg[~left]]), int(left.sum())


@pytest.mark.parametrize("min_rows, threads", [(1 << 30, 1), (4, 2), (3, 7), (1, 64)])
def test_chunked_partition_is_the_stable_partition(min_rows, threads):
    rng = np.random.default_rng(3)
    n, d = 500, 4
    Xb = rng.integers(0, 20, size=(n, d)).astype(np.uint8)
    Xb[rng.random((n, d)) < 0.1] = MISSING_BIN
    rows = rng.permutation(n).astype(np.int32)
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
