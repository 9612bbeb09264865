"""Nsight Compute (ncu) profile of gpufs's tree kernels at 10M x 100, in one device call.

Issue 37 step 1: before the histogram kernel is redesigned further, read per kernel the
achieved DRAM bandwidth, shared-memory atomic throughput and bank conflicts, occupancy and
the top warp-stall reasons of gpufs's two histogram kernels (``launch_rules.HIST_KERNEL``:
"bounded", the default, and "split_word", the kernel timed on the H100 at 16ccc71), its split
search and its partition (count and scatter), and of XGBoost's histogram kernel when its wheel
was carried (``.whl/``, as for ``bench_gpu_session.py``). One command on the GPU machine::

    bash bench/gpu_profile.sh            # everything below, writing to $OUT as it goes

Steps (each writes before the next starts, so a timeout keeps what was done):

  prepare  10M x 100 float32 rows (seed 0), binned once on the GPU (256 bins); the binned
           matrix, targets and bin mapper saved under --work for the later steps.
  ab       no profiler: each histogram kernel fits ``--trees`` depth-6 trees (squared error,
           mu = 0) twice, alternating (bounded, split_word, bounded, split_word), with CUDA
           events per kernel: histogram / search / partition ms per tree, and whether both
           kernels grew the same trees (they must: both sums are exact) -> ab.json
  ncu      one tree per histogram kernel under ``ncu`` (``--clock-control none``: the card's
           clocks are left alone), kernels matching ``histogram_|search_kernel|partition_``,
           the sections SpeedOfLight, MemoryWorkloadAnalysis, Occupancy, LaunchStats,
           WarpStateStats, SchedulerStats plus ``METRICS`` (those the device's ncu knows,
           from ``--query-metrics``) -> ncu_gpufs_<kernel>.csv (raw page)
  xgboost  XGBoost (``device="cuda"``, hist, depth 6, 256 bins) one round under ncu, kernels
           matching ``HistKernel`` -> ncu_xgboost.csv (skipped without the wheel)
  summary  per kernel: time, DRAM GB/s and % of peak, shared atomics and bank conflicts per
           atomic request, achieved / theoretical occupancy, registers, the three largest
           warp-stall reasons -> profile_summary.json and profile_summary.md

Here (no GPU): ``python bench/gpu_profile.py --dry-run`` prints the commands,
``python bench/gpu_profile.py --self-check`` runs the summary on a made-up ncu CSV, and the
workloads run under the CUDA simulator at toy sizes (``NUMBA_ENABLE_CUDASIM=1 ... --step
prepare --rows 200 --features 5``, then ``--step ab --depth 2 --trees 1``).
Nothing here is a claim until a device run writes it.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import pickle
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HIST_KERNELS = ("bounded", "split_word")
GPUFS_KERNELS = r"regex:histogram_|search_kernel|partition_"
XGB_KERNELS = r"regex:HistKernel"
SECTIONS = (
    "SpeedOfLight",
    "MemoryWorkloadAnalysis",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "SchedulerStats",
)
STALLS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "smsp__inst_executed_op_shared_atom.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_registers",
    "launch__shared_mem_per_block_dynamic",
    "launch__grid_size",
    "launch__block_size",
) + tuple(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALLS)
#: One tree of depth 6: 6 histogram, 6 search, 5-6 count and scatter launches.
GPUFS_LAUNCHES = 26
XGB_LAUNCHES = 12


# --- the workloads (run on the GPU machine, each in its own process) ---------------------------
def _data(args):
    """The binned matrix (device), targets (device) and bin mapper, from --work (made by the
    prepare step)."""
    import numpy as np

    xp = np
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":  # the simulator runs on numpy
        import cupy as xp
    Xb = xp.asarray(np.load(os.path.join(args.work, "Xb.npy")))
    y = xp.asarray(np.load(os.path.join(args.work, "y.npy")))
    with open(os.path.join(args.work, "bm.pkl"), "rb") as fh:
        bm = pickle.load(fh)
    return Xb, y, bm


def _make_rows(n, d, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    y = (
        X[:, 0] * X[:, 1]
        + np.sin(2 * X[:, 2])
        + 0.5 * X[:, 3]
        - 0.5 * X[:, 4] ** 2
        + 0.5 * rng.standard_normal(n, dtype=np.float32)
    ).astype(np.float64)
    return X, y


def step_prepare(args):
    import numpy as np

    from gpufs._device import to_host
    from gpufs.backends.gpu.backend import GPUBackend
    from gpufs.engine.binning import BinMapper

    os.makedirs(args.work, exist_ok=True)
    t0 = time.perf_counter()
    X, y = _make_rows(args.rows, args.features, 0)
    bm = BinMapper(255, random_state=0).fit(X)
    be = GPUBackend()
    Xb = be.bin_transform(X, bm.cuts_padded_, bm.n_bins_ - 1)
    np.save(os.path.join(args.work, "Xb.npy"), to_host(Xb))
    np.save(os.path.join(args.work, "y.npy"), y)
    if args.xgboost_x:
        np.save(os.path.join(args.work, "X.npy"), X)
    with open(os.path.join(args.work, "bm.pkl"), "wb") as fh:
        pickle.dump(bm, fh)
    print(f"prepare: {args.rows} x {args.features} in {time.perf_counter() - t0:.1f} s")


def _fit(backend, Xb, y, bm, trees, depth):
    import numpy as np

    from gpufs.engine.boosting import BoostingParams, DeviceRows, fit_boosting
    from gpufs.engine.grower import TreeParams
    from gpufs.engine.objectives import SquaredError
    from gpufs.engine.penalties import PenaltyState

    d = Xb.shape[1]
    params = BoostingParams(
        n_estimators=trees,
        hessian=True,
        tree=TreeParams(max_depth=depth, reg_lambda=1.0, learning_rate=0.1, min_child_weight=1.0),
    )
    pen = PenaltyState(0.0, np.ones(d), np.arange(d))
    return fit_boosting(backend, DeviceRows(backend, Xb, y), SquaredError(), pen, bm, params)


def trees_digest(ensemble):
    """A hash of every array of every tree (equal trees, equal digests)."""
    import numpy as np

    h = hashlib.sha256()
    for t in ensemble.trees:
        for k, v in sorted(t.arrays.items()):
            h.update(k.encode())
            h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest()[:16]


def step_ab(args):
    from gpufs.backends.gpu.backend import GPUBackend

    Xb, y, bm = _data(args)
    runs = []
    for rep in range(2):
        for kernel in HIST_KERNELS:
            be = GPUBackend(hist_kernel=kernel)
            _fit(be, Xb, y, bm, 1, args.depth)  # warm-up (compiles on a cold cache)
            be.kernel_events = True
            be.reset_timings()
            be.synchronize()
            t0 = time.perf_counter()
            fit = _fit(be, Xb, y, bm, args.trees, args.depth)
            be.synchronize()
            wall = time.perf_counter() - t0
            ms = {k: v / args.trees for k, v in be.kernel_times().items()}
            runs.append(
                dict(
                    hist_kernel=kernel,
                    rep=rep,
                    per_tree_s=wall / args.trees,
                    kernels_ms_per_tree=ms,
                    tile_slots=be.tile_slots,
                    rows_per_task=be._rows_per_task(Xb.shape[0]),
                    trees=trees_digest(fit.ensemble),
                )
            )
            print(json.dumps(runs[-1]), flush=True)
    same = len({r["trees"] for r in runs}) == 1
    out = dict(
        rows=args.rows,
        features=args.features,
        depth=args.depth,
        trees=args.trees,
        same_trees=same,
        runs=runs,
    )
    with open(os.path.join(args.out, "ab.json"), "w") as fh:
        json.dump(out, fh, indent=1)
    print("ab: same trees for both kernels:", same)


def step_fit_once(args):
    """The process ncu profiles: one warm-up-free tree with ``--hist-kernel``."""
    from gpufs.backends.gpu.backend import GPUBackend

    Xb, y, bm = _data(args)
    be = GPUBackend(hist_kernel=args.hist_kernel)
    _fit(be, Xb, y, bm, 1, args.depth)
    be.synchronize()


def step_xgboost_once(args):
    import cupy as cp
    import numpy as np
    import xgboost as xgb

    X = cp.asarray(np.load(os.path.join(args.work, "X.npy")))
    y = cp.asarray(np.load(os.path.join(args.work, "y.npy")))
    dm = xgb.QuantileDMatrix(X, y, max_bin=256)
    xgb.train(
        dict(
            device="cuda",
            tree_method="hist",
            max_depth=args.depth,
            max_bin=256,
            learning_rate=0.1,
            reg_lambda=1.0,
            min_child_weight=1.0,
        ),
        dm,
        num_boost_round=1,
    )
    cp.cuda.runtime.deviceSynchronize()


# --- ncu and its output ------------------------------------------------------------------------
def known_metrics(query_output, metrics=METRICS):
    """The metrics of ``metrics`` whose base name (before the first '.') the device's ncu
    lists (``ncu --query-metrics`` output); all of them when the query gave nothing."""
    names = set(re.findall(r"^\s*([a-z0-9_]+__[a-z0-9_]+)", query_output, re.M))
    if not names:
        return list(metrics)
    return [m for m in metrics if m.split(".")[0] in names]


def ncu_command(ncu, report, kernels, launches, metrics, workload):
    """The ncu command line profiling ``workload`` (a list) into ``report`` (.ncu-rep)."""
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--kernel-name-base",
        "demangled",
        "--kernel-name",
        kernels,
        "--launch-count",
        str(launches),
        "-f",
        "-o",
        report,
    ]
    for s in SECTIONS:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + list(workload)


def kernel_family(name):
    """A profiled kernel's row label: gpufs's kernels by function, XGBoost's histogram."""
    for fam in (
        "histogram_bounded_kernel",
        "histogram_kernel",
        "search_kernel",
        "partition_count_kernel",
        "partition_scatter_kernel",
    ):
        if fam in name:
            return fam
    if "HistKernel" in name:
        m = re.search(r"(\w*HistKernel)", name)
        return "xgboost:" + (m.group(1) if m else "HistKernel")
    return name[:60]


