"""Work around a race in numba-cuda's CUDA simulator and its busy-polling block manager.

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
``apply_scheduler()`` replaces the simulator's busy-polling block manager with an
event-driven one (same barrier rules, a fraction of the CPU). ``enter(runner)`` is every
simulator file's start: skip unless the simulator is on, then both.
"""

import os
import sys
import threading

import numpy as np

_LOCK = threading.Lock()


def enter(runner):
    """Start a simulator file (``tests/_cudasim_*.py``): skip the whole module unless
    ``NUMBA_ENABLE_CUDASIM=1`` (it must be set before numba is imported, so the file runs in
    a pytest process of its own, started by the test file ``runner``), then ``apply()`` and
    ``apply_scheduler()``. Python's default GIL switch interval (5 ms) is kept: with the
    event-driven block manager a barrier no longer waits for a polling thread, and a shorter
    interval (0.1 ms, which the busy-polling manager needed) only adds switching (the
    kernels' simulator file: 138 s of CPU against 363 s before, whole file)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        import pytest

        pytest.skip(
            f"needs NUMBA_ENABLE_CUDASIM=1 before numba is imported; run through {runner}",
            allow_module_level=True,
        )
    apply()
    apply_scheduler()


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


def apply_scheduler():
    """Replace the simulator's busy-polling block manager with one that sleeps until every
    live thread of the block waits at a barrier or has ended (idempotent).

    numba-cuda's ``BlockManager.run`` loops over the block's live threads, calling
    ``is_alive()`` on each, until all have ended: one more thread competing for the GIL, doing
    nothing useful, while the simulated threads run. Here each thread counts itself, under one
    condition variable per block, as blocked at ``syncthreads()`` or done at its end; the last
    one to arrive wakes the manager, which releases the barrier: the original's rule (a thread
    that ended does not hold a barrier back). A thread's exception wakes it at once; it aborts
    the other threads and re-raises, as the original does."""
    from numba.cuda.simulator import kernel

    manager_cls, thread_cls = kernel.BlockManager, kernel.BlockThread
    if getattr(manager_cls, "_gpufs_event_driven", False):
        return
    thread_run = thread_cls.run

    def arrive(manager, blocked):
        with manager._gpufs_cond:
            if blocked:
                manager._gpufs_blocked += 1
            else:
                manager._gpufs_done += 1
            if manager._gpufs_blocked + manager._gpufs_done == manager._gpufs_n:
                manager._gpufs_cond.notify()

    def syncthreads(self):
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        self.syncthreads_blocked = True
        arrive(self._manager, blocked=True)
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def run_thread(self):
        try:
            thread_run(self)  # the original: runs the kernel, keeps its exception
        finally:
            if self.exception is not None:
                with self._manager._gpufs_cond:
                    self._manager._gpufs_failed = True
                    self._manager._gpufs_cond.notify()
            arrive(self._manager, blocked=False)

    def run_block(self, grid_point, *args):
        cond = self._gpufs_cond = threading.Condition()
        self._gpufs_blocked = self._gpufs_done = 0
        self._gpufs_failed = False
        threads = []
        for block_point in np.ndindex(*self._block_dim):

            def target():
                self._f(*args)

            threads.append(thread_cls(target, self, grid_point, block_point, self._debug))
        self._gpufs_n = len(threads)
        with cond:  # no thread reports before the manager's first wait()
            for t in threads:
                t.start()
            while True:
                while not self._gpufs_failed and self._gpufs_blocked + self._gpufs_done < len(
                    threads
                ):
                    cond.wait()
                for t in threads:
                    if t.exception:
                        for other in threads:
                            other.abort = True
                            other.syncthreads_blocked = False
                            other.syncthreads_event.set()
                        raise t.exception[0].with_traceback(t.exception[1])
                if self._gpufs_done == len(threads):
                    break
                self._gpufs_blocked = 0
                for t in threads:
                    if t.syncthreads_blocked:
                        t.syncthreads_blocked = False
                        t.syncthreads_event.set()
        for t in threads:
            t.join()

    thread_cls.syncthreads = syncthreads
    thread_cls.run = run_thread
    manager_cls.run = run_block
    manager_cls._gpufs_event_driven = True
