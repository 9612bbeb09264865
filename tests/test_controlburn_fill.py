"""ControlBurn's fill of a short selection (``selection_filled_``, ``selectors._controlburn_fill``;
issue 35, item 3): the rule's order on hand-made inputs, exactly k from a fit whose pruned forest
covers fewer than k features, the warning, the model file, and one feature per group where a
pruned forest kept one group's copies alone."""

import json
import sys
import warnings

import numpy as np
import pytest

from gpufs import ControlBurnRegressor, SelectionWarning
from gpufs.io import model_io
from gpufs.io._strict_json import ModelFileError
from gpufs.selectors._controlburn_fill import fill_candidates


def _covered(d, features):
    c = np.zeros(d, bool)
    c[features] = True
    return c


def test_kept_splits_by_importance_then_pruned_ones_by_saving():
    d = 8
    covered = _covered(d, [0, 1, 2, 3])
    imp = np.array([5.0, 1.0, 3.0, 3.0, 0, 0, 0, 0])
    splits = np.array([0, 0, 0, 0, 2, 1, 3, 0])
    saving = np.array([0, 0, 0, 0, -4.0, 2.0, 0.5, 0])
    # 0 is selected; 2 and 3 tie on importance (lower index first), 1 after them; then the
    # pruned-only features by saving (5, 6, then 4 whose splits did worse out of bag); 7 was
    # never split on and is never chosen
    got = fill_candidates([0], 10, covered, imp, splits, saving)
    assert got == [2, 3, 1, 5, 6, 4]
    assert fill_candidates([0], 2, covered, imp, splits, saving) == [2, 3]
    assert fill_candidates([0], 0, covered, imp, splits, saving) == []
    # an unpruned forest: the kept splits only
    assert fill_candidates([0, 2], 5, covered, imp) == [3, 1]


def test_a_near_copy_of_a_chosen_feature_goes_last():
    d = 6
    covered = _covered(d, [0, 1, 2, 3])
    imp = np.array([4.0, 3.0, 2.0, 1.0, 0, 0])
    splits = np.array([0, 0, 0, 0, 1, 0])
    saving = np.array([0, 0, 0, 0, 1.0, 0])
    copies = {frozenset((0, 1)), frozenset((2, 3))}  # 1 copies 0, 3 copies 2
    asked = []

    def corr_of(features):
        asked.append(list(features))
        return np.array(
            [
                [1.0 if a == b or frozenset((a, b)) in copies else 0.1 for b in features]
                for a in features
            ]
        )

    # 1 is a copy of the selected 0, 3 of the chosen 2: both wait behind 4
    assert fill_candidates([0], 2, covered, imp, splits, saving, corr_of) == [2, 4]
    assert fill_candidates([0], 4, covered, imp, splits, saving, corr_of) == [2, 4, 1, 3]
    assert asked[0][:1] == [0]  # one matrix: the selection, then the candidates
    # with no correlations at hand, the ranking alone
    assert fill_candidates([0], 2, covered, imp, splits, saving) == [1, 2]


