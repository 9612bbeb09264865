"""bench/quality_summary.py: the verdict per (table, k) from bench_quality records, and a later
file's runs replacing an earlier one's (how one family is re-measured)."""

import json
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), os.pardir, "bench")


@pytest.fixture(scope="module")
def qs():
    # quality_summary imports no runner (bench_quality sets NUMBA_NUM_THREADS on import,
    # which would break every later numba test in this process)
    sys.path.insert(0, BENCH)
    try:
        import quality_summary

        yield quality_summary
    finally:
        sys.path.remove(BENCH)


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
