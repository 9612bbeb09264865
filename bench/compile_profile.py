"""Where the first fit's compile time goes: every numba compile of a workload, with its CPU
seconds (total, and "self": less the compiles nested inside it), from ``numba.core.event``.

Run it with a cold cache to see the whole first compile, then again to see what a second
workload adds (issue 36: after the first fit, another task, dtype or family should compile
nothing)::

    NUMBA_CACHE_DIR=$(mktemp -d) python bench/compile_profile.py demo
    NUMBA_CACHE_DIR=<the same> python bench/compile_profile.py tasks families

Workloads: ``demo`` (``gpufs demo``'s fit: binary GBFS on breast cancer, 100 trees),
``tasks`` (regression, multiclass, float32 input, exact k), ``families`` (ControlBurn,
stagewise, multitask GBFS). CPU time (``time.process_time``), so a busy machine inflates the
numbers less than wall time. One JSON line per workload is appended to
``bench/results/compile_cpu<cores>.jsonl``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from numba.core import event  # noqa: E402

from _machine import machine_info  # noqa: E402


class _Listener(event.Listener):
    """(total, self) CPU seconds of every compile, nested compiles subtracted from "self"."""

    def __init__(self):
        self.open = {}
        self.stack = []
        self.records = []

    def on_start(self, ev):
        self.open[id(ev.data["dispatcher"]), str(ev.data["args"])] = time.process_time()
        self.stack.append(0.0)

    def on_end(self, ev):
        key = id(ev.data["dispatcher"]), str(ev.data["args"])
        total = time.process_time() - self.open.pop(key, time.process_time())
        nested = self.stack.pop()
        if self.stack:
            self.stack[-1] += total
        fn = getattr(ev.data["dispatcher"], "py_func", None)
        name = f"{fn.__module__}.{fn.__qualname__}" if fn else str(ev.data["dispatcher"])
        self.records.append((name, total, total - nested))


def _workloads():
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    import gpufs

    X, y = load_breast_cancer(return_X_y=True)

    def demo():
        gpufs.GBFSClassifier(mu=0.1, n_estimators=100, max_depth=4, device="cpu").fit(X, y)

    def tasks():
        gpufs.GBFSRegressor(n_estimators=20, device="cpu").fit(X, X[:, 0] + y)
        gpufs.GBFSClassifier(n_estimators=20, device="cpu").fit(X, (X[:, 0] > 14) + y)
        gpufs.GBFSClassifier(n_estimators=20, device="cpu").fit(X.astype(np.float32), y)
        gpufs.GBFSClassifier(n_estimators=20, device="cpu", n_features_to_select=3).fit(X, y)

    def families():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gpufs.ControlBurnClassifier(
                n_features_to_select=3, random_state=0, max_trees_per_round=5
            ).fit(X, y)
            gpufs.StagewiseClassifier(n_features_to_select=3).fit(X, y)
            gpufs.MultiTaskGBFSRegressor(n_estimators=10).fit([X, X], [X[:, 0], X[:, 1] + y])

    return {"demo": demo, "tasks": tasks, "families": families}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="+", choices=["demo", "tasks", "families"])
    ap.add_argument("--top", type=int, default=15, help="compiles to print, by self time")
    ap.add_argument("--out", default=None, help="JSON lines file (default: bench/results/...)")
    args = ap.parse_args(argv)
    listener = _Listener()
    event.register("numba:compile", listener)
    runs = _workloads()
    info = machine_info()
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    out = args.out or os.path.join(results, f"compile_cpu{info['cpus_usable']}.jsonl")
    for name in args.workloads:
        listener.records.clear()
        t = time.process_time()
        runs[name]()
        cpu = time.process_time() - t
        selfs = collections.Counter()
        for fn, _, own in listener.records:
            selfs[fn] += own
        print(f"{name}: {cpu:.1f} s CPU, {len(listener.records)} compiles")
        for fn, own in selfs.most_common(args.top):
            print(f"  {own:7.2f} s  {fn}")
        record = {
            "bench": "compile_profile",
            "workload": name,
            "cpu_s": cpu,
            "n_compiles": len(listener.records),
            "compile_self_s": dict(selfs.most_common(args.top)),
            "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR"),
            "loadavg_1m": os.getloadavg()[0],
            "machine": info,
        }
        with open(out, "a") as fh:
            fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
