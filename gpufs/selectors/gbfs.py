"""Gradient Boosted Feature Selection: ``GBFSClassifier`` and ``GBFSRegressor``.

Owns the scikit-learn face of GBFS (paper 000) and A-GBM (paper 002): parameter checks, the
fit pipeline (input door -> bins -> boosting with the penalty -> selection record), and
prediction on whichever device the input lives on. The penalty rule itself is documented and
implemented in ``gpufs.penalties``; the trees in ``gpufs.grower``.
"""
from __future__ import annotations

import numbers
import time
import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from .. import _scales, model_io
from .._device import get_namespace, is_cupy_array, resolve_device, to_host
from .._input import (check_costs, check_groups, check_regression_target, check_sample_weight,
                      check_X, check_y, encode_classes)
from ..backends import get_backend
from ..binning import BinMapper
from ..boosting import BoostingParams, fit_boosting
from ..grower import TreeParams
from ..objectives import make_objective
from ..path import selection_path
from ..penalties import PENALTY_SCALINGS, PenaltyState
from ..tree import TreeEnsemble
from ._base import BaseEstimator, GPUFSSelectorMixin, check_number, input_device
from ._k_search import gbfs_mu_search


def _resolve_k(n_features_to_select, n_features):
    """The number of features asked for: an int as is, a fraction in (0, 1] of the columns
    (at least 1, as scikit-learn's RFE rounds it), or None."""
    k = n_features_to_select
    if k is None or isinstance(k, numbers.Integral):
        return k
    return max(1, int(k * n_features))


