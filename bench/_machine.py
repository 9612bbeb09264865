"""Machine description stamped into every benchmark record (the one place that reads it)."""

import os
import platform
import subprocess
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]


def machine_info() -> dict:
    """CPU, GPU, load, library versions and the gpufs commit of the machine running a bench."""
    info = {
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        ),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor(),
        "blas_threads_env": {
            k: os.environ[k]
            for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
            if k in os.environ
        },
    }
    try:
        # Other work on the machine skews timings; the load shows how busy it was.
        info["loadavg_1_5_15"] = list(os.getloadavg())
        info["loadavg_1m"] = info["loadavg_1_5_15"][0]
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        info["gpu"] = out.stdout.strip() or None
    except Exception:
        info["gpu"] = None
    versions = {}
    for mod in ("numpy", "numba", "sklearn", "cupy", "lightgbm", "xgboost"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:
            pass
    info["versions"] = versions
    try:
        info["gpufs_commit"] = subprocess.run(
            ["git", "-C", str(_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except Exception:
        pass
    return info
