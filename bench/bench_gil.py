"""Two fits in two Python threads against the same two fits one after the other (CPU).

What a user running fits from threads sees (joblib's threading backend, Dask's threaded
scheduler): with compiled kernels that release the GIL the two fits' kernels overlap, so the
ratio threads / serial falls below 1; with kernels that hold it, the fits take turns (about 1,
or more from the switching). Each fit has ``n_jobs=1``. Both fits must give the serial fit's
probabilities, bit for bit, or the record says so.

Cases: ``small`` (1,500 x 56, 200 trees, depth 4) and ``20k`` (20,000 x 50, 100 trees).
The gpufs measured is the one imported: compare two commits by running this under each
(``PYTHONPATH=<worktree>`` and a ``NUMBA_CACHE_DIR`` of its own), alternating.

    python bench/bench_gil.py --repeats 3      # appended to bench/results/gil_cpu2.jsonl
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402
from _records import append_records  # noqa: E402
from bench_cpu_small import small_data  # noqa: E402


def cases():
    from sklearn.datasets import make_classification

    X, y = small_data()
    X2, y2 = make_classification(20000, 50, n_informative=10, random_state=1)
    return {"small": (X, y, 200), "20k": (X2.astype(np.float32), y2, 100)}


def fit(data):
    from gpufs import GBFSClassifier

    X, y, trees = data
    return GBFSClassifier(
        n_estimators=trees, max_depth=4, device="cpu", random_state=0, n_jobs=1, mu=0.05
    ).fit(X, y)


def one_pair(data):
    """(serial seconds, threads seconds, both threads' answers equal the serial fit's)."""
    t = time.perf_counter()
    ref = fit(data).predict_proba(data[0])
    fit(data)
    serial = time.perf_counter() - t
    out = [None, None]

    def run(i):
        out[i] = fit(data)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    both = time.perf_counter() - t
    same = all(np.array_equal(m.predict_proba(data[0]), ref) for m in out)
    return serial, both, same


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tag", default="")
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "gil_cpu2.jsonl")
    )
    args = ap.parse_args(argv)
    import gpufs

    data = cases()
    for d in data.values():  # compile and warm
        fit(d)
    machine = machine_info()
    records = []
    for r in range(args.repeats):
        for name, d in data.items():
            serial, both, same = one_pair(d)
            rec = {
                "case": name,
                "repeat": r,
                "tag": args.tag,
                "gpufs_path": os.path.dirname(gpufs.__file__),
                "serial_s": round(serial, 4),
                "threads_s": round(both, 4),
                "ratio": round(both / serial, 3),
                "same_answers": bool(same),
                "loadavg_1m": os.getloadavg()[0],
                "machine": machine,
            }
            records.append(rec)
            print(
                f"{name}: serial {serial:.3f} s, two threads {both:.3f} s, "
                f"ratio {both / serial:.2f}, same {same}",
                flush=True,
            )
    append_records(args.out, records)


if __name__ == "__main__":
    main()