class _BaseGBFS(GPUFSSelectorMixin, BaseEstimator):
    """Shared fit/predict machinery; see GBFSClassifier for the parameters."""

    _task = None

    def __init__(self, *, mu=0.05, penalty_scaling="root_sse", feature_costs=None,
                 feature_groups=None, n_features_to_select=None, n_estimators=100,
                 learning_rate=0.1, max_depth=4, max_bins=255, reg_lambda=1.0,
                 min_child_weight=1e-3, min_split_gain=0.0, hessian=True,
                 validation_fraction=None, n_iter_no_change=None, device="auto",
                 random_state=None, verbose=False):
        self.mu = mu
        self.penalty_scaling = penalty_scaling
        self.feature_costs = feature_costs
        self.feature_groups = feature_groups
        self.n_features_to_select = n_features_to_select
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_bins = max_bins
        self.reg_lambda = reg_lambda
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.hessian = hessian
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # --- checks -------------------------------------------------------------------------
    def _check_params(self):
        check_number("mu", self.mu, low=0)
        if self.penalty_scaling not in PENALTY_SCALINGS:
            raise ValueError(f"penalty_scaling must be one of {PENALTY_SCALINGS}, "
                             f"got {self.penalty_scaling!r}.")
        k = self.n_features_to_select
        if isinstance(k, numbers.Real) and not isinstance(k, (bool, numbers.Integral)):
            check_number("n_features_to_select", k, low=0, high=1, low_open=True)
        else:
            check_number("n_features_to_select", k, low=1, integer=True, allow_none=True)
        check_number("n_estimators", self.n_estimators, low=1, integer=True)
        check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        check_number("max_depth", self.max_depth, low=1, high=16, integer=True)
        check_number("max_bins", self.max_bins, low=2, high=255, integer=True)
        check_number("reg_lambda", self.reg_lambda, low=0)
        check_number("min_child_weight", self.min_child_weight, low=0)
        check_number("min_split_gain", self.min_split_gain, low=0)
        check_number("validation_fraction", self.validation_fraction, low=0, high=1,
                      low_open=True, allow_none=True)
        if self.validation_fraction is not None and self.validation_fraction >= 1:
            raise ValueError("validation_fraction must be < 1, got "
                             f"{self.validation_fraction!r}.")
        check_number("n_iter_no_change", self.n_iter_no_change, low=1, integer=True,
                      allow_none=True)
        if not isinstance(self.hessian, (bool, np.bool_)):
            raise ValueError(f"hessian must be True or False, got {self.hessian!r}.")

    # --- fit ----------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None, eval_set=None):
        """Fit the penalized boosted ensemble and record the features it selects.

        Parameters
        ----------
        X : array-like (n_samples, n_features): numpy, pandas, cupy, cudf, polars, pyarrow.
            NaN marks a missing value.
        y : array-like (n_samples,)
        sample_weight : array-like (n_samples,) or None
            Weights multiply every row's gradient and hessian, so they set the scale that
            ``reg_lambda`` and ``min_child_weight`` are compared with; the defaults suit
            weights of mean about 1. Weights times c with reg_lambda and min_child_weight
            times c give the same model. A scale that leaves no split possible, or lets
            reg_lambda swamp the leaves, is warned about; one that would overflow is refused.
        eval_set : optional (X_val, y_val) for the validation loss in the selection record
            (and early stopping with ``n_iter_no_change``). Overrides ``validation_fraction``.
        """
        self._check_params()
        device = resolve_device(self.device)
        backend = get_backend(device)
        X = check_X(self, X, device=device, reset=True)
        n, d = X.shape
        y = check_y(y, n, device=device)
        w = check_sample_weight(sample_weight, n, device=device)
        costs = check_costs(self.feature_costs, d)
        groups = check_groups(self.feature_groups, d)
        y = self._encode_y(y)
        _scales.check_boosting_scales(self, y, w)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))

        eval_data = None
        if eval_set is not None:
            if not isinstance(eval_set, (tuple, list)) or len(eval_set) != 2:
                raise ValueError("eval_set must be a pair (X_val, y_val).")
            Xv = check_X(self, eval_set[0], device=device, reset=False)
            yv = self._encode_y_val(check_y(eval_set[1], Xv.shape[0], device=device))
            eval_data = (Xv, yv, None)
        elif self.validation_fraction is not None:
            n_val = int(round(self.validation_fraction * n))
            if n_val < 1 or n - n_val < 1:
                raise ValueError(f"validation_fraction={self.validation_fraction} leaves "
                                 f"{n_val} validation and {n - n_val} training rows out of "
                                 f"{n}; both need at least one row.")
            perm = np.random.RandomState(seed).permutation(n)
            xp = backend.xp
            tr, va = xp.asarray(np.sort(perm[n_val:])), xp.asarray(np.sort(perm[:n_val]))
            eval_data = (X[va], y[va], None if w is None else w[va])
            X, y, w = X[tr], y[tr], (None if w is None else w[tr])

        # Rows of weight 0 are not part of the training data: they must not place cut points.
        if self.n_iter_no_change is not None and eval_data is None:
            raise ValueError("n_iter_no_change needs validation data: pass eval_set=(X_val, "
                             "y_val) to fit or set validation_fraction.")
        t0 = time.perf_counter()
        self.bin_mapper_ = BinMapper(self.max_bins, random_state=seed).fit(
            X if w is None or bool((w > 0).all()) else X[w > 0])
        Xb = self.bin_mapper_.transform(X, backend)
        if eval_data is not None:
            eval_data = (self.bin_mapper_.transform(eval_data[0], backend),) + eval_data[1:]
        times = {"bin": time.perf_counter() - t0, "mu_search": 0.0}
        params = BoostingParams(
            n_estimators=self.n_estimators,
            tree=TreeParams(max_depth=self.max_depth, reg_lambda=float(self.reg_lambda),
                            learning_rate=float(self.learning_rate),
                            min_child_weight=float(self.min_child_weight),
                            min_split_gain=float(self.min_split_gain)),
            hessian=bool(self.hessian), n_iter_no_change=self.n_iter_no_change,
            verbose=bool(self.verbose))
        k = _resolve_k(self.n_features_to_select, d)
        mu, self.mu_search_ = float(self.mu), None
        if k is not None:
            t0 = time.perf_counter()
            search = gbfs_mu_search(backend, Xb, y, w, self._objective, costs, groups,
                                    self.penalty_scaling, self.bin_mapper_, params, k, mu)
            self.mu_search_ = search.as_records()
            times["mu_search"] = time.perf_counter() - t0
            mu = search.mu
            if mu is None:
                mu = 0.0
                warnings.warn(
                    f"only {search.n_features_max} features have any positive gain, fewer "
                    f"than n_features_to_select={k}; selected those {search.n_features_max}. "
                    "More rounds (n_estimators), deeper trees (max_depth) or a smaller "
                    "min_child_weight let more features in.", UserWarning, stacklevel=2)
        self.mu_ = mu
        penalties = PenaltyState(mu, costs, groups, self.penalty_scaling, k)
        # With k, early stopping must not end the fit before the k-th feature enters: all
        # rounds are grown, and the model is cut back to its best validation round, but not
        # to before the round where the k-th feature entered.
        keep_k = k is not None and params.n_iter_no_change is not None
        if keep_k:
            params = BoostingParams(n_estimators=params.n_estimators, tree=params.tree,
                                    hessian=params.hessian, n_iter_no_change=None,
                                    verbose=params.verbose)
        t0 = time.perf_counter()
        ensemble, record, n_rounds = fit_boosting(
            backend, Xb, y, w, self._objective, penalties, self.bin_mapper_, params, eval_data)
        times["boost"] = time.perf_counter() - t0
        self.fit_times_ = times
        if keep_k:
            K = ensemble.n_outputs
            best = int(np.argmin(np.asarray(record.val_loss[::K]))) + 1
            entered = (int(penalties.first_use_tree[penalties.order[k - 1]]) // K + 1
                       if len(penalties.order) >= k else n_rounds)
            n_rounds = max(best, entered)
        self._finish(ensemble, record, n_rounds, penalties, device)
        if self.selected_features_.size == 0 and k is None:
            warnings.warn(
                f"no feature was selected: at mu={mu:g} no split on any feature paid its price "
                f"in {n_rounds} rounds. Lower mu, or set n_features_to_select to the number of "
                "features you want.", UserWarning, stacklevel=2)
        return self

    def _finish(self, ensemble, record, n_rounds, penalties, device):
        """Keep the first n_rounds rounds and derive the selection from the trees kept."""
        K = ensemble.n_outputs
        n_trees = n_rounds * K
        if n_trees < ensemble.n_trees:
            kept = TreeEnsemble(ensemble.max_depth, ensemble.n_features, ensemble.base_score)
            for t in range(n_trees):
                kept.append(ensemble.trees[t], ensemble.tree_column[t])
            ensemble = kept
        self.ensemble_ = ensemble
        self.n_estimators_ = n_rounds
        first = penalties.first_use_tree
        self.selected_features_ = np.array(
            [f for f in penalties.order if first[f] < n_trees], dtype=np.int64)
        self.first_use_tree_ = np.where(first < n_trees, first, -1)
        self.support_ = np.zeros(ensemble.n_features, dtype=bool)
        self.support_[self.selected_features_] = True
        self.selection_record_ = {k: v[:n_trees] for k, v in record.as_dict().items()}
        gains = np.zeros(ensemble.n_features)
        if ensemble.n_trees:
            s = ensemble.stacked()
            split = s["feature"] >= 0
            np.add.at(gains, s["feature"][split], s["gain"][split])
        total = gains.sum()
        self.feature_importances_ = gains / total if total > 0 else gains
        self.device_ = device
        path = selection_path(self)
        self.selection_path_ = {
            "k": path.n_features, "features": self.selected_features_.tolist(),
            "names": path.features, "entry_tree": path.extra["entry_tree"],
            "train_loss": path.train_loss, "val_loss": path.val_loss}

    # --- predict ------------------------------------------------------------------------
    def _raw_predict(self, X):
        check_is_fitted(self, "ensemble_")
        device = input_device(X)
        backend = get_backend(device)
        X = check_X(self, X, device=device, reset=False)
        return self.ensemble_.predict_raw(X, backend)

    # --- persistence: the model file format and its checks live in gpufs.model_io -------
    save_model = model_io.estimator_save_model
    load_model = classmethod(model_io.estimator_load_model)


