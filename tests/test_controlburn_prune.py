"""ControlBurn's out-of-bag pruning (``oob_prune``; ``gpufs.forest._prune``): every split a
pruned tree keeps passes the rule (recomputed here from the rows directly), the tree predicts
what its stored arrays say, the forest's prediction matrix is what its stored trees predict,
None leaves the forest as it was, the parameter is checked and saved in model files (older
files load without it), and on the planted churn table it keeps the noise columns out."""

import json
import sys
import warnings

import numpy as np
import pytest

from _forest_data import CPU, _binned, _data
from gpufs import ControlBurnClassifier, ControlBurnRegressor
from gpufs.forest import ForestParams, _prune, _trees, grow_forest
from gpufs.io import model_io
from test_controlburn_honest import _node_paths


def _record_pruned_trees(monkeypatch):
    """Wrap ``TreeGrower.grow`` and ``prune_out_of_bag``: a list of (residual, prune weights,
    z, tree arrays before pruning, tree arrays, prediction, PruneResult) per pruned tree."""
    seen, last = [], {}
    prune = _prune.prune_out_of_bag

    def recording_prune(grown, residual, oob_weights, z, xp):
        before = {k: a.copy() for k, a in grown.tree.arrays.items()}
        result = prune(grown, residual, oob_weights, z, xp)
        last.update(before=before, result=result)
        return result

    monkeypatch.setattr(_trees, "prune_out_of_bag", recording_prune)
    grow = _trees.TreeGrower.grow

    def recording(self, Xb, n_bins, bin_mapper, residual, count_weights, *args, **kw):
        last.clear()
        tree, pred = grow(self, Xb, n_bins, bin_mapper, residual, count_weights, *args, **kw)
        pw = kw.get("prune_weights")
        if pw is not None:
            seen.append(
                (
                    np.array(residual),
                    np.array(pw),
                    float(self.params.oob_prune),
                    last["before"],
                    {k: a.copy() for k, a in tree.arrays.items()},
                    np.array(pred),
                    last["result"],
                )
            )
        return tree, pred

    monkeypatch.setattr(_trees.TreeGrower, "grow", recording)
    return seen


