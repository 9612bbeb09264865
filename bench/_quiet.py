"""A quieter machine for a benchmark: every other process's threads lowered to nice 19 while it
runs.

On a shared box (several agents, builds, notebooks) the other processes' load decides a timing
more than the code does. ``renice_others()`` lowers every other process the user may renice to
the lowest priority for the duration of a ``with`` block and restores each one's priority after;
the benchmark itself and its children keep theirs. The record says that it was done
(``reniced_others``) and how many processes, so a reader knows the conditions. It does not stop
the others: with two cores and CPU-bound neighbours, timings are still noisier than on an idle
machine, and the load average is recorded beside them.
"""

from __future__ import annotations

import contextlib
import os


def _other_pids():
    """Thread ids of every other process (Linux keeps a nice value per thread)."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            tids = os.listdir(f"/proc/{name}/task")
        except OSError:
            continue
        for tid in tids:
            yield int(tid)


@contextlib.contextmanager
def renice_others(enabled: bool = True):
    """Lower every other process to nice 19 inside the block; yields how many were lowered."""
    changed = {}
    if enabled and os.path.isdir("/proc"):
        for pid in _other_pids():
            try:
                old = os.getpriority(os.PRIO_PROCESS, pid)
                if old < 19:
                    os.setpriority(os.PRIO_PROCESS, pid, 19)
                    changed[pid] = old
            except (ProcessLookupError, PermissionError, OSError):
                continue
    try:
        yield len(changed)
    finally:
        for pid, old in changed.items():
            try:
                os.setpriority(os.PRIO_PROCESS, pid, old)
            except (ProcessLookupError, PermissionError, OSError):
                pass
