"""Work around a race in numba-cuda's CUDA simulator, for the tests that run kernels in it.

``numba.cuda.simulator.kernelapi.FakeCUDAShared.array`` (numba-cuda 0.30) finds a block's
static shared array by the caller's source line with an unlocked check-then-set::

    res = self._allocations.get(caller)
    if res is None:
        res = np.empty(shape, dtype)
        self._allocations[caller] = res

The simulator runs the threads of a block as Python threads, so two threads can both miss and
each keep an array of its own: they then no longer share memory, and a block reduction or scan
silently loses the other threads' values. We saw it as a rare, load-dependent mismatch between
the CPU and the simulated split search (about 1 run in 5 under load, never on an idle machine).
Real GPUs have no such problem: shared memory is one allocation per block.

``apply()`` replaces the method with one that does the same lookup under a lock. Dynamic shared
memory (shape 0) is one buffer per block in the simulator already and is left as it is.
``enter(runner)`` is every simulator file's start: skip unless the simulator is on, then the
short GIL switch interval and ``apply()``.
"""

import os
import sys
import threading

_LOCK = threading.Lock()


def enter(runner):
    """Start a simulator file (``tests/_cudasim_*.py``): skip the whole module unless
    ``NUMBA_ENABLE_CUDASIM=1`` (it must be set before numba is imported, so the file runs in
    a pytest process of its own, started by the test file ``runner``), then set a short GIL
    switch interval and ``apply()``. The simulator's block manager busy-polls its threads; with
    the switch interval at 0.1 ms the simulated threads run instead of waiting 5 ms for the GIL
    at every barrier (10x faster)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        import pytest

        pytest.skip(
            f"needs NUMBA_ENABLE_CUDASIM=1 before numba is imported; run through {runner}",
            allow_module_level=True,
        )
    sys.setswitchinterval(1e-4)
    apply()


def apply():
    """Install the locked allocation (idempotent; only meaningful under the simulator)."""
    import numpy as np
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    cls = kernelapi.FakeCUDAShared
    if getattr(cls, "_gpufs_locked", False):
        return
    original = cls.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)  # the kernel line that asked, as the simulator keys it
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with _LOCK:
            res = self._allocations.get(caller)
            if res is None:
                res = np.empty(shape, dtype)
                self._allocations[caller] = res
        return res

    cls.array = array
    cls._gpufs_locked = True
