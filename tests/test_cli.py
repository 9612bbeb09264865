"""The ``gpufs`` command line: the demo, ``select`` on CSV and Parquet with each method,
``explain``, and the rules that it never destroys data and reports user errors in one line.

What needs a real process runs ``python -m gpufs`` in a subprocess, as a user would: the
entry point, ``--debug``'s traceback, terminals and signals. The rest (``select`` end to end,
``explain``, the refusal rules) calls ``gpufs.cli.main`` in this process, with its stdout and
stderr captured: the same code from argument parsing to the exit status, without a fresh
interpreter's start-up (imports and kernel loads, seconds each) per command.
"""

import json
import os
import re
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest

from gpufs import __version__
from gpufs.cli import main

pd = pytest.importorskip("pandas")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _no_compile_notice(monkeypatch):
    """In-process runs print no "compiling kernels" notice (a test run's first fits compile
    kernels that are not the command's); the tests of the notice set its threshold."""
    import gpufs.cli._compile_watch as cw

    monkeypatch.setattr(cw, "NOTICE_AFTER_S", float("inf"))


def _gpufs(*args, cwd, timeout=300):
    """Run ``python -m gpufs ARGS`` in a fresh interpreter; pipes, so stdout is not a TTY."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-m", "gpufs", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class _Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def _run_main(*args, cwd, monkeypatch, capsys):
    """``gpufs ARGS`` run in this process in ``cwd``, as ``_gpufs`` runs it in a fresh one:
    its status (argparse's exit too), stdout and stderr (captured, so not terminals)."""
    monkeypatch.chdir(cwd)
    capsys.readouterr()  # what earlier steps printed is not this command's
    try:
        status = main(list(args))
    except SystemExit as exc:
        status = exc.code
    out = capsys.readouterr()
    return _Ran(status, out.out, out.err)


def _planted(n=600, seed=0):
    """Six numeric columns, an id and a text column; the label depends on c2 and c4 only."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.normal(size=(n, 6)), columns=[f"c{i}" for i in range(6)])
    df["label"] = (2.0 * df["c2"] - 1.5 * df["c4"] + 0.3 * rng.normal(size=n) > 0).astype(int)
    df["id"] = np.arange(n)
    df["note"] = "free text"
    return df


def _ranked(stdout):
    """The selected names, in the printed order ("  1. name  (score ...)")."""
    return [m.group(1) for m in re.finditer(r"^\s*\d+\. (\S+)", stdout, re.M)]


def _one_error_line(stderr):
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


# --- demo and version -----------------------------------------------------------------------
def test_demo_prints_the_selection_in_order_and_the_test_accuracy(capsys):
    assert main(["demo", "--trees", "20", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "breast cancer: 569 rows, 30 features" in out
    ranked = [line for line in out.splitlines() if re.match(r"\s*\d+\. ", line)]
    assert ranked and ranked[0].strip().startswith("1.")
    assert "first used by tree 0" in ranked[0]  # the first selected feature enters at tree 0
    acc = float(out.split("test accuracy:")[1].split()[0])
    assert 0.85 < acc <= 1.0


def test_version_comes_from_the_package_metadata(tmp_path):
    from importlib.metadata import version

    assert __version__ == version("gpufs")
    proc = _gpufs("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"gpufs {__version__}"


# --- select, end to end ---------------------------------------------------------------------
def test_select_csv_gbfs_writes_the_table_the_report_and_an_explainable_model(
    tmp_path, monkeypatch, capsys
):
    df = _planted()
    df.to_csv(tmp_path / "in.csv", index=False)
    proc = _run_main(
        "select",
        "in.csv",
        "--target",
        "label",
        "--drop",
        "id",
        "--drop",
        "note",
        "-k",
        "2",
        "--trees",
        "30",
        "--device",
        "cpu",
        "--output",
        "sel.csv",
        "--report",
        "report.json",
        "--save-model",
        "model.json",
        cwd=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # not a terminal: no progress bar, no warnings
    names = _ranked(proc.stdout)
    assert sorted(names) == ["c2", "c4"]

    out = pd.read_csv(tmp_path / "sel.csv")
    assert list(out.columns) == names + ["label"]  # selection order, then the target
    pd.testing.assert_frame_equal(out, df[names + ["label"]])

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["gpufs_version"] == __version__
    assert report["method"] == "gbfs" and report["estimator"] == "GBFSClassifier"
    assert report["task"] == "classification" and report["device"] == "cpu"
    assert [s["name"] for s in report["selected"]] == names
    assert [s["rank"] for s in report["selected"]] == [1, 2]
    assert all(0.0 < s["score"] <= 1.0 for s in report["selected"])
    # -k: GBFS searched mu for exactly k features; the report gives the mu the final fit used
    assert report["penalty"]["name"] == "mu" and report["penalty"]["value"] > 0
    assert {"mu_search", "boost"} <= set(report["timings_s"]["fit_phases"])
    assert report["input"]["dropped"] == ["id", "note"] and report["input"]["rows"] == 600
    assert report["train_score"]["metric"] == "accuracy" and report["warnings"] == []
    assert 0.8 < report["train_score"]["value"] <= 1.0
    timings = report["timings_s"]
    assert {"read", "fit", "write", "total"} <= set(timings)
    assert timings["total"] >= timings["fit"] > 0

    explained = _run_main(
        "explain", "model.json", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert explained.returncode == 0, explained.stderr
    assert "GBFSClassifier, 6 features in, 2 selected" in explained.stdout
    assert _ranked(explained.stdout.split("selection record")[0]) == names
    record = explained.stdout.split("selection record")[1]
    for name, tree in zip(names, report["first_use_tree"]):  # the tree that added each feature
        assert re.search(rf"^\s+{tree}\s+\S+\s+-\s+.*\b{name}\b", record, re.M), record


@pytest.mark.parametrize("method", ["controlburn", "stagewise"])
def test_select_parquet_with_the_other_methods(tmp_path, monkeypatch, capsys, method):
    pytest.importorskip("pyarrow")
    df = _planted(seed=1).drop(columns=["note"])
    df.to_parquet(tmp_path / "in.parquet", index=False)
    proc = _run_main(
        "select",
        "in.parquet",
        "--target",
        "label",
        "--drop",
        "id",
        "-k",
        "2",
        "--method",
        method,
        "--device",
        "cpu",
        "--output",
        "sel.parquet",
        "--report",
        "report.json",
        "--save-model",
        "model.json",
        cwd=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    names = _ranked(proc.stdout)
    assert sorted(names) == ["c2", "c4"]
    out = pd.read_parquet(tmp_path / "sel.parquet")
    pd.testing.assert_frame_equal(out, df[names + ["label"]])
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["method"] == method and [s["name"] for s in report["selected"]] == names
    explained = _run_main(
        "explain", "model.json", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert explained.returncode == 0, explained.stderr
    assert _ranked(explained.stdout)[:2] == names
    if method == "controlburn":
        assert report["penalty"]["name"] == "lambda" and report["penalty"]["value"] > 0
        assert f"lambda = {report['penalty']['value']:.6g}" in explained.stdout
        assert set(report["timings_s"]["fit_phases"]) >= {"forest", "select"}
    else:
        assert report["penalty"] is None
        assert all(s["score"] > 0 for s in report["selected"])


def test_a_regression_target_is_detected(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pyarrow")
    df = _planted(seed=2).drop(columns=["note", "label", "id"])
    df["price"] = 3.0 * df["c1"] + 0.1 * np.random.default_rng(0).normal(size=len(df))
    df.to_parquet(tmp_path / "in.parquet", index=False)
    proc = _run_main(
        "select",
        "in.parquet",
        "--target",
        "price",
        "-k",
        "1",
        "--method",
        "stagewise",
        "--device",
        "cpu",
        cwd=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("regression, stagewise: selected 1 of 6 columns")
    assert _ranked(proc.stdout) == ["c1"]


def test_warnings_of_the_fit_are_one_line_each_and_in_the_report(tmp_path, monkeypatch, capsys):
    import warnings

    from gpufs import GBFSClassifier

    fit = GBFSClassifier.fit

    def fit_that_warns(self, X, y):
        warnings.warn("something to know\n  about this fit", UserWarning, stacklevel=1)
        # the same warning again: shown once
        warnings.warn("something to know\n  about this fit", UserWarning, stacklevel=1)
        return fit(self, X, y)

    monkeypatch.setattr(GBFSClassifier, "fit", fit_that_warns)
    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--drop",
                "id,note",
                "--trees",
                "5",
                "--device",
                "cpu",
                "--report",
                "r.json",
            ]
        )
        == 0
    )
    assert capsys.readouterr().err == "warning: something to know about this fit\n"
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["warnings"] == ["something to know about this fit"]


@pytest.mark.parametrize(
    "argv, knob",
    [
        (["--mu", "0.999", "--trees", "5"], "--mu"),
        (["--method", "controlburn", "--alpha", "1e6"], "--alpha"),
    ],
)
def test_an_empty_selection_says_what_to_change_in_the_commands_words(
    tmp_path, monkeypatch, capsys, argv, knob
):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--drop",
                "id,note",
                "--device",
                "cpu",
                "--report",
                "r.json",
                *argv,
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "selected 0 of 6 columns" in captured.out
    advice = f"no column was selected: pass -k N to select exactly N columns, or a smaller {knob}"
    lines = captured.err.splitlines()
    assert lines[0].startswith("warning: no feature was selected: ")  # the fit's own
    assert lines[-1] == f"warning: {advice}"
    assert json.loads((tmp_path / "r.json").read_text())["warnings"][-1] == advice


# --- user errors: one line, status 2; --debug shows the traceback ---------------------------
def test_a_user_error_is_one_line_and_status_2_and_debug_shows_the_traceback(tmp_path):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    proc = _gpufs("select", "in.csv", "--target", "nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert "target column 'nope' is not in in.csv" in _one_error_line(proc.stderr)
    proc = _gpufs("select", "in.csv", "--target", "nope", "--debug", cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "UserError" in proc.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["select", "missing.csv", "--target", "label"], "no such file: missing.csv"),
        (
            ["select", "in.csv", "--target", "label", "--categorical", "zzz"],
            "--categorical: no feature column 'zzz'",
        ),
        (["select", "in.csv", "--target", "label", "--drop", "zzz"], "--drop: no column 'zzz'"),
        (["select", "in.csv", "--target", "label", "--drop", "label"], "names the target column"),
        (
            ["select", "in.csv", "--target", "label", "--method", "stagewise", "--mu", "0.1"],
            "--mu applies to --method gbfs only",
        ),
        (
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--method",
                "controlburn",
                "-k",
                "2",
                "--alpha",
                "0.1",
            ],
            "either -k",
        ),
        (["select", "in.csv", "--target", "label", "--output", "out.xlsx"], "unknown table format"),
        (["select", "in.csv", "--target", "label", "-k", "0"], "expected a positive integer"),
        (
            ["select", "in.csv", "--target", "label", "--drop", "note", "-k", str(10**20)],
            "'n_features_to_select' parameter",
        ),
        (["select", "in.csv"], "required: --target"),
        (["select", "in.csv", "--target", "label", "--drop", "note,id", "--mu", "-1"], "mu"),
        (["explain", "in.csv"], "not valid JSON"),
        (["select", "header.csv", "--target", "label"], "header.csv has a header but no rows"),
        (["explain", "missing.json"], "no such file: missing.json"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_user_errors(tmp_path, monkeypatch, capsys, argv, message):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "header.csv").write_text("c1,c2,label\n")
    monkeypatch.chdir(tmp_path)
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code
    assert status == 2
    assert message in _one_error_line(capsys.readouterr().err)


def test_device_gpu_without_a_gpu_is_a_user_error(tmp_path, monkeypatch, capsys):
    from gpufs._device import gpu_available

    if gpu_available():
        pytest.skip("this machine has a GPU")
    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert main(["select", "in.csv", "--target", "label", "--device", "gpu"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "no CUDA GPU is usable" in line
    # the command's spelling (issue 36: it said device='cpu', the Python keyword)
    assert "--device cpu" in line and "device='cpu'" not in line, line


def test_demo_device_gpu_without_a_gpu_is_a_user_error(monkeypatch, capsys):
    """The README's Docker command on a machine without a usable GPU: one ``error:`` line
    and status 2, as ``gpufs select`` gives (it was "internal error ... report it", 1)."""
    from gpufs._device import gpu_available

    if gpu_available():
        pytest.skip("this machine has a GPU")
    assert main(["demo", "--device", "gpu"]) == 2
    captured = capsys.readouterr()
    assert "no CUDA GPU is usable" in _one_error_line(captured.err)
    assert "internal error" not in captured.err and captured.out == ""


def test_explain_names_the_file_it_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.json").write_text('{"gpufs_version": "0.1.0", "selected": []}\n')
    assert main(["explain", "report.json"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("error: report.json: not a gpufs model file")
    assert "not a --report file" in line


# --- identifier-like text columns -----------------------------------------------------------
def test_an_identifier_column_is_left_out_with_a_warning_in_the_report(
    tmp_path, monkeypatch, capsys
):
    """A text column with a different value on every row (a name) is no feature: ``select``
    leaves it out, says so on stderr and in the report, naming the column and ``--drop``."""
    df = _planted(n=300)
    df["name"] = [f"customer {i}" for i in range(300)]
    df.to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--drop",
                "id",
                "-k",
                "2",
                "--trees",
                "20",
                "--device",
                "cpu",
                "--report",
                "r.json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert _ranked(captured.out) and "name" not in _ranked(captured.out)
    warning = (
        "left out the text column 'name' (300 distinct values in 300 rows): it looks "
        "like an identifier, not a feature (most rows have a value of their own); pass "
        "--drop name to leave it out without this warning"
    )
    assert f"warning: {warning}" in captured.err
    report = json.loads((tmp_path / "r.json").read_text())
    assert any(w.startswith(warning) for w in report["warnings"])
    assert report["input"]["left_out"] == ["name"] and report["n_features_in"] == 7
    # named in --categorical it is used, with the estimator's warning in the report
    assert (
        main(
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--drop",
                "id",
                "--categorical",
                "name,note",
                "--method",
                "stagewise",
                "-k",
                "1",
                "--device",
                "cpu",
                "--report",
                "r2.json",
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "r2.json").read_text())
    assert report["input"]["left_out"] == [] and report["n_features_in"] == 8
    assert any(
        "'name' (300 distinct values in 300 rows) looks like an identifier" in w
        for w in report["warnings"]
    )


def test_scores_are_printed_with_their_meaning(tmp_path, monkeypatch, capsys):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    for method, meaning in (
        ("gbfs", "share of the ensemble's total split gain"),
        ("stagewise", "|weight| on the standardized feature"),
    ):
        assert (
            main(
                [
                    "select",
                    "in.csv",
                    "--target",
                    "label",
                    "--drop",
                    "id,note",
                    "-k",
                    "2",
                    "--method",
                    method,
                    "--device",
                    "cpu",
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert f"\nscore: {meaning}" in out and "(score " in out


# --- compile time apart from fit time -------------------------------------------------------
def _fit_that_compiles(fit, seconds=0.0):
    """A fit that first compiles a new numba function (as a cold kernel cache does)."""

    def fit_and_compile(self, X, y):
        import time

        from numba import njit

        @njit(cache=False)
        def fresh(a):
            return a + 1

        fresh(1)
        time.sleep(seconds)
        return fit(self, X, y)

    return fit_and_compile


def test_a_cold_cache_prints_one_notice_and_times_compilation_apart(tmp_path, monkeypatch, capsys):
    import gpufs.cli._compile_watch as cw
    from gpufs import GBFSClassifier

    monkeypatch.setattr(cw, "NOTICE_AFTER_S", 0.0)  # any compilation counts as a cold cache
    monkeypatch.setattr(GBFSClassifier, "fit", _fit_that_compiles(GBFSClassifier.fit))
    assert main(["demo", "--trees", "5", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.err == cw.NOTICE + "\n"
    note = re.search(
        r"\(fit ([\d.]+) s on cpu; compiling the kernels took ([\d.]+) s, "
        r"once\)$",
        captured.out.strip(),
    )
    assert note, captured.out
    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--drop",
                "id,note",
                "--trees",
                "5",
                "--device",
                "cpu",
                "--report",
                "r.json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.err == cw.NOTICE + "\n"
    assert "; compiling the kernels took" in captured.out
    timings = json.loads((tmp_path / "r.json").read_text())["timings_s"]
    assert timings["compile"] > 0 and timings["fit"] >= 0


def test_a_warm_cache_prints_no_notice(tmp_path, monkeypatch, capsys):
    """Compilation under ``NOTICE_AFTER_S`` (the odd uncached helper of a warm run) gives no
    notice; the report still counts its seconds apart from the fit's."""
    import gpufs.cli._compile_watch as cw
    from gpufs import GBFSClassifier

    monkeypatch.setattr(cw, "NOTICE_AFTER_S", 60.0)
    monkeypatch.setattr(GBFSClassifier, "fit", _fit_that_compiles(GBFSClassifier.fit))
    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--drop",
                "id,note",
                "--trees",
                "5",
                "--device",
                "cpu",
                "--report",
                "r.json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.err == "" and "compiling" not in captured.out
    assert json.loads((tmp_path / "r.json").read_text())["timings_s"]["compile"] > 0


def test_compile_watch_notices_after_its_threshold_while_compiling():
    """The notice comes while a long compilation is still running (a timer), once."""
    import time

    from numba.core import event

    from gpufs.cli._compile_watch import NOTICE, CompileWatch

    said = []
    with CompileWatch(notice=said.append, after=0.05) as watch:
        for _ in range(2):
            with event.trigger_event("numba:compile"):  # what numba sends around a compile
                time.sleep(0.2)
    assert said == [NOTICE]
    assert 0.35 < watch.seconds < 2.0 and watch.noticed


def test_the_library_logs_the_compile_notice_once(monkeypatch, caplog):
    """Issue 36: the Python API's first fit compiled silently for minutes; the library logs
    the notice on the "gpufs" logger (WARNING: shown unless configured away), once, for
    gpufs's own kernels only, and not while the command line's watch prints its own."""
    import logging

    from numba import njit

    import gpufs.cli._compile_watch as cw

    monkeypatch.setattr(cw, "NOTICE_AFTER_S", 0.0)
    watch = cw.install()  # the process-wide listener, as if nothing had compiled yet
    monkeypatch.setattr(watch, "noticed", False)
    monkeypatch.setattr(watch, "gpufs_seconds", 0.0)

    def compile_in(module):
        ns = {"__name__": module}
        exec("def fresh(a):\n    return a + 1\n", ns)
        njit(ns["fresh"])(1)

    with caplog.at_level(logging.WARNING, logger="gpufs"):
        compile_in("user_code")  # not gpufs's: no notice
        assert not caplog.records
        with cw.CompileWatch(notice=lambda m: None):
            compile_in("gpufs._fake")  # the command line's watch speaks instead
        assert not caplog.records
        compile_in("gpufs._fake")
        compile_in("gpufs._fake")
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [("gpufs", logging.WARNING, f"gpufs: {cw.NOTICE}")]
    assert cw.compile_seconds() > 0


def _slow_first_boost(monkeypatch, seconds=0.4):
    """The first boosting fit of a GBFS fit (its first mu probe) compiles for ``seconds``
    (numba's compile event, as a cold cache sends)."""
    import time

    from numba.core import event

    from gpufs.selectors._boost_setup import BoostSetup

    fit, done = BoostSetup.fit, []

    def fit_after_a_compile(self, *a, **k):
        if not done:
            done.append(1)
            with event.trigger_event("numba:compile"):
                time.sleep(seconds)
        return fit(self, *a, **k)

    monkeypatch.setattr(BoostSetup, "fit", fit_after_a_compile)


def test_fit_times_record_every_phase_and_leave_compilation_out(tmp_path, monkeypatch, capsys):
    """Issue 36/37: the report's fit_phases added up to 81.6 s against a fit of 51.5 s (they
    counted the compile); each mu probe's seconds were not recorded."""
    from gpufs import GBFSClassifier

    _slow_first_boost(monkeypatch)
    df = _planted()
    X, y = df[[f"c{i}" for i in range(6)]].to_numpy(), df["label"].to_numpy()
    est = GBFSClassifier(n_estimators=20, n_features_to_select=2, device="cpu").fit(X, y)
    times = est.fit_times_
    assert times["compile"] >= 0.4
    assert len(times["mu_probes"]) == len(est.mu_search_) >= 1
    assert sum(times["mu_probes"]) <= times["mu_search"] + 1e-6
    assert all(t < 0.4 for t in times["mu_probes"]), times  # the compile is not a probe's
    assert {"bin", "mu_search", "pool", "boost"} <= set(times)

    df.to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    _slow_first_boost(monkeypatch)
    assert (
        main(
            [
                "select",
                "in.csv",
                "--target",
                "label",
                "--drop",
                "id,note",
                "-k",
                "2",
                "--trees",
                "20",
                "--device",
                "cpu",
                "--report",
                "r.json",
            ]
        )
        == 0
    )
    timings = json.loads((tmp_path / "r.json").read_text())["timings_s"]
    phases = timings["fit_phases"]
    spent = sum(
        v for name, v in phases.items() if name not in ("compile", "mu_probes", "group_test")
    )
    assert timings["compile"] >= 0.4 and phases["compile"] >= 0.4
    assert spent <= timings["fit"] + 0.05, timings


# --- never destroy data ---------------------------------------------------------------------
def _refused(tmp_path, monkeypatch, capsys, *extra):
    monkeypatch.chdir(tmp_path)
    status = main(["select", "in.csv", "--target", "label", "--drop", "id,note", *extra])
    return status, capsys.readouterr().err


def test_refuses_to_write_over_the_input_by_any_name(tmp_path, monkeypatch, capsys):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    before = (tmp_path / "in.csv").read_bytes()
    os.symlink(tmp_path / "in.csv", tmp_path / "link.csv")
    os.link(tmp_path / "in.csv", tmp_path / "hard.csv")
    (tmp_path / "sub").mkdir()
    for out in ["in.csv", "./sub/../in.csv", str(tmp_path / "in.csv"), "link.csv", "hard.csv"]:
        status, err = _refused(tmp_path, monkeypatch, capsys, "--output", out, "--force")
        assert status == 2, out
        assert "refusing to write over the input" in _one_error_line(err)
    for option in ["--report", "--save-model"]:
        status, err = _refused(tmp_path, monkeypatch, capsys, option, "link.csv", "--force")
        assert status == 2 and "refusing to write over the input" in err
    assert (tmp_path / "in.csv").read_bytes() == before


def test_refuses_an_existing_output_without_force(tmp_path, monkeypatch, capsys):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    for option, name in [
        ("--output", "sel.csv"),
        ("--report", "r.json"),
        ("--save-model", "m.json"),
    ]:
        (tmp_path / name).write_text("keep me")
        status, err = _refused(tmp_path, monkeypatch, capsys, option, name)
        assert status == 2
        assert f"{option} {name} exists; refusing to replace it" in _one_error_line(err)
        assert (tmp_path / name).read_text() == "keep me"


def test_refuses_two_outputs_with_one_name_and_a_missing_folder(tmp_path, monkeypatch, capsys):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    status, err = _refused(tmp_path, monkeypatch, capsys, "--output", "a.csv", "--report", "a.csv")
    assert status == 2 and "name the same file" in _one_error_line(err)
    status, err = _refused(tmp_path, monkeypatch, capsys, "--output", "no/such/dir/a.csv")
    assert status == 2 and "does not exist" in _one_error_line(err)
    assert sorted(os.listdir(tmp_path)) == ["in.csv"]


def test_force_replaces_an_existing_output_whole(tmp_path, monkeypatch, capsys):
    df = _planted()
    df.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "sel.csv").write_text("old\n")
    os.chmod(tmp_path / "sel.csv", 0o640)
    status, err = _refused(
        tmp_path,
        monkeypatch,
        capsys,
        "--output",
        "sel.csv",
        "--force",
        "--trees",
        "10",
        "--device",
        "cpu",
    )
    assert status == 0, err
    out = pd.read_csv(tmp_path / "sel.csv")
    assert list(out.columns)[-1] == "label" and len(out) == len(df)
    assert oct(os.stat(tmp_path / "sel.csv").st_mode & 0o777) == oct(0o640)
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "sel.csv"]  # no temporary file left


