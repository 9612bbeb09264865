"""Summarize ``bench_quality.py`` records: per (table, k), the mean held-out score of every
method over the splits, the best gpufs family against the best peer, and the goal's verdict;
for the planted families also the recovery (planted signals found / k) of every method.

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
from _quality_spec import GPUFS, PEERS, PLANTED_FAMILIES, TOL


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
        met_splits = sum(
            max(score[m][i] for m in g) >= max(score[m][i] for m in p) - TOL
            for i in range(len(splits))
        )
        gap = p[best_p] - g[best_g]
        gbfs_met = "gbfs" in g and p[best_p] - g["gbfs"] <= TOL
        out.append(
            {
                "table": table,
                "k": k,
                "splits": len(splits),
                "scores": mean,
                "best_gpufs": best_g,
                "best_gpufs_score": g[best_g],
                "best_peer": best_p,
                "best_peer_score": p[best_p],
                "gap": gap,
                "gap_se": se,
                "met": bool(gap <= TOL),
                "met_splits": int(met_splits),
                "gbfs_met": bool(gbfs_met),
                "planted": table in PLANTED_FAMILIES,
            }
        )
    return out


def recovery(runs):
    """One dict per planted (table, k): per method the mean ``recovery`` (planted found / k),
    how many splits found every planted signal (``all``) and, where recorded, how many kept
    exactly one per group (``one_per_group``); and the exact-k goal's count: the splits where
    the gain ranking of the plain model (``gain_ref``) found all k, and how many of them GBFS
    also did."""
    cells = defaultdict(lambda: defaultdict(dict))
    for (table, k, split, method), rec in runs.items():
        if "recovery" in rec:
            cells[(table, k)][method][split] = rec
    out = []
    for (table, k), by_method in sorted(cells.items()):
        row = {"table": table, "k": k, "methods": {}}
        for m, recs in by_method.items():
            r = list(recs.values())
            row["methods"][m] = {
                "recovery": float(np.mean([x["recovery"] for x in r])),
                "all": sum(x["recovery"] == 1.0 for x in r),
                "splits": len(r),
                "one_per_group": sum(bool(x.get("one_per_group")) for x in r),
            }
        ref, gbfs = by_method.get("gain_ref", {}), by_method.get("gbfs", {})
        both = [s for s in ref if s in gbfs and ref[s]["recovery"] == 1.0]
        row["gain_ref_all"] = len(both)
        row["gbfs_where_gain_ref_all"] = sum(gbfs[s]["recovery"] == 1.0 for s in both)
        out.append(row)
    return out


def recovery_markdown(rows, methods):
    head = ["table", "k", *methods, "GBFS all k where gain_ref all k"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = []
        for m in methods:
            v = r["methods"].get(m)
            cells.append(
                ""
                if v is None
                else f"{v['recovery']:.2f} ({v['all']}/{v['splits']} all"
                + (
                    f", {v['one_per_group']} one per group"
                    if r["table"].startswith("copies")
                    else ""
                )
                + ")"
            )
        lines.append(
            "| "
            + " | ".join(
                [
                    r["table"],
                    str(r["k"]),
                    *cells,
                    f"{r['gbfs_where_gain_ref_all']}/{r['gain_ref_all']}",
                ]
            )
            + " |"
        )
    lines.append("")
    lines.append(
        "Recovery: planted signals found / k, mean over the splits (seeds); in brackets "
        "the splits that found all k (and, for the near-copy groups, kept exactly one "
        "copy of each group)."
    )
    return "\n".join(lines)


def markdown(rows, methods):
    head = ["table", "k", *methods, "best gpufs", "best peer", "gap", "gap/se", "met"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        se = r["gap_se"]
        ratio = f"{r['gap'] / se:.1f}" if se else ""
        lines.append(
            "| "
            + " | ".join(
                [r["table"], str(r["k"])]
                + [f"{r['scores'][m]:.4f}" if m in r["scores"] else "" for m in methods]
                + [
                    r["best_gpufs"],
                    r["best_peer"],
                    f"{r['gap']:+.4f}",
                    ratio,
                    f"{'yes' if r['met'] else 'NO'} ({r['met_splits']}/{r['splits']} splits)",
                ]
            )
            + " |"
        )
    real = [r for r in rows if not r["planted"]]
    met = sum(r["met"] for r in real)
    lines.append("")
    lines.append(
        f"Real tables: GBFS alone best or within {TOL} of the best peer in "
        f"{sum(r['gbfs_met'] for r in real)} of {len(real)} cells."
    )
    lines.append(
        f"Goal (a gpufs family best or within {TOL} of the best peer) met in {met} of "
        f"{len(real)} real-table cells."
    )
    planted = [r for r in rows if r["planted"]]
    if planted:
        lines.append(
            f"Planted families: a gpufs family best or within {TOL} in "
            f"{sum(r['met'] for r in planted)} of {len(planted)} cells."
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="quality_*.jsonl files, later ones winning")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    runs = load_runs(args.paths)
    rows, planted = summarize(runs), recovery(runs)
    if args.markdown:
        methods = [m for m in GPUFS + PEERS if any(m in r["scores"] for r in rows)]
        print(markdown(rows, methods))
        if planted:
            print()
            print(
                recovery_markdown(
                    planted,
                    [
                        m
                        for m in GPUFS + PEERS + ("gain_ref",)
                        if any(m in r["methods"] for r in planted)
                    ],
                )
            )
    else:
        for r in rows + planted:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
