"""bench/quality_summary.py: the verdict per (table, k) from bench_quality records, and a later
file's runs replacing an earlier one's (how one family is re-measured)."""

import importlib
import json
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), os.pardir, "bench")


def _bench_module(name):
    """Import bench/<name>.py with bench/ on the path while the fixture lives. Only modules
    that import no runner: bench_quality sets NUMBA_NUM_THREADS on import, which would break
    every later numba test in this process."""
    sys.path.insert(0, BENCH)
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(BENCH)


@pytest.fixture(scope="module")
def qs():
    yield from _bench_module("quality_summary")


def _write(path, scores):
    with open(path, "w") as f:
        for (method, split), score in scores.items():
            f.write(
                json.dumps(
                    {
                        "kind": "run",
                        "table": "t",
                        "k": 3,
                        "split": split,
                        "method": method,
                        "score": score,
                    }
                )
                + "\n"
            )
        f.write(json.dumps({"kind": "summary", "table": "t", "k": 3}) + "\n")


def test_importing_it_leaves_the_environment_alone(qs):
    assert "bench_quality" not in sys.modules


def test_verdict_and_merge(qs, tmp_path):
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    _write(
        old,
        {
            ("gbfs", 0): 0.80,
            ("gbfs", 1): 0.827,
            ("controlburn", 0): 0.70,
            ("controlburn", 1): 0.70,
            ("rf_topk", 0): 0.83,
            ("rf_topk", 1): 0.83,
        },
    )
    (row,) = qs.summarize(qs.load_runs([old]))
    assert row["best_gpufs"] == "gbfs" and row["best_peer"] == "rf_topk"
    assert row["gap"] == pytest.approx(0.83 - 0.8135) and not row["met"]
    assert row["met_splits"] == 1  # split 1 (.827 is within .005 of .83), not split 0
    # a re-run of controlburn replaces its records and changes the verdict
    _write(new, {("controlburn", 0): 0.83, ("controlburn", 1): 0.828})
    (row,) = qs.summarize(qs.load_runs([old, new]))
    assert row["best_gpufs"] == "controlburn" and row["met"]
    assert row["gap"] == pytest.approx(0.83 - 0.829)
    assert "met in 1 of 1 real-table cells" in qs.markdown(
        [row], ["gbfs", "controlburn", "rf_topk"]
    )


def test_exact_k_cost_counts_every_phase_gbfs_reports():
    """bench_quality's search_time_ratio sums EXACT_K_PHASES: every wall-time phase of an
    exact-k fit with the held-out ranking and stability refits must be among them (the ratio
    once left out the held-out ranking, the largest phase on the real tables)."""
    import numpy as np

    from gpufs import GBFSClassifier

    sys.path.insert(0, BENCH)
    try:
        from _quality_spec import EXACT_K_PHASES
    finally:
        sys.path.remove(BENCH)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    est = GBFSClassifier(
        n_features_to_select=2, stability_rounds=2, n_estimators=20, random_state=0
    ).fit(X, y)
    # not phases: the search's per-probe list, and compilation (outside every phase)
    phases = set(est.fit_times_) - {"mu_probes", "compile"}
    assert {"heldout", "stability"} <= phases
    assert phases <= set(EXACT_K_PHASES)


@pytest.fixture(scope="module")
def qj():
    yield from _bench_module("quality_judges")


def test_judges_import_no_runner_and_score_what_they_are_given(qj):
    """quality_judges.judge_scores: each judge refits the columns it is given (a signal
    column scores above a noise column under every judge), nothing selected scores NaN; a
    subset of judges is scored alone."""
    import math

    import numpy as np

    pytest.importorskip("lightgbm")
    assert "bench_quality" not in sys.modules
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=600) > 0).astype(int)
    args = (X[:400], y[:400], X[400:], y[400:], "classification")
    signal, noise = qj.judge_scores(*args, [0]), qj.judge_scores(*args, [1])
    assert set(signal) == set(qj.JUDGES)
    for judge in qj.JUDGES:
        assert signal[judge] > 0.9 and abs(noise[judge] - 0.5) < 0.15
    assert all(math.isnan(v) for v in qj.judge_scores(*args, []).values())
    assert set(qj.judge_scores(*args, [0], ["rf_all"])) == {"rf_all"}


