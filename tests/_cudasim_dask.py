"""A Dask shard's level step on the GPU backend under the numba CUDA simulator, against the CPU.

Needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported, so it runs in a pytest process of
its own, started by ``tests/test_dask_gpu_sim.py``. Checks, bit for bit:

* ``GPUBackend.advance_level`` against ``CPUBackend.advance_level``: the driver's decisions
  (``CPUBackend.decide_level``, on histograms summed over two shards of rows) applied to each
  shard on both backends, on data with categorical features, missing values, penalties, a
  feature budget and paid-for features; left counts, both children's histograms and the
  node tables equal at every level, the raw-score update after the tree, and the same
  update by a rebuilt shard's replay of the splits (``Shard.replay_tree``);
* a ``DaskGBFSRegressor`` / ``DaskGBFSClassifier`` with ``device="gpu"`` (GPU shards,
  simulated) on a ``LocalCluster(processes=False)``: the trees and selection of the CPU shards
  and of the single-process estimator.
"""

from typing import NamedTuple

import numpy as np
import pytest

import _cudasim_patch

_cudasim_patch.enter("tests/test_dask_gpu_sim.py")  # skips unless the simulator is on

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in scalar add")

from _cudasim_checks import assert_same, binned, grads, make_cat_data  # noqa: E402
from gpufs._device import to_host  # noqa: E402
from gpufs.backends.base import SplitParams, categorical_slots  # noqa: E402
from gpufs.backends.cpu import CPUBackend  # noqa: E402
from gpufs.backends.gpu.backend import GPUBackend  # noqa: E402
from gpufs.dask._backend import replay_plan  # noqa: E402
from gpufs.rules._hist_layout import HistLayout  # noqa: E402


def _shard_backends():
    """A CPU shard's backend (as ``gpufs.dask._shard.Shard`` makes it) and a GPU one."""
    return CPUBackend(gain_bounds="never", most_freq=False), GPUBackend()


class _Level(NamedTuple):
    """One level step's inputs: the binned rows, their quantized gradients, the split
    parameters and the penalty state of both level tests."""

    X: np.ndarray  # (n, d) float64, raw, with NaNs
    Xb: np.ndarray  # (n, d) uint8, binned
    gq: np.ndarray  # (n,) int64, quantized gradients
    hq: np.ndarray  # (n,) int64, quantized hessians
    gh: np.ndarray  # (n, 2) int64, both
    layout: HistLayout
    split: SplitParams
    penalty: np.ndarray  # (d,) float64
    allowed: np.ndarray  # (d,) bool
    used: np.ndarray  # (d,) bool
    feats: np.ndarray  # (d,) int32


def _level_inputs(seed):
    """Categorical features, missing values, free, paid and costly features, one feature not
    allowed and one already paid for (n=160, d=6)."""
    X, y = make_cat_data(n=160, d=6, levels=(11, 3), seed=seed, nan_frac=0.15)
    bm, Xb = binned(X, 16, categorical=[0, 1])
    gq, hq, gs, hs = grads(y, seed=seed + 1)
    gh = np.ascontiguousarray(np.stack([gq, hq], axis=1), np.int64)
    d = X.shape[1]
    cat_slot, n_cat = categorical_slots(bm.is_categorical_, d)
    layout = bm.hist_layout().without_most_freq()
    split = SplitParams(
        n_bins=bm.n_bins_.astype(np.int32),
        g_scale=gs,
        h_scale=hs,
        reg_lambda=1.0,
        gain_divisor=1.0,
        min_child_weight=1e-3,
        min_split_gain=0.0,
        cat_slot=cat_slot,
        n_cat=n_cat,
        layout=layout,
    )
    penalty = np.array([0.0, 0.3, 0.0, 2.0, 0.1, 0.0])  # free, paid and costly features
    allowed = np.ones(d, np.bool_)
    allowed[5] = False
    used = np.zeros(d, np.bool_)
    used[2] = True
    return _Level(
        X, Xb, gq, hq, gh, layout, split, penalty, allowed, used, np.arange(d, dtype=np.int32)
    )