def test_an_interrupted_write_leaves_no_half_file(tmp_path, monkeypatch, capsys):
    import gpufs.cli as cli

    _planted().to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "old.csv").write_text("the previous result\n")

    def write_half_then_interrupt(df, path, fh):
        fh.write(b"c2,c4,label\n0.1,0.2,")
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_write_table", write_half_then_interrupt)
    for out, extra in [("new.csv", []), ("old.csv", ["--force"])]:
        status, err = _refused(
            tmp_path,
            monkeypatch,
            capsys,
            "--output",
            out,
            "--trees",
            "5",
            "--device",
            "cpu",
            *extra,
        )
        assert status == 130 and _one_error_line(err) == "error: interrupted"
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "old.csv"]  # no new.csv, no *.part
    assert (tmp_path / "old.csv").read_text() == "the previous result\n"


# --- the progress bar: on a terminal only ---------------------------------------------------
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_on_a_terminal(tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    # a terminal of 24 x 100 characters (a new pseudo-terminal has size 0, where tqdm draws
    # an empty bar)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpufs", "demo", "--trees", "5", "--device", "cpu"],
        cwd=tmp_path,
        env=env,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=300) == 0
    screen = b"".join(chunks).decode(errors="replace")
    assert "test accuracy" in screen
    assert "gpufs boosting" in screen and "5/5" in screen, screen


