"""The backend of one Dask shard (``gpufs.dask._shard.Shard``), by the fit's shard device.

A CPU shard keeps no node gain bounds and accumulates every bin (every shard must build the
same features' histograms for them to add up, and a shard's node totals are not the
cluster's); a GPU shard runs ``GPUBackend`` on its worker's current GPU, or says which worker
could not, and why.
"""

from __future__ import annotations

__all__ = ["shard_backend"]


def shard_backend(device):
    """A new backend for a shard on ``device`` ("cpu" or "gpu").

    Parameters
    ----------
    device : {"cpu", "gpu"}

    Returns
    -------
    CPUBackend or GPUBackend
    """
    if device == "gpu":
        from .gpu.backend import GPUBackend

        try:
            return GPUBackend()
        except Exception as exc:  # named for the driver: which worker, and why
            raise RuntimeError(
                f"gpufs.dask: device='gpu', but this worker cannot run the GPU "
                f"backend ({exc}); give each worker a GPU "
                f"(dask_cuda.LocalCUDACluster) or fit with device='cpu'."
            ) from exc
    from .cpu import CPUBackend

    return CPUBackend(gain_bounds="never", most_freq=False)
