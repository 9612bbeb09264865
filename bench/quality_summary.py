"""Summarize ``bench_quality.py`` records: per (table, k), the mean held-out score of every
method over the splits, the best gpufs family against the best peer, and the goal's verdict.

Several files may be given: a later file's run record replaces an earlier one for the same
(table, k, split, method). That is how one family is re-measured after a change without
re-running the peers (whose code did not change): run ``bench_quality.py --methods
controlburn --splits 5 --tag X`` and summarize ``quality_<old>.jsonl quality_X.jsonl``.

Run::

    python bench/quality_summary.py bench/results/quality_cpu2_splits5.jsonl \\
        bench/results/quality_cpu2_cb_reweight.jsonl --markdown
"""
from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict

import numpy as np

# Not from bench_quality: importing the runner sets NUMBA_NUM_THREADS and sys.path.
from _quality_spec import GPUFS, PEERS, TOL


def load_runs(paths):
    """{(table, k, split, method): record}, later files winning."""
    runs = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("kind") == "run":
                    runs[(rec["table"], rec["k"], rec["split"], rec["method"])] = rec
    return runs


def summarize(runs):
    """One dict per (table, k) that has every split for at least one gpufs family and peer."""
    cells = defaultdict(lambda: defaultdict(dict))
    for (table, k, split, method), rec in runs.items():
        cells[(table, k)][method][split] = rec["score"]
    out = []
    for (table, k), by_method in sorted(cells.items()):
        splits = sorted(set.intersection(*(set(v) for v in by_method.values())))
        if not splits:
            continue
        score = {m: [by_method[m][s] for s in splits] for m in by_method}
        mean = {m: float(np.mean(v)) for m, v in score.items()}
        g = {m: v for m, v in mean.items() if m in GPUFS and not math.isnan(v)}
        p = {m: v for m, v in mean.items() if m in PEERS and not math.isnan(v)}
        if not g or not p:
            continue
        best_g, best_p = max(g, key=g.get), max(p, key=p.get)
        per_split = np.asarray(score[best_p]) - np.asarray(score[best_g])
        se = float(per_split.std(ddof=1) / np.sqrt(len(splits))) if len(splits) > 1 else None
        met_splits = sum(max(score[m][i] for m in g) >= max(score[m][i] for m in p) - TOL
                         for i in range(len(splits)))
        gap = p[best_p] - g[best_g]
        out.append({"table": table, "k": k, "splits": len(splits), "scores": mean,
                    "best_gpufs": best_g, "best_gpufs_score": g[best_g], "best_peer": best_p,
                    "best_peer_score": p[best_p], "gap": gap, "gap_se": se,
                    "met": bool(gap <= TOL), "met_splits": int(met_splits)})
    return out


def markdown(rows, methods):
    head = ["table", "k", *methods, "best gpufs", "best peer", "gap", "gap/se", "met"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        se = r["gap_se"]
        ratio = f"{r['gap'] / se:.1f}" if se else ""
        lines.append("| " + " | ".join(
            [r["table"], str(r["k"])]
            + [f"{r['scores'][m]:.4f}" if m in r["scores"] else "" for m in methods]
            + [r["best_gpufs"], r["best_peer"], f"{r['gap']:+.4f}", ratio,
               f"{'yes' if r['met'] else 'NO'} ({r['met_splits']}/{r['splits']} splits)"])
            + " |")
    met = sum(r["met"] for r in rows)
    lines.append("")
    lines.append(f"Goal (a gpufs family best or within {TOL} of the best peer) met in {met} of "
                 f"{len(rows)} cells.")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="quality_*.jsonl files, later ones winning")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    rows = summarize(load_runs(args.paths))
    if args.markdown:
        methods = [m for m in GPUFS + PEERS if any(m in r["scores"] for r in rows)]
        print(markdown(rows, methods))
    else:
        for r in rows:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
