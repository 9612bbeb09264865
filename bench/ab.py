"""A/B: the working tree (head) against a base commit, shape by shape, in paired fresh processes.

The rule (CONTRIBUTING.md): an engine change shows this table in its commit or closing note,
and a shape more than 3 % slower (median ratio > 1.03) needs a stated reason.

What it does:
  1. checks out ``--base`` (default: ``git merge-base HEAD main``) with ``git worktree add``
     into a temporary folder beside the working tree (removed at the end unless ``--keep``);
  2. gives each side its own numba cache (``NUMBA_CACHE_DIR``) and warms it: one untimed run
     of every shape per side;
  3. runs every shape ``--pairs`` times on each side, alternating (base, head), (head, base),
     ... so a drift in the machine's load falls on both; each run is a fresh process with its
     threads pinned (``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
     ``OPENBLAS_NUM_THREADS``, and ``taskset`` to the first cores where it exists), which
     imports gpufs from its side's tree and the data makers from head's ``bench/``;
  4. reports per shape the paired ratio head / base (median of the pairs' ratios), its spread
     (min - max over the pairs) and the 1-minute load average around the runs; with
     ``--lightgbm`` also head / LightGBM, LightGBM timed in head's processes on the same data
     and threads (``bench/_peers.py``'s parameters).

Every run records wall and CPU time (``wall_value``, ``cpu_value``); ``--metric cpu`` compares
the CPU time, steadier than wall time on a machine shared with other work (for 1-thread shapes
it is the fit's own work; on more threads it also counts the pool's idle spinning).

Each run's record and each shape's summary are appended as JSON lines to
``bench/results/ab.jsonl`` (``--out``); the markdown table is printed (``--table`` also writes
it to a file).

Shapes (``--shapes``, comma separated; default every one):
  dense_1t, dense_2t  1,000,000 x 100 (``bench_cpu_gbfs.make_data``), depth 4, mu 50, per-tree
                      time of a ``--trees`` fit (differential against a 1-tree fit; with
                      ``--repeats`` R, the median of R such couples), 1 / 2 threads
  small               1,500 x 56, 200 trees (``bench_cpu_small.small_data``), whole fit
  counts              8,000 x 1,500 counts (``bench_wide.synthetic``), 20 trees, whole fit
  flags               8,000 x 1,397 one-hot flags (``bench_wide.onehot``), 20 trees, whole fit
  k3                  189 x 500, 7 classes (``make_classification``), exact k = 3, whole fit
Shapes other than dense_* run on ``--threads`` threads (default 2). ``--quick``: 200,000 rows
and 10 trees for the dense shapes, 2 pairs.

    python bench/ab.py                          # against the merge base with main
    python bench/ab.py --base 954a29e --shapes dense_1t,dense_2t --pairs 5
    python bench/ab.py --quick --lightgbm
    python bench/ab.py --cache-root ~/.cache/gpufs-ab   # compile each side once, not every run

A fresh cache compiles every kernel on each side before the first timed run (minutes; many
on a loaded machine): ``--cache-root`` keeps both caches and the base checkout for the next
run (``git worktree remove`` it when done).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: shape -> (description, threads or None for ``--threads``, metric)
SHAPES = {
    "dense_1t": ("1M x 100, depth 4, 1 thread", 1, "per_tree_s"),
    "dense_2t": ("1M x 100, depth 4, 2 threads", 2, "per_tree_s"),
    "small": ("small fit 1,500 x 56, 200 trees", None, "fit_s"),
    "counts": ("8,000 x 1,500 counts, 20 trees", None, "fit_s"),
    "flags": ("8,000 x 1,397 one-hot flags, 20 trees", None, "fit_s"),
    "k3": ("189 x 500 exact k = 3", None, "fit_s"),
}
#: a shape slower than this (median head / base) needs a stated reason (CONTRIBUTING.md)
SLOWER_LIMIT = 1.03


# --- pure logic (tests/test_bench_ab.py) ------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--base", default=None, help="base commit (default: git merge-base HEAD main)")
    ap.add_argument(
        "--shapes", default=",".join(SHAPES), help="comma-separated shapes: " + ", ".join(SHAPES)
    )
    ap.add_argument(
        "--pairs",
        type=int,
        default=None,
        help="(base, head) pairs per shape (default 5; 2 with --quick)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=2,
        help="threads of the shapes other than dense_1t / dense_2t",
    )
    ap.add_argument(
        "--rows",
        type=int,
        default=None,
        help="rows of the dense shapes (default 1,000,000; 200,000 with --quick)",
    )
    ap.add_argument(
        "--trees",
        type=int,
        default=None,
        help="trees of the dense shapes (default 30; 10 with --quick)",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="timed fits per process (their median): of the whole-fit shapes, and "
        "(1-tree, N-tree) couples of the dense shapes",
    )
    ap.add_argument(
        "--metric",
        choices=("wall", "cpu"),
        default="wall",
        help="compare wall time (default) or the process's CPU time (every "
        "thread; steadier on a loaded machine, fair for 1-thread shapes, "
        "counts idle spinning of pool threads on others)",
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--lightgbm",
        action="store_true",
        help="also time LightGBM in head's processes (head / LightGBM)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the base worktree and caches")
    ap.add_argument(
        "--cache-root",
        default=None,
        help="keep the numba caches (base-<sha>/, head-<sources>/) and the base checkout "
        "(tree-<sha>/, a git worktree: numba's cache is keyed by the source "
        "files' paths and times) here, reused by later runs (default: all "
        "fresh in a temporary folder, removed at the end)",
    )
    ap.add_argument("--out", default=os.path.join(HERE, "results", "ab.jsonl"))
    ap.add_argument("--table", default=None, help="also write the markdown table here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--side", default="head", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown or not shapes:
        ap.error(f"unknown shape(s) {unknown}; choose from {', '.join(SHAPES)}")
    args.shapes = shapes
    if args.pairs is None:
        args.pairs = 2 if args.quick else 5
    if args.rows is None:
        args.rows = 200_000 if args.quick else 1_000_000
    if args.trees is None:
        args.trees = 10 if args.quick else 30
    if args.pairs < 1 or args.threads < 1 or args.trees < 2 or args.rows < 1000 or args.repeats < 1:
        ap.error("--pairs, --threads, --repeats >= 1, --trees >= 2, --rows >= 1000")
    return args


def shape_threads(shape, default_threads):
    """Threads a shape runs on."""
    t = SHAPES[shape][1]
    return default_threads if t is None else t


def order_of_pair(i):
    """Which side runs first in pair i: base first in even pairs, head first in odd ones."""
    return ("base", "head") if i % 2 == 0 else ("head", "base")


def summarize(shape, runs):
    """One shape's summary from its run records (``side``, ``pair``, ``value``, ``load``;
    optionally ``lightgbm``): the pairs' ratios head / base, their median and spread."""
    by_pair = {}
    for r in runs:
        by_pair.setdefault(r["pair"], {})[r["side"]] = r
    ratios = [
        p["head"]["value"] / p["base"]["value"]
        for _, p in sorted(by_pair.items())
        if "head" in p and "base" in p and p["base"]["value"] > 0
    ]
    if not ratios:
        raise ValueError(f"shape {shape}: no complete (base, head) pair")
    loads = [r["load"] for r in runs]
    out = dict(
        shape=shape,
        pairs=len(ratios),
        ratio=statistics.median(ratios),
        ratio_min=min(ratios),
        ratio_max=max(ratios),
        ratios=ratios,
        base=statistics.median(r["value"] for r in runs if r["side"] == "base"),
        head=statistics.median(r["value"] for r in runs if r["side"] == "head"),
        load_mean=sum(loads) / len(loads),
        load_max=max(loads),
    )
    lgb = [r["value"] / r["lightgbm"] for r in runs if r["side"] == "head" and r.get("lightgbm")]
    if lgb:
        out["head_over_lightgbm"] = statistics.median(lgb)
    return out


