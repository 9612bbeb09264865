"""The model-file codec of the ControlBurn estimators.

Owns the ``fitted`` object of a ``ControlBurnRegressor`` / ``ControlBurnClassifier`` model
file: the bins, the selection and the lasso's record, and the refit model (a GBFS model body
read by ``gpufs.io.model_io.read_body``, or the constant model used when nothing was selected).
The grown forest (``forest_``) is training evidence and is not saved. The layout of the
fields is in ``docs/model_format.rst``.
"""

from __future__ import annotations

import numpy as np
from sklearn.dummy import DummyClassifier, DummyRegressor

from ..engine.binning import BinMapper, bins_to_dict, read_bins
from ..io import model_io
from ..io._strict_json import (
    MAX_NODES,
    float_out,
    floats_out,
    free_form_out,
    kind_of,
    read_bool,
    read_float,
    read_float_array,
    read_free_form,
    read_index_list,
    read_int,
    read_obj,
    read_str,
)
from ._fitted_checks import (
    check_max_bins,
    read_device,
    read_selection_filled,
    selection_and_fill,
)
from ._gbfs_io import GBFSCodec
from .gbfs import _BaseGBFS


class ControlBurnCodec:
    """The ``fitted`` part of a ControlBurn model file: write, read (validated), check the
    params. The refit model is a whole GBFS model body, or the constant model."""

    #: cut points: up to ``MAX_BINNED_FEATURES`` features
    binned = True
    #: parameters added after format 2 appeared: a file may lack them (they take defaults)
    params_since_format2 = frozenset(
        {
            "categorical_features",
            "honest_leaves",
            "n_jobs",
            "oob_prune",
            "reweight_steps",
            "warm_start",
        }
    )
    #: the value of a later parameter that reproduces an older file's fit (whatever today's
    #: default): a forest of in-bag leaf values, unpruned
    params_before = {"honest_leaves": False, "oob_prune": None}

    @staticmethod
    def check_fit_params(est, at):
        """The bins are those of ``max_bins``."""
        check_max_bins(est, at)

    keys = [
        "device",
        "bins",
        "selected_features",
        "feature_importances",
        "forest_coverage",
        "forest_features",
        "n_trees",
        "tree_weights",
        "intercept",
        "lambda",
        "selection_exact",
        "selection_path",
        "fit_times",
        "refit",
    ]
    #: keys a file may lack (written before the attribute existed)
    optional = ["selection_filled"]

    @staticmethod
    def write(est):
        refit = est.refit_estimator_
        if isinstance(refit, _BaseGBFS):
            header = model_io.body_header(
                refit, type(refit).__name__, getattr(refit, "feature_names_in_", None)
            )
            r = {"kind": "gbfs", "model": {**header, "fitted": GBFSCodec.write(refit)}}
        elif type(refit).__name__ == "DummyRegressor":
            r = {"kind": "constant", "value": float_out(np.ravel(refit.constant_)[0])}
        elif type(refit).__name__ == "DummyClassifier":
            r = {"kind": "prior", "class_prior": floats_out(refit.class_prior_)}
        else:
            raise ValueError(
                f"cannot save {type(est).__name__} with refit_estimator="
                f"{type(refit).__name__}(...) in the gpufs model format, which describes "
                "gpufs models only. Save it with pickle or joblib instead (and load pickles "
                "only from sources you trust: SECURITY.md)."
            )
        selected, filled = selection_and_fill(est)
        return {
            "device": str(est.device_),
            "bins": bins_to_dict(est.bin_mapper_),
            # the lasso's selection; the fill to k is kept apart (``selection_filled``)
            "selected_features": selected,
            "selection_filled": filled,
            "feature_importances": floats_out(est.feature_importances_),
            "forest_coverage": int(est.forest_coverage_),
            "forest_features": np.asarray(est.forest_features_).tolist(),
            "n_trees": int(est.n_trees_),
            "tree_weights": floats_out(est.tree_weights_),
            "intercept": float_out(est.intercept_),
            "lambda": None if est.lambda_ is None else float_out(est.lambda_),
            "selection_exact": bool(est.selection_exact_),
            "selection_path": free_form_out(est.selection_path_, "selection_path_"),
            "fit_times": free_form_out(getattr(est, "fit_times_", None), "fit_times_"),
            "refit": r,
        }

    @staticmethod
    def read(est, f, at):
        read_obj(f, at, ControlBurnCodec.keys, ControlBurnCodec.optional)
        d = est.n_features_in_
        est.device_ = read_device(f["device"], at["device"])
        bins = read_bins(f["bins"], at["bins"], d)
        est.bin_mapper_ = BinMapper._from_validated(*bins)
        est.category_codes_ = bins[4]
        sel = read_index_list(f["selected_features"], at["selected_features"], d)
        filled = read_selection_filled(f, at, d, sel, "the lasso")
        sel = np.concatenate([sel, filled])
        imp = read_float_array(f["feature_importances"], at["feature_importances"], (d,), lo=0.0)
        off = np.ones(d, dtype=bool)
        off[sel] = False
        if np.any(imp[off] != 0):
            at["feature_importances"].fail("a feature that was not selected has importance.")
        if np.any(imp[filled] != 0):
            at["feature_importances"].fail("a filled feature has importance.")
        cov = read_int(f["forest_coverage"], at["forest_coverage"], 0, d)
        forest_features = read_index_list(f["forest_features"], at["forest_features"], d)
        if forest_features.shape[0] != cov or np.any(np.diff(forest_features) <= 0):
            at["forest_features"].fail(
                "expected the forest_coverage features, in increasing order."
            )
        if not np.isin(sel[: sel.size - filled.size], forest_features).all():
            at["selected_features"].fail("a selected feature is not used by the forest.")
        n_trees = read_int(f["n_trees"], at["n_trees"], 0, MAX_NODES)
        weights = read_float_array(f["tree_weights"], at["tree_weights"], (n_trees,), lo=0.0)
        intercept = read_float(f["intercept"], at["intercept"])
        lam = None if f["lambda"] is None else read_float(f["lambda"], at["lambda"], lo=0.0)
        exact = read_bool(f["selection_exact"], at["selection_exact"])
        path = read_free_form(f["selection_path"], at["selection_path"])
        times = read_free_form(f["fit_times"], at["fit_times"])
        est.refit_estimator_ = ControlBurnCodec._read_refit(est, f["refit"], at["refit"], sel)
        est._set_support(sel)
        est.selection_filled_ = filled
        est.feature_importances_ = imp
        est.forest_coverage_, est.forest_features_ = cov, forest_features
        est.n_trees_, est.tree_weights_ = n_trees, weights
        est.intercept_, est.lambda_, est.selection_exact_ = intercept, lam, exact
        est.selection_path_ = path
        if times is not None:
            est.fit_times_ = times
        ControlBurnCodec.check_fit_params(est, at)

    @staticmethod
    def _read_refit(est, r, at, sel):
        classifier = hasattr(est, "classes_")
        if type(r) is not dict:
            at.fail(f"expected an object, got {kind_of(r)}.")
        kind = read_str(r.get("kind"), at["kind"], {"gbfs", "constant", "prior"})
        if (kind == "gbfs") != (sel.shape[0] > 0):
            at["kind"].fail("the refit model is a GBFS model exactly when features were selected.")
        if kind == "gbfs":
            read_obj(r, at, ["kind", "model"])
            mat = at["model"]
            read_obj(r["model"], mat, model_io.BODY_KEYS)
            want = "GBFSClassifier" if classifier else "GBFSRegressor"
            if r["model"].get("estimator") != want:
                mat["estimator"].fail(f"the refit model of a {type(est).__name__} is a {want}.")
            refit = model_io.read_body(r["model"], mat, nested=True)
            if refit.n_features_in_ != sel.shape[0]:
                mat["n_features_in"].fail(
                    f"{refit.n_features_in_} features, but {sel.shape[0]} were selected."
                )
            if classifier and not (
                refit.classes_.dtype == est.classes_.dtype
                and np.array_equal(refit.classes_, est.classes_)
            ):
                mat["classes"].fail("differ from the model's classes.")
            return refit
        if kind == "constant":
            if classifier:
                at["kind"].fail("a classifier's constant model is 'prior'.")
            read_obj(r, at, ["kind", "value"])
            value = read_float(r["value"], at["value"])
            return DummyRegressor().fit(np.zeros((1, 1)), np.array([value]))
        if not classifier:
            at["kind"].fail("a regressor's constant model is 'constant'.")
        read_obj(r, at, ["kind", "class_prior"])
        k = len(est.classes_)
        prior = read_float_array(r["class_prior"], at["class_prior"], (k,), lo=0.0)
        dummy = DummyClassifier(strategy="prior").fit(np.zeros((k, 1)), est.classes_)
        dummy.class_prior_ = prior
        return dummy
