"""Every CUDA kernel, and the whole grower and booster, under the numba CUDA simulator.

Needs ``NUMBA_ENABLE_CUDASIM=1`` in the environment before numba is imported, so it runs in a
pytest process of its own: ``tests/test_cuda_kernels_sim.py`` (part of the normal suite) starts
that process. By hand: ``NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/_cudasim_kernels.py``.

Each test runs the GPU backend's kernels (``GPUBackend`` with ``xp = numpy``) and the CPU
backend on the same tiny input and asserts exact equality. Inputs are tiny because the simulator
runs one Python thread per CUDA thread; launch geometries are varied on purpose (several tasks
per node, feature tiles that do not divide d, idle threads, one-thread blocks) so the paths a
real GPU takes with big inputs are taken here with small ones.
"""

import numpy as np
import pytest

import _cudasim_patch

_cudasim_patch.enter("tests/test_cuda_kernels_sim.py")  # skips unless the simulator is on

# The split-word histogram lets 32-bit words wrap on purpose (modular arithmetic, as the
# hardware does); the simulator's numpy scalars warn about it, and warning from hundreds of
# simulated threads is slow.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in scalar add")

from numba import cuda  # noqa: E402

from _cudasim_checks import (  # noqa: E402
    CPU,
    Logistic,
    SquaredError,
    binned,
    check_bin_transform,
    check_find_splits,
    check_fit_boosting,
    check_grow_tree,
    check_histograms,
    check_objective,
    check_partition,
    check_predict,
    check_prepare_gradients,
    check_update_raw,
    grads,
    make_data,
    segments,
)
from gpufs.backends.gpu.backend import GPUBackend, GPUOutOfMemoryError  # noqa: E402
from gpufs.engine.binning import BinMapper  # noqa: E402
from gpufs.engine.objectives import make_objective  # noqa: E402
from gpufs.engine.quantize import PACK_CHUNK_ROWS, QGRAD_BOUND  # noqa: E402
from gpufs.rules._hist_layout import HistLayout  # noqa: E402


@pytest.fixture(scope="module")
def gpu():
    return GPUBackend()


@pytest.fixture(scope="module")
def data():
    X, y = make_data(64, 6, seed=0)
    bm, Xb = binned(X, 16)
    return X, y, bm, Xb


def test_simulator_is_on(gpu):
    assert gpu.xp is np and gpu.simulator


def test_the_event_driven_block_manager_keeps_the_simulators_barrier_rules():
    """``_cudasim_patch.apply_scheduler``'s block manager: a barrier holds every live thread
    of a block until all arrive (a tree reduction in shared memory per block), threads that
    returned do not hold it back, and a thread's exception reaches the launcher."""
    from numba.cuda.simulator import kernel as simulator_kernel

    assert simulator_kernel.BlockManager._gpufs_event_driven

    @cuda.jit
    def block_sums(x, out):
        buf = cuda.shared.array(32, np.float64)
        i = cuda.threadIdx.x
        buf[i] = x[cuda.blockIdx.x * 32 + i]
        cuda.syncthreads()
        step = 16
        while step > 0:
            if i < step:
                buf[i] += buf[i + step]
            cuda.syncthreads()
            step //= 2
        if i == 0:
            out[cuda.blockIdx.x] = buf[0]

    x = np.random.default_rng(0).integers(0, 1000, 96).astype(np.float64)
    out = np.zeros(3)
    block_sums[3, 32](x, out)
    assert out.tolist() == [x[:32].sum(), x[32:64].sum(), x[64:].sum()]

    @cuda.jit
    def some_return_early(seen, out):
        i = cuda.threadIdx.x
        if i >= 4:
            return
        seen[i] = 1.0
        cuda.syncthreads()
        out[i] = seen[0] + seen[1] + seen[2] + seen[3]

    out = np.zeros(8)
    some_return_early[1, 8](np.zeros(8), out)
    assert out.tolist() == [4.0] * 4 + [0.0] * 4

    @cuda.jit
    def one_fails(out):
        if cuda.threadIdx.x == 3:
            out[100] = 1.0
        cuda.syncthreads()
        out[cuda.threadIdx.x] = 1.0

    with pytest.raises(IndexError, match=r"tid=\[3, 0, 0\]"):
        one_fails[1, 8](np.zeros(8))


def test_bin_transform(gpu, data):
    check_bin_transform(gpu, data[0])


