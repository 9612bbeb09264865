"""The simulator test files (``tests/_cudasim_*.py``), each run in its own pytest process with
``NUMBA_ENABLE_CUDASIM=1`` (the variable must be set before numba is imported), started early.

Why early: the simulator runs single-threaded Python for minutes while the rest of the suite
mostly uses one core too. When the test that owns a file is selected, ``conftest.py`` starts
the selected files' processes as soon as collection ends, one after another in one background
thread and at a lower CPU priority (``nice``), so they use the core the main suite leaves idle
and never push it off its own. The owning tests run last (``conftest.py`` moves them), and
wait for their files' results if those are not in yet. A test run
on its own (nothing started) runs its file itself. Either way the test sees the same thing:
the child pytest's exit status and output.
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

#: The test that owns each simulator file (pytest node id relative to the root), in the order
#: the suite reaches them, which is the order they are started in. (Pairs, not a dict display:
#: a formatter can split a long pair, never a long key: value.)
OWNERS = dict(
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

_results: dict[str, tuple[int, str]] = {}  # file -> (returncode, stdout + stderr)
_times: dict[str, tuple[float, float]] = {}  # file -> (start, end), time.monotonic()
_done: dict[str, threading.Event] = {}
_current: list[subprocess.Popen] = []  # the child running now (to stop at exit)
_stop = threading.Event()


def _env():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT, TESTS] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def _run(name: str, nice: int = 0) -> tuple[int, str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        os.path.join(TESTS, name),
    ]
    # the nice command, not preexec_fn: this runs in a thread beside numba's worker threads,
    # and Python code between fork and exec may deadlock there (Python's subprocess docs); a
    # full-suite run hung with this thread in Popen and the main thread in a numba call
    renice = shutil.which("nice") if nice else None
    if renice:
        cmd = [renice, "-n", str(int(nice))] + cmd
    began = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    _current.append(proc)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return -9, out + f"\n[killed after {TIMEOUT} s]"
    finally:
        _current.remove(proc)
        _times[name] = (began, time.monotonic())
    return proc.returncode, out


def start(names: list[str]) -> None:
    """Run ``names`` (file names in ``tests/``) one after another in a background thread."""
    names = [n for n in names if n not in _done]
    for n in names:
        _done[n] = threading.Event()

    def work():
        for n in names:
            if _stop.is_set():
                _results[n] = (-1, "not run: the test session ended first")
            else:
                _results[n] = _run(n, nice=5)
            _done[n].set()

    threading.Thread(target=work, name="simulator-runs", daemon=True).start()


def stop() -> None:
    """End of the session: stop a child still running (its test was not reached)."""
    _stop.set()
    for proc in list(_current):
        proc.kill()


def timings(origin: float) -> list[str]:
    """One line per simulator file run in this session: when it started and ended, in seconds
    since ``origin`` (``time.monotonic()``), and its own wall time."""
    return [
        f"{n}: {a - origin:6.1f} s -> {b - origin:6.1f} s ({b - a:6.1f} s)"
        for n, (a, b) in sorted(_times.items(), key=lambda kv: kv[1])
    ]


def result(name: str) -> tuple[int, str]:
    """(returncode, output) of the child pytest on ``tests/<name>``: the early run's if one
    was started, else a run now."""
    if name in _done:
        _done[name].wait()
        return _results[name]
    return _run(name)


def assert_passed(name: str) -> str:
    """The owning test's check: the child pytest on ``tests/<name>`` exited 0 and its summary
    line counts passed tests and no failure, error or skip (a file that skips itself for want
    of the simulator also exits 0). Returns the output."""
    code, out = result(name)
    tail = out[-4000:]
    assert code == 0, f"simulator file {name} failed:\n{tail}"
    last = out.strip().splitlines()[-1] if out.strip() else ""
    assert re.search(r"\d+ passed", last), f"{name}: no test passed:\n{tail}"
    assert not re.search(r"\b(failed|errors?|skipped)\b", last), f"{name}: {last}\n{tail}"
    return out
