"""The model-file codec of the forward stagewise estimators.

Owns the ``fitted`` object of a ``StagewiseRegressor`` / ``StagewiseClassifier`` model file:
what ``write`` puts there, and ``read``, which checks the weights round by round against the
selection, ``coef_`` against the standardized weights, and the costs (each round lowers the
training cost or leaves it) before setting the estimator's attributes. ``selection_path_`` is
derived again on load. The layout of the fields is in ``docs/model_format.rst``.
"""

from __future__ import annotations

import numpy as np

from .._types import MAX_VALUE_BINS
from ..data._category_codes import categories_to_dict, read_categories
from ..io._strict_json import (
    floats_out,
    read_float,
    read_float_array,
    read_index_list,
    read_int,
    read_list,
    read_obj,
)
from ..path import selection_path
from ._base import resolve_k
from ._fitted_checks import n_outputs, read_device, read_loss_lists


class StagewiseCodec:
    """The ``fitted`` part of a stagewise model file: write, read (validated), check the params."""

    #: no cut points: up to ``MAX_FEATURES`` features
    binned = False
    #: parameters added after format 2 appeared: a file may lack them (they take defaults)
    params_since_format2 = frozenset({"categorical_features"})

    @staticmethod
    def check_fit_params(est, at, k=None):
        """No more features than ``n_features_to_select`` asks for."""
        k = len(est.selected_features_) if k is None else k
        want = est.n_features_to_select
        limit = (
            est.n_features_in_
            if want is None or want == "auto"
            else resolve_k(want, est.n_features_in_)
        )
        if k > limit:
            at["selected_features"].fail(
                f"{k} features, more than params.n_features_to_select {want!r} allows ({limit})."
            )

    keys = [
        "device",
        "mean",
        "std",
        "selected_features",
        "standardized_coef",
        "bias",
        "coef",
        "intercept",
        "weights_history",
        "cost_history",
        "validation_cost_history",
    ]
    optional = ["evals_result", "categories", "category_coef", "missing_coef"]

    @staticmethod
    def write(est):
        return {
            "device": str(est.device_),
            "mean": floats_out(est.mean_),
            "std": floats_out(est.std_),
            "selected_features": np.asarray(est.selected_features_).tolist(),
            "standardized_coef": floats_out(est.standardized_coef_),
            "bias": floats_out(est.bias_),
            "coef": floats_out(est.coef_),
            "intercept": floats_out(est.intercept_),
            "weights_history": floats_out(est.weights_history_),
            "cost_history": floats_out(est.cost_history_),
            "validation_cost_history": (
                None
                if est.validation_cost_history_ is None
                else floats_out(est.validation_cost_history_)
            ),
            "evals_result": [floats_out(r) for r in est.evals_result_],
            **StagewiseCodec._write_categories(est),
            **(
                {
                    "missing_coef": [
                        [int(f), floats_out(np.atleast_1d(a))]
                        for f, a in sorted(est.missing_coef_.items())
                    ]
                }
                if getattr(est, "missing_coef_", None)
                else {}
            ),
        }

    @staticmethod
    def _read_missing(est, f, at, sel, m, classifier, is_cat):
        """The missing offsets: one per selected numeric column that had holes in fit,
        ``m`` finite floats each, in column order."""
        est.missing_coef_ = {}
        if "missing_coef" not in f:
            return
        at_m = at["missing_coef"]
        entries = read_list(f["missing_coef"], at_m, None)
        allowed = {int(x) for x in sel if not is_cat[x]}
        last = -1
        for i, e in enumerate(entries):
            read_list(e, at_m[i], 2)
            col = read_int(e[0], at_m[i][0], 0, est.n_features_in_ - 1)
            if col not in allowed or col <= last:
                at_m[i][0].fail("not a selected numeric column, in increasing order.")
            last = col
            a = read_float_array(e[1], at_m[i][1], (m,))
            est.missing_coef_[col] = a if classifier else float(a[0])

    @staticmethod
    def _write_categories(est):
        codes = getattr(est, "category_codes_", None)
        if codes is None:
            return {}
        return {
            "categories": categories_to_dict(codes),
            "category_coef": [
                [int(f), floats_out(np.atleast_2d(a))]
                for f, a in sorted(est.category_coef_.items())
            ],
        }

    @staticmethod
    def _read_categories(est, f, at, sel, m, classifier):
        """The category maps and the selected categorical columns' weights: one entry per
        selected categorical column, (m, n_codes) finite weights."""
        est.category_codes_ = None
        est.category_coef_ = {}
        if ("categories" in f) != ("category_coef" in f):
            at.fail("categories and category_coef come together.")
        if "categories" not in f:
            return np.zeros(est.n_features_in_, dtype=bool)
        codes = read_categories(
            f["categories"], at["categories"], est.n_features_in_, MAX_VALUE_BINS
        )
        is_cat = codes.is_categorical
        want = [int(x) for x in sel if is_cat[x]]
        cat = at["category_coef"]
        entries = read_list(f["category_coef"], cat, len(want))
        coef = {}
        for i, e in enumerate(entries):
            read_list(e, cat[i], 2)
            col = read_int(e[0], cat[i][0], 0, est.n_features_in_ - 1)
            if col != sorted(want)[i]:
                cat[i][0].fail(f"the selected categorical columns are {sorted(want)}.")
            a = read_float_array(e[1], cat[i][1], (m, codes.n_codes[col]))
            coef[col] = a if classifier else a[0]
        est.category_codes_, est.category_coef_ = codes, coef
        return is_cat

    @staticmethod
    def read(est, f, at):
        read_obj(f, at, StagewiseCodec.keys, StagewiseCodec.optional)
        d = est.n_features_in_
        classifier = hasattr(est, "classes_")
        m = n_outputs(est) if classifier else 1
        est.device_ = read_device(f["device"], at["device"])
        mean = read_float_array(f["mean"], at["mean"], (d,))
        std = read_float_array(f["std"], at["std"], (d,), lo=0.0)
        sel = read_index_list(f["selected_features"], at["selected_features"], d)
        k = sel.shape[0]
        is_cat = StagewiseCodec._read_categories(est, f, at, sel, m, classifier)
        StagewiseCodec._read_missing(est, f, at, sel, m, classifier, is_cat)
        has_offset = np.isin(sel, list(est.missing_coef_))
        if np.any((std[sel] == 0) & ~is_cat[sel] & ~has_offset):
            at["selected_features"].fail("a constant feature (std 0) cannot be selected.")
        coef_shape = (m, d) if classifier else (d,)
        hist_shape = (k + 1, m, d) if classifier else (k + 1, d)
        a = read_float_array(f["standardized_coef"], at["standardized_coef"], coef_shape)
        bias = (
            read_float_array(f["bias"], at["bias"], (m,))
            if classifier
            else read_float(f["bias"], at["bias"])
        )
        coef = read_float_array(f["coef"], at["coef"], coef_shape)
        intercept = (
            read_float_array(f["intercept"], at["intercept"], (m,))
            if classifier
            else read_float(f["intercept"], at["intercept"])
        )
        hist = read_float_array(f["weights_history"], at["weights_history"], hist_shape)
        a2, c2, h3 = a.reshape(m, d), coef.reshape(m, d), hist.reshape(k + 1, m, d)
        off = np.ones(d, dtype=bool)
        off[sel] = False
        if np.any(a2[:, off] != 0) or np.any(c2[:, off] != 0):
            at["coef"].fail("a feature that was not selected has a non-zero weight.")
        if np.any(h3[0] != 0):
            at["weights_history"][0].fail("round 0 (the bias alone) has non-zero weights.")
        for r in range(1, k + 1):
            step = h3[r] != h3[r - 1]
            step[:, sel[r - 1]] = False
            if step.any():
                at["weights_history"][r].fail(
                    f"round {r} changes a weight other than that of "
                    f"selected feature {int(sel[r - 1])}."
                )
        if not np.array_equal(h3[k], a2):
            at["weights_history"][k].fail("the last round's weights are not standardized_coef.")
        inv = np.divide(1.0, std, out=np.zeros(d), where=std > 0)
        # coef_ = standardized_coef_ / std_ and intercept_ = bias_ - coef_ @ mean_, up to the
        # rounding of a product and of a BLAS dot product
        expect = a2 * inv
        if np.any(np.abs(c2 - expect) > 1e-12 * np.abs(expect)):
            at["coef"].fail("not standardized_coef / std.")
        b2, i2 = np.atleast_1d(bias), np.atleast_1d(intercept)
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.abs(b2) + np.abs(c2) @ np.abs(mean)
            gap = np.abs(i2 - (b2 - c2 @ mean))
        if not (np.all(np.isfinite(scale)) and np.all(gap <= 1e-9 * scale + 1e-300)):
            at["intercept"].fail("not bias - coef @ mean.")
        cost = read_float_array(f["cost_history"], at["cost_history"], (k + 1,), lo=0.0)
        # every round lowers the training cost or leaves it (up to the rounding of the
        # evaluated cost, far below this margin)
        rose = np.flatnonzero(cost[1:] > cost[:-1] * (1 + 1e-9) + 1e-300)
        if rose.size:
            at["cost_history"][int(rose[0]) + 1].fail(
                "the cost rose in a round; each round lowers the training cost or leaves it."
            )
        StagewiseCodec.check_fit_params(est, at, k)
        vch = f["validation_cost_history"]
        if vch is not None:
            vch = read_float_array(vch, at["validation_cost_history"], (k + 1,), lo=0.0)
        if "evals_result" in f:
            evals = read_loss_lists(f["evals_result"], at["evals_result"], k + 1)
            last = evals[-1] if evals else None
            if (vch is None) != (last is None) or (
                vch is not None and not np.array_equal(vch, last)
            ):
                at["evals_result"].fail("its last entry is not validation_cost_history.")
        else:  # written before evals_result_ existed
            evals = [] if vch is None else [vch]
        est.evals_result_ = evals
        est.mean_, est.std_ = mean, std
        est._set_support(sel)
        est.cost_history_, est.validation_cost_history_ = cost, vch
        est.standardized_coef_, est.bias_ = a, bias
        est.coef_, est.intercept_ = coef, intercept
        est.weights_history_ = hist
        # selection_path_ is derived from the selection and the costs: no field of its own
        est._set_selection_path(selection_path(est), entry_round=list(range(1, k + 1)))
