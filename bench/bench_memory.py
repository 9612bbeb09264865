"""Peak memory of a GBFS fit on float32 input, measured in a fresh subprocess.

Goal (1M x 100 float32, a 400 MB input): peak RSS of the fit <= input + binned matrix + 300 MB,
i.e. no float64 copy of X. The child process imports everything, fills X in row blocks (so the
data generation itself never needs more than X), records its RSS, fits, and reports the peak
(``ru_maxrss``) against that baseline. ``--rows 10000000`` checks that a 10M x 100 fit runs on
this 24 GiB box (4 GB input, 1 GB binned).

    python bench/bench_memory.py                     # 1M x 100, 20 trees
    python bench/bench_memory.py --rows 10000000 --trees 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import json, resource, time
import numpy as np
import gpufs
from gpufs import GBFSClassifier

def rss_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")

n, d, trees = {rows}, {features}, {trees}
# Warm-up big enough for the parallel kernels and the thread pool (loaded once per process,
# not part of what a fit costs in memory).
GBFSClassifier(n_estimators=2, device="cpu").fit(
    np.random.default_rng(1).normal(size=(40_000, d)).astype(np.float32), np.arange(40_000) % 2)
X = np.empty((n, d), dtype=np.float32)
rng = np.random.default_rng(0)
for s in range(0, n, 250_000):
    X[s:s + 250_000] = rng.standard_normal((min(250_000, n - s), d), dtype=np.float32)
y = (X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] > 0).astype(np.int32)
peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = rss_mb()
t0 = time.perf_counter()
est = GBFSClassifier(mu=50.0, penalty_scaling="none", n_estimators=trees, max_depth=4,
                     device="cpu", random_state=0).fit(X, y)
fit_s = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(dict(rss_before_fit_mb=before, peak_before_fit_mb=peak_before,
                      peak_rss_mb=peak, fit_s=fit_s,
                      selected=[int(f) for f in est.selected_features_])))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--trees", type=int, default=20)
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "memory_cpu2.jsonl")
    )
    args = ap.parse_args()
    script = textwrap.dedent(CHILD).format(rows=args.rows, features=args.features, trees=args.trees)
    machine = machine_info()
    r = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    if r.returncode != 0:
        raise SystemExit(f"the fit failed ({r.returncode}):\n{r.stderr[-3000:]}")
    child = json.loads(r.stdout.strip().splitlines()[-1])
    input_mb = args.rows * args.features * 4 / 2**20
    binned_mb = args.rows * args.features * 1 / 2**20
    # The peak of the fit, above what the process held before it (interpreter, libraries,
    # X and y): what the fit itself adds.
    added = child["peak_rss_mb"] - child["rss_before_fit_mb"]
    rec = dict(
        bench="memory",
        rows=args.rows,
        features=args.features,
        trees=args.trees,
        dtype="float32",
        input_mb=input_mb,
        binned_mb=binned_mb,
        **child,
        fit_added_peak_mb=added,
        goal_added_mb=binned_mb + 300,
        goal_met=bool(added <= binned_mb + 300),
        machine=machine,
    )
    with open(args.out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(json.dumps({k: v for k, v in rec.items() if k != "machine"}, indent=1))
    print(
        f"the fit added {added:.0f} MB at its peak over {child['rss_before_fit_mb']:.0f} MB "
        f"(input {input_mb:.0f} MB already held); goal: <= binned {binned_mb:.0f} + 300 MB"
    )


if __name__ == "__main__":
    main()
