"""Issue 36, item 13: one compile serves every task, input dtype and family.

Each CPU kernel is compiled for one signature: a kernel typed on the task (a label dtype, a
kernel per objective) or on a literal argument compiled again for each, 4-20 s of a user's
second fit. After fits of every task on float64 and float32 input, on read-only input (a
memmap, pandas' copy-on-write arrays: a read-only array is a numba type of its own), and of
F-order or strided input, and of the other families, no kernel of ``gpufs.backends.cpu`` or of
the input door holds two signatures.

The fits run in a fresh interpreter: in the suite's own process the count would depend on
which tests ran before (a pytest-xdist worker once saw a signature compiled by another file's
test). Kernels loaded from numba's cache count as signatures too, so a warm cache checks the
same thing as a cold one.
"""

import importlib
import json
import os
import pkgutil
import subprocess
import sys
import warnings

import numpy as np
from numba.core.registry import CPUDispatcher
from sklearn.datasets import load_breast_cancer

import gpufs
import gpufs.backends.cpu as cpu_kernels
import gpufs.data._input as input_door


def _fit_everything():
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:200], y[:200]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X, y).predict(X)
        gpufs.GBFSRegressor(n_estimators=3, device="cpu").fit(X, X[:, 0] + y)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X, (X[:, 0] > 14) + y)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X.astype(np.float32), y)
        gpufs.ControlBurnClassifier(
            n_features_to_select=2, random_state=0, max_trees_per_round=3
        ).fit(X, y)
        gpufs.StagewiseRegressor(n_features_to_select=2).fit(X, X[:, 1])
        # the same fits on read-only X and y, and their predictions
        Xr, yr, tr = _read_only(X), _read_only(y), _read_only(X[:, 0] + y)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(Xr, yr).predict(Xr)
        gpufs.GBFSRegressor(n_estimators=3, device="cpu").fit(Xr, tr).predict(Xr)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X, y).predict(Xr)
        # F order and strided (a column slice, as a DataFrame's blocks can be)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(np.asfortranarray(X), y)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X[:, ::2], y).predict(X[:, ::2])


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def several_signatures():
    """{kernel: [signatures]} of every kernel of ``gpufs.backends.cpu`` and of the input
    door that holds more than one, after ``_fit_everything`` (run in a fresh interpreter)."""
    _fit_everything()
    several = {}
    names = [i.name for i in pkgutil.iter_modules(cpu_kernels.__path__, cpu_kernels.__name__ + ".")]
    for name in names + [input_door.__name__]:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__:
                if len(obj.signatures) > 1:
                    several[f"{module.__name__}.{attr}"] = [str(s) for s in obj.signatures]
    return several


def test_every_cpu_kernel_has_one_signature():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(here), here, env.get("PYTHONPATH", "")])
    script = "import json, test_compile_once as t; print(json.dumps(t.several_signatures()))"
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=1200
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    several = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not several, several