def test_judges_write_records_the_summary_reads(qs, tmp_path):
    """quality_judges.py (in a child: it loads tables through the runner) rescores stored
    selections of a real table into one file per judge that quality_summary tabulates alone;
    planted-family records are left out."""
    import subprocess

    pytest.importorskip("lightgbm")
    records = tmp_path / "runs.jsonl"
    with open(records, "w") as f:
        for split in (0, 1):
            for method, features in (("gbfs", [0, 7]), ("rf_topk", ["mean radius", 22])):
                run = {"kind": "run", "table": "breast_cancer", "k": 2, "split": split}
                f.write(json.dumps({**run, "method": method, "features": features, "score": 0.9}))
                f.write("\n")
        f.write(json.dumps({**run, "table": "copies_clf", "method": "gbfs", "features": [0]}))
        f.write("\n")
    script = os.path.join(BENCH, "quality_judges.py")
    subprocess.run(
        [sys.executable, script, str(records), "--tag", "t", "--out-dir", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for judge in ("lgbm_d4", "lgbm_default", "rf_leaf5", "rf_all"):
        path = tmp_path / f"quality_t_{judge}.jsonl"
        with open(path) as f:
            runs = [json.loads(line) for line in f]
        assert len(runs) == 4 and {r["judge"] for r in runs} == {judge}
        assert {tuple(r["features"]) for r in runs} == {(0, 7), (0, 22)}  # names to indices
        assert all(0.8 < r["score"] < 1.0 and r["rf_score"] == 0.9 for r in runs)
        (row,) = qs.summarize(qs.load_runs([path]))
        assert (row["table"], row["k"], row["splits"]) == ("breast_cancer", 2, 2)


@pytest.fixture(scope="module")
def qf():
    yield from _bench_module("quality_forward")


def test_forward_order_adds_the_signals_first(qf):
    """quality_forward.forward_order: of a strong signal, a weaker one and four noise columns,
    the strong enters first and the weaker second; given candidates, only they are chosen.
    (Greedy, so a pure interaction whose columns are useless alone would not be found: that
    is the yardstick's known blind spot.)"""
    import numpy as np

    pytest.importorskip("lightgbm")
    assert "bench_quality" not in sys.modules
    rng = np.random.default_rng(1)
    X = rng.normal(size=(900, 6))
    y = (2 * X[:, 1] + X[:, 4] + 0.3 * rng.normal(size=900) > 0).astype(int)
    order = qf.forward_order(X, y, "classification", 3)
    assert len(order) == 3 and len(set(order)) == 3
    assert order[:2] == [1, 4]
    among = qf.forward_order(X, y, "classification", 2, [0, 4, 5])  # the strong one left out
    assert among[0] == 4 and len(among) == 2 and set(among) <= {0, 4, 5}
    assert qf.cv_loss(X, y, "classification", [1, 4]) < qf.cv_loss(X, y, "classification", [0])


def test_forward_compare_counts_cells_per_judge(qf, tmp_path, capsys):
    """quality_forward.compare: forward's mean over the splits is set against the best peer of
    each judge's records, within the goal's tolerance; GBFS's verdict is the summary's."""

    def write(path, runs):
        with open(path, "w") as f:
            for method, split, extra in runs:
                rec = {"kind": "run", "table": "t", "k": 3, "split": split, "method": method}
                f.write(json.dumps({**rec, **extra}) + "\n")

    rf, d4, fwd = tmp_path / "rf.jsonl", tmp_path / "d4.jsonl", tmp_path / "fwd.jsonl"
    write(rf, [(m, s, {"score": v}) for s in (0, 1) for m, v in (("gbfs", 0.70), ("l1", 0.80))])
    write(d4, [(m, s, {"score": v}) for s in (0, 1) for m, v in (("gbfs", 0.90), ("l1", 0.80))])
    write(fwd, [("forward_d4", s, {"score": 0.797 + 0.002 * s, "d4_score": 0.7}) for s in (0, 1)])
    met = qf.compare(str(fwd), [str(rf)], [str(d4)])
    assert met["rf"] == {"forward": 1, "gbfs": 0, "cells": 1}  # 0.798 is within 0.005 of 0.80
    assert met["lgbm_d4"] == {"forward": 0, "gbfs": 1, "cells": 1}
    assert "| t | 3 | rf | 0.7980 | 0.7000 | 0.8000 |" in capsys.readouterr().out


@pytest.fixture(scope="module")
def qe():
    yield from _bench_module("quality_elimination")


def test_elimination_ranks_fewer_rivals_each_step(qe):
    """quality_elimination.eliminating: keep the best half by saving - z se, rank again, stop
    once k remain; survivors keep the savings of the last ranking they were in, eliminated
    features rank below them (the later step higher), trees add up over the rankings."""
    import numpy as np

    value = np.array([8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0])  # feature 8: not in pool
    se = np.array([1.0, 10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    calls = []

    def rank(current):
        calls.append(list(current))
        scale = 1.0 + 0.1 * len(calls)  # a later ranking gives other savings
        return value * scale, se * scale, len(current)

    saving, out_se, trees = qe.eliminating(rank, k=2, keep=0.5, z=1.0)(range(8))
    assert calls == [list(range(8)), [0, 2, 3, 4]]  # feature 1's bound 7 - 10 < 0: out first
    assert trees == 12
    assert saving[0] == pytest.approx(8 * 1.2) and saving[2] == pytest.approx(6 * 1.2)
    assert out_se[0] == pytest.approx(1.2) and out_se[3] == 0.0
    assert saving[3] == saving[4] == -1e12 * 99 and saving[1] == saving[5] == -1e12 * 100
    assert saving[8] == 0.0
    ranking = np.argsort(-saving[:8], kind="stable")
    assert list(ranking[:4]) == [0, 2, 3, 4]

    calls.clear()
    qe.eliminating(rank, k=2, keep=0.5, z=0.0)(range(8))
    assert calls[1] == [0, 1, 2, 3]  # without the bound, feature 1 survives the first step
