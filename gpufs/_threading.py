"""The threads gpufs's CPU kernels run on: numba's threading layer and ``n_jobs``.

Owns the choice of numba's threading layer (made once, before the first parallel kernel runs),
the per-fit thread limit that implements the estimators' ``n_jobs``, and independent fits of
one selection run side by side on Python threads (``run_side_by_side``).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

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


#: Layers that let several Python threads launch parallel kernels at once (numba's
#: "threadsafe" and "forksafe" choose TBB or OpenMP; its workqueue layer aborts the process).
_THREAD_SAFE_LAYERS = ("tbb", "omp", "safe", "threadsafe", "forksafe")


def layer_is_thread_safe() -> bool:
    """Whether numba's threading layer lets Python threads launch parallel kernels at once:
    the one asked for (``configure``), or the one numba took (where it chose among all,
    known only once a parallel kernel has run: until then, False)."""
    import numba

    configure()
    if str(numba.config.THREADING_LAYER) in _THREAD_SAFE_LAYERS:
        return True
    try:
        return numba.threading_layer() in ("tbb", "omp")
    except ValueError:  # no parallel kernel yet: the layer is not chosen
        return False


#: Independent fits of at most this many (row, feature) cells each run side by side
#: (``run_side_by_side``; exact k's ranking folds, ``stability_rounds``' refits): 16 Mi cells,
#: 16 MiB of binned rows a fit, so the fits held at once stay small beside the table.
SIDE_BY_SIDE_MAX_CELLS = 1 << 24


class Stopped(Exception):
    """Raised inside a task of ``run_side_by_side`` to end it early, because another task
    failed or the caller was interrupted."""


def run_side_by_side(tasks, n_threads):
    """``[task(stop) for task in tasks]``, the tasks run side by side on Python threads.

    For independent fits too small to keep the thread pool busy (exact k's cross-fitted
    ranking fits): their per-tree Python and their compiled levels (which release the GIL)
    overlap, where one fit at a time would leave all threads but one idle.

    Parameters
    ----------
    tasks : sequence of callable
        Each takes ``stop``, a ``threading.Event`` set when the others fail or the caller is
        interrupted: a task checks it at safe points (``stop.is_set()``) and raises
        :class:`Stopped`. A task must not share mutable state with another (a backend's
        scratch buffers: give each its own backend).
    n_threads : int
        Threads of the whole run: ``min(n_threads, len(tasks))`` tasks at a time, each under
        ``thread_limit`` of ``n_threads // that``. One task at a time, on the calling thread
        and its limit, for ``n_threads`` 1 or a threading layer that is not thread-safe.

    Returns
    -------
    list
        The tasks' results, in their order. The first task's exception (in task order,
        :class:`Stopped` aside) is raised once every running task has ended.
    """
    stop = threading.Event()
    workers = min(int(n_threads), len(tasks))
    if workers <= 1 or not layer_is_thread_safe():
        return [task(stop) for task in tasks]
    inner = max(1, int(n_threads) // workers)

    def run(task):
        with thread_limit(inner):
            return task(stop)

    with ThreadPoolExecutor(workers, thread_name_prefix="gpufs-side") as pool:
        futures = [pool.submit(run, task) for task in tasks]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:  # the caller interrupted: end the tasks at their next check
            _stop_all(stop, futures)
            raise
        if any(f.done() and f.exception() is not None for f in futures):
            _stop_all(stop, futures)
            wait(futures)
            errors = [
                f.exception() for f in futures if not f.cancelled() and f.exception() is not None
            ]
            raise next((e for e in errors if not isinstance(e, Stopped)), errors[0])
        return [f.result() for f in futures]


def _stop_all(stop, futures):
    """Tasks not started never start; running ones end at their next check of ``stop``."""
    stop.set()
    for f in futures:
        f.cancel()


def honours_n_jobs(fit):
    """Decorator for an estimator's ``fit``: the whole fit (binning, trees, predictions of
    the validation set) runs under ``thread_limit(self.n_jobs)``."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        with thread_limit(getattr(self, "n_jobs", None)):
            return fit(self, *args, **kwargs)

    return wrapper
