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
