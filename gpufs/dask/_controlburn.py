"""``DaskControlBurnClassifier`` and ``DaskControlBurnRegressor``: ControlBurn on a cluster.

Owns the scikit-learn face of a distributed ControlBurn fit (Liu, Xie, Udell, "ControlBurn:
Feature Selection by Sparse Forests", KDD 2021). The binned matrix stays in the workers; every
tree of the forest is grown across them the way a GBFS tree is (summed int64 histograms,
decisions made once on the driver, :class:`~gpufs.dask._backend.ClusterBackend`), by the
unchanged forest algorithms of ``gpufs.forest`` running on the driver. What the forest keeps
per row lives on the driver, as the lasso needs it there: the encoded target and the weights
(gathered once), each tree's fixed-point gradients (sent to the workers, 16 bytes a row) and
each tree's leaf per row (gathered, 4 bytes a row), from which the driver fills the
tree-by-row prediction matrix ``A`` exactly as the single process does. The lasso
(``gpufs.lasso``) then runs on ``A`` on the driver, and the refit is a Dask GBFS fit on the
selected columns. The answers are the single-process estimator's, bit for bit.

Why the trees are grown across the workers rather than whole trees per worker: the forest
is sequential (each bag member is decided by the convergence rule after the previous one, and
each round starts from the previous round's forest), so whole trees on separate workers would
need speculative bag members beyond the rule's stopping point and a copy of the whole binned
matrix on every worker; growing each tree across the workers keeps one copy of the data and
splits each tree's histogram work by rows. ``bench/bench_dask.py`` measures the cost per tree:
at 200,000 x 100 rows on a 2-core machine one worker grew the forest's trees at 1.03 times the
single process's time per tree (3.2 MB of gradients out and 6.4 MB of histograms and leaves
back per tree); more workers on the same two cores only add overhead (1.6 times with 2, 3.0
times with 4), as they would for whole trees too.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import _fit_context, clone, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import has_fit_parameter

from ..data import _scales
from ..data._input import check_costs, check_groups
from ..engine.binning import BinMapper
from ..selectors._base import feature_budget
from ..selectors._controlburn_fit import ForestData
from ..selectors._near_copies import column_correlation
from ..selectors.controlburn import _PARAMS_DOC, ControlBurnClassifier, ControlBurnRegressor
from ._backend import ClusterBackend, ShardedBins
from ._data import classes_of, encoded_columns, load
from ._estimator import DEFAULT_TIMEOUT, DaskEstimatorBase, data_token
from ._gbfs import (
    _CLASSES_DOC,
    _CONSTRAINTS,
    DaskGBFSClassifier,
    DaskGBFSRegressor,
    bin_on_cluster,
    check_cluster_params,
    dask_doc,
    default_client,
)
from ._group import ShardGroup

__all__ = ["DaskControlBurnClassifier", "DaskControlBurnRegressor"]


class _DaskControlBurnMixin(DaskEstimatorBase):
    """The distributed ``fit`` and the Dask-aware predictions."""

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
        client=None,
        timeout=DEFAULT_TIMEOUT,
    ):
        super().__init__(
            n_features_to_select=n_features_to_select,
            alpha=alpha,
            forest_method=forest_method,
            tree_type=tree_type,
            max_depth=max_depth,
            max_features=max_features,
            sparse_mu=sparse_mu,
            n_tail=n_tail,
            tol=tol,
            max_trees_per_round=max_trees_per_round,
            min_rounds=min_rounds,
            max_bins=max_bins,
            min_child_weight=min_child_weight,
            honest_leaves=honest_leaves,
            oob_prune=oob_prune,
            feature_costs=feature_costs,
            feature_groups=feature_groups,
            categorical_features=categorical_features,
            group_costs=group_costs,
            sketch=sketch,
            sketch_size=sketch_size,
            reweight_steps=reweight_steps,
            path_k_max=path_k_max,
            refit_estimator=refit_estimator,
            warm_start=warm_start,
            device=device,
            n_jobs=n_jobs,
            random_state=random_state,
            verbose=verbose,
        )
        self.client = client
        self.timeout = timeout

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None):
        """Grow the forest across the cluster, select with the lasso, refit on the cluster;
        the same model as the single-process ``fit`` on ``X.compute()``, bit for bit.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features) or dask.dataframe.DataFrame
        y : dask.array.Array of shape (n_samples,), dask Series or one-column DataFrame
            Partitioned like X.
        sample_weight : like y, default=None

        Returns
        -------
        self : object
        """
        self._check_params()
        check_cluster_params(self, gpu_shards=False)
        import dask.array as dask_array

        client = default_client(self.client)
        timeout = float(self.timeout)
        classify = is_classifier(self)
        t0 = time.perf_counter()
        loaded = load(
            client, X, y, sample_weight, classify=classify, timeout=timeout, estimator=self
        )
        d = loaded.n_features
        if self.alpha is None:  # a k above d: said now, before the forest and the lasso
            feature_budget(self.n_features_to_select, None, d)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        costs = check_costs(self.feature_costs, d)
        groups_lasso, group_costs = self._group_costs(self.feature_groups, d)
        groups_forest = check_groups(self.feature_groups, d)
        n_classes = 0
        if classify:
            self.classes_ = classes_of(loaded.summaries)
            n_classes = len(self.classes_)
        if self.sketch not in (None, "rows") and n_classes == 2:
            raise ValueError(
                f"sketch={self.sketch!r} is defined for the squared loss only; a "
                "binary classifier solves a logistic lasso: use sketch='rows'."
            )
        key = self._dask_forest_key(data_token(X, y, sample_weight), costs, groups_forest)
        forest = getattr(self, "forest_", None) if self.warm_start else None
        reuse = forest is not None and getattr(self, "_forest_key_", None) == key
        group = ShardGroup(client, loaded, timeout, self.n_jobs)
        try:
            group.call(
                "set_target", getattr(self, "classes_", None), "codes" if classify else "float"
            )
            y_enc, w = self._gather_target(group, loaded.n, sample_weight is not None)
            _scales.check_target_scale(self, y_enc, w)
            _scales.check_classifier_weights(self, w)
            times = {}
            if reuse:
                # warm_start on the same data (its Dask token) and forest parameters: the
                # forest does not depend on k; only its predictions on the rows are redone,
                # by the shards on their float rows, as the single process does
                t1 = time.perf_counter()
                forest.A = self._tree_predictions(group, forest, loaded.n)
                times["bin"], times["forest"] = 0.0, 0.0
                times["tree_predictions"] = time.perf_counter() - t1
                bin_mapper = self.bin_mapper_
            else:
                forest = None
                bin_mapper = BinMapper(self.max_bins, random_state=seed)
                bin_on_cluster(group, loaded, bin_mapper, self.category_codes_, positive_only=False)
                times["bin"] = time.perf_counter() - t0
            result = self._fit_step(
                ForestData(
                    ClusterBackend(group, bin_mapper.n_bins_),
                    ShardedBins(loaded.n, d),
                    y_enc,
                    w,
                    n_classes,
                    costs,
                    groups_forest,
                    groups_lasso,
                    group_costs,
                    seed,
                    bin_mapper,
                    corr_of=lambda features: column_correlation(
                        encoded_columns(self, X, features, loaded.dtype), dask_array
                    ),
                ),
                forest,
            )
            times.update(result.times)
            # the driver's lasso and forest decisions run on the CPU
            self._set_fit_result(result, bin_mapper, key, reuse, "cpu")
            cluster = {
                "workers": list(group.addresses),
                "partitions": [list(p) for p in group.parts],
                "bytes_to_workers": int(group.bytes_sent),
                "bytes_from_workers": int(group.bytes_received),
                "bytes_between_workers": int(group.bytes_between_workers),
                "calls": int(group.calls),
                "recoveries": list(group.recoveries),
            }
        finally:
            group.close()
        self.cluster_ = cluster
        t0 = time.perf_counter()
        self.refit_estimator_ = self._refit_cluster(
            X, y, sample_weight, y_enc, w, seed, loaded.dtype
        )
        times["refit"] = time.perf_counter() - t0
        self.fit_times_ = times
        return self

    def _dask_forest_key(self, token, costs, groups):
        """``_forest_key`` of a distributed fit: what the forest depends on, with the data's
        Dask token in place of the single process's sums over the rows."""
        seed = self.random_state if isinstance(self.random_state, int) else None
        return (
            "dask",
            self._forest_params(),
            int(self.max_bins),
            seed,
            token,
            tuple(np.asarray(costs).tolist()),
            tuple(np.asarray(groups).tolist()),
        )

    def _tree_predictions(self, group, forest, n):
        """``forest.tree_predictions`` of every row, (n, n_trees) float64 on the driver in
        global order, each shard predicting its own float rows."""
        group.phase = "the kept forest's predictions (warm start)"
        A = np.empty((n, forest.n_trees), np.float64)
        for rows, block in zip(group.rows, group.call("tree_predictions", forest)):
            A[rows] = block
        return A

    def _gather_target(self, group, n, weighted):
        """The encoded target and the weights of every row, on the driver, in global order."""
        group.phase = "gathering the target"
        got = group.call("target")
        y = np.empty(n, dtype=got[0][0].dtype)
        w = np.empty(n, np.float64) if weighted else None
        for rows, (yi, wi) in zip(group.rows, got):
            y[rows] = yi
            if weighted:
                w[rows] = wi
        return y, w

    def _refit_cluster(self, X, y, sample_weight, y_enc, w, seed, dtype):
        """``ControlBurn._refit`` on the cluster, returning the fitted model: a Dask GBFS fit on
        the selected columns as
        the input door converted them (category codes for categorical columns, split as
        categories again: the single process's default), or the given ``refit_estimator`` on
        those columns gathered to the driver."""
        idx = np.sort(self.selected_features_)
        if idx.size == 0:
            from sklearn.dummy import DummyClassifier, DummyRegressor

            y_host = self.classes_[y_enc] if is_classifier(self) else y_enc
            est = (
                DummyRegressor()
                if self._task == "regression"
                else DummyClassifier(strategy="prior")
            )
            est.fit(np.zeros((y_enc.shape[0], 1)), y_host, sample_weight=w)
            return est
        Xs = encoded_columns(self, X, idx, dtype)
        cat = np.flatnonzero(self.is_categorical_[idx])
        if self.refit_estimator is None:
            cls = DaskGBFSRegressor if self._task == "regression" else DaskGBFSClassifier
            est = cls(
                mu=0.0,
                random_state=seed,
                categorical_features=cat,
                client=self.client,
                timeout=self.timeout,
            )
            if sample_weight is not None:
                est.fit(Xs, y, sample_weight=sample_weight)
            else:
                est.fit(Xs, y)
        else:
            import dask

            est = clone(self.refit_estimator)
            if "categorical_features" in est.get_params(deep=False):
                est.set_params(categorical_features=cat)
            Xh, yh = dask.compute(Xs, y)
            yh = self.classes_[y_enc] if is_classifier(self) else yh
            if w is not None and has_fit_parameter(est, "sample_weight"):
                est.fit(np.asarray(Xh), np.asarray(yh), sample_weight=w)
            else:
                est.fit(np.asarray(Xh), np.asarray(yh))
        return est


_CLUSTER_DOC = """    cluster_ : dict
        The workers and partitions of the fit, the array bytes sent each way, the calls and
        the recoveries from lost workers.
"""


class DaskControlBurnRegressor(_DaskControlBurnMixin, ControlBurnRegressor):
    __doc__ = dask_doc(
        "ControlBurn feature selection for regression on a Dask cluster: the "
        "model of ``ControlBurnRegressor`` on the same rows, bit for bit.",
        _PARAMS_DOC,
        _CLUSTER_DOC,
    )
    _parameter_constraints = {**ControlBurnRegressor._parameter_constraints, **_CONSTRAINTS}


class DaskControlBurnClassifier(_DaskControlBurnMixin, ControlBurnClassifier):
    __doc__ = dask_doc(
        "ControlBurn feature selection for classification on a Dask cluster: "
        "the model of ``ControlBurnClassifier`` on the same rows, bit for bit.",
        _PARAMS_DOC,
        _CLASSES_DOC + _CLUSTER_DOC,
    )
    _parameter_constraints = {**ControlBurnClassifier._parameter_constraints, **_CONSTRAINTS}