def verdict(ratio):
    return "slower: state why" if ratio > SLOWER_LIMIT else "ok"


def markdown_table(summaries, base, head):
    """The A/B table (markdown) of ``summarize``'s records."""
    with_lgb = any("head_over_lightgbm" in s for s in summaries)
    cols = (
        [
            "shape",
            "metric",
            "base",
            "head",
            "head / base (median)",
            "spread (min-max)",
            "pairs",
            "load 1-min (mean, max)",
        ]
        + (["head / LightGBM"] if with_lgb else [])
        + ["verdict"]
    )
    lines = [
        f"A/B: head {head} against base {base}",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + " --- |" * len(cols),
    ]
    for s in summaries:
        metric = SHAPES[s["shape"]][2] if s["shape"] in SHAPES else "?"
        row = [
            s["shape"],
            metric,
            f"{s['base']:.4g}",
            f"{s['head']:.4g}",
            f"{s['ratio']:.3f}",
            f"{s['ratio_min']:.3f}-{s['ratio_max']:.3f}",
            str(s["pairs"]),
            f"{s['load_mean']:.2f}, {s['load_max']:.2f}",
        ]
        if with_lgb:
            v = s.get("head_over_lightgbm")
            row.append("" if v is None else f"{v:.3f}")
        row.append(verdict(s["ratio"]))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def source_digest(root):
    """sha256 (hex) of the contents and paths of every ``.py`` file under ``root``'s
    ``gpufs/`` and ``cuda_kernels/`` (links not followed): equal exactly when the compiled
    code's sources are equal, whatever their time stamps."""
    import hashlib

    h = hashlib.sha256()
    for top in ("gpufs", "cuda_kernels"):
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if name.endswith(".py") and not os.path.islink(path):
                    h.update(os.path.relpath(path, root).encode() + b"\0")
                    with open(path, "rb") as fh:
                        h.update(fh.read() + b"\0")
    return h.hexdigest()


