"""GPU memory without a GPU: the rmm set-up keeps the user's resource, and running out of
device memory is a clear error that names the array, its size and what to do.

rmm and cupy are replaced by small fakes with the attributes gpufs uses, so the decision
logic runs here; the real allocation path is exercised by ``tests/test_gpu.py`` on a GPU.
"""

import sys
import types

import pytest

from gpufs import _device


class _CudaMR:
    pass


class _PoolMR:
    def __init__(self, upstream):
        self.upstream = upstream


class _ManagedMR:
    pass


def _fake_modules(monkeypatch, current):
    state = {"resource": current, "allocator": None}
    mr = types.SimpleNamespace(
        CudaMemoryResource=_CudaMR,
        PoolMemoryResource=_PoolMR,
        get_current_device_resource=lambda: state["resource"],
        set_current_device_resource=lambda r: state.__setitem__("resource", r),
    )
    rmm = types.ModuleType("rmm")
    rmm.mr = mr
    allocators = types.ModuleType("rmm.allocators")
    cupy_alloc = types.ModuleType("rmm.allocators.cupy")
    cupy_alloc.rmm_cupy_allocator = "rmm_cupy_allocator"
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(set_allocator=lambda a: state.__setitem__("allocator", a))
    for name, mod in (
        ("rmm", rmm),
        ("rmm.allocators", allocators),
        ("rmm.allocators.cupy", cupy_alloc),
        ("cupy", cupy),
    ):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(_device, "_RMM_DONE", False)
    monkeypatch.delenv("GPUFS_NO_RMM", raising=False)
    return state


def test_rmm_default_resource_becomes_a_pool(monkeypatch):
    default = _CudaMR()
    state = _fake_modules(monkeypatch, default)
    _device._setup_rmm_pool_once()
    assert isinstance(state["resource"], _PoolMR) and state["resource"].upstream is default
    assert state["allocator"] == "rmm_cupy_allocator"


@pytest.mark.parametrize("user_resource", [_PoolMR(_CudaMR()), _ManagedMR()])
def test_rmm_user_resource_is_kept(monkeypatch, user_resource):
    state = _fake_modules(monkeypatch, user_resource)
    _device._setup_rmm_pool_once()
    assert state["resource"] is user_resource
    assert state["allocator"] == "rmm_cupy_allocator"


def test_rmm_opt_out(monkeypatch):
    default = _CudaMR()
    state = _fake_modules(monkeypatch, default)
    monkeypatch.setenv("GPUFS_NO_RMM", "1")
    _device._setup_rmm_pool_once()
    assert state["resource"] is default and state["allocator"] is None
