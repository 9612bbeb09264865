"""Shared test setup (kept minimal).

The test helpers (``_reference``, ``_cudasim_checks``, ...) are plain modules in this folder;
put it on ``sys.path`` so ``from _reference import ...`` works under any pytest import mode.
"""

import os
import sys
import time

_T0 = time.monotonic()  # the session's start, for the simulator files' timeline

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


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