def _num(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None


def parse_raw_csv(text):
    """ncu's ``--page raw --csv`` export: a header row of metric names, a row of units, then
    one row per profiled launch -> list of {metric: value} (numbers where they parse)."""
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if r]
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        return []
    head, units = rows[start], rows[start + 1]
    scale = {
        "ms": 1e-3,
        "us": 1e-6,
        "usecond": 1e-6,
        "msecond": 1e-3,
        "nsecond": 1e-9,
        "ns": 1e-9,
        "second": 1.0,
        "s": 1.0,
        "byte": 1.0,
        "Kbyte": 1e3,
        "Mbyte": 1e6,
        "Gbyte": 1e9,
        "KB": 1e3,
        "MB": 1e6,
        "GB": 1e9,
    }
    out = []
    for r in rows[start + 2 :]:
        rec = {}
        for k, u, v in zip(head, units, r):
            x = _num(v)
            if x is not None and k.startswith(("gpu__time", "dram__bytes")):
                x *= scale.get(u, 1.0)  # seconds and bytes
            rec[k] = x if x is not None else v
        out.append(rec)
    return out


def summarize(launches, peak_bytes_s=None):
    """Per kernel family: launches, total and largest launch time, DRAM bandwidth, shared
    atomics, bank conflicts per atomic wavefront, occupancy, registers, top stalls."""
    fams = {}
    for r in launches:
        fams.setdefault(kernel_family(str(r.get("Kernel Name", ""))), []).append(r)

    def tot(rs, k):
        vals = [r.get(k) for r in rs if isinstance(r.get(k), float)]
        return sum(vals) if vals else None

    def mean(rs, k, w=None):
        pairs = [(r.get(k), r.get(w) if w else 1.0) for r in rs]
        pairs = [(v, x) for v, x in pairs if isinstance(v, float) and isinstance(x, float)]
        den = sum(x for _, x in pairs)
        return sum(v * x for v, x in pairs) / den if den else None

    t = "gpu__time_duration.sum"
    out = {}
    for fam, rs in sorted(fams.items()):
        time_s = tot(rs, t)
        dram = [tot(rs, "dram__bytes_read.sum"), tot(rs, "dram__bytes_write.sum")]
        rec = dict(
            launches=len(rs),
            time_ms=1e3 * time_s if time_s else None,
            largest_ms=1e3 * max((r.get(t) or 0.0) for r in rs),
        )
        if time_s and None not in dram:
            rec["dram_gb_s"] = sum(dram) / time_s / 1e9
            if peak_bytes_s:
                rec["dram_pct_of_peak"] = 100 * sum(dram) / time_s / peak_bytes_s
        rec["dram_pct_of_peak_ncu"] = mean(
            rs, "dram__throughput.avg.pct_of_peak_sustained_elapsed", t
        )
        atoms = tot(rs, "smsp__inst_executed_op_shared_atom.sum")
        wav = tot(rs, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum")
        conf = tot(rs, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum")
        if atoms is not None:
            rec["shared_atom_inst"] = atoms
            if time_s:
                rec["shared_atom_inst_per_s"] = atoms / time_s
        if wav and conf is not None:
            rec["atom_bank_conflicts_per_wavefront"] = conf / wav
        rec["occupancy_achieved_pct"] = mean(
            rs, "sm__warps_active.avg.pct_of_peak_sustained_active", t
        )
        rec["occupancy_theoretical_pct"] = mean(rs, "sm__maximum_warps_per_active_cycle_pct", t)
        rec["registers"] = mean(rs, "launch__registers_per_thread")
        stalls = {}
        for s in STALLS:
            v = mean(rs, f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio", t)
            if v is not None:
                stalls[s] = v
        rec["top_stalls"] = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
        out[fam] = rec
    return out


def summary_markdown(summ, title):
    cols = (
        "launches",
        "time_ms",
        "dram_gb_s",
        "dram_pct_of_peak_ncu",
        "shared_atom_inst_per_s",
        "atom_bank_conflicts_per_wavefront",
        "occupancy_achieved_pct",
        "occupancy_theoretical_pct",
        "registers",
    )
    lines = [
        f"## {title}",
        "",
        "| kernel | " + " | ".join(cols) + " | top stalls |",
        "|" + "---|" * (len(cols) + 2),
    ]
    for fam, rec in summ.items():
        cells = []
        for c in cols:
            v = rec.get(c)
            cells.append("" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v))
        stalls = ", ".join(f"{k} {v:.2g}" for k, v in rec.get("top_stalls", []))
        lines.append(f"| {fam} | " + " | ".join(cells) + f" | {stalls} |")
    return "\n".join(lines) + "\n"


# --- the driver ---------------------------------------------------------------------------------
def _sh(cmd, log, timeout=None, env=None):
    print("$", " ".join(shlex.quote(c) for c in cmd), flush=True)
    with open(log, "a") as fh:
        fh.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        fh.flush()
        try:
            return subprocess.run(
                cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, env=env
            ).returncode
        except subprocess.TimeoutExpired:
            fh.write(f"timed out after {timeout} s\n")
            return 124


def _self(args, step, *extra):
    return [
        sys.executable,
        os.path.abspath(__file__),
        "--step",
        step,
        "--work",
        args.work,
        "--out",
        args.out,
        "--rows",
        str(args.rows),
        "--features",
        str(args.features),
        "--depth",
        str(args.depth),
        "--trees",
        str(args.trees),
    ] + list(extra)


def _peak_bandwidth():
    try:
        import cupy as cp

        rt = cp.cuda.runtime
        return 2.0 * rt.deviceGetAttribute(36, 0) * 1e3 * rt.deviceGetAttribute(37, 0) / 8.0
    except Exception:
        return None


def run_all(args):
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "session.log")
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(
            [ROOT] + ([args.site] if args.site else []) + [os.environ.get("PYTHONPATH", "")]
        ),
    )
    run = (
        (lambda cmd, timeout=None: print("$", " ".join(map(shlex.quote, cmd))))
        if args.dry_run
        else (lambda cmd, timeout=None: _sh(cmd, log, timeout, env))
    )
    have_xgb = (
        args.dry_run
        or subprocess.run(
            [sys.executable, "-c", "import xgboost"], env=env, capture_output=True
        ).returncode
        == 0
    )
    run(["nvidia-smi"], 30)
    run([args.ncu, "--version"], 30)
    run(_self(args, "prepare") + (["--xgboost-x"] if have_xgb else []), 240)
    if "ab" in args.steps:
        run(_self(args, "ab"), 240)
    metrics = list(METRICS)
    if not args.dry_run:
        q = subprocess.run(
            [args.ncu, "--query-metrics", "--chip", args.chip], capture_output=True, text=True
        )
        metrics = known_metrics(q.stdout)
        with open(log, "a") as fh:
            fh.write(
                f"metrics kept: {len(metrics)} of {len(METRICS)}; dropped: "
                f"{sorted(set(METRICS) - set(metrics))}\n"
            )
    peak = None if args.dry_run else _peak_bandwidth()
    summary, md = dict(peak_bytes_s=peak, rows=args.rows, features=args.features), []

    def export(name, rep):
        """The report's raw CSV and the summary so far, written at once (a later step that
        times out keeps them)."""
        if args.dry_run or not os.path.exists(rep + ".ncu-rep"):
            return
        csv_text = subprocess.run(
            [args.ncu, "--import", rep + ".ncu-rep", "--csv", "--page", "raw"],
            capture_output=True,
            text=True,
        ).stdout
        with open(os.path.join(args.out, f"ncu_{name}.csv"), "w") as fh:
            fh.write(csv_text)
        summary[name] = summarize(parse_raw_csv(csv_text), peak)
        md.append(summary_markdown(summary[name], name))
        with open(os.path.join(args.out, "profile_summary.json"), "w") as fh:
            json.dump(summary, fh, indent=1)
        with open(os.path.join(args.out, "profile_summary.md"), "w") as fh:
            fh.write("\n".join(md))

    if "ncu" in args.steps:
        for kernel in HIST_KERNELS:
            rep = os.path.join(args.work, f"gpufs_{kernel}")
            run(
                ncu_command(
                    args.ncu,
                    rep,
                    GPUFS_KERNELS,
                    GPUFS_LAUNCHES,
                    metrics,
                    _self(args, "fit-once", "--hist-kernel", kernel),
                ),
                200,
            )
            export(f"gpufs_{kernel}", rep)
    if "xgboost" in args.steps and have_xgb:
        rep = os.path.join(args.work, "xgboost")
        run(
            ncu_command(
                args.ncu, rep, XGB_KERNELS, XGB_LAUNCHES, metrics, _self(args, "xgboost-once")
            ),
            150,
        )
        export("xgboost", rep)
    print("\n".join(md))


