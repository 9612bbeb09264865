"""GT-GBM's group tests on the GPU backend under the numba CUDA simulator, against the CPU.

Needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported, so it runs in a pytest process of
its own, started by ``tests/test_group_testing.py``. The GPU path of ``gpufs.engine.group_testing``
(standardized columns as float32, one matrix product per step, equal-width bins by array
operations, the backend's histogram kernel, the shared scan) must give the CPU path's gains at
every step bit for bit, hence the same candidates, and a boosted fit with the group tests the
same trees and candidate sets. Inputs are tiny: the simulator runs one Python thread per CUDA
thread.
"""

import numpy as np
import pytest

import _cudasim_patch

_cudasim_patch.enter("tests/test_group_testing.py")  # skips unless the simulator is on

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in scalar add")

from _cudasim_checks import CPU, assert_same, assert_same_tree, grads, make_data  # noqa: E402
from gpufs.backends.gpu.backend import GPUBackend  # noqa: E402
from gpufs.engine.binning import BinMapper  # noqa: E402
from gpufs.engine.boosting import BoostingParams, DeviceRows, fit_boosting  # noqa: E402
from gpufs.engine.group_testing import (  # noqa: E402
    FirstStep,
    GroupTestParams,
    GroupTestSearch,
    draw_subsets,
    group_test_candidates,
    standardize,
    standardized_values,
)
from gpufs.engine.grower import TreeParams  # noqa: E402
from gpufs.engine.objectives import Logistic, SquaredError  # noqa: E402
from gpufs.engine.penalties import PenaltyState  # noqa: E402


@pytest.mark.parametrize("seed, max_bins", [(0, 8), (1, 255)])
def test_group_tests_cpu_equals_simulated_gpu(seed, max_bins):
    gpu = GPUBackend()
    assert gpu.simulator
    X, y = make_data(48, 10, seed=seed)
    Q_cpu, Q_gpu = standardize(X, CPU), standardize(gpu.xp.asarray(X), gpu)
    assert Q_gpu.dtype == np.float32 and Q_gpu.shape == (48, 10)
    assert_same(standardized_values(Q_cpu), standardized_values(Q_gpu), "standardized")
    gq, hq, gs, hs = grads(y, seed=seed + 1)
    gh = np.stack([gq, hq], axis=1)
    subsets = draw_subsets(np.random.default_rng(seed), 10, 2, 0.3)
    out = []
    for be, Q in ((CPU, Q_cpu), (gpu, Q_gpu)):
        trace = []
        first = FirstStep(be, Q, subsets, max_bins) if seed == 1 else None  # per_fit's path
        c = group_test_candidates(
            be,
            Q,
            be.xp.asarray(gh),
            int(gq.sum()),
            int(hq.sum()),
            gs,
            hs,
            subsets,
            params=GroupTestParams(max_bins=max_bins),
            first=first,
            trace=trace,
        )
        out.append((c, trace))
    (ca, ta), (cb, tb) = out
    assert_same(ca, cb, "candidates")
    assert len(ta) == len(tb) >= 2
    for i, (a, b) in enumerate(zip(ta, tb)):
        assert_same(a["gain_left"], b["gain_left"], f"step {i} left gains")
        assert_same(a["gain_right"], b["gain_right"], f"step {i} right gains")
        assert np.isfinite(a["gain_left"]).any()


@pytest.mark.parametrize("objective", ["squared_error", "logistic"])
def test_boosting_with_group_tests_cpu_equals_simulated_gpu(objective):
    gpu = GPUBackend()
    X, y = make_data(40, 8, seed=4)
    if objective == "logistic":
        y = (y > np.median(y)).astype(np.float64)
    bm = BinMapper(max_bins=8).fit(X)
    Xb = bm.transform(X, CPU)
    obj = SquaredError() if objective == "squared_error" else Logistic()
    w = np.random.default_rng(3).uniform(0.5, 2.0, 40)
    params = BoostingParams(n_estimators=2, tree=TreeParams(max_depth=2, learning_rate=0.3))
    out = []
    for be in (CPU, gpu):
        xp = be.xp
        search = GroupTestSearch(
            standardize(xp.asarray(X), be),
            s=2,
            delta=0.3,
            seed=11,
            max_bins=8,
            subsets="per_fit" if objective == "logistic" else "per_tree",
        )
        pen = PenaltyState(0.02, np.ones(8), np.arange(8, dtype=np.int32), "root_sse", None)
        rows = DeviceRows(be, xp.asarray(Xb), xp.asarray(y), xp.asarray(w))
        ens, rec, _ = fit_boosting(be, rows, obj, pen, bm, params, candidate_search=search)
        out.append((ens, rec, pen))
    (ea, ra, pa), (eb, rb, pb) = out
    assert pa.order == pb.order and len(pa.order) > 0
    assert len(pa.candidates_by_tree) == len(pb.candidates_by_tree) == 2
    for a, b in zip(pa.candidates_by_tree, pb.candidates_by_tree):
        assert_same(a, b, "candidates")
    for i, (ta, tb) in enumerate(zip(ea.trees, eb.trees)):
        assert_same_tree(ta, tb, f"tree {i}")
    assert ra.as_dict()["features_added"] == rb.as_dict()["features_added"]
