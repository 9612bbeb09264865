"""Gradient Boosted Feature Selection: ``GBFSClassifier`` and ``GBFSRegressor``.

Owns the scikit-learn face of gradient boosted feature selection (Xu, Huang, Weinberger,
Zheng, "Gradient Boosted Feature Selection", KDD 2014) and of its root-SSE scaled variant A-GBM
(Han, Rao, Sorokina, Subbian, "Scalable Feature Selection for (Multitask) Gradient Boosted
Trees", AISTATS 2020): the fit pipeline (input door -> bins -> boosting with the penalty ->
selection record) and prediction on whichever device the input lives on. Parameters, target
encoding and validation data come from the shared selector base (``selectors._base``); the
penalty rule is documented and implemented in ``gpufs.engine.penalties``, the trees in
``gpufs.engine.grower`` and the rounds in ``gpufs.engine.boosting``.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .._device import to_host
from .._docstrings import INPUT_ATTRIBUTES_DOC, TREE_CATEGORICAL_FEATURES_DOC
from .._params import N_JOBS_CONSTRAINT
from .._threading import honours_n_jobs
from .._warnings import SelectionWarning, warn_from_caller
from ..backends import get_backend
from ..cli._compile_watch import clock, compile_seconds
from ..data import _scales
from ..data._input import check_costs, check_groups, check_X
from ..data._warm_key import data_fingerprint
from ..engine.binning import BinMapper
from ..engine.boosting import BoostingParams, DeviceRows
from ..engine.group_testing import GroupTestSearch, pseudo_features_per_tree, standardize
from ..engine.grower import TreeParams
from ..engine.penalties import PENALTY_SCALINGS
from ..engine.tree import TreeEnsemble
from ..io import model_io
from ..path import gbfs_record_path, selection_path
from ._base import (
    DEVICE_CONSTRAINT,
    ClassifierTargetMixin,
    RegressorTargetMixin,
    SelectorBase,
    auto_k,
    feature_budget,
    input_device,
    int_range,
    real_range,
)
from ._boost_setup import BoostSetup
from ._boosted import (
    BOOSTING_CONSTRAINTS,
    BoostedClassifierMixin,
    BoostedRegressorMixin,
    cat_guards,
)
from ._exact_k import fill_candidates, fit_exact_k, heldout_folds, pool_size, total_gains
from ._gbfs_io import GBFSCodec
from ._mu_search import known_outcomes
from ._stability import selection_frequency

__all__ = ["GBFSClassifier", "GBFSRegressor"]

#: GT-GBM's desired number of features when neither ``gt_s`` nor ``n_features_to_select``
#: is given.
GT_DEFAULT_S = 10


class _BaseGBFS(SelectorBase):
    """Shared fit/predict machinery; see GBFSClassifier for the parameters."""

    _parameter_constraints: dict = {
        "mu": [real_range(0)],
        "penalty_scaling": [StrOptions(set(PENALTY_SCALINGS))],
        "feature_costs": ["array-like", None],
        "feature_groups": ["array-like", None],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "n_features_to_select": [
            int_range(1),
            real_range(0, 1, closed="right"),
            StrOptions({"auto"}),
            None,
        ],
        "tol": [real_range(0), None],
        "stability_rounds": [int_range(0)],
        "pool_ranking": [StrOptions({"heldout", "gain"})],
        "split_search": [StrOptions({"exact", "group_testing"})],
        "gt_s": [int_range(1), None],
        "gt_delta": [real_range(0, 1, closed="neither")],
        "gt_subsets": [StrOptions({"per_tree", "per_fit"})],
        **BOOSTING_CONSTRAINTS,
        "validation_fraction": [real_range(0, 1, closed="neither"), None],
        "n_iter_no_change": [int_range(1), None],
        "warm_start": ["boolean"],
        "device": DEVICE_CONSTRAINT,
        "n_jobs": N_JOBS_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        mu=0.05,
        penalty_scaling="root_sse",
        feature_costs=None,
        feature_groups=None,
        categorical_features="from_dtype",
        n_features_to_select=None,
        tol=None,
        stability_rounds=0,
        pool_ranking="heldout",
        split_search="exact",
        gt_s=None,
        gt_delta=0.05,
        gt_subsets="per_tree",
        n_estimators=100,
        learning_rate=0.1,
        max_depth=4,
        max_bins=255,
        reg_lambda=1.0,
        min_child_weight=1e-3,
        min_split_gain=0.0,
        hessian=True,
        cat_smooth=10.0,
        cat_l2=10.0,
        min_data_per_group=20,
        max_cat_threshold=32,
        validation_fraction=None,
        n_iter_no_change=None,
        warm_start=False,
        device="auto",
        n_jobs=None,
        random_state=None,
        verbose=False,
    ):
        self.mu = mu
        self.penalty_scaling = penalty_scaling
        self.feature_costs = feature_costs
        self.feature_groups = feature_groups
        self.categorical_features = categorical_features
        self.n_features_to_select = n_features_to_select
        self.tol = tol
        self.stability_rounds = stability_rounds
        self.pool_ranking = pool_ranking
        self.split_search = split_search
        self.gt_s = gt_s
        self.gt_delta = gt_delta
        self.gt_subsets = gt_subsets
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_bins = max_bins
        self.reg_lambda = reg_lambda
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.cat_smooth = cat_smooth
        self.cat_l2 = cat_l2
        self.min_data_per_group = min_data_per_group
        self.max_cat_threshold = max_cat_threshold
        self.hessian = hessian
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # --- fit ----------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    @honours_n_jobs
    def fit(self, X, y, sample_weight=None, eval_set=None, sample_weight_eval_set=None):
        """Fit the penalized boosted ensemble and record the features it selects.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            numpy, pandas, cupy, cudf, polars or pyarrow. NaN marks a missing value.
        y : array-like of shape (n_samples,)
            Target values (regression) or class labels (classification).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights; rows of weight 0 place no bin edges. Weights multiply
            every row's gradient and hessian, so they set the scale ``reg_lambda`` and
            ``min_child_weight`` are compared with (the defaults suit weights of mean about
            1): weights times c with reg_lambda and min_child_weight times c give the same
            model. A scale that leaves no split possible or lets reg_lambda swamp the leaves
            warns; one that would overflow the gain sums is refused.
        eval_set : tuple (X_val, y_val) or list of such tuples, default=None
            Validation data. Every pair's loss after each round is kept in
            ``evals_result_``; the LAST pair is the one the selection record's validation
            loss and early stopping (``n_iter_no_change``) watch, as in XGBoost. Cannot be
            combined with ``validation_fraction``.
        sample_weight_eval_set : list of array-like of shape (n_val_samples,), default=None
            One weight array (or None) per ``eval_set`` pair.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._check_validation_params(eval_set)
        compiled = compile_seconds()  # the phases of fit_times_ leave compilation out
        X_input = X
        data = self._prepare_fit(X, y, sample_weight)
        d = data.X.shape[1]
        budget = feature_budget(self.n_features_to_select, self.tol, d)  # warns of k > d now
        backend, xp = data.backend, data.xp
        costs = check_costs(self.feature_costs, d)
        groups = check_groups(self.feature_groups, d)
        self._objective = self._make_objective()
        X, y, w = data.X, self._boosting_target(data.y), data.sample_weight
        _scales.check_boosting_scales(self, y, w)
        evals = [
            (Xv, self._boosting_target(yv), wv)
            for Xv, yv, wv in self._eval_sets(eval_set, sample_weight_eval_set, data)
        ]
        if self.validation_fraction is not None:
            tr, va = (xp.asarray(r) for r in self._validation_rows(data))
            evals = [(X[va], y[va], None if w is None else w[va])]
            X, y, w = X[tr], y[tr], (None if w is None else w[tr])

        # warm_start on the same data and parameters (all but n_features_to_select and tol):
        # the cut points and the outcomes of earlier mu probes are reused.
        key = self._warm_key(X_input, data) if self.warm_start else None
        warm = key is not None and getattr(self, "_warm_key_", None) == key
        history = list(getattr(self, "_mu_history_", [])) if warm else []
        t0 = clock()
        if not warm:
            # Rows of weight 0 are not training data: they must not place cut points.
            self.bin_mapper_ = BinMapper(self.max_bins, random_state=data.seed).fit(
                X if w is None or bool((w > 0).all()) else X[w > 0], categories=self.category_codes_
            )
        rows = DeviceRows(backend, self.bin_mapper_.transform(X, backend), y, w)
        evals = [
            DeviceRows(backend, self.bin_mapper_.transform(Xv, backend), yv, wv)
            for Xv, yv, wv in evals
        ]
        times = {"bin": clock() - t0, "mu_search": 0.0}
        # GT-GBM's candidate search; its desired number of features defaults to k
        gt = self._group_test_search(X, w, d, budget.asked, data.seed, backend, times)
        self._fit_binned(
            backend,
            rows,
            evals,
            costs,
            groups,
            times,
            warm=(key, history),
            gt=gt,
            seed=data.seed,
            budget=budget,
        )
        times["compile"] = compile_seconds() - compiled
        return self

    def _fit_binned(
        self,
        backend,
        rows,
        evals,
        costs,
        groups,
        times,
        *,
        warm=(None, ()),
        gt=None,
        seed=0,
        budget=None,
    ):
        """The fit from binned data on: ``n_features_to_select`` ("auto" and the ``mu``
        search), the boosting rounds, early stopping and the selection record.

        ``rows`` and ``evals`` (a list) are ``boosting.BoostingRows`` of the training and the
        validation data: arrays on the device here, a cluster's workers for ``gpufs.dask``.
        ``times`` holds the binning time; ``warm`` is ``(warm_key, history)``: ``warm_start``'s
        key of this fit and the earlier probes' outcomes (kept with the fitted model); ``gt``
        GT-GBM's candidate search (``_group_test_search``) or None; ``seed`` the fit's seed
        (``stability_rounds``' row draws); ``budget`` the fit's ``FeatureBudget`` (None:
        resolved here, for callers that have not). The fitted ``device_`` is the backend's
        (``fitted_device``).
        """
        d = int(rows.shape[1])
        times.setdefault("mu_search", 0.0)
        warm_key, history = warm[0], list(warm[1])
        device = fitted_device(backend)
        params = BoostingParams(
            n_estimators=self.n_estimators,
            tree=TreeParams(
                max_depth=self.max_depth,
                reg_lambda=float(self.reg_lambda),
                learning_rate=float(self.learning_rate),
                min_child_weight=float(self.min_child_weight),
                min_split_gain=float(self.min_split_gain),
                **cat_guards(self),
            ),
            hessian=bool(self.hessian),
            n_iter_no_change=self.n_iter_no_change,
            verbose=bool(self.verbose),
        )
        if budget is None:
            budget = feature_budget(self.n_features_to_select, self.tol, d)
        mu, mu_search, frequency = float(self.mu), None, None
        setup = BoostSetup(
            backend,
            rows,
            self._objective,
            self.bin_mapper_,
            params,
            costs,
            groups,
            self.penalty_scaling,
            gt,
        )
        k = budget.k
        if budget.needs_auto_fit:
            t0 = clock()
            k = self._auto_k(setup, mu, evals) or None
            times["auto_fit"] = clock() - t0
        gt_seconds = 0.0 if gt is None else gt.seconds
        # With k, early stopping must not end the fit before the k-th feature enters: all
        # rounds are grown, and the model is cut back to its best validation round, but not
        # to before the round where the k-th feature entered.
        keep_k = k is not None and params.n_iter_no_change is not None
        if keep_k:
            params = BoostingParams(
                n_estimators=params.n_estimators,
                tree=params.tree,
                hessian=params.hessian,
                n_iter_no_change=None,
                verbose=params.verbose,
            )
            setup = setup._replace(params=params)
        eval_rows = evals[-1] if evals else None
        pool = None
        if k is not None and not budget.needs_auto_fit:
            # exactly k by contribution: over-admit, choose, refit (selectors._exact_k)
            heldout = (
                heldout_folds(setup, seed)
                if getattr(self, "pool_ranking", "gain") == "heldout"
                else None
            )
            fit = fit_exact_k(
                setup,
                k,
                mu,
                eval_rows=eval_rows,
                known=known_outcomes(history, pool_size(k, d)),
                times=times,
                frequency=self._frequency_for(setup, seed),
                heldout=heldout,
                heldout_seed=seed,
            )
            mu_search = fit.search.as_records()
            history += mu_search
            ensemble, record, n_rounds, penalties = (
                fit.ensemble,
                fit.record,
                fit.n_rounds,
                fit.penalties,
            )
            mu, pool, frequency = fit.mu, fit.pool.as_dict(), fit.frequency
        else:
            penalties = setup.penalties(mu, k)
            t0 = clock()
            ensemble, record, n_rounds = setup.fit(penalties, eval_rows)
            times["boost"] = clock() - t0
        # the fitted attributes, set once the fit is done
        self.mu_, self.mu_search_, self.selection_pool_ = mu, mu_search, pool
        self.selection_frequency_ = frequency
        if gt is not None:
            times["group_test"] = gt.seconds - gt_seconds
        self.fit_times_ = times
        if keep_k:
            K = ensemble.n_outputs
            best = int(np.argmin(np.asarray(record.val_loss[::K]))) + 1
            entered = (
                int(penalties.first_use_tree[penalties.order[k - 1]]) // K + 1
                if len(penalties.order) >= k
                else n_rounds
            )
            n_rounds = max(best, entered)
        self._finish(_keep_rounds(ensemble, record, n_rounds, penalties, gt is not None), device)
        self.evals_result_ = self._eval_losses(evals)
        self._warm_key_, self._mu_history_ = warm_key, history
        n_sel = self.selected_features_.size
        filled = []
        if k is not None and n_sel < k:
            # Exact k means k where the table has k usable columns: the rest come from the
            # best remaining candidates (``fill_candidates``' rule), marked in
            # ``selection_filled_``.
            filled = fill_candidates(setup, self.ensemble_, self.selected_features_, k - n_sel)
            self._set_support(self.selected_features_.tolist() + filled)
        self.selection_filled_ = np.asarray(filled, dtype=np.int64)
        if n_sel == 0 and k is None:
            warn_from_caller(
                f"no feature was selected: at mu={mu:g} no split on any feature paid its price "
                f"in {n_rounds} rounds. Lower mu, or set n_features_to_select to the number of "
                "features you want.",
                SelectionWarning,
            )
        elif k is not None and n_sel < k:
            # Counted in the final fit (all rounds), not in the search's probes (half of them).
            fill = (
                f"; the selection is filled with the {len(filled)} other feature"
                f"{'s' if len(filled) != 1 else ''} of largest root-split gain on the "
                "final model's gradients (selection_filled_)"
                if filled
                else f": no other feature has a valid split; selected those {n_sel}"
            )
            warn_from_caller(
                f"only {n_sel} feature{'s' if n_sel != 1 else ''} entered the model at "
                f"mu={mu:g} in {n_rounds} rounds, fewer than n_features_to_select={k}{fill}. "
                "More rounds (n_estimators), deeper trees (max_depth) or a smaller "
                "min_child_weight let more features into the model.",
                SelectionWarning,
            )
        return self

    def _frequency_for(self, setup, seed):
        """``fit_exact_k``'s ``frequency`` for ``stability_rounds`` (None without)."""
        n_refits = int(getattr(self, "stability_rounds", 0) or 0)
        if n_refits == 0:
            return None

        def frequency(mu, k):
            return selection_frequency(setup, mu, k, n_refits, seed)

        return frequency

    def _warm_key(self, X_input, data):
        """What the bins and the mu probes depend on, for ``warm_start`` (None: nothing can
        be reused because ``random_state`` is not an int): every parameter but
        ``n_features_to_select``, ``tol``, ``verbose``, ``warm_start`` and ``n_jobs``, the
        device, and the data's fingerprint (``gpufs.data._warm_key``: every column's checksum, the
        target's and the weights', the names, dtypes and categories)."""
        if not isinstance(self.random_state, numbers.Integral):
            return None
        params = []
        for name, value in sorted(self.get_params(deep=False).items()):
            if name in ("n_features_to_select", "tol", "verbose", "warm_start", "n_jobs"):
                continue
            if value is not None and not isinstance(value, (str, numbers.Number)):
                value = tuple(np.asarray(to_host(value)).ravel().tolist())
            params.append((name, value))
        return (
            tuple(params),
            data.device,
            data_fingerprint(self, X_input, data.X, data.y, data.sample_weight),
        )

    def _auto_k(self, setup, mu, evals):
        """``n_features_to_select="auto"``: the number of features of the unbudgeted fit at
        ``mu`` that each lowered the watched loss by more than ``tol``.

        The watched loss is the selection path's (``gpufs.path``): the validation loss with
        validation data, else the training loss, of the model just before the next feature
        entered. The first feature is always kept and features are added while each lowers
        it by more than ``tol`` (scikit-learn's ``SequentialFeatureSelector`` rule); features
        that entered in one tree share its loss, so the second of them never counts as an
        improvement. The final fit then runs at the same ``mu`` with that budget. Returns that
        number (0 when no feature entered) and sets no attribute of this estimator.
        """
        pen = setup.penalties(mu)
        ensemble, record, n_rounds = setup.fit(pen, evals[-1] if evals else None)
        # the unbudgeted model's path, read from its kept rounds' record: this estimator's
        # fitted attributes are set once, by the final fit
        kept = _keep_rounds(ensemble, record, n_rounds, pen, group_tested=False)
        path = gbfs_record_path(self, kept.record)
        watched = path.val_loss if path.val_loss is not None else path.train_loss
        return auto_k(watched, float(self.tol))

    def _group_test_search(self, X, w, d, k, seed, backend, times):
        """GT-GBM's candidate search over the training rows of positive weight (the rows
        that place cut points), or None for ``split_search="exact"``."""
        if self.split_search != "group_testing":
            return None
        t0 = clock()
        s = self.gt_s if self.gt_s is not None else (k if k is not None else GT_DEFAULT_S)
        s = min(int(s), d)
        rows = None
        if w is not None and not bool((w > 0).all()):
            rows = backend.xp.asarray(np.flatnonzero(to_host(w) > 0))
        Q = standardize(X if rows is None else X[rows], backend)
        n_pseudo = pseudo_features_per_tree(d, s, float(self.gt_delta))
        if n_pseudo >= d:
            warn_from_caller(
                f"split_search='group_testing' with gt_s={s} and gt_delta={self.gt_delta:g} "
                f"scores {n_pseudo} pseudo-features per tree, not fewer than the {d} features "
                "the exact search scores: expect no speed-up. Group testing pays off when the "
                "desired number of features is much smaller than the number of features.",
                UserWarning,
            )
        times["standardize"] = clock() - t0
        return GroupTestSearch(
            Q, s, float(self.gt_delta), seed, self.max_bins, rows=rows, subsets=self.gt_subsets
        )

    def _finish(self, kept, device):
        """Set the fitted model and its selection from ``kept`` (``_keep_rounds``) and the
        fitted ``device_``."""
        self.group_test_candidates_ = kept.candidates
        self.ensemble_ = kept.ensemble
        self.n_estimators_ = kept.n_rounds
        self._set_support(kept.selected)
        self.first_use_tree_ = kept.first_use_tree
        self.selection_record_ = kept.record
        gains = total_gains(kept.ensemble)
        total = gains.sum()
        self.feature_importances_ = gains / total if total > 0 else gains
        self.device_ = device
        path = selection_path(self)
        self._set_selection_path(path, entry_tree=path.extra["entry_tree"])

    def _eval_losses(self, evals):
        """Loss of every validation pair after each kept round, a list of float64 arrays of
        shape (n_rounds,). The watched (last) pair's losses are the selection record's;
        the others are computed here, round by round, from the binned validation rows
        (``boosting.BoostingRows``)."""
        K = self.ensemble_.n_outputs
        out = []
        for i, rows in enumerate(evals):
            if i == len(evals) - 1:
                out.append(np.asarray(self.selection_record_["val_loss"][::K], dtype=np.float64))
                continue
            rows.start_raw(np.asarray(self.ensemble_.base_score, dtype=np.float64))
            losses = []
            for r in range(self.n_estimators_):
                rows.add_trees(self.ensemble_, r * K, (r + 1) * K)
                losses.append(rows.loss(self._objective))
            out.append(np.asarray(losses, dtype=np.float64))
        return out

    # --- predict ------------------------------------------------------------------------
    def _raw_predict(self, X):
        check_is_fitted(self, "ensemble_")
        device = input_device(X)
        backend = get_backend(device)
        X = check_X(self, X, device=device, reset=False)
        return self.ensemble_.predict_raw(X, backend)


