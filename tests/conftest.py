"""Shared test setup (kept minimal).

The test helpers (``_reference``, ``_cudasim_checks``, ...) are plain modules in this folder;
put it on ``sys.path`` so ``from _reference import ...`` works under any pytest import mode.
"""

import os
import signal
import sys
import time

_T0 = time.monotonic()  # the session's start, for the simulator files' timeline

# A suite started as a background job (``pytest &`` in a script, no job control) inherits
# SIGINT ignored, and so would every command the interrupt tests start: they would ignore the
# Ctrl-C they test (5 of the 14 interrupt tests failed so). Python's own handler here becomes
# the default disposition in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def pytest_collection_modifyitems(session, config, items):
    """The tests that own a simulator file run last: their files run in the background
    meanwhile, so none waits for its result (``test_simulator_suite``, reached early in file
    order, waited 48 s of a 900 s suite for ``_cudasim_kernels.py``)."""
    import _simulator_runs

    root = str(config.rootpath)
    owners = set(_simulator_runs.OWNERS)

    def is_owner(item):
        path = os.path.relpath(str(item.path), root).replace(os.sep, "/")
        return f"{path}::{item.name}" in owners

    items[:] = [i for i in items if not is_owner(i)] + [i for i in items if is_owner(i)]


def pytest_collection_finish(session):
    """Start the selected simulator files early (``_simulator_runs``: they use the core the
    rest of the suite leaves idle)."""
    import _simulator_runs

    root = session.config.rootpath
    selected = set()
    for item in session.items:
        path = os.path.relpath(str(item.path), str(root)).replace(os.sep, "/")
        selected.add(f"{path}::{item.name}")
    names = [f for owner, f in _simulator_runs.OWNERS.items() if owner in selected]
    if names:
        _simulator_runs.start(names)


def pytest_sessionfinish(session, exitstatus):
    import _simulator_runs

    _simulator_runs.stop()


def pytest_terminal_summary(terminalreporter):
    """The simulator files' timeline (where the background core's time went)."""
    import _simulator_runs

    lines = _simulator_runs.timings(_T0)
    if lines:
        terminalreporter.write_sep("-", "simulator files (background, serial)")
        for line in lines:
            terminalreporter.write_line(line)
