"""Which numba threading layer survives real use: the measurements behind ``gpufs._threading``.

Each situation runs in a fresh subprocess with ``NUMBA_THREADING_LAYER`` set (and, for OpenMP,
with and without ``OMP_WAIT_POLICY=passive``), and the record says how it ended (``ok``, the exit
signal or status and the last error line, or ``timeout``) and how long it took:

- ``fork_after_fit``: the parent fits (parallel kernels), then a ``fork()`` child fits;
- ``two_threads``: two Python threads fit at once;
- ``busy_small``: the small 1,500 x 56, 200-tree fit beside two CPU-bound processes (wall time);
- ``quiet_small``: the same fit alone.

    python bench/bench_threads.py            # results appended to bench/results/threads.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BURNER = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass\n"

BIG = """
import numpy as np, gpufs
rng = np.random.default_rng(0)
X = rng.normal(size=(40000, 10)).astype(np.float32)
y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
def fit():
    return list(gpufs.GBFSClassifier(mu=0.01, n_estimators=6, max_depth=3, device="cpu",
                                     random_state=0).fit(X, y).selected_features_)
"""
SMALL = """
import numpy as np, gpufs, time
from sklearn.datasets import make_classification
X, y = make_classification(n_samples=1500, n_features=56, n_informative=8, n_redundant=8,
                           random_state=0)
X = X.astype(np.float32)
gpufs.GBFSClassifier(n_estimators=2, device="cpu").fit(X, y)
t0 = time.perf_counter()
gpufs.GBFSClassifier(mu=0.05, n_estimators=200, max_depth=4, device="cpu",
                     random_state=0).fit(X, y)
print("FIT_S", time.perf_counter() - t0)
"""
SCRIPTS = {
    "fork_after_fit": BIG
    + """
import multiprocessing as mp
parent = fit()
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=lambda: q.put(fit()))
p.start()
got = q.get(timeout=240)
p.join(30)
assert p.exitcode == 0 and got == parent, (p.exitcode, got, parent)
""",
    "two_threads": BIG
    + """
import threading
fit()
ts = [threading.Thread(target=fit) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
""",
    "quiet_small": SMALL,
    "busy_small": SMALL,
}


def run_case(case, layer, passive, timeout):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env["NUMBA_THREADING_LAYER"] = layer
    env.pop("OMP_WAIT_POLICY", None)
    if passive:
        env["OMP_WAIT_POLICY"] = "passive"
    burners = (
        [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(2)]
        if case == "busy_small"
        else []
    )
    t0 = time.perf_counter()
    try:
        r = subprocess.run(
            [sys.executable, "-c", SCRIPTS[case]],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        wall = time.perf_counter() - t0
        if r.returncode == 0:
            outcome = "ok"
        elif r.returncode < 0:
            outcome = f"killed by signal {-r.returncode}"
        else:
            outcome = f"exit {r.returncode}"
        err = [line for line in r.stderr.strip().splitlines() if line.strip()]
        fit_s = next(
            (float(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("FIT_S")),
            None,
        )
        return dict(
            outcome=outcome,
            wall_s=wall,
            fit_s=fit_s,
            last_error=err[-1][:300] if err and r.returncode else None,
        )
    except subprocess.TimeoutExpired:
        return dict(outcome="timeout", wall_s=time.perf_counter() - t0, fit_s=None, last_error=None)
    finally:
        for b in burners:
            b.kill()
            b.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", default="tbb,omp,omp-passive,workqueue")
    ap.add_argument("--cases", default="fork_after_fit,two_threads,quiet_small,busy_small")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "threads.jsonl")
    )
    args = ap.parse_args()
    with open(args.out, "a") as fh:
        for layer_spec in args.layers.split(","):
            layer, passive = layer_spec.replace("-passive", ""), layer_spec.endswith("-passive")
            for case in args.cases.split(","):
                machine = machine_info()
                rec = dict(
                    bench="threads",
                    layer=layer,
                    omp_passive=passive,
                    case=case,
                    **run_case(case, layer, passive, args.timeout),
                    machine=machine,
                )
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                print(
                    f"{layer_spec:12s} {case:15s} {rec['outcome']:22s} "
                    f"wall {rec['wall_s']:7.2f} s  fit {rec['fit_s']}  "
                    f"load {machine.get('loadavg_1m')}  {rec['last_error'] or ''}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