def run_env(base_env, side_root, cache_dir, threads):
    """The environment of one run: its side's tree first on the path, its cache, its threads."""
    env = dict(base_env)
    env["PYTHONPATH"] = side_root + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env["NUMBA_CACHE_DIR"] = cache_dir
    for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    return env


def pin_prefix(threads, taskset=None, n_cpus=None):
    """``taskset -c 0-(threads-1)`` where taskset exists and the machine has the cores."""
    n_cpus = n_cpus or os.cpu_count() or 1
    if not taskset:
        return []
    cores = "0" if min(threads, n_cpus) == 1 else f"0-{min(threads, n_cpus) - 1}"
    return [taskset, "-c", cores]


# --- the worker: one shape, timed, in a fresh process -----------------------------------------

#: CPU seconds (this process, every thread) of the last ``_timed`` call
_LAST_CPU = [0.0]


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    _LAST_CPU[0] = time.process_time() - c0
    return time.perf_counter() - t0, out


def _median_fit(fn, repeats):
    """(wall, cpu): the medians of ``repeats`` timed calls."""
    wall, cpu = [], []
    for _ in range(repeats):
        wall.append(_timed(fn)[0])
        cpu.append(_LAST_CPU[0])
    return statistics.median(wall), statistics.median(cpu)


def worker(args):
    import numpy as np

    sys.path.insert(0, HERE)
    import gpufs
    from gpufs import GBFSClassifier

    shape, threads = args.worker, shape_threads(args.worker, args.threads)
    rec = dict(shape=shape, threads=threads, gpufs_file=gpufs.__file__)
    lgb_s = None
    if shape.startswith("dense"):
        from _peers import lightgbm_cegb_params, time_lightgbm
        from bench_cpu_gbfs import make_data

        X, y = make_data(args.rows, 100, seed=0)
        params = dict(
            mu=50.0,
            penalty_scaling="none",
            max_depth=4,
            max_bins=255,
            learning_rate=0.1,
            reg_lambda=1.0,
            min_child_weight=1e-3,
            device="cpu",
            random_state=0,
        )
        GBFSClassifier(**params, n_estimators=2).fit(X[:50_000], y[:50_000])  # cache load
        # ``repeats`` (1-tree fit, N-tree fit) couples back to back, each giving a per-tree
        # time; their median (one fit of a load spike no longer decides the run)
        walls, cpus = [], []
        for _ in range(args.repeats):
            t1, _ = _timed(lambda: GBFSClassifier(**params, n_estimators=1).fit(X, y))
            c1 = _LAST_CPU[0]
            tn, _ = _timed(lambda: GBFSClassifier(**params, n_estimators=args.trees).fit(X, y))
            walls.append((tn - t1) / (args.trees - 1))
            cpus.append((_LAST_CPU[0] - c1) / (args.trees - 1))
        value, cpu_value = statistics.median(walls), statistics.median(cpus)
        rec.update(rows=args.rows, trees=args.trees, fit_1_s=t1, fit_s=tn)
        if args.lightgbm:
            p = lightgbm_cegb_params("binary", 4, 100, 50.0)
            p["num_threads"] = threads
            lgb_s = time_lightgbm(X, y, p, args.trees)["per_tree_s"]
    else:
        if shape == "small":
            from bench_cpu_small import small_data

            X, y = small_data()
            trees, kw, n_classes = 200, dict(mu=0.05), 2
        elif shape in ("counts", "flags"):
            from bench_wide import onehot, synthetic

            X, y, n_classes = synthetic(1500) if shape == "counts" else onehot()
            trees, kw = 20, dict(mu=0.05)
        else:
            from sklearn.datasets import make_classification

            X, y = make_classification(
                189, 500, n_informative=12, n_classes=7, n_clusters_per_class=1, random_state=0
            )
            X, n_classes = X.astype(np.float32), 7
            trees, kw = 100, dict(n_features_to_select=3)

        def fit(n=trees):
            return GBFSClassifier(
                n_estimators=n, max_depth=4, max_bins=255, device="cpu", random_state=0, **kw
            ).fit(X, y)

        fit(2 if "n_features_to_select" not in kw else trees)  # cache load
        value, cpu_value = _median_fit(fit, args.repeats)
        rec.update(rows=X.shape[0], features=X.shape[1], trees=trees)
        if args.lightgbm:
            import lightgbm as lgb

            from _peers import lightgbm_cegb_params

            p = lightgbm_cegb_params(
                "binary" if n_classes == 2 else "multiclass",
                4,
                X.shape[1],
                kw.get("mu", 0.0) if n_classes == 2 else 0.0,
            )
            p["num_threads"] = threads
            if shape in ("counts", "flags"):
                p.pop("force_row_wise")
                p["enable_bundle"] = False
            if n_classes > 2:
                p["num_class"] = n_classes

            def lfit():
                return lgb.train(p, lgb.Dataset(X, y, params=p), num_boost_round=trees)

            lfit()
            lgb_s = _median_fit(lfit, args.repeats)[0]
    rec.update(value=value, cpu_value=cpu_value, metric=SHAPES[shape][2], lightgbm=lgb_s)
    print("AB_RESULT " + json.dumps(rec), flush=True)


