"""ControlBurn's forests on the GPU backend under the numba CUDA simulator, against the CPU.

Needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported, so it runs in a pytest process of
its own, started early by ``tests/test_forest_algorithms.py`` (``_background_files``). Each case
grows the same forest (bagged boosting, plain bagging with feature subsets, single-feature
trees, a classifier, honest leaf values, a guarded categorical column) on both backends and
compares every tree, the per-tree feature masks and the out-of-bag improvements. Inputs are
tiny: the simulator runs one Python thread per CUDA thread.
"""

import numpy as np
import pytest

import _cudasim_patch

_cudasim_patch.enter("tests/test_forest_algorithms.py")  # skips unless the simulator is on

from _cudasim_checks import binned, make_cat_data  # noqa: E402
from gpufs.backends import get_backend  # noqa: E402
from gpufs.engine.binning import BinMapper  # noqa: E402
from gpufs.forest import ForestParams, grow_forest  # noqa: E402

CASES = [
    ("regression", dict(method="bagboost", max_depth=2, max_trees_per_round=3)),
    ("regression", dict(method="bag", max_depth=2, max_trees_per_round=3, max_features=2)),
    ("regression", dict(method="bagboost", max_depth=1, tree_type="single", max_trees_per_round=3)),
    ("classification", dict(method="bagboost", max_depth=2, max_trees_per_round=3)),
    # honest leaf values: the row -> leaf partition and the bincounts on the device
    ("regression", dict(method="bagboost", max_depth=2, max_trees_per_round=3, honest_leaves=True)),
    ("classification", dict(method="bag", max_depth=2, max_trees_per_round=3, honest_leaves=True)),
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


def test_forest_with_a_guarded_categorical_column_cpu_equals_simulated_gpu():
    """A 9-level categorical column split one category against the rest
    (``max_cat_threshold=1``, the forest's default) with guards small enough for 60 rows."""
    cpu, gpu = get_backend("cpu"), get_backend("gpu")
    X, y = make_cat_data(n=60, d=3, levels=(9,), seed=1)
    bm, Xb = binned(X, categorical=[0])
    p = ForestParams(
        method="bagboost",
        max_depth=2,
        max_trees_per_round=3,
        cat_smooth=1.0,
        min_data_per_group=2.0,
    )
    fc = grow_forest(cpu, Xb, y, None, "regression", 0, bm, p, random_state=0)
    fg = grow_forest(gpu, Xb, y, None, "regression", 0, bm, p, random_state=0)
    stacked_cpu, stacked_gpu = fc.ensemble.stacked(), fg.ensemble.stacked()
    for k, v in stacked_cpu.items():
        assert np.array_equal(v, stacked_gpu[k]), k
    assert np.array_equal(fc.A, fg.A)
    assert (stacked_cpu["feature"] == 0).any()  # the categorical column was split on
