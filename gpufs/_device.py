"""Device resolution and the array namespace.

Owns: turning ``device="auto" | "cpu" | "gpu"`` into a concrete device, telling where an
array or input lives (``device_of``, ``namespace_of``), giving the array namespace for a device
(``numpy`` or ``cupy``) and its sparse module, moving arrays between host and device, and
routing cupy's allocations through rmm (a pool only when the user has not set a resource).
cupy is imported lazily: ``import gpufs`` never imports cupy. Every other module asks these
functions (or a backend) instead of testing the device itself.
"""

from __future__ import annotations

import functools
import importlib
import os

import numpy as np

VALID_DEVICES = ("auto", "cpu", "gpu")


@functools.lru_cache(maxsize=1)
def _cupy_or_none():
    """cupy if it imports and sees at least one GPU, else None (cached)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        # The simulator has no real device for cupy; the GPU backend runs on numpy arrays there.
        return None
    try:
        import cupy
    except Exception:
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:
        return None
    return cupy


def gpu_available() -> bool:
    """True when cupy imports and sees a CUDA device."""
    return _cupy_or_none() is not None


def resolve_device(device) -> str:
    """Map a user's ``device`` argument to ``"cpu"`` or ``"gpu"``.

    ``"auto"`` picks the GPU when cupy sees one and the CPU otherwise, silently.
    ``"gpu"`` without a usable GPU raises a RuntimeError that says why.
    """
    if device is None:
        device = "auto"
    if not isinstance(device, str) or device.lower() not in VALID_DEVICES:
        raise ValueError(f"device must be one of {VALID_DEVICES}, got {device!r}")
    device = device.lower()
    if device == "auto":
        return "gpu" if gpu_available() else "cpu"
    if device == "gpu" and not gpu_available():
        raise RuntimeError(
            "device='gpu' was requested but no CUDA GPU is usable: cupy is not installed or sees "
            "no device. Install the GPU extra (pip install '.[gpu]' in the gpufs checkout) on a "
            "machine with an NVIDIA GPU, or use device='cpu' / device='auto'."
        )
    return device


#: The module of numba-cuda whose import fails under a numpy it does not support (numba-cuda
#: 0.30.4 registers ``np.row_stack``, which numpy 2.5 removed): importing it at GPU start turns
#: a failure deep inside the first kernel compile into one clear error.
_NUMBA_CUDA_PROBE = "numba.cuda.np.arrayobj"


def check_gpu_stack(importer=importlib.import_module) -> None:
    """Raise a RuntimeError naming the fix when the installed numba-cuda cannot compile
    kernels under the installed numpy.

    On Python 3.12, ``pip install "gpufs[gpu]"`` could pair numba-cuda 0.30.4 (the newest)
    with numpy 2.5, which numba 0.68 allows: every kernel compile then fails with
    ``module 'numpy' has no attribute 'row_stack'``. The ``gpu`` extra now keeps numpy below
    2.5; this check catches an environment made another way. ``importer`` is for tests.
    """
    try:
        importer(_NUMBA_CUDA_PROBE)
    except AttributeError as e:
        try:
            from importlib.metadata import version

            nc = version("numba-cuda")
        except Exception:
            nc = "unknown version"
        raise RuntimeError(
            f"the installed numba-cuda ({nc}) cannot compile GPU kernels under numpy "
            f"{np.__version__}: {e}. Install a numpy it supports, "
            f"python -m pip install 'numpy<2.5' (the gpu extra pins this), or a numba-cuda "
            f"release that supports numpy {np.__version__}; or use device='cpu'."
        ) from e


def get_namespace(device: str):
    """The array module for a resolved device: numpy for "cpu", cupy for "gpu"."""
    if device == "gpu":
        cp = _cupy_or_none()
        if cp is None:
            raise RuntimeError("the GPU namespace was asked for but cupy sees no GPU")
        _setup_rmm_pool_once()
        return cp
    return np


def is_cupy_array(a) -> bool:
    """True for a cupy ndarray, without importing cupy."""
    return type(a).__module__.split(".")[0] == "cupy"


def namespace_of(a):
    """numpy or cupy, whichever owns ``a`` (cupy's allocations routed through rmm first, as
    ``get_namespace`` does)."""
    if is_cupy_array(a):
        import cupy

        _setup_rmm_pool_once()
        return cupy
    return np


def device_of(X) -> str:
    """Where an input lives: "gpu" for a cupy array or a cudf frame / series, else "cpu".

    Predictions and transforms run there (cupy in, cupy out).
    """
    if is_cupy_array(X) or type(X).__module__.split(".")[0] == "cudf":
        return "gpu"
    return "cpu"


def like(a, ref):
    """``a`` (a host array, e.g. column indices) in the namespace of ``ref``: a device copy
    when ``ref`` is a cupy array, ``a`` itself otherwise."""
    return namespace_of(ref).asarray(a) if is_cupy_array(ref) else a


def input_float_dtype(a):
    """The float dtype the input door gives table ``a``: float64 on the host (float32 ->
    float64 is exact, so the bins are the same and the kernels compiled once serve every
    input dtype); a float32 table on the GPU keeps float32 (device memory)."""
    return a.dtype if is_cupy_array(a) and a.dtype == np.float32 else np.float64


def is_host_namespace(xp) -> bool:
    """Whether the array module ``xp`` computes on the host (numpy)."""
    return xp is np


def to_host(a):
    """A numpy array (a copy from the device for cupy arrays; the array itself otherwise)."""
    if a is None:
        return None
    if is_cupy_array(a):
        return a.get()
    return np.asarray(a)


def to_device(a, device: str):
    """``a`` on the given resolved device ("cpu" -> numpy, "gpu" -> cupy)."""
    if a is None:
        return None
    if device == "gpu":
        return get_namespace("gpu").asarray(a)
    return to_host(a)


_RMM_DONE = False


def _setup_rmm_pool_once() -> None:
    """Route cupy's allocations through rmm when rmm is installed (never managed memory),
    keeping the memory resource the user chose.

    rmm's current device resource is left as it is when the user has set one (a pool, a
    managed-memory resource, a limiting or statistics adaptor, ...): only rmm's default, a
    plain ``CudaMemoryResource``, is replaced by a pool on top of it. Set ``GPUFS_NO_RMM=1`` to
    keep cupy's own allocator.
    """
    global _RMM_DONE
    if _RMM_DONE:
        return
    _RMM_DONE = True
    if os.environ.get("GPUFS_NO_RMM") == "1":
        return
    try:
        import rmm
        from rmm.allocators.cupy import rmm_cupy_allocator
    except Exception:
        return
    import cupy

    current = rmm.mr.get_current_device_resource()
    if type(current) is rmm.mr.CudaMemoryResource:  # rmm's default: nobody chose one
        rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(current))
    cupy.cuda.set_allocator(rmm_cupy_allocator)


def shard_device(device, refuse=None) -> str:
    """The device of a Dask fit's shards for an estimator's ``device``: "gpu" for "gpu", else
    "cpu" ("auto" included: the driver does not see the workers' devices). ``refuse``: why
    GPU shards cannot run this fit (raised as a ValueError for ``device="gpu"``), or None."""
    if device != "gpu":
        return "cpu"
    if refuse:
        raise ValueError(refuse)
    return "gpu"


def kept_device(device, a) -> str:
    """Where a fit on ``device`` ("cpu" or "gpu") keeps the input ``a``: on the GPU when the
    fit is there and ``a`` is there already (cupy, or a cudf frame), else on the host."""
    on_gpu = is_cupy_array(a) or type(a).__module__.split(".")[0] in ("cudf", "dask_cudf")
    return "gpu" if device == "gpu" and on_gpu else "cpu"