@pytest.mark.parametrize("seed,budget", [(0, -1), (1, 1)])
def test_advance_level_equals_the_cpu(seed, budget):
    X, Xb, gq, hq, gh, layout, split, penalty, allowed, used, feats = _level_inputs(seed)
    d = X.shape[1]
    max_depth = 4
    # two shards of rows, unequal, interleaved (a shard's rows are any subset)
    rng = np.random.default_rng(seed)
    pick = rng.random(X.shape[0]) < 0.4
    shards = []
    for rows in (np.flatnonzero(pick), np.flatnonzero(~pick)):
        cpu, gpu = _shard_backends()
        data_c = cpu.prepare_binned(Xb[rows])
        data_g = gpu.prepare_binned(gpu.xp.asarray(Xb[rows]))
        st_c = cpu.start_tree(data_c, gh[rows], 0, 0, max_depth, feats, layout=layout)
        st_g = gpu.start_tree(
            data_g, gpu.xp.asarray(gh[rows]), 0, 0, max_depth, feats, layout=layout
        )
        assert_same(st_c.hist, st_g.hist, "root histograms")
        shards.append((rows, cpu, gpu, st_c, st_g))
    # the driver: a tree state of no rows with the summed histograms (``_backend``)
    driver = CPUBackend(gain_bounds="never", most_freq=False)
    st = driver.start_tree(
        driver.prepare_binned(Xb[:0]),
        gh[:0],
        int(gq.sum()),
        int(hq.sum()),
        max_depth,
        feats,
        layout=layout,
    )
    st.node_count[0] = X.shape[0]
    st.hist = sum(s[3].hist for s in shards)
    reached, was_split, n_cat_splits, plans = [0], [], 0, []
    for level in range(max_depth):
        build_next = level + 1 < max_depth
        _, plan = driver.decide_level(st, penalty, allowed, used, budget, split)
        lefts = []
        for _rows, cpu, gpu, st_c, st_g in shards:
            left_c = cpu.advance_level(st_c, plan, build_next)
            left_g = gpu.advance_level(st_g, plan, build_next)
            assert_same(left_c, left_g, f"level {level}: left counts")
            lefts.append(left_c)
            for k in ("node_start", "node_count", "node_g", "node_h", "active"):
                assert_same(getattr(st_c, k), getattr(st_g, k), f"level {level}: {k}")
            if build_next and plan.split_slot.shape[0] and plan.next_n_feats:
                cols = layout.slots_of(plan.next_feats[: plan.next_n_feats])
                assert_same(
                    st_c.hist[:, cols], to_host(st_g.hist)[:, cols], f"level {level}: histograms"
                )
        n_split = plan.split_slot.shape[0]
        if n_split == 0:
            break
        n_cat_splits += int(np.count_nonzero(plan.is_cat))
        plans.append(replay_plan(plan, d))
        # the driver advances as ``ClusterBackend.level_step`` does (its histograms: the
        # shards' summed)
        nodes = st.active[plan.split_slot]
        was_split += nodes.tolist()
        L, R = 2 * nodes + 1, 2 * nodes + 2
        reached += L.tolist() + R.tolist()
        st.node_count[L] = sum(lefts)
        st.node_count[R] = st.node_count[nodes] - sum(lefts)
        st.node_g[L], st.node_h[L] = plan.left_g, plan.left_h
        st.node_g[R] = st.node_g[nodes] - plan.left_g
        st.node_h[R] = st.node_h[nodes] - plan.left_h
        st.active = np.stack([L, R], axis=1).reshape(-1)
        st.feats, st.n_feats, st.full = plan.next_feats, plan.next_n_feats, plan.next_full
        st.slot_full = np.ones(2 * n_split, np.bool_)
        if build_next:
            st.hist = sum(s[3].hist for s in shards)
        used = used | plan.admitted_now
    assert len(was_split) >= 3, "the tree should grow past its first level"
    assert n_cat_splits, "a categorical split should be among the tree's"
    # the raw-score update on the finished tree's leaves
    leaves = np.array(sorted(set(reached) - set(was_split)), np.int64)
    values = np.linspace(-1.0, 1.0, leaves.shape[0])
    for rows, cpu, gpu, st_c, st_g in shards:
        want = np.zeros(rows.shape[0])
        got = gpu.xp.zeros(rows.shape[0])
        cpu.update_raw(want, st_c, leaves, values)
        gpu.update_raw(got, st_g, leaves, values)
        assert_same(want, got, "raw scores")
        # a rebuilt shard's replay (``Shard.replay_tree``): the rows partitioned again by the
        # splits alone, no histogram, on a backend of its own
        replayer = GPUBackend()
        tiny = HistLayout.from_n_bins(np.ones(d, np.int64))
        st_r = replayer.start_tree(
            gpu.prepare_binned(gpu.xp.asarray(Xb[rows])),
            gpu.xp.zeros((rows.shape[0], 2), np.int64),
            0,
            0,
            max_depth,
            np.zeros(0, np.int32),
            layout=tiny,
        )
        for p in plans:
            replayer.advance_level(st_r, p, False)
        again = gpu.xp.zeros(rows.shape[0])
        replayer.update_raw(again, st_r, leaves, values)
        assert_same(want, again, "raw scores after a replay")


