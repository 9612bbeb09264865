"""The model-file codec of the GBFS estimators (``GBFSRegressor``, ``GBFSClassifier``).

Owns the ``fitted`` object of a GBFS model file: what ``write`` puts there, and ``read``,
which checks every field against the others (the ensemble against the bins, the selection
against the trees' first uses, the group-testing candidates against the selection) before
setting the estimator's attributes. ``gpufs.io.model_io`` wraps it in the envelope; the layout
of the fields is in ``docs/model_format.rst``.
"""

from __future__ import annotations

import numpy as np

from ..data._input import check_groups
from ..engine.binning import BinMapper, bins_to_dict, read_bins
from ..engine.tree import ensemble_fields, ensemble_from_dict
from ..io._strict_json import (
    float_out,
    floats_out,
    free_form_out,
    read_float,
    read_float_array,
    read_free_form,
    read_index_list,
    read_int,
    read_int_array,
    read_list,
    read_obj,
)
from ._fitted_checks import (
    check_first_use,
    check_importances,
    check_max_bins,
    check_split_gains,
    n_outputs,
    read_device,
    read_loss_lists,
    read_selection_filled,
    selection_and_fill,
)


class GBFSCodec:
    """The ``fitted`` part of a GBFS model file: write, read (validated), check the params."""

    #: cut points: up to ``MAX_BINNED_FEATURES`` features
    binned = True
    #: parameters added after format 2 appeared: a file may lack them (they take defaults)
    params_since_format2 = frozenset(
        {
            "cat_l2",
            "cat_smooth",
            "categorical_features",
            "gt_delta",
            "gt_s",
            "gt_subsets",
            "max_cat_threshold",
            "min_data_per_group",
            "n_jobs",
            "pool_ranking",
            "split_search",
            "tol",
            "warm_start",
        }
    )
    #: what a file written before a parameter existed was fitted with, where the default
    #: has changed the fit since (the categorical guards off; GBFS: the pool ranked by gain)
    params_before = {
        "cat_smooth": 0.0,
        "cat_l2": 0.0,
        "min_data_per_group": 0,
        "max_cat_threshold": 256,
        "pool_ranking": "gain",
    }

    @staticmethod
    def check_fit_params(est, at):
        """The fitted model is what the parameters fit: tree depth, rounds, bins, and the mu
        of a fit without a feature budget (a search sets it otherwise)."""
        ens = est.ensemble_
        if ens.max_depth != est.max_depth:
            at["ensemble"]["max_depth"].fail(
                f"the trees have depth {ens.max_depth}, but params.max_depth is {est.max_depth}."
            )
        if est.n_estimators_ > est.n_estimators:
            at["n_estimators"].fail(
                f"{est.n_estimators_} rounds, more than params.n_estimators {est.n_estimators}."
            )
        check_max_bins(est, at)
        k = est.n_features_to_select
        if (k is None or (k == "auto" and est.tol is not None)) and est.mu_ != est.mu:
            at["mu"].fail(
                f"{est.mu_!r} differs from params.mu {est.mu!r} (without "
                "n_features_to_select the fit runs at mu)."
            )

    keys = [
        "device",
        "ensemble",
        "bins",
        "n_estimators",
        "selected_features",
        "first_use_tree",
        "feature_importances",
        "selection_record",
        "mu",
        "mu_search",
        "fit_times",
        "selection_path",
    ]
    #: keys a file may lack (written before the attribute existed)
    optional = ["evals_result", "selection_filled", "selection_pool", "selection_frequency"]

    @staticmethod
    def write(est):
        rec = est.selection_record_
        selected, filled = selection_and_fill(est)
        return {
            "device": str(est.device_),
            "ensemble": ensemble_fields(est.ensemble_),
            "bins": bins_to_dict(est.bin_mapper_),
            "n_estimators": int(est.n_estimators_),
            # the model's selection; the exact-k fill is kept apart (``selection_filled``)
            "selected_features": selected,
            "selection_filled": filled,
            "first_use_tree": np.asarray(est.first_use_tree_).tolist(),
            "feature_importances": floats_out(est.feature_importances_),
            "selection_record": {
                "tree_column": [int(c) for c in rec["tree_column"]],
                "features_added": [[int(f) for f in fs] for fs in rec["features_added"]],
                "train_loss": floats_out(rec["train_loss"]),
                "val_loss": floats_out(rec["val_loss"]),
            },
            "mu": float_out(est.mu_),
            "mu_search": free_form_out(est.mu_search_, "mu_search_"),
            "fit_times": free_form_out(est.fit_times_, "fit_times_"),
            "selection_path": free_form_out(est.selection_path_, "selection_path_"),
            # exact k's ranked pool and stability frequencies (None without them)
            "selection_pool": free_form_out(est.selection_pool_, "selection_pool_"),
            "selection_frequency": (
                None
                if est.selection_frequency_ is None
                else floats_out(np.asarray(est.selection_frequency_, dtype=np.float64))
            ),
            "evals_result": [floats_out(r) for r in est.evals_result_],
            **(
                {}
                if getattr(est, "group_test_candidates_", None) is None
                else {
                    "group_test_candidates": [
                        np.asarray(c).tolist() for c in est.group_test_candidates_
                    ]
                }
            ),
        }

    @staticmethod
    def read(est, f, at):
        read_obj(f, at, GBFSCodec.keys, GBFSCodec.optional + ["group_test_candidates"])
        d = est.n_features_in_
        k_out = n_outputs(est)
        est.device_ = read_device(f["device"], at["device"])
        bins = read_bins(f["bins"], at["bins"], d)
        est.bin_mapper_ = BinMapper._from_validated(*bins)
        est.category_codes_ = bins[4]
        ens = ensemble_from_dict(
            f["ensemble"],
            at["ensemble"],
            n_features=d,
            n_outputs=k_out,
            cuts=bins[3],
            tagged=False,
            categorical=est.bin_mapper_.is_categorical_,
        )
        n_trees = ens.n_trees
        rounds = read_int(f["n_estimators"], at["n_estimators"], 0)
        if rounds * k_out != n_trees:
            at["n_estimators"].fail(
                f"{rounds} rounds of {k_out} trees, but the ensemble has {n_trees} trees."
            )
        col = np.asarray(ens.tree_column)
        bad = np.flatnonzero(col != np.arange(n_trees) % k_out)
        if bad.size:
            at["ensemble"]["tree_column"][int(bad[0])].fail(
                f"tree {int(bad[0])} of a boosted model fits output "
                f"{int(bad[0]) % k_out}, not {int(col[bad[0]])}."
            )
        selected = read_index_list(f["selected_features"], at["selected_features"], d)
        first = read_int_array(f["first_use_tree"], at["first_use_tree"], (d,), -1, n_trees - 1)
        used = np.flatnonzero(first >= 0)
        if not np.array_equal(np.sort(selected), used):
            at["selected_features"].fail(
                "the selected features are not the features with a first-use tree."
            )
        if np.any(np.diff(first[selected]) < 0):
            at["selected_features"].fail("not in order of first use.")
        imp = read_float_array(f["feature_importances"], at["feature_importances"], (d,), lo=0.0)
        rat = at["selection_record"]
        rec = read_obj(
            f["selection_record"], rat, ["tree_column", "features_added", "train_loss", "val_loss"]
        )
        rcol = read_int_array(rec["tree_column"], rat["tree_column"], (n_trees,), 0, k_out - 1)
        if not np.array_equal(rcol, col):
            rat["tree_column"].fail("differs from the ensemble's tree_column.")
        added = read_list(rec["features_added"], rat["features_added"], n_trees)
        features_added = [
            read_index_list(a, rat["features_added"][t], d).tolist() for t, a in enumerate(added)
        ]
        losses = {
            k: read_float_array(
                rec[k], rat[k], (n_trees,), lo=0.0, nonfinite=("NaN", "Infinity")
            ).tolist()
            for k in ("train_loss", "val_loss")
        }
        check_split_gains(ens, at["ensemble"]["trees"]["gain"])
        check_first_use(ens, first, at["first_use_tree"])
        for t, fs in enumerate(features_added):
            want = np.flatnonzero(first == t)
            if sorted(fs) != want.tolist():
                rat["features_added"][t].fail(
                    f"tree {t} first splits on features {want.tolist()[:8]}, not {sorted(fs)[:8]}."
                )
        if [f for fs in features_added for f in fs] != selected.tolist():
            at["selected_features"].fail(
                "not the features in the order the trees added them "
                "(selection_record.features_added)."
            )
        check_importances(imp, [ens], at["feature_importances"])
        est.ensemble_ = ens
        est.n_estimators_ = rounds
        filled = read_selection_filled(f, at, d, selected, "the model")
        est._set_support(np.concatenate([selected, filled]))
        est.selection_filled_ = filled
        est.first_use_tree_ = first
        est.feature_importances_ = imp
        est.selection_record_ = {
            "tree_column": rcol.tolist(),
            "features_added": features_added,
            **losses,
        }
        est.group_test_candidates_ = _group_test_candidates(
            f, at, est, n_trees, features_added, first
        )
        est.mu_ = read_float(f["mu"], at["mu"], lo=0.0)
        GBFSCodec.check_fit_params(est, at)
        if "evals_result" in f:
            est.evals_result_ = read_loss_lists(f["evals_result"], at["evals_result"], rounds)
        else:  # the validation loss the selection record kept, per round
            val = np.asarray(losses["val_loss"][::k_out], dtype=np.float64)
            est.evals_result_ = [] if np.isnan(val).all() else [val]
        # what the fit reports about itself (informational: type-checked, not provable)
        est.mu_search_ = read_free_form(f["mu_search"], at["mu_search"])
        for key in ("fit_times", "selection_path"):
            value = read_free_form(f[key], at[key])
            if value is not None:  # absent from files of the first format
                setattr(est, key + "_", value)
        # absent from files written before they were saved: None, as a fit without them
        pool = (
            read_free_form(f["selection_pool"], at["selection_pool"])
            if "selection_pool" in f
            else None
        )
        if pool is not None and not isinstance(pool, dict):
            at["selection_pool"].fail("expected a mapping or null.")
        est.selection_pool_ = pool
        freq = f.get("selection_frequency")
        est.selection_frequency_ = (
            None
            if freq is None
            else read_float_array(freq, at["selection_frequency"], (est.n_features_in_,), lo=0.0)
        )
        if est.selection_frequency_ is not None and (est.selection_frequency_ > 1).any():
            at["selection_frequency"].fail("a frequency above 1.")
        est._objective = est._make_objective()


