"""ControlBurn feature selection: ``ControlBurnClassifier`` and ``ControlBurnRegressor``.

Implements Liu, Xie, Udell, "ControlBurn: Feature Selection by Sparse Forests", KDD 2021.
Owns the scikit-learn face of ControlBurn: the pipeline (input door -> bins ->
feature-diverse forest (``gpufs.forest``) -> non-negative weighted lasso over tree weights with
bisection on lambda to exactly k features (``gpufs.lasso``) -> refit on the selected features),
and prediction through the refit model, on whichever device the input lives. Parameters,
target encoding and names come from the shared selector base (``selectors._base``).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, _fit_context, clone
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from .. import lasso as _lasso
from .._device import like, namespace_of, to_host
from .._docstrings import INPUT_ATTRIBUTES_DOC, TREE_CATEGORICAL_FEATURES_DOC
from .._params import DEVICE_CONSTRAINT, N_JOBS_CONSTRAINT, int_range, real_range
from .._threading import honours_n_jobs
from .._types import CHUNK_ELEMENTS_COLUMN_SCALE
from .._warnings import SelectionWarning, warn_from_caller
from ..data import _scales
from ..data._colstats import column_mean_var, row_slices
from ..data._input import as_array, check_cost_range, check_costs, check_groups, check_X
from ..data._warm_key import data_fingerprint
from ..engine.binning import BinMapper
from ..forest import FOREST_PARAMETER_CONSTRAINTS as _FOREST
from ..forest import ForestParams, check_forest_params, grow_forest
from ..io import model_io
from ..lasso import _search as _lasso_search
from ._base import (
    ClassifierTargetMixin,
    RegressorTargetMixin,
    SelectorBase,
    feature_budget,
    input_device,
)
from ._controlburn_fill import fill_candidates
from ._controlburn_fit import BurnResult, BurnSelection, ForestData
from ._controlburn_io import ControlBurnCodec
from ._near_copies import (
    POOL_BISECT_RTOL,
    POOL_FACTOR,
    POOL_LAMBDA_MIN_RATIO,
    abs_correlation,
    choose_k,
    has_near_copies,
    n_material_groups,
    pool_groups,
)

__all__ = ["ControlBurnClassifier", "ControlBurnRegressor"]


def _lap(t0, backend):
    """Seconds since t0, after the backend's device has finished its queued work."""
    backend.synchronize()
    return time.perf_counter() - t0


def _importances(selected, importances, n_features):
    """(n_features,) float64: ``importances`` on the ``selected`` features (negatives as 0),
    normalized to sum 1; 0 off the selection."""
    support = np.zeros(n_features, dtype=bool)
    support[np.asarray(selected, dtype=np.int64)] = True
    imp = np.where(support, np.maximum(np.asarray(importances, float), 0.0), 0.0)
    tot = imp.sum()
    return imp / tot if tot > 0 else imp