_PARAMS_DOC = """
    Parameters
    ----------
    mu : float >= 0, default=0.05
        Price of a feature's first use. A split on a feature not yet used by the ensemble
        scores ``gain / divisor - mu * cost[f]``; once used (or once any feature of its group
        is used) the feature is free.
    penalty_scaling : {"root_sse", "none"}, default="root_sse"
        "root_sse" (A-GBM; Han, Rao, Sorokina, Subbian, AISTATS 2020): gains are divided by
        the largest gain any split of the tree's root could reach, so ``mu`` is a fraction in
        [0, 1] of the residual error and means the same at every round and data size. "none"
        (GBFS; Xu, Huang, Weinberger, Zheng, KDD 2014): ``mu`` is in the units of the raw loss
        reduction.
    feature_costs : array-like (n_features,) >= 0, default=None (all 1)
    feature_groups : array-like (n_features,) of int, default=None
        Group ("bag") label per feature; all features of a group become free together.
    n_features_to_select : int or float in (0, 1], default=None
        Select exactly this many features (a float: that fraction of the columns, at least
        one) (fewer, with a warning, only when fewer have any
        positive gain). ``mu`` is then searched: the fit runs at the largest price at which
        this many features enter within the first half of the rounds (bisection on log mu,
        starting from ``mu``, on data binned once), and stops admitting features once they
        are in. None: ``mu`` alone decides how many features enter.
    n_estimators, learning_rate, max_depth : boosting rounds, shrinkage, tree depth.
    max_bins : int in [2, 255], default=255
        Value bins per feature (one more bin always holds NaN).
    reg_lambda : float, default=1.0
        L2 term in the gain and leaf values, added to a node's hessian sum (which sample
        weights scale: see ``sample_weight`` in ``fit``).
    min_child_weight : float, default=1e-3
        Smallest sum of hessians (times sample weights) in a child.
    min_split_gain : float, default=0.0
        A split is made only if its penalized score exceeds this.
    hessian : bool, default=True
        False uses unit hessians (the papers' setting: trees fit the negative gradient by
        least squares).
    validation_fraction : float in (0, 1), default=None
        Hold out this fraction for the validation loss (and early stopping).
    n_iter_no_change : int, default=None
        Stop when the validation loss has not improved for this many rounds; the model is cut
        back to its best round. With ``n_features_to_select``, every round is grown and the
        model is cut back to its best validation round, but never to before the k-th feature
        entered.
    device : {"auto", "cpu", "gpu"}, default="auto"
    random_state : int, RandomState or None
    verbose : bool, default=False
        Show a progress bar.

    Attributes
    ----------
    selected_features_ : int64 (n_selected,), feature indices in order of first use
    selected_feature_names_ : their names
    support_ : bool (n_features,)
    first_use_tree_ : int64 (n_features,), index of the tree that first used each feature, -1
    feature_importances_ : float64 (n_features,), total split gain, normalized
    mu_ : float, the price the final fit ran at (``mu`` unless it was searched)
    mu_search_ : list of dict or None, the search's probes in order (mu, reached,
        n_features, n_trees, seconds); None without ``n_features_to_select``
    fit_times_ : dict of wall seconds of the fit's phases: bin, mu_search (0 without
        ``n_features_to_select``), boost (the final fit)
    selection_path_ : dict, the features in the order they entered: "k" (1, 2, ...),
        "features" (indices), "names" (column names, or x0, x1, ...), "entry_tree" (the tree
        where each entered), "train_loss" and "val_loss" (None without validation data)
        after the last tree grown with that many features (``gpufs.path``)
    selection_record_ : dict of per-tree lists: tree_column, features_added, train_loss,
        val_loss (NaN without validation data)
    ensemble_ : gpufs.tree.TreeEnsemble
    n_estimators_ : rounds kept
    device_ : the device the model was fitted on
"""