@pytest.mark.parametrize("pool_ranking", ["gain", "heldout"])
def test_verbose_shows_a_bar_per_mu_probe_and_a_loss_at_the_first_tree(capsys, pool_ranking):
    """Issue 36: the mu search under -k printed nothing (62 s of a CLI run), and the
    boosting bar showed loss=nan at tree 1. Issue 35: on this table (seed 2) the search's
    last probe reaches k in round 1 (two trees grown), so the pool fit resumes at round 1,
    where nothing was recorded yet: its bar showed loss=nan. Both rankings search and fit
    the pool on all rows, so both meet that case."""
    from gpufs import GBFSClassifier

    df = _planted(seed=2)
    X, y = df[[f"c{i}" for i in range(6)]].to_numpy(), df["label"].to_numpy()
    kw = dict(
        n_estimators=20,
        n_features_to_select=2,
        pool_ranking=pool_ranking,
        random_state=15,
        device="cpu",
    )
    est = GBFSClassifier(**kw, verbose=True).fit(X, y)
    err = capsys.readouterr().err
    n = len(est.mu_search_)
    assert n >= 1
    for i in range(1, n + 1):
        assert f"gpufs mu search, probe {i} (mu=" in err, err
    assert f"probe {n + 1} " not in err
    assert "reached=yes" in err and "gpufs boosting" in err
    # the case of the resumed round 1 (two trees grown)
    assert est.mu_search_[-1]["reached"] and est.mu_search_[-1]["n_trees"] == 2
    assert "loss=nan" not in err, err
    GBFSClassifier(**kw).fit(X, y)
    assert capsys.readouterr().err == ""  # verbose=False: silent


