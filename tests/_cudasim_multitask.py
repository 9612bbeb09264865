"""Multitask A-GBM on the GPU backend under the numba CUDA simulator, against the CPU backend.

Needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported, so it runs in a pytest process of
its own, started by ``tests/test_multitask.py``. The multitask loop hands the one grower a
penalty state per task; these checks show that the GPU backend (its kernels simulated, on numpy
arrays) grows the same trees, records the same losses and builds the same Omega_G and Omega_t
as the CPU, with several tasks' binned matrices alternating through one backend. Inputs are
tiny: the simulator runs one Python thread per CUDA thread.
"""

import numpy as np
import pytest

import _cudasim_patch

_cudasim_patch.enter("tests/test_multitask.py")  # skips unless the simulator is on

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in scalar add")

from _cudasim_checks import CPU, assert_same, assert_same_tree, make_data  # noqa: E402
from gpufs.backends.gpu.backend import GPUBackend  # noqa: E402
from gpufs.engine.binning import BinMapper  # noqa: E402
from gpufs.engine.boosting import BoostingParams  # noqa: E402
from gpufs.engine.grower import TreeParams  # noqa: E402
from gpufs.engine.multitask_boosting import MultiTaskPenaltyState, fit_multitask_boosting  # noqa: E402
from gpufs.engine.objectives import Logistic, SquaredError  # noqa: E402


@pytest.mark.parametrize("objective", ["squared_error", "logistic"])
def test_multitask_cpu_equals_simulated_gpu(objective):
    gpu = GPUBackend()
    assert gpu.simulator
    sizes = (40, 28, 33)
    Xs, ys = [], []
    for t, n in enumerate(sizes):
        X, y = make_data(n, 5, seed=t)
        Xs.append(X)
        ys.append(y if objective == "squared_error" else (y > np.median(y)).astype(np.float64))
    bm = BinMapper(max_bins=8).fit(np.vstack(Xs))
    Xbs = [bm.transform(X, CPU) for X in Xs]
    obj = SquaredError() if objective == "squared_error" else Logistic()
    ws = [None, np.random.default_rng(3).uniform(0.5, 2.0, sizes[1]), None]
    params = BoostingParams(n_estimators=2, tree=TreeParams(max_depth=2, learning_rate=0.3))
    out = []
    for be in (CPU, gpu):
        state = MultiTaskPenaltyState(
            0.05, [0.02, 0.0, 0.04], np.ones(5), np.arange(5, dtype=np.int32), "root_sse"
        )
        res = fit_multitask_boosting(
            be,
            [be.xp.asarray(x) for x in Xbs],
            [be.xp.asarray(y) for y in ys],
            [None if w is None else be.xp.asarray(w) for w in ws],
            obj,
            state,
            bm,
            params,
        )
        out.append((res, state))
    (ra, sa), (rb, sb) = out
    assert sa.shared.order == sb.shared.order and len(sa.shared.order) > 0
    assert_same(sa.shared.first_use_tree, sb.shared.first_use_tree, "Omega_G first use")
    for t in range(3):
        assert sa.task(t).order == sb.task(t).order
        ea, eb = ra.ensembles[t], rb.ensembles[t]
        assert ea.n_trees == eb.n_trees == 2
        assert_same(np.asarray(ea.base_score), np.asarray(eb.base_score), "base_score")
        for i, (ta, tb) in enumerate(zip(ea.trees, eb.trees)):
            assert_same_tree(ta, tb, f"task {t} tree {i}")
        da, db = ra.records[t].as_dict(), rb.records[t].as_dict()
        assert da["features_added"] == db["features_added"]
        np.testing.assert_array_equal(da["train_loss"], db["train_loss"])
