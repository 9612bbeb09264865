"""Forward stagewise feature selection (linear boosting): ``StagewiseRegressor`` and
``StagewiseClassifier``.

Implements the feature selection by boosting of Watt, Borhani, Katsaggelos, "Machine Learning
Refined", 2nd ed., section 9.6. Owns the two estimators and the fit loop; the per-round
candidate solvers (one loss object per cost: :class:`LeastSquaresStage` and
:class:`LogisticStage`) are ``selectors._stagewise_stages``'. Parameters, target encoding,
validation data and early stopping come from the shared selector base (``selectors._base``).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .._device import get_namespace, to_host
from .._docstrings import INPUT_ATTRIBUTES_DOC
from .._params import DEVICE_CONSTRAINT, int_range, real_range
from .._warnings import warn_from_caller
from ..data import _scales
from ..data._input import check_X
from ..engine.objectives import sigmoid
from ..io import model_io
from ..path import selection_path
from ._base import (
    ClassifierTargetMixin,
    EarlyStopping,
    RegressorTargetMixin,
    SelectorBase,
    _deprecated_validation_keywords,
    feature_budget,
    input_device,
)
from ._stagewise_io import StagewiseCodec
from ._stagewise_stages import (
    LeastSquaresStage,
    LogisticStage,
    _category_candidates,
    _category_folds,
    _category_heldout_cost,
    _category_index,
    _check_raw_units,
    _column,
    _column_exponents,
    _constant_target,
    _scale_columns,
    _standardize_stats,
)

__all__ = ["LeastSquaresStage", "LogisticStage", "StagewiseClassifier", "StagewiseRegressor"]


#: A round that lowers the training cost by at most this share of the bias-alone cost ends
#: the path: the model fits the training data up to rounding, and the feature's weight would
#: be rounding noise.
_NO_GAIN = 1e-12


class _StagewiseBase(SelectorBase):
    """The fit loop shared by both estimators.

    A subclass gives its cost as a loss object (``_stage_loss``: targets, bias, cost and the
    round's candidate solver) and says whether its attributes have a model axis
    (``_one_output``: the regressor's ``coef_`` is (n_features,), the classifier's
    (n_models, n_features)).
    """

    _parameter_constraints: dict = {
        "n_features_to_select": [
            None,
            int_range(1),
            real_range(0, 1, closed="right"),
            StrOptions({"auto"}),
        ],
        "tol": [None, real_range(0)],
        "validation_fraction": [None, real_range(0, 1, closed="neither")],
        "n_iter_no_change": [None, int_range(1)],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "device": DEVICE_CONSTRAINT,
        "dtype": [StrOptions({"float64", "float32"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def _max_rounds(self, budget, n_features: int) -> int:
        """The number of rounds the fit's ``FeatureBudget`` allows."""
        # "auto" with tol: until a round does not lower the watched cost by more than tol;
        # "auto" without: half of the columns (scikit-learn's "auto"); None: every column
        # a k above n_features was cut to n_features, with a warning, by feature_budget
        return n_features if budget.k is None else min(budget.k, n_features)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self,
        X,
        y,
        sample_weight=None,
        eval_set=None,
        sample_weight_eval_set=None,
        X_val=None,
        y_val=None,
        sample_weight_val=None,
    ):
        """Run the stagewise rounds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            numpy, pandas, cupy, cudf, polars or pyarrow. NaN marks a missing value: a
            column with some is filled with its weighted mean and fitted with a missing
            offset of its own (``missing_coef_``; ``docs/guide/stagewise.rst``).
        y : array-like of shape (n_samples,)
            Target values (regressor) or class labels, at least two classes (classifier).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights.
        eval_set : tuple (X_val, y_val) or list of such tuples, default=None
            Validation data. Every pair's cost after each round is kept in ``evals_result_``;
            the LAST pair is the one ``validation_cost_history_`` and early stopping
            (``n_iter_no_change``) watch. Cannot be combined with ``validation_fraction``.
        sample_weight_eval_set : list of array-like, default=None
            One weight array (or None) per ``eval_set`` pair.
        X_val, y_val, sample_weight_val : deprecated
            Use ``eval_set=(X_val, y_val)`` and ``sample_weight_eval_set=[sample_weight_val]``.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        eval_set, sample_weight_eval_set = _deprecated_validation_keywords(
            X_val, y_val, sample_weight_val, eval_set, sample_weight_eval_set
        )
        return self._fit(X, y, sample_weight, eval_set, sample_weight_eval_set)

    def _fit(self, X, y, sample_weight, eval_set, sample_weight_eval_set):
        from tqdm.auto import tqdm

        self._check_validation_params(eval_set)
        dtype = np.dtype(self.dtype)
        data = self._prepare_fit(X, y, sample_weight, dtype=dtype, allow_nan=True)
        xp, device, Xa = data.xp, data.device, data.X
        n, d = Xa.shape
        # numeric columns with missing values (docs/guide/stagewise.rst): filled with their
        # weighted mean of the training rows, plus a missing offset fitted with the column
        holes = xp.isnan(Xa).any(axis=0)
        holes[xp.asarray(self.is_categorical_)] = False
        miss_cols = [int(f) for f in np.flatnonzero(to_host(holes))]
        miss_mask = {f: xp.isnan(Xa[:, f]) for f in miss_cols}
        if miss_cols:
            Xa = Xa.copy()  # the user's array is never written
        # categorical columns: their codes apart, zeros in X (constant: never a numeric
        # candidate); X is the door's fresh encoding then, not the user's array
        cat_cols = np.flatnonzero(self.is_categorical_)
        n_codes = {int(f): self.category_codes_.n_codes[int(f)] for f in cat_cols}
        cat_idx = {}
        for f in cat_cols:
            cat_idx[int(f)] = _category_index(Xa[:, int(f)], n_codes[int(f)], xp)
            Xa[:, int(f)] = 0
        # columns of extreme magnitude are fitted scaled by 2**-e (exact: the same bits of
        # every standardized quantity) and the model is put back in X's units at the end
        col_exp = _column_exponents(Xa, xp)
        if col_exp.any():
            Xa = _scale_columns(Xa, col_exp, xp)
        budget = feature_budget(self.n_features_to_select, self.tol, d)
        max_rounds = self._max_rounds(budget, d)
        stage = self._stage_loss()
        _scales.check_target_scale(self, data.y, data.sample_weight)
        Y = stage.targets(data.y, xp)  # (n, K) float64
        w = (
            xp.ones(n, dtype=xp.float64)
            if data.sample_weight is None
            else xp.asarray(data.sample_weight, dtype=xp.float64)
        )
        evals = [
            (
                Xv,
                stage.targets(yv, xp),
                xp.ones(Xv.shape[0], dtype=xp.float64) if wv is None else wv,
            )
            for Xv, yv, wv in self._eval_sets(
                eval_set, sample_weight_eval_set, data, dtype=dtype, allow_nan=True
            )
        ]
        eval_idx = []
        for Xv, _, _ in evals:
            eval_idx.append({f: _category_index(Xv[:, f], n, xp) for f, n in n_codes.items()})
            for f in n_codes:
                Xv[:, f] = 0
        if col_exp.any():
            evals = [(_scale_columns(Xv, col_exp, xp), Yv, wv) for Xv, Yv, wv in evals]
        if self.validation_fraction is not None:
            # Held-out rows get zero training weight, so the training matrix is never copied.
            val = xp.asarray(self._validation_rows(data)[1])
            evals = [(Xa[val], Y[val], w[val])]
            eval_idx = [{f: ix[val] for f, ix in cat_idx.items()}]
            w = w.copy()
            w[val] = 0.0
        # the missing rule: each column's fill value is its weighted mean over the observed
        # training rows (the filled column keeps that mean, so its standardized value is 0
        # on a missing row); the missing offset's index: 0 on a missing row, 1 (a slot of
        # weight 0) on the others
        miss_idx, fill = {}, np.zeros(d)
        for f in miss_cols:
            obs = ~miss_mask[f]
            wo = w * obs
            W_obs = float(wo.sum())
            fill[f] = (
                float(wo @ xp.where(obs, Xa[:, f], 0).astype(xp.float64)) / W_obs
                if W_obs > 0
                else 0.0
            )
            Xa[:, f] = xp.where(obs, Xa[:, f], xp.asarray(fill[f], dtype=Xa.dtype))
            miss_idx[f] = xp.where(obs, 1, 0).astype(xp.int64)
        W = float(w.sum())
        if not W > 0:
            raise ValueError(
                "The training rows have zero total sample_weight; at least one "
                "training row needs weight > 0."
            )
        eval_W = [float(wv.sum()) for _, _, wv in evals]
        if any(not Wv > 0 for Wv in eval_W):
            raise ValueError("The validation rows have zero total sample weight.")
        constant_y = _constant_target(Y, w, xp)

        mean, std, inv_std = _standardize_stats(Xa, w, W, xp, device)
        # a validation row's missing value counts at the training mean (standardized 0)
        eval_miss = [_fill_missing(Xv, to_host(mean), miss_cols, xp) for Xv, _, _ in evals]
        bias = stage.bias(Y, w, W, xp)  # (K,) float64
        K = Y.shape[1]
        F = xp.broadcast_to(bias[None, :], (n, K)).copy()
        eval_F = [xp.broadcast_to(bias[None, :], (Xv.shape[0], K)).copy() for Xv, _, _ in evals]

        active = inv_std > 0  # constant: never selectable
        for f, n_f in n_codes.items():
            active[f] = n_f > 0
        for f in miss_cols:  # holes and observed values on weighted rows: the offset
            on = w > 0  # can move the missing rows even when the rest is constant
            active[f] = bool(active[f]) or (
                bool((miss_mask[f] & on).any()) and bool((~miss_mask[f] & on).any())
            )
        # a categorical column is ranked by its cross-fitted cost (``_category_heldout_cost``:
        # its training cost favours many categories), added with its fit on every row
        folds = _category_folds(n, xp) if n_codes else None
        cat_coef, miss_coef = {}, {}
        coef_std = np.zeros((K, d), dtype=np.float64)
        costs = [stage.cost(F, Y, w, W, xp)]
        eval_costs = [
            [stage.cost(Fv, Yv, wv, Wv, xp)] for Fv, (_, Yv, wv), Wv in zip(eval_F, evals, eval_W)
        ]
        stopper = EarlyStopping(self.n_iter_no_change)
        if evals:
            stopper.start(eval_costs[-1][0])
        weights_hist = [coef_std.copy()]
        selected = []
        stopped_early = False
        fitted_exactly = False
        auto = budget.needs_auto_fit
        cut = None

        with tqdm(
            total=max_rounds, disable=not self.verbose, desc=type(self).__name__, unit="feature"
        ) as bar:
            for _ in range(max_rounds):
                if constant_y or not bool(active.any()):
                    break
                a, cand_cost = stage.candidates(Xa, F, Y, w, W, mean, inv_std, active, xp, device)
                total = cand_cost.sum(axis=0)
                groups, held = {}, {}
                for f in n_codes:  # a categorical column: its group fit's cost instead
                    if bool(active[f]):
                        groups[f] = _category_candidates(
                            stage, cat_idx[f], n_codes[f], F, Y, w, W, xp
                        )
                        total[f] = groups[f][1]
                        held[f] = _category_heldout_cost(
                            stage, cat_idx[f], n_codes[f], F, Y, w, W, folds, xp
                        )
                offsets = {}
                for f in miss_cols:  # the column's weight and its missing offset together:
                    if bool(active[f]):  # they move disjoint rows, so their gains add
                        offsets[f] = _category_candidates(stage, miss_idx[f], 1, F, Y, w, W, xp)
                        total[f] = total[f] + offsets[f][1] - costs[-1]
                total = xp.where(active, total, xp.inf)
                rank = total
                if held:  # the round's choice; its training cost (total) still ends the path
                    rank = total.copy()
                    for f, c in held.items():
                        rank[f] = c
                j = int(xp.argmin(rank))
                new_cost = float(total[j])
                if costs[-1] - new_cost <= _NO_GAIN * costs[0]:
                    fitted_exactly = True  # a feature would get a weight of rounding noise
                    break
                if not auto and self.tol is not None and costs[-1] - new_cost < self.tol:
                    break
                if j in groups:
                    a_c = groups[j][0]  # (K, n_codes + 1)
                    F += a_c[xp.arange(K)[None, :], cat_idx[j][:, None]]
                    cat_coef[j] = to_host(a_c[:, :-1]).astype(np.float64)
                    a_j = np.zeros(K)
                else:
                    a_j = to_host(a[:, j]).astype(np.float64)
                    F += _column(Xa, j, mean, inv_std)[:, None] * xp.asarray(a_j)[None, :]
                if j in offsets:
                    F += offsets[j][0][xp.arange(K)[None, :], miss_idx[j][:, None]]
                    miss_coef[j] = to_host(offsets[j][0][:, 0]).astype(np.float64)
                active[j] = False
                selected.append(j)
                coef_std[:, j] = a_j
                weights_hist.append(coef_std.copy())
                # The evaluated cost of the new model (not the candidate's: equal up to rounding).
                costs.append(stage.cost(F, Y, w, W, xp))
                bar.update(1)
                bar.set_postfix(cost=f"{costs[-1]:.6g}")
                for Fv, (Xv, Yv, wv), Wv, ec, ix, mx in zip(
                    eval_F, evals, eval_W, eval_costs, eval_idx, eval_miss
                ):
                    if j in groups:
                        Fv += groups[j][0][xp.arange(K)[None, :], ix[j][:, None]]
                    else:
                        Fv += _column(Xv, j, mean, inv_std)[:, None] * xp.asarray(a_j)[None, :]
                    if j in offsets:
                        Fv += offsets[j][0][xp.arange(K)[None, :], mx[j][:, None]]
                    ec.append(stage.cost(Fv, Yv, wv, Wv, xp))
                if evals and stopper.update(eval_costs[-1][-1]):
                    stopped_early = True
                    break
                watched = eval_costs[-1] if evals else costs
                if auto and len(selected) >= 2 and watched[-2] - watched[-1] <= self.tol:
                    cut = len(selected) - 1  # that round's feature is not kept
                    break

        if stopped_early or cut is not None:
            keep = stopper.best_round if stopped_early else cut
            for j in selected[keep:]:
                coef_std[:, j] = 0.0
                cat_coef.pop(j, None)
                miss_coef.pop(j, None)
            selected = selected[:keep]
            costs = costs[: keep + 1]
            eval_costs = [ec[: keep + 1] for ec in eval_costs]
            weights_hist = weights_hist[: keep + 1]
        elif (
            isinstance(self.n_features_to_select, numbers.Integral)
            and selected
            and len(selected) < max_rounds
            and self.tol is None
        ):
            why = (
                "the model fits the training data, so a further feature lowers the "
                "training cost by nothing"
                if fitted_exactly
                else "the others are constant"
            )
            warn_from_caller(
                f"Only {len(selected)} of the requested {max_rounds} features could "
                f"be selected: {why}.",
                UserWarning,
            )

        if not selected:
            why = (
                "the target is constant (on the rows of positive weight), so no feature can "
                "lower the training cost"
                if constant_y
                else "the validation cost never improved on the bias alone"
                if stopped_early
                else f"the first round lowered the training cost by less than tol={self.tol:g}"
                if self.tol is not None and bool(active.any())
                else "every feature is constant"
            )
            advice = (
                ""
                if constant_y
                else " Set n_features_to_select to the number of "
                "features you want, or a smaller tol."
            )
            warn_from_caller(f"no feature was selected: {why}.{advice}", UserWarning)
        self.device_ = device
        self.mean_ = np.ldexp(to_host(mean).astype(np.float64), col_exp)  # in X's units
        self.std_ = np.ldexp(to_host(std).astype(np.float64), col_exp)
        with np.errstate(over="ignore"):  # a subnormal column: refused by _check_raw_units
            inv = np.ldexp(to_host(inv_std).astype(np.float64), -col_exp)
        self._set_support(selected)
        self.cost_history_ = np.asarray(costs, dtype=np.float64)
        self.evals_result_ = [np.asarray(ec, dtype=np.float64) for ec in eval_costs]
        self.validation_cost_history_ = self.evals_result_[-1] if evals else None
        bias_h = to_host(bias).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            coef = np.where(coef_std == 0, 0.0, coef_std * inv[None, :])
            intercept = bias_h - coef @ self.mean_
        _check_raw_units(coef, intercept)
        hist = np.stack(weights_hist)
        if self._one_output:  # a regressor's attributes have no model axis
            coef_std, bias_h, coef, intercept, hist = (
                coef_std[0],
                float(bias_h[0]),
                coef[0],
                float(intercept[0]),
                hist[:, 0, :],
            )
        self.standardized_coef_, self.bias_, self.coef_ = coef_std, bias_h, coef
        self.intercept_, self.weights_history_ = intercept, hist
        # {column: weights per category} in coef_'s layout, selected categorical columns only
        self.category_coef_ = {
            int(f): (a[0] if self._one_output else a) for f, a in cat_coef.items()
        }
        # {column: the offset added on its missing rows}, selected columns with holes in fit
        self.missing_coef_ = {
            int(f): (float(a[0]) if self._one_output else a) for f, a in sorted(miss_coef.items())
        }
        self._set_selection_path(
            selection_path(self), entry_round=list(range(1, len(selected) + 1))
        )
        return self

    # -- prediction ---------------------------------------------------------------------------

    def _raw_margin(self, X):
        """X (n, n_features) raw -> (margins (n, n_models) float64 on X's device, xp)."""
        check_is_fitted(self, "selected_features_")
        device = input_device(X)
        xp = get_namespace(device)
        Xa = check_X(self, X, device=device, reset=False, allow_nan=True)
        is_cat = self.is_categorical_
        sel = np.asarray([f for f in self.selected_features_ if not is_cat[f]], dtype=np.int64)
        coef = np.atleast_2d(self.coef_)  # (K, d) host
        out = xp.broadcast_to(
            xp.asarray(np.atleast_1d(self.intercept_))[None, :], (Xa.shape[0], coef.shape[0])
        ).copy()
        if sel.size:
            Xs = Xa[:, xp.asarray(sel)]
            holes = xp.isnan(Xs)
            if bool(holes.any()):  # a missing value: the column's mean (docs' rule)
                Xs = xp.where(holes, xp.asarray(self.mean_[sel], dtype=Xs.dtype)[None, :], Xs)
            out += Xs @ xp.asarray(coef[:, sel].T)
        for f, a in sorted(getattr(self, "missing_coef_", {}).items()):
            col = Xa[:, f]
            out += xp.where(xp.isnan(col)[:, None], xp.asarray(np.atleast_1d(a))[None, :], 0.0)
        # a selected categorical column, in column order (a loaded model's dict is sorted:
        # the same order of additions, the same bits)
        for f, a in sorted(self._category_coef_2d().items()):
            n_f = a.shape[1]
            pad = xp.asarray(np.concatenate([a, np.zeros((a.shape[0], 1))], axis=1))
            idx = _category_index(Xa[:, f], n_f, xp)
            out += pad[xp.arange(a.shape[0])[None, :], idx[:, None]]
        return out, xp

    def _feature_scores(self):
        """One score per feature (0 for the unselected), summed over the models: a numeric
        column's |weight| on the standardized scale (the spread of its share of the margin);
        a categorical column's spread of its category weights, the root mean square about
        their mean (what |weight| is for a column of equally frequent categories). The CLI
        prints them."""
        score = np.abs(np.atleast_2d(np.asarray(self.standardized_coef_, dtype=np.float64))).sum(
            axis=0
        )
        for f, a in self._category_coef_2d().items():
            centered = a - a.mean(axis=1, keepdims=True)
            score[f] = float(np.sqrt((centered**2).mean(axis=1)).sum())
        return score

    def _category_coef_2d(self):
        return {f: np.atleast_2d(a) for f, a in getattr(self, "category_coef_", {}).items()}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = False
        return tags


_COMMON_PARAMS = """
    n_features_to_select : int >= 1, float in (0, 1], "auto" or None, default=None
        Rounds to run = features to select (a float is a fraction of the features). None: until
        every non-constant feature is used, unless ``tol`` or early stopping stops earlier.
        "auto" with ``tol``: the first feature, then one per round while the round lowers the
        validation cost (the training cost without validation data) by more than ``tol``
        (scikit-learn's ``SequentialFeatureSelector`` rule); "auto" without ``tol``: half of
        the features.
    tol : float >= 0 or None, default=None
        Stop when a round lowers the training cost by less than ``tol``; that round's feature
        is not added. With "auto": the least decrease of the watched cost, as above.
    validation_fraction : float in (0, 1) or None, default=None
        Hold out this fraction of the rows (stratified by class for the classifier; they get
        zero training weight, so X is not copied) as the validation set. Cannot be combined
        with ``eval_set``.
    n_iter_no_change : int >= 1 or None, default=None
        Stop when the validation cost has not improved for this many rounds and cut the model
        back to its best round. Needs ``eval_set`` or ``validation_fraction``.
    categorical_features : "from_dtype", array-like of str or int, bool mask or None, \
            default="from_dtype"
        The categorical columns ("from_dtype": those of a categorical or string dtype of a
        table; else names, indices or a boolean mask; None: none). Each is one-hot encoded
        internally and selected or dropped as one group (``docs/module_notes.rst``); a round
        ranks it by its 5-fold cross-fitted cost, so a many-level noise column does not win
        over a real signal by its many weights; missing values are allowed in them. A column
        chosen by dtype with a value of its own on most rows (a name, an id:
        ``gpufs.data._identifiers``) is refused; named, it is used with a warning.
    device : {"auto", "cpu", "gpu"}, default="auto"
        Where ``fit`` computes ("auto": the GPU when one is usable). ``predict`` and
        ``transform`` compute where their input lives (cupy in, cupy out).
    dtype : {"float64", "float32"}, default="float64"
        Dtype X is held in during ``fit``.
    random_state : int, RandomState instance or None, default=None
        Seed of the ``validation_fraction`` split."""

_COMMON_ATTRIBUTES = """
    selected_features_ : ndarray of shape (n_selected,), int64
        Feature indices in the order they were selected.
    selected_feature_names_ : ndarray of shape (n_selected,), object
        Their names.
    selection_path_ : dict
        The features in the order they entered: "k" (1, 2, ...), "features" (indices),
        "names", "entry_round" (the round that added each), "train_loss" and "val_loss" (the
        costs after that round; None without validation data), as ``gpufs.path`` reads them.
    support_ : ndarray of shape (n_features,), bool
        Mask of the selected features.
    mean_, std_ : ndarray of shape (n_features,), float64
        Standardization; ``std_ == 0`` marks a constant (never selectable) feature.
    cost_history_ : ndarray of shape (n_selected + 1,), float64
        Training cost after each round; entry 0 is the bias alone.
    validation_cost_history_ : ndarray of shape (n_selected + 1,), float64, or None
        The same on the watched validation set, when there is one.
    evals_result_ : list of ndarray of shape (n_selected + 1,), float64
        The cost of every validation set after each round (empty without validation data).
    category_coef_ : dict of int -> ndarray
        The weight of every category of each selected categorical column (in ``coef_``'s
        layout per category; ``coef_`` holds 0 for those columns).
    missing_coef_ : dict of int -> float (regressor) or ndarray of shape (n_models,)
        For each selected numeric column that had missing values in fit: the margin added
        on a row where it is missing (where the column itself counts at its mean,
        ``mean_``). Selected, dropped and counted with its column; a column without missing
        values in fit counts at its mean on a missing row, with no offset.
    device_ : str
        "cpu" or "gpu", where fit ran.
""" + INPUT_ATTRIBUTES_DOC.rstrip("\n")


class StagewiseRegressor(RegressorTargetMixin, RegressorMixin, _StagewiseBase):
    __doc__ = (
        """Forward stagewise (linear boosting) feature selection with the least-squares
    cost.

    Each round adds the one feature whose single weight, fitted with all earlier weights
    fixed, lowers the weighted mean squared error most (Watt, Borhani, Katsaggelos, "Machine
    Learning Refined", 2nd ed., section 9.6).

    Parameters
    ----------"""
        + _COMMON_PARAMS
        + """
    verbose : int or bool, default=0
        Show a progress bar over the rounds.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,), float64
        Weights in raw-input units (zero for unselected features).
    intercept_ : float
        Intercept in raw-input units: ``predict(X) = X @ coef_ + intercept_``.
    standardized_coef_ : ndarray of shape (n_features,), float64
        Weights on the standardized features (what the rounds fit).
    bias_ : float
        Round-0 bias (weighted mean of y).
    weights_history_ : ndarray of shape (n_selected + 1, n_features), float64
        Standardized weights after each round (row 0: all zero)."""
        + _COMMON_ATTRIBUTES
        + """

    Examples
    --------
    >>> import numpy as np
    >>> from gpufs import StagewiseRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 4))
    >>> y = 3 * X[:, 2] + X[:, 0]
    >>> StagewiseRegressor(2, device="cpu").fit(X, y).selected_features_.tolist()
    [2, 0]
    """
    )

    _parameter_constraints = dict(_StagewiseBase._parameter_constraints)

    def __init__(
        self,
        n_features_to_select=None,
        *,
        tol=None,
        validation_fraction=None,
        n_iter_no_change=None,
        categorical_features="from_dtype",
        device="auto",
        dtype="float64",
        random_state=None,
        verbose=0,
    ):
        self.n_features_to_select = n_features_to_select
        self.tol = tol
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.categorical_features = categorical_features
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def predict(self, X):
        """Predicted values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw (not standardized) data.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), float64
            cupy for cupy input.
        """
        out, _ = self._raw_margin(X)
        return out[:, 0]

    _one_output = True

    def _stage_loss(self):
        return LeastSquaresStage()


class StagewiseClassifier(ClassifierTargetMixin, ClassifierMixin, _StagewiseBase):
    __doc__ = (
        """Forward stagewise (linear boosting) feature selection with the logistic cost.

    Two classes: one logistic model (two-class softmax cost) for ``classes_[1]``. More classes:
    one-vs-rest, one logistic path per class, with ONE SHARED selected set: each round every
    class fits its own weight on every candidate and the feature with the lowest summed
    one-vs-rest cost is added for all classes. Each one-weight problem is solved by Newton's
    method safeguarded by bisection (Watt, Borhani, Katsaggelos, "Machine Learning Refined",
    2nd ed., section 9.6; see ``docs/module_notes.rst``).

    Parameters
    ----------"""
        + _COMMON_PARAMS
        + """
    max_newton_iter : int >= 1, default=20
        Newton passes per round at most (one sweep over X each, plus one sweep for the costs).
    newton_tol : float > 0, default=1e-8
        Newton stops when every candidate's step is below ``newton_tol * (1 + |a|)``.
    verbose : int or bool, default=0
        Show a progress bar over the rounds.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    coef_ : ndarray of shape (1, n_features) for two classes, else (n_classes,
        n_features), float64
        Weights in raw-input units.
    intercept_ : ndarray of shape (1,) or (n_classes,), float64
        Intercepts in raw-input units.
    standardized_coef_ : ndarray of the shape of ``coef_``, float64
        Weights on the standardized features.
    bias_ : ndarray of shape (1,) or (n_classes,), float64
        Round-0 biases.
    weights_history_ : ndarray of shape (n_selected + 1, n_models, n_features), float64
        Standardized weights after each round; n_models = 1 for two classes, n_classes
        otherwise."""
        + _COMMON_ATTRIBUTES
        + """
    """
    )

    _parameter_constraints = {
        **_StagewiseBase._parameter_constraints,
        "max_newton_iter": [int_range(1)],
        "newton_tol": [real_range(0, closed="neither")],
    }

    def __init__(
        self,
        n_features_to_select=None,
        *,
        tol=None,
        validation_fraction=None,
        n_iter_no_change=None,
        max_newton_iter=20,
        newton_tol=1e-8,
        categorical_features="from_dtype",
        device="auto",
        dtype="float64",
        random_state=None,
        verbose=0,
    ):
        self.n_features_to_select = n_features_to_select
        self.tol = tol
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.categorical_features = categorical_features
        self.max_newton_iter = max_newton_iter
        self.newton_tol = newton_tol
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def decision_function(self, X):
        """Margins.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes (positive favours
            ``classes_[1]``), else (n_samples, n_classes); float64, cupy for cupy input.
        """
        out, _ = self._raw_margin(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict_proba(self, X):
        """Class probabilities.

        Two classes: the logistic probability. More: the one-vs-rest sigmoids normalized to
        sum 1 (as scikit-learn's one-vs-rest models).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), float64
            cupy for cupy input.
        """
        out, xp = self._raw_margin(X)
        p = sigmoid(out)
        if out.shape[1] == 1:
            return xp.concatenate([1.0 - p, p], axis=1)
        s = p.sum(axis=1, keepdims=True)
        # All sigmoids may underflow to 0 far from the data: fall back to uniform there.
        return xp.where(s > 0, p / xp.where(s > 0, s, 1.0), 1.0 / out.shape[1])

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_`` (a cupy array for cupy input when labels are numeric).
        """
        out, xp = self._raw_margin(X)
        idx = (out[:, 0] > 0).astype(xp.int64) if out.shape[1] == 1 else xp.argmax(out, axis=1)
        return self._decode_classes(idx)

    _one_output = False

    def _stage_loss(self):
        return LogisticStage(len(self.classes_), self.max_newton_iter, self.newton_tol)


def _fill_missing(Xv, fill, miss_cols, xp):
    """Fill the missing values of an evaluation matrix (in place, its own copy) with the
    training rule: ``fill[f]`` in every column. Returns the missing offsets' row index of
    the columns of ``miss_cols`` (0 missing, 1 not)."""
    idx = {}
    holes = xp.isnan(Xv)
    for f in miss_cols:
        idx[f] = xp.where(holes[:, f], 0, 1).astype(xp.int64)
    if bool(holes.any()):
        Xv[...] = xp.where(holes, xp.asarray(fill, dtype=Xv.dtype)[None, :], Xv)
    return idx


# the model files' codec of this family (gpufs.io.model_io finds it by class)
model_io.register_codec(StagewiseCodec, StagewiseRegressor, StagewiseClassifier)
