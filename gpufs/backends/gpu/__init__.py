"""The GPU engine: the backend interface on device arrays, by cupy and the
numba.cuda kernels of ``cuda_kernels/``; mirrors ``backends/cpu/``.

``backend`` holds ``GPUBackend``; ``device`` (launches, memory, views, timers),
``workspace`` (a tree shape's device memory, a tree's state), ``level`` (a Dask
shard's level step by the driver's decisions), ``graphs`` (a level as a CUDA
graph), ``group_testing`` (GT-GBM's group tests), ``launch_rules`` (what a real
CUDA launch accepts). Nothing here imports ``backends/cpu/``: what both need lives
in ``gpufs/rules/``, ``gpufs._types`` and ``backends/base``. Importing this
package imports no cupy.
"""

#: what ``gpufs.backends.gpu`` offered as a module, before it became this package
_PUBLIC = {
    "GPUBackend": "backend",
    "DeviceBinnedMatrix": "workspace",
    "GPUOutOfMemoryError": "device",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    """``GPUBackend``, ``GPUOutOfMemoryError``, ``DeviceBinnedMatrix`` on first use
    (importing the package imports no cupy)."""
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
