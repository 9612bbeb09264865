"""Where the fuzz tests' choices come from (``tests/test_model_fuzz.py``,
``tests/test_input_fuzz.py``): hypothesis in the tests (reproducible, shrinkable), a seeded
``random.Random`` in their census modes. Both answer ``int(lo, hi)`` and ``pick(seq)``."""

from __future__ import annotations

import random

from hypothesis import strategies as st


class RandomSource:
    """Choices from a seeded ``random.Random`` (the census)."""

    def __init__(self, seed):
        self.r = random.Random(seed)

    def int(self, lo, hi):
        return self.r.randint(lo, hi)

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]


class HypothesisSource:
    """Choices drawn by hypothesis (the test: reproducible, shrinkable)."""

    def __init__(self, data):
        self.data = data

    def int(self, lo, hi):
        return self.data.draw(st.integers(lo, hi))

    def pick(self, seq):
        return seq[self.data.draw(st.integers(0, len(seq) - 1))]


#: Values a user might pass where a number, a bool or a seed is expected: each record field
#: must take it or refuse it by name (``tests/test_input_fuzz.py``'s lasso-record fuzz).
ODD_VALUES = [
    None,
    True,
    False,
    0,
    1,
    -5,
    7,
    2**32,
    2.5,
    0.0,
    1e-12,
    -1e-3,
    1e300,
    float("inf"),
    float("-inf"),
    float("nan"),
    "x",
    "yes",
    [1],
    (0.1,),
]


def odd_value(src):
    """One of ``ODD_VALUES`` or a numpy flavour of one (np.bool_, np.int64, np.float32, a
    RandomState, a Generator)."""
    import numpy as np

    kind = src.int(0, 4)
    if kind == 0:
        return src.pick(
            [np.bool_(True), np.int64(3), np.int64(-2), np.float32(1e-4), np.float64("nan")]
        )
    if kind == 1:
        return src.pick([np.random.RandomState(0), np.random.default_rng(0)])
    return src.pick(ODD_VALUES)
