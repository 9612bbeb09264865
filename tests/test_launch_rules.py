"""The launch validator (``gpufs.backends.gpu.launch_rules``) and the GPU stack check: what a real
GPU refuses, caught on a box without one."""

import numpy as np
import pytest

from gpufs._device import check_gpu_stack
from gpufs.backends.gpu.launch_rules import (
    DEFAULT_DYNAMIC_SHARED,
    MAX_OPTIN_SHARED,
    LaunchError,
    check_launch,
    launch_geometry,
)


def test_numpy_int_grid_is_refused_as_the_h200_refused_it():
    # The exact geometry that failed 19 GPU tests on an H200 and passed under the simulator.
    with pytest.raises(LaunchError, match=r"grid must be an int.*np\.int64\(20\)"):
        check_launch("histogram_kernel", (np.int64(20), 2, 1), 16)


@pytest.mark.parametrize(
    "grid,block",
    [(np.int32(4), 32), (4, np.int64(32)), ((4, np.int16(2)), 32), (4.0, 32), ((1, 2, 3, 4), 32)],
)
def test_non_int_geometries_are_refused(grid, block):
    with pytest.raises(LaunchError, match="must be an int"):
        check_launch("k", grid, block)


@pytest.mark.parametrize(
    "grid,block,match",
    [
        (0, 32, r"grid\[0\] = 0"),
        ((4, 0), 32, r"grid\[1\] = 0"),
        (4, 0, r"block\[0\] = 0"),
        ((1, 65536), 32, r"grid\[1\] = 65536"),
        (2**31, 32, r"grid\[0\]"),
        (4, 2048, r"block\[0\] = 2048"),
        (4, (64, 32), "2048 threads"),
        (4, (1, 1, 65), r"block\[2\]"),
    ],
)
def test_limits(grid, block, match):
    with pytest.raises(LaunchError, match=match):
        check_launch("k", grid, block)


def test_block_past_the_kernels_declared_largest_is_refused():
    # ``gpu.KERNEL_MAX_THREADS``: the block the SASS test checked the kernel's registers for
    check_launch("partition_count_kernel", 1, 512, max_threads=512)
    with pytest.raises(LaunchError, match="1024 threads, more than the 512 its registers"):
        check_launch("partition_count_kernel", 1, 1024, max_threads=512)


def test_shared_memory_limits():
    check_launch("k", 1, 32, DEFAULT_DYNAMIC_SHARED)
    with pytest.raises(LaunchError, match="without opting in"):
        check_launch("k", 1, 32, DEFAULT_DYNAMIC_SHARED + 4)
    check_launch("k", 1, 32, 200 * 1024, optin_shared=MAX_OPTIN_SHARED)
    with pytest.raises(LaunchError, match="over the 204800 B"):
        check_launch("k", 1, 32, 200 * 1024 + 4, optin_shared=200 * 1024)
    with pytest.raises(LaunchError, match="largest device limit"):
        check_launch("k", 1, 32, 0, optin_shared=MAX_OPTIN_SHARED + 1)
    with pytest.raises(LaunchError, match="non-negative int"):
        check_launch("k", 1, 32, np.int64(16))


def test_launch_geometry_gives_what_the_launcher_takes():
    grid, block = launch_geometry((np.int64(20), np.int32(2)), np.uint16(128))
    assert grid == (20, 2, 1) and block == (128, 1, 1)
    assert all(type(v) is int for v in grid + block)
    check_launch("k", grid, block)  # accepted once normalized


def test_gpu_stack_check_names_the_fix():
    def broken(name):  # what numba-cuda 0.30.4 raises under numpy 2.5
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    with pytest.raises(RuntimeError, match=r"row_stack.*numpy<2\.5.*device='cpu'"):
        check_gpu_stack(importer=broken)
    seen = []
    check_gpu_stack(importer=seen.append)  # a working pair: nothing raised
    assert seen == ["numba.cuda.np.arrayobj"]


def test_gpu_extra_keeps_numpy_below_2_5():
    import pathlib

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    root = pathlib.Path(__file__).resolve().parents[1]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["gpu"]
    assert any(r.replace(" ", "").startswith("numpy") and "<2.5" in r for r in extra)


def test_numba_cudas_low_occupancy_warning_is_quiet():
    # On an H100 every GPU fit printed this warning dozens of times (the small levels at the
    # bottom of a tree); the message is numba-cuda 0.30.4's, highlighted as it prints it.
    import warnings

    from gpufs.backends.gpu.backend import quiet_low_occupancy_warnings

    msg = (
        "\x1b[1mGrid size 8 will likely result in GPU under-utilization due to low "
        "occupancy.\x1b[0m"
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_low_occupancy_warnings()
        warnings.warn_explicit(
            msg, RuntimeWarning, "dispatcher.py", 748, module="numba_cuda.numba.cuda.dispatcher"
        )
        warnings.warn_explicit(
            "another warning",
            RuntimeWarning,
            "dispatcher.py",
            748,
            module="numba_cuda.numba.cuda.dispatcher",
        )
    assert [str(w.message) for w in seen] == ["another warning"]
