"""Interrupts of the command line: Ctrl-C (SIGINT) and SIGTERM end a run the same way.

Owns, for ``gpufs.cli`` only (a library does not take over a process's signals):

* :class:`SignalsAsInterrupts`: the first signal raises :class:`Interrupted` at a safe point,
  so every ``finally`` removes its temporary file. One landing in llvmlite's ctypes callbacks
  (where an exception is printed and lost) or in a named tuple's constructor is held back and
  re-delivered every ``RETRY_S`` by a helper thread; a swallowed one is raised again after
  ``RERAISE_S``. A second signal stops the run at once (temporary files removed, one line).
  numba's ``SystemError`` around an interrupt is reported as the interrupt it was;
* :func:`deferred`: no signal lands between creating a temporary file and registering it
  (``_to_remove``: the files a second signal's exit removes);
* :func:`quiet_start`: an interrupt during the command's imports is one line, no traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager

__all__ = [
    "Interrupted",
    "SignalsAsInterrupts",
    "deferred",
    "describe",
    "in_native_code",
    "quiet_start",
]

#: The signals a command treats as "stop now, clean up" (SIGTERM: ``kill``, ``timeout``, a CI
#: cancel).
SIGNALS = tuple(
    s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None
)

#: Seconds between re-deliveries of a signal that landed where it could not be raised.
RETRY_S = 0.05
#: Seconds after which an interrupt raised while the run still goes on is raised again (it
#: was swallowed somewhere; an interrupted run cleans up in milliseconds).
RERAISE_S = 5.0

#: Packages whose Python code runs inside native callbacks (llvmlite's ctypes callbacks, which
#: numba's compiler and cache loader set off): a signal landing in their frames, or in frames
#: they called, is held back. numba's own compiler is Python code that lets a
#: KeyboardInterrupt through, so an interrupt may end a long compile half-way.
_NATIVE_PACKAGES = ("llvmlite",)


class Interrupted(KeyboardInterrupt):
    """The first SIGINT or SIGTERM of a run (``signum``)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def describe(signum):
    """``(message, exit status)`` of a run ended by ``signum`` (None: a KeyboardInterrupt
    raised without a signal): "interrupted" and 130 for SIGINT, as shells report Ctrl-C;
    "interrupted by SIGTERM" and 128 + 15 for SIGTERM.

    Parameters
    ----------
    signum : int or None

    Returns
    -------
    message : str
    status : int
    """
    if signum is None or signum == signal.SIGINT:
        return "interrupted", 130
    return f"interrupted by {signal.Signals(signum).name}", 128 + int(signum)


def _native_folders() -> tuple:
    """The folders of the ``_NATIVE_PACKAGES`` imported so far (with a trailing separator)."""
    folders = []
    for name in _NATIVE_PACKAGES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            folders.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(folders)


def in_native_code(frame) -> bool:
    """Whether ``frame`` or a frame below it runs code of llvmlite (a ctypes callback, where
    an exception raised by a signal handler is swallowed) or a named tuple's constructor.

    Parameters
    ----------
    frame : frame or None

    Returns
    -------
    bool
    """
    folders = _native_folders() or ("\0",)
    while frame is not None:
        if frame.f_code.co_filename.startswith(folders) or str(
            frame.f_globals.get("__name__", "")
        ).startswith("namedtuple_"):
            return True  # a named tuple's __new__: perhaps boxing a kernel's result
        frame = frame.f_back
    return False


#: The running command's handler (deferred() asks it to hold a signal back).
_active = None
#: Temporary files to remove when a second signal ends the process at once.
_to_remove = set()


class SignalsAsInterrupts:
    """Context manager: SIGINT and SIGTERM raise :class:`Interrupted` once, at a safe point
    (main thread only; elsewhere it does nothing); a second signal ends the process at once.
    ``signum`` is the first signal received, or None.

    Parameters
    ----------
    stop : callable or None, default=None
        ``stop(status)`` ends the process on a second signal (None: ``os._exit``).
    """

    def __init__(self, stop=None):
        self.signum = None
        self.raised = False  # the Interrupted exception was raised
        self._stop = stop or os._exit
        self._old = {}
        self._depth = 0  # deferred() blocks entered
        self._pending = False  # received, not raised yet
        self._retry_due = False  # the next handler call is the retry thread's, not a signal
        self._retrier = None
        self._raised_at = 0.0
        self._done = threading.Event()

    def _handle(self, signum, frame):
        retry, self._retry_due = self._retry_due, False
        if self.signum is None:
            self.signum = signum
        elif not retry:
            self._stop_now()
            return
        self._start_retries()
        if self.raised:
            if not (retry and self._overdue()):
                return
            # raised RERAISE_S ago and the run still goes on: the exception was swallowed
            # (by a callback or a handler we cannot see), so it is raised again
        elif self._depth or in_native_code(frame):
            self._pending = True  # raised when deferred() ends, or by a later retry
            return
        self._pending = False
        self._raise()

    def _overdue(self):
        import time

        return time.monotonic() - self._raised_at > RERAISE_S

    def _raise(self):
        import time

        self.raised = True
        self._raised_at = time.monotonic()
        raise Interrupted(self.signum)

    def _stop_now(self):
        """The second signal: remove the temporary files, one line, exit."""
        message, status = describe(self.signum)
        for path in list(_to_remove):
            try:
                os.unlink(path)
            except OSError:
                pass
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        try:
            os.write(2, f"error: {message}\n".encode())
        except OSError:
            pass
        self._stop(status)

    def _start_retries(self):
        if self._retrier is not None:
            return
        import _thread

        def retry():
            while not self._done.wait(RETRY_S):
                if (self._pending and not self.raised) or (self.raised and self._overdue()):
                    self._retry_due = True
                    _thread.interrupt_main(self.signum)

        self._retrier = threading.Thread(target=retry, name="gpufs-interrupt", daemon=True)
        self._retrier.start()

    def __enter__(self):
        global _active
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
            _active = self
        return self

    def __exit__(self, *exc):
        global _active
        self._done.set()
        if self._retrier is not None:
            self._retrier.join()
            self._retrier = None
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()
        if _active is self:
            _active = None
        return False


@contextmanager
def deferred():
    """A signal that arrives inside the block is raised when the block ends, not inside it.

    Used around "create a temporary file and remember its name", so that an interrupt lands
    before or after, never between. (Signal masks would not do: Python runs its handlers in
    the main thread whichever thread the signal reached.) Nothing changes outside a
    :class:`SignalsAsInterrupts` block.
    """
    handler = _active
    if handler is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    handler._depth += 1
    try:
        yield
    finally:
        handler._depth -= 1
    if handler._depth == 0 and handler._pending and not handler.raised:
        handler._pending = False
        handler._raise()


@contextmanager
def quiet_start():
    """An interrupt inside the block (the command line's imports) prints ``error:
    interrupted`` and exits with status 130 instead of a traceback."""
    try:
        yield
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
