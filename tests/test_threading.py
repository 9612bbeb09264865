"""The threading model (gpufs._threading): TBB layer, n_jobs, fork children, two threads, burners.

What users hit first on shared machines (see the module docstring of ``gpufs._threading``):
GNU OpenMP kills a fork() child that fits after its parent did, numba's workqueue layer aborts
when two Python threads fit at once, and spinning OpenMP workers made small fits 10-30x slower
beside busy processes. These tests run each situation for real (in a subprocess where a failure
could take the test process down) and check the answers, never the time: a generous timeout is
the only clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

import gpufs
from gpufs import _threading
from gpufs.backends.cpu import PARALLEL_MIN_WORK, CPUBackend
from gpufs.engine.binning import BinMapper
from gpufs.engine.boosting import BoostingParams, DeviceRows, fit_boosting
from gpufs.engine.grower import TreeParams
from gpufs.engine.objectives import make_objective
from gpufs.engine.penalties import PenaltyState

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 600  # seconds: only a hang or a crash can reach it, never a slow machine

# Big enough that the level step takes its parallel drivers (rows x features above
# PARALLEL_MIN_WORK), small enough for a few seconds per fit.
N_ROWS, N_COLS = 40_000, 10
assert N_ROWS * N_COLS > PARALLEL_MIN_WORK

_DATA = """
import numpy as np
rng = np.random.default_rng(0)
X = rng.normal(size=(%d, %d)).astype(np.float32)
y = (X[:, 0] + 0.5 * X[:, 3] * X[:, 4] + 0.3 * rng.normal(size=len(X)) > 0).astype(int)
""" % (N_ROWS, N_COLS)


def _data():
    scope = {}
    exec(_DATA, scope)
    return scope["X"], scope["y"]


def _model(**kw):
    return gpufs.GBFSClassifier(
        mu=0.01, n_estimators=6, max_depth=3, device="cpu", random_state=0, **kw
    )


def _tree_bytes(est):
    """The fitted ensemble as one comparable value (every array of every tree)."""
    d = est.ensemble_.to_dict() if hasattr(est.ensemble_, "to_dict") else None
    if d is not None:
        return repr(d)
    return repr(
        [
            (t.feature.tobytes(), t.threshold_bin.tobytes(), t.value.tobytes())
            for t in est.ensemble_.trees
        ]
    )


def _run(script, timeout=TIMEOUT, env=None):
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


# --- the layer and n_jobs -------------------------------------------------------------------
def test_tbb_layer_is_chosen_and_used():
    if os.environ.get("NUMBA_THREADING_LAYER"):
        pytest.skip("the user's NUMBA_THREADING_LAYER is respected")
    assert _threading.configure() == "tbb"
    X, y = _data()
    _model(n_jobs=-1).fit(X, y)
    assert numba.threading_layer() == "tbb"


@pytest.mark.parametrize("layer", ["tbb", "threadsafe"])
def test_a_users_layer_choice_finds_tbb_in_a_virtual_environment(layer):
    """The user's NUMBA_THREADING_LAYER is kept, and TBB is loadable for it: the wheel's
    libtbb is not on the loader's path of a venv, so numba alone fails with 'pip install tbb'
    (seen in bench/bench_threads.py before gpufs loaded the library also in this case)."""
    env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
    proc = _run(
        _DATA
        + """
