"""Exact k's pool ranked on held-out rows by default (issue 35, ``pool_ranking``).

The training split gain of a pool feature grows with the cut points its column offers: a
40-level random category or a column of row ids wins splits that fit noise, and ranked by
that gain it comes ahead of a weak real signal. The default ``pool_ranking="heldout"``
ranks by what each feature saves on rows its ranking fit did not see
(``_exact_k.rank_by_heldout``), less ``HELDOUT_Z`` standard errors (a lower confidence
bound; equal bounds by training gain).
"""

import numpy as np
import pytest

import _planted_noise as pn
from gpufs import GBFSClassifier, GBFSRegressor
from gpufs.engine.boosting import DeviceRows
from gpufs.selectors import _exact_k


def _select(est, X, y):
    est.fit(X, y)
    return list(X.columns[est.get_support()])


def test_default_is_heldout():
    assert GBFSRegressor().pool_ranking == "heldout"
    assert GBFSClassifier().get_params()["pool_ranking"] == "heldout"


@pytest.mark.parametrize(
    "table, k",
    [("noise_categories", 2), ("noise_categories", 3), ("integer_ids", 2)],
)
def test_default_puts_no_noise_column_ahead_of_a_weak_signal(table, k):
    """Three binary signals (weights .6, .45, .3 against unit noise) beside categorical noise
    of 10, 40 and 200 levels, or a row id and counts of up to 500, on 2,000 rows. The default
    fit selects planted signals only; the training-gain rule ("gain", the old default) puts
    a noise column ahead of a signal on the same table."""
    X, y, planted = getattr(pn, table)(0, n=2000)
    est = GBFSRegressor(n_features_to_select=k, random_state=0, device="cpu")
    sel = _select(est, X, y)
    assert not pn.noise_ahead(sel, planted), sel
    assert set(sel) <= set(planted) and len(sel) == k
    assert est.selection_pool_["heldout_gain"] is not None
    gain = _select(
        GBFSRegressor(n_features_to_select=k, random_state=0, device="cpu", pool_ranking="gain"),
        X,
        y,
    )
    assert pn.noise_ahead(gain, planted), gain


def test_rule_lower_confidence_bound_then_training_gain():
    """The chosen k follow the rule: by the held-out saving less HELDOUT_Z standard errors,
    equal bounds by training gain; the noise columns of the pool have no evidence (a saving
    within HELDOUT_Z standard errors of 0) while they have training gain."""
    X, y, planted = pn.noise_categories(1, n=2000)
    est = GBFSRegressor(n_features_to_select=3, random_state=0, device="cpu").fit(X, y)
    p = est.selection_pool_
    feats = p["features"]
    save = dict(zip(feats, p["heldout_gain"]))
    se = dict(zip(feats, p["heldout_se"]))
    gain = dict(zip(feats, p["gain"]))
    z = _exact_k.HELDOUT_Z
    sure = {f: save[f] > z * se[f] for f in feats}
    expect = sorted(feats, key=lambda f: (-(save[f] - z * se[f]), -gain[f], feats.index(f)))[:3]
    assert p["chosen"] == expect
    names = list(X.columns)
    noise = [f for f in feats if names[f] not in planted]
    assert noise and not any(sure[f] for f in noise) and all(gain[f] > 0 for f in noise)
    assert all(se[f] >= 0.0 for f in feats)


def test_heldout_savings_and_their_standard_error_by_hand():
    """``heldout_permutation_gains`` on a one-split regression stump: the saving is the
    held-out rows' loss difference summed (the mean loss difference times n), averaged over
    the permutations, and its standard error that of a sum of n row differences."""
    rng = np.random.default_rng(0)
    X = np.c_[rng.integers(0, 2, 400), rng.normal(size=400)]
    y = 2.0 * X[:, 0] + rng.normal(size=400)
    est = GBFSRegressor(
        mu=0.0, n_estimators=1, max_depth=1, learning_rate=1.0, random_state=0, device="cpu"
    ).fit(X, y)

    from gpufs.backends import get_backend

    backend = get_backend("cpu")
    Xb = est.bin_mapper_.transform(X, backend)
    rows = DeviceRows(backend, Xb, y, None)
    obj = est._objective
    saving, se = _exact_k.heldout_permutation_gains(est.ensemble_, rows, obj, [0, 1], 3)
    # by hand: the stump's predictions, permuted the same way
    n = 400
    n_perm = max(1, min(_exact_k.N_PERMUTATIONS, _exact_k.PERMUTED_ROWS // n))
    perm_rng = np.random.default_rng([3, 36])
    perms = [perm_rng.permutation(n) for _ in range(n_perm)]
    pred = est.predict(X)
    lo, hi = pred[X[:, 0] == 0][0], pred[X[:, 0] == 1][0]
    diff = np.zeros(n)
    for perm in perms:
        pp = np.where(X[perm, 0] == 1, hi, lo)
        diff += (pp - y) ** 2 - (pred - y) ** 2
    d = diff / n_perm
    np.testing.assert_allclose(saving[0], d.sum(), rtol=1e-9)
    np.testing.assert_allclose(se[0], np.sqrt(n * d.var(ddof=1)), rtol=1e-9)
    assert saving[1] == 0.0 and se[1] == 0.0  # no split on column 1: nothing to lose
    assert saving[0] > _exact_k.HELDOUT_Z * se[0]


def test_same_choice_same_model_as_gain():
    """The search, the pool fit and the final fit (resumed from the pool fit) run on all the
    rows under both rules: where they choose the same k, the models are the same, and the
    held-out rule adds only its ranking fit (``trees_grown["heldout"]``)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 40))
    y = 1.0 * X[:, 3] + 1.3 * X[:, 10] + 1.6 * X[:, 25] + 0.3 * rng.normal(size=600)
    kw = dict(n_features_to_select=3, n_estimators=20, max_depth=3, random_state=0, device="cpu")
    held = GBFSRegressor(**kw).fit(X, y)
    gain = GBFSRegressor(**kw, pool_ranking="gain").fit(X, y)
    assert set(held.selected_features_.tolist()) == {3, 10, 25}
    assert set(held.selection_pool_["chosen"]) == set(gain.selection_pool_["chosen"])
    hp, gp = held.selection_pool_, gain.selection_pool_
    assert hp["features"] == gp["features"] and hp["resumed_round"] == gp["resumed_round"]
    assert hp["trees_grown"]["heldout"] > 0 and "heldout" not in gp["trees_grown"]
    np.testing.assert_array_equal(held.predict(X), gain.predict(X))