@pytest.mark.parametrize("kernel", ["bounded", "split_word"])
@pytest.mark.parametrize("threads,tile", [(16, 17), (8, 40), (32, 100), (5, 30)])
def test_histograms(data, threads, tile, kernel):
    """The full layout (a tile per feature: 256 slots each) and the compact layout of the
    bin counts (tiles of ``tile`` slots: one to five features of 17 slots), with the most
    frequent bin of a sparse feature derived by the CPU; both histogram kernels (the
    split-word one also with values near the int64 range)."""
    X, y, bm, Xb = data
    Xb = Xb.copy()
    Xb[np.arange(64) % 9 != 0, 1] = 2  # feature 1: bin 2 holds 8 rows in 9 (sparse)
    Xb[::13, 4] = 255  # missing values
    compact = HistLayout.from_n_bins(bm.n_bins_)
    sparse = HistLayout(compact.offset, np.where(np.arange(6) == 1, 2, -1))
    gpu = GPUBackend(hist_threads=threads, tile_slots=tile, min_rows_per_task=8, hist_kernel=kernel)
    assert gpu._hist_fn is getattr(
        gpu.kernels,
        {"bounded": "histogram_bounded_kernel", "split_word": "histogram_kernel"}[kernel],
    )
    gq, hq, _, _ = grads(y)
    assert np.abs(gq).max() > QGRAD_BOUND // 2  # the scales use the bound's top bit
    # Nodes 3..6 with 20, 0, 25, 19 rows; build an empty node too.
    rows, ns, nc = segments(64, [20, 0, 25, 19])
    for layout in (None, compact, sparse):
        if kernel == "split_word":
            check_histograms(gpu, Xb, *_big_values(y), rows, ns, nc, np.array([3, 4, 6]), layout)
        check_histograms(gpu, Xb, gq, hq, rows, ns, nc, np.array([3, 4, 6]), layout)
        check_histograms(
            gpu, Xb, gq, hq, np.arange(64, dtype=np.int32), ns, nc, np.array([0]), layout
        )


@pytest.mark.parametrize("kernel,d", [("split_word", 16), ("bounded", 24)])
def test_histograms_in_opted_in_shared_memory(kernel, d):
    """``hist_optin_shared=True``: one tile of d full-width features (4,112 slots, 66 KB of
    split words; 6,168 slots, 50 KB of bounded words: past the 48 KiB a kernel gets without
    opting in), launched with the opt-in limit that the launch validator then applies; the
    CPU's histograms. Without the opt-in such a tile is refused when the backend is made."""
    X, y = make_data(48, d, seed=2)
    bm, Xb = binned(X, 16)
    slots = d * 257
    assert 4 * GPUBackend(hist_kernel=kernel).tile_words(slots) > 48 * 1024
    with pytest.raises(ValueError, match="tile_slots"):
        GPUBackend(tile_slots=slots, hist_kernel=kernel)
    gpu = GPUBackend(
        hist_optin_shared=True,
        tile_slots=slots,
        hist_threads=16,
        min_rows_per_task=16,
        hist_kernel=kernel,
    )
    gq, hq, _, _ = grads(y)
    rows, ns, nc = segments(48, [30, 18])
    check_histograms(gpu, Xb, gq, hq, rows, ns, nc, np.array([3, 4]), None)