import numba, gpufs
gpufs.GBFSClassifier(mu=0.01, n_estimators=2, max_depth=3, device="cpu").fit(X, y)
print("layer", numba.config.THREADING_LAYER, numba.threading_layer())
""",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-2:] == [layer, "tbb"], proc.stdout


def test_effective_n_jobs_has_sklearn_meaning():
    n_max = int(numba.config.NUMBA_NUM_THREADS)
    assert _threading.effective_n_jobs(None) == n_max
    assert _threading.effective_n_jobs(-1) == n_max
    assert _threading.effective_n_jobs(-2) == max(1, n_max - 1)
    assert _threading.effective_n_jobs(-10_000) == 1
    assert _threading.effective_n_jobs(1) == 1
    assert _threading.effective_n_jobs(10_000) == n_max
    with pytest.raises(ValueError, match="n_jobs == 0"):
        _threading.effective_n_jobs(0)


@pytest.mark.parametrize("est", [gpufs.GBFSClassifier, gpufs.ControlBurnClassifier])
def test_n_jobs_zero_is_refused_before_fitting(est):
    X, y = _data()
    with pytest.raises(InvalidParameterError, match="n_jobs"):
        est(n_jobs=0, device="cpu").fit(X[:50], y[:50])


def test_thread_limit_nests_and_restores():
    before = numba.get_num_threads()
    with _threading.thread_limit(1) as n:
        assert n == 1 and numba.get_num_threads() == 1
        with _threading.thread_limit(None):  # inner None keeps the outer limit
            assert numba.get_num_threads() == 1
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before


def test_estimator_n_jobs_reaches_the_boosting_loop(monkeypatch):
    import gpufs.selectors._boost_setup as setup_module

    seen = []
    real = setup_module.fit_boosting

    def spy(*args, **kwargs):
        seen.append(numba.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(setup_module, "fit_boosting", spy)
    X, y = _data()
    _model(n_jobs=1).fit(X[:2000], y[:2000])
    assert seen == [1]
    if int(numba.config.NUMBA_NUM_THREADS) > 1:
        seen.clear()
        _model(n_jobs=-1).fit(X[:2000], y[:2000])
        assert seen == [int(numba.config.NUMBA_NUM_THREADS)]


# --- the same trees on any number of threads and tasks ----------------------------------------
def test_one_thread_and_all_threads_grow_the_same_trees():
    X, y = _data()
    one = _model(n_jobs=1).fit(X, y)
    every = _model(n_jobs=-1).fit(X, y)
    assert _tree_bytes(one) == _tree_bytes(every)
    np.testing.assert_array_equal(one.selected_features_, every.selected_features_)


def test_many_small_tasks_grow_the_same_trees_as_serial_kernels():
    """Tiny tasks and a zero parallel threshold force every parallel driver, with many tasks
    per node, against the plain serial loops: the int64 histograms make the sums exact."""
    X, y = _data()
    X, y = X[:6000], y[:6000]
    mapper = BinMapper(63, random_state=0).fit(X)
    obj = make_objective("classification", 2)
    params = BoostingParams(n_estimators=4, tree=TreeParams(max_depth=4))
    fits = []
    for backend in (
        CPUBackend(n_threads=1, parallel_min_work=1 << 62),
        CPUBackend(n_threads=2, rows_per_task=257, parallel_min_work=0),
    ):
        Xb = mapper.transform(X, backend)
        pen = PenaltyState(0.02, np.ones(X.shape[1]), np.arange(X.shape[1]), "root_sse")
        rows = DeviceRows(backend, Xb, y.astype(np.float64))
        ens, _, _ = fit_boosting(backend, rows, obj, pen, mapper, params)
        fits.append(repr(ens.to_dict()))
    assert fits[0] == fits[1]


# --- real conditions: fork, two threads, busy machine ---------------------------------------
def test_fork_child_fits_after_the_parent_fitted():
    script = (
        _DATA
        + """
import multiprocessing as mp
import gpufs
def fit():
    est = gpufs.GBFSClassifier(mu=0.01, n_estimators=6, max_depth=3, device="cpu",
                               random_state=0, n_jobs=-1).fit(X, y)
    # exact k: its cross-fitted ranking folds and stability refits run on worker threads
    k = gpufs.GBFSClassifier(n_features_to_select=2, stability_rounds=2, n_estimators=10,
                             max_depth=3, device="cpu", random_state=0, n_jobs=-1)
    k.fit(X[:3000], y[:3000])
    return [int(f) for f in est.selected_features_], [int(f) for f in k.selected_features_]
def child(q):
    q.put(fit())
parent = fit()
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
got = q.get(timeout=500)
p.join(60)
assert p.exitcode == 0, p.exitcode
assert got == parent, (got, parent)
print("OK", parent)
"""
    )
    r = _run(script)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK" in r.stdout


def test_two_threads_fit_at_once():
    script = (
        _DATA
        + """
