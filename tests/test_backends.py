"""The backend interface (``gpufs.backends.base``): both backends implement the ``Backend``
protocol (what the engine calls) and the ``BackendProbes`` protocol (what only tests call) with
the same signatures, and no engine module calls a probe; the records it exchanges
(``SplitInfo``); the task rule (``gpufs.rules._tasks``); and what the rest of the package asks of a
backend instead of testing the
device (``owns``, ``to_device``, ``synchronize``).

The GPU backend is checked here as a class (no GPU needed); its results are compared with the
CPU's under the CUDA simulator (``_cudasim_kernels.py``) and on a real GPU (``test_gpu.py``).
"""

import inspect
import os
import re

import numpy as np
import pytest

from gpufs.backends import get_backend
from gpufs.backends.base import (
    Backend,
    BackendProbes,
    LevelResult,
    SplitInfo,
    SplitParams,
    SplitPlan,
    best_splits,
)
from gpufs.backends.cpu import CPUBackend
from gpufs.backends.gpu.backend import GPUBackend
from gpufs.engine.binning import BinMapper
from gpufs.rules import _tasks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _params(fn):
    """(name, kind, default) of every parameter: the call interface, annotations aside."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _protocol_methods(protocol=Backend):
    return {
        name: fn
        for name, fn in vars(protocol).items()
        if inspect.isfunction(fn) and not name.startswith("_")
    }


#: What only tests call: the level's kernels one at a time.
PROBES = {"task_table", "histograms", "find_splits", "partition"}
#: The level in two halves (a cluster's driver decides, its workers advance their rows).
TWO_PHASE = ("decide_level", "advance_level")


def test_protocols_list_the_interface():
    assert set(_protocol_methods()) == {
        "owns",
        "to_device",
        "synchronize",
        "bin_transform",
        "round_gradients",
        "gradients",
        "loss_terms",
        "gradient_extremes",
        "quantize_gradients",
        "prepare_binned",
        "start_tree",
        "level_step",
        "decide_level",
        "advance_level",
        "node_sums",
        "update_raw",
        "predict_binned",
        "predict_raw",
        "group_test_steps",
    }
    assert set(_protocol_methods(BackendProbes)) == PROBES


def _check_implements(cls, name, protocol):
    impl = getattr(cls, name, None)
    assert callable(impl), f"{cls.__name__} lacks {name}"
    proto = getattr(protocol, name)
    assert _params(impl) == _params(proto), (
        f"{cls.__name__}.{name}{inspect.signature(impl)} != "
        f"{protocol.__name__}.{name}{inspect.signature(proto)}"
    )


@pytest.mark.parametrize("protocol", [Backend, BackendProbes])
@pytest.mark.parametrize("cls", [CPUBackend, GPUBackend])
def test_both_backends_implement_every_method_with_the_protocols_signature(cls, protocol):
    for name in _protocol_methods(protocol):
        _check_implements(cls, name, protocol)
    assert cls.name in ("cpu", "gpu")


def test_both_backends_have_the_two_phase_level_dask_uses():
    for cls in (CPUBackend, GPUBackend):
        for name in TWO_PHASE:
            _check_implements(cls, name, Backend)


def test_split_plan_starts_with_the_compiled_decisions():
    # CPUBackend.advance_level passes a plan's first fields to the compiled level by position
    from gpufs.backends.cpu._args import Decisions

    assert SplitPlan._fields[: len(Decisions._fields)] == Decisions._fields


# --- the engine calls no probe ------------------------------------------------------------------

_PROBE_CALL = re.compile(r"\b(\w+)\.(" + "|".join(sorted(PROBES)) + r")\(")
#: Array modules, whose functions of the same names (``np.partition``) are no probes.
_ARRAY_MODULES = {"np", "numpy", "xp", "cp", "cupy"}


def _probe_calls(text):
    return [name for receiver, name in _PROBE_CALL.findall(text) if receiver not in _ARRAY_MODULES]


#: Engine modules that still call a probe, with the reason; remove a name when its call goes.
KNOWN_PROBE_CALLS = {
    # exact k's fill (selection_filled_): one root histogram per output of the finished
    # model, once per fit, scanned on the host; the level step has no "root gains of every
    # feature" call to use instead
    "gpufs/selectors/_exact_k.py",
}


def _engine_sources():
    """(path, text) of every module outside the backends (and the CUDA kernels)."""
    for dirpath, _, files in os.walk(os.path.join(ROOT, "gpufs")):
        rel = os.path.relpath(dirpath, ROOT).replace(os.sep, "/")
        if rel.startswith(("gpufs/backends", "gpufs/cuda_kernels")):
            continue
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    yield f"{rel}/{f}", fh.read()


def test_the_engine_calls_no_probe():
    sources = dict(_engine_sources())
    assert "gpufs/engine/grower.py" in sources and "gpufs/engine/boosting.py" in sources
    calls = {path: _probe_calls(text) for path, text in sources.items()}
    found = {path for path, names in calls.items() if names}
    assert found <= KNOWN_PROBE_CALLS, {p: calls[p] for p in found - KNOWN_PROBE_CALLS}
    assert not KNOWN_PROBE_CALLS - found, "KNOWN_PROBE_CALLS lists a module that calls none"


def test_the_probe_pattern_finds_a_call():
    assert _probe_calls("h = self.backend.histograms(Xb, gh)") == ["histograms"]
    assert _probe_calls("left = be.partition(Xb, rows)") == ["partition"]
    assert not _probe_calls("np.partition(a, 3); xp.partition(a, 3); s.partitions(x)")


def test_cpu_backend_is_a_backend():
    be = get_backend("cpu")
    assert isinstance(be, Backend) and isinstance(be, CPUBackend)
    assert isinstance(be, BackendProbes)
    assert be.xp is np and be.name == "cpu"


def test_get_backend_rejects_an_unknown_device():
    with pytest.raises(ValueError, match="unknown device 'tpu'; expected 'cpu' or 'gpu'"):
        get_backend("tpu")


def test_cpu_array_placement():
    be = CPUBackend()
    a = np.arange(3.0)
    assert be.owns(a) and not be.owns([1.0, 2.0]) and not be.owns(3.0)
    assert be.to_device(a) is a
    b = be.to_device([1, 2])
    assert isinstance(b, np.ndarray) and b.tolist() == [1, 2]
    assert be.synchronize() is None


def test_binning_refuses_x_on_another_device():
    bm = BinMapper(4).fit(np.arange(12.0).reshape(6, 2))

    class OtherDevice(CPUBackend):
        name = "elsewhere"

        def owns(self, a):
            return False

    with pytest.raises(
        ValueError,
        match="X is on a different device from the elsewhere backend: move it there first",
    ):
        bm.transform(np.zeros((2, 2)), OtherDevice())


# --- no device branches outside the backends and _device ----------------------------------------

_BRANCH = re.compile(
    r"device [!=]= \"(cpu|gpu)\"|\.name [!=]= \"(cpu|gpu)\"|"
    r"\bxp is (not )?np\b|get_namespace\(\"gpu\"\)"
)


def test_no_device_branches_outside_the_backends_and_device_module():
    found = []
    for folder in ("gpufs", "cuda_kernels"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                if (
                    not f.endswith(".py")
                    or rel.startswith(os.path.join("gpufs", "backends"))
                    or rel
                    in (
                        os.path.join("gpufs", "_device.py"),
                        os.path.join("gpufs", "cli", "__init__.py"),
                    )
                ):
                    continue
                with open(path) as fh:
                    for no, line in enumerate(fh, 1):
                        code = line.split("#")[0]
                        if _BRANCH.search(code):
                            found.append(f"{rel}:{no}: {line.strip()}")
    assert not found, "device branches:\n" + "\n".join(found)


# --- SplitInfo and best_splits ------------------------------------------------------------------


def _split(n_bins, **kw):
    base = dict(
        g_scale=1.0,
        h_scale=1.0,
        reg_lambda=0.0,
        gain_divisor=1.0,
        min_child_weight=1e-3,
        min_split_gain=0.0,
    )
    base.update(kw)
    return SplitParams(n_bins=np.asarray(n_bins, np.int32), **base)


def _one_node_hist():
    """One node, 4 rows with gradients (-1, -1, +1, +1) and unit hessians (scale 1).

    Feature 0 puts them in bins (0, 0, 1, 1): the split 'bin <= 0' separates the signs,
    gain = 1/2 (G_L^2/H_L + G_R^2/H_R - G^2/H) = 1/2 (4/2 + 4/2 - 0) = 2.
    Feature 1 puts them in bins (0, 1, 0, 1): each child has G = 0, gain 0.
    """
    hist = np.zeros((1, 2, 256, 2), np.int64)
    for b0, b1, g in ((0, 0, -1), (0, 1, -1), (1, 0, 1), (1, 1, 1)):
        hist[0, 0, b0] += (g, 1)
        hist[0, 1, b1] += (g, 1)
    return hist


def test_find_splits_hand_computed_case():
    res = CPUBackend().find_splits(
        _one_node_hist(),
        np.array([0]),
        np.array([4]),
        np.zeros(2),
        np.ones(2, bool),
        _split([2, 2]),
    )
    assert isinstance(res, SplitInfo)
    assert res.feature.tolist() == [0] and res.feature.dtype == np.int32
    assert res.bin.tolist() == [0] and res.bin.dtype == np.int32
    assert res.missing_left.tolist() == [False] and res.missing_left.dtype == np.bool_
    assert res.gain.tolist() == [2.0] and res.score.tolist() == [2.0]
    assert res.g_left.tolist() == [-2] and res.h_left.tolist() == [2]
    assert res.g_left.dtype == res.h_left.dtype == np.int64


def test_find_splits_penalty_lambda_divisor_and_allowed():
    hist = _one_node_hist()
    g, h = np.array([0]), np.array([4])
    be = CPUBackend()
    # lambda = 1: 1/2 (4/3 + 4/3) = 4/3; divided by 2 and minus the penalty 0.5 in the score
    res = be.find_splits(
        hist,
        g,
        h,
        np.array([0.5, 0.0]),
        np.ones(2, bool),
        _split([2, 2], reg_lambda=1.0, gain_divisor=2.0),
    )
    assert res.feature.tolist() == [0]
    assert res.gain[0] == pytest.approx(4 / 3, rel=1e-15)
    assert res.score[0] == pytest.approx(4 / 3 / 2 - 0.5, rel=1e-15)
    # feature 0 not allowed: feature 1's split (gain 0) is the best left
    res = be.find_splits(hist, g, h, np.zeros(2), np.array([False, True]), _split([2, 2]))
    assert res.feature.tolist() == [1] and res.gain.tolist() == [0.0]
    # min_child_weight above every child's hessian: no valid split anywhere
    res = be.find_splits(
        hist, g, h, np.zeros(2), np.ones(2, bool), _split([2, 2], min_child_weight=3.0)
    )
    assert res.feature.tolist() == [-1] and res.score.tolist() == [-np.inf]
    assert res.gain.tolist() == [0.0] and res.g_left.tolist() == [0]


def test_best_splits_takes_the_first_maximum_over_allowed_features():
    score = np.array([[1.0, 3.0, 3.0], [-np.inf, -np.inf, -np.inf], [5.0, 4.0, 2.0]])
    gain = score * 10
    ints = [np.arange(9, dtype=np.int64).reshape(3, 3) + 100 * j for j in range(4)]
    ints[1] = np.array([[0, 1, 0], [0, 0, 0], [1, 0, 1]], np.int64)
    res = best_splits(np.array([True, True, True]), score, gain, *ints)
    assert res.feature.tolist() == [1, -1, 0]  # tie 3.0 / 3.0: the lower feature
    assert res.score.tolist() == [3.0, -np.inf, 5.0]
    assert res.gain.tolist() == [30.0, 0.0, 50.0]
    assert res.bin.tolist() == [1, 0, 6]
    assert res.missing_left.tolist() == [True, False, True]
    assert res.g_left.tolist() == [201, 0, 206] and res.h_left.tolist() == [301, 0, 306]
    res = best_splits(np.array([False, True, True]), score, gain, *ints)
    assert res.feature.tolist() == [1, -1, 1]


def test_level_result_is_the_grower_record():
    from gpufs.engine import grower

    assert grower.LevelResult is LevelResult and grower.SplitParams is SplitParams


# --- the task rule ------------------------------------------------------------------------------


@pytest.mark.parametrize("count,n", [(0, 1), (1, 1), (7, 3), (10, 4), (1000, 7), (5, 5)])
def test_task_bounds_tile_a_segment_in_near_equal_runs(count, n):
    start = 11
    runs = [_tasks.task_bounds(start, count, n, i) for i in range(n)]
    assert runs[0][0] == start and runs[-1][1] == start + count
    assert all(runs[i][1] == runs[i + 1][0] for i in range(n - 1))
    sizes = [hi - lo for lo, hi in runs]
    assert max(sizes) - min(sizes) <= 1


def test_task_counts_of_the_two_devices():
    assert [_tasks.cpu_task_count(c, 10, 4) for c in (0, 5, 10, 25, 39, 1000)] == [1, 1, 1, 2, 3, 4]
    assert [_tasks.gpu_task_count(c, 10) for c in (0, 5, 10, 25, 39, 1000)] == [0, 1, 1, 3, 4, 100]
    # the host calls them on arrays too
    np.testing.assert_array_equal(_tasks.gpu_task_count(np.array([0, 11, 20]), 10), [0, 2, 2])


@pytest.mark.parametrize("threads,rows_per_task", [(1, 4), (2, 4), (3, 1), (8, 1000)])
def test_cpu_task_table(threads, rows_per_task):
    be = CPUBackend(n_threads=threads, rows_per_task=rows_per_task)
    start = np.array([0, 9, 9, 30], np.int64)
    count = np.array([9, 0, 21, 4], np.int64)
    t_seg, t_lo, t_hi = be.task_table(start, count)
    for s in range(4):
        mine = t_seg == s
        lo, hi = t_lo[mine], t_hi[mine]
        want = _tasks.cpu_task_count(count[s], rows_per_task, 4 * threads if threads > 1 else 1)
        assert mine.sum() == want
        assert lo[0] == start[s] and hi[-1] == start[s] + count[s]
        np.testing.assert_array_equal(lo[1:], hi[:-1])
    assert (np.diff(t_seg) >= 0).all()


@pytest.mark.parametrize("method", ["round_gradients", "gradients", "loss_terms"])
def test_an_objective_without_a_kernel_is_refused(method):
    raw, y = np.zeros((3, 1)), np.zeros(3)
    with pytest.raises(
        ValueError,
        match=r"no kernel for objective 'poisson'; expected one of "
        r"\[.*'logistic'.*\]",
    ):
        getattr(CPUBackend(), method)("poisson", raw, y)
