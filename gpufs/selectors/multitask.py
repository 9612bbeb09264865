"""Multitask A-GBM: ``MultiTaskGBFSRegressor`` and ``MultiTaskGBFSClassifier``.

Owns the scikit-learn face of multitask gradient boosted feature selection (Han, Rao,
Sorokina, Subbian, "Scalable Feature Selection for (Multitask) Gradient Boosted Trees",
AISTATS 2020, Section 3 and Algorithm 1): the two input forms (a task-id column, or one
``(X_t, y_t)`` per task), the task labels, one boosted ensemble per task, the shared selection
Omega_G (``selected_features_``) and each task's Omega_t (``selected_features_by_task_``), and
prediction for given tasks. The penalty and the interleaved boosting loop live in
``gpufs.engine.multitask_boosting``; trees come from the one grower (``gpufs.engine.grower``),
parameters, the input
door and the selector interface from the selector base (``selectors._base``).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .._device import resolve_device, to_host
from .._docstrings import INPUT_ATTRIBUTES_DOC, TREE_CATEGORICAL_FEATURES_DOC
from .._params import N_JOBS_CONSTRAINT
from .._threading import honours_n_jobs
from .._warnings import warn_from_caller
from ..backends import get_backend
from ..data import _scales
from ..data._category_codes import plain_scalar
from ..data._input import check_costs, check_groups, check_sample_weight, check_X, check_y
from ..engine.binning import BinMapper
from ..engine.boosting import BoostingParams
from ..engine.grower import TreeParams
from ..engine.multitask_boosting import MultiTaskPenaltyState, fit_multitask_boosting
from ..engine.penalties import PENALTY_SCALINGS
from ..io import model_io
from ._base import (
    DEVICE_CONSTRAINT,
    ClassifierTargetMixin,
    FitData,
    RegressorTargetMixin,
    SelectorBase,
    input_device,
    real_range,
)
from ._boosted import (
    BOOSTING_CONSTRAINTS,
    BoostedClassifierMixin,
    BoostedRegressorMixin,
    cat_guards,
)
from ._multitask_io import MultiTaskGBFSCodec

__all__ = ["MultiTaskGBFSClassifier", "MultiTaskGBFSRegressor"]


def _is_task_list(X, y):
    """The list form: a list/tuple of 2-D tables and a list/tuple of targets of equal length
    (a plain list of rows is an ordinary X: its items are 1-D)."""
    return (
        isinstance(X, (list, tuple))
        and isinstance(y, (list, tuple))
        and len(X) > 0
        and len(X) == len(y)
        and all(len(getattr(x, "shape", np.shape(x))) == 2 for x in X)
    )


def _split_task_column(X, task, required):
    """``task`` given as the name of a column of a data frame X: (X without that column, the
    column). Anything else is returned as it is, except a name that is not a column when
    ``required`` (in ``fit`` a string can only name the task column)."""
    if not isinstance(task, str):
        return X, task
    columns = getattr(X, "columns", None)
    if columns is not None and task in list(columns):
        try:
            rest = X.drop(columns=[task])  # pandas, cudf
        except TypeError:
            rest = X.drop(task)  # polars
        return rest, X[task]
    if required:
        raise ValueError(
            f"task={task!r}: a string names the task-id column of a data frame X, "
            "and X has no such column; give the task of every row as an array, "
            "or the column's name."
        )
    return X, task


def _warn_nothing_selected(ys, ws, xp, n_rounds):
    """The warning of every family when a fit selects no feature, with the reason: a target
    constant (on the rows of positive weight) in every task, or prices no split paid."""
    constant = all(bool(xp.ptp(y if w is None else y[w > 0]) == 0) for y, w in zip(ys, ws))
    why = (
        "the target is constant in every task, so no split can lower the loss"
        if constant
        else f"no split on any feature paid its price in {n_rounds} rounds. Lower mu_G "
        "and mu_t (the prices of a feature new to all tasks and new to one task)"
    )
    warn_from_caller(f"no feature was selected: {why}.", UserWarning)


def _missing(v) -> bool:
    """None, NaN, or a table's null (pandas' NA, whose comparisons have no truth value)."""
    if v is None:
        return True
    try:
        return bool(v != v)
    except (TypeError, ValueError):
        return True


def _task_ids(task, n):
    """The task of each of ``n`` rows -> (sorted distinct ids, int64 codes (n,)); a missing
    id (NaN, None, a null of a table) or ids of mixed types are named, not reported as "y"."""
    from ..data._input import as_array

    labels = np.asarray(to_host(as_array(task, "cpu", "task")))
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"task must give one id per row: {n} rows, got shape {labels.shape}.")
    if labels.dtype.kind == "O":
        missing = np.array([_missing(v) for v in labels], dtype=bool)
    elif labels.dtype.kind in "fc":
        missing = np.isnan(labels)
    else:
        missing = np.zeros(n, dtype=bool)
    if missing.any():
        rows = np.flatnonzero(missing)
        where = (
            f"row {int(rows[0])}"
            if rows.size == 1
            else f"rows {rows[:10].tolist()}" + (" ..." if rows.size > 10 else "")
        )
        raise ValueError(
            f"task has {rows.size} missing value{'s' * (rows.size > 1)} (NaN or "
            f"None), at {where}; every row needs a task id."
        )
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        raise ValueError("task contains infinity; task ids must be labels.")
    if labels.dtype.kind == "c":
        raise ValueError("task is complex; task ids must be labels.")
    try:
        tasks, codes = np.unique(labels, return_inverse=True)
    except TypeError:
        kinds = sorted({type(v).__name__ for v in labels})
        raise ValueError(
            f"task has ids of mixed types ({', '.join(kinds)}); give ids of one "
            "type (for example task.astype(str))."
        ) from None
    return tasks, codes.astype(np.int64).ravel()


_SCORE_DOC = """{metric} of ``predict(X, task=task)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        task : label or array-like of shape (n_samples,)
            The task every row belongs to (one label), or each row's task.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """


