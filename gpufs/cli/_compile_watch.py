"""Compile time, told apart from run time: what the command line says on a cold kernel cache.

numba compiles each kernel on its first call and caches it on disk (``gpufs._numba_setup``).
``CompileWatch`` listens to numba's ``numba:compile`` event (sent only when a function is
compiled, not loaded from the cache), sums the seconds (nested compilations once) and prints
one notice once they pass ``NOTICE_AFTER_S``. numba-cuda's launcher sends no such event, so
compiling the ``cuda_kernels`` stays in a GPU fit's time.

A process-wide listener (:func:`install`) gives the library's own notice, once, on the
``gpufs`` logger at WARNING level (``logging.getLogger("gpufs").setLevel(logging.ERROR)``
silences it; quiet while a ``CompileWatch`` listens), and sums all compile time: :func:`clock`
is ``time.perf_counter`` less it, so ``fit_times_`` phases count no compilation.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time

#: The line printed at the first compilation.
NOTICE = "compiling kernels once (a minute or more); later runs start fast"
#: Seconds of compilation after which the notice is printed.
NOTICE_AFTER_S = 2.0


class CompileWatch:
    """Context manager: ``seconds`` spent compiling numba functions inside the block.

    Parameters
    ----------
    notice : callable or None, default=None
        Called with ``NOTICE`` once compilation has taken ``NOTICE_AFTER_S`` (None: print it
        on stderr).
    after : float or None, default=None
        Seconds of compilation before the notice (None: ``NOTICE_AFTER_S``).

    Attributes
    ----------
    seconds : float
        Time spent compiling so far.
    noticed : bool
        Whether the notice was given.
    """

    def __init__(self, notice=None, after=None):
        self.notice = notice
        self.after = NOTICE_AFTER_S if after is None else after
        self.seconds = 0.0
        self.noticed = False
        self._depth = 0
        self._start = 0.0
        self._timer = None
        self._lock = threading.Lock()
        self._listener = None

    def _notify(self):
        with self._lock:  # the timer's thread and the end of a compilation may both call
            if self.noticed:
                return
            self.noticed = True
        if self.notice is None:
            sys.stderr.write(NOTICE + "\n")
            sys.stderr.flush()
        else:
            self.notice(NOTICE)

    def _on_start(self, event):
        if self._depth == 0:
            self._start = time.perf_counter()
            if not self.noticed and self.after < math.inf:  # the first kernel alone may
                # compile for a minute: a timer gives the notice while it runs
                self._timer = threading.Timer(max(0.0, self.after - self.seconds), self._notify)
                self._timer.daemon = True
                self._timer.start()
        self._depth += 1

    def _on_end(self, event):
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._start
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self.seconds >= self.after:  # past the threshold before the timer ran
                self._notify()

    def __enter__(self):
        global _listening
        from numba.core import event

        _listening += 1
        watch = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                watch._on_start(ev)

            def on_end(self, ev):
                watch._on_end(ev)

        self._listener = _Listener()
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc):
        global _listening
        from numba.core import event

        _listening -= 1
        event.unregister("numba:compile", self._listener)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return False


#: CompileWatch blocks open now (the command line's): the library's notice stays quiet then.
_listening = 0
#: The logger of the library's notice.
logger = logging.getLogger("gpufs")


class _ProcessCompiles:
    """The process-wide ``numba:compile`` listener: all compile seconds (outermost
    compilations), and the library's one notice once gpufs's own kernels compiled for
    ``NOTICE_AFTER_S``."""

    def __init__(self):
        self.seconds = 0.0  # every compilation, for clock()
        self.gpufs_seconds = 0.0  # compilations of gpufs's functions, for the notice
        self.noticed = False
        self._depth = 0
        self._start = 0.0
        self._ours = False
        self._timer = None
        self._lock = threading.Lock()

    def _notify(self):
        with self._lock:
            if self.noticed or _listening:
                return
            self.noticed = True
        logger.warning("gpufs: %s", NOTICE)

    def on_start(self, ev):
        if self._depth == 0:
            self._start = time.perf_counter()
            func = getattr(getattr(ev.data, "get", lambda k: None)("dispatcher"), "py_func", None)
            self._ours = str(getattr(func, "__module__", "")).startswith("gpufs")
            after = NOTICE_AFTER_S
            if self._ours and not self.noticed and after < math.inf:
                self._timer = threading.Timer(max(0.0, after - self.gpufs_seconds), self._notify)
                self._timer.daemon = True
                self._timer.start()
        self._depth += 1

    def on_end(self, ev):
        self._depth -= 1
        if self._depth == 0:
            spent = time.perf_counter() - self._start
            self.seconds += spent
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._ours:
                self.gpufs_seconds += spent
                if self.gpufs_seconds >= NOTICE_AFTER_S:
                    self._notify()


_process = None
_install_lock = threading.Lock()


def install():
    """Start the process-wide listener (once; imports numba)."""
    global _process
    if _process is not None:
        return _process
    with _install_lock:
        if _process is None:
            from numba.core import event

            watch = _ProcessCompiles()

            class _Listener(event.Listener):
                def on_start(self, ev):
                    watch.on_start(ev)

                def on_end(self, ev):
                    watch.on_end(ev)

            event.register("numba:compile", _Listener())
            _process = watch
    return _process


def compile_seconds() -> float:
    """Seconds this process has spent compiling numba functions since :func:`install` (the
    first call installs it)."""
    return install().seconds


def clock() -> float:
    """``time.perf_counter()`` less the compile seconds: differences of it time a phase
    without the kernels it compiled."""
    watch = install()
    return time.perf_counter() - watch.seconds
