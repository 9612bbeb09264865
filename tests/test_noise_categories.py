"""Issue 35, item 1: a many-level noise category is not selected ahead of a real signal by
stagewise (a categorical column is ranked by its cross-fitted cost,
``_stagewise_stages._category_heldout_cost``) nor by ControlBurn (its forest's categorical
splits are guarded, ``ForestParams``' cat_* fields, one category per side by default).

The table: a real 3-level category ``plan`` and a real numeric ``x`` beside a 40-level random
category ``agent``, 400 rows, k = 2. Before these rules, stagewise chose ``agent`` in 6 of
the 8 seeds (regression) and 2 of 8 (classification), ControlBurn in 6 of 8 (both)."""

import numpy as np
import pandas as pd
import pytest

from gpufs import (
    ControlBurnClassifier,
    ControlBurnRegressor,
    StagewiseClassifier,
    StagewiseRegressor,
)
from gpufs.forest import ForestParams, _trees
from gpufs.selectors import _stagewise_stages as stages

SEEDS = range(8)


def _table(seed, n=400, classification=False):
    rng = np.random.default_rng(seed)
    plan = rng.integers(0, 3, n)
    agent = rng.integers(0, 40, n)
    x = rng.normal(size=n)
    f = np.array([-0.3, 0.0, 0.3])[plan] + 0.3 * x
    X = pd.DataFrame(
        {
            "x": x,
            "plan": np.array(["a", "b", "c"], dtype=object)[plan],
            "agent": np.array([f"g{i:02d}" for i in range(40)], dtype=object)[agent],
        }
    )
    if classification:
        return X, (rng.random(n) < 1.0 / (1.0 + np.exp(-3.0 * f))).astype(np.int64)
    return X, f + rng.normal(size=n)


def _picks(make, classification):
    out = []
    for seed in SEEDS:
        X, y = _table(seed, classification=classification)
        est = make().fit(X, y)
        out.append(set(X.columns[est.selected_features_]))
    return out


@pytest.mark.parametrize(
    "cls, classification",
    [(StagewiseRegressor, False), (StagewiseClassifier, True)],
)
def test_stagewise_picks_the_real_category_not_the_40_level_noise(cls, classification):
    picks = _picks(lambda: cls(n_features_to_select=2, device="cpu"), classification)
    assert picks == [{"x", "plan"}] * len(SEEDS)


@pytest.mark.parametrize(
    "cls, classification",
    [(ControlBurnRegressor, False), (ControlBurnClassifier, True)],
)
def test_controlburn_picks_the_real_category_not_the_40_level_noise(cls, classification):
    picks = _picks(lambda: cls(n_features_to_select=2, random_state=0), classification)
    assert picks == [{"x", "plan"}] * len(SEEDS)


def test_heldout_cost_of_a_least_squares_group_fit_by_hand():
    """Each fold's rows scored with the category means of the other folds' rows (a category
    absent there: weight 0), summed and divided by W."""
    rng = np.random.default_rng(3)
    n, L = 400, 40
    idx = rng.integers(0, L, n)
    idx[idx == 39] = 38  # category 39 never occurs
    idx[:3] = L  # three missing rows: the slot of weight 0
    Y = rng.normal(size=(n, 1))
    w = rng.uniform(0.5, 2.0, n)
    W = float(w.sum())
    F = np.full((n, 1), float(w @ Y[:, 0]) / W)  # the bias: y's weighted mean
    folds = stages._category_folds(n, np)
    assert sorted(np.bincount(folds).tolist()) == [80] * stages.CATEGORY_FOLDS
    got = stages._category_heldout_cost(stages.LeastSquaresStage(), idx, L, F, Y, w, W, folds, np)
    want = 0.0
    r = Y[:, 0] - F[:, 0]
    for f in range(stages.CATEGORY_FOLDS):
        tr, te = folds != f, folds == f
        a = np.zeros(L + 1)
        for c in range(L):
            m = tr & (idx == c)
            if w[m].sum() > 0:
                a[c] = (w[m] * r[m]).sum() / w[m].sum()
        want += (w[te] * (r[te] - a[idx[te]]) ** 2).sum()
    np.testing.assert_allclose(got, want / W, rtol=1e-12)
    # a pure-noise category (y is noise) costs more held out than the bias alone, less in
    # sample
    cost0 = stages.LeastSquaresStage().cost(F, Y, w, W, np)
    _, in_sample = stages._category_candidates(stages.LeastSquaresStage(), idx, L, F, Y, w, W, np)
    assert in_sample < cost0 < got


def test_numeric_only_stagewise_is_unchanged_by_the_rule():
    """Without a categorical column no held-out cost is computed: the path is the training
    cost's argmin every round (the brute-force oracle tests pin it too)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    y = X[:, 2] - 0.5 * X[:, 4] + 0.3 * rng.normal(size=200)
    est = StagewiseRegressor(3, device="cpu").fit(X, y)
    assert est.selected_features_.tolist()[:2] == [2, 4]


def test_forest_trees_take_the_categorical_guards(monkeypatch):
    """The forest's trees are grown with ForestParams' guards (the defaults: GBFS's
    cat_smooth, cat_l2 and min_data_per_group, one category per side)."""
    p = ForestParams()
    assert (p.cat_smooth, p.cat_l2, p.min_data_per_group, p.max_cat_threshold) == (
        10.0,
        10.0,
        20.0,
        1,
    )
    seen = []
    real = _trees.grow_tree

    def spy(*args, **kw):
        seen.append(args[9])  # TreeParams
        return real(*args, **kw)

    monkeypatch.setattr(_trees, "grow_tree", spy)
    X, y = _table(0)
    ControlBurnRegressor(
        n_features_to_select=2, random_state=0, max_depth=1, max_trees_per_round=3
    ).fit(X, y)
    assert seen and {
        (t.cat_smooth, t.cat_l2, t.min_data_per_group, t.max_cat_threshold) for t in seen
    } == {(10.0, 10.0, 20.0, 1)}
