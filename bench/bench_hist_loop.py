"""Row-wise against column-wise CPU histograms, by shape: the measurement behind
``gpufs.backends.cpu.histogram.use_columns`` (issue 24, item 3).

For each shape (rows n, features d, value bins per feature) of uniform random bins, one
``build_histograms`` call of the root (every row) and of a child (half the rows, scattered),
forced row-wise and column-wise, on 1 and 2 threads: the best of three timings of a loop of
calls, in nanoseconds per histogram update (n x d). The two loops fill the same histogram,
bit for bit (tests/test_hist_layout.py); only their speed differs.

    python bench/bench_hist_loop.py                  # the grid, results appended
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402

SHAPES = [
    (200, 500),
    (2000, 56),
    (2000, 500),
    (20000, 100),
    (20000, 500),
    (200000, 100),
    (20000, 2000),
    (2000, 5000),
]


def measure(n, d, n_bins, rng):
    from gpufs.backends.cpu import CPUBackend
    from gpufs.backends.cpu import histogram as H
    from gpufs.backends.cpu._args import Run, Segments
    from gpufs.rules._hist_layout import HistLayout

    Xb = rng.integers(0, n_bins, size=(n, d)).astype(np.uint8)
    layout = HistLayout.from_n_bins(np.full(d, n_bins))
    be = CPUBackend()
    data = be.prepare_binned(Xb)
    gh = np.stack([rng.integers(-1000, 1000, n), rng.integers(1, 100, n)], 1).astype(np.int64)
    sub = np.sort(rng.choice(n, n // 2, replace=False)).astype(np.int32)
    rows_sub = np.concatenate([sub, np.setdiff1d(np.arange(n, dtype=np.int32), sub)])
    rec = dict(n=n, d=d, bins=n_bins, hist_kib=layout.nbytes() / 1024)
    for threads in (1, 2):
        for mode, code in (("rows", H.ROWS), ("columns", H.COLUMNS)):
            for label, rows, count in (
                ("root", np.arange(n, dtype=np.int32), n),
                ("half", rows_sub, n // 2),
            ):
                src = be._hist_source(data, gh, rows, layout)
                out = np.empty((1, layout.n_slots, 2), np.int64)
                z = np.zeros(1, np.int64)
                run = Run(threads > 1, threads, 16384, 0, code)
                args = (
                    threads > 1,
                    run,
                    src,
                    Segments(z, np.full(1, count, np.int64), z, z, z),
                    np.arange(d, dtype=np.int32),
                    d,
                    True,
                    out,
                    np.empty((0, 0), np.int64),
                )
                H.build_histograms(*args)  # compile / load, and the private copies' scratch
                reps = max(3, int(2e6 // (count * d)))
                best = np.inf
                for _ in range(3):
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        H.build_histograms(*args)
                    best = min(best, (time.perf_counter() - t0) / reps)
                rec[f"{mode}_{label}_t{threads}_ns_per_update"] = best / (count * d) * 1e9
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "hist_loop_cpu2.jsonl")
    )
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    machine = machine_info()
    with open(args.out, "a") as fh:
        for n, d in SHAPES:
            for n_bins in (16, 255):
                rec = measure(n, d, n_bins, rng)
                rec.update(
                    bench="hist_loop",
                    note=args.note,
                    machine=machine,
                    loadavg_after=list(os.getloadavg()),
                )
                fh.write(json.dumps(rec) + "\n")
                print(
                    json.dumps(
                        {
                            k: (round(v, 2) if isinstance(v, float) else v)
                            for k, v in rec.items()
                            if k != "machine"
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
