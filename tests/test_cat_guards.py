"""LightGBM's four guards of a categorical split (``gpufs.rules._categorical``: cat_smooth, cat_l2,
min_data_per_group, max_cat_threshold), as the CPU scan applies them and as the boosted
estimators take them; the planted noise of issue 35 (``tests/_planted_noise.py``): a
many-level noise category no longer beats real signals. CPU == GPU for the guarded scan:
``tests/_cudasim_kernels.py``."""

import numpy as np
import pytest

import _planted_noise as pn
from gpufs import GBFSClassifier, GBFSRegressor, MultiTaskGBFSRegressor
from gpufs.backends.base import SplitParams, categorical_slots
from gpufs.backends.cpu import CPUBackend

OFF = dict(cat_smooth=0.0, cat_l2=0.0, min_data_per_group=0.0, max_cat_threshold=256)


def _one_feature(g, h, **guards):
    """``find_splits`` of one categorical feature whose category b has fixed-point sums
    (g[b], h[b]) (scales 1: the sums are the values), at one node."""
    nb = len(g)
    hist = np.zeros((1, 1, 256, 2), np.int64)
    hist[0, 0, :nb, 0] = g
    hist[0, 0, :nb, 1] = h
    cat_slot, n_cat = categorical_slots(np.array([True]), 1)
    split = SplitParams(
        n_bins=np.array([nb], np.int32),
        g_scale=1.0,
        h_scale=1.0,
        reg_lambda=1.0,
        gain_divisor=1.0,
        min_child_weight=1e-3,
        min_split_gain=0.0,
        cat_slot=cat_slot,
        n_cat=n_cat,
        max_cat_to_onehot=0,
        **guards,
    )
    res = CPUBackend().find_splits(
        hist, [int(np.sum(g))], [int(np.sum(h))], np.zeros(1), np.ones(1, bool), split
    )
    left = [b for b in range(nb) if (int(res.cat_bits[0, b >> 5]) >> (b & 31)) & 1]
    return res, left


def _gain(gl, hl, gr, hr, lam_children, lam_parent=1.0):
    G, H = gl + gr, hl + hr
    return 0.5 * (
        gl * gl / (hl + lam_children) + gr * gr / (hr + lam_children) - G * G / (H + lam_parent)
    )


# categories 0..11: ratios spread, the last one far out on the high end
G12 = np.array([-30, -20, -12, -8, -4, -2, 0, 2, 4, 6, 8, 400])
H12 = np.array([20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20])


def test_guards_off_split_on_the_sorted_prefix():
    res, left = _one_feature(G12, H12, **OFF)
    # unguarded: the best prefix of the sorted order is everything but the outlier
    assert left == list(range(11))
    gl, hl = G12[:11].sum(), H12[:11].sum()
    assert res.gain[0] == pytest.approx(_gain(gl, hl, G12[11], H12[11], 1.0))


def test_max_cat_threshold_takes_the_high_end_prefix():
    _, left = _one_feature(G12, H12, **{**OFF, "max_cat_threshold": 3})
    assert left == [11]  # at most 3 left: the same partition, from the high end
    _, left = _one_feature(G12, H12, **{**OFF, "max_cat_threshold": 1})
    assert left == [11]


def test_cat_l2_lowers_the_gain_by_the_children_terms():
    res, left = _one_feature(G12, H12, **{**OFF, "cat_l2": 10.0})
    gl, hl = G12[left].sum(), H12[left].sum()
    gr, hr = G12.sum() - gl, H12.sum() - hl
    assert res.gain[0] == pytest.approx(_gain(gl, hl, gr, hr, 11.0, 1.0))
    off, _ = _one_feature(G12, H12, **OFF)
    assert res.gain[0] < off.gain[0]


def test_cat_smooth_keeps_small_categories_right_and_sorts_smoothed():
    g = np.array([-10, 5, 5, 60, 5, -5])
    h = np.array([20, 20, 20, 2, 20, 20])  # category 3: 2 rows, an extreme ratio
    res, left = _one_feature(g, h, **{**OFF, "cat_smooth": 5.0})
    assert 3 not in left  # fewer rows than cat_smooth: never left
    assert res.feature[0] == 0


