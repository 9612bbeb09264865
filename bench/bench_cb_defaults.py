"""Benchmark: ControlBurn's selections at its defaults against the unpruned forest (issue 35).

Two planted families, each fit twice in this one process: at the defaults (out-of-bag pruning
at one standard error, ``oob_prune=1.0``, with the fill of a short selection) and with
``oob_prune=None`` (the unpruned forest, the default up to 0.2).

* ``churn``: the planted churn table (``tests/_planted_noise.py``: real plan, region and
  tenure columns beside noise of every type), seeds 0-5, k = 3, 4 and 5 from one warm-started
  estimator, 70 % training split as ``bench_quality.py`` makes it. Per fit: whether a noise
  column is chosen ahead of a planted signal, the number selected, the number filled.
* ``groups``: the unequal near-copy groups (``tests/_near_copy_data.py``: 4 designs x 2 tasks
  x seeds 0-4, k = 3). Per fit: one feature per group, two copies of one group, the number
  filled.

One JSON line per fit, then a ``summary`` line per family and setting.

    python bench/bench_cb_defaults.py --out bench/results/cb_defaults_cpu2.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import _machine  # noqa: E402

SETTINGS = {"default": {}, "unpruned": {"oob_prune": None}}


def _churn(seed, setting):
    import _planted_noise as pn
    from gpufs import ControlBurnClassifier

    Xtr, ytr, cols, text, planted = pn.churn_training_rows(seed)
    est = ControlBurnClassifier(
        warm_start=True, random_state=0, categorical_features=text, **SETTINGS[setting]
    )
    for k in (3, 4, 5):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.set_params(n_features_to_select=k).fit(Xtr, ytr)
        chosen = [cols[j] for j in est.selected_features_]
        yield {
            "family": "churn",
            "setting": setting,
            "seed": seed,
            "k": k,
            "selected": chosen,
            "n_selected": len(chosen),
            "n_filled": int(est.selection_filled_.size),
            "noise_ahead": bool(pn.noise_ahead(chosen, planted)),
            "seconds": round(time.perf_counter() - t0, 3),
        }


def _groups(seed, design, task, setting):
    from _near_copy_data import near_copy_groups
    from gpufs import ControlBurnClassifier, ControlBurnRegressor

    Est = ControlBurnRegressor if task == "regression" else ControlBurnClassifier
    X, y, groups = near_copy_groups(seed, design, task)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = Est(n_features_to_select=3, random_state=seed, **SETTINGS[setting]).fit(X, y)
    hit = np.bincount(groups[est.selected_features_], minlength=groups.max() + 1)
    return {
        "family": "groups",
        "setting": setting,
        "seed": seed,
        "design": design,
        "task": task,
        "selected": est.selected_features_.tolist(),
        "n_selected": int(est.selected_features_.size),
        "n_filled": int(est.selection_filled_.size),
        "one_per_group": hit[:3].tolist() == [1, 1, 1],
        "two_copies": bool(hit.max() > 1),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="JSON lines file (default: stdout only)")
    ap.add_argument("--churn-seeds", type=int, default=6)
    ap.add_argument("--group-seeds", type=int, default=5)
    args = ap.parse_args(argv)
    from _near_copy_data import DESIGNS

    out = open(args.out, "w") if args.out else None
    machine = _machine.machine_info()

    def emit(rec):
        line = json.dumps(rec)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    emit({"machine": machine})
    recs = []
    for seed in range(args.churn_seeds):
        for setting in SETTINGS:
            for rec in _churn(seed, setting):
                recs.append(rec)
                emit(rec)
    for seed in range(args.group_seeds):
        for design in DESIGNS:
            for task in ("regression", "classification"):
                for setting in SETTINGS:
                    rec = _groups(seed, design, task, setting)
                    recs.append(rec)
                    emit(rec)
    for family, flags in (("churn", ("noise_ahead",)), ("groups", ("one_per_group", "two_copies"))):
        for setting in SETTINGS:
            rs = [r for r in recs if r["family"] == family and r["setting"] == setting]
            want = [r["k"] if family == "churn" else 3 for r in rs]
            emit(
                {
                    "summary": family,
                    "setting": setting,
                    "fits": len(rs),
                    **{f: sum(r[f] for r in rs) for f in flags},
                    "short_of_k": sum(r["n_selected"] < w for r, w in zip(rs, want)),
                    "filled_fits": sum(r["n_filled"] > 0 for r in rs),
                    "seconds": round(sum(r["seconds"] for r in rs), 1),
                }
            )
    if out:
        out.close()


if __name__ == "__main__":
    main()