def _n(count, noun="feature"):
    """``"1 feature"``, ``"3 features"``: a count with its noun in the right number."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


@contextlib.contextmanager
def _lasso_progress(verbose):
    """With ``verbose``, a progress bar over the lasso solves of the search for k (after the
    forest's bar over its trees): each solve ticks it and shows its lambda and feature
    count."""
    if not verbose:
        yield
        return
    from tqdm.auto import tqdm

    bar = tqdm(desc="gpufs ControlBurn lasso search", unit="solve")

    def tick(lam, n_selected):
        bar.set_postfix_str(f"lambda={lam:.4g}, {_n(n_selected)}", refresh=False)
        bar.update(1)

    try:
        with _lasso_search.reporting(tick):
            yield
    finally:
        bar.close()


_COVERAGE_REMEDY = (
    "Grow a more feature-diverse forest: max_features='sqrt' (or a fraction) subsamples the "
    "features of every tree, tree_type='single' gives every feature its own trees, "
    "tree_type='sparse' makes trees use few features each, and min_rounds / max_depth grow "
    "more rounds of deeper trees (with oob_prune, a smaller value or None keeps more splits)."
)


class _BaseControlBurn(SelectorBase):
    """Shared machinery; see ControlBurnClassifier for the parameters."""

    _task = None
    _parameter_constraints: dict = {
        "n_features_to_select": [int_range(1), real_range(0, 1, closed="right"), None],
        "alpha": [real_range(0), None],
        "forest_method": _FOREST["method"],
        "tree_type": _FOREST["tree_type"],
        "max_depth": _FOREST["max_depth"],
        "max_features": _FOREST["max_features"],
        "sparse_mu": _FOREST["sparse_mu"],
        "n_tail": _FOREST["n_tail"],
        "tol": _FOREST["tol"],
        "max_trees_per_round": _FOREST["max_trees_per_round"],
        "min_rounds": _FOREST["min_rounds"],
        "max_bins": [int_range(2, 255)],
        "min_child_weight": _FOREST["min_child_weight"],
        "honest_leaves": _FOREST["honest_leaves"],
        "oob_prune": _FOREST["oob_prune"],
        "feature_costs": ["array-like", None],
        "feature_groups": ["array-like", None],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "group_costs": ["array-like", dict, None],
        "sketch": [StrOptions(set(_lasso.SKETCHES)), None],
        "sketch_size": [int_range(1), None],
        "reweight_steps": [int_range(0)],
        "path_k_max": [int_range(1), None],
        "refit_estimator": [HasMethods(["fit", "predict"]), None],
        "warm_start": ["boolean"],
        "device": DEVICE_CONSTRAINT,
        "n_jobs": N_JOBS_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        n_features_to_select=None,
        alpha=None,
        forest_method="bagboost",
        tree_type="full",
        max_depth=10,
        max_features=None,
        sparse_mu=0.01,
        n_tail=5,
        tol=1e-3,
        max_trees_per_round=100,
        min_rounds=1,
        max_bins=255,
        min_child_weight=1.0,
        honest_leaves=False,
        oob_prune=1.0,
        feature_costs=None,
        feature_groups=None,
        categorical_features="from_dtype",
        group_costs=None,
        sketch=None,
        sketch_size=None,
        reweight_steps=3,
        path_k_max=None,
        refit_estimator=None,
        warm_start=False,
        device="auto",
        n_jobs=None,
        random_state=None,
        verbose=False,
    ):
        self.n_features_to_select = n_features_to_select
        self.alpha = alpha
        self.forest_method = forest_method
        self.tree_type = tree_type
        self.max_depth = max_depth
        self.max_features = max_features
        self.sparse_mu = sparse_mu
        self.n_tail = n_tail
        self.tol = tol
        self.max_trees_per_round = max_trees_per_round
        self.min_rounds = min_rounds
        self.max_bins = max_bins
        self.min_child_weight = min_child_weight
        self.honest_leaves = honest_leaves
        self.oob_prune = oob_prune
        self.feature_costs = feature_costs
        self.feature_groups = feature_groups
        self.categorical_features = categorical_features
        self.group_costs = group_costs
        self.sketch = sketch
        self.sketch_size = sketch_size
        self.reweight_steps = reweight_steps
        self.path_k_max = path_k_max
        self.refit_estimator = refit_estimator
        self.warm_start = warm_start
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # --- checks -------------------------------------------------------------------------
    def _forest_params(self):
        return ForestParams(
            method=self.forest_method,
            tree_type=self.tree_type,
            max_depth=self.max_depth,
            n_tail=self.n_tail,
            tol=self.tol,
            max_trees_per_round=self.max_trees_per_round,
            min_rounds=self.min_rounds,
            max_features=self.max_features,
            sparse_mu=self.sparse_mu,
            min_child_weight=self.min_child_weight,
            honest_leaves=self.honest_leaves,
            oob_prune=self.oob_prune,
            verbose=bool(self.verbose),
        )

    def _check_params(self):
        """The rules between parameters (each one alone is checked by its constraint)."""
        if self.alpha is not None and self.n_features_to_select is not None:
            raise ValueError(
                "give either n_features_to_select (bisection on lambda to exactly "
                "k features) or alpha (a fixed lambda), not both."
            )
        if self.feature_costs is not None and self.group_costs is not None:
            raise ValueError(
                "give either feature_costs or group_costs (with feature_groups), not "
                "both: a group's cost defaults to the sum of its features' costs."
            )
        if self.group_costs is not None and self.feature_groups is None:
            raise ValueError("group_costs needs feature_groups (the group label of every feature).")
        check_forest_params(self._forest_params())

    def _group_costs(self, groups_raw, n_features):
        """(labels 0..G-1 (F,), group costs (G,) or None) from the user's groups and costs.

        Groups are numbered by their sorted unique label; ``group_costs`` is indexed the same
        way (an array of length G) or maps label -> cost (a dict).
        """
        if groups_raw is None:
            return None, None
        check_groups(groups_raw, n_features)  # validation with clear messages
        g = np.asarray(as_array(groups_raw, "cpu", "feature_groups"))
        labels, inv = np.unique(g, return_inverse=True)
        gc = self.group_costs
        if gc is None:
            return inv.astype(np.int64), None
        if isinstance(gc, dict):
            missing = [lab for lab in labels.tolist() if lab not in gc]
            if missing:
                raise ValueError(f"group_costs has no cost for groups {missing[:5]}.")
            gc = np.array([gc[lab] for lab in labels.tolist()], dtype=np.float64)
        else:
            gc = np.asarray(as_array(gc, "cpu", "group_costs"), dtype=np.float64)
            if gc.ndim != 1 or gc.shape[0] != labels.shape[0]:
                raise ValueError(
                    f"group_costs must give one cost per group: expected shape "
                    f"({labels.shape[0]},) (groups in sorted label order), got "
                    f"{tuple(gc.shape)}."
                )
        if not np.isfinite(gc).all() or (gc < 0).any():
            raise ValueError("group_costs must be finite and >= 0.")
        check_cost_range(gc, "group_costs")
        return inv.astype(np.int64), gc

    # --- fit ----------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=False)
    @honours_n_jobs
    def fit(self, X, y, sample_weight=None):
        """Grow the forest, select features with the tree-weight lasso, refit on them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            numpy, pandas, cupy, cudf, polars or pyarrow. NaN marks a missing value.
        y : array-like of shape (n_samples,)
            Target values (regression) or class labels (classification).
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights, used by the forest (bootstrap rows weigh this much), the lasso (row
            weights) and the refit (when it accepts them).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._check_params()
        X_input = X
        data = self._prepare_fit(X, y, sample_weight)
        device, backend, X, w, seed = (
            data.device,
            data.backend,
            data.X,
            data.sample_weight,
            data.seed,
        )
        d = X.shape[1]
        if self.alpha is None:  # a k above d: said now, before the forest and the lasso
            feature_budget(self.n_features_to_select, None, d)
        costs = check_costs(self.feature_costs, d)
        groups_lasso, group_costs = self._group_costs(self.feature_groups, d)
        groups_forest = check_groups(self.feature_groups, d)
        y_enc = data.y
        _scales.check_target_scale(self, y_enc, w)
        _scales.check_classifier_weights(self, w)
        n_classes = len(self.classes_) if self._task == "classification" else 0
        if self.sketch not in (None, "rows") and n_classes == 2:
            raise ValueError(
                f"sketch={self.sketch!r} is defined for the squared loss only; a "
                "binary classifier solves a logistic lasso: use sketch='rows'."
            )

        times = {}
        key = self._forest_key(X_input, X, y_enc, w, costs, groups_forest, device)
        forest = getattr(self, "forest_", None) if self.warm_start else None
        reused = forest is not None and getattr(self, "_forest_key_", None) == key
        Xb = None
        if reused:
            # warm_start on the same data with the same forest parameters: the forest does
            # not depend on k, so only its predictions on the training rows are recomputed.
            t0 = time.perf_counter()
            forest.A = forest.tree_predictions(X, backend)
            times["bin"], times["forest"] = 0.0, 0.0
            times["tree_predictions"] = _lap(t0, backend)
            bin_mapper = self.bin_mapper_
        else:
            t0 = time.perf_counter()
            bin_mapper = BinMapper(self.max_bins, random_state=seed).fit(
                X, categories=self.category_codes_
            )
            Xb = bin_mapper.transform(X, backend)
            times["bin"] = _lap(t0, backend)
            forest = None
        result = self._fit_step(
            ForestData(
                backend,
                Xb,
                y_enc,
                w,
                n_classes,
                costs,
                groups_forest,
                groups_lasso,
                group_costs,
                seed,
                bin_mapper,
                corr_of=lambda features: abs_correlation(X, features),
            ),
            forest,
        )
        times.update(result.times)
        self._set_fit_result(result, bin_mapper, key, reused, device)
        t0 = time.perf_counter()
        self.refit_estimator_ = self._refit(X, data.y_input, w, seed)
        times["refit"] = _lap(t0, backend)
        self.fit_times_ = times
        return self

    def _fit_step(self, data, forest=None):
        """Grow the forest from ``data`` (a :class:`ForestData`), unless ``forest``, one kept by
        ``warm_start`` with its predictions recomputed, is given, and select features with the
        lasso: the fit between the bins and the refit, shared with ``gpufs.dask`` (whose
        ``data.Xb`` stands in for the workers' rows). Returns a :class:`BurnResult`; writes
        nothing on ``self``."""
        times = {}
        if forest is None:
            t0 = time.perf_counter()
            forest = grow_forest(
                data.backend,
                data.Xb,
                data.y,
                data.sample_weight,
                self._task,
                data.n_classes,
                data.bin_mapper,
                self._forest_params(),
                costs=data.costs,
                groups=data.groups,
                random_state=data.seed,
            )
            times["forest"] = _lap(t0, data.backend)
        t0 = time.perf_counter()
        # The lasso calls of one selection (the k search, the near-copy rule's pools, the
        # path) share the solves they repeat: same solutions, fewer solves.
        with _lasso_progress(self.verbose), _lasso_search._sharing():
            selection, messages = self._select(forest, data)
        times["select"] = _lap(t0, data.backend)
        if selection.selected_features.size == 0:
            why = (
                "no tree of the forest splits on any feature"
                if selection.forest_coverage == 0
                else f"at alpha={self.alpha:g} the lasso keeps no tree"
                if self.alpha is not None
                else "the lasso keeps no tree"
            )
            messages.append(
                f"no feature was selected: {why}. Set n_features_to_select to the "
                "number of features you want, or a smaller alpha."
            )
        forest.drop_predictions()
        return BurnResult(forest, selection, times, messages)

    def _set_fit_result(self, result, bin_mapper, forest_key, reused, device):
        """Set the fitted attributes of the fit step's ``result`` (a :class:`BurnResult`), the
        cut points, the ``warm_start`` key and the device, in one place, and raise the
        step's warnings at the user's line (``warn_from_caller``)."""
        s = result.selection
        self.bin_mapper_, self._forest_key_ = bin_mapper, forest_key
        self.forest_reused_, self.device_, self.forest_ = reused, device, result.forest
        self.forest_coverage_, self.forest_features_ = s.forest_coverage, s.forest_features
        self.n_trees_, self.tree_weights_ = s.n_trees, s.tree_weights
        self.intercept_, self.lambda_ = s.intercept, s.lam
        self.selection_exact_, self.merged_near_copies_ = s.exact, s.merged_near_copies
        self._set_support(s.selected_features)
        self.selection_filled_ = s.filled
        self.feature_importances_ = s.feature_importances
        self.selection_path_ = s.path
        for message in result.warnings:
            warn_from_caller(message, SelectionWarning)

    def _forest_key(self, X_input, X, y_enc, w, costs, groups, device):
        """What the forest depends on, for ``warm_start``: its parameters, the device, the
        seed (an int ``random_state``), the costs and groups, and the data's fingerprint
        (``gpufs.data._warm_key``: every column's checksum, the target's and the weights', the
        names, dtypes and categories)."""
        seed = self.random_state if isinstance(self.random_state, int) else None
        return (
            self._forest_params(),
            int(self.max_bins),
            device,
            seed,
            data_fingerprint(self, X_input, X, y_enc, w),
            tuple(np.asarray(costs).tolist()),
            tuple(np.asarray(groups).tolist()),
        )

    # --- selection ------------------------------------------------------------------------
    def _select(self, forest, data):
        """The lasso's selection from ``forest`` (its training predictions ``forest.A``) and
        ``data`` (a :class:`ForestData`): ``(BurnSelection, warning messages)``."""
        y_enc, w, n_classes, groups, group_costs, seed, corr_of = (
            data.y,
            data.sample_weight,
            data.n_classes,
            data.lasso_groups,
            data.group_costs,
            data.seed,
            data.corr_of,
        )
        feature_costs = data.costs if self.feature_costs is not None else None
        d = int(self.n_features_in_)
        masks_all = forest.feature_masks
        covered = masks_all.any(axis=0)
        n_cov = int(covered.sum())
        n_trees = int(masks_all.shape[0])
        tree_weights = np.zeros(n_trees)
        exact, merged, messages, filled = True, [], [], []

        def selection(order, imp, icpt, lam, path):
            return BurnSelection(
                np.asarray(order, dtype=np.int64),
                _importances(order, imp, d),
                n_cov,
                np.flatnonzero(covered).astype(np.int64),
                n_trees,
                tree_weights,
                icpt,
                lam,
                exact,
                merged,
                path,
                np.asarray(filled, dtype=np.int64),
            )

        if n_cov == 0:
            k_req = self.n_features_to_select
            k = None if k_req is None else feature_budget(k_req, None, d, warn=False).k
            if k is not None:
                # No split survived pruning (or none was made): the fill's rule alone.
                filled = fill_candidates(
                    [], k, covered, np.zeros(d), forest.pruned_splits, forest.pruned_saving, corr_of
                )
            if filled:
                names = self._feature_names()
                messages.append(
                    f"the forest's trees split on no feature after out-of-bag pruning; filled "
                    f"the selection with {_n(len(filled))} "
                    f"({', '.join(str(names[f]) for f in filled)}) by the pruned splits' "
                    "out-of-bag saving (selection_filled_)"
                    + ("." if len(filled) == k else f", fewer than n_features_to_select={k}. ")
                    + ("" if len(filled) == k else _COVERAGE_REMEDY)
                )
                exact = False
            return selection(filled, np.zeros(d), 0.0, None, self._k_path(0, None)), messages
        problem = _lasso.forest_lasso_problem(
            forest.A, masks_all, forest.tree_column, y_enc, w, n_classes
        )
        A, y_l, w_l, loss, fit_intercept, trees = (
            problem.A,
            problem.y,
            problem.sample_weight,
            problem.loss,
            problem.fit_intercept,
            problem.trees,
        )
        masks = masks_all[trees]
        kw = dict(
            costs=_lasso.FeatureCosts(
                feature_costs=feature_costs, groups=groups, group_costs=group_costs
            ),
            datafit=_lasso.Datafit(
                loss=loss,
                sample_weight=w_l,
                fit_intercept=fit_intercept,
                sketch=self.sketch,
                sketch_size=self.sketch_size,
                random_state=seed,
            ),
            reweight=_lasso.Reweighting(steps=self.reweight_steps),
        )

        # Per-tree scale for importances: the (row-weighted) std of the tree's column.
        xp = namespace_of(A)
        rw = xp.ones(A.shape[0]) if w_l is None else xp.asarray(w_l, dtype=np.float64)
        chunks = row_slices(A.shape[0], A.shape[1], CHUNK_ELEMENTS_COLUMN_SCALE)
        _, col_var = column_mean_var(A, rw, float(rw.sum()), xp, chunks)
        col_std = to_host(xp.sqrt(xp.maximum(col_var, 0.0)))
        gains = forest.tree_gains()[trees]
        tot = gains.sum(axis=1, keepdims=True)
        share = np.divide(gains, tot, out=np.zeros_like(gains), where=tot > 0)

        def importance(weights):
            wv = np.asarray(to_host(weights), dtype=np.float64)
            return (wv * col_std) @ share

        @functools.cache  # computed once, when first asked for
        def forest_importance():
            """Every feature's importance with every tree at weight 1."""
            return importance(np.ones(len(trees)))

        def fill(selected, n_fill):
            """The fill of a short selection (``_controlburn_fill``)."""
            return fill_candidates(
                selected,
                n_fill,
                covered,
                forest_importance(),
                forest.pruned_splits,
                forest.pruned_saving,
                corr_of,
            )

        k_req = self.n_features_to_select
        if self.alpha is not None:
            sel = _lasso.select_at_lambda(A, y_l, masks, float(self.alpha), **kw)
            feats, weights, lam, icpt, extra = (
                sel.features,
                sel.weights,
                float(self.alpha),
                sel.intercept,
                [],
            )
        else:
            notes = []  # what the selection did differently from what was asked
            # ControlBurn's None is half of the columns (as scikit-learn's selectors' None)
            k = feature_budget(k_req, None, d, warn=False).k  # fit warned of a k above d
            k = min(max(1, d // 2), n_cov) if k is None else k
            k_asked = k
            if k > n_cov:
                notes.append(
                    f"the forest uses only {n_cov} of the {_n(d)}, fewer than "
                    f"n_features_to_select={k}"
                )
                k = n_cov
            search_record = {}
            try:
                sel = _lasso.select_k(A, y_l, masks, k, strict=True, record=search_record, **kw)
                extra = []
            except _lasso.UnreachableKError as exc:
                exact = False
                sel, extra, done = self._complete(k, importance, exc.below, exc.above)
                notes.append(f"no lambda selects exactly {_n(k)} ({exc}); {done}")
            feats, weights, lam, icpt = sel.features, sel.weights, sel.lam, sel.intercept

            def near_copy_rule(k, features):
                """The pool choice (``_near_copies``) when ``features`` hold near-copies."""
                features = list(features)
                if corr_of is None or len(features) < 2 or not has_near_copies(corr_of(features)):
                    return None
                k_pool = min(n_cov, POOL_FACTOR * k)
                if k_pool <= k:
                    # The forest covers too few features for a larger pool (a pruned forest
                    # can keep one group's copies alone): the leader of each group of these
                    # features, by forest importance; the fill (``_controlburn_fill``) takes
                    # the places left. None for the pool: the lasso's solution stays.
                    groups_ = pool_groups(features, forest_importance(), corr_of(features))
                    chosen = [features[g[0]] for g in groups_]
                    merged = [[features[i] for i in g[1]] for g in groups_ if len(g[1]) > 1]
                    return None, chosen, merged
                # A pool only proposes candidates and ranks them, so it is searched cheaply:
                # the plain lasso (the grouping does what the reweighting would), a coarse
                # bisection, and no lambda below 1e-3 lambda_max (where solves are slow);
                # with no lambda giving k_pool, the most features found below it.
                pool_kw = {**kw, "reweight": _lasso.Reweighting(steps=0)}
                pool_search = _lasso.KSearch(
                    lambda_min_ratio=POOL_LAMBDA_MIN_RATIO, bisect_rtol=POOL_BISECT_RTOL
                )
                pool = _lasso.select_k(
                    A, y_l, masks, k_pool, strict=False, search=pool_search, **pool_kw
                )
                pool_feats = pool.features.tolist()
                imp_pool = importance(pool.weights)
                corr_pool = corr_of(pool_feats)
                if n_material_groups(pool_feats, imp_pool, corr_pool) >= k:
                    chosen, merged = choose_k(pool_feats, imp_pool, corr_pool, k)
                    if not has_near_copies(corr_of(chosen)):
                        return pool, chosen, merged
                # Fewer than k groups the pool's lasso weighs above noise: the rest of the
                # forest's features are candidates too, and the places left go to the groups
                # of largest forest importance (every tree at weight 1), summed over each
                # group's near-copies (``_near_copies``).
                cands = pool_feats + [
                    f for f in np.flatnonzero(covered).tolist() if f not in pool_feats
                ]
                chosen, merged = choose_k(
                    cands,
                    imp_pool,
                    corr_of(cands),
                    k,
                    n_pool=len(pool_feats),
                    forest_importance=forest_importance(),
                )
                return pool, chosen, merged

            rule = near_copy_rule(k, feats.tolist() + list(extra))
            if rule is not None:
                # The selection is the pool's choice: what was said of the k search no longer
                # describes it (the coverage did not limit k, or the pool would be k).
                pool, chosen, merged = rule
                sel = sel if pool is None else pool
                feats, weights, lam, icpt = (
                    np.asarray(chosen, np.int64),
                    sel.weights,
                    sel.lam,
                    sel.intercept,
                )
                extra, notes, exact = [], [], False
                if pool is None:
                    names = self._feature_names()
                    notes.append(
                        f"the forest's trees split on {_n(n_cov)} only, near-copies among "
                        "them (merged_near_copies_): kept "
                        + ", ".join(str(names[f]) for f in chosen)
                    )
            n_sel = len(feats) + len(extra)
            if n_sel < k_asked:
                # Exact k means k where the table has k usable columns (``_controlburn_fill``).
                filled = fill(feats.tolist() + list(extra), k_asked - n_sel)
                exact = False
                names = self._feature_names()
                notes.append(
                    f"selected {'all ' if n_sel == n_cov > 1 else ''}{n_sel} "
                    f"feature{'s' if n_sel != 1 else ''}"
                    + (
                        f", then filled the selection with {_n(len(filled))} "
                        f"({', '.join(str(names[f]) for f in filled)}) by the forest's other "
                        "splits: the kept ones by importance, then the pruned ones by their "
                        "out-of-bag saving (selection_filled_)"
                        if filled
                        else ""
                    )
                )
            if notes:
                short = n_sel + len(filled) < k_asked
                messages.append("; ".join(notes) + "." + (" " + _COVERAGE_REMEDY if short else ""))
        w_host = np.asarray(to_host(weights), dtype=np.float64)
        tree_weights[trees] = w_host
        imp = importance(w_host)
        order = sorted(feats.tolist(), key=lambda f: (-imp[f], f)) + list(extra) + filled

        # The k-path, with the lasso's training loss (its objective without the penalty):
        # every k up to path_k_max, searched; without path_k_max, the k up to the one asked
        # for that the k search passed through (no extra solve).
        if self.path_k_max is not None:
            k_max = min(int(self.path_k_max), n_cov)
            path = self._k_path(
                k_max,
                _lasso.selections_by_k,
                A,
                y_l,
                masks,
                complete=importance,
                near=near_copy_rule,
                fill=fill,
                **kw,
            )
        elif self.alpha is None:
            path = self._k_path(0, lambda: search_record["path"])
        else:
            path = self._k_path(0, None)
        return selection(order, imp, float(icpt), float(lam), path), messages

    def _k_path(self, k_max, path_of, *args, complete=None, near=None, fill=None, **kw):
        """``selection_path_`` from ``path_of(*args, **kw)``, a lasso SelectionPath (none
        when ``path_of`` is None; with ``k_max`` >= 1, ``path_of`` is called with k_max).
        With ``complete`` (the importance of a weight vector), every unreachable k that its
        search bracketed is completed as ``fit`` completes it (``_complete``) and marked
        ``exact`` False; with ``near`` (``fit``'s near-copy rule, ``near(k, features)``) every
        k whose features hold near-copies is the pool's choice, as ``fit`` makes it, filled to
        k by ``fill(features, n_fill)`` where the forest covered too few features for a pool
        (``_controlburn_fill``)."""
        empty = {
            "k": [],
            "features": {},
            "names": {},
            "lambda": {},
            "train_loss": {},
            "exact": {},
            "source": {},
            "val_loss": None,
            "unreachable": {},
            "lambda_max": None,
        }
        if path_of is None:
            return empty
        path = path_of(*args, k_max, **kw) if k_max >= 1 else path_of()
        entries = {k: (s.features.tolist(), s) for k, s in path.selections.items()}
        source = {k: "lasso" for k in entries}
        for k, (below, above) in path.nearest.items():
            if complete is None or below is None:
                continue
            sel, extra, _ = self._complete(k, complete, below, above)
            if len(sel.features) + len(extra) == k:
                entries[k] = (sorted(sel.features.tolist() + list(extra)), sel)
                source[k] = "completed"
        for k in sorted(entries) if near is not None else ():
            rule = near(k, entries[k][0])
            if rule is not None:
                pool, chosen, _ = rule
                chosen = list(chosen)
                if len(chosen) < k and fill is not None:
                    chosen += fill(chosen, k - len(chosen))
                entries[k] = (sorted(chosen), entries[k][1] if pool is None else pool)
                source[k] = "near_copies"
        exact = {k: source[k] == "lasso" for k in entries}
        names = self._feature_names()
        ks = sorted(entries)
        return {
            **empty,
            "k": ks,
            "features": {k: entries[k][0] for k in ks},
            "names": {k: [str(names[f]) for f in entries[k][0]] for k in ks},
            "lambda": {k: float(entries[k][1].lam) for k in ks},
            "train_loss": {k: float(entries[k][1].loss) for k in ks},
            "exact": {k: exact[k] for k in ks},
            "source": {k: source[k] for k in ks},
            "unreachable": dict(path.unreachable),
            "lambda_max": float(path.lambda_max),
        }

    def _complete(self, k, importance, below, above):
        """No lambda gives exactly k: ``(selection, extra, what was done)``. The nearest
        solution below k (``selection``, whose tree weights are kept), completed with
        ``extra``, the most important new features of the nearest solution above (the search
        found both; ``importance(weights)`` ranks them)."""
        names = self._feature_names()
        if below is None:
            # The free (zero-cost) features alone are more than k: all of them, and no more.
            return (
                above,
                [],
                (
                    f"selected the {_n(above.k)} of the sparsest solution (the "
                    "zero-cost trees alone select them)"
                ),
            )
        base = set(below.features.tolist())
        if above is None:
            return (
                below,
                [],
                (
                    f"took the {_n(len(base))} of the densest solution: no "
                    f"lambda, not even 0, selects more"
                ),
            )
        imp_above = importance(above.weights)
        new = [f for f in np.asarray(above.features).tolist() if f not in base]
        new.sort(key=lambda f: (-imp_above[f], f))
        extra = new[: k - len(base)]
        shown = ", ".join(str(names[f]) for f in extra)
        return (
            below,
            extra,
            (
                f"took the {_n(len(base))} of the nearest solution below "
                f"and added {shown}, the most important new "
                f"feature{'s' if len(extra) != 1 else ''} of the next solution "
                "above"
            ),
        )

    # --- refit & predict --------------------------------------------------------------------
    def _default_refit(self, seed):
        from .gbfs import GBFSClassifier, GBFSRegressor

        cls = GBFSRegressor if self._task == "regression" else GBFSClassifier
        return cls(mu=0.0, device=self.device, random_state=seed)

    def _refit(self, X, y, w, seed):
        """The refit model, fitted on the selected columns of ``X`` (a dummy without any)."""
        idx = np.sort(self.selected_features_)
        if idx.size == 0:
            from sklearn.dummy import DummyClassifier, DummyRegressor

            est = (
                DummyRegressor()
                if self._task == "regression"
                else DummyClassifier(strategy="prior")
            )
            est.fit(
                np.zeros((X.shape[0], 1)),
                to_host(y),
                sample_weight=None if w is None else to_host(w),
            )
            return est
        gpufs_refit = self.refit_estimator is None
        est = self._default_refit(seed) if gpufs_refit else clone(self.refit_estimator)
        if "categorical_features" in est.get_params(deep=False):
            # the selected columns are category codes already: the refit splits them as
            # categories too (a gpufs refit; other estimators see the codes as numbers)
            est.set_params(categorical_features=np.flatnonzero(self.is_categorical_[idx]))
        Xs = X[:, like(idx, X)]
        ys = y
        if not gpufs_refit:
            Xs, ys = to_host(Xs), to_host(y)
            w = to_host(w)
        with warnings.catch_warnings():
            # said once already, by this fit's own input door
            warnings.filterwarnings("ignore", message="sample_weight is 0 on every row of class")
            if w is not None and has_fit_parameter(est, "sample_weight"):
                est.fit(Xs, ys, sample_weight=w)
            else:
                est.fit(Xs, ys)
        return est

    def _refit_X(self, X):
        check_is_fitted(self, "refit_estimator_")
        device = input_device(X)
        Xc = check_X(self, X, device=device, reset=False)
        idx = np.sort(self.selected_features_)
        if idx.size == 0:
            return np.zeros((Xc.shape[0], 1))
        Xs = Xc[:, like(idx, Xc)]
        if self.refit_estimator is not None:
            Xs = to_host(Xs)
        return Xs

    def predict(self, X):
        """Predictions of the refit model on the selected features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            All the features seen in ``fit``; only the selected ones are used.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        Xs = self._refit_X(X)
        return self.refit_estimator_.predict(Xs)


def _refit_has(method):
    def check(self):
        est = getattr(self, "refit_estimator_", None)
        if est is None:
            est = self.refit_estimator
        return est is None or hasattr(est, method)

    return check


_PARAMS_DOC = (
    """
    Parameters
    ----------
    n_features_to_select : int >= 1, float in (0, 1] or None, default=None
        Select exactly this many features (a float: that fraction of the columns, at least
        1): lambda is bisected (ControlBurn, section 4.2.1) until the lasso's solution uses k
        features; where the forest covers fewer, or no lambda selects more, the selection is
        filled to k (``selection_filled_``). None: half of the features (at most the
        forest's coverage, no fill).
    alpha : float >= 0, default=None
        Solve the lasso at this lambda instead (the selection is then whatever it gives).
    forest_method : {"bagboost", "bag"}, default="bagboost"
        Incremental depth bag-boosting with out-of-bag stopping, or incremental depth bagging
        (ControlBurn's Algorithms 2 and 1); see ``gpufs.forest``.
    tree_type : {"full", "sparse", "single"}, default="full"
        Plain trees, feature-sparse trees (a GBFS penalty ``sparse_mu`` inside each tree) or
        single-feature trees (the EBM variant).
    max_depth : int in [1, 16], default=10
        The deepest trees (bag: the last depth; bagboost: the most rounds).
    max_features : None, int, float in (0, 1], "sqrt" or "log2", default=None
        Features each tree may split on, drawn at random per tree (a coverage remedy).
    sparse_mu : float >= 0, default=0.01
        Price of a feature new to the tree, as a fraction of the root's best gain
        (``tree_type="sparse"``).
    n_tail : int >= 1, default=5
        The convergence rule: a round ends when the last ``n_tail`` relative train losses lie
        within ``tol`` of each other.
    tol : float >= 0, default=1e-3
        Width of the convergence rule's tube.
    max_trees_per_round : int >= 1, default=100
        Cap on bag members per round (bagboost) or depth (bag).
    min_rounds : int >= 1, default=1
        bagboost: rounds grown before a non-positive out-of-bag improvement may stop it.
    max_bins : int in [2, 255], default=255
        Value bins per feature (one more bin holds NaN).
    min_child_weight : float >= 0, default=1.0
        Least in-bag weight (weights scaled to mean 1) in a child.
    honest_leaves : bool, default=False
        Honest trees (Wager and Athey, "Estimation and Inference of Heterogeneous Treatment
        Effects using Random Forests", JASA 113(523), 2018, section 2.4): each tree's splits
        are chosen on its bootstrap rows and its leaf values are re-estimated from its
        out-of-bag rows (bagboost: one seeded half of them, the other half scores the
        out-of-bag stopping rule); a leaf without such rows takes its parent's value. A deep
        tree's splits on a noise column then no longer fit the rows they were chosen on, so
        they look less useful to the lasso: fewer noise columns selected on planted tables,
        but no better held-out scores on real ones (the ControlBurn guide has the numbers),
        so off by default.
    oob_prune : float >= 0 or None, default=1.0
        Out-of-bag pruning of every tree of the forest (reduced-error pruning: Quinlan,
        "Simplifying decision trees", Int. J. Man-Machine Studies 27(3), 1987): bottom up, a
        split stays only when it lowers the squared error of the tree's target on the rows its
        bootstrap left out by more than ``oob_prune`` standard errors of that saving; else its
        node becomes a leaf (of its in-bag value) and the columns split on below it leave the
        tree. The lasso pays for every column a tree uses, so a deep tree's chance split on a
        noise column otherwise brings that column in with the signal the tree carries (the
        ControlBurn guide has the numbers). Pruned trees use fewer columns, so a small
        forest may cover fewer than ``n_features_to_select``: the selection is then filled
        to k by the forest's other splits (``selection_filled_``; a warning says so). None:
        no pruning (the default up to version 0.2). Not used with ``honest_leaves=True``,
        whose leaf values come from those same rows.
    feature_costs : array-like of shape (n_features,), default=None
        Non-negative cost of each feature (None: all 1). A tree costs the sum over the features
        it uses; a feature of cost 0 is free: its trees are never penalized, so it is selected
        at every lambda and counts toward ``n_features_to_select``. Positive costs lie in
        [1e-100, 1e100].
"""
    + TREE_CATEGORICAL_FEATURES_DOC
    + """\
        The forest's trees split a column of more than 4 categories at a node one category
        against the rest, with GBFS's ``cat_smooth``, ``cat_l2`` and ``min_data_per_group``
        (``gpufs.forest.ForestParams``): set splits fit many-level noise columns, which the
        lasso then selected over real signals.
    feature_groups : array-like of shape (n_features,) of int, default=None
        Group label of each feature; a tree pays once per group it uses.
    group_costs : array-like of shape (n_groups,) or dict, default=None
        Cost of each group, in sorted label order (or a dict label -> cost); default: the sum
        of its features' costs, or 1.
    sketch : {"gaussian", "count", "rows"} or None, default=None
        Row sketching of the lasso (ControlBurn, section 3.3.3); the binary classifier
        (logistic loss) only takes "rows".
    sketch_size : int >= 1, default=None
        Rows of the sketch (default: min(n_samples, max(10 (n_trees + 1), 1000))).
    reweight_steps : int >= 0, default=3
        Reweighted-lasso steps after the paper's lasso (Candes, Wakin, Boyd, "Enhancing
        Sparsity by Reweighted l1 Minimization", J. Fourier Anal. Appl., 2008): each one makes
        a feature cheaper the more weight the last solution's trees put on it and searches
        again (for ``n_features_to_select``; at ``alpha`` for a fixed lambda), stopping early
        when the costs settle. A feature is then paid for about once, so the weight of
        near-copies of a kept feature collapses onto one of them and the next feature must
        bring something new: on planted groups of near-copies this is what makes the default
        keep one feature per group. 0: the paper's plain lasso (``gpufs.lasso``'s package
        docstring has the details).
    path_k_max : int >= 1, default=None
        Search the selection for every k = 1..path_k_max (at most ``forest_coverage_``) from
        the same forest, each as ``n_features_to_select=k`` would (``selection_path_``; a k no
        lambda gives is completed as a fit completes it); None: ``selection_path_`` holds the
        k up to ``n_features_to_select`` that the lambdas of its k search gave (no extra lasso
        solve; a k the search stepped over is listed as unreachable).
    refit_estimator : estimator with fit and predict, default=None
        Fitted on the selected features and used by predict / predict_proba / score; None:
        a gpufs GBFS model with mu=0 on the same device.
    warm_start : bool, default=False
        Reuse the forest of the previous ``fit`` when it is called again on the same data with
        the same forest parameters (and an int ``random_state``): the forest does not depend
        on k, so ``set_params(n_features_to_select=k).fit(X, y)`` then costs the lasso
        search and the refit, not a new forest. Otherwise a new forest is grown.
    device : {"auto", "cpu", "gpu"}, default="auto"
        Where ``fit`` runs ("auto": the GPU when one is usable).
    n_jobs : int, default=None
        CPU threads of the fit, forest and default refit (scikit-learn's meaning: None or -1
        all cores, -2 all but one, k at most k). A ``refit_estimator`` of your own keeps its
        own ``n_jobs``.
    random_state : int, RandomState instance or None, default=None
        Seeds the binning subsample, the bootstraps, the per-tree feature subsets, the sketch
        and the refit.
    verbose : bool, default=False
        Progress bars over the trees grown and over the lasso solves of the search for k.

    Attributes
    ----------
    selected_features_ : ndarray of shape (n_selected,), int64
        Selected feature indices, most important first.
    selected_feature_names_ : ndarray of shape (n_selected,), object
        Their names.
    support_ : ndarray of shape (n_features,), bool
        Mask of the selected features.
    feature_importances_ : ndarray of shape (n_features,), float64
        Sum over trees of weight x std of the tree's predictions x the tree's share of gain
        on the feature, normalized to sum 1 (0 off the selection).
    forest_ : gpufs.forest.Forest
        The trees, their feature masks, per-round losses and out-of-bag improvements.
    forest_coverage_ : int
        Number of features used by at least one tree.
    forest_features_ : ndarray of shape (n_covered,), int64
        Their indices.
    n_trees_ : int
        Trees grown.
    tree_weights_ : ndarray of shape (n_trees,), float64
        The lasso's tree weights (>= 0).
    intercept_ : float
        The lasso's intercept.
    lambda_ : float
        The lambda of the selection.
    selection_exact_ : bool
        False when the selection is not the features of one lasso solution with exactly k:
        no lambda gave k (a completion, see ``docs/module_notes.rst``), or near-copies were
        merged (``merged_near_copies_``).
    selection_filled_ : ndarray of shape (n_filled,), int64
        With ``n_features_to_select = k``, when the lasso's selection holds fewer than k
        features (the pruned forest covers fewer, or no lambda, not even 0, selects more; a
        ``SelectionWarning`` says so): the features that fill it to k, the last entries of
        ``selected_features_``, with importance 0. First the forest's other split features
        by their importance with every tree at weight 1, then the features only pruned splits
        used, by those splits' out-of-bag saving; a near-copy of a feature already chosen
        goes last; a feature no tree split on, even before pruning, is never chosen. Empty
        otherwise. Saved in model files.
    merged_near_copies_ : list of list of int
        The groups of near-copies (absolute correlation >= 0.9) the near-copy rule merged, the
        kept feature first (``docs/module_notes.rst``); empty when the lasso's k held no
        near-copies. The rule keeps the groups of a 3 k lasso pool with at least 1 % of the
        pool's importance, largest first, then fills the places left with the forest's other
        groups ranked by their importance at tree weight 1 summed over each group's copies.
    selection_path_ : dict
        The selection for every k = 1..``path_k_max`` (without it: those the k search for
        ``n_features_to_select`` passed through; empty with ``alpha``) from the one forest:
        "k" (the k held), "features" (k -> sorted indices), "names"
        (k -> their column names, or x0, x1, ...), "lambda" (k -> lambda; with
        ``reweight_steps`` each k's lambda is that of its own reweighted costs, so lambdas of
        different k are not on one scale and need not decrease with k), "train_loss" (k -> the
        lasso's loss without the penalty; for a completed k, that of the solution below),
        "exact" (k -> False where no lambda gives k and the entry is the completion ``fit``
        makes, or the near-copy rule's choice), "source" (k -> where the k features come
        from: "lasso", the features of one lasso solution with exactly k; "completed", no
        lambda gives k: the solution below k filled up by ranking the new features of the
        one above; "near_copies", the near-copy rule's one per group from a larger lasso
        pool, taken where the k features hold near-copies: a lasso solution with k features
        exists unless k is in "unreachable"), "val_loss" (None: ControlBurn has no
        validation data), "unreachable" (k -> why no lambda gives exactly k: mostly the one
        tree that enters between two neighbouring solved lambdas brings more new features
        than k needs) and "lambda_max" (of the undiscounted costs).
        ``gpufs.path.selection_path`` and ``gpufs.plotting.plot_selection_path`` read it.
    refit_estimator_ : estimator
        The fitted refit model.
    fit_times_ : dict
        Wall seconds of the fit's phases: bin, forest, select, refit (with a reused forest:
        bin and forest 0, tree_predictions the time to recompute its training predictions).
    forest_reused_ : bool
        True when ``warm_start`` reused the previous fit's forest.
    device_ : str
        "cpu" or "gpu", where the model was fitted.
"""
    + INPUT_ATTRIBUTES_DOC
)


class ControlBurnRegressor(RegressorTargetMixin, RegressorMixin, _BaseControlBurn):
    __doc__ = (
        "ControlBurn feature selection for regression (squared-error forest and lasso).\n"
        + _PARAMS_DOC
    )
    _task = "regression"


class ControlBurnClassifier(ClassifierTargetMixin, ClassifierMixin, _BaseControlBurn):
    __doc__ = (
        "ControlBurn feature selection for classification (logistic lasso for two "
        "classes; multiclass: see ``docs/module_notes.rst``).\n"
        + _PARAMS_DOC
        + "    classes_ : ndarray of shape (n_classes,)\n        The class labels.\n"
    )
    _task = "classification"

    @available_if(_refit_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the refit model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        Xs = self._refit_X(X)
        return self.refit_estimator_.predict_proba(Xs)

    @available_if(_refit_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the refit model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        Xs = self._refit_X(X)
        return self.refit_estimator_.decision_function(Xs)


# the model files' codec of this family (gpufs.io.model_io finds it by class)
model_io.register_codec(ControlBurnCodec, ControlBurnRegressor, ControlBurnClassifier)