def test_min_data_per_group_right_side_and_groups():
    h = np.full(12, 20)
    res, left = _one_feature(G12, h, **{**OFF, "min_data_per_group": 50.0})
    assert h.sum() - h[left].sum() >= 50  # the right side holds >= 50 rows
    assert len(left) >= 3  # the first scored prefix has >= 50 rows
    res, left = _one_feature(G12, h, **{**OFF, "min_data_per_group": 1000.0})
    assert res.feature[0] == -1  # no side can hold 1,000 rows: no split


def test_params_validated_and_in_get_params():
    X, y, _ = pn.noise_categories(0, n=300)
    for bad in (
        dict(cat_smooth=-1.0),
        dict(cat_l2=-0.5),
        dict(min_data_per_group=-1),
        dict(max_cat_threshold=0),
        dict(max_cat_threshold=True),
    ):
        with pytest.raises(ValueError):
            GBFSRegressor(n_estimators=2, device="cpu", **bad).fit(X, y)
    p = GBFSRegressor().get_params()
    assert (p["cat_smooth"], p["cat_l2"], p["max_cat_threshold"]) == (10.0, 10.0, 32)
    assert "min_data_per_group" in MultiTaskGBFSRegressor().get_params()


def test_guards_round_trip_in_model_files(tmp_path):
    X, y, _ = pn.noise_categories(0, n=400)
    est = GBFSRegressor(
        n_estimators=5,
        device="cpu",
        cat_smooth=3.0,
        cat_l2=2.5,
        min_data_per_group=7.0,
        max_cat_threshold=9,
    ).fit(X, y)
    path = tmp_path / "m.json"
    est.save_model(path)
    back = GBFSRegressor.load_model(path)
    for name in ("cat_smooth", "cat_l2", "min_data_per_group", "max_cat_threshold"):
        assert back.get_params()[name] == est.get_params()[name]
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


def test_guards_change_the_categorical_trees():
    """The guards reach the trees: the same fit with and without them differs where a
    categorical split is made."""
    X, y, _ = pn.noise_categories(1, n=600)
    on = GBFSRegressor(n_estimators=5, mu=0.0, device="cpu").fit(X, y)
    off = GBFSRegressor(n_estimators=5, mu=0.0, device="cpu", **OFF).fit(X, y)
    assert not np.array_equal(on.predict(X), off.predict(X))


# --- planted noise (issue 35) --------------------------------------------------------------
def _select(est, X, y):
    est.fit(X, y)
    return list(X.columns[est.get_support()])


@pytest.mark.parametrize("seed", range(3))
def test_churn_noise_category_not_ahead_of_plan_and_region(seed):
    """The issue's churn-like table: with the held-out pool ranking (opt-in), the 40-level
    random ``agent`` column is not chosen while a planted signal is missed, at k = 3, 4, 5."""
    X, y, planted = pn.churn(seed)
    for k in (3, 4, 5):
        sel = _select(
            GBFSClassifier(
                n_features_to_select=k, pool_ranking="heldout", random_state=0, device="cpu"
            ),
            X,
            y,
        )
        assert not pn.noise_ahead(sel, planted), (k, sel)


def test_churn_noise_category_ahead_before_issue_35():
    """Before issue 35 (no guards, the pool ranked by its training gain) the noise column is
    chosen ahead of a planted signal in most of the same cases (7 of 9 measured): the test
    above fails there. The guards alone lower the noise column's gain (0.42 to 0.18 of the
    total in a plain fit of seed 0) but do not fix the ranking; the held-out ranking does."""
    bad = 0
    for seed in range(3):
        X, y, planted = pn.churn(seed)
        for k in (3, 4, 5):
            sel = _select(
                GBFSClassifier(
                    n_features_to_select=k, random_state=0, device="cpu", pool_ranking="gain", **OFF
                ),
                X,
                y,
            )
            bad += pn.noise_ahead(sel, planted)
    assert bad >= 5


@pytest.mark.parametrize("seed", range(3))
def test_noise_categories_of_10_40_200_levels_not_ahead(seed):
    """With the held-out pool ranking (opt-in), no noise category of 10, 40 or 200 levels
    comes ahead of a planted signal."""
    X, y, planted = pn.noise_categories(seed)
    for k in (2, 3):
        sel = _select(
            GBFSRegressor(
                n_features_to_select=k, pool_ranking="heldout", random_state=0, device="cpu"
            ),
            X,
            y,
        )
        assert not pn.noise_ahead(sel, planted), (k, sel)
