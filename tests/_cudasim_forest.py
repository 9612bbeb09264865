"""ControlBurn's forests on the GPU backend under the numba CUDA simulator, against the CPU.

Needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported, so it runs in a pytest process of
its own, started early by ``tests/test_forest_algorithms.py`` (``_simulator_runs``). Each case
grows the same forest (bagged boosting, plain bagging with feature subsets, single-feature
trees, a classifier) on both backends and compares every tree, the per-tree feature masks and
the out-of-bag improvements. Inputs are tiny: the simulator runs one Python thread per CUDA
thread.
"""

import numpy as np
import pytest

import _cudasim_patch

_cudasim_patch.enter("tests/test_forest_algorithms.py")  # skips unless the simulator is on

from gpufs.backends import get_backend  # noqa: E402
from gpufs.engine.binning import BinMapper  # noqa: E402
from gpufs.forest import ForestParams, grow_forest  # noqa: E402

CASES = [
    ("regression", dict(method="bagboost", max_depth=2, max_trees_per_round=3)),
    ("regression", dict(method="bag", max_depth=2, max_trees_per_round=3, max_features=2)),
    ("regression", dict(method="bagboost", max_depth=1, tree_type="single", max_trees_per_round=3)),
    ("classification", dict(method="bagboost", max_depth=2, max_trees_per_round=3)),
]


@pytest.mark.parametrize(("task", "kw"), CASES)
def test_forest_cpu_equals_simulated_gpu(task, kw):
    cpu, gpu = get_backend("cpu"), get_backend("gpu")
    rng = np.random.RandomState(0)
    X = rng.randn(30, 3)
    X[::7, 1] = np.nan
    y = X[:, 0] + 0.3 * rng.randn(30)
    target, n_classes = (y, 0) if task == "regression" else ((y > 0).astype(np.int32), 2)
    bm = BinMapper(16).fit(X)
    Xb = bm.transform(X, cpu)
    fc = grow_forest(cpu, Xb, target, None, task, n_classes, bm, ForestParams(**kw), random_state=0)
    fg = grow_forest(gpu, Xb, target, None, task, n_classes, bm, ForestParams(**kw), random_state=0)
    stacked_gpu = fg.ensemble.stacked()
    for k, v in fc.ensemble.stacked().items():
        assert np.array_equal(v, stacked_gpu[k]), k
    assert np.array_equal(fc.A, fg.A)
    assert np.array_equal(fc.feature_masks, fg.feature_masks)
    assert fc.oob_improvement == fg.oob_improvement