def _big_values(y):
    """Fixed-point gradients near the int64 range (the scales' worst case: 64 rows whose
    absolute sum is just below 2**62), so the histogram's 32-bit words wrap and carry."""
    rng = np.random.default_rng(3)
    n = y.shape[0]
    g = rng.integers(-(2**62) // n, 2**62 // n, n, dtype=np.int64)
    h = rng.integers(2**40, 2**62 // n, n, dtype=np.int64)
    return g, h


def test_histogram_split_words_carry(data):
    """The 32-bit (low, high) word pairs give the exact int64 sums: every row in one bin of
    every feature (the most carries), values of both signs near the largest the scales allow."""
    X, y, bm, Xb = data
    gpu = GPUBackend(hist_threads=16, tile_slots=3, min_rows_per_task=64, hist_kernel="split_word")
    g, h = _big_values(y)
    same_bin = np.zeros_like(Xb)
    hist = check_histograms(
        gpu,
        same_bin,
        g,
        h,
        np.arange(64, dtype=np.int32),
        np.zeros(1, np.int64),
        np.array([64]),
        np.array([0]),
    )
    assert hist[0, 0, 0, 0] == g.sum() and hist[0, 0, 0, 1] == h.sum()
    assert h.sum() > 2**58  # the low words wrapped many times: the carries were exercised


def test_bounded_histogram_at_the_worst_chunk():
    """The bounded kernel's limit case: one task of PACK_CHUNK_ROWS (2**16 - 1) rows, every
    row at the largest magnitude the scales give (2**15; g of both signs in two features'
    bins, h at the bound), all in one bin: each 32-bit word reaches +-(2**31 - 2**15) and the
    flushed int64 sums are the CPU's."""
    n = PACK_CHUNK_ROWS
    gpu = GPUBackend(hist_threads=64, min_rows_per_task=n)
    assert gpu._rows_per_task(n) == n and gpu._rows_per_task(10**9) == n  # capped
    Xb = np.zeros((n, 2), np.uint8)
    Xb[:, 1] = 3
    g = np.full(n, -QGRAD_BOUND, np.int64)
    h = np.full(n, QGRAD_BOUND, np.int64)
    rows = np.arange(n, dtype=np.int32)
    hist = check_histograms(
        gpu, Xb, g, h, rows, np.zeros(1, np.int64), np.array([n]), np.array([0])
    )
    assert hist[0, 0, 0, 0] == -(2**31 - 2**15) and hist[0, 1, 3, 1] == 2**31 - 2**15
    hist = check_histograms(
        gpu, Xb, -g, h, rows, np.zeros(1, np.int64), np.array([n]), np.array([0])
    )
    assert hist[0, 1, 3, 0] == 2**31 - 2**15


def test_bounded_kernel_refuses_unbounded_values_and_long_tasks(data):
    """Values past QGRAD_BOUND would wrap the bounded kernel's words: refused under the
    simulator (the split-word kernel takes them), as are tasks longer than it sums."""
    X, y, bm, Xb = data
    g, h = _big_values(y)
    rows, ns, nc = segments(64, [64])
    with pytest.raises(ValueError, match="QGRAD_BOUND"):
        check_histograms(GPUBackend(), Xb, g, h, rows, ns, nc, np.array([3]))
    with pytest.raises(ValueError, match="min_rows_per_task"):
        GPUBackend(min_rows_per_task=PACK_CHUNK_ROWS + 1)
    with pytest.raises(ValueError, match="hist_kernel"):
        GPUBackend(hist_kernel="packed64")
    # the split words take any task: 10**9 rows over 8 tasks per SM (one SM simulated)
    assert GPUBackend(hist_kernel="split_word")._rows_per_task(10**9) == 10**9 // 8
    assert GPUBackend()._rows_per_task(10**9) == PACK_CHUNK_ROWS


def _level(y, Xb, counts=(20, 1, 25, 18)):
    gq, hq, gs, hs = grads(y)
    rows, ns, nc = segments(int(sum(counts)), list(counts))
    nodes = np.array([3, 4, 5, 6])
    hist = CPU.histograms(Xb, np.stack([gq, hq], axis=1), rows, ns, nc, nodes)
    node_g = hist[:, 0, :, 0].sum(axis=1)  # every feature's histogram sums to the node total
    node_h = hist[:, 0, :, 1].sum(axis=1)
    return hist, node_g, node_h, gs, hs


@pytest.mark.parametrize("case", ["plain", "penalty", "not_allowed", "min_child_weight", "divisor"])
def test_find_splits(gpu, data, case):
    X, y, bm, Xb = data
    hist, node_g, node_h, gs, hs = _level(y, Xb)  # node 4 has one row: no valid split
    d = Xb.shape[1]
    penalty = np.zeros(d)
    allowed = np.ones(d, bool)
    kw = {}
    if case == "penalty":
        penalty = np.array([5.0, 0.0, 1.0, 0.0, 2.0, 0.0])  # 0 pays, its copy 3 does not
    elif case == "not_allowed":
        allowed[[0, 2]] = False
    elif case == "min_child_weight":
        kw["min_child_weight"] = 6.0
    elif case == "divisor":
        kw.update(gain_divisor=3.7, reg_lambda=0.0)
    res = check_find_splits(gpu, hist, node_g, node_h, bm.n_bins_, penalty, allowed, gs, hs, **kw)
    assert res.feature[1] == -1 and res.score[1] == -np.inf  # the one-row node
    if case == "plain":
        # feature 3 duplicates 0: where a node takes one of them, the lower feature wins
        assert 0 in res.feature and 3 not in res.feature


def test_find_splits_missingness(gpu):
    """The split 'every value left, missing right' (bin = n_bins - 1): on a one-bin feature
    with NaNs, and on a many-bin feature with the same NaNs (a tie the lower feature wins)."""
    X, _ = make_data(64, 6, seed=4)
    miss = np.random.default_rng(6).random(64) < 0.4
    X[:, 5] = np.where(miss, np.nan, 1.5)  # one bin + NaN
    X[:, 2] = np.where(miss, np.nan, np.arange(64) % 7)  # 7 bins, the same NaNs
    bm, Xb = binned(X, 16)
    assert bm.n_bins_[5] == 1
    y = np.where(miss, -4.0, 4.0)
    d = Xb.shape[1]
    for allowed in (np.ones(d, bool), np.arange(d) != 2):
        hist, node_g, node_h, gs, hs = _level(y, Xb)
        res = check_find_splits(gpu, hist, node_g, node_h, bm.n_bins_, np.zeros(d), allowed, gs, hs)
        big = [0, 2, 3]  # nodes with 20, 25 and 18 rows
        f = 2 if allowed[2] else 5
        np.testing.assert_array_equal(res.feature[big], f)
        np.testing.assert_array_equal(res.bin[big], bm.n_bins_[f] - 1)
        assert not res.missing_left[big].any()


def test_find_splits_all_invalid(gpu, data):
    X, y, bm, Xb = data
    hist, node_g, node_h, gs, hs = _level(y, Xb)
    d = Xb.shape[1]
    res = check_find_splits(
        gpu, hist, node_g, node_h, bm.n_bins_, np.zeros(d), np.zeros(d, bool), gs, hs
    )
    assert (res.feature == -1).all() and (res.score == -np.inf).all()


@pytest.mark.parametrize("threads,min_rows", [(8, 4), (1, 64), (16, 16)])
def test_partition(data, threads, min_rows):
    X, y, bm, Xb = data
    gpu = GPUBackend(part_threads=threads, min_rows_per_task=min_rows)
    rows, ns, nc = segments(64, [20, 1, 25, 18])
    split_nodes = np.array([3, 5, 6])
    feature = np.array([0, 2, 4])
    bin_ = np.array([3, 7, 0])
    for ml in ([True, False, True], [False, True, False]):
        check_partition(gpu, Xb, rows, ns, nc, split_nodes, feature, bin_, np.array(ml))


@pytest.mark.parametrize("min_rows", [4, 16, 64])
def test_task_table(min_rows):
    """The GPU's task table: ceil(count / rows_per_task) near-equal runs per segment, each
    at most ``rows_per_task`` rows, tiling the segment in order (the runs the histogram and
    partition kernels read, whose results equal the CPU's in the tests above)."""
    gpu = GPUBackend(min_rows_per_task=min_rows)
    start = np.array([0, 20, 20, 21, 46], np.int64)
    count = np.array([20, 0, 1, 25, 18], np.int64)
    t_seg, t_lo, t_hi = gpu.task_table(start, count)
    rpt = gpu._rows_per_task(count.sum())
    for s in range(5):
        mine = t_seg == s
        assert mine.sum() == -(-count[s] // rpt)
        if count[s]:
            lo, hi = t_lo[mine], t_hi[mine]
            assert lo[0] == start[s] and hi[-1] == start[s] + count[s]
            np.testing.assert_array_equal(lo[1:], hi[:-1])
            assert (hi - lo).max() <= rpt and (hi - lo).max() - (hi - lo).min() <= 1


def test_array_placement(gpu):
    a = np.arange(4.0)
    assert gpu.owns(a) and not gpu.owns([1.0])  # numpy stands in for cupy here
    assert gpu.to_device(a) is a
    assert gpu.synchronize() is None


def test_partition_root(gpu, data):
    X, y, bm, Xb = data
    ns = np.zeros(3, np.int64)
    nc = np.array([64, 0, 0])
    check_partition(
        gpu,
        Xb,
        np.arange(64, dtype=np.int32),
        ns,
        nc,
        np.array([0]),
        np.array([1]),
        np.array([5]),
        np.array([True]),
    )


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_update_raw(gpu, n_outputs):
    rows, ns, nc = segments(64, [20, 1, 25, 18])
    check_update_raw(
        gpu, rows, ns, nc, np.array([3, 4, 5, 6]), np.array([0.5, -1.25, 3.0e-3, 7.0]), n_outputs
    )


def test_predict(gpu, data):
    X, y, bm, Xb = data
    ens, _, _ = check_fit_boosting(gpu, X, y, mu=0.0, n_estimators=2)
    check_predict(gpu, ens, X, Xb)


def test_predict_softmax(gpu):
    X, _ = make_data(48, 5, seed=3)
    yc = (np.nan_to_num(X[:, 0]) > 0).astype(np.int32) + (np.nan_to_num(X[:, 1]) > 0.5)
    ens, _, _ = check_fit_boosting(
        gpu,
        X,
        yc.astype(np.int32),
        objective=make_objective("classification", 3),
        mu=0.2,
        n_estimators=1,
        max_depth=2,
    )
    bm, Xb = binned(X, 16)
    check_predict(gpu, ens, X, Xb)


@pytest.mark.parametrize("name", ["logistic", "softmax", "squared_error"])
def test_objective(gpu, name):
    check_objective(gpu, name, weighted=name != "squared_error")


@pytest.mark.parametrize(
    "name,weighted,unit_hessian,divisor",
    [
        ("squared_error", False, True, False),
        ("logistic", True, False, True),
        ("softmax", True, True, True),
        ("logistic", False, False, False),
    ],
)
def test_prepare_gradients(gpu, name, weighted, unit_hessian, divisor):
    check_prepare_gradients(
        gpu, name, weighted=weighted, unit_hessian=unit_hessian, divisor=divisor
    )


def test_objective_bad_name(gpu):
    with pytest.raises(ValueError, match="no kernel"):
        gpu.gradients("squared_error", np.zeros((2, 1)), np.zeros(2))


# --- the whole grower / booster ---------------------------------------------------------------
def test_grow_tree(gpu, data):
    X, y, _, _ = data
    grown = check_grow_tree(gpu, X, y, mu=0.5, max_depth=3)
    assert (grown.tree.feature >= 0).sum() >= 3


def test_fit_boosting_penalized(gpu, data):
    X, y, _, _ = data
    _, rec, pen = check_fit_boosting(gpu, X, y, mu=0.5, n_estimators=3)
    assert 0 < len(pen.order) < X.shape[1]  # the penalty keeps some features out


def test_fit_boosting_groups_budget_validation(gpu, data):
    X, y, _, _ = data
    check_fit_boosting(
        gpu, X, y, mu=0.1, n_estimators=2, k=2, groups=[0, 1, 1, 0, 2, 3], eval_rows=16
    )


def test_fit_boosting_budget_spent_inside_a_tree(gpu, data):
    """k = 1: the root admits the one feature, the budget is spent, and the deeper levels
    search and build histograms over Omega only (the compacted feature list) or fall back."""
    X, y, _, _ = data
    _, _, pen = check_fit_boosting(gpu, X, y, mu=0.0, n_estimators=2, max_depth=3, k=1)
    assert len(pen.order) == 1


def test_fit_boosting_many_tasks_per_node():
    """Tiny tasks (4 rows), odd tiles and blocks: every level cuts its nodes into many tasks,
    the plan block scans more tasks than it has threads, feature tiles do not divide d."""
    gpu = GPUBackend(min_rows_per_task=4, hist_threads=8, tile_slots=30, part_threads=4)
    X, y = make_data(96, 8, seed=9)
    _, _, pen = check_fit_boosting(
        gpu, X, y, mu=0.2, n_estimators=2, max_depth=4, k=3, groups=[0, 1, 2, 0, 3, 4, 5, 6]
    )
    assert gpu.launches["partition"] >= 2 * 4  # at least one tree reached depth 4
    assert 0 < len(pen.order) <= 3


def test_fit_boosting_sparse_columns(gpu):
    """Columns whose most frequent bin holds at least 80% of the rows (one of them the missing
    bin): the CPU reads them from its sparse rows list and derives that bin from the nodes'
    totals, the GPU adds every bin of the compact layout; the same trees and selection."""
    X, y = make_data(96, 6, seed=11)
    rng = np.random.default_rng(11)
    for f in (1, 2):
        X[rng.random(96) < 0.85, f] = 0.0
    X[rng.random(96) < 0.85, 4] = np.nan
    assert BinMapper(max_bins=16).fit(X).hist_layout().has_most_freq
    check_fit_boosting(gpu, X, y, mu=0.1, n_estimators=2, max_depth=3)


def test_fit_boosting_root_sse(gpu, data):
    X, y, _, _ = data
    check_fit_boosting(
        gpu, X, y, mu=0.05, n_estimators=2, scaling="root_sse", hessian=False, weighted=True
    )


def test_fit_boosting_logistic(gpu, data):
    X, y, _, _ = data
    yb = (y > np.median(y)).astype(np.int32)
    check_fit_boosting(gpu, X, yb, objective=Logistic(), mu=0.3, n_estimators=2)


def test_fit_boosting_logistic_root_sse_weighted_early_stopping(gpu):
    X, y = make_data(72, 5, seed=5)
    yb = (y + 0.3 * np.random.default_rng(5).normal(size=72) > 0.1).astype(np.int32)
    _, rec, _ = check_fit_boosting(
        gpu,
        X,
        yb,
        objective=Logistic(),
        mu=0.02,
        n_estimators=3,
        max_depth=2,
        scaling="root_sse",
        weighted=True,
        eval_rows=16,
        n_iter_no_change=2,
    )
    assert np.all(np.isfinite(rec.val_loss))


def test_fit_boosting_softmax_root_sse(gpu):
    X, _ = make_data(60, 5, seed=3)
    z = np.nan_to_num(X)
    yc = ((z[:, 0] > 0).astype(np.int32) + (z[:, 1] > 0.4)).astype(np.int32)
    check_fit_boosting(
        gpu,
        X,
        yc,
        objective=make_objective("classification", 3),
        mu=0.05,
        n_estimators=1,
        max_depth=2,
        scaling="root_sse",
        weighted=True,
    )


def test_fit_boosting_squared_error_no_penalty(gpu):
    X, y = make_data(80, 4, seed=7, nan_frac=0.3)
    check_fit_boosting(
        gpu, X, y, objective=SquaredError(), mu=0.0, n_estimators=2, max_depth=2, max_bins=255
    )


# --- the transfer and launch budget -----------------------------------------------------------
@pytest.mark.parametrize("depth", [1, 3])
def test_transfer_and_launch_budget(data, depth):
    """Per tree: one device -> host copy per level plus two (the gradient scalars), and a
    fixed set of launches per level -- counted, so the budget cannot silently regress."""
    from _cudasim_checks import _penalties
    from gpufs.engine.grower import TreeParams, grow_tree_packed
    from gpufs.engine.quantize import prepare_gradients

    X, y, bm, Xb = data
    gpu = GPUBackend()
    prepared = gpu.prepare_binned(Xb)
    g, h, _ = gpu.round_gradients("squared_error", np.zeros((64, 1)), y)
    gpu.reset_timings()
    prep = prepare_gradients(gpu, g[0], h[0], None, unit_hessian=True)
    grown = grow_tree_packed(
        gpu, prepared, prep, bm.n_bins_, bm, _penalties(6, 0.0), TreeParams(max_depth=depth), 0
    )
    grown.add_to(np.zeros(64))
    levels = gpu.launches["search"]  # search and decide: one launch per level
    assert levels == depth  # every level split (mu = 0 on informative data)
    assert gpu.transfers == levels + 2
    built = depth - 1  # levels whose children's histograms were built
    want = {
        "gradients": 2,
        "histogram": 1 + built,
        "search": levels,
        "partition": 2 * levels,
        "update_raw": 1,
    }
    assert gpu.launches == {k: v for k, v in want.items() if v}
    # Every launch takes kept views: nothing is wrapped (cupy) or copied (simulator) per
    # launch. New views this tree: the fixed-point gradients' (made once per tree) and the
    # raw-score column's (made once per fit: this is its first tree).
    assert gpu.wrapped == {}
    assert gpu.views_made == 2


def test_round_arrays_wrapped_once(data):
    """A round wraps its new arrays once, at their allocation (g, h, losses and the rows of
    g and h that the quantizing launches take); the fit's raw scores and targets are wrapped
    the first round only, then their kept views are reused."""
    X, y, bm, Xb = data
    gpu = GPUBackend()
    raw = np.zeros((64, 2))
    codes = (y > np.median(y)).astype(np.int32)
    gpu.round_gradients("softmax", raw, codes)
    assert gpu.views_made == 2 + 3 + 2 * 2  # raw, y; g, h, loss, 2 rows each of g and h
    for _ in range(2):
        gpu.reset_timings()
        G, Hs, _ = gpu.round_gradients("softmax", raw, codes)
        for k in range(2):
            gpu.gradient_extremes(G[k], Hs[k], None, False, False)
        assert gpu.views_made == 3 + 2 * 2 and gpu.wrapped == {}


@pytest.mark.parametrize("mu,k", [(0.0, None), (0.3, 2)])
def test_cuda_graphs_replay_the_levels(mu, k):
    """``GPUBackend(cuda_graphs=True)``: each level's operations are recorded and run as a
    graph, cached by what they are (under the simulator the recorded list stands in for the
    graph: this checks the recording and the replay, not cuda.core's graphs, which have not
    run on a GPU). The trees equal the CPU's, and later trees' levels are replays."""
    X, y = make_data(80, 5, seed=4)
    gpu = GPUBackend(cuda_graphs=True, min_rows_per_task=16)
    check_fit_boosting(gpu, X, y, mu=mu, k=k, n_estimators=4, max_depth=3)
    assert gpu.graphs.captured >= 3  # at least one tree's three levels
    assert gpu.graphs.replayed >= 3  # and as many replayed by later trees
    assert gpu.graphs.captured + gpu.graphs.replayed == gpu.launches["search"]


# --- what a real GPU refuses (gpufs.backends.gpu.launch_rules)
# -------------------------------------
def test_every_launch_is_checked_against_the_real_launchers_rules(data, monkeypatch):
    """Under the simulator every launch goes through ``check_launch`` with exactly what is
    launched: a grid of numpy integers (accepted by the simulator, refused by an H200) fails
    here when ``_launch`` stops turning it into Python ints."""
    import gpufs.backends.gpu.device as gpu_module  # where ``_launch`` lives
    from gpufs.backends.gpu.launch_rules import LaunchError

    X, y, bm, Xb = data
    gpu = GPUBackend()
    n = np.int64(Xb.size)
    gpu.bin_transform(X, bm.cuts_padded_, bm.n_bins_ - 1)  # numpy-int sizes: cast, accepted
    monkeypatch.setattr(gpu_module, "launch_geometry", lambda grid, block: (grid, block))
    with pytest.raises(LaunchError, match="grid must be an int"):
        gpu._launch("bin_transform", gpu.kernels.bin_transform_kernel, (n // 32, 1), 32)
    with pytest.raises(LaunchError, match="without opting in"):
        gpu._launch("histogram", gpu.kernels.histogram_kernel, 1, 32, shared=64 * 1024)


# --- errors -----------------------------------------------------------------------------------
def test_out_of_memory_message(gpu):
    with pytest.raises(GPUOutOfMemoryError) as err:
        gpu._alloc((10**8, 10**8), np.int64, "the histograms of one tree level")
    msg = str(err.value)
    assert "needed" in msg and "free" in msg and "max_depth" in msg
    assert isinstance(err.value, MemoryError)


def test_out_of_memory_in_a_fit_names_the_array():
    """A tree too deep for the memory: the workspace's histogram buffers fail to allocate, and
    the error names them, their size and what to do (every workspace array goes through the
    wrapper)."""
    gpu = GPUBackend()
    with pytest.raises(GPUOutOfMemoryError) as err:
        gpu.start_tree(
            np.zeros((100, 4), np.uint8),
            np.zeros((100, 2), np.int64),
            0,
            0,
            30,
            np.arange(4, dtype=np.int32),
        )
    msg = str(err.value)
    assert "a tree level's histograms" in msg and "needed 8.00 TiB" in msg
    assert "fewer rows" in msg and "smaller max_depth" in msg and "more memory" in msg


def test_bad_geometry():
    with pytest.raises(ValueError, match="power of two"):
        GPUBackend(part_threads=3)
    with pytest.raises(ValueError, match="tile_slots"):
        GPUBackend(tile_slots=5958)
    with pytest.raises(ValueError, match="tile_slots"):
        GPUBackend(tile_slots=2979, hist_kernel="split_word")
    GPUBackend(tile_slots=5957)


def test_profile_timers(data):
    X, y, bm, Xb = data
    gpu = GPUBackend(profile=True)
    check_grow_tree(gpu, X, y, mu=0.0, max_depth=2)
    assert {"start_tree", "level", "host_sync"} <= set(gpu.timings)
    assert all(t >= 0.0 for t in gpu.timings.values())


def test_shared_array_patch_keys_by_the_calling_line():
    """The locked allocation keeps the simulator's rule: one array per kernel line."""
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    sh = FakeCUDAShared(0)

    def from_one_line():
        return sh.array(4, np.int64)

    first, again = from_one_line(), from_one_line()
    other = sh.array(4, np.int64)
    assert first is again and other is not first
    assert FakeCUDAShared._gpufs_locked


# --- categorical features ---------------------------------------------------------------------
from _cudasim_checks import make_cat_data  # noqa: E402


@pytest.fixture(scope="module")
def cat_data():
    X, y = make_cat_data(96, 5, levels=(11, 3), seed=3)
    bm, Xb = binned(X, 16, categorical=[0, 1])
    return X, y, bm, Xb


@pytest.mark.parametrize("onehot", [0, 4, 20])
def test_find_splits_categorical(gpu, cat_data, onehot):
    """The categorical scan (sorted by G/H, or one-vs-rest up to ``onehot`` categories):
    the same split, score, sums and bitset on both devices."""
    X, y, bm, Xb = cat_data
    gq, hq, gs, hs = grads(y, seed=onehot)
    rows, ns, nc = segments(96, [40, 2, 30, 24])
    nodes = np.array([3, 4, 5, 6])
    hist = CPU.histograms(Xb, np.stack([gq, hq], axis=1), rows, ns, nc, nodes)
    node_g, node_h = hist[:, 0, :, 0].sum(axis=1), hist[:, 0, :, 1].sum(axis=1)
    d = Xb.shape[1]
    for allowed in (np.ones(d, bool), np.arange(d) < 2):
        res = check_find_splits(
            gpu,
            hist,
            node_g,
            node_h,
            bm.n_bins_,
            np.zeros(d),
            allowed,
            gs,
            hs,
            is_categorical=bm.is_categorical_,
            max_cat_to_onehot=onehot,
        )
        if not allowed[2:].any():  # only the categorical features: non-empty left sets
            big = [0, 2, 3]
            assert set(res.feature[big].tolist()) <= {0, 1}
            assert (res.cat_bits[big].any(axis=1) | res.missing_left[big]).all()
            assert (res.bin[big] == 0).all()


#: LightGBM's four guards of a sorted categorical split, one at a time and all together
#: (``gpufs.rules._categorical``; in ``find_splits`` a category's rows are its hessian sum).
GUARDS = [
    dict(cat_smooth=3.0),
    dict(cat_l2=10.0),
    dict(min_data_per_group=4.0),
    dict(max_cat_threshold=2),
    dict(cat_smooth=2.0, cat_l2=5.0, min_data_per_group=3.0, max_cat_threshold=3),
]


@pytest.mark.parametrize("guards", GUARDS)
def test_find_splits_categorical_guards(gpu, cat_data, guards):
    """The guarded categorical scan: the same split, score, sums and bitset on both
    devices; a capped left set holds at most ``max_cat_threshold`` categories."""
    X, y, bm, Xb = cat_data
    gq, hq, gs, hs = grads(y, seed=7)
    rows, ns, nc = segments(96, [40, 2, 30, 24])
    nodes = np.array([3, 4, 5, 6])
    hist = CPU.histograms(Xb, np.stack([gq, hq], axis=1), rows, ns, nc, nodes)
    node_g, node_h = hist[:, 0, :, 0].sum(axis=1), hist[:, 0, :, 1].sum(axis=1)
    d = Xb.shape[1]
    res = check_find_splits(
        gpu,
        hist,
        node_g,
        node_h,
        bm.n_bins_,
        np.zeros(d),
        np.arange(d) < 2,
        gs,
        hs,
        is_categorical=bm.is_categorical_,
        max_cat_to_onehot=0,
        **guards,
    )
    cap = guards.get("max_cat_threshold", 256)
    for s in range(4):
        if res.feature[s] >= 0:
            n_left = sum(bin(int(w)).count("1") for w in res.cat_bits[s]) + int(res.missing_left[s])
            assert n_left <= cap


@pytest.mark.parametrize("guards", GUARDS[-1:] + [dict(min_data_per_group=20.0)])
def test_fit_boosting_categorical_guards(gpu, cat_data, guards):
    """Whole guarded fits (a category's rows estimated from the node's row count): every
    tree equal on both devices."""
    X, y, bm, Xb = cat_data
    ens, _, pen = check_fit_boosting(
        gpu, X, y, mu=0.0, n_estimators=3, max_depth=3, categorical=[0, 1], tree=guards
    )
    check_predict(gpu, ens, X, Xb)


def test_partition_categorical(gpu, cat_data):
    X, y, bm, Xb = cat_data
    rows, ns, nc = segments(96, [40, 2, 30, 24])
    bits = np.zeros((3, 8), np.uint32)
    bits[0, 0] = 0b10110101  # categories 0, 2, 4, 5, 7 of feature 0
    bits[2, 0] = 0b10  # category 1 of feature 1
    for ml in ([True, False, True], [False, True, False]):
        check_partition(
            gpu,
            Xb,
            rows,
            ns,
            nc,
            np.array([3, 5, 6]),
            np.array([0, 2, 1]),
            np.array([0, 7, 0]),
            np.array(ml),
            np.array([True, False, True]),
            bits,
        )


@pytest.mark.parametrize("mu,k", [(0.0, None), (0.5, 2)])
def test_fit_boosting_categorical(gpu, cat_data, mu, k):
    """Whole fits on categorical data: every tree (bitsets included), the record and Omega
    equal on both devices; then raw and binned predictions equal too."""
    X, y, bm, Xb = cat_data
    ens, _, pen = check_fit_boosting(
        gpu, X, y, mu=mu, k=k, n_estimators=3, max_depth=3, categorical=[0, 1]
    )
    assert ens.categorical and ens.stacked()["cat_bits"].any()  # categorical splits were made
    check_predict(gpu, ens, X, Xb)


def test_planted_categorical_problem_on_both_devices(gpu):
    """The planted problem (``tests/_categorical_data.py``; smaller here: 200 rows, 6 noise
    columns, for the simulator): with a budget of three features, boosting on the simulated
    GPU grows the CPU's trees bit for bit and selects exactly the 30-level categorical column
    and the two numeric ones."""
    from _categorical_data import PLANTED, planted
    from gpufs.data._input import check_X

    X, y = planted(n=200, n_noise=6, seed=0)

    class _Door:  # an object to hold what the input door learns (the category codes)
        pass

    door = _Door()
    Xf = check_X(door, X, reset=True, categorical_features="from_dtype")
    names = list(X.columns)
    city = names.index("city")
    assert door.category_codes_.n_codes[city] == 30
    ens, _, pen = check_fit_boosting(
        gpu,
        Xf,
        y,
        mu=0.01,
        k=3,
        scaling="root_sse",
        n_estimators=3,
        max_depth=3,
        max_bins=32,
        categorical=[city],
    )
    assert sorted(names[f] for f in pen.order) == sorted(PLANTED)
    assert ens.stacked()["cat_bits"].any()


@pytest.mark.parametrize("multiclass", [False, True])
def test_heldout_permutation_gains_equal_the_cpus(gpu, multiclass):
    """Exact k's held-out savings and their standard errors (``heldout_permutation_gains``:
    each tree's values kept, only the trees on the permuted feature walked again, the running
    sums re-added in tree order) on the GPU backend equal the CPU's, bit for bit: weighted
    rows, a constant feature no tree splits on, one and three outputs."""
    from gpufs.engine.boosting import DeviceRows
    from gpufs.selectors._exact_k import heldout_permutation_gains

    X, y = make_data(96, 6, seed=13)
    fit, held = slice(0, 64), slice(64, 96)
    objective = SquaredError()
    if multiclass:
        objective = make_objective("classification", 3)
        y = (np.nan_to_num(X[:, 0]) > 0).astype(np.int32) + (np.nan_to_num(X[:, 1]) > 0.5)
        y = y.astype(np.int32)
    ens, _, _ = check_fit_boosting(
        gpu, X[fit], y[fit], objective=objective, mu=0.0, n_estimators=3, max_depth=3
    )
    bm, _ = binned(X[fit], 16)
    Xb = CPU.bin_transform(X[held], bm.cuts_padded_, bm.n_bins_ - 1)
    w = np.random.default_rng(2).uniform(0.2, 3.0, Xb.shape[0])
    features = list(range(X.shape[1]))
    want = heldout_permutation_gains(ens, DeviceRows(CPU, Xb, y[held], w), objective, features, 5)
    dev = gpu.xp.asarray
    rows = DeviceRows(gpu, dev(Xb), dev(y[held]), dev(w))
    got = heldout_permutation_gains(ens, rows, objective, features, 5)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert np.count_nonzero(want[0]) >= 2 and want[0][5] == 0.0  # 5: constant, never split


def test_heldout_ranking_on_pool_columns_equals_the_cpus(gpu):
    """Exact k's whole held-out ranking (``rank_by_heldout``): the cross-fitted folds drawn
    on the device's rows (``heldout_folds``), the ranking fits on the pool's columns only
    (``PoolBins``, column indexing on the device) and the permutations, on the GPU backend,
    equal the CPU's bit for bit, with weights."""
    from gpufs.engine.boosting import BoostingParams, DeviceRows
    from gpufs.engine.grower import TreeParams
    from gpufs.selectors import _exact_k
    from gpufs.selectors._boost_setup import BoostSetup

    X, y = make_data(60, 6, seed=21)
    bm, Xb = binned(X, 16)
    w = np.random.default_rng(4).uniform(0.5, 2.0, X.shape[0])
    params = BoostingParams(n_estimators=2, tree=TreeParams(max_depth=2, learning_rate=0.3))
    pool = [4, 0, 2]
    out = []
    for backend in (CPU, gpu):
        dev = backend.xp.asarray
        setup = BoostSetup(
            backend,
            DeviceRows(backend, dev(Xb), dev(y), dev(w)),
            SquaredError(),
            bm,
            params,
            np.ones(6),
            np.arange(6, dtype=np.int32),
            "none",
        )
        folds = _exact_k.heldout_folds(setup, 3)
        assert len(folds) == _exact_k.CROSS_FIT_FOLDS
        out.append(_exact_k.rank_by_heldout(setup, folds, 0.0, pool, 3))
    (want_s, want_se, want_n), (got_s, got_se, got_n) = out
    np.testing.assert_array_equal(got_s, want_s)
    np.testing.assert_array_equal(got_se, want_se)
    assert got_n == want_n == 5 * 2
    assert np.count_nonzero(want_s[pool]) >= 2 and not want_s[[1, 3, 5]].any()