def _shallow_forest_data():
    """One strong step on x0 and five noise columns."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 6)
    return X, 2.0 * (X[:, 0] > 0) + rng.randn(400)


# Pruned at the default one standard error, every tree keeps only its x0 splits (coverage 1);
# the noise columns' splits are pruned.
SHALLOW = dict(max_depth=3, random_state=0)


def test_fit_returns_exactly_k_and_says_how_it_was_filled():
    X, y = _shallow_forest_data()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        est = ControlBurnRegressor(n_features_to_select=4, **SHALLOW).fit(X, y)
    (w,) = [w for w in rec if w.category is SelectionWarning]
    message = str(w.message)
    assert est.forest_coverage_ == 1 and est.forest_features_.tolist() == [0]
    sel, filled = est.selected_features_.tolist(), est.selection_filled_.tolist()
    assert len(sel) == 4 and sel[0] == 0 and sel[1:] == filled and len(filled) == 3
    # the fill comes from splits that pruning removed, best out-of-bag saving first
    forest = est.forest_
    assert forest.pruned_splits[filled].min() > 0
    saving = forest.pruned_saving[filled]
    assert np.all(saving[:-1] >= saving[1:])
    others = [f for f in range(1, 6) if f not in filled and forest.pruned_splits[f] > 0]
    assert all(forest.pruned_saving[f] <= saving[-1] for f in others)
    assert np.all(est.feature_importances_[filled] == 0) and est.feature_importances_[0] == 1
    assert est.support_.sum() == 4 and est.transform(X).shape == (400, 4)
    assert "the forest uses only 1 of the 6 features, fewer than n_features_to_select=4" in (
        message
    )
    names = ", ".join(f"x{f}" for f in filled)
    assert f"then filled the selection with 3 features ({names})" in message
    assert "(selection_filled_)." in message and "Grow a more" not in message
    assert est.refit_estimator_.n_features_in_ == 4
    # unpruned, the same forest's trees keep their noise splits and cover k: no fill
    plain = ControlBurnRegressor(n_features_to_select=4, oob_prune=None, **SHALLOW).fit(X, y)
    assert plain.forest_coverage_ >= 4 and plain.selection_filled_.size == 0
    assert plain.forest_.pruned_splits is None


def test_no_fill_when_the_lasso_reaches_k():
    X, y = _shallow_forest_data()
    est = ControlBurnRegressor(n_features_to_select=1, **SHALLOW).fit(X, y)
    assert est.selected_features_.tolist() == [0] and est.selection_filled_.size == 0


def test_model_file_keeps_the_fill_apart_and_checks_it(tmp_path):
    X, y = _shallow_forest_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectionWarning)
        est = ControlBurnRegressor(n_features_to_select=3, **SHALLOW).fit(X, y)
    doc = model_io.to_document(est)
    fitted = doc["fitted"]
    assert fitted["selected_features"] == [0]
    assert fitted["selection_filled"] == est.selection_filled_.tolist()
    path = tmp_path / "cb.json"
    est.save_model(path)
    loaded = ControlBurnRegressor.load_model(path)
    np.testing.assert_array_equal(loaded.selected_features_, est.selected_features_)
    np.testing.assert_array_equal(loaded.selection_filled_, est.selection_filled_)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))

    def load(edit):
        d = json.loads(model_io.dumps(doc))
        edit(d["fitted"])
        return model_io.from_document(d)

    def give_importance(f):
        imp = list(f["feature_importances"])
        imp[f["selection_filled"][0]] = 0.5
        f["feature_importances"] = imp

    with pytest.raises(ModelFileError, match="a filled feature has importance"):
        load(give_importance)
    with pytest.raises(ModelFileError, match="also one the lasso selected"):
        load(lambda f: f.update(selection_filled=[0] + f["selection_filled"][1:]))
    # a file written before the attribute: a selection without a fill
    unfilled = ControlBurnRegressor(n_features_to_select=1, **SHALLOW).fit(X, y)
    d = json.loads(model_io.dumps(model_io.to_document(unfilled)))
    del d["fitted"]["selection_filled"]
    old = model_io.from_document(d)
    assert old.selection_filled_.size == 0 and old.selected_features_.tolist() == [0]
    np.testing.assert_array_equal(old.predict(X), unfilled.predict(X))


def test_one_per_group_when_the_pruned_forest_keeps_one_group_alone():
    """Issue 35, item 2: on the interaction-only design (regression, seed 2) the pruned
    forest's trees split on the three copies of the main-effect group only (the interaction's
    splits do not hold up out of bag at the forest's depths); the near-copy rule keeps one of
    them and the fill takes one feature of each other group."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _near_copy_data import near_copy_groups

    X, y, groups = near_copy_groups(2, "inter_only", "regression")
    with pytest.warns(SelectionWarning, match="near-copies among them") as rec:
        est = ControlBurnRegressor(n_features_to_select=3, random_state=2).fit(X, y)
    assert "selection_filled_" in str(rec[0].message)
    assert sorted(set(groups[est.forest_features_].tolist())) == [2]
    assert sorted(groups[est.selected_features_].tolist()) == [0, 1, 2]
    assert est.selection_filled_.size == 2 and not est.selection_exact_
    (merged,) = est.merged_near_copies_
    assert merged[0] == est.selected_features_[0] and sorted(merged) == [6, 7, 8]


def test_a_forest_whose_pruned_trees_split_on_nothing_is_filled_too():
    """400 rows of two weak signals (a 3-level ``plan`` and a numeric ``x``) beside a 40-level
    noise category (``test_noise_categories``, seed 3): pruning removes every split, and the
    fill takes the two features the pruned splits used; the guarded forest never split the
    noise category, so it is never a candidate."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from test_noise_categories import _table

    X, y = _table(3)
    with pytest.warns(SelectionWarning, match="split on no feature after out-of-bag pruning"):
        est = ControlBurnRegressor(n_features_to_select=2, random_state=0).fit(X, y)
    assert est.forest_coverage_ == 0 and est.forest_.pruned_splits[2] == 0
    assert sorted(X.columns[est.selected_features_]) == ["plan", "x"]
    assert est.selection_filled_.tolist() == est.selected_features_.tolist()
    assert np.all(est.feature_importances_ == 0) and not est.selection_exact_
    assert est.predict(X).shape == (400,)
    # unpruned, the same table's forest selects them itself
    plain = ControlBurnRegressor(n_features_to_select=2, random_state=0, oob_prune=None).fit(X, y)
    assert plain.selection_filled_.size == 0 and plain.selected_features_.size == 2