import threading
import gpufs
def fit(out, i):
    est = gpufs.GBFSClassifier(mu=0.01, n_estimators=6, max_depth=3, device="cpu",
                               random_state=0, n_jobs=-1).fit(X, y)
    # exact k: its cross-fitted ranking folds and stability refits start worker threads of
    # their own inside each of these threads
    k = gpufs.GBFSClassifier(n_features_to_select=2, stability_rounds=2, n_estimators=10,
                             max_depth=3, device="cpu", random_state=0, n_jobs=-1)
    k.fit(X[:3000], y[:3000])
    out[i] = (list(est.selected_features_), est.predict_proba(X[:500]).tobytes(),
              list(k.selected_features_), k.selection_pool_["frequency"],
              k.predict_proba(X[:500]).tobytes())
alone = {}
fit(alone, 0)
out = {}
threads = [threading.Thread(target=fit, args=(out, i)) for i in range(2)]
for t in threads: t.start()
for t in threads: t.join(500)
assert not any(t.is_alive() for t in threads)
assert out[0] == alone[0] and out[1] == alone[0]
print("OK")
"""
    )
    r = _run(script)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK" in r.stdout


def test_every_compiled_cpu_entry_point_releases_the_gil():
    """Fits in several Python threads (joblib's threading backend, Dask's threaded scheduler,
    ``test_two_threads_fit_at_once``) run their kernels at the same time only if every compiled
    function Python calls releases the GIL (``nogil=True``). A function compiled to be inlined
    (``inline="always"``) is one Python calls only when it is also cached (``cache=True``, as
    ``level._is_tiny`` and ``level._gain_bound_pays``, which the backend calls); the others are
    skipped."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import gpufs.backends.cpu as cpu

    names = [f"gpufs.backends.cpu.{m.name}" for m in pkgutil.iter_modules(cpu.__path__)]
    names += ["gpufs.rules._group_scan", "gpufs.data._input"]
    checked, holding = [], []
    for mod in map(importlib.import_module, names):
        for name, obj in vars(mod).items():
            if not isinstance(obj, CPUDispatcher) or obj.py_func.__module__ != mod.__name__:
                continue
            called_from_python = type(obj._cache).__name__ != "NullCache"
            if obj.targetoptions.get("inline") == "always" and not called_from_python:
                continue
            checked.append(name)
            if not obj.targetoptions.get("nogil"):
                holding.append(f"{mod.__name__}.{name}")
    assert not holding, holding
    assert {
        "_level_step_flat",
        "_root_histogram",
        "_predict_binned",
        "_scan_nonfinite",
        "_gain_bound_pays",
    } <= set(checked)


def test_fit_completes_beside_cpu_burners():
    burner = "import time\nend = time.time() + %d\nwhile time.time() < end: pass\n" % TIMEOUT
    burners = [subprocess.Popen([sys.executable, "-c", burner]) for _ in range(2)]
    try:
        script = (
            _DATA
            + """
import gpufs
est = gpufs.GBFSClassifier(mu=0.01, n_estimators=6, max_depth=3, device="cpu",
                           random_state=0).fit(X, y)
print("OK", list(est.selected_features_))
"""
        )
        r = _run(script)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert r.returncode == 0, r.stderr[-3000:]
    X, y = _data()
    quiet = _model().fit(X, y)
    assert r.stdout.strip() == "OK " + str(list(quiet.selected_features_))


def test_current_limit_follows_the_blocks_and_the_backend_reads_it(monkeypatch):
    """Inside ``thread_limit`` the backend's thread count is the block's (a thread-local read,
    no numba lock per call); nested ``n_jobs=None`` keeps the outer limit; outside, numba's."""
    be = CPUBackend()
    outside = _threading.current_limit()
    with _threading.thread_limit(1):
        assert _threading.current_limit() == 1 == numba.get_num_threads()
        calls = []
        real = numba.get_num_threads
        monkeypatch.setattr(numba, "get_num_threads", lambda: calls.append(1) or real())
        assert be._threads() == 1 and not calls  # numba not asked
        monkeypatch.setattr(numba, "get_num_threads", real)
        with _threading.thread_limit(None):
            assert _threading.current_limit() == 1
        if numba.config.NUMBA_NUM_THREADS > 1:
            with _threading.thread_limit(2):
                assert _threading.current_limit() == 2 == be._threads()
        assert _threading.current_limit() == 1
    assert _threading.current_limit() == outside
    if outside is None:
        assert be._threads() == numba.get_num_threads()
    assert CPUBackend(n_threads=3)._threads() == 3


