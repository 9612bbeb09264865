"""bench/ab.py's pure logic: arguments, pairing, ratios and spread, the table. Times nothing."""

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "ab.py")
_spec = importlib.util.spec_from_file_location("bench_ab", _PATH)
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


def test_defaults_and_quick():
    a = ab.parse_args([])
    assert a.shapes == list(ab.SHAPES) and a.pairs == 5 and a.rows == 1_000_000
    assert a.trees == 30 and a.base is None and not a.lightgbm
    q = ab.parse_args(["--quick", "--shapes", "dense_1t, k3", "--base", "954a29e"])
    assert q.shapes == ["dense_1t", "k3"] and q.pairs == 2 and q.rows == 200_000
    assert q.trees == 10 and q.base == "954a29e"
    assert ab.parse_args(["--quick", "--pairs", "7", "--rows", "5000"]).pairs == 7


@pytest.mark.parametrize(
    "argv", [["--shapes", "dense_3t"], ["--shapes", ","], ["--pairs", "0"], ["--trees", "1"]]
)
def test_bad_arguments_are_refused(argv):
    with pytest.raises(SystemExit):
        ab.parse_args(argv)


def test_threads_and_pairs_alternate():
    assert ab.shape_threads("dense_1t", 2) == 1 and ab.shape_threads("dense_2t", 1) == 2
    assert ab.shape_threads("small", 3) == 3
    assert [ab.order_of_pair(i) for i in range(3)] == [
        ("base", "head"),
        ("head", "base"),
        ("base", "head"),
    ]


def test_environment_and_pinning():
    env = ab.run_env({"PYTHONPATH": "/x", "HOME": "/h"}, "/side", "/cache", 2)
    assert env["PYTHONPATH"] == "/side" + os.pathsep + "/x" and env["HOME"] == "/h"
    assert env["NUMBA_CACHE_DIR"] == "/cache"
    assert all(
        env[k] == "2"
        for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    )
    assert ab.run_env({}, "/side", "/c", 1)["PYTHONPATH"] == "/side"
    assert ab.pin_prefix(1, "/usr/bin/taskset", 2) == ["/usr/bin/taskset", "-c", "0"]
    assert ab.pin_prefix(2, "ts", 2) == ["ts", "-c", "0-1"]
    assert ab.pin_prefix(4, "ts", 2) == ["ts", "-c", "0-1"]  # no more cores than there are
    assert ab.pin_prefix(2, None, 2) == []


def test_head_cache_is_keyed_by_the_sources_content(tmp_path):
    """The head cache's name follows the package's sources (``source_digest``): numba checks
    only a kernel's own file, so a cache kept across an edit of a file it inlines from would
    serve a stale kernel."""
    pkg = tmp_path / "gpufs" / "rules"
    pkg.mkdir(parents=True)
    (tmp_path / "cuda_kernels").mkdir()
    (pkg / "_gain.py").write_text("A = 1\n")
    (tmp_path / "cuda_kernels" / "k.py").write_text("B = 1\n")
    (pkg / "notes.txt").write_text("not code\n")
    first = ab.source_digest(str(tmp_path))
    assert first == ab.source_digest(str(tmp_path))  # a pure function of the contents
    os.utime(pkg / "_gain.py", (1, 1))
    assert ab.source_digest(str(tmp_path)) == first  # time stamps do not count
    (pkg / "notes.txt").write_text("still not code\n")
    assert ab.source_digest(str(tmp_path)) == first  # only .py files count
    (pkg / "_gain.py").write_text("A = 2\n")
    changed = ab.source_digest(str(tmp_path))
    assert changed != first
    (pkg / "_gain.py").write_text("A = 1\n")
    (tmp_path / "cuda_kernels" / "k.py").write_text("B = 2\n")
    assert ab.source_digest(str(tmp_path)) not in (first, changed)


def _runs(base, head, loads=None, lgb=None):
    runs = []
    for i, (b, h) in enumerate(zip(base, head)):
        load = loads[i] if loads else 1.0
        runs.append(dict(side="base", pair=i, value=b, load=load))
        runs.append(
            dict(side="head", pair=i, value=h, load=load, **({"lightgbm": lgb[i]} if lgb else {}))
        )
    return runs


def test_summary_is_the_median_of_paired_ratios():
    # pairs' ratios 0.5, 1.1, 0.9: median 0.9, spread 0.5 - 1.1 (not the ratio of medians)
    s = ab.summarize(
        "small",
        _runs([2.0, 1.0, 1.0], [1.0, 1.1, 0.9], loads=[1.0, 3.0, 2.0], lgb=[0.5, 0.5, 0.45]),
    )
    assert s["pairs"] == 3 and s["ratio"] == pytest.approx(0.9)
    assert s["ratio_min"] == pytest.approx(0.5) and s["ratio_max"] == pytest.approx(1.1)
    assert s["base"] == 1.0 and s["head"] == 1.0
    assert s["load_mean"] == pytest.approx(2.0) and s["load_max"] == 3.0
    assert s["head_over_lightgbm"] == pytest.approx(2.0)


def test_incomplete_pairs_are_left_out_and_none_is_an_error():
    runs = _runs([1.0, 1.0], [1.2, 0.8])
    runs.append(dict(side="head", pair=5, value=9.0, load=1.0))  # its base run failed
    s = ab.summarize("k3", runs)
    assert s["pairs"] == 2 and s["ratio"] == pytest.approx(1.0)
    assert "head_over_lightgbm" not in s
    with pytest.raises(ValueError, match="no complete"):
        ab.summarize("k3", [dict(side="head", pair=0, value=1.0, load=0.0)])


def test_table_flags_a_slower_shape():
    fast = ab.summarize("dense_1t", _runs([1.0, 1.0], [0.9, 0.95]))
    slow = ab.summarize("counts", _runs([1.0, 1.0], [1.05, 1.04], lgb=[1.0, 1.0]))
    t = ab.markdown_table([fast, slow], "abc", "def + working tree")
    lines = t.splitlines()
    assert lines[0] == "A/B: head def + working tree against base abc"
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header[0] == "shape" and header[-2] == "head / LightGBM" and header[-1] == "verdict"
    row1 = [c.strip() for c in lines[4].strip("|").split("|")]
    row2 = [c.strip() for c in lines[5].strip("|").split("|")]
    assert row1[0] == "dense_1t" and row1[1] == "per_tree_s" and row1[4] == "0.925"
    assert row1[5] == "0.900-0.950" and row1[-1] == "ok" and row1[-2] == ""
    assert row2[4] == "1.045" and row2[-1] == "slower: state why" and row2[-2] == "1.045"
    assert ab.verdict(1.03) == "ok" and ab.verdict(1.031) != "ok"
    # without LightGBM there is no such column
    assert "LightGBM" not in ab.markdown_table([fast], "a", "b")


def test_metric_choice():
    assert ab.parse_args([]).metric == "wall"
    assert ab.parse_args(["--metric", "cpu"]).metric == "cpu"
    with pytest.raises(SystemExit):
        ab.parse_args(["--metric", "cycles"])
