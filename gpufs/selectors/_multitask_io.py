"""The model-file codec of the multitask GBFS estimators.

Owns the ``fitted`` object of a ``MultiTaskGBFSRegressor`` / ``MultiTaskGBFSClassifier``
model file: the task labels, the shared bins, one ensemble and one selection record per task,
Omega_G and each Omega_t, checked against each other on ``read``. The layout of the fields is
in ``docs/model_format.rst``.
"""

from __future__ import annotations

import numpy as np

from ..engine.binning import BinMapper, bins_to_dict, read_bins
from ..engine.tree import ensemble_fields, ensemble_from_dict, n_nodes_for_depth
from ..io import model_io
from ..io._strict_json import (
    MAX_NODES,
    At,
    floats_out,
    free_form_out,
    read_float_array,
    read_free_form,
    read_index_list,
    read_int,
    read_int_array,
    read_list,
    read_obj,
)
from ._fitted_checks import (
    check_importances,
    check_max_bins,
    check_split_gains,
    n_outputs,
    read_device,
)


class MultiTaskGBFSCodec:
    """Multitask GBFS: one ensemble per task over shared bins, Omega_G and each Omega_t.

    Beyond each ensemble's own checks: every task's ensemble has ``n_estimators`` rounds of
    trees; Omega_t (``selected_features_by_task``) is exactly the set of features task t's
    trees split on, in an order consistent with the first tree that uses each; Omega_G
    (``selected_features``) is exactly their union; the trees of all tasks together stay
    under ``MAX_NODES``.
    """

    #: cut points: up to ``MAX_BINNED_FEATURES`` features
    binned = True
    #: parameters added after format 2 appeared: a file may lack them (they take defaults)
    params_since_format2 = frozenset(
        {
            "cat_l2",
            "cat_smooth",
            "categorical_features",
            "max_cat_threshold",
            "min_data_per_group",
            "n_jobs",
        }
    )
    #: what a file written before a parameter existed was fitted with, where the default
    #: has changed the fit since (the categorical guards off; GBFS: the pool ranked by gain)
    params_before = {
        "cat_smooth": 0.0,
        "cat_l2": 0.0,
        "min_data_per_group": 0,
        "max_cat_threshold": 256,
    }
    keys = [
        "device",
        "tasks",
        "bins",
        "ensembles",
        "n_estimators",
        "mu_t",
        "selected_features",
        "selected_features_by_task",
        "feature_importances",
        "selection_records",
        "fit_times",
        "selection_path",
    ]

    @staticmethod
    def write(est):
        return {
            "device": str(est.device_),
            "tasks": model_io.classes_out(est.tasks_),
            "bins": bins_to_dict(est.bin_mapper_),
            "ensembles": [ensemble_fields(e) for e in est.ensembles_],
            "n_estimators": int(est.n_estimators_),
            "mu_t": floats_out(est.mu_t_),
            "selected_features": np.asarray(est.selected_features_).tolist(),
            "selected_features_by_task": [
                np.asarray(s).tolist() for s in est.selected_features_by_task_
            ],
            "feature_importances": floats_out(est.feature_importances_),
            "selection_records": [
                {
                    "tree_column": [int(c) for c in rec["tree_column"]],
                    "features_added": [[int(f) for f in fs] for fs in rec["features_added"]],
                    "train_loss": floats_out(rec["train_loss"]),
                    "val_loss": floats_out(rec["val_loss"]),
                }
                for rec in est.selection_records_
            ],
            "fit_times": free_form_out(est.fit_times_, "fit_times_"),
            "selection_path": free_form_out(est.selection_path_, "selection_path_"),
        }

    @staticmethod
    def read(est, f, at):
        read_obj(f, at, MultiTaskGBFSCodec.keys)
        d = est.n_features_in_
        k_out = n_outputs(est)
        est.device_ = read_device(f["device"], at["device"])
        tasks = model_io.read_classes(f["tasks"], at["tasks"], 1, "a model has at least one task.")
        n_tasks = len(tasks)
        est.tasks_ = tasks
        bins = read_bins(f["bins"], at["bins"], d)
        rounds = read_int(f["n_estimators"], at["n_estimators"], 0)
        eat = at["ensembles"]
        read_list(f["ensembles"], eat, n_tasks)
        ensembles, first_use, nodes = [], [], 0
        for t, e in enumerate(f["ensembles"]):
            ens = ensemble_from_dict(
                e,
                eat[t],
                n_features=d,
                n_outputs=k_out,
                cuts=bins[3],
                categorical=BinMapper._from_validated(*bins).is_categorical_,
                tagged=False,
            )
            nodes += ens.n_trees * n_nodes_for_depth(ens.max_depth)
            if nodes > MAX_NODES:
                eat[t].fail(f"the tasks' trees hold more than {MAX_NODES} nodes together.")
            if ens.n_trees != rounds * k_out:
                eat[t]["n_trees"].fail(
                    f"{ens.n_trees} trees, but the model has {rounds} rounds of {k_out}."
                )
            col = np.asarray(ens.tree_column)
            bad = np.flatnonzero(col != np.arange(ens.n_trees) % k_out)
            if bad.size:
                eat[t]["tree_column"][int(bad[0])].fail(
                    f"tree {int(bad[0])} of a boosted model fits output {int(bad[0]) % k_out}."
                )
            check_split_gains(ens, eat[t]["trees"]["gain"])
            ensembles.append(ens)
            # the first tree of this task that splits on each feature (-1: none)
            first = np.full(d, -1, dtype=np.int64)
            if ens.n_trees:
                feat = ens.stacked()["feature"]
                for tree in range(ens.n_trees - 1, -1, -1):
                    used = feat[tree][feat[tree] >= 0]
                    first[used] = tree
            first_use.append(first)
        sat = at["selected_features_by_task"]
        read_list(f["selected_features_by_task"], sat, n_tasks)
        by_task = []
        for t, v in enumerate(f["selected_features_by_task"]):
            sel = read_index_list(v, sat[t], d)
            if not np.array_equal(np.sort(sel), np.flatnonzero(first_use[t] >= 0)):
                sat[t].fail("not the features task's trees split on.")
            if np.any(np.diff(first_use[t][sel]) < 0):
                sat[t].fail("not in order of first use.")
            by_task.append(sel)
        selected = read_index_list(f["selected_features"], at["selected_features"], d)
        union = np.unique(np.concatenate(by_task)) if by_task else np.zeros(0, np.int64)
        if not np.array_equal(np.sort(selected), union):
            at["selected_features"].fail("not the union of the tasks' selected features.")
        mu_t = read_float_array(f["mu_t"], at["mu_t"], (n_tasks,), lo=0.0)
        imp = read_float_array(f["feature_importances"], at["feature_importances"], (d,), lo=0.0)
        check_importances(imp, ensembles, at["feature_importances"])
        rat = at["selection_records"]
        read_list(f["selection_records"], rat, n_tasks)
        records = []
        for t, rec in enumerate(f["selection_records"]):
            n_trees = ensembles[t].n_trees
            read_obj(rec, rat[t], ["tree_column", "features_added", "train_loss", "val_loss"])
            rcol = read_int_array(
                rec["tree_column"], rat[t]["tree_column"], (n_trees,), 0, k_out - 1
            )
            if not np.array_equal(rcol, np.asarray(ensembles[t].tree_column)):
                rat[t]["tree_column"].fail("differs from the ensemble's tree_column.")
            added = read_list(rec["features_added"], rat[t]["features_added"], n_trees)
            records.append(
                {
                    "tree_column": rcol.tolist(),
                    "features_added": [
                        read_index_list(a, rat[t]["features_added"][i], d).tolist()
                        for i, a in enumerate(added)
                    ],
                    **{
                        k: read_float_array(
                            rec[k], rat[t][k], (n_trees,), lo=0.0, nonfinite=("NaN", "Infinity")
                        ).tolist()
                        for k in ("train_loss", "val_loss")
                    },
                }
            )
        est.tasks_ = tasks
        est.bin_mapper_ = BinMapper._from_validated(*bins)
        est.category_codes_ = bins[4]
        est.ensembles_ = ensembles
        est.n_estimators_ = rounds
        est.mu_t_ = mu_t
        est._set_support(selected)
        est.selected_features_by_task_ = by_task
        est.first_use_tree_by_task_ = (
            np.stack(first_use) if first_use else np.zeros((0, d), np.int64)
        )
        est.feature_importances_ = imp
        est.selection_records_ = records
        for key in ("fit_times", "selection_path"):
            setattr(est, key + "_", read_free_form(f[key], at[key]))
        est._objective = est._make_objective()
        MultiTaskGBFSCodec.check_fit_params(est, at)

    @staticmethod
    def check_fit_params(est, at):
        """The task prices as fit resolves them (one per task, mu_G + mu_t < 1 with
        root_sse), and the tree depth, rounds (all of them: no early stopping) and bins of
        the parameters."""
        try:
            mu_t = est._resolve_mu_t(len(est.tasks_))
        except ValueError as exc:
            At("params")["mu_t"].fail(str(exc))
        if not np.array_equal(est.mu_t_, mu_t):
            at["mu_t"].fail(
                f"{np.asarray(est.mu_t_).tolist()[:8]} differs from params.mu_t "
                f"{mu_t.tolist()[:8]}."
            )
        for t, ens in enumerate(est.ensembles_):
            if ens.max_depth != est.max_depth:
                at["ensembles"][t]["max_depth"].fail(
                    f"the trees have depth {ens.max_depth}, "
                    f"but params.max_depth is "
                    f"{est.max_depth}."
                )
        if est.n_estimators_ != est.n_estimators:
            at["n_estimators"].fail(
                f"{est.n_estimators_} rounds, but params.n_estimators is {est.n_estimators}."
            )
        check_max_bins(est, at)
