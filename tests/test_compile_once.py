"""Issue 36, item 13: one compile serves every task, input dtype and family.

Each CPU kernel is compiled for one signature: a kernel typed on the task (a label dtype, a
kernel per objective) or on a literal argument compiled again for each, 4-20 s of a user's
second fit. After fits of every task on float64 and float32 input, and of the other
families, no kernel of ``gpufs.backends.cpu`` holds two signatures. (Within a suite other
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


def _fit_everything():
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:200], y[:200]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X, y)
        gpufs.GBFSRegressor(n_estimators=3, device="cpu").fit(X, X[:, 0] + y)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X, (X[:, 0] > 14) + y)
        gpufs.GBFSClassifier(n_estimators=3, device="cpu").fit(X.astype(np.float32), y)
        gpufs.ControlBurnClassifier(
            n_features_to_select=2, random_state=0, max_trees_per_round=3
        ).fit(X, y)
        gpufs.StagewiseRegressor(n_features_to_select=2).fit(X, X[:, 1])


def test_every_cpu_kernel_has_one_signature():
    _fit_everything()
    several = {}
    for info in pkgutil.iter_modules(cpu_kernels.__path__, cpu_kernels.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__:
                if len(obj.signatures) > 1:
                    several[f"{info.name}.{name}"] = [str(s) for s in obj.signatures]
    assert not several, several