class _BaseMultiTaskGBFS(SelectorBase):
    """Shared fit/predict machinery; see MultiTaskGBFSRegressor for the parameters."""

    _parameter_constraints: dict = {
        "mu_G": [real_range(0)],
        "mu_t": [real_range(0), "array-like"],
        "penalty_scaling": [StrOptions(set(PENALTY_SCALINGS))],
        "feature_costs": ["array-like", None],
        "feature_groups": ["array-like", None],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        **BOOSTING_CONSTRAINTS,
        "device": DEVICE_CONSTRAINT,
        "n_jobs": N_JOBS_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        mu_G=0.05,
        mu_t=0.01,
        penalty_scaling="root_sse",
        feature_costs=None,
        feature_groups=None,
        categorical_features="from_dtype",
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
        device="auto",
        n_jobs=None,
        random_state=None,
        verbose=False,
    ):
        self.mu_G = mu_G
        self.mu_t = mu_t
        self.penalty_scaling = penalty_scaling
        self.feature_costs = feature_costs
        self.feature_groups = feature_groups
        self.categorical_features = categorical_features
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
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # --- the two input forms ------------------------------------------------------------
    def _prepare_tasks(self, X, y, task, sample_weight):
        """(FitData over all rows, task codes int64 (n,) on the host, task labels)."""
        if _is_task_list(X, y):
            if task is not None:
                raise ValueError(
                    "task= is for a single X with a task-id column; with lists "
                    "[X_1, ..., X_T], [y_1, ..., y_T] each list entry is a task."
                )
            return self._prepare_list(X, y, sample_weight)
        if isinstance(X, (list, tuple)) and isinstance(y, (list, tuple)) and task is None:
            raise ValueError(
                "the list form needs as many targets as tables, each table 2-D: "
                f"got {len(X)} tables and {len(y)} targets."
            )
        if task is None:
            raise ValueError(
                "give the task of every row (fit(X, y, task=task_ids)) or one "
                "table per task (fit([X_1, ..., X_T], [y_1, ..., y_T]))."
            )
        X, task = _split_task_column(X, task, required=True)
        data = self._prepare_fit(X, y, sample_weight)
        tasks, codes = _task_ids(task, data.X.shape[0])
        return data, codes, tasks

    def _prepare_list(self, Xs, ys, sample_weight):
        """The list form through the same door: every table checked against the first one's
        width and names, then stacked (task t's rows in their order)."""
        n_tasks = len(Xs)
        if sample_weight is None:
            sample_weight = [None] * n_tasks
        elif not isinstance(sample_weight, (list, tuple)) or len(sample_weight) != n_tasks:
            raise ValueError(
                f"with one table per task, sample_weight must be a list of "
                f"{n_tasks} entries (arrays or None)."
            )
        device = resolve_device(self.device)
        backend = get_backend(device)
        xp = backend.xp
        Xc, yc, wc = [], [], []
        for t in range(n_tasks):
            Xt = check_X(
                self,
                Xs[t],
                device=device,
                reset=t == 0,
                **(self._categorical_args() if t == 0 else {}),
            )
            Xc.append(Xt)
            yc.append(check_y(ys[t], Xt.shape[0], device=device))
            wc.append(check_sample_weight(sample_weight[t], Xt.shape[0], device=device))
        counts = [x.shape[0] for x in Xc]
        X = xp.concatenate(Xc, axis=0)
        if len({str(y.dtype.kind) for y in yc}) > 1 and not all(y.dtype.kind in "iuf" for y in yc):
            raise ValueError("the tasks' targets have different kinds of labels.")
        y_input = xp.concatenate(yc)
        w = None
        if any(x is not None for x in wc):
            w = xp.concatenate([xp.ones(n) if x is None else x for n, x in zip(counts, wc)])
        yenc = self._encode_target(y_input)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        data = FitData(
            backend=backend, xp=xp, X=X, y=yenc, y_input=y_input, sample_weight=w, seed=seed
        )
        codes = np.repeat(np.arange(n_tasks, dtype=np.int64), counts)
        return data, codes, np.arange(n_tasks)

    def _resolve_mu_t(self, n_tasks):
        try:
            mu_t = np.asarray(to_host(self.mu_t), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"mu_t must be a number or an array of numbers, one price per task: {exc}"
            ) from None
        if mu_t.ndim == 0:
            mu_t = np.full(n_tasks, float(mu_t))
        if mu_t.shape != (n_tasks,):
            raise ValueError(
                f"mu_t must be a number or one price per task: {n_tasks} tasks, "
                f"got shape {mu_t.shape}."
            )
        if not np.isfinite(mu_t).all() or (mu_t < 0).any():
            raise ValueError("mu_t must be finite and >= 0.")
        if self.penalty_scaling == "root_sse" and (float(self.mu_G) + mu_t >= 1).any():
            t = int(np.argmax(mu_t))
            raise ValueError(
                f"with penalty_scaling='root_sse' the scaled gain of a split is at most 1, so "
                f"mu_G + mu_t must be < 1 (Algorithm 1's condition) or no new feature can ever "
                f"enter: mu_G={float(self.mu_G):g} + mu_t={mu_t[t]:g} for task "
                f"{plain_scalar(self.tasks_[t])!r}."
            )
        return mu_t

    # --- fit ----------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    @honours_n_jobs
    def fit(self, X, y, task=None, sample_weight=None):
        """Fit one penalized boosted ensemble per task, sharing the used-feature set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or list of T such tables
            numpy, pandas, cupy, cudf, polars or pyarrow. NaN marks a missing value. A list
            (with ``y`` a list of the same length) gives one table per task: task t is the
            t-th entry and ``tasks_`` is ``[0, ..., T-1]``.
        y : array-like of shape (n_samples,), or list of T such targets
        task : array-like of shape (n_samples,) or str, default=None
            The task of every row (any labels: ints or strings; ``tasks_`` holds them
            sorted), or the name of X's task-id column when X is a data frame (the column is
            then not a feature). Required unless X and y are lists.
        sample_weight : array-like of shape (n_samples,), or list of T such (or None),
            default=None
            Non-negative row weights.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        data, codes, tasks = self._prepare_tasks(X, y, task, sample_weight)
        self.tasks_ = tasks
        n_tasks = len(tasks)
        mu_t = self._resolve_mu_t(n_tasks)
        d = data.X.shape[1]
        backend, xp = data.backend, data.xp
        costs = check_costs(self.feature_costs, d)
        groups = check_groups(self.feature_groups, d)
        self._objective = self._make_objective()
        Xall, yall, wall = data.X, self._boosting_target(data.y), data.sample_weight
        _scales.check_boosting_scales(self, yall, wall)

        t0 = time.perf_counter()
        # One set of cut points for the shared feature space, from every task's rows (rows of
        # weight 0 place none).
        self.bin_mapper_ = BinMapper(self.max_bins, random_state=data.seed).fit(
            Xall if wall is None or bool((wall > 0).all()) else Xall[wall > 0],
            categories=self.category_codes_,
        )
        Xb = self.bin_mapper_.transform(Xall, backend)
        times = {"bin": time.perf_counter() - t0}
        rows = [xp.asarray(np.flatnonzero(codes == t)) for t in range(n_tasks)]
        Xbs = [Xb[r] for r in rows]
        ys = [yall[r] for r in rows]
        ws = [None if wall is None else wall[r] for r in rows]
        for t, w in enumerate(ws):
            if w is not None and not bool((w > 0).any()):
                raise ValueError(
                    f"every sample weight of task {plain_scalar(tasks[t])!r} is 0: a task "
                    "needs rows to fit."
                )
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
            verbose=bool(self.verbose),
        )
        state = MultiTaskPenaltyState(float(self.mu_G), mu_t, costs, groups, self.penalty_scaling)
        t0 = time.perf_counter()
        result = fit_multitask_boosting(
            backend, Xbs, ys, ws, self._objective, state, self.bin_mapper_, params
        )
        times["boost"] = time.perf_counter() - t0
        self.fit_times_ = times
        self.mu_t_ = mu_t
        self.ensembles_ = result.ensembles
        self.n_estimators_ = int(self.n_estimators)
        self.device_ = data.device
        self.selection_records_ = [r.as_dict() for r in result.records]
        self._set_support(state.shared.order)
        self.selected_features_by_task_ = [np.asarray(p.order, dtype=np.int64) for p in state.tasks]
        self.first_use_tree_by_task_ = np.stack([p.first_use_tree for p in state.tasks])
        self._finish_selection(state.shared.first_use_tree)
        if self.selected_features_.size == 0:
            _warn_nothing_selected(ys, ws, xp, int(self.n_estimators))
        return self

    def _finish_selection(self, shared_first_use):
        """Feature importances (split gains summed over every task's trees) and
        ``selection_path_`` (the features in the order they entered Omega_G, with the round
        and the task whose tree brought each in)."""
        d = self.n_features_in_
        gains = np.zeros(d)
        for ens in self.ensembles_:
            if ens.n_trees:
                s = ens.stacked()
                split = s["feature"] >= 0
                np.add.at(gains, s["feature"][split], s["gain"][split])
        total = gains.sum()
        self.feature_importances_ = gains / total if total > 0 else gains
        per_round = len(self.tasks_) * self.ensembles_[0].n_outputs
        first = np.asarray(shared_first_use, dtype=np.int64)[self.selected_features_]
        rounds = (first // per_round).tolist()
        task_idx = ((first % per_round) // self.ensembles_[0].n_outputs).tolist()
        self.selection_path_ = {
            "k": list(range(1, len(self.selected_features_) + 1)),
            "features": self.selected_features_.tolist(),
            "names": [str(n) for n in self._feature_names()[self.selected_features_]],
            "entry_round": rounds,
            "entry_task": [plain_scalar(self.tasks_[i]) for i in task_idx],
        }

    # --- predict ------------------------------------------------------------------------
    def _task_codes(self, task, n):
        """Task labels -> indices into ``tasks_`` (n,) int64 on the host; a single label
        means every row belongs to that task."""
        labels = to_host(task)
        labels = np.asarray(labels)
        if labels.ndim == 0:
            labels = np.full(n, labels.item() if hasattr(labels, "item") else labels)
        if labels.shape != (n,):
            raise ValueError(
                f"task must be one label or one label per row: {n} rows, got shape {labels.shape}."
            )
        known = np.asarray(self.tasks_)
        try:
            idx = np.searchsorted(known, labels)
            idx = np.clip(idx, 0, len(known) - 1)
            ok = known[idx] == labels
        except TypeError:
            ok = np.zeros(n, dtype=bool)
        if not ok.all():
            bad = labels[~ok][0]
            raise ValueError(
                f"task {plain_scalar(bad)!r} was not seen in fit; the tasks are "
                f"{[plain_scalar(t) for t in known]}."
            )
        return idx.astype(np.int64)

    def _score(self, metric, X, y, task, sample_weight):
        """``metric(y, predict(X, task=task))`` on the host, a float."""
        return float(
            metric(to_host(y), to_host(self.predict(X, task=task)), sample_weight=sample_weight)
        )

    def _raw_predict(self, X, task):
        check_is_fitted(self, "ensembles_")
        if task is None:
            raise ValueError(
                "predict needs task=: the label of the task (for every row) or one label per row."
            )
        X, task = _split_task_column(X, task, required=False)
        device = input_device(X)
        backend = get_backend(device)
        X = check_X(self, X, device=device, reset=False)
        n = X.shape[0]
        codes = self._task_codes(task, n)
        xp = backend.xp
        K = self.ensembles_[0].n_outputs
        out = xp.empty((n, K), dtype=np.float64)
        for t in np.unique(codes):
            r = xp.asarray(np.flatnonzero(codes == t))
            out[r] = self.ensembles_[int(t)].predict_raw(X[r], backend)
        return out


_PARAMS_DOC = (
    """
    Each task grows its own boosted trees on its own rows, in turn (Algorithm 1 of Han, Rao,
    Sorokina and Subbian, "Scalable Feature Selection for (Multitask) Gradient Boosted Trees",
    AISTATS 2020). A split of task t on feature j scores ``gain / divisor - mu_G * cost[j]
    [j not used by any task] - mu_t * cost[j] [j not used by task t]``, so a feature one task
    has paid for is cheaper for every other task and related tasks share their features.

    Parameters
    ----------
    mu_G : float >= 0, default=0.05
        Shared price: paid by a split on a feature no task has used yet.
    mu_t : float >= 0 or array-like of shape (n_tasks,), default=0.01
        Task price: paid by a split on a feature this task has not used yet; one number for
        every task or one per task (in the order of ``tasks_``). With
        ``penalty_scaling="root_sse"``, ``mu_G + mu_t`` must be below 1.
    penalty_scaling : {"root_sse", "none"}, default="root_sse"
        "root_sse" (A-GBM): gains are divided by the largest gain any split of the tree's
        root could reach, so the prices are fractions of the task's residual error. "none":
        prices are in the units of the raw loss reduction.
    feature_costs : array-like of shape (n_features,), default=None
        Non-negative cost of each feature, multiplying both prices; None: every feature costs
        1. Positive costs lie in [1e-100, 1e100].
"""
    + TREE_CATEGORICAL_FEATURES_DOC
    + """\
    feature_groups : array-like of shape (n_features,) of int, default=None
        Group label of each feature; a group counts as used once any member is.
    n_estimators : int >= 1, default=100
        Boosting rounds; each grows one tree per task (one per class per task for more than
        two classes).
    learning_rate : float > 0, default=0.1
        Shrinkage of every leaf value.
    max_depth : int in [1, 16], default=4
        Depth of every tree.
    max_bins : int in [2, 255], default=255
        Value bins per feature, with cut points from every task's rows.
    reg_lambda : float >= 0, default=1.0
        L2 term in the gain and the leaf values.
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
        False uses unit hessians (the paper's setting).
    device : {"auto", "cpu", "gpu"}, default="auto"
        Where ``fit`` runs. Predictions run where their input lives.
    n_jobs : int, default=None
        CPU threads of the fit (scikit-learn's meaning: None or -1 all cores, -2 all but one,
        k at most k).
    random_state : int, RandomState instance or None, default=None
        Seeds the binning subsample.
    verbose : bool, default=False
        Unused; kept for symmetry with the single-task estimators.

    Attributes
    ----------
    tasks_ : ndarray of shape (n_tasks,)
        The task labels, sorted (``[0, ..., T-1]`` for the list form).
    selected_features_ : ndarray of shape (n_selected,), int64
        Omega_G: the features any task uses, in order of first use.
    selected_features_by_task_ : list of n_tasks ndarrays, int64
        Omega_t of each task, in that task's order of first use.
    support_ : ndarray of shape (n_features,), bool
        Mask of ``selected_features_``; ``transform`` keeps these columns.
    first_use_tree_by_task_ : ndarray of shape (n_tasks, n_features), int64
        Index (in the task's own ensemble) of the tree that first used each feature, -1 if
        the task never did.
    feature_importances_ : ndarray of shape (n_features,), float64
        Split gain per feature summed over every task's trees, normalized to sum 1.
    selection_path_ : dict
        "k", "features" and "names" of Omega_G in order of entry, with "entry_round" and
        "entry_task" (the round and the task whose tree brought each feature in).
    selection_records_ : list of n_tasks dicts
        Per task tree: ``tree_column``, ``features_added`` (new to that task),
        ``train_loss`` and ``val_loss`` (NaN: no validation data).
    mu_t_ : ndarray of shape (n_tasks,), float64
        The task prices used.
    ensembles_ : list of n_tasks gpufs.engine.tree.TreeEnsemble
        The fitted trees of each task.
    bin_mapper_ : gpufs.engine.binning.BinMapper
        The cut points of every feature.
    n_estimators_ : int
        Rounds grown.
    fit_times_ : dict
        Wall seconds of the fit's phases: bin, boost.
"""
    + INPUT_ATTRIBUTES_DOC
    + """    device_ : str
        "cpu" or "gpu", where the model was fitted.
"""
)


class MultiTaskGBFSRegressor(
    BoostedRegressorMixin, RegressorTargetMixin, RegressorMixin, _BaseMultiTaskGBFS
):
    __doc__ = (
        "Multitask gradient boosted feature selection for regression (squared error).\n"
        + _PARAMS_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from gpufs import MultiTaskGBFSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(200, 6)) for _ in range(3)]
    >>> y = [2 * x[:, 0] + x[:, 1 + t] + 0.1 * rng.normal(size=200) for t, x in enumerate(X)]
    >>> est = MultiTaskGBFSRegressor(n_estimators=30, mu_t=0.03, device="cpu").fit(X, y)
    >>> sorted(est.selected_features_.tolist())
    [0, 1, 2, 3]
    >>> [sorted(s.tolist()) for s in est.selected_features_by_task_]
    [[0, 1], [0, 2], [0, 3]]
"""
    )

    def score(self, X, y, task=None, sample_weight=None):
        from sklearn.metrics import r2_score

        return self._score(r2_score, X, y, task, sample_weight)

    score.__doc__ = _SCORE_DOC.format(metric="R^2")

    def predict(self, X, task=None):
        """Predicted values of each row's task.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        task : label, array-like of shape (n_samples,), or str
            The task every row belongs to (one label), each row's task, or the name of X's
            task-id column (a string that names a column of a data frame X). Required.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), float64
            cupy for cupy input.
        """
        return self._raw_predict(X, task)[:, 0]


class MultiTaskGBFSClassifier(
    BoostedClassifierMixin, ClassifierTargetMixin, ClassifierMixin, _BaseMultiTaskGBFS
):
    __doc__ = (
        "Multitask gradient boosted feature selection for classification (binary log "
        "loss, or softmax; the classes are shared by all tasks).\n"
        + _PARAMS_DOC
        + """    classes_ : ndarray of shape (n_classes,)
        The class labels of all tasks together.
"""
    )

    def score(self, X, y, task=None, sample_weight=None):
        from sklearn.metrics import accuracy_score

        return self._score(accuracy_score, X, y, task, sample_weight)

    score.__doc__ = _SCORE_DOC.format(metric="Accuracy")

    def decision_function(self, X, task=None):
        """Raw scores of each row's task.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        task : label or array-like of shape (n_samples,)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        raw = self._raw_predict(X, task)
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, X, task=None):
        """Class probabilities of each row's task.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        task : label or array-like of shape (n_samples,)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), float64
        """
        return self._objective.proba(self._raw_predict(X, task))

    def predict(self, X, task=None):
        """Predicted class labels of each row's task.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        task : label or array-like of shape (n_samples,)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self._decode_classes(self.predict_proba(X, task).argmax(axis=1))


# the model files' codec of this family (gpufs.io.model_io finds it by class)
model_io.register_codec(MultiTaskGBFSCodec, MultiTaskGBFSRegressor, MultiTaskGBFSClassifier)