_S = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_SAMPLE = (  # (metric, unit, launch 0, launch 1, launch 2) of a made-up ncu raw CSV
    ("ID", "", "0", "1", "2"),
    (
        "Kernel Name",
        "",
        "cudapy::histogram::histogram_bounded_kernel[abi:v1](Array)",
        "cudapy::split::search_kernel[abi:v1](Array)",
        "cudapy::histogram::histogram_bounded_kernel[abi:v1](Array)",
    ),
    ("gpu__time_duration.sum", "msecond", "10.0", "0.5", "5.0"),
    ("dram__bytes_read.sum", "Gbyte", "1.2", "0.1", "0.6"),
    ("dram__bytes_write.sum", "Mbyte", "16", "0", "8"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "40.5", "20", "40.5"),
    ("smsp__inst_executed_op_shared_atom.sum", "inst", "1,000,000", "0", "500,000"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum", "", "2,000,000", "0", "1,000,000"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum", "", "500,000", "0", "250,000"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "60", "30", "62"),
    ("sm__maximum_warps_per_active_cycle_pct", "%", "75", "50", "75"),
    ("launch__registers_per_thread", "register/thread", "47", "96", "47"),
    (_S.format("long_scoreboard"), "ratio", "3.5", "1.0", "3.0"),
    (_S.format("mio_throttle"), "ratio", "9.25", "0.1", "8.0"),
    (_S.format("barrier"), "ratio", "0.5", "4.0", "0.75"),
)