def _noisy_regression(m=600, d=6, seed=0):
    """One strong column, the rest noise: deep trees split on noise below the signal."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    return X, 2.0 * (X[:, 0] > 0) + rng.normal(size=m)


@pytest.mark.parametrize(
    "method, weighted, z", [("bagboost", False, 1.0), ("bag", True, 1.0), ("bagboost", True, 0.0)]
)
def test_every_kept_split_passes_the_rule(monkeypatch, method, weighted, z):
    X, y = _noisy_regression(seed=2)
    bm, Xb = _binned(X)
    w = np.random.RandomState(1).uniform(0.5, 2.0, X.shape[0]) if weighted else None
    seen = _record_pruned_trees(monkeypatch)
    params = ForestParams(method=method, max_depth=5, max_trees_per_round=4, tol=0.0, oob_prune=z)
    grow_forest(CPU, Xb, y, w, "regression", 0, bm, params, random_state=5)
    assert len(seen) >= 8
    n_pruned = 0
    for residual, pw, z_seen, before, arrays, pred, result in seen:
        assert z_seen == z
        n = result.n_pruned
        feature, value = arrays["feature"], arrays["value"]
        on, leaf = _node_paths(arrays, Xb)
        # the prediction is the stored (pruned) tree's value at each row's leaf, bit for bit
        np.testing.assert_array_equal(pred, value[leaf])
        np.testing.assert_array_equal(result.prediction, pred)
        assert int((before["feature"] >= 0).sum()) - int((feature >= 0).sum()) == n
        n_pruned += n
        # a node under no split is cleared as an unreached one
        reached = on.any(axis=0)
        assert np.all(feature[~reached] == -1) and np.all(value[~reached] == 0)
        for p in np.flatnonzero(feature >= 0):
            rows = on[:, p] & (pw > 0)
            r, wr = residual[rows], pw[rows]
            d = (r - value[p]) ** 2 - (r - value[leaf[rows]]) ** 2
            saving, sq, mass = (wr * d).sum(), (wr * d * d).sum(), wr.sum()
            se = np.sqrt(max(sq - saving * saving / mass, 0.0))
            # the rule's own sums group the rows by leaf: a few ulps from these
            assert saving > z * se - 1e-9 * (abs(saving) + se + 1.0), (p, saving, se)
    assert n_pruned > 0  # the noise columns' splits go


def test_removed_splits_report_their_own_out_of_bag_saving(monkeypatch):
    """``PruneResult.removed_features`` / ``removed_saving``: the splits of the grown tree
    that the pruned one lacks, each with the squared error it saved on its node's out-of-bag
    rows (children as leaves), recomputed here from the rows; the forest sums them per
    feature (``Forest.pruned_splits`` / ``pruned_saving``)."""
    X, y = _noisy_regression(seed=3)
    bm, Xb = _binned(X)
    w = np.random.RandomState(2).uniform(0.5, 2.0, X.shape[0])
    seen = _record_pruned_trees(monkeypatch)
    params = ForestParams(max_depth=5, max_trees_per_round=4, tol=0.0, oob_prune=1.0)
    forest = grow_forest(CPU, Xb, y, w, "regression", 0, bm, params, random_state=5)
    n_splits, saving_sum = np.zeros(X.shape[1], np.int64), np.zeros(X.shape[1])
    signs = set()
    for residual, pw, _, before, arrays, _, result in seen:
        gone = np.flatnonzero((before["feature"] >= 0) & (arrays["feature"] < 0))
        assert result.removed_features.dtype == np.int64
        assert result.n_pruned == gone.size == result.removed_saving.size
        np.testing.assert_array_equal(result.removed_features, before["feature"][gone])
        on, _ = _node_paths(before, Xb)
        value = before["value"]
        for p, got in zip(gone.tolist(), result.removed_saving.tolist()):
            want = 0.0
            for c in (2 * p + 1, 2 * p + 2):
                rows = on[:, c] & (pw > 0)
                r = residual[rows]
                want += (pw[rows] * ((r - value[p]) ** 2 - (r - value[c]) ** 2)).sum()
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9 * np.abs(residual).max())
            signs.add(bool(got > 0))
        np.add.at(n_splits, result.removed_features, 1)
        np.add.at(saving_sum, result.removed_features, result.removed_saving)
    assert n_splits.sum() > 0
    np.testing.assert_array_equal(forest.pruned_splits, n_splits)
    np.testing.assert_allclose(forest.pruned_saving, saving_sum, rtol=1e-12, atol=0)
    unpruned = ForestParams(max_depth=5, max_trees_per_round=4, tol=0.0, oob_prune=None)
    plain = grow_forest(CPU, Xb, y, w, "regression", 0, bm, unpruned, random_state=5)
    assert plain.pruned_splits is None and plain.pruned_saving is None


def test_pruned_forest_predicts_its_matrix(monkeypatch):
    X, y = _noisy_regression(seed=4)
    bm, Xb = _binned(X)
    params = ForestParams(max_depth=4, max_trees_per_round=4, oob_prune=1.0)
    f = grow_forest(CPU, Xb, y, None, "regression", 0, bm, params, random_state=3)
    np.testing.assert_array_equal(f.A, f.tree_predictions(X, CPU))
    unpruned = grow_forest(
        CPU,
        Xb,
        y,
        None,
        "regression",
        0,
        bm,
        ForestParams(max_depth=4, max_trees_per_round=4, oob_prune=None),
        random_state=3,
    )
    # fewer noise columns per tree than the same forest unpruned
    noise_uses = f.feature_masks[:, 1:].sum() / f.n_trees
    assert noise_uses < unpruned.feature_masks[:, 1:].sum() / unpruned.n_trees


def test_none_passes_no_prune_rows(monkeypatch):
    X, y = _data(m=200, d=4, seed=6)
    bm, Xb = _binned(X)
    calls = []
    grow = _trees.TreeGrower.grow

    def recording(self, *args, **kw):
        calls.append(kw.get("prune_weights"))
        return grow(self, *args, **kw)

    monkeypatch.setattr(_trees.TreeGrower, "grow", recording)
    off = ForestParams(max_depth=2, oob_prune=None)
    grow_forest(CPU, Xb, y, None, "regression", 0, bm, off, random_state=1)
    grow_forest(
        CPU,
        Xb,
        y,
        None,
        "regression",
        0,
        bm,
        ForestParams(max_depth=2, honest_leaves=True, oob_prune=1.0),
        random_state=1,
    )
    assert calls and all(c is None for c in calls)  # off, and not with honest leaves


def test_parameter_is_checked():
    X, y = _data(m=100, d=3)
    with pytest.raises(ValueError, match="oob_prune"):
        ControlBurnRegressor(oob_prune=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="oob_prune"):
        ControlBurnRegressor(oob_prune="yes").fit(X, y)


def test_model_file_keeps_the_setting_and_older_files_load_without_it(tmp_path):
    X, y = _noisy_regression(m=300, seed=9)

    def fit(**kw):
        return ControlBurnRegressor(
            n_features_to_select=1, max_depth=3, max_trees_per_round=5, random_state=0, **kw
        ).fit(X, y)

    est = fit(oob_prune=1.0)
    path = tmp_path / "cb.json"
    est.save_model(path)
    loaded = ControlBurnRegressor.load_model(path)
    assert loaded.oob_prune == 1.0
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded.selected_features_, est.selected_features_)
    old = fit(oob_prune=None)
    doc = model_io.to_document(old)
    del doc["params"]["oob_prune"]
    loaded_old = model_io.from_document(json.loads(model_io.dumps(doc)))
    assert loaded_old.oob_prune is None
    np.testing.assert_array_equal(loaded_old.predict(X), old.predict(X))


def _churn_selections(seed, **kw):
    """Issue 35's planted churn table (``tests/_planted_noise.py``), split as
    ``bench/bench_quality.py`` does, text columns as categorical codes: {k: (noise ahead,
    number selected)} for k = 3, 4, 5 from one warm-started estimator."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import _planted_noise as pn

    Xtr, ytr, cols, text, planted = pn.churn_training_rows(seed)
    est = ControlBurnClassifier(warm_start=True, random_state=0, categorical_features=text, **kw)
    out = {}
    for k in (3, 4, 5):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.set_params(n_features_to_select=k).fit(Xtr, ytr)
        chosen = [cols[j] for j in est.selected_features_]
        out[k] = (pn.noise_ahead(chosen, planted), len(chosen))
    return out


def test_churn_noise_columns_stay_out():
    """Seeds 0-1, k = 3, 4, 5: unpruned (``oob_prune=None``), a N(0, 1) column comes in ahead
    of a planted signal in 5 of 6 fits (seeds 0-5: 17 of 18); pruned at one standard error, the
    default, in none (seeds 0-5: 0 of 18), each fit with its k features."""
    old = [_churn_selections(seed, oob_prune=None) for seed in range(2)]
    new = [_churn_selections(seed) for seed in range(2)]
    assert sum(bad for fits in old for bad, _ in fits.values()) >= 3
    assert [bad for fits in new for bad, _ in fits.values()] == [False] * 6
    assert [n for fits in new for _, n in fits.values()] == [3, 4, 5] * 2
