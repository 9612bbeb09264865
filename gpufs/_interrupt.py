"""Interrupts of the command line: Ctrl-C (SIGINT) and SIGTERM end a run the same way.

Owns, for ``gpufs.cli`` only (a library does not take over a process's signals):

* :class:`SignalsAsInterrupts`: while a command runs, the first SIGINT or SIGTERM raises
  :class:`Interrupted` (a ``KeyboardInterrupt``) wherever Python code runs, so every
  ``finally`` removes its temporary file; later signals are ignored until the run has cleaned
  up. It remembers the signal: a signal that lands inside a compiled numba call comes out as
  a ``SystemError`` ("returned a result with an exception set"), which the command reports as
  the interrupt it was;
* :func:`deferred`: a signal waits while a temporary file is created and registered for
  removal, so none lands between the two;
* :func:`quiet_start`: an interrupt while the command's modules are imported ends the process
  with the interrupt's one line, not a traceback.
"""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

__all__ = ["Interrupted", "SignalsAsInterrupts", "deferred", "describe", "quiet_start"]

#: The signals a command treats as "stop now, clean up" (SIGTERM: ``kill``, ``timeout``, a CI
#: cancel).
SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None))
                if s is not None)


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


#: The running command's handler (deferred() asks it to hold a signal back).
_active = None


class SignalsAsInterrupts:
    """Context manager: SIGINT and SIGTERM raise :class:`Interrupted` once (main thread only;
    elsewhere it does nothing). ``signum`` is the first signal received, or None."""

    def __init__(self):
        self.signum = None
        self._old = {}
        self._depth = 0        # deferred() blocks entered
        self._pending = False  # a signal came in one of them

    def _handle(self, signum, frame):
        if self.signum is not None:
            return  # a second Ctrl-C while the first unwinds must not interrupt the clean-up
        self.signum = signum
        if self._depth:
            self._pending = True  # raised when the deferred block ends
            return
        raise Interrupted(signum)

    def __enter__(self):
        global _active
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
            _active = self
        return self

    def __exit__(self, *exc):
        global _active
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
    if handler._depth == 0 and handler._pending:
        handler._pending = False
        raise Interrupted(handler.signum)


@contextmanager
def quiet_start():
    """An interrupt inside the block (the command line's imports) prints ``error:
    interrupted`` and exits with status 130 instead of a traceback."""
    try:
        yield
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