def _sample_csv():
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL).writerows(zip(*_SAMPLE))
    return buf.getvalue()


def self_check():
    """The summary of a made-up ncu CSV, checked by hand (no GPU needed)."""
    summ = summarize(parse_raw_csv(_sample_csv()), peak_bytes_s=3.35e12)
    h = summ["histogram_bounded_kernel"]
    assert h["launches"] == 2 and abs(h["time_ms"] - 15.0) < 1e-9, h
    assert abs(h["dram_gb_s"] - (1.8e9 + 24e6) / 15e-3 / 1e9) < 1e-6, h
    assert abs(h["atom_bank_conflicts_per_wavefront"] - 0.25) < 1e-12, h
    assert abs(h["occupancy_achieved_pct"] - (60 * 10 + 62 * 5) / 15) < 1e-9, h
    assert h["top_stalls"][0][0] == "mio_throttle", h
    assert summ["search_kernel"]["top_stalls"][0][0] == "barrier"
    assert known_metrics("dram__bytes_read  Counter  byte  # of bytes\n", METRICS[:3]) == [
        "dram__bytes_read.sum"
    ]
    assert known_metrics("", METRICS[:2]) == list(METRICS[:2])
    print(summary_markdown(summ, "self-check"))
    return summ


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/gpufs_profile_out")
    ap.add_argument("--work", default="/tmp/gpufs_profile")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--trees", type=int, default=3, help="trees per A/B fit")
    ap.add_argument("--steps", nargs="+", default=["ab", "ncu", "xgboost"])
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--chip", default="gh100")
    ap.add_argument("--site", default=None, help="carried wheels' install target")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--step", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--hist-kernel", default="bounded", help=argparse.SUPPRESS)
    ap.add_argument("--xgboost-x", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.self_check:
        self_check()
        return
    if args.step:
        sys.path.insert(0, ROOT)
        {
            "prepare": step_prepare,
            "ab": step_ab,
            "fit-once": step_fit_once,
            "xgboost-once": step_xgboost_once,
        }[args.step](args)
        return
    run_all(args)


if __name__ == "__main__":
    main()
