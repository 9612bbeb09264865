"""Behaviour pinned by ``tests/golden.py`` (see its docstring for what is exact and why)."""

import json

import numpy as np
import pytest

import golden

with open(golden.GOLDEN_PATH) as fh:
    EXPECTED = json.load(fh)


@pytest.fixture(scope="module")
def actual():
    return golden.compute()


@pytest.mark.parametrize("case", sorted(EXPECTED["gbfs"]))
def test_gbfs_bit_identical(actual, case):
    exp, got = EXPECTED["gbfs"][case], actual["gbfs"][case]
    assert got["selected_features"] == exp["selected_features"]
    assert got["n_trees"] == exp["n_trees"]
    changed = sorted(k for k in exp if exp[k] != got[k])
    assert not changed, f"{case}: these outputs changed bits: {changed}"


@pytest.mark.parametrize("case", sorted(EXPECTED["loose"]))
def test_linear_and_forest_unchanged(actual, case):
    exp, got = EXPECTED["loose"][case], actual["loose"][case]
    assert got["selected_features"] == exp["selected_features"]
    np.testing.assert_allclose(
        got["predictions_head"], exp["predictions_head"], rtol=1e-9, atol=1e-12
    )