@pytest.mark.parametrize("seed,budget", [(0, -1), (1, 1)])
def test_decide_level_equals_the_cpu(seed, budget):
    """``GPUBackend.decide_level`` (one process's rows, true root sums): the CPU's result and
    plan at every level, then both advance by the plan."""
    X, Xb, gq, hq, gh, layout, split, penalty, allowed, used, feats = _level_inputs(seed)
    cpu, gpu = _shard_backends()
    root = (int(gq.sum()), int(hq.sum()))
    st_c = cpu.start_tree(cpu.prepare_binned(Xb), gh, *root, 4, feats, layout=layout)
    st_g = gpu.start_tree(
        gpu.prepare_binned(gpu.xp.asarray(Xb)), gpu.xp.asarray(gh), *root, 4, feats, layout=layout
    )
    n_split = 0
    for level in range(4):
        res_c, plan_c = cpu.decide_level(st_c, penalty, allowed, used, budget, split)
        res_g, plan_g = gpu.decide_level(st_g, penalty, allowed, used, budget, split)
        for k, v in vars(res_c).items():
            assert_same(v, getattr(res_g, k), f"level {level}: result.{k}")
        for k in plan_c._fields:
            a, b = getattr(plan_c, k), getattr(plan_g, k)
            if k == "next_feats":
                a, b = a[: plan_c.next_n_feats], b[: plan_g.next_n_feats]
            if k == "split":
                assert a is b
            elif isinstance(a, np.ndarray):
                assert_same(a, b, f"level {level}: plan.{k}")
            else:
                assert a == b, f"level {level}: plan.{k}: {a} != {b}"
        n_split += plan_c.split_slot.shape[0]
        if not plan_c.split_slot.shape[0]:
            break
        build = level < 3
        assert_same(
            cpu.advance_level(st_c, plan_c, build),
            gpu.advance_level(st_g, plan_c, build),
            f"level {level}: left counts",
        )
        used = used | plan_c.admitted_now
    assert n_split >= 3


@pytest.fixture(scope="module")
def client():
    # In-process workers (threads): simulated launches take turns (``gpu.device``'s lock),
    # and the simulator's shared-memory lock (``_cudasim_patch``) is this process's. Dask's
    # sampling profiler off: in worker processes, beside the simulator's one Python thread
    # per CUDA thread, a simulated block hung at a barrier.
    import dask

    distributed = pytest.importorskip("distributed")
    with (
        dask.config.set({"distributed.worker.profile.enabled": False}),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _same_trees(a, b):
    sa, sb = a.ensemble_.stacked(), b.ensemble_.stacked()
    assert set(sa) == set(sb)
    for k in sa:
        assert_same(sa[k], sb[k], f"trees[{k}]")


def _table(n=2000, d=8, seed=0):
    """n x d with NaNs, column 0 category codes 0..5 (a categorical feature), a duplicate."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 0] = rng.integers(0, 6, size=n)
    X[:, 4] = X[:, 1]
    X[rng.random(X.shape) < 0.05] = np.nan
    z = np.nan_to_num(X)
    y = np.array([0.0, 1.0, -1.0, 0.5, 2.0, -0.5])[np.nan_to_num(X[:, 0], nan=0).astype(int)]
    y = y + z[:, 1] - 0.5 * z[:, 2] + 0.3 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_gpu_shards_on_a_local_cluster(client, kind):
    import dask.array as da

    from gpufs import GBFSClassifier, GBFSRegressor
    from gpufs.dask import DaskGBFSClassifier, DaskGBFSRegressor

    # small: this test is about the cluster's plumbing with GPU shards (the kernels' level
    # step is checked above), and the simulator's time is the test's (at 2000 rows and 5 trees
    # the regressor took 99 s of this file's 180 s on a loaded 2-core box); three partitions
    # on two workers, each more than one task of rows (the simulated device's rows per task:
    # max(16, n / 8)), either way
    n, trees, chunk = (400, 3, 150) if kind == "regressor" else (300, 2, 120)
    X, y = _table(n)
    w = None
    single, dask_cls = GBFSRegressor, DaskGBFSRegressor
    if kind == "classifier":
        y = (y > np.median(y)).astype(np.int64)
        w = np.random.default_rng(3).uniform(0.5, 2.0, size=y.shape[0])
        single, dask_cls = GBFSClassifier, DaskGBFSClassifier
    kw = dict(
        n_estimators=trees,
        max_depth=3,
        mu=0.1,
        max_bins=32,
        random_state=0,
        categorical_features=[0],
    )
    Xd, yd = da.from_array(X, chunks=(chunk, 8)), da.from_array(y, chunks=chunk)
    wd = None if w is None else da.from_array(w, chunks=chunk)
    ref = single(device="cpu", **kw).fit(X, y, sample_weight=w)
    cpu = dask_cls(device="cpu", client=client, timeout=300, **kw).fit(Xd, yd, sample_weight=wd)
    gpu = dask_cls(device="gpu", client=client, timeout=300, **kw).fit(Xd, yd, sample_weight=wd)
    assert gpu.cluster_["shard_backends"] == ["gpu", "gpu"]
    assert cpu.cluster_["shard_backends"] == ["cpu", "cpu"]
    _same_trees(ref, gpu)
    _same_trees(cpu, gpu)
    assert np.array_equal(ref.selected_features_, gpu.selected_features_)
    assert gpu.ensemble_.stacked()["is_categorical"].any()
    assert_same(np.asarray(ref.predict(X)), np.asarray(gpu.predict(X)), "predictions")
