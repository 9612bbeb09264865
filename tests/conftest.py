"""Shared test setup (kept minimal).

The test helpers (``_reference``, ``_cudasim_checks``, ...) are plain modules in this folder;
put it on ``sys.path`` so ``from _reference import ...`` works under any pytest import mode.
"""

import os
import signal
import sys
import time

import pytest

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


def _relpath(item, root):
    return os.path.relpath(str(item.path), str(root)).replace(os.sep, "/")


def _heavy_target(item, root):
    """The ``_background_files.HEAVY`` target ``item`` belongs to, or None."""
    import _background_files

    path = _relpath(item, root)
    for target in _background_files.HEAVY:
        file, _, name = target.partition("::")
        if path == f"tests/{file}" and (not name or item.originalname == name):
            return target
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session, config, items):
    """Hand heavy targets to child pytests, and run last what waits for the background.

    A heavy target (``_background_files.HEAVY``) whose tests are all selected (counted here
    before ``-k``, ``-m`` or ``--deselect`` drop any), in a run that selects other tests too,
    leaves this process: one :class:`ChildPytest` item stands in for it. The simulator files'
    owning tests and those stand-ins run last: their files run in the background meanwhile
    (``test_simulator_suite``, reached early in file order, waited 48 s of a 900 s suite for
    ``_cudasim_kernels.py``)."""
    import _background_files

    root = config.rootpath
    target_of = {item.nodeid: _heavy_target(item, root) for item in items}
    collected: dict[str, int] = {}
    for target in filter(None, target_of.values()):
        collected[target] = collected.get(target, 0) + 1
    result = yield  # the other plugins' selection
    by_target: dict[str, list] = {}
    for item in items:
        if target_of[item.nodeid]:
            by_target.setdefault(target_of[item.nodeid], []).append(item)
    heavy = {
        t for t, its in by_target.items() if len(its) == collected[t] and len(its) < len(items)
    }
    owners = set(_background_files.SIMULATOR_OWNERS)
    own, waiting = [], []
    for item in items:
        target = target_of[item.nodeid]
        if target in heavy:
            if item is by_target[target][0]:
                name = target.partition("::")[2] or "whole_file"
                module = item.getparent(pytest.Module)
                waiting.append(
                    ChildPytest.from_parent(module, name=f"{name}[child pytest]", target=target)
                )
            continue
        (waiting if f"{_relpath(item, root)}::{item.name}" in owners else own).append(item)
    items[:] = own + waiting
    return result


class ChildPytest(pytest.Item):
    """Stands in for a heavy target run by a child pytest (``_background_files``): passes
    when the child passed, and fails with the child's report."""

    def __init__(self, *, target, **kwargs):
        super().__init__(**kwargs)
        self.target = target

    def runtest(self):
        import _background_files

        _background_files.assert_heavy_passed(self.target)

    def repr_failure(self, excinfo):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, None, f"{self.target} in a child pytest"


def pytest_collection_finish(session):
    """Start the selected simulator files and the heavy targets handed to child pytests
    early (``_background_files``: they use the core the rest of the suite leaves idle)."""
    import _background_files

    if session.config.option.collectonly:
        return
    root = session.config.rootpath
    selected = {f"{_relpath(i, root)}::{i.name}" for i in session.items}
    targets = [f for owner, f in _background_files.SIMULATOR_OWNERS.items() if owner in selected]
    targets += [i.target for i in session.items if isinstance(i, ChildPytest)]
    if targets:
        _background_files.start(targets)
        from gpufs.cli._compile_watch import install

        install()  # this process's compile seconds, for the second lane's start


#: The second background lane starts once the suite's process has compiled this many seconds
#: of numba kernels and then finished a test that compiled none (its common kernels are in
#: the cache: a child started earlier would compile them too, on the same two cores), or
#: this many seconds into the run, whichever comes first.
_SECOND_LANE_AFTER_COMPILE_S = 20.0
_SECOND_LANE_AT_THE_LATEST_S = 180.0
_compiled_before_last_test = [0.0]


def pytest_runtest_logfinish(nodeid, location):
    """Start the later background lanes (``_background_files.LANES``) when it is time."""
    import _background_files

    if not 0 < _background_files.lanes_started() < _background_files.LANES:
        return
    from gpufs.cli._compile_watch import compile_seconds

    total, before = compile_seconds(), _compiled_before_last_test[0]
    _compiled_before_last_test[0] = total
    if (total >= _SECOND_LANE_AFTER_COMPILE_S and total == before) or (
        time.monotonic() - _T0 >= _SECOND_LANE_AT_THE_LATEST_S
    ):
        _background_files.add_lane()


def pytest_sessionfinish(session, exitstatus):
    import _background_files

    _background_files.stop()


def pytest_terminal_summary(terminalreporter):
    """Where the background files' time went, and the heavy files' own counts."""
    import _background_files

    lines = _background_files.timings(_T0)
    if lines:
        terminalreporter.write_sep("-", "files run by child pytests")
        for line in lines + _background_files.summaries():
            terminalreporter.write_line(line)