def fitted_device(backend) -> str:
    """The fitted ``device_`` of a fit on ``backend``: its ``fitted_device`` where it has one
    (``gpufs.dask``'s cluster backend), else its ``name`` ("cpu" or "gpu")."""
    return getattr(backend, "fitted_device", backend.name)


class _Kept(NamedTuple):
    """A fit's first ``n_rounds`` rounds and the selection they make (``_keep_rounds``)."""

    ensemble: TreeEnsemble
    n_rounds: int
    selected: list  # in order of first use
    first_use_tree: np.ndarray  # -1 for a feature the kept trees do not use
    record: dict  # the selection record's lists, cut to the kept trees
    candidates: list | None  # GT-GBM's candidates per kept tree; None for the exact search


def _keep_rounds(ensemble, record, n_rounds, penalties, group_tested) -> _Kept:
    """The first ``n_rounds`` rounds of a fit (its ``fit_boosting`` return and penalty state)
    and the selection they make (``group_tested``: GT-GBM's candidates were searched)."""
    K = ensemble.n_outputs
    n_trees = n_rounds * K
    if n_trees < ensemble.n_trees:
        cut = TreeEnsemble(
            ensemble.max_depth,
            ensemble.n_features,
            ensemble.base_score,
            is_categorical=ensemble.is_categorical,
        )
        for t in range(n_trees):
            cut.append(ensemble.trees[t], ensemble.tree_column[t])
        ensemble = cut
    first = penalties.first_use_tree
    return _Kept(
        ensemble=ensemble,
        n_rounds=n_rounds,
        selected=[f for f in penalties.order if first[f] < n_trees],
        first_use_tree=np.where(first < n_trees, first, -1),
        record={k: v[:n_trees] for k, v in record.as_dict().items()},
        candidates=None
        if not group_tested
        else [np.asarray(c, np.int64) for c in penalties.candidates_by_tree[:n_trees]],
    )