@pytest.mark.parametrize(
    "stdout_tty, stderr_tty, no_progress, shown",
    [
        (True, True, False, True),
        (True, True, True, False),
        (False, True, False, False),
        (True, False, False, False),
    ],
)
def test_progress_needs_both_streams_on_a_terminal_and_no_flag(
    monkeypatch, stdout_tty, stderr_tty, no_progress, shown
):
    import argparse

    import gpufs.cli as cli

    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_tty)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr_tty)
    assert cli._progress(argparse.Namespace(no_progress=no_progress)) is shown


# --- issue 26: nothing silent, nothing half-said ---------------------------------------------
def test_a_target_near_the_float64_limit_is_one_error_line(tmp_path, monkeypatch, capsys):
    """The task detection's RuntimeWarnings (scikit-learn's type_of_target casting 1e308)
    used to print two lines each before the error."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"])
    df["y"] = rng.uniform(-1, 1, 60) * 1.7e308
    df.to_csv(tmp_path / "big.csv", index=False)
    proc = _run_main(
        "select",
        "big.csv",
        "--target",
        "y",
        "--device",
        "cpu",
        cwd=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "overflow float64" in line and "y runs from" in line and " inf " not in line


def test_warnings_outside_the_fit_are_one_line_each(tmp_path, monkeypatch, capsys):
    """A warning raised before or after the fit (reading the table, say) is printed as one
    ``warning:`` line too, not in Python's two-line format."""
    import gpufs.cli as cli

    _planted().to_csv(tmp_path / "in.csv", index=False)
    real = cli.read_table

    def read_and_warn(path):
        import warnings

        warnings.warn(
            "Columns (3) have mixed types.\nSpecify dtype option on import.",
            UserWarning,
            stacklevel=1,
        )
        return real(path)

    monkeypatch.setattr(cli, "read_table", read_and_warn)
    status, err = _refused(tmp_path, monkeypatch, capsys, "--trees", "3", "--device", "cpu")
    assert status == 0, err
    assert err.splitlines() == [
        "warning: Columns (3) have mixed types. Specify dtype option on import."
    ], err