class GBFSRegressor(RegressorMixin, _BaseGBFS):
    __doc__ = ("Gradient Boosted Feature Selection for regression (squared error).\n"
               + _PARAMS_DOC)

    def _encode_y(self, y):
        y = check_regression_target(y)
        self._objective = make_objective("regression")
        return y

    def _encode_y_val(self, y):
        return check_regression_target(y)

    def predict(self, X):
        """Predictions (n_samples,), cupy for cupy input."""
        return self._raw_predict(X)[:, 0]


class GBFSClassifier(ClassifierMixin, _BaseGBFS):
    __doc__ = ("Gradient Boosted Feature Selection for classification (binary log loss, or "
               "softmax with one tree per class per round and one shared set of used "
               "features).\n" + _PARAMS_DOC + "    classes_ : labels\n")

    def _encode_y(self, y):
        if y.dtype.kind == "f":
            xp = get_namespace("gpu") if is_cupy_array(y) else np
            if not bool(xp.isfinite(y).all()):
                raise ValueError("Input y contains NaN or infinity; every label must be finite.")
        # "Unknown label type: continuous ..." for a regression target (and other non-labels)
        check_classification_targets(to_host(y))
        classes, enc = encode_classes(y)
        self.classes_ = classes
        self._objective = make_objective("classification", len(classes))
        return enc.astype(np.float64) if len(classes) == 2 else enc

    def _encode_y_val(self, y):
        y_host = to_host(y)
        idx = np.searchsorted(self.classes_, y_host)
        idx = np.clip(idx, 0, len(self.classes_) - 1)
        if not np.all(self.classes_[idx] == y_host):
            unknown = np.setdiff1d(np.unique(y_host), self.classes_)
            raise ValueError(f"eval_set has labels not seen in y: {unknown[:5].tolist()}.")
        enc = idx.astype(np.float64 if len(self.classes_) == 2 else np.int32)
        return get_namespace("gpu").asarray(enc) if is_cupy_array(y) else enc

    def decision_function(self, X):
        """Raw scores: (n_samples,) logits for two classes, (n_samples, n_classes) otherwise."""
        raw = self._raw_predict(X)
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, X):
        """Class probabilities (n_samples, n_classes), cupy for cupy input."""
        raw = self._raw_predict(X)  # checks fitted first
        return self._objective.proba(raw)

    def predict(self, X):
        """Predicted labels (n_samples,); cupy for cupy input when labels are numeric."""
        proba = self.predict_proba(X)
        idx = proba.argmax(axis=1)
        if is_cupy_array(idx):
            if self.classes_.dtype.kind in "biuf":
                return get_namespace("gpu").asarray(self.classes_)[idx]
            idx = idx.get()
        return self.classes_[idx]