_PARAMS_DOC = (
    """
    Parameters
    ----------
    mu : float >= 0, default=0.05
        Price of a feature's first use. A split on a feature not yet used by the ensemble
        scores ``gain / divisor - mu * cost[f]``; once used (or once any feature of its group
        is used) the feature is free.
    penalty_scaling : {"root_sse", "none"}, default="root_sse"
        "root_sse" (A-GBM of Han et al., AISTATS 2020): gains are divided by the largest gain
        any split of the tree's root could reach, so ``mu`` is a fraction in [0, 1] of the
        residual error and means the same at every round and data size. "none" (GBFS of Xu
        et al., KDD 2014): ``mu`` is in the units of the raw loss reduction.
    feature_costs : array-like of shape (n_features,), default=None
        Non-negative cost of each feature (the first use of feature f pays ``mu * cost[f]``);
        None: every feature costs 1. Positive costs lie in [1e-100, 1e100].
"""
    + TREE_CATEGORICAL_FEATURES_DOC
    + """\
    feature_groups : array-like of shape (n_features,) of int, default=None
        Group ("bag") label of each feature; all features of a group become free together.
    n_features_to_select : int >= 1, float in (0, 1], "auto" or None, default=None
        Select exactly this many features, k (a float: that fraction of the columns, at
        least one) (fewer, with a warning, only when fewer have any positive gain). ``mu`` is
        then searched: the largest price at which k features enter within the first half of
        the rounds (bisection on log mu, starting from ``mu``, on data binned once). A fit at
        that price over all rounds without a budget admits every feature that pays it (the
        pool, ``selection_pool_``); the k pool features of largest total split gain there
        (of largest ``selection_frequency_`` with ``stability_rounds``) are chosen, and the
        final fit at the same price may split on those k only. "auto" with ``tol``:
        as many features as, in the order they enter a fit at ``mu``, each lower the
        validation loss (the training loss without validation data) by more than ``tol``,
        then a fit at ``mu`` limited to them; "auto" without ``tol``: half of the columns.
        None: ``mu`` alone decides how many features enter.
    tol : float >= 0, default=None
        With ``n_features_to_select="auto"``: the least decrease of the loss a further
        feature must bring (the losses of ``selection_path_``).
    stability_rounds : int >= 0, default=0
        With ``n_features_to_select``: B refits on half of the rows each (drawn without
        replacement), at the pool's price, each choosing its k features by gain
        (stability selection, Meinshausen and Buhlmann, JRSS-B 2010). The k chosen are then
        those of the pool chosen most often (``selection_frequency_``; gain breaks ties).
        Costs B fits of half the rows; 0: no refits, ``selection_frequency_`` is None.
    pool_ranking : {"heldout", "gain"}, default="heldout"
        With ``n_features_to_select``: how the pool is ranked. "heldout": by what each pool
        feature saves on held-out rows: a ranking fit at the pool's price, on the pool's
        features only and on 70 % of the rows drawn from ``random_state`` (None: a new draw,
        so possibly another selection, at every fit), is scored on the other 30 % with
        each feature's column permuted (the loss there minus the loss as is;
        ``selection_pool_["heldout_gain"]`` and ``["heldout_se"]``), less 2 standard errors
        of that saving (a lower confidence bound; equal bounds by training gain). Where
        30 % is fewer than 10,000 rows, the ranking is cross-fitted instead: 5 ranking
        fits, each on four fifths of the rows and scored on the fifth left out, so every
        row counts once (the savings and their variances add up).
        Training split gain favours columns with many cut points (many-level categories,
        id-like integers, continuous noise), held-out savings do not (Strobl et al., BMC
        Bioinformatics 2007). It costs the ranking fit (on the pool's columns; five when
        cross-fitted) and the permutations. Where a fold's rows would weigh nothing (sample
        weights on a few rows only), the pool is ranked by gain, with a warning.
        "gain": by the total split gain of the pool
        fit (the default of 0.2.0; faster). The search, the pool fit and the final fit
        (resumed from the pool fit) run on all the rows either way. The Dask estimators
        support "gain" only. See ``docs/guide/gbfs.rst``.
    split_search : {"exact", "group_testing"}, default="exact"
        How a tree finds features not used yet. "exact": every split search scores every
        feature. "group_testing" (GT-GBM, Algorithm 2 of Han et al., AISTATS 2020): before
        each tree, ``ceil(e * gt_s * log(gt_s / gt_delta))`` random subsets of
        ``n_features // gt_s`` features are each searched by halving: the half whose summed
        min-max standardized columns (its pseudo-feature) splits the tree's gradients
        better is kept, until one feature is left. The tree's splits then use only the
        features already used and the ones the searches ended on (recorded in
        ``group_test_candidates_``), with the same penalty rule, so a tree costs
        histograms over those features only. Pays off when ``gt_s`` is much smaller than the
        number of features (a warning says when it cannot); see the user guide.
    gt_s : int >= 1, default=None
        GT-GBM's desired number of features s (subsets of ``n_features // gt_s`` features).
        None: ``n_features_to_select`` when it is set, else 10.
    gt_delta : float in (0, 1), default=0.05
        GT-GBM's delta: with the subsets drawn, every one of s relevant features lies alone
        (without another relevant feature) in some subset with probability at least
        ``1 - gt_delta`` (Theorem 4.1 of Han et al.). Smaller values draw more subsets.
    gt_subsets : {"per_tree", "per_fit"}, default="per_tree"
        "per_tree": each tree draws its own subsets, so a relevant feature that one draw
        leaves unfound gets a new chance at the next tree. "per_fit": one draw for the whole
        fit, and the first halving of every search (two thirds of the summing) is computed
        once: faster trees, but a relevant feature the draw does not isolate stays hard to
        find for the whole fit.
    n_estimators : int >= 1, default=100
        Boosting rounds (one tree per round, one per class per round for more than two
        classes).
    learning_rate : float > 0, default=0.1
        Shrinkage of every leaf value.
    max_depth : int in [1, 16], default=4
        Depth of every tree.
    max_bins : int in [2, 255], default=255
        Value bins per feature (one more bin always holds NaN).
    reg_lambda : float >= 0, default=1.0
        L2 term in the gain and the leaf values, added to a node's hessian sum (which sample
        weights scale: see ``sample_weight`` in ``fit``).
    min_child_weight : float >= 0, default=1e-3
        Smallest sum of hessians (times sample weights) in a child.
    min_split_gain : float >= 0, default=0.0
        A split is made only if its penalized score exceeds this.
    cat_smooth : float >= 0, default=10.0
        Categorical features (LightGBM's guards of a split over more than four categories,
        ``docs/guide/gbfs.rst``): only categories of at least this many rows may go left,
        and the categories are sorted by ``G / (H + reg_lambda + cat_smooth)``.
    cat_l2 : float >= 0, default=10.0
        Extra L2 term of a categorical split's children in its gain (not in the parent's:
        every categorical split's gain drops).
    min_data_per_group : float >= 0, default=20
        Least rows that join the left side of a categorical split between two scored
        candidates, and least rows on its right side.
    max_cat_threshold : int in [1, 256], default=32
        Most categories on the left side of a categorical split.
    hessian : bool, default=True
        False uses unit hessians (the papers' setting: trees fit the negative gradient by
        least squares).
    validation_fraction : float in (0, 1), default=None
        Hold out this fraction of the rows (stratified by class for the classifier) for the
        validation loss and early stopping. Cannot be combined with ``eval_set``.
    warm_start : bool, default=False
        When ``fit`` is called again on the same data with the same parameters (all but
        ``n_features_to_select`` and ``tol``, and an int ``random_state``), keep the cut
        points and what the earlier searches over ``mu`` found: a new ``n_features_to_select``
        then costs the probes its bracket still needs and the final fit. Otherwise everything
        is computed again.
    n_iter_no_change : int >= 1, default=None
        Stop when the validation loss has not improved for this many rounds; the model is cut
        back to its best round. Needs ``eval_set`` or ``validation_fraction``. With
        ``n_features_to_select``, every round is grown and the model is cut back to its best
        validation round, but never to before the k-th feature entered.
    device : {"auto", "cpu", "gpu"}, default="auto"
        Where ``fit`` runs ("auto": the GPU when one is usable). Predictions run where their
        input lives.
    n_jobs : int, default=None
        CPU threads of the fit (scikit-learn's meaning: None or -1 all cores, -2 all but one,
        k at most k). Threads come from Intel TBB, which is safe in forked processes and when
        several Python threads fit at once; small fits run on the calling thread only. The CPU
        kernels release the GIL, so fits run from several Python threads (joblib's threading
        backend, with ``n_jobs=1`` each) overlap.
    random_state : int, RandomState instance or None, default=None
        Seeds the binning subsample, the ``validation_fraction`` split and GT-GBM's subsets.
    verbose : bool, default=False
        Show a progress bar.

    Attributes
    ----------
    selected_features_ : ndarray of shape (n_selected,), int64
        Feature indices in order of first use.
    selected_feature_names_ : ndarray of shape (n_selected,), object
        Their names.
    selection_path_ : dict
        The features in the order they entered: "k" (1, 2, ...), "features" (indices),
        "names" (column names, or x0, x1, ...), "entry_tree" (the tree where each entered),
        "train_loss" and "val_loss" (None without validation data) after the last tree grown
        with that many features (``gpufs.path``).
    support_ : ndarray of shape (n_features,), bool
        Mask of the selected features.
    first_use_tree_ : ndarray of shape (n_features,), int64
        Index of the tree that first used each feature, -1 for unused features.
    feature_importances_ : ndarray of shape (n_features,), float64
        Total split gain per feature, normalized to sum 1.
    mu_ : float
        The price the final fit ran at (``mu`` unless it was searched; 0 when a chosen
        feature did not enter at the searched price and the final fit ran again at 0).
    mu_search_ : list of dict or None
        The search's probes in order (mu, reached, n_features, n_trees, seconds, and
        short_from: for a probe given up halfway, the smallest k it falls short of, else
        None); None without ``n_features_to_select``. With ``warm_start``, only the probes
        this fit ran (outcomes known from earlier fits are not probed again).
    selection_pool_ : dict or None
        With ``n_features_to_select``: "features" (the pool: every feature the unbudgeted
        fit at the searched price admitted, in the order they entered), "gain" (their total
        split gain in it), "frequency" (their ``selection_frequency_``, or None), "chosen"
        (the k, best first), "ranked" (the whole pool in ranking order: "chosen" is its
        first k; ``gpufs.plotting.plot_pool_ranking`` draws it), "resumed_round" (the final
        fit took the pool fit's first rounds, up to the entry of the first pool feature left
        out), "refit_mu" and "trees_grown" (trees grown by the "probes", the "pool" fit, the
        "stability" refits and the "final" fit). Saved in model files (None when loaded from
        a file written before 2026-11-30).
    selection_filled_ : ndarray of shape (n_filled,), int64
        With ``n_features_to_select = k``, when fewer than k features entered the model even
        at ``mu = 0`` (a ``SelectionWarning`` says so): the features that fill the selection
        to k, the last entries of ``selected_features_``, chosen by their root-split gain on
        the final model's gradients (the best split of each remaining feature over all rows,
        no penalty; ties to the lower index; a column with no valid split is never chosen).
        The model does not split on them. Empty otherwise. Saved in model files.
    selection_frequency_ : ndarray of shape (n_features,), float64, or None
        With ``stability_rounds``: the fraction of the refits on half of the rows whose k
        chosen features held each feature; None without. Saved in model files (None when
        loaded from a file written before 2026-11-30).
        ``gpufs.plotting.plot_selection_frequency`` draws it.
    fit_times_ : dict
        Wall seconds of the fit's phases, each without the time numba spent compiling kernels
        in it (that is ``compile``, the fit's compile seconds): bin, mu_search (0 without
        ``n_features_to_select``), mu_probes (a list: each probe of the search, in order),
        pool (the unbudgeted fit at the searched price), heldout (the ranking fits and their
        permutations, with ``pool_ranking="heldout"``) and stability (the refits of
        ``stability_rounds``) with ``n_features_to_select``,
        auto_fit (the unbudgeted fit that "auto" reads its number of features from; only with
        "auto" and ``tol``), boost (the final fit); with ``split_search="group_testing"`` also
        standardize (the standardized columns) and group_test (the group tests of every
        probe and fit, part of the phases above).
    group_test_candidates_ : list of ndarray of int64, or None
        With ``split_search="group_testing"``: per tree kept, the sorted candidate features
        its group tests found (empty once ``n_features_to_select`` features are in: no test
        runs then). None for the exact search.
    selection_record_ : dict of lists of length n_trees
        Per tree: ``tree_column``, ``features_added``, ``train_loss``, ``val_loss`` (NaN
        without validation data).
    evals_result_ : list of ndarray of shape (n_rounds,), float64
        Loss of every ``eval_set`` pair (or of the ``validation_fraction`` rows) after each
        round; empty without validation data.
    ensemble_ : gpufs.engine.tree.TreeEnsemble
        The fitted trees.
    bin_mapper_ : gpufs.engine.binning.BinMapper
        The cut points of every feature.
    n_estimators_ : int
        Rounds kept (fewer than ``n_estimators`` after early stopping).
"""
    + INPUT_ATTRIBUTES_DOC
    + """    device_ : str
        "cpu" or "gpu", where the model was fitted.
"""
)


