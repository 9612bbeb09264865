"""warm_start notices new data (issue 26, item 1): the fingerprint of ``gpufs.data._warm_key`` and
the GBFS and ControlBurn fits that must refit from scratch when it changes."""

import numpy as np
import pandas as pd
import pytest

from gpufs import ControlBurnClassifier, GBFSClassifier
from gpufs.data._warm_key import column_checksums, data_fingerprint, input_dtypes


def _integer_columns(seed=0, n=400, d=6):
    """Integer-valued columns of different ranges (column j in 0..10 * (j + 1) - 1); the
    class is column 0 > 4. Any permutation of the columns keeps X's total (the old warm key)
    unchanged, while the old cut points no longer fit the columns."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 10, size=(n, d)) * np.arange(1, d + 1)
    X = X + rng.integers(0, np.arange(1, d + 1), size=(n, d))
    return X.astype(np.float64), (X[:, 0] > 4).astype(int)


def _warm_selectors(n_estimators):
    """GBFS (``n_estimators`` trees) and ControlBurn with ``warm_start=True`` choosing one
    feature: a factory of a fresh estimator each, as pytest parameters."""
    return [
        pytest.param(
            lambda: GBFSClassifier(
                n_estimators=n_estimators,
                max_depth=2,
                n_features_to_select=1,
                warm_start=True,
                random_state=0,
                device="cpu",
            ),
            id="gbfs",
        ),
        pytest.param(
            lambda: ControlBurnClassifier(
                n_features_to_select=1,
                max_depth=2,
                max_trees_per_round=10,
                refit_estimator=GBFSClassifier(mu=0.0, n_estimators=10),
                warm_start=True,
                random_state=0,
                device="cpu",
            ),
            id="controlburn",
        ),
    ]


def test_column_checksums_see_permutations_and_dtypes():
    X, _ = _integer_columns()
    c = column_checksums(X)
    assert len(c) == X.shape[1] and c == column_checksums(X.copy())
    assert column_checksums(X[:, ::-1]) == c[::-1]  # per column, not a total
    assert column_checksums(X[::-1])[0] != c[0]  # row order counts
    i, j = 0, int(np.flatnonzero(X[:, 0] != X[0, 0])[0])
    swapped = X.copy()
    swapped[[i, j], 0] = swapped[[j, i], 0]  # same values, same sum
    assert column_checksums(swapped)[0] != c[0] and column_checksums(swapped)[1:] == c[1:]
    assert column_checksums(X.astype(np.float32)) != c  # other bit patterns
    # NaN and 1-D inputs work; a chunked pass gives the same checksum as one pass
    X[3, 2] = np.nan
    assert column_checksums(X) != c and len(column_checksums(X[:, 0])) == 1
    big = np.random.default_rng(1).normal(size=(300_000, 9))
    first_rows = column_checksums(big[:1000])
    assert column_checksums(big) != first_rows and column_checksums(big) == column_checksums(
        np.asfortranarray(big)
    )


def test_fingerprint_covers_names_dtypes_and_categories():
    X, y = _integer_columns()
    est = GBFSClassifier()  # only the attributes the input door sets are read
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    est.feature_names_in_, est.category_codes_ = np.array(frame.columns, object), None
    base = data_fingerprint(est, frame, X, y, None)
    assert base == data_fingerprint(est, frame.copy(), X.copy(), y.copy(), None)
    renamed = frame.rename(columns={"c0": "other"})
    est.feature_names_in_ = np.array(renamed.columns, object)
    assert data_fingerprint(est, renamed, X, y, None) != base
    est.feature_names_in_ = np.array(frame.columns, object)
    as_int = frame.astype({"c1": "int64"})
    assert input_dtypes(as_int) != input_dtypes(frame)
    assert data_fingerprint(est, as_int, X, y, None) != base
    assert data_fingerprint(est, frame, X, y, np.ones(len(y))) != base


@pytest.mark.parametrize("make", _warm_selectors(n_estimators=15))
def test_warm_start_refits_when_integer_columns_are_reordered(make):
    """The issue's case: the columns reordered keep X's sum; a warm fit must not reuse the
    old bins, probes or forest, and must select what a cold fit selects."""
    X, y = _integer_columns()
    est = make().fit(X, y)
    assert est.selected_features_.tolist() == [0]
    perm = np.array([3, 1, 4, 0, 5, 2])  # column 0 moves to position 3
    Xp = X[:, perm]
    assert Xp.sum() == X.sum()
    first = est.bin_mapper_
    est.fit(Xp, y)
    assert est.bin_mapper_ is not first
    cold = make().set_params(warm_start=False).fit(Xp, y)
    assert est.selected_features_.tolist() == cold.selected_features_.tolist() == [3]
    assert est.score(Xp, y) == cold.score(Xp, y) == 1.0
    if hasattr(est, "forest_reused_"):
        assert not est.forest_reused_
    # the same data again is reused
    before = est.bin_mapper_
    est.fit(Xp, y)
    assert est.bin_mapper_ is before


@pytest.mark.parametrize("make", _warm_selectors(n_estimators=10))
def test_warm_start_refits_on_renamed_or_retyped_columns(make):
    X, y = _integer_columns()
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    est = make().fit(frame, y)
    for other in (frame.rename(columns={"c5": "z"}), frame.astype({"c2": "int64"})):
        first = est.bin_mapper_
        est.fit(other, y)
        assert est.bin_mapper_ is not first
