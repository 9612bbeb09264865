"""The threads gpufs's CPU kernels run on: numba's threading layer and ``n_jobs``.

Owns the choice of numba's threading layer (made once, before the first parallel kernel runs)
and the per-fit thread limit that implements the estimators' ``n_jobs``.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import threading

from ._warnings import warn_from_caller

_configured = False
_lock = threading.Lock()


def _tbb_library_candidates():
    """Paths where the ``tbb`` wheel may have put ``libtbb.so.12`` / ``libtbb.12.dylib``."""
    names = ("libtbb.so.12", "libtbb.12.dylib", "tbb12.dll")
    paths = []
    try:
        from importlib import metadata

        for f in metadata.files("tbb") or ():
            if os.path.basename(str(f)) in names:
                paths.append(str(f.locate()))
    except Exception:
        pass
    for prefix in {sys.prefix, sys.base_prefix, os.path.expanduser("~/.local")}:
        for name in names:
            paths.append(os.path.join(prefix, "lib", name))
    return paths


def _load_tbb() -> bool:
    for path in _tbb_library_candidates():
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                continue
    return False


def configure() -> str:
    """Choose numba's threading layer (once per process); returns what was asked for.

    Must run before numba starts its thread pool (the first parallel kernel), which is when
    numba reads ``numba.config.THREADING_LAYER``; importing numba earlier is fine.
    """
    global _configured
    with _lock:
        if _configured:
            return _requested()
        _configured = True
        import numba

        # Loading the library chooses nothing; it lets numba find TBB in a virtual
        # environment also when the user's NUMBA_THREADING_LAYER asks for it ('tbb', or
        # 'safe' / 'threadsafe' / 'forksafe', which try TBB first).
        tbb_loaded = _load_tbb()
        if os.environ.get("NUMBA_THREADING_LAYER"):
            return _requested()
        if tbb_loaded:
            numba.config.THREADING_LAYER = "tbb"
        else:
            os.environ.setdefault("OMP_WAIT_POLICY", "passive")
            warn_from_caller(
                "gpufs could not load Intel TBB (pip install tbb); numba falls back to its "
                "default threading layer. With OpenMP, a fork() child of a process that "
                "already fitted cannot fit in parallel.",
                RuntimeWarning,
            )
        return _requested()


def _requested() -> str:
    import numba

    return str(numba.config.THREADING_LAYER)


def effective_n_jobs(n_jobs) -> int:
    """Threads for ``n_jobs``: None or -1 = every thread numba may use (all usable cores),
    -k = all but k - 1, a positive k = min(k, that). 0 is an error."""
    import numba

    n_max = int(numba.config.NUMBA_NUM_THREADS)
    if n_jobs is None:
        return n_max
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError(
            "n_jobs == 0 has no meaning; use None or -1 for all cores, or a "
            "positive number of threads."
        )
    if n_jobs < 0:
        return max(1, n_max + 1 + n_jobs)
    return min(n_jobs, n_max)


_active = threading.local()


def current_limit():
    """The threads of the innermost ``thread_limit`` block on this thread (what
    ``numba.get_num_threads()`` says inside it), or None outside every block. A thread-local
    read: ``numba.get_num_threads()`` takes a lock and costs microseconds, and the CPU backend
    asks several times per tree."""
    return getattr(_active, "n", None)


@contextlib.contextmanager
def thread_limit(n_jobs):
    """Run the block's numba kernels on at most ``effective_n_jobs(n_jobs)`` threads, one task
    per chunk (numba's settings are per calling thread: other threads are not affected).

    Nested blocks: ``n_jobs=None`` inside another block keeps the outer block's limit, so an
    estimator's ``n_jobs`` reaches the boosting loop and the forest that run inside its fit.
    """
    import numba

    configure()
    if n_jobs is None and getattr(_active, "depth", 0) > 0:
        yield numba.get_num_threads()
        return
    n = effective_n_jobs(n_jobs)
    old_n = numba.get_num_threads()
    old_chunk = numba.get_parallel_chunksize()
    numba.set_num_threads(n)
    numba.set_parallel_chunksize(1)
    _active.depth = getattr(_active, "depth", 0) + 1
    outer = getattr(_active, "n", None)
    _active.n = n
    try:
        yield n
    finally:
        _active.n = outer
        _active.depth -= 1
        numba.set_num_threads(old_n)
        numba.set_parallel_chunksize(old_chunk)


def honours_n_jobs(fit):
    """Decorator for an estimator's ``fit``: the whole fit (binning, trees, predictions of
    the validation set) runs under ``thread_limit(self.n_jobs)``."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        with thread_limit(getattr(self, "n_jobs", None)):
            return fit(self, *args, **kwargs)

    return wrapper
