"""Backends: one class per device implementing the engine's interface
(``gpufs.backends.base.Backend``).

``get_backend("cpu")`` -> ``CPUBackend`` (numba on the host), ``get_backend("gpu")`` ->
``GPUBackend`` (numba.cuda kernels on cupy arrays). The GPU module is imported only when asked
for, so CPU-only installs never import cupy.
"""


def get_backend(device: str):
    """A new backend for a resolved device.

    Parameters
    ----------
    device : {"cpu", "gpu"}

    Returns
    -------
    CPUBackend or GPUBackend
        An implementation of ``gpufs.backends.base.Backend``.
    """
    if device == "cpu":
        from .cpu import CPUBackend

        return CPUBackend()
    if device == "gpu":
        from .gpu.backend import GPUBackend

        return GPUBackend()
    raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'gpu'")
