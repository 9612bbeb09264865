"""Benchmark: gpufs ControlBurn vs the authors' ``controlburn`` package (PyPI 0.1.3).

Same data, same k. gpufs runs with its defaults ("gpufs": bag-boosting, full trees) and with
single-feature trees ("gpufs_single", the EBM variant). Quality: 5-fold cross-validated ROC-AUC of
a scikit-learn RandomForest refit
on each method's selected features (the paper's protocol, section 4.3), next to the random-forest
MDI top-k baseline. Speed: wall seconds of the forest and of the selection step of each method.

The package pins old libraries and fails to import on numpy 2, so it runs in its own virtualenv
(``bench/.venv-controlburn``, git-ignored; created on first use with numpy 1.23.5, pandas 1.5.3,
scikit-learn 1.2.2, matplotlib 3.7.5 (imported by the package) and controlburn 0.1.3, which need
a Python <= 3.11) in a subprocess; X and y travel as .npy files. The package has no k: its
forest is ``bagboost_forest`` (its default, Algorithm 2); then its alpha is searched (doubling /
quartering from its default 0.1, then geometric bisection) with ``solve_lasso``, the lasso step
its own ``fit`` uses (an L1 ``SGDClassifier``, stochastic: numpy's global RNG, which it and
pandas' sampling draw from, is seeded with ``np.random.seed`` before the forest and before every
solve), keeping the alpha whose feature count is closest to k (ties: fewer); the count it
actually reached is recorded. Its own regularization path (``solve_lasso_path``: liblinear over
its fixed grid of 50 alphas in [0.01, 100]) is then timed too (``time_path_s``) with the feature
counts along it. The subprocess has a time budget; on timeout what finished is recorded and the
record is marked ``"status": "timeout"``.

Run::

    python bench/bench_controlburn.py                       # 20,000 x 50 here, all methods
    python bench/bench_controlburn.py --rows 200000 --rows 1000000 --skip-package  # GPU box
    python bench/bench_controlburn.py --lasso-ab --rows 100000 --splits 3   # issue 35's 9 fits
    python bench/bench_controlburn.py --share-ab --rows 100000   # the k path's shared solves

One JSON line per method and size goes to ``bench/results/controlburn_<machine>.jsonl``, each with
the machine (CPU model, cores, load average, GPU), plus a ``summary`` line with the ratios
(package seconds / gpufs seconds: forest, k-selection, both, and the package's path vs gpufs'
k-selection; ROC-AUC differences).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (bench/_machine.py: the one machine description)
from _records import append_records  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

VENV = os.path.join(HERE, ".venv-controlburn")
PINS = [
    "numpy==1.23.5",
    "pandas==1.5.3",
    "scikit-learn==1.2.2",
    "matplotlib==3.7.5",
    "controlburn==0.1.3",
]

PACKAGE_SCRIPT = r"""
import json, math, sys, time
import numpy as np
import pandas as pd
xfile, yfile, out, k, seed, budget = (sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                      int(sys.argv[5]), float(sys.argv[6]))
T0 = time.perf_counter()
np.random.seed(seed)
import warnings
warnings.filterwarnings("ignore")
from ControlBurn.ControlBurnModel import ControlBurnClassifier
X = np.load(xfile); y = np.load(yfile)
df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
rec = {}
def dump():
    with open(out, "w") as fh:
        json.dump(rec, fh)
cb = ControlBurnClassifier(alpha=0.1, build_forest_method="bagboost")
t = time.perf_counter()
cb.bagboost_forest(df, y)
rec["time_forest_s"] = time.perf_counter() - t
rec["n_trees"] = len(cb.forest)
covered = np.any([tr.feature_importances_ > 0 for tr in cb.forest], axis=0)
rec["forest_coverage"] = int(covered.sum())
dump()

# k by bisection on alpha with the lasso step that the package's fit() uses (solve_lasso, an
# L1 SGDClassifier; seeded through numpy's global RNG before every solve).
def solve(a):
    np.random.seed(seed)
    cb.alpha = a
    cb.solve_lasso()
    return sorted(int(str(c)[1:]) for c in cb.features_selected_)