def test_force_refuses_targets_that_are_not_regular_files(tmp_path, monkeypatch, capsys):
    """``--force`` replaced a FIFO (or, as root, /dev/null) with a regular file (issue 26)."""
    import stat

    _planted().to_csv(tmp_path / "in.csv", index=False)
    os.mkfifo(tmp_path / "pipe.json")
    os.symlink(os.devnull, tmp_path / "null.csv")
    for option, name, kind in [
        ("--report", "pipe.json", "a FIFO"),
        ("--output", "null.csv", "a character device"),
        ("--save-model", "pipe.json", "a FIFO"),
    ]:
        status, err = _refused(tmp_path, monkeypatch, capsys, option, name, "--force")
        assert status == 2, err
        assert f"{option} {name} is {kind}" in _one_error_line(err)
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe.json").st_mode)
    assert os.readlink(tmp_path / "null.csv") == os.devnull
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "null.csv", "pipe.json"]


def test_explain_refuses_a_fifo_without_blocking(tmp_path, monkeypatch, capsys):
    import signal

    os.mkfifo(tmp_path / "m.json")
    monkeypatch.chdir(tmp_path)

    def raise_timeout(signum, frame):
        raise TimeoutError("gpufs explain blocked on the FIFO")

    old = signal.signal(signal.SIGALRM, raise_timeout)
    signal.alarm(10)
    try:
        assert main(["explain", "m.json"]) == 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert "m.json is a FIFO (named pipe), not a file" in _one_error_line(capsys.readouterr().err)


