"""Issue 36, item 13: one compile serves every task, input dtype and family.

Each CPU kernel is compiled for one signature: a kernel typed on the task (a label dtype, a
kernel per objective) or on a literal argument compiled again for each, 4-20 s of a user's
second fit. After fits of every task on float64 and float32 input, on read-only input (a
memmap, pandas' copy-on-write arrays: a read-only array is a numba type of its own), and of
the other families, no kernel of ``gpufs.backends.cpu`` or of the input door holds two
signatures. (Within a suite other
tests have compiled first, so the count is of signatures, not of compiles.)
"""

import importlib
import pkgutil
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


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def test_every_cpu_kernel_has_one_signature():
    _fit_everything()
    several = {}
    names = [i.name for i in pkgutil.iter_modules(cpu_kernels.__path__, cpu_kernels.__name__ + ".")]
    for name in names + [input_door.__name__]:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__:
                if len(obj.signatures) > 1:
                    several[f"{module.__name__}.{attr}"] = [str(s) for s in obj.signatures]
    assert not several, several
