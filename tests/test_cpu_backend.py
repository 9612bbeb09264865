"""The CPU backend's kernels one at a time (``gpufs.backends.cpu``): histograms against the
oracle of tests/_reference.py, their conservation invariants (every feature sums to the node
total, children sum to the parent, subtraction is exact), chunked tasks, row-order invariance,
and the partition they rest on. The whole level step is checked through the grower
(test_grower.py) and against the GPU kernels (test_cuda_kernels_sim.py)."""

import numpy as np
import pytest

from _reference import ref_histogram
from gpufs.backends.cpu import CPUBackend
from gpufs.engine.quantize import fixed_point_scale, quantize

BACKEND = CPUBackend()


def _quantized(g, h):
    gs, hs = fixed_point_scale(g, g.shape[0]), fixed_point_scale(h, h.shape[0])
    return quantize(g, gs), quantize(h, hs), gs, hs


def _hist_case(seed, n=300, d=4):
    rng = np.random.default_rng(seed)
    Xb = rng.integers(0, 12, size=(n, d)).astype(np.uint8)
    Xb[rng.random((n, d)) < 0.1] = 255
    g = rng.normal(size=n)
    h = rng.uniform(0.05, 0.25, size=n)
    gq, hq, gs, hs = _quantized(g, h)
    return Xb, gq, hq


@pytest.mark.parametrize("seed", [0, 1])
def test_histogram_sums_to_node_total_and_matches_reference(seed):
    Xb, gq, hq = _hist_case(seed)
    n, d = Xb.shape
    rows = np.arange(n, dtype=np.int32)
    start = np.zeros(1, np.int64)
    count = np.array([n], np.int64)
    hist = BACKEND.histograms(Xb, _gh(gq, hq), rows, start, count, np.array([0]))
    assert hist.shape == (1, d, 256, 2) and hist.dtype == np.int64
    for f in range(d):
        assert hist[0, f, :, 0].sum() == gq.sum()
        assert hist[0, f, :, 1].sum() == hq.sum()
    np.testing.assert_array_equal(hist[0], ref_histogram(Xb, gq, hq, rows))


@pytest.mark.parametrize("seed", [0, 1])
def test_children_sum_to_parent_and_subtraction_is_exact(seed):
    Xb, gq, hq = _hist_case(seed)
    n, d = Xb.shape
    rows = np.arange(n, dtype=np.int32)
    start = np.zeros(3, np.int64)
    count = np.zeros(3, np.int64)
    count[0] = n
    parent = BACKEND.histograms(Xb, _gh(gq, hq), rows, start, count, np.array([0]))[0]
    left_n = BACKEND.partition(
        Xb, rows, start, count, np.array([0]), np.array([1]), np.array([5]), np.array([True])
    )[0]
    expect_left = np.flatnonzero((Xb[:, 1] <= 5) | (Xb[:, 1] == 255))
    assert left_n == expect_left.shape[0]
    np.testing.assert_array_equal(np.sort(rows[:left_n]), expect_left)
    start[1], count[1] = 0, left_n
    start[2], count[2] = left_n, n - left_n
    both = BACKEND.histograms(Xb, _gh(gq, hq), rows, start, count, np.array([1, 2]))
    np.testing.assert_array_equal(both[0] + both[1], parent)
    # built child + subtracted sibling == directly computed sibling
    sibling = parent - both[0]
    np.testing.assert_array_equal(sibling, ref_histogram(Xb, gq, hq, rows[left_n:]))
    np.testing.assert_array_equal(both[1], sibling)


def _gh(gq, hq):
    return np.ascontiguousarray(np.stack([gq, hq], axis=1))


def test_histograms_many_tasks_match_reference():
    """Nodes split over several private per-thread histograms still sum exactly."""
    chunky = CPUBackend(n_threads=3, rows_per_task=7, parallel_min_work=0)
    Xb, gq, hq = _hist_case(5, n=200)
    rows = np.random.default_rng(0).permutation(200).astype(np.int32)
    start = np.array([0, 0, 90], np.int64)
    count = np.array([200, 90, 110], np.int64)
    hist = chunky.histograms(Xb, _gh(gq, hq), rows, start, count, np.array([2, 1]))
    np.testing.assert_array_equal(hist[0], ref_histogram(Xb, gq, hq, rows[90:]))
    np.testing.assert_array_equal(hist[1], ref_histogram(Xb, gq, hq, rows[:90]))


def test_histograms_row_order_invariant():
    Xb, gq, hq = _hist_case(7)
    n = Xb.shape[0]
    perm = np.random.default_rng(1).permutation(n)
    a = BACKEND.histograms(
        Xb,
        _gh(gq, hq),
        np.arange(n, dtype=np.int32),
        np.zeros(1, np.int64),
        np.array([n], np.int64),
        np.array([0]),
    )
    b = BACKEND.histograms(
        Xb[perm],
        _gh(gq[perm], hq[perm]),
        np.arange(n, dtype=np.int32),
        np.zeros(1, np.int64),
        np.array([n], np.int64),
        np.array([0]),
    )
    np.testing.assert_array_equal(a, b)


def test_add_pair_adds_two_words_and_refuses_a_strided_array():
    # ``_add_pair`` adds (g, h) to H[i], H[i + 1] as one two-lane vector: right only when the
    # two words are adjacent, so it must not compile for a strided view (a silent wrong sum).
    import numba
    from numba.core.errors import TypingError

    from gpufs.backends.cpu.histogram import _add_pair

    @numba.njit
    def add(H, i, g, h):
        _add_pair(H, i, g, h)

    H = np.array([1, 2, 3, 4, 5, 6], np.int64)
    big = np.int64(2**62)
    add(H, 2, big, np.int64(-7))
    add(H, 2, big, np.int64(-7))  # wraps as int64 addition does: the sums stay exact mod 2**64
    np.testing.assert_array_equal(H, [1, 2, 3 + 2 * 2**62 - 2**64, 4 - 14, 5, 6])
    with pytest.raises(TypingError):
        add(np.zeros(12, np.int64)[::2], 0, np.int64(1), np.int64(1))
    with pytest.raises(TypingError):  # a float would be truncated into the sum
        add(np.zeros(4, np.int64), 0, 1.5, np.int64(1))