def _fit_must_not_start(monkeypatch):
    import gpufs.cli as cli

    def no_fit(args, task):
        raise AssertionError("the fit started before the outputs were checked")

    monkeypatch.setattr(cli, "_estimator", no_fit)


def test_an_input_that_is_no_regular_file_is_refused_at_once(tmp_path, monkeypatch, capsys):
    """Issue 36: a FIFO without a writer hung ``gpufs select`` in open(); a link to
    /dev/urandom said only "error: z.parquet"; a folder named by explain said "Is a
    directory: 3" (a file descriptor)."""
    import signal

    def raise_timeout(signum, frame):
        raise TimeoutError("blocked")

    os.mkfifo(tmp_path / "pipe.csv")
    os.symlink("/dev/urandom", tmp_path / "z.parquet")
    (tmp_path / "folder.json").mkdir()
    os.symlink(tmp_path / "folder.json", tmp_path / "link.json")
    monkeypatch.chdir(tmp_path)
    old = signal.signal(signal.SIGALRM, raise_timeout)
    signal.alarm(10)
    try:
        cases = [
            (
                ["select", "pipe.csv", "--target", "y"],
                "pipe.csv is a FIFO (named pipe), not a file",
            ),
            (
                ["select", "z.parquet", "--target", "y"],
                "z.parquet is a character device, not a file",
            ),
            (["explain", "folder.json"], "folder.json is a folder, not a file"),
            (["explain", "link.json"], "link.json is a folder, not a file"),
        ]
        for argv, message in cases:
            assert main(argv) == 2
            line = _one_error_line(capsys.readouterr().err)
            assert message in line and ": 3" not in line, line
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_compressed_output_without_its_library_is_refused_before_the_fit(
    tmp_path, monkeypatch, capsys
):
    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if it were not installed
    _fit_must_not_start(monkeypatch)
    status, err = _refused(tmp_path, monkeypatch, capsys, "--output", "sel.csv.zst")
    assert status == 2, err
    assert "sel.csv.zst" in _one_error_line(err) and "pip install zstandard" in err
    assert sorted(os.listdir(tmp_path)) == ["in.csv"]


