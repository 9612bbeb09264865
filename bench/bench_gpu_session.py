"""Everything a session with a GPU owes, in one command: the GPU tests and the GPU benches.

On the GPU machine (the device tool runs commands in the repository root; what is written
under $OUT comes back), with the peers' wheels carried in ``.whl/`` (git-ignored; the GPU
machine cannot download: ``pip download --no-deps --only-binary=:all: --python-version 3.12
--platform manylinux_2_28_x86_64 -d .whl numpy==2.4.6 lightgbm platformdirs tbb tcmlib``;
numpy below 2.5 for numba-cuda 0.30.4; xgboost-cu13's 59 MB does not fit in one call beside
the working tree, so it travels in parts over back-to-back calls, ``wheel_parts.py``, and
is joined here before the install; rmm likewise):

    python bench/bench_gpu_session.py --quick --out "$OUT"     # one call, under 10 minutes
    python bench/bench_gpu_session.py --out "$OUT"              # everything, several calls

``--quick`` runs, in this order, each step writing its records as it goes: ``smoke`` (a small
GBFS fit on the GPU against the CPU; the session stops there with the error if it fails),
``door`` (``gpu_door_check.py``: numpy X and y with ``device="gpu"`` through every family),
``tests``, ``xgboost`` (the three sizes, fewer trees), ``e2e`` (``bench_gpu_e2e.py``: exact k
= 10 end to end on 1M x 100 and 10M x 100 cupy tables) and ``cpu`` (``bench_cpu_gbfs.py``
against LightGBM on the machine's cores, with the tbb wheel's threading layer when carried),
each under its own time limit (a fresh machine compiles every kernel first: ``smoke`` took
108 s on an H200) so the whole stays under 10 minutes; ``--limit`` changes one.

Steps (``--steps`` picks some, in this order, to split the work over several device calls of
at most 10 minutes each; every step appends its JSON to ``$OUT`` and its log to
``$OUT/session.log``):

  env       nvidia-smi (GPU model, memory, driver) and package versions -> env.json
  tests     the GPU-marked tests (``pytest -m gpu``: CPU == GPU trees, selections,
            predictions, cupy / cudf input, the out-of-memory error) and the real-compiler
            SASS test -> tests.json (counts) and tests_junit.xml
  xgboost   gpufs vs XGBoost ``device="cuda", tree_method="hist"`` (same trees: depth 6, 256
            bins, squared error, mu = 0) at 1M x 100, 1M x 500 and 10M x 100 float32 rows,
            time per tree, with per-kernel CUDA-event timings of a separate fit and the
            histogram kernel's bandwidth bound (bytes it must read / the GPU's memory
            bandwidth) -> gpu_vs_xgboost.jsonl
  gbfs      GBFS selection (mu > 0) on the GPU vs gpufs on the CPU vs LightGBM CEGB, same
            selection checked -> gpu_gbfs.jsonl
  controlburn  ControlBurn on the GPU and the CPU -> controlburn_gpu.jsonl
  smoke     a 20,000 x 20 GBFS fit (k = 3) on the GPU and the CPU: same selection -> smoke.json
  door      ``gpu_door_check.py``: host X and y with device="gpu", every family -> door.jsonl
  e2e       ``bench_gpu_e2e.py`` -> gpu_e2e.jsonl
  cpu       ``bench_cpu_gbfs.py`` (1M x 100, depth 4) vs LightGBM CEGB -> cpu_gbfs.jsonl
  stack     ``bench_gpu_stack.py``: ControlBurn 1M x 100, GT-GBM 100k x 5,000, stagewise
            1M x 1,000, each GPU vs CPU with the selections compared -> gpu_stack.jsonl
  cudf      ``bench_gpu_stack.py --cases cudf``: a cudf frame with categorical and null
            columns through fit / transform / predict under rmm's pool, its peak (needs the
            cudf and rmm wheels carried: split libcudf over several calls) -> gpu_cudf.jsonl

Nothing here is a claim: the records are what the next GPU session measures; copy them into
``bench/results/`` and commit them with the GPU model they name.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STEPS = (
    "env",
    "smoke",
    "door",
    "tests",
    "xgboost",
    "e2e",
    "gbfs",
    "controlburn",
    "cpu",
    "stack",
    "cudf",
)
DEFAULT_STEPS = ("env", "tests", "xgboost", "gbfs", "controlburn")
QUICK_STEPS = ("env", "smoke", "door", "tests", "xgboost", "e2e", "cpu")
#: seconds per step in --quick (570 s in all: one call of at most 10 minutes)
QUICK_LIMITS = {
    "env": 30,
    "smoke": 120,  # the kernels' cold compile: 108 s on an H200 (2026-11-29)
    "door": 40,
    "tests": 150,  # 98 s of tests and their compiles after the smoke fit, same machine
    "xgboost": 110,
    "e2e": 60,
    "cpu": 60,
}

SMOKE = """
import json, sys, numpy as np
from gpufs import GBFSClassifier
rng = np.random.RandomState(0)
X = rng.randn(20000, 20).astype(np.float32)
y = (X[:, 0] * X[:, 1] + X[:, 2] > 0).astype(np.int32)
out = {}
for device in ("gpu", "cpu"):
    sel = GBFSClassifier(n_features_to_select=3, n_estimators=20, max_depth=3,
                         device=device, random_state=0).fit(X, y)
    out[device] = [int(f) for f in sel.selected_features_]