# --- the driver ---------------------------------------------------------------------------------


def _git(*a, cwd=ROOT):
    return subprocess.run(
        ["git", *a], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def _run_one(side, root, cache, shape, args, pair):
    threads = shape_threads(shape, args.threads)
    cmd = (
        pin_prefix(threads, shutil.which("taskset"))
        + [
            sys.executable,
            os.path.join(HERE, "ab.py"),
            "--worker",
            shape,
            "--side",
            side,
            "--threads",
            str(args.threads),
            "--rows",
            str(args.rows),
            "--trees",
            str(args.trees),
            "--repeats",
            str(args.repeats),
        ]
        + (["--lightgbm"] if args.lightgbm and side == "head" else [])
    )
    load = os.getloadavg()[0]
    p = subprocess.run(
        cmd,
        cwd=root,
        env=run_env(os.environ, root, cache, threads),
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [x for x in p.stdout.splitlines() if x.startswith("AB_RESULT ")]
    if p.returncode or not lines:
        raise RuntimeError(f"{side} {shape} failed (rc {p.returncode}):\n{p.stderr[-3000:]}")
    rec = json.loads(lines[-1][len("AB_RESULT ") :])
    if not os.path.realpath(rec["gpufs_file"]).startswith(os.path.realpath(root)):
        raise RuntimeError(f"{side} imported gpufs from {rec['gpufs_file']}, not from {root}")
    load = max(load, os.getloadavg()[0])
    rec.update(side=side, pair=pair, load=load, wall_value=rec["value"])
    if args.metric == "cpu":
        rec["value"] = rec["cpu_value"]
    return rec


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    base = args.base or _git("merge-base", "HEAD", "main")
    base_sha = _git("rev-parse", base)
    head_sha = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    head_name = head_sha[:10] + (" + working tree" if dirty else "")
    # a kill still removes the base worktree (the ``finally`` below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix=".ab-", dir=os.path.dirname(ROOT))
    base_root = os.path.join(tmp, "base")
    reuse = False
    if args.cache_root:
        # numba's cache is keyed by each source file's path and time stamp: a kept cache
        # only serves the same checkout, so keep the base checkout beside it as well
        base_root = os.path.join(os.path.abspath(args.cache_root), "tree-" + base_sha[:12])
        reuse = os.path.isdir(base_root)
    cache_root = os.path.abspath(args.cache_root) if args.cache_root else tmp
    caches = {
        "base": os.path.join(cache_root, "base-" + base_sha[:12]),
        # numba checks only the stamp of a cached kernel's own file, not of the functions it
        # inlines from others: a head cache kept across edits served a kernel compiled from
        # an earlier rules/_gain.py and made head 24 % slower on the small fit. So one head
        # cache per content of the package's sources.
        "head": os.path.join(cache_root, "head-" + source_digest(ROOT)[:12]),
    }
    roots = {"base": base_root, "head": ROOT}
    if not reuse:
        _git("worktree", "add", "--detach", base_root, base_sha)
    try:
        # a source checkout's gpufs/cuda_kernels link (to cuda_kernels/ beside the package)
        link = os.path.join(ROOT, "gpufs", "cuda_kernels")
        blink = os.path.join(base_root, "gpufs", "cuda_kernels")
        if (
            os.path.islink(link)
            and not os.path.lexists(blink)
            and os.path.isdir(os.path.join(base_root, "cuda_kernels"))
        ):
            os.symlink(os.readlink(link), blink)
        print(
            f"base {base_sha[:10]} in {base_root}; head {head_name}; warming the caches", flush=True
        )
        for shape in args.shapes:
            for side in ("base", "head"):
                _run_one(side, roots[side], caches[side], shape, args, -1)
        summaries = []
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        common = dict(
            bench="ab",
            base=base_sha,
            head=head_sha,
            dirty=dirty,
            cpus=os.cpu_count(),
            time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        for shape in args.shapes:
            runs = []
            for i in range(args.pairs):
                for side in order_of_pair(i):
                    rec = _run_one(side, roots[side], caches[side], shape, args, i)
                    runs.append(rec)
                    print(
                        f"  {shape} pair {i} {side}: {rec['value']:.4f} s (load {rec['load']:.2f})",
                        flush=True,
                    )
            s = summarize(shape, runs)
            summaries.append(s)
            with open(args.out, "a") as fh:
                for r in runs:
                    fh.write(json.dumps({**common, "kind": "run", **r}) + "\n")
                fh.write(json.dumps({**common, "kind": "summary", **s}) + "\n")
        table = markdown_table(summaries, base_sha[:10], head_name + f" ({args.metric} time)")
        print(table)
        if args.table:
            with open(args.table, "w") as fh:
                fh.write(table + "\n")
    finally:
        if not args.keep:
            if not args.cache_root:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", base_root],
                    cwd=ROOT,
                    capture_output=True,
                    check=False,
                )
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
