"""The labels of a boosting fit on the CPU reach the round kernel converted once per fit
(``CPUBackend.round_labels``, read by ``boosting.DeviceRows``), not once per round, and
``CPUBackend.gradients`` names the objectives it takes from the round kernel's table."""

import numpy as np
import pytest

from gpufs.backends.cpu import CPUBackend
from gpufs.backends.cpu.objective import _ROUND_KINDS
from gpufs.engine.boosting import BoostingParams, DeviceRows, fit_boosting
from gpufs.engine.grower import TreeParams
from gpufs.engine.objectives import Softmax
from gpufs.engine.penalties import PenaltyState


class _Recording(CPUBackend):
    """A CPU backend that records the labels every round's kernel is given."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def round_gradients(self, objective, raw, y):
        self.seen.append(y)
        return super().round_gradients(objective, raw, y)


def _fit(backend, y_codes):
    from gpufs.engine.binning import BinMapper

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5))
    bm = BinMapper(max_bins=16).fit(X)
    rows = DeviceRows(backend, bm.transform(X, backend), y_codes)
    pen = PenaltyState(0.0, np.ones(5), np.arange(5, dtype=np.int32))
    params = BoostingParams(n_estimators=4, tree=TreeParams(max_depth=2))
    return fit_boosting(backend, rows, Softmax(3), pen, bm, params)


def test_class_codes_are_converted_once_per_fit():
    y = np.random.default_rng(1).integers(0, 3, size=120).astype(np.int32)
    backend = _Recording()
    fit = _fit(backend, y)
    # one call per round, then the final loss (``loss_terms``, the round kernel too)
    rounds = [a for a in backend.seen if a is not None]
    assert len(rounds) >= 4
    first = rounds[0]
    assert first.dtype == np.float64 and np.array_equal(first, y)
    assert all(a is first for a in rounds[:4]), "the labels were converted again in a round"
    # the same trees as a fit whose labels were float64 from the start
    again = _fit(CPUBackend(), y.astype(np.float64))
    for a, b in zip(fit.ensemble.trees, again.ensemble.trees):
        for name, arr in a.arrays.items():
            assert np.array_equal(arr, b.arrays[name]), name


def test_round_labels_takes_float64_labels_without_a_copy():
    y = np.arange(10, dtype=np.float64)
    once = CPUBackend().round_labels(y)
    # a read-only view (one kernel signature for every y: ``_types.read_only``), not a copy
    assert np.shares_memory(once, y) and not once.flags.writeable
    assert CPUBackend().round_labels(once) is once  # what the rounds pass back, as it is


def test_gradients_objectives_are_the_round_kernels():
    backend = CPUBackend()
    raw = np.zeros((4, 1))
    y = np.array([0.0, 1.0, 1.0, 0.0])
    g, h = backend.gradients("logistic", raw, y)
    g2, h2, _ = backend.round_gradients("logistic", raw, y)
    assert np.array_equal(g, g2) and np.array_equal(h, h2)
    assert "squared_error" in _ROUND_KINDS
    with pytest.raises(ValueError, match="no kernel for objective"):
        backend.gradients("squared_error", raw, y)