out["same_selection"] = out["gpu"] == out["cpu"]
json.dump(out, open(sys.argv[1], "w"))
print(out)
sys.exit(0 if out["same_selection"] else 1)
"""


def _run(cmd, log, env=None, timeout=None):
    """Run ``cmd`` from the repository root, teeing its output into ``log``; returns rc."""
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout
            )
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = 124
        fh.write(f"[rc={rc}, {time.perf_counter() - t0:.1f} s]\n")
    return rc


def _env(extra_path=None):
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    paths = [ROOT] + ([extra_path] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join(
        paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def _bring_wheels(log):
    """Install the carried wheels (``.whl/`` and ``.whl-*/``: numpy, lightgbm, tbb, ...) under a
    temporary prefix (the GPU machine cannot download); returns (site-packages, lib) or None.

    ``--prefix``, not ``--target``: pip's ``--target`` keeps only the importable part of a
    wheel, so tbb's shared libraries (the wheel's data files, ``lib/libtbb.so.12``) were lost
    and numba fell back to another threading layer."""
    wheels = sorted(
        glob.glob(os.path.join(ROOT, ".whl", "*.whl"))
        + glob.glob(os.path.join(ROOT, ".whl-*", "*.whl"))
    )
    # a wheel too large for one call, carried in parts over several (``wheel_parts.py``)
    from wheel_parts import join

    try:
        wheels += join(ROOT, "/tmp/gpufs-joined")
    except ValueError as exc:  # the other wheels still install; the log says what is missing
        with open(log, "a") as fh:
            fh.write(f"wheel parts: {exc}\n")
    if not wheels:
        return None
    prefix = "/tmp/gpufs-prefix"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    # --ignore-installed: the machine's own numpy 2.5 stays, the carried 2.4 goes first on
    # PYTHONPATH (numba-cuda 0.30.4 needs numpy < 2.5: gpufs/_device.py)
    _run(cmd + ["--ignore-installed", "--no-compile", "--prefix", prefix] + wheels, log)
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return os.path.join(prefix, "lib", ver, "site-packages"), os.path.join(prefix, "lib")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default=os.environ.get("OUT"), required=not os.environ.get("OUT"))
    ap.add_argument(
        "--steps", default=None, help=f"subset of {STEPS} (default: {','.join(DEFAULT_STEPS)})"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"{','.join(QUICK_STEPS)}, each with a time limit: under 10 minutes",
    )
    ap.add_argument(
        "--trees", type=int, default=None, help="trees per timed fit (default 50; 20 with --quick)"
    )
    ap.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="STEP=SECONDS",
        help="a step's time limit (repeatable), over --quick's",
    )
    ap.add_argument("--e2e-sizes", default="1000000x100,10000000x100")
    ap.add_argument(
        "--cpu-threads",
        default="",
        help="comma-separated thread counts for the cpu step (gpufs's n_jobs and LightGBM's "
        "num_threads alike); default: every core",
    )
    args = ap.parse_args(argv)
    default = QUICK_STEPS if args.quick else DEFAULT_STEPS
    steps = [s for s in (args.steps or ",".join(default)).split(",") if s]
    trees = args.trees or (20 if args.quick else 50)
    limits = dict(QUICK_LIMITS) if args.quick else {}
    for item in args.limit:
        name, _, seconds = item.partition("=")
        limits[name] = float(seconds)
    bad = set(steps) - set(STEPS)
    if bad:
        ap.error(f"unknown steps {sorted(bad)}")
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "session.log")
    carried = _bring_wheels(log)
    env = _env(carried[0] if carried else None)
    if carried and glob.glob(os.path.join(carried[1], "libtbb.so*")):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [carried[1]] + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else [])
        )
        env.setdefault("NUMBA_THREADING_LAYER", "tbb")
    py = sys.executable
    summary = {}
    for step in steps:
        t0 = time.perf_counter()
        limit = limits.get(step)
        if step == "smoke":
            smoke = os.path.join(args.out, "smoke.json")
            rc = _run([py, "-c", SMOKE, smoke], log, env, timeout=limit)
            summary[step] = {"rc": rc, "seconds": time.perf_counter() - t0}
            print(json.dumps({"step": step, **summary[step]}), flush=True)
            if rc != 0:  # the GPU path does not run: nothing after this would mean anything
                print(open(log).read()[-4000:], flush=True)
                break
            continue
        if step == "env":
            try:
                smi = subprocess.run(
                    [
                        "nvidia-smi",
                        "--query-gpu=name,memory.total,driver_version",
                        "--format=csv,noheader",
                    ],
                    capture_output=True,
                    text=True,
                )
            except FileNotFoundError:  # no NVIDIA driver here
                smi = subprocess.CompletedProcess([], 127, "", "nvidia-smi not found")
            pkgs = subprocess.run(
                [py, "-m", "pip", "list", "--format=json"], capture_output=True, text=True
            )
            keep = ("cupy", "numba", "rmm", "xgboost", "lightgbm", "cuda", "nvidia")
            versions = {
                p["name"]: p["version"]
                for p in json.loads(pkgs.stdout or "[]")
                if any(k in p["name"].lower() for k in keep)
            }
            with open(os.path.join(args.out, "env.json"), "w") as fh:
                json.dump({"nvidia_smi": smi.stdout.strip(), "packages": versions}, fh, indent=1)
            rc = smi.returncode
        elif step == "door":
            rc = _run(
                [py, os.path.join(HERE, "gpu_door_check.py"), os.path.join(args.out, "door.jsonl")],
                log,
                env,
                timeout=limit,
            )
        elif step == "tests":
            junit = os.path.join(args.out, "tests_junit.xml")
            rc = _run(
                [
                    py,
                    "-m",
                    "pytest",
                    "-v",  # one line per test as it ends: a step cut by its limit keeps them
                    "--durations=15",
                    "-p",
                    "no:cacheprovider",
                    "-m",
                    "gpu",
                    f"--junitxml={junit}",
                    "tests",
                ],
                log,
                env,
                timeout=limit,
            )
            rc_sass = _run(
                [
                    py,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "tests/test_cuda_kernels_sim.py::test_kernels_compile_to_sass",
                ],
                log,
                env,
                timeout=limit,
            )
            with open(os.path.join(args.out, "tests.json"), "w") as fh:
                json.dump({"gpu_tests_rc": rc, "sass_test_rc": rc_sass}, fh)
            rc = rc or rc_sass
        elif step == "xgboost":
            rc = _run(
                [
                    py,
                    os.path.join(HERE, "bench_gpu_vs_xgboost.py"),
                    "--sizes",
                    "1000000x100,1000000x500,10000000x100",
                    "--trees",
                    str(trees),
                    "--kernel-times",
                    "--out",
                    os.path.join(args.out, "gpu_vs_xgboost.jsonl"),
                ]
                + (["--profile-trees", "5"] if args.quick else []),
                log,
                env,
                timeout=limit,
            )
        elif step == "e2e":
            rc = _run(
                [
                    py,
                    os.path.join(HERE, "bench_gpu_e2e.py"),
                    "--sizes",
                    args.e2e_sizes,
                    "--out",
                    os.path.join(args.out, "gpu_e2e.jsonl"),
                ],
                log,
                env,
                timeout=limit,
            )
        elif step == "cpu":
            rc = 0
            for threads in [t for t in args.cpu_threads.split(",") if t] or [None]:
                rc = (
                    _run(
                        [
                            py,
                            os.path.join(HERE, "bench_cpu_gbfs.py"),
                            "--trees",
                            str(trees),
                            "--out",
                            os.path.join(args.out, "cpu_gbfs.jsonl"),
                        ]
                        + (["--threads", threads] if threads else []),
                        log,
                        env,
                        timeout=limit,
                    )
                    or rc
                )  # every thread count runs; the step fails if any did
        elif step in ("stack", "cudf"):
            name = "gpu_stack.jsonl" if step == "stack" else "gpu_cudf.jsonl"
            rc = _run(
                [
                    py,
                    os.path.join(HERE, "bench_gpu_stack.py"),
                    "--out",
                    os.path.join(args.out, name),
                ]
                + (["--cases", "cudf"] if step == "cudf" else []),
                log,
                env,
                timeout=limit,
            )
        elif step == "gbfs":
            rc = _run(
                [
                    py,
                    os.path.join(HERE, "bench_gpu_gbfs.py"),
                    "--trees",
                    str(trees),
                    "--out",
                    os.path.join(args.out, "gpu_gbfs.jsonl"),
                ],
                log,
                env,
            )
        else:
            out = os.path.join(args.out, "controlburn_gpu.jsonl")
            rc = 0
            for device in ("gpu", "cpu"):
                rc = _run(
                    [
                        py,
                        os.path.join(HERE, "bench_controlburn.py"),
                        "--device",
                        device,
                        "--skip-package",
                        "--skip-cv",
                        "--rows",
                        "200000",
                        "--out",
                        out,
                    ],
                    log,
                    env,
                )
        summary[step] = {"rc": rc, "seconds": time.perf_counter() - t0}
        print(json.dumps({"step": step, **summary[step]}), flush=True)
    with open(os.path.join(args.out, "session.json"), "a") as fh:
        fh.write(json.dumps(summary) + "\n")
    return 0 if all(v["rc"] == 0 for v in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