class GBFSRegressor(BoostedRegressorMixin, RegressorTargetMixin, RegressorMixin, _BaseGBFS):
    __doc__ = (
        "Gradient Boosted Feature Selection for regression (squared error).\n"
        + _PARAMS_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from gpufs import GBFSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5))
    >>> y = 2 * X[:, 0] - X[:, 3] + 0.1 * rng.normal(size=200)
    >>> est = GBFSRegressor(n_estimators=20, device="cpu", random_state=0).fit(X, y)
    >>> sorted(est.selected_features_.tolist())
    [0, 3]
"""
    )

    def predict(self, X):
        """Predicted values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), float64
            cupy for cupy input.
        """
        return self._raw_predict(X)[:, 0]


class GBFSClassifier(BoostedClassifierMixin, ClassifierTargetMixin, ClassifierMixin, _BaseGBFS):
    __doc__ = (
        "Gradient Boosted Feature Selection for classification (binary log loss, or "
        "softmax with one tree per class per round and one shared set of used "
        "features).\n"
        + _PARAMS_DOC
        + """    classes_ : ndarray of shape (n_classes,)
        The class labels.
"""
    )

    def decision_function(self, X):
        """Raw scores.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes (the logit of ``classes_[1]``),
            else (n_samples, n_classes); float64, cupy for cupy input.
        """
        raw = self._raw_predict(X)
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, X):
        """Class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), float64
            cupy for cupy input.
        """
        raw = self._raw_predict(X)  # checks fitted first
        return self._objective.proba(raw)

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``; cupy for cupy input when the labels are numeric.
        """
        return self._decode_classes(self.predict_proba(X).argmax(axis=1))


# the model files' codec of this family (gpufs.io.model_io finds it by class)
model_io.register_codec(GBFSCodec, GBFSRegressor, GBFSClassifier)