t = time.perf_counter()
tried = []
def attempt(a):
    f = solve(a)
    tried.append((a, len(f), f))
    rec["alpha_search"] = [(a_, n_) for a_, n_, _ in tried]
    best = min(tried, key=lambda p: (abs(p[1] - k), p[1]))
    rec["alpha"], rec["n_selected"], rec["selected"] = best[0], best[1], best[2]
    rec["time_select_s"] = time.perf_counter() - t
    rec["n_solves"] = len(tried)
    dump()
    return len(f)
def over():
    return time.perf_counter() - T0 > 0.8 * budget
a = 0.1
n = attempt(a)
lo = hi = None                       # lo: alpha with n > k, hi: alpha with n < k
for _ in range(12):
    if n == k or over():
        break
    if n > k:
        lo = a
        if hi is not None:
            break
        a *= 4.0
    else:
        hi = a
        if lo is not None:
            break
        a /= 4.0
    n = attempt(a)
if n > k:
    lo = a
elif n < k:
    hi = a
for _ in range(20):
    if n == k or lo is None or hi is None or over():
        break
    a = math.sqrt(lo * hi)
    n = attempt(a)
    if n > k:
        lo = a
    elif n < k:
        hi = a
rec["select_done"] = True
dump()

# the package's own regularization path (liblinear over its fixed grid of 50 alphas), timed
t = time.perf_counter()
alphas, coefs = cb.solve_lasso_path(df, y, n_alphas=50)
rec["time_path_s"] = time.perf_counter() - t
used = np.array([tr.feature_importances_ > 0 for tr in cb.forest])
rec["path_counts"] = [int(used[np.asarray(c) != 0].any(axis=0).sum()) for c in coefs]
rec["path_alpha_range"] = [float(min(alphas)), float(max(alphas))]
dump()
"""


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def make_data(rows, features, seed=0, n_copies=4, noise=0.1):
    """Binary classification with planted groups of near-duplicate informative features.

    8 informative base features (4 Gaussian, 4 binary) drive a logistic model with decreasing
    weights and two nonlinear terms; the 3 strongest get ``n_copies`` noisy copies each
    (+ N(0, noise^2) on standardized values, paper section 5.1); the rest are pure noise.
    Returns X (rows, features) float64, y int, group (features,) with -1 for noise columns.
    """
    rng = np.random.RandomState(seed)
    base = np.c_[rng.randn(rows, 4), rng.randint(0, 2, size=(rows, 4)).astype(float)]
    coef = np.array([1.6, 1.4, 1.2, 0.9, 0.8, 0.7, 0.6, 0.5])
    z = (base - base.mean(0)) / base.std(0)
    logit = z @ coef + 0.7 * np.sin(2 * z[:, 0]) + 0.5 * z[:, 1] * z[:, 4]
    y = (logit + rng.logistic(size=rows) > 0).astype(np.int64)
    cols, group = [base], list(range(8))
    for j in range(3):
        cols.append(z[:, [j]] + noise * rng.randn(rows, n_copies))
        group += [j] * n_copies
    n_noise = features - sum(c.shape[1] for c in cols)
    if n_noise < 0:
        raise ValueError(f"need at least {features - n_noise} features")
    cols.append(rng.randn(rows, n_noise))
    group += [-1] * n_noise
    return np.hstack(cols), y, np.asarray(group)


# --------------------------------------------------------------------------------------------
# machine info
# --------------------------------------------------------------------------------------------


def machine_info() -> dict:
    return _machine.machine_info()


def machine_tag(info):
    if info.get("gpu"):
        return info["gpu"].lower().replace("nvidia ", "").replace(" ", "-")
    return f"cpu{info['cpu_count']}"


# --------------------------------------------------------------------------------------------
# methods
# --------------------------------------------------------------------------------------------


def cv_auc(X, y, feats, folds, seed=0):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    if len(feats) == 0:
        return 0.5
    rf = RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=-1)
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    return float(cross_val_score(rf, X[:, np.asarray(feats)], y, cv=cv, scoring="roc_auc").mean())


VARIANTS = {"gpufs": {}, "gpufs_single": {"tree_type": "single"}}


def run_gpufs(X, y, k, device, seed, variant="gpufs"):
    from gpufs.selectors.controlburn import ControlBurnClassifier

    kw = VARIANTS[variant]
    # warm-up: numba compiles (or loads) its kernels on the first call
    ControlBurnClassifier(
        n_features_to_select=2, max_depth=2, random_state=0, device=device, **kw
    ).fit(X[:2000], y[:2000])
    t = time.perf_counter()
    est = ControlBurnClassifier(n_features_to_select=k, random_state=seed, device=device, **kw)
    est.fit(X, y)
    total = time.perf_counter() - t
    ft = est.fit_times_
    return {
        "method": variant,
        "params": kw,
        "device": est.device_,
        "status": "ok",
        "time_forest_s": ft["bin"] + ft["forest"],
        "time_select_s": ft["select"],
        "time_refit_s": ft["refit"],
        "time_total_s": total,
        "n_trees": est.n_trees_,
        "forest_coverage": est.forest_coverage_,
        "rounds": len(est.forest_.member_loss),
        "forest_stop": est.forest_.stop_reason,
        "selected": sorted(est.selected_features_.tolist()),
        "n_selected": int(est.selected_features_.size),
        "lambda": est.lambda_,
        "selection_exact": bool(est.selection_exact_),
    }


def ensure_venv(log):
    py = os.path.join(VENV, "bin", "python")
    if os.path.exists(py):
        ok = subprocess.run([py, "-c", "import ControlBurn.ControlBurnModel"], capture_output=True)
        if ok.returncode == 0:
            return py
    base = shutil.which("python3.11") or sys.executable
    log(f"creating {VENV} with {base} and {' '.join(PINS)}")
    subprocess.run([base, "-m", "venv", VENV], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q"] + PINS, check=True)
    return py


def run_package(X, y, k, seed, budget, log):
    py = ensure_venv(log)
    with tempfile.TemporaryDirectory() as tmp:
        xf, yf = os.path.join(tmp, "X.npy"), os.path.join(tmp, "y.npy")
        out, script = os.path.join(tmp, "out.json"), os.path.join(tmp, "run.py")
        np.save(xf, X)
        np.save(yf, y)
        with open(script, "w") as fh:
            fh.write(PACKAGE_SCRIPT)
        t = time.perf_counter()
        status = "ok"
        try:
            proc = subprocess.run(
                [py, script, xf, yf, out, str(k), str(seed), str(budget)],
                capture_output=True,
                text=True,
                timeout=budget,
            )
            if proc.returncode != 0:
                status = "error: " + proc.stderr.strip().splitlines()[-1][:300]
        except subprocess.TimeoutExpired:
            status = "timeout"
        total = time.perf_counter() - t
        rec = {}
        if os.path.exists(out):
            with open(out) as fh:
                rec = json.load(fh)
    rec.update(
        {
            "method": "controlburn_pkg",
            "device": "cpu",
            "status": status,
            "time_total_s": total,
            "budget_s": budget,
            "package": "controlburn==0.1.3 (numpy 1.23.5, pandas 1.5.3, sklearn 1.2.2)",
        }
    )
    if status == "timeout":
        rec.setdefault("time_select_s", None)
        done = (
            "the forest did not finish"
            if "time_forest_s" not in rec
            else "the alpha search did not finish"
            if not rec.get("select_done")
            else "the alpha search finished, the lasso path did not"
        )
        rec["note"] = f"killed after the {budget} s budget; {done}"
    return rec


def run_mdi(X, y, k, seed):
    from sklearn.ensemble import RandomForestClassifier

    t = time.perf_counter()
    rf = RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=-1).fit(X, y)
    feats = np.argsort(-rf.feature_importances_, kind="stable")[:k]
    return {
        "method": "rf_mdi_topk",
        "device": "cpu",
        "status": "ok",
        "time_total_s": time.perf_counter() - t,
        "selected": sorted(feats.tolist()),
        "n_selected": int(k),
    }


# --------------------------------------------------------------------------------------------
# the lasso search, before and after issue 35
# --------------------------------------------------------------------------------------------


def _lasso_arm(name):
    """Switch the lasso search to issue 35's ("new": the one-tree jump rule, proximal Newton
    for the logistic loss, one BLAS thread for thin forests) or to what it was ("old")."""
    from gpufs.lasso import _search, _solver

    if not hasattr(_search._Search, "_issue35_rule"):
        _search._Search._issue35_rule = _search._Search.one_tree_jump
    new = name == "new"
    _solver._PN_MAX_TREES = 256 if new else 0
    _solver._ONE_THREAD_MAX_TREES = 512 if new else 0
    _search._Search.one_tree_jump = (
        _search._Search._issue35_rule if new else (lambda self, hi, lo, target: 0)
    )


def lasso_ab(rows, features, splits, ks, out, log, arms=("old", "new"), label=None):
    """Issue 35's timing case: a binary ``make_classification`` table (5 informative, 2
    redundant columns), for each split (70 % of the rows) one ``warm_start`` estimator per arm
    and the fits for every k (``splits`` x ``len(ks)`` fits per arm, the forest grown by each
    arm's first fit of a split), the arms alternating which goes first. ``arms`` picks the
    arms to run (one arm: a before/after of two checkouts, each run with its own code on
    PYTHONPATH); ``label`` is recorded as ``code`` in every record."""
    import warnings

    from sklearn.datasets import make_classification

    from gpufs import ControlBurnClassifier

    X, y = make_classification(
        n_samples=rows, n_features=features, n_informative=5, n_redundant=2, random_state=0
    )
    info = machine_info()
    records = []
    for s in range(splits):
        idx = np.random.RandomState(s).permutation(rows)[: int(0.7 * rows)]
        ests = {a: ControlBurnClassifier(warm_start=True, random_state=0) for a in arms}
        for i, k in enumerate(ks):
            for a in arms if (i + s) % 2 == 0 else arms[::-1]:
                _lasso_arm(a)
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = ests[a].set_params(n_features_to_select=k).fit(X[idx], y[idx])
                rec = {
                    "bench": "controlburn_lasso_ab",
                    "arm": a,
                    "code": label,
                    "rows": rows,
                    "features": features,
                    "split": s,
                    "k": k,
                    "fit_s": time.perf_counter() - t,
                    "fit_times": est.fit_times_,
                    "n_trees": int(est.n_trees_),
                    "selected": sorted(int(f) for f in est.selected_features_),
                    "source": {int(j): v for j, v in est.selection_path_["source"].items()},
                    "exact": bool(est.selection_exact_),
                    "loadavg_1m": os.getloadavg()[0],
                    "machine": info,
                }
                records.append(rec)
                log(
                    f"split {s} k={k} {a}: fit {rec['fit_s']:.1f} s, select "
                    f"{est.fit_times_['select']:.1f} s, {rec['selected']}, load "
                    f"{rec['loadavg_1m']:.1f}"
                )
    _lasso_arm("new")
    summary = {
        "bench": "controlburn_lasso_ab",
        "arm": "summary",
        "code": label,
        "rows": rows,
        "machine": info,
    }
    for a in arms:
        mine = [r for r in records if r["arm"] == a]
        summary[f"fit_s_{a}"] = sum(r["fit_s"] for r in mine)
        summary[f"select_s_{a}"] = sum(r["fit_times"]["select"] for r in mine)
        summary[f"select_share_{a}"] = summary[f"select_s_{a}"] / summary[f"fit_s_{a}"]
        summary[f"loadavg_1m_mean_{a}"] = float(np.mean([r["loadavg_1m"] for r in mine]))
    if len(arms) == 2:
        summary["same_selections"] = sum(
            a["selected"] == b["selected"]
            for a, b in zip(
                [r for r in records if r["arm"] == "old"], [r for r in records if r["arm"] == "new"]
            )
        )
    records.append(summary)
    append_records(out, records)
    log(f"  summary {summary}")


def sklearn_check(out, log, label=None):
    """The slowest scikit-learn estimator check on ControlBurn in the suite (issue 38):
    ``check_sample_weight_equivalence_on_dense_data`` on the test's small classifier, timed
    after a warm-up fit (no compile inside), with the lasso solves and their iterations. The
    check itself fails by design (an expected failure in the suite: bootstrap draws)."""
    import warnings

    from sklearn.datasets import make_classification
    from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

    from gpufs import ControlBurnClassifier, GBFSClassifier
    from gpufs.lasso import _solver

    def make():
        return ControlBurnClassifier(
            max_depth=2,
            max_trees_per_round=10,
            random_state=0,
            refit_estimator=GBFSClassifier(mu=0.0, n_estimators=10),
        )

    X, y = make_classification(n_samples=60, n_features=5, n_classes=3, n_informative=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make().fit(X, y)
    solves = []
    solve = _solver.TreeLasso.solve

    def counted(self, lam, **kw):
        res = solve(self, lam, **kw)
        solves.append((res.n_iter, bool(res.converged)))
        return res

    _solver.TreeLasso.solve = counted
    try:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                check_sample_weight_equivalence_on_dense_data("ControlBurnClassifier", make())
            except AssertionError:
                pass  # the expected failure
        check_s = time.perf_counter() - t
    finally:
        _solver.TreeLasso.solve = solve
    rec = {
        "bench": "controlburn_sklearn_check",
        "code": label,
        "check": "check_sample_weight_equivalence_on_dense_data",
        "check_s": check_s,
        "solves": len(solves),
        "iterations": sum(n for n, _ in solves),
        "not_converged": sum(not c for _, c in solves),
        "loadavg_1m": os.getloadavg()[0],
        "machine": machine_info(),
    }
    append_records(out, [rec])
    log(
        f"sklearn check: {check_s:.1f} s, {rec['solves']} solves, {rec['iterations']} "
        f"iterations, {rec['not_converged']} not converged, load {rec['loadavg_1m']:.1f}"
    )


def share_ab(rows, out, log):
    """The k path's searches sharing their common solves or each solving alone (issue 35):
    breast cancer with ``path_k_max=15`` and split 0 of ``lasso_ab``'s table with k = 10 and
    ``path_k_max=10``, each fit on one forest (``warm_start``) once per arm, in one process;
    records the solves, the selection seconds and whether the path is the same."""
    import contextlib
    import warnings

    from sklearn.datasets import load_breast_cancer, make_classification

    from gpufs import ControlBurnClassifier
    from gpufs.lasso import _search, _solver

    n_solves = [0]
    solve = _solver.TreeLasso.solve

    def counted(self, lam, **kw):
        n_solves[0] += 1
        return solve(self, lam, **kw)

    sharing = _search._sharing
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xt, yt = make_classification(
        n_samples=rows, n_features=12, n_informative=5, n_redundant=2, random_state=0
    )
    idx = np.random.RandomState(0).permutation(rows)[: int(0.7 * rows)]
    cases = [
        ("breast_cancer", Xb, yb, {"n_features_to_select": 5, "path_k_max": 15}),
        (f"table_{rows}", Xt[idx], yt[idx], {"n_features_to_select": 10, "path_k_max": 10}),
    ]
    info = machine_info()
    records = []
    _solver.TreeLasso.solve = counted
    try:
        for name, X, y, params in cases:
            est = ControlBurnClassifier(random_state=0, warm_start=True, **params)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)  # grows the forest
            paths = {}
            for arm in ("alone", "shared"):
                _search._sharing = sharing if arm == "shared" else contextlib.nullcontext
                n_solves[0] = 0
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X, y)
                p = est.selection_path_
                keys = ("features", "lambda", "train_loss", "source", "unreachable")
                paths[arm] = json.dumps([p[k] for k in keys], sort_keys=True, default=str)
                records.append(
                    {
                        "bench": "controlburn_share_ab",
                        "arm": arm,
                        "data": name,
                        **params,
                        "solves": n_solves[0],
                        "select_s": est.fit_times_["select"],
                        "selected": sorted(int(f) for f in est.selected_features_),
                        "source": {int(j): v for j, v in p["source"].items()},
                        "loadavg_1m": os.getloadavg()[0],
                        "machine": info,
                    }
                )
                log(f"{name} {arm}: {n_solves[0]} solves, {est.fit_times_['select']:.1f} s")
            records[-1]["same_path_as_alone"] = paths["alone"] == paths["shared"]
    finally:
        _solver.TreeLasso.solve = solve
        _search._sharing = sharing
    append_records(out, records)


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, action="append", help="rows (repeatable); 20000")
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument(
        "--package-budget",
        type=float,
        default=900.0,
        help="seconds for the controlburn package (forest + lasso path)",
    )
    ap.add_argument(
        "--variants",
        nargs="+",
        default=list(VARIANTS),
        choices=list(VARIANTS),
        help="gpufs settings to run (default: all)",
    )
    ap.add_argument("--skip-package", action="store_true")
    ap.add_argument("--skip-cv", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--lasso-ab",
        action="store_true",
        help="issue 35's timing case instead: the lasso search before and after, "
        "--rows x 12 columns, --splits splits x k in 3, 5, 10",
    )
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument(
        "--arms",
        nargs="+",
        default=["old", "new"],
        choices=["old", "new"],
        help="--lasso-ab's arms to run (default: both)",
    )
    ap.add_argument("--label", default=None, help="--lasso-ab, --sklearn-check: recorded as 'code'")
    ap.add_argument(
        "--share-ab",
        action="store_true",
        help="the k path's searches sharing their common solves or not: breast cancer "
        "(path_k_max=15) and --rows x 12 (path_k_max=10)",
    )
    ap.add_argument(
        "--sklearn-check",
        action="store_true",
        help="time scikit-learn's check_sample_weight_equivalence_on_dense_data on the "
        "suite's small ControlBurnClassifier, with its lasso solves and iterations",
    )
    args = ap.parse_args(argv)
    rows_list = args.rows or [20000]

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    info = machine_info()
    out = args.out or os.path.join(HERE, "results", f"controlburn_{machine_tag(info)}.jsonl")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if args.sklearn_check:
        sklearn_check(out, log, args.label)
        return
    if args.share_ab:
        for rows in rows_list:
            share_ab(rows, out, log)
        return
    if args.lasso_ab:
        for rows in rows_list:
            lasso_ab(rows, 12, args.splits, (3, 5, 10), out, log, tuple(args.arms), args.label)
        return
    for rows in rows_list:
        X, y, group = make_data(rows, args.features, seed=args.seed)
        common = {
            "bench": "controlburn",
            "rows": rows,
            "features": args.features,
            "k": args.k,
            "seed": args.seed,
            "machine": info,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        records = []
        for variant in args.variants:
            log(f"[{rows} x {args.features}] {variant} ...")
            records.append(run_gpufs(X, y, args.k, args.device, args.seed, variant))
            log(f"  {records[-1]}")
        if not args.skip_package:
            log(
                f"[{rows} x {args.features}] controlburn package (budget "
                f"{args.package_budget:.0f} s) ..."
            )
            records.append(run_package(X, y, args.k, args.seed, args.package_budget, log))
            log(f"  {records[-1]}")
        records.append(run_mdi(X, y, args.k, args.seed))
        for rec in records:
            feats = rec.get("selected")
            if feats is not None:
                g = group[np.asarray(feats, dtype=int)] if feats else np.array([], int)
                rec["planted_groups_hit"] = sorted(set(int(v) for v in g if v >= 0))
                rec["noise_selected"] = int((g < 0).sum())
                if not args.skip_cv:
                    log(f"  cv auc {rec['method']} ...")
                    rec["cv_roc_auc"] = cv_auc(X, y, feats, args.folds, args.seed)
        summary = {"method": "summary"}
        by = {r["method"]: r for r in records}
        g, p = by.get("gpufs"), by.get("controlburn_pkg")
        if g and p:
            for key in ("time_forest_s", "time_select_s"):
                if p.get(key) and g.get(key):
                    summary[f"speedup_{key}"] = p[key] / g[key]
            if p.get("time_forest_s") and p.get("time_select_s"):
                summary["speedup_forest_plus_select"] = (
                    p["time_forest_s"] + p["time_select_s"]
                ) / (g["time_forest_s"] + g["time_select_s"])
            if p.get("time_path_s"):
                summary["speedup_select_vs_pkg_path"] = p["time_path_s"] / g["time_select_s"]
            if p.get("status") == "timeout":
                summary["pkg_timeout_s"] = p["budget_s"]
            if "cv_roc_auc" in g and "cv_roc_auc" in p:
                summary["auc_gpufs_minus_pkg"] = g["cv_roc_auc"] - p["cv_roc_auc"]
        for name in args.variants:
            v = by.get(name)
            if v and "rf_mdi_topk" in by and "cv_roc_auc" in v:
                summary[f"auc_{name}_minus_mdi"] = v["cv_roc_auc"] - by["rf_mdi_topk"]["cv_roc_auc"]
            if v and p and "cv_roc_auc" in v and "cv_roc_auc" in p and name != "gpufs":
                summary[f"auc_{name}_minus_pkg"] = v["cv_roc_auc"] - p["cv_roc_auc"]
        records.append(summary)
        append_records(out, [{**common, **rec} for rec in records])
        log(f"  summary {summary}")
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