# --- independent fits side by side (``run_side_by_side``) -------------------------------------
def _recording_task(i, seen):
    import threading

    def task(stop):
        seen.append((i, threading.current_thread().name, _threading.current_limit()))
        return i * i

    return task


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two threads")
def test_side_by_side_runs_tasks_on_worker_threads_with_a_share_of_the_threads():
    """Two threads, five tasks: the results in task order, every task on a worker thread
    under a limit of one thread (2 // 2), none on the calling thread."""
    seen = []
    got = _threading.run_side_by_side([_recording_task(i, seen) for i in range(5)], 2)
    assert got == [0, 1, 4, 9, 16]
    assert sorted(i for i, _, _ in seen) == list(range(5))
    assert all(name.startswith("gpufs-side") and n == 1 for _, name, n in seen), seen


@pytest.mark.parametrize("why", ["one_thread", "unsafe_layer"])
def test_side_by_side_is_serial_on_one_thread_or_an_unsafe_layer(why, monkeypatch):
    """One thread, or a threading layer that aborts when two Python threads launch parallel
    kernels (workqueue): the tasks run one at a time on the calling thread, in order."""
    import threading

    n_threads = 1 if why == "one_thread" else 2
    if why == "unsafe_layer":
        monkeypatch.setattr(_threading, "layer_is_thread_safe", lambda: False)
    seen = []
    got = _threading.run_side_by_side([_recording_task(i, seen) for i in range(3)], n_threads)
    assert got == [0, 1, 4]
    assert [i for i, _, _ in seen] == [0, 1, 2]
    assert {name for _, name, _ in seen} == {threading.current_thread().name}


def test_layer_safety_follows_the_layer_asked_for(monkeypatch):
    """TBB and OpenMP (and numba's names for a choice between them) are thread-safe;
    workqueue is not, nor is a default choice numba has not made yet."""
    for layer, safe in [("tbb", True), ("omp", True), ("threadsafe", True), ("workqueue", False)]:
        monkeypatch.setattr(numba.config, "THREADING_LAYER", layer)
        monkeypatch.setattr(numba, "threading_layer", lambda: "workqueue")
        assert _threading.layer_is_thread_safe() is safe, layer
    monkeypatch.setattr(numba.config, "THREADING_LAYER", "default")

    def not_chosen():
        raise ValueError("Threading layer is not initialized.")

    monkeypatch.setattr(numba, "threading_layer", not_chosen)
    assert _threading.layer_is_thread_safe() is False
    monkeypatch.setattr(numba, "threading_layer", lambda: "omp")
    assert _threading.layer_is_thread_safe() is True


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two threads")
def test_a_failing_task_stops_the_others_and_its_error_is_raised():
    """Task 1 fails while task 0 loops until told to stop: task 0 sees ``stop`` and raises
    ``Stopped``; the caller gets task 1's error (not ``Stopped``), after both ended."""
    import threading
    import time

    started, ended = threading.Event(), []

    def looping(stop):
        started.set()
        deadline = time.monotonic() + 60.0
        while not stop.is_set():
            if time.monotonic() > deadline:
                return "never told to stop"
            time.sleep(0.001)
        ended.append(0)
        raise _threading.Stopped

    def failing(stop):
        started.wait(10.0)
        raise ValueError("fold 1 failed")

    def later(stop):
        if stop.is_set():
            raise _threading.Stopped
        ended.append(2)
        return 2

    with pytest.raises(ValueError, match="fold 1 failed"):
        _threading.run_side_by_side([looping, failing, later], 2)
    assert 0 in ended  # the loop saw ``stop`` before the error reached the caller
