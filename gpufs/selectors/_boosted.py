"""What the boosted selectors' estimators share: GBFS and multitask GBFS alike.

Owns :class:`BoostedRegressorMixin` and :class:`BoostedClassifierMixin`: the objective a fit
boosts (``gpufs.engine.objectives.make_objective``) and the target its kernels read, and
``BOOSTING_CONSTRAINTS``, the rules of the boosting hyperparameters (LightGBM's categorical
guards among them, passed on by ``cat_guards``): written once for both families (``gbfs``,
``multitask``) and the Dask estimators built on them.
"""

from __future__ import annotations

import numpy as np

from .._params import int_range, real_range
from ..engine.objectives import make_objective

__all__ = ["BOOSTING_CONSTRAINTS", "BoostedClassifierMixin", "BoostedRegressorMixin", "cat_guards"]

#: The ``_parameter_constraints`` of the boosting hyperparameters (``boosting.BoostingParams``).
BOOSTING_CONSTRAINTS = {
    "n_estimators": [int_range(1)],
    "learning_rate": [real_range(0, closed="neither")],
    "max_depth": [int_range(1, 16)],
    "max_bins": [int_range(2, 255)],
    "reg_lambda": [real_range(0)],
    "min_child_weight": [real_range(0)],
    "min_split_gain": [real_range(0)],
    "hessian": ["boolean"],
    "cat_smooth": [real_range(0)],
    "cat_l2": [real_range(0)],
    "min_data_per_group": [real_range(0)],
    "max_cat_threshold": [int_range(1, 256)],
}


def cat_guards(est):
    """The categorical guards of a boosted estimator as ``TreeParams`` keywords."""
    return {
        "cat_smooth": float(est.cat_smooth),
        "cat_l2": float(est.cat_l2),
        "min_data_per_group": float(est.min_data_per_group),
        "max_cat_threshold": int(est.max_cat_threshold),
    }


class BoostedRegressorMixin:
    """Squared error, boosted on the float64 target as it is."""

    def _make_objective(self):
        return make_objective("regression")

    def _boosting_target(self, y):
        return y


class BoostedClassifierMixin:
    """Binary log loss, or softmax over ``classes_`` (one tree per class per round)."""

    def _make_objective(self):
        return make_objective("classification", len(self.classes_))

    def _boosting_target(self, codes):
        # The logistic kernels read a float 0/1 target; softmax reads the int32 codes.
        return codes.astype(np.float64) if len(self.classes_) == 2 else codes
