"""Test data for the forest tests: a small regression problem, its bins, and a grow helper."""

import numpy as np

from gpufs.backends import get_backend
from gpufs.engine.binning import BinMapper
from gpufs.forest import ForestParams, grow_forest

CPU = get_backend("cpu")


def _data(m=400, d=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, d)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * X[:, 2] + 0.3 * rng.randn(m)
    return X, y


def _binned(X, max_bins=255):
    bm = BinMapper(max_bins, random_state=0).fit(X)
    return bm, bm.transform(X, CPU)


def _grow(X, y, task="regression", n_classes=0, seed=0, w=None, **kw):
    bm, Xb = _binned(X)
    return grow_forest(CPU, Xb, y, w, task, n_classes, bm, ForestParams(**kw), random_state=seed)