def test_an_unwritable_output_folder_is_refused_before_the_fit(tmp_path, monkeypatch, capsys):
    import tempfile

    _planted().to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "ro").mkdir()
    real = tempfile.mkstemp

    def read_only_folder(*args, dir=None, **kw):  # root writes into a 0555 folder anyway
        if os.path.basename(str(dir)) == "ro":
            raise PermissionError(13, "Permission denied", os.path.join(dir, ".x.part"))
        return real(*args, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", read_only_folder)
    _fit_must_not_start(monkeypatch)
    for option in ["--output", "--report", "--save-model"]:
        name = "ro/out.csv" if option == "--output" else "ro/out.json"
        status, err = _refused(tmp_path, monkeypatch, capsys, option, name)
        assert status == 2, err
        line = _one_error_line(err)
        assert f"{option} {name}: cannot write in the folder" in line and "Permission" in line


def test_names_from_a_strangers_table_reach_the_terminal_escaped(tmp_path, monkeypatch, capsys):
    """Escape sequences in column names (a stranger's CSV, or model file) were printed as
    they are by select and explain: they could recolour, retitle or clear the terminal."""
    evil = "\x1b]0;pwned\x07\x1b[2J\x1b[31mc2\r\nfake line\u202e"
    df = _planted().rename(columns={"c2": evil})
    df.to_csv(tmp_path / "in.csv", index=False)
    proc = _run_main(
        "select",
        "in.csv",
        "--target",
        "label",
        "--drop",
        "id,note",
        "-k",
        "2",
        "--trees",
        "20",
        "--device",
        "cpu",
        "--save-model",
        "m.json",
        cwd=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    shown = r"\x1b]0;pwned\x07\x1b[2J\x1b[31mc2\r\nfake line\u202e"
    assert shown in proc.stdout
    proc2 = _run_main("explain", "m.json", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert proc2.returncode == 0, proc2.stderr
    assert shown in proc2.stdout
    for out in (proc.stdout, proc.stderr, proc2.stdout, proc2.stderr):
        assert not any(c in out for c in "\x1b\x07\r\u202e"), out
        assert "fake line" not in out.replace(shown, "")


# --- signals: real ones, sent to a gpufs process --------------------------------------------
#: Runs ``gpufs.cli.main`` with two hooks that print a line when the run reaches a stage, so
#: the test sends its signal there: FITTING when the fit starts, WRITING after 15 MB of the
#: output table were written (then the write waits).
_DRIVER = """
import sys, time
import gpufs.cli as cli

real_estimator = cli._estimator


def announcing_estimator(args, task):
    est = real_estimator(args, task)
    fit = est.fit

    def fit_and_say(*a, **k):
        print("FITTING", flush=True)
        return fit(*a, **k)

    est.fit = fit_and_say
    return est


def slow_write(df, path, fh):
    fh.write(b"x" * (15 << 20))
    print("WRITING", flush=True)
    time.sleep(120)


cli._estimator = announcing_estimator
if "--slow-write" in sys.argv:
    sys.argv.remove("--slow-write")
    cli._write_table = slow_write
sys.exit(cli.main(sys.argv[1:]))
"""


def _signal_at(tmp_path, stage, sig, *args):
    """Run the driver, send ``sig`` once it prints ``stage`` (FITTING: 2.5 s later),
    return (status, stdout, stderr)."""
    import time

    (tmp_path / "driver.py").write_text(_DRIVER)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "driver.py", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.strip() == stage:
                break
        assert seen and seen[-1].strip() == stage, ("".join(seen), proc.stderr.read())
        if stage == "FITTING":
            time.sleep(2.5)  # past the binning: in the boosting rounds, mostly numba code
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(seen) + out, err


def _long_fit_table(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 30))
    df = pd.DataFrame(X, columns=[f"c{i}" for i in range(30)])
    df["label"] = (X[:, 0] + X[:, 1] > 0).astype(int)
    df.to_csv(tmp_path / "in.csv", index=False)


def test_ctrl_c_during_the_fit_is_an_interrupt_not_an_internal_error(tmp_path):
    """SIGINT landing inside a numba call came out as "internal error (SystemError:
    CPUDispatcher(...) returned a result with an exception set)", status 1."""
    import signal

    _long_fit_table(tmp_path)
    # The same command once, 2 trees, in another folder: its kernels are compiled and cached
    # before the signal, so it lands in the boosting rounds as this test means (on CI's cold
    # cache it landed in the first compile). This test caught a SIGSEGV: a compiled level
    # function returned a named tuple, whose boxing ran Python code where the handler raised.
    warm = tmp_path.parent / (tmp_path.name + "-warm")
    warm.mkdir()
    (warm / "in.csv").write_bytes((tmp_path / "in.csv").read_bytes())
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpufs",
            "select",
            "in.csv",
            "--target",
            "label",
            "--trees",
            "2",
            "--depth",
            "6",
            "--device",
            "cpu",
            "--report",
            "r.json",
        ],
        cwd=warm,
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        timeout=600,
        check=True,
    )
    status, out, err = _signal_at(
        tmp_path,
        "FITTING",
        signal.SIGINT,
        "select",
        "in.csv",
        "--target",
        "label",
        "--trees",
        "5000",
        "--depth",
        "6",
        "--device",
        "cpu",
        "--report",
        "r.json",
    )
    assert (status, err) == (130, "error: interrupted\n"), (status, err)
    assert sorted(os.listdir(tmp_path)) == ["driver.py", "in.csv"]


def test_an_interrupt_that_numba_turned_into_a_system_error_is_an_interrupt(
    tmp_path, monkeypatch, capsys
):
    """What numba's dispatcher does with a KeyboardInterrupt raised by the signal handler
    while it runs: a SystemError. The command reports the signal, not an internal error."""
    import signal

    import gpufs.cli as cli

    class Dispatcher:
        def fit(self, X, y):
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt as exc:
                raise SystemError(
                    "CPUDispatcher(<function _level_step>) returned a result with an exception set"
                ) from exc

    _planted().to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.setattr(cli, "_estimator", lambda args, task: Dispatcher())
    status, err = _refused(tmp_path, monkeypatch, capsys)
    assert (status, err) == (130, "error: interrupted\n")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_sigterm_during_a_write_leaves_no_part_file(tmp_path):
    """SIGTERM (timeout, kill, a CI cancel) killed the process mid-write and left a hidden
    15 MB .part file; it is handled like Ctrl-C now."""
    import signal

    _planted().to_csv(tmp_path / "in.csv", index=False)
    status, out, err = _signal_at(
        tmp_path,
        "WRITING",
        signal.SIGTERM,
        "select",
        "in.csv",
        "--target",
        "label",
        "--drop",
        "id,note",
        "--trees",
        "3",
        "--device",
        "cpu",
        "--output",
        "sel.csv",
        "--slow-write",
    )
    assert (status, err) == (128 + signal.SIGTERM, "error: interrupted by SIGTERM\n"), err
    assert sorted(os.listdir(tmp_path)) == ["driver.py", "in.csv"]


#: A fit that first compiles a small numba function; the signal is sent from inside llvmlite's
#: object-cache callback (a ctypes callback, where Python prints "Exception ignored on calling
#: ctypes callback" and drops an exception): numba calls it when the function's machine code
#: is ready. ``--stall`` then keeps the callback busy (a long compile) until a second signal.
_COMPILE_DRIVER = """
import signal, sys, time
import numba
import numba.core.codegen as codegen
import gpufs.cli as cli

stall = "--stall" in sys.argv
if stall:
    sys.argv.remove("--stall")
sig = getattr(signal, sys.argv.pop(1))
original = codegen.JITCodeLibrary._object_compiled_hook.__func__
sent = []


def hook(cls, ll_module, buf):
    if not sent:
        sent.append(1)
        signal.raise_signal(sig)
        if stall:
            print("STALLING", flush=True)
            time.sleep(60)
    return original(cls, ll_module, buf)


codegen.JITCodeLibrary._object_compiled_hook = classmethod(hook)
real_estimator = cli._estimator


def compiling_estimator(args, task):
    est = real_estimator(args, task)
    fit = est.fit

    def compile_then_fit(*a, **k):
        numba.njit(lambda x: x + 1)(1)
        print("COMPILED", flush=True)
        return fit(*a, **k)

    est.fit = compile_then_fit
    return est


cli._estimator = compiling_estimator
sys.exit(cli.main(sys.argv[1:]))
"""


