"""The scalar bin scan against the blocked one, by bins per feature: the measurement behind
``gpufs.backends.cpu.split.BLOCKED_SCAN_MIN_BINS``.

For each (value bins, rows per bin) of the grid, one node's histograms of 300 features
(multinomial counts, normal gradients, no missing values) are scanned by the scalar scan
(``_gain.make_scan_feature``, what the GPU compiles) and by the blocked one
(``_gain.make_scan_feature_blocked``), in one process, alternating, five rounds: the best
time per (node, feature) pair. Both return the same bits (tests/test_blocked_scan.py); only
their speed differs. Few rows per bin leave bins empty, where the scalar scan's skip
mispredicts.

    python bench/bench_scan.py                  # the grid, results appended
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402
from _records import append_records  # noqa: E402

N_FEATURES = 300
GRID = [(nb, rpb) for nb in (2, 4, 8, 16, 32, 64, 255) for rpb in (1.0, 4.0, 16.0)]


def _runner():
    from numba import njit

    from gpufs.backends.cpu._device_fns import _scan_feature, _scan_feature_blocked

    @njit(error_model="numpy")
    def run(hist, nbs, G_q, H_q, inv, blocked, reps):
        buf_q = np.empty((4, 257), np.int64)
        buf_gain = np.empty((2, 257))
        G, H, acc = G_q * inv, H_q * inv, 0.0
        for _ in range(reps):
            for f in range(nbs.shape[0]):
                lo = 256 * f
                if blocked:
                    r = _scan_feature_blocked(
                        hist, 0, lo, lo + 255, nbs[f], G_q, H_q, G, H, inv, inv, 1.0, 1.0,
                        1e-3, 0.05, buf_q, buf_gain,
                    )  # fmt: skip
                else:
                    r = _scan_feature(
                        hist, 0, lo, lo + 255, nbs[f], G_q, H_q, G, H, inv, inv, 1.0, 1.0,
                        1e-3, 0.05,
                    )  # fmt: skip
                acc += r[1]
        return acc

    return run


def node_histograms(nb, rows_per_bin, rng):
    """One node's (1, 256 * N_FEATURES, 2) int64 histograms in the full layout, every
    feature summing to the node's totals (the rest in its last bin), and those totals."""
    hist = np.zeros((1, 256 * N_FEATURES, 2), np.int64)
    n = int(rows_per_bin * nb) + 2
    for f in range(N_FEATURES):
        cnt = rng.multinomial(n, np.ones(nb) / nb)
        hist[0, 256 * f : 256 * f + nb, 0] = (rng.normal(size=nb) * cnt * 2**16).astype(np.int64)
        hist[0, 256 * f : 256 * f + nb, 1] = cnt * 2**16
    G_q, H_q = int(np.abs(hist[0, :, 0]).sum()), int(hist[0, :, 1].sum())
    for f in range(N_FEATURES):
        hist[0, 256 * f + nb - 1, 0] += G_q - hist[0, 256 * f : 256 * f + nb, 0].sum()
        hist[0, 256 * f + nb - 1, 1] += H_q - hist[0, 256 * f : 256 * f + nb, 1].sum()
    return hist, G_q, H_q


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "scan_cpu2.jsonl")
    )
    args = ap.parse_args()
    run, rng, inv = _runner(), np.random.default_rng(0), 2.0**-18
    cases = {}
    for nb, rpb in GRID:
        hist, G_q, H_q = node_histograms(nb, rpb, rng)
        nbs = np.full(N_FEATURES, nb, np.int64)
        for blocked in (False, True):
            run(hist, nbs, G_q, H_q, inv, blocked, 1)  # compile / warm
        cases[(nb, rpb)] = (hist, nbs, G_q, H_q)
    best = {}
    for _ in range(args.rounds):
        for key, (hist, nbs, G_q, H_q) in cases.items():
            for blocked in (False, True):
                t0 = time.perf_counter()
                run(hist, nbs, G_q, H_q, inv, blocked, 10)
                ns = (time.perf_counter() - t0) / (10 * N_FEATURES) * 1e9
                best[key, blocked] = min(best.get((key, blocked), np.inf), ns)
    machine, records = machine_info(), []
    for nb, rpb in GRID:
        s, b = best[(nb, rpb), False], best[(nb, rpb), True]
        records.append(
            dict(
                bench="scan",
                bins=nb,
                rows_per_bin=rpb,
                scalar_ns_per_pair=s,
                blocked_ns_per_pair=b,
                blocked_over_scalar=b / s,
                note=args.note,
                machine=machine,
                loadavg_after=list(os.getloadavg()),
            )
        )
        print(f"bins {nb:3d}, rows/bin {rpb:4.0f}: scalar {s:7.1f}, blocked {b:7.1f} ns/pair, "
              f"blocked/scalar {b / s:.2f}", flush=True)  # fmt: skip
    append_records(args.out, records)


if __name__ == "__main__":
    main()