def _group_test_candidates(f, at, est, n_trees, features_added, first_use):
    """GT-GBM's candidates per tree (None for the exact search): sorted distinct indices, one
    list per tree. A feature tree t added to the selection is one of its candidates or, with
    feature groups, shares a group with one of them or with a feature selected before tree t
    (its group was free)."""
    gt = getattr(est, "split_search", "exact") == "group_testing"
    if gt != ("group_test_candidates" in f):
        at.fail(
            "group_test_candidates must be present exactly when split_search is 'group_testing'."
        )
    if not gt:
        return None
    cat = at["group_test_candidates"]
    d = est.n_features_in_
    try:
        groups = check_groups(getattr(est, "feature_groups", None), d)
    except (TypeError, ValueError) as e:
        at.fail(f"the params' feature_groups are not valid: {e}")
    lists = read_list(f["group_test_candidates"], cat, n_trees)
    out = []
    for t, c in enumerate(lists):
        a = read_index_list(c, cat[t], d)
        if np.any(np.diff(a) <= 0):
            cat[t].fail("candidates must be sorted.")
        free = set(groups[a].tolist()) | set(groups[(first_use >= 0) & (first_use < t)].tolist())
        missing = [x for x in features_added[t] if int(groups[x]) not in free]
        if missing:
            cat[t].fail(
                f"tree {t} added feature {missing[0]}, which is not one of its "
                "candidates (nor in a group with one or with an earlier selection)."
            )
        out.append(a)
    return out
