"""Everything a session with a GPU owes, in one command: the GPU tests and the GPU benches.

On the GPU machine (the device tool runs commands in the repository root; what is written
under $OUT comes back), after bringing the XGBoost wheel as ``shared/DEVICE.md`` says
(``.whl-xgb/`` in the working tree):

    python bench/bench_gpu_session.py --out "$OUT"

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
STEPS = ("env", "tests", "xgboost", "gbfs", "controlburn")


def _run(cmd, log, env=None, timeout=None):
    """Run ``cmd`` from the repository root, teeing its output into ``log``; returns rc."""
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                  timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = 124
        fh.write(f"[rc={rc}, {time.perf_counter() - t0:.1f} s]\n")
    return rc


def _env(extra_path=None):
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    paths = [ROOT] + ([extra_path] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                 else []))
    return env


def _bring_xgboost(log):
    """Install the XGBoost wheel of ``.whl-xgb/`` into a temporary target when xgboost does
    not import (the GPU machine cannot download); returns the target or None."""
    try:
        import xgboost  # noqa: F401
        return None
    except ImportError:
        pass
    wheels = glob.glob(os.path.join(ROOT, ".whl-xgb", "*.whl"))
    if not wheels:
        return None
    target = "/tmp/gpufs-site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
          target] + wheels, log)
    return target


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT"), required=not os.environ.get("OUT"))
    ap.add_argument("--steps", default=",".join(STEPS), help=f"subset of {STEPS}")
    ap.add_argument("--trees", type=int, default=50, help="trees per timed fit")
    args = ap.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    bad = set(steps) - set(STEPS)
    if bad:
        ap.error(f"unknown steps {sorted(bad)}")
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "session.log")
    site = _bring_xgboost(log)
    env = _env(site)
    py = sys.executable
    summary = {}
    for step in steps:
        t0 = time.perf_counter()
        if step == "env":
            try:
                smi = subprocess.run(["nvidia-smi",
                                      "--query-gpu=name,memory.total,driver_version",
                                      "--format=csv,noheader"], capture_output=True, text=True)
            except FileNotFoundError:  # no NVIDIA driver here
                smi = subprocess.CompletedProcess([], 127, "", "nvidia-smi not found")
            pkgs = subprocess.run([py, "-m", "pip", "list", "--format=json"],
                                  capture_output=True, text=True)
            keep = ("cupy", "numba", "rmm", "xgboost", "lightgbm", "cuda", "nvidia")
            versions = {p["name"]: p["version"] for p in json.loads(pkgs.stdout or "[]")
                        if any(k in p["name"].lower() for k in keep)}
            with open(os.path.join(args.out, "env.json"), "w") as fh:
                json.dump({"nvidia_smi": smi.stdout.strip(), "packages": versions}, fh, indent=1)
            rc = smi.returncode
        elif step == "tests":
            junit = os.path.join(args.out, "tests_junit.xml")
            rc = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                       f"--junitxml={junit}", "tests"], log, env)
            rc_sass = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "tests/test_cuda_kernels_sim.py::test_kernels_compile_to_sass"],
                           log, env)
            with open(os.path.join(args.out, "tests.json"), "w") as fh:
                json.dump({"gpu_tests_rc": rc, "sass_test_rc": rc_sass}, fh)
            rc = rc or rc_sass
        elif step == "xgboost":
            rc = _run([py, os.path.join(HERE, "bench_gpu_vs_xgboost.py"), "--sizes",
                       "1000000x100,1000000x500,10000000x100", "--trees", str(args.trees),
                       "--kernel-times", "--out",
                       os.path.join(args.out, "gpu_vs_xgboost.jsonl")], log, env)
        elif step == "gbfs":
            rc = _run([py, os.path.join(HERE, "bench_gpu_gbfs.py"), "--trees", str(args.trees),
                       "--out", os.path.join(args.out, "gpu_gbfs.jsonl")], log, env)
        else:
            out = os.path.join(args.out, "controlburn_gpu.jsonl")
            rc = 0
            for device in ("gpu", "cpu"):
                rc = rc or _run([py, os.path.join(HERE, "bench_controlburn.py"), "--device",
                                 device, "--skip-package", "--skip-cv", "--rows", "200000",
                                 "--out", out], log, env)
        summary[step] = {"rc": rc, "seconds": time.perf_counter() - t0}
        print(json.dumps({"step": step, **summary[step]}), flush=True)
    with open(os.path.join(args.out, "session.json"), "a") as fh:
        fh.write(json.dumps(summary) + "\n")
    return 0 if all(v["rc"] == 0 for v in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
