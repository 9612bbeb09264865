"""Dask worker processes forked from a forkserver that imported gpufs once.

``LocalCluster(processes=True)`` spawns each worker: a fresh interpreter that imports
distributed, numba and gpufs itself, about 3 s of CPU before its first task on the 2-core CI
box (4.7 s to the end of a first small fit, 1.7 s from a forkserver that preloaded gpufs).
The forkserver is itself a fresh interpreter, not a fork of pytest, and its gpufs has run
nothing: what a worker holds of a fit still comes to it only through Dask.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver


@contextlib.contextmanager
def workers_from_a_forkserver():
    """While open, Dask's nannies start workers from a forkserver that preloaded gpufs (a
    killed worker's restart reads the setting when it happens: keep it open that long)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():  # Windows: spawn
        yield
        return
    import dask
    from distributed.utils import get_mp_context

    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        ctx = get_mp_context()  # distributed's own preload list (set on its first call)
        server = multiprocessing.forkserver._forkserver
        preload = list(getattr(server, "_preload_modules", None) or ["distributed"])
        extra = [m for m in ("gpufs", "gpufs.dask") if m not in preload]
        ctx.set_forkserver_preload(preload + extra)
        yield
