"""Test files that a full run hands to child pytest processes, run in background lanes beside
the suite's own process (:data:`LANES`).

Two kinds of file go there, each in its own ``python -m pytest`` process:

* **Simulator files** (``tests/_cudasim_*.py``) run with ``NUMBA_ENABLE_CUDASIM=1`` (the
  variable must be set before numba is imported, so they cannot share the suite's process).
  Each has an owning test in a ``test_*.py`` file that checks its result
  (:data:`SIMULATOR_OWNERS`); run alone, the owning test runs its file itself.
* **Heavy test files and tests** (:data:`HEAVY`): a whole ``test_*.py`` file (or one test)
  whose tests are all selected, in a run that selects other tests too, leaves the suite's
  process; ``conftest.py`` puts one item in its place that passes when the child pytest
  passed, and fails with the child's report otherwise. Run on its own, such a file runs
  in the suite's process as usual.

Why: the simulator is single-threaded Python for minutes, and the suite's process is one
process; with the two in series one core idled for a third of a full run. Now as soon as
collection ends a background thread starts the files one after another in :data:`ORDER`, at a
lower CPU priority (``nice``) so that they never push the suite's own tests off their core;
a second thread joins it once the suite's process has compiled its first kernels.
The items that wait for them run last (``conftest.py`` moves them). When the suite's process
reaches them, it first runs the files the background has not started yet itself, the last
first (:func:`run_the_rest`), so neither core idles while files are left. Each file ends with
the same thing either way: the child pytest's exit status and output.

The end of a full run lists each file's start, end and wall time, and the summary line of
each heavy file's child (its counts are not in the suite's own summary line).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
TIMEOUT = 1800  # seconds for one file: only a hang reaches it

#: The test that owns each simulator file (pytest node id relative to the root). (Pairs, not
#: a dict display: a formatter can split a long pair, never a long key: value.)
SIMULATOR_OWNERS = dict(
    [
        ("tests/test_cuda_kernels_sim.py::test_simulator_suite", "_cudasim_kernels.py"),
        (
            "tests/test_dask_gpu_sim.py::test_dask_gpu_shards_under_the_cuda_simulator",
            "_cudasim_dask.py",
        ),
        (
            "tests/test_forest_algorithms.py::test_forest_on_simulated_gpu_kernels_equals_cpu",
            "_cudasim_forest.py",
        ),
        (
            "tests/test_group_testing.py::test_group_testing_under_the_cuda_simulator",
            "_cudasim_group_testing.py",
        ),
        (
            "tests/test_multitask.py::test_multitask_under_the_cuda_simulator",
            "_cudasim_multitask.py",
        ),
    ]
)

#: Heavy test files, or single tests (node ids relative to ``tests/``), that a full run hands
#: to a child pytest: the real-compiler SASS check (about 35 s of compiling, no CPU kernel, so
#: it goes first while the suite's process compiles the CPU kernels), then the two files of
#: the most CPU (Dask clusters; ControlBurn's scikit-learn checks). Also handing over
#: test_cat_guards.py and test_pool_ranking.py (exact k's cross-fitted ranking) did not
#: shorten a cold run: 616 s against 610 s, the lanes then ending last.
HEAVY = (
    "test_cuda_kernels_sim.py::test_kernels_compile_to_sass",
    "test_dask.py",
    "test_controlburn.py",
)

#: The order the background starts files in: the SASS check, the simulator files in the
#: order their owners are reached, then the heavy files.
ORDER = HEAVY[:1] + tuple(SIMULATOR_OWNERS.values()) + HEAVY[1:]

_results: dict[str, tuple[int, str]] = {}  # target -> (returncode, stdout + stderr)
_times: dict[str, tuple[float, float, str]] = {}  # target -> (start, end, which lane)
_done: dict[str, threading.Event] = {}
_queue: list[str] = []  # targets started by nobody yet, in ORDER
_lock = threading.Lock()
_current: list[subprocess.Popen] = []  # the children running now (to stop at exit)
_stop = threading.Event()
_lanes: list[str] = []  # the background threads' names, in the order they started

#: Background lanes in a full run. On the 2-core box the suite's process and one lane kept
#: the cores 150 % busy (944 s of CPU in 629 s: the suite's process waits on its CLI
#: subprocesses, forks and Dask clusters, and the simulator is one thread); a second lane
#: fills those waits.
LANES = 2


def is_simulator(target: str) -> bool:
    return target.startswith("_cudasim_")


def _env(target: str):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if is_simulator(target):
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT, TESTS] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def _run(target: str, nice: int = 0, lane: str = "suite") -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd.append(os.path.join(TESTS, target))
    # the nice command, not preexec_fn: this runs in a thread beside numba's worker threads,
    # and Python code between fork and exec may deadlock there (Python's subprocess docs); a
    # full-suite run hung with this thread in Popen and the main thread in a numba call
    renice = shutil.which("nice") if nice else None
    if renice:
        cmd = [renice, "-n", str(int(nice))] + cmd
    began = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=_env(target),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with _lock:
        _current.append(proc)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return -9, out + f"\n[killed after {TIMEOUT} s]"
    finally:
        with _lock:
            _current.remove(proc)
        _times[target] = (began, time.monotonic(), lane)
    return proc.returncode, out


def _claim(last: bool = False) -> str | None:
    """Take the first (or last) target nobody has started, or None."""
    with _lock:
        if not _queue:
            return None
        return _queue.pop(-1 if last else 0)


def _finish(target: str, nice: int, lane: str) -> None:
    if _stop.is_set():
        _results[target] = (-1, "not run: the test session ended first")
    else:
        _results[target] = _run(target, nice=nice, lane=lane)
    _done[target].set()


def start(targets: list[str]) -> None:
    """Queue ``targets`` (file names or node ids in ``tests/``, in :data:`ORDER`) and run
    them one after another in a background thread, at a lower priority."""
    targets = [t for t in ORDER if t in targets and t not in _done]
    with _lock:
        for t in targets:
            _done[t] = threading.Event()
            _queue.append(t)

    add_lane()


def add_lane() -> None:
    """One more background thread taking queued targets, front first, at a lower priority.
    ``conftest.py`` starts one lane as collection ends and a second once the suite's process
    has compiled its first kernels (:data:`LANES`)."""

    def work():
        while (t := _claim()) is not None:
            _finish(t, nice=5, lane=name)

    with _lock:
        if not _queue:
            return
        name = f"background {len(_lanes) + 1}"
        _lanes.append(name)
    threading.Thread(target=work, name=name, daemon=True).start()


def lanes_started() -> int:
    """Background threads started in this process (0: this run hands nothing to children)."""
    return len(_lanes)


def run_the_rest() -> None:
    """The suite's process has no test of its own left: run the targets the background has
    not started yet here, the last first, so that both cores work to the end."""
    while (t := _claim(last=True)) is not None:
        _finish(t, nice=0, lane="suite")


def stop() -> None:
    """End of the session: stop a child still running (its test was not reached)."""
    _stop.set()
    with _lock:
        procs = list(_current)
    for proc in procs:
        proc.kill()


def timings(origin: float) -> list[str]:
    """One line per file run in this session: where (the background lane or the suite's
    process), when it started and ended, in seconds since ``origin`` (``time.monotonic()``),
    and its own wall time."""
    return [
        f"{t}: {a - origin:6.1f} s -> {b - origin:6.1f} s ({b - a:6.1f} s, {lane})"
        for t, (a, b, lane) in sorted(_times.items(), key=lambda kv: kv[1][:2])
    ]


def summaries() -> list[str]:
    """Each heavy file's child's summary line (its counts), for the end of a full run."""
    lines = []
    for t in HEAVY:
        if t in _results:
            out = _results[t][1].strip()
            lines.append(f"{t}: {out.splitlines()[-1] if out else '(no output)'}")
    return lines


def result(target: str) -> tuple[int, str]:
    """(returncode, output) of the child pytest on ``tests/<target>``: the early run's if one
    was started (run here if it was not started yet), else a run now."""
    if target in _done:
        run_the_rest()
        _done[target].wait()
        return _results[target]
    return _run(target)


def assert_passed(target: str) -> str:
    """The owning test's check: the child pytest on ``tests/<target>`` exited 0 and its
    summary line counts passed tests and no failure, error or skip (a file that skips itself
    for want of the simulator also exits 0). Returns the output."""
    code, out = result(target)
    tail = out[-4000:]
    assert code == 0, f"{target} failed:\n{tail}"
    last = out.strip().splitlines()[-1] if out.strip() else ""
    assert re.search(r"\d+ passed", last), f"{target}: no test passed:\n{tail}"
    assert not re.search(r"\b(failed|errors?|skipped)\b", last), f"{target}: {last}\n{tail}"
    return out


def assert_heavy_passed(target: str) -> str:
    """A heavy file's stand-in item's check: its child pytest exited 0 (every test passed,
    was skipped for want of a GPU or library, or failed as a documented xfail) and ran
    tests. Returns the output."""
    code, out = result(target)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if code != 0:
        raise HeavyFileFailed(f"{target} (run in a child pytest) failed: {last}\n\n{out[-20000:]}")
    if not re.search(r"\d+ passed", last):
        raise HeavyFileFailed(f"{target}: no test passed: {last}\n\n{out[-4000:]}")
    return out


class HeavyFileFailed(AssertionError):
    """A heavy file's child pytest failed; the message holds its report."""