def _without_notice(err):
    """stderr less the compile notice (a loaded machine takes seconds for a small compile)."""
    from gpufs.cli._compile_watch import NOTICE

    return "".join(line for line in err.splitlines(keepends=True) if line.strip() != NOTICE)


def _compile_driver(tmp_path, *args, stall=False):
    (tmp_path / "driver.py").write_text(_COMPILE_DRIVER)
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.Popen(
        [sys.executable, "driver.py", *args, *(["--stall"] * stall)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_inside_llvmlites_callback_is_not_lost(tmp_path, sig):
    """Issue 36: the handler's exception was raised inside llvmlite's ctypes callback, where
    Python printed it and dropped it; the run went on, exited 0 and wrote its outputs."""
    import signal

    _planted().to_csv(tmp_path / "in.csv", index=False)
    proc = _compile_driver(
        tmp_path,
        sig,
        "select",
        "in.csv",
        "--target",
        "label",
        "--drop",
        "id,note",
        "--trees",
        "3",
        "--device",
        "cpu",
        "--output",
        "o.csv",
        "--report",
        "r.json",
    )
    out, err = proc.communicate(timeout=600)
    message = "interrupted" if sig == "SIGINT" else "interrupted by SIGTERM"
    assert (proc.returncode, _without_notice(err)) == (
        128 + getattr(signal, sig),
        f"error: {message}\n",
    ), (proc.returncode, err)
    assert sorted(os.listdir(tmp_path)) == ["cache", "driver.py", "in.csv"]


def test_a_second_signal_stops_the_run_at_once(tmp_path):
    """The first signal waits for the compile to end; a second one never waits (issue 36: a
    lost first signal made the run ignore a second SIGINT and a SIGTERM until SIGKILL)."""
    import signal
    import time

    _planted().to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "sel.csv.part").write_text("")  # a file of the user's, kept
    proc = _compile_driver(
        tmp_path,
        "SIGINT",
        "select",
        "in.csv",
        "--target",
        "label",
        "--drop",
        "id,note",
        "--device",
        "cpu",
        "--output",
        "o.csv",
        stall=True,
    )
    try:
        assert proc.stdout.readline().strip() == "STALLING"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 20
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, _without_notice(err)) == (130, "error: interrupted\n"), (
        proc.returncode,
        err,
    )
    assert sorted(os.listdir(tmp_path)) == ["cache", "driver.py", "in.csv", "sel.csv.part"]


#: The ``gpufs`` console script as pip writes it, after a finder that sends SIGINT when the
#: module named in argv[1] is imported (the moment the signal lands in ``import gpufs``).
_CONSOLE_SCRIPT = """
import signal, sys

TARGET = sys.argv.pop(1)


class InterruptAt:
    def find_spec(self, name, path=None, target=None):
        if name == TARGET:
            sys.meta_path.remove(self)
            signal.raise_signal(signal.SIGINT)
        return None


sys.meta_path.insert(0, InterruptAt())
import re
from gpufs.cli import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


@pytest.mark.parametrize(
    "module", ["gpufs._numba_setup", "gpufs._version", "gpufs.cli._cli_files", "argparse"]
)
def test_ctrl_c_during_import_gpufs_from_the_command_is_one_line(tmp_path, module):
    """Issue 36: SIGINT 0.2-0.4 s into the ``gpufs`` command (while ``import gpufs`` ran,
    before the command's handler existed) printed a 17-line traceback."""
    (tmp_path / "gpufs").write_text(_CONSOLE_SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "gpufs"), module, "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr) == (130, "error: interrupted\n"), proc.stderr
    # a library import (not the command) keeps Python's KeyboardInterrupt
    (tmp_path / "script.py").write_text(_CONSOLE_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "script.py"), "gpufs._version", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "KeyboardInterrupt" in proc.stderr


@pytest.mark.parametrize("delay", [0.8, 1.5, 3.0])
def test_ctrl_c_during_start_up_prints_one_line_not_a_traceback(tmp_path, delay):
    """Ctrl-C while numpy, scikit-learn and numba load (seconds) printed a traceback. Not
    covered: the interpreter's own first ~0.1 s (site's .pth files, importlib.metadata for
    the version), before any code of the command runs."""
    import signal
    import time

    _planted().to_csv(tmp_path / "in.csv", index=False)
    env = dict(os.environ, PYTHONPATH=ROOT)
    # 5000 trees: with a warm cache the default fit ended before the 3.0 s signal (status 0)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpufs",
            "select",
            "in.csv",
            "--target",
            "label",
            "--device",
            "cpu",
            "--trees",
            "5000",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    # On a fast machine with a warm cache the start-up is over before the 3 s signal, and the
    # input's warnings (its 'id' column) come first: they are the command's, not the signal's.
    said = "".join(line for line in err.splitlines(True) if not line.startswith("warning: "))
    # a signal before Python installed its handler ends the process silently (status -2)
    assert (proc.returncode, said) in [(130, "error: interrupted\n"), (-signal.SIGINT, "")], (
        proc.returncode,
        err,
        out,
    )


def test_explain_refuses_a_model_whose_parameters_contradict_it(tmp_path, monkeypatch, capsys):
    """Issue 26: gpufs explain printed such files as valid."""
    from gpufs import GBFSRegressor
    from gpufs.io import model_io

    X, y = _planted(200)[["c0", "c1", "c2"]].to_numpy(), np.arange(200.0)
    doc = model_io.to_document(GBFSRegressor(n_estimators=2, max_depth=2, device="cpu").fit(X, y))
    doc["params"]["max_depth"] = 100
    (tmp_path / "m.json").write_text(json.dumps(doc))
    monkeypatch.chdir(tmp_path)
    assert main(["explain", "m.json"]) == 2
    assert (
        "params.max_depth: The 'max_depth' parameter of GBFSRegressor must be"
        in _one_error_line(capsys.readouterr().err)
    )
