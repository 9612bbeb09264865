"""The child pytests of a full run (``_background_files``, ``conftest.py``): a heavy target
is handed to a child only when all its tests are selected beside others, the stand-in fails
with the child's report, and the suite's process takes the files nobody started, last first."""

import os
import subprocess
import sys
import threading

import pytest

import _background_files as bg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _collected(*args):
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return [line for line in r.stdout.splitlines() if "::" in line]


def test_a_heavy_test_leaves_the_process_only_beside_others():
    sass = "tests/test_cuda_kernels_sim.py::test_kernels_compile_to_sass"
    assert "test_cuda_kernels_sim.py::test_kernels_compile_to_sass" in bg.HEAVY
    beside = _collected(sass, "tests/test_warnings.py")
    assert f"{sass}[child pytest]" in beside and sass not in beside
    assert any(i.startswith("tests/test_warnings.py::") for i in beside)
    # the stand-in waits for the background: it runs after the suite's own tests
    assert beside[-1] == f"{sass}[child pytest]"
    assert _collected(sass) == [sass]  # alone: run here, as usual
    # a whole heavy file: one stand-in; a selection that drops one of its tests keeps it here
    dask = "tests/test_dask.py"
    assert "test_dask.py" in bg.HEAVY
    whole = _collected(dask, "tests/test_warnings.py")
    assert [i for i in whole if i.startswith(dask)] == [f"{dask}::whole_file[child pytest]"]
    part = _collected(dask, "tests/test_warnings.py", "-k", "not test_rejected_inputs")
    assert f"{dask}::whole_file[child pytest]" not in part
    assert sum(i.startswith(dask) for i in part) > 10


def test_the_stand_in_fails_with_the_childs_report(tmp_path, monkeypatch):
    monkeypatch.setattr(bg, "_times", {})  # not in this session's timeline
    (tmp_path / "test_fails.py").write_text(
        "def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 + 1 == 3, 'arithmetic moved'\n"
    )
    with pytest.raises(bg.HeavyFileFailed) as e:
        bg.assert_heavy_passed(str(tmp_path / "test_fails.py"))
    assert "1 failed, 1 passed" in str(e.value) and "arithmetic moved" in str(e.value)
    (tmp_path / "test_empty.py").write_text("X = 1\n")
    with pytest.raises(bg.HeavyFileFailed):  # no test ran: exit 5, not a pass
        bg.assert_heavy_passed(str(tmp_path / "test_empty.py"))


def test_the_suites_process_takes_what_nobody_started_last_first(monkeypatch):
    ran = []

    def run(target, nice=0, lane="suite"):
        ran.append((target, lane))
        return 0, ""

    monkeypatch.setattr(bg, "_run", run)
    monkeypatch.setattr(bg, "_queue", ["a", "b", "c"])
    monkeypatch.setattr(bg, "_done", {t: threading.Event() for t in "abc"})
    monkeypatch.setattr(bg, "_results", {})
    assert bg._claim() == "a"  # the background takes from the front
    bg.run_the_rest()
    assert ran == [("c", "suite"), ("b", "suite")]
    assert bg._done["c"].is_set() and bg._done["b"].is_set() and not bg._done["a"].is_set()
