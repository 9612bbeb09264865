"""Exact k on a tall table: what the price search, the pool fit, the held-out ranking and the
final fit each cost, against a plain fit at the searched price.

The table: ``--rows`` x ``--features`` normal float32 columns, a binary target from
``--signals`` of them (every other one through a sine, every third weighted 1, the rest 0.3),
logistic noise. ``GBFSClassifier(n_features_to_select=k, n_jobs=--threads)`` is fitted, then
``GBFSClassifier(mu=mu_)``: one record per repeat, with the phases (``fit_times_``), the probes
(``mu_search_``) and the trees each phase grew. Run it on two checkouts, alternating, for a
before / after (``bench/results/mu_search_abandon_s20.md``: the probes given up halfway).

    python bench/bench_exact_k_search.py --rows 300000 --features 100 --k 10 --signals 5
    python bench/bench_exact_k_search.py --signals 20 --note head
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


def table(rows, features, signals, seed=0):
    """(X float32 (rows, features), y int (rows,)): the first ``signals`` columns carry it."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features)).astype(np.float32)
    logit = np.zeros(rows)
    for j in range(signals):
        weight = 1.0 if j % 3 == 0 else 0.3
        logit += weight * (np.sin(2 * X[:, j]) if j % 2 else X[:, j])
    return X, (logit + rng.logistic(size=rows) > 0).astype(int)


def run(args):
    from gpufs import GBFSClassifier, __version__

    X, y = table(args.rows, args.features, args.signals)
    GBFSClassifier(n_estimators=5, random_state=0).fit(X[:2000], y[:2000])  # compile first
    out = []
    for repeat in range(args.repeats):
        t = time.perf_counter()
        est = GBFSClassifier(n_features_to_select=args.k, random_state=0, n_jobs=args.threads)
        est.fit(X, y)
        exact_s = time.perf_counter() - t
        t = time.perf_counter()
        GBFSClassifier(mu=est.mu_, random_state=0, n_jobs=args.threads).fit(X, y)
        plain_s = time.perf_counter() - t
        times = {p: v for p, v in est.fit_times_.items() if p != "mu_probes"}
        rec = {
            "bench": "exact_k_search",
            "rows": args.rows,
            "features": args.features,
            "signals": args.signals,
            "k": args.k,
            "threads": args.threads,
            "repeat": repeat,
            "exact_s": exact_s,
            "plain_s": plain_s,
            "ratio": exact_s / plain_s,
            "fit_times": times,
            "probes": est.mu_search_,
            "trees_grown": est.selection_pool_["trees_grown"],
            "mu_": est.mu_,
            "selected": [int(f) for f in est.selected_features_],
            "signals_found": int(sum(int(f) < args.signals for f in est.selected_features_)),
            "gpufs": __version__,
            "note": args.note,
            "machine": machine_info(),
        }
        out.append(rec)
        print(
            f"repeat {repeat}: exact k {exact_s:.2f} s, plain {plain_s:.2f} s "
            f"({rec['ratio']:.2f}x); search {times['mu_search']:.2f} s, pool {times['pool']:.2f}"
            f" s, held-out {times.get('heldout', 0.0):.2f} s; trees {rec['trees_grown']}",
            flush=True,
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--signals", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--note", default=None, help="recorded as 'note' (which checkout, ...)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    out = args.out or os.path.join(here, "results", "exact_k_search_cpu.jsonl")
    append_records(out, run(args))


if __name__ == "__main__":
    main()
