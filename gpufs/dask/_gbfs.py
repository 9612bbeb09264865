"""``DaskGBFSClassifier`` and ``DaskGBFSRegressor``: GBFS on a Dask cluster.

Owns the scikit-learn face of a distributed GBFS fit: reading Dask collections
(:mod:`gpufs.dask._data`), the shards (:mod:`gpufs.dask._group`), the cut points agreed once
from the single process's own seeded subsample (gathered by global row index, so they are the
single process's cut points), and the hand-over to the single-process estimator's own fit from
binned data (``GBFSRegressor._fit_binned``: the ``mu`` search and its warm start, the rounds
of the one boosting loop ``gpufs.engine.boosting.fit_boosting``, early stopping and the selection
record) with the workers' rows (:class:`~gpufs.dask._rows.ShardRows`) and the driver's
backend (:class:`~gpufs.dask._backend.ClusterBackend`). The fitted estimator has the
attributes, trees and model file of a ``GBFSRegressor`` / ``GBFSClassifier``; its
``predict`` / ``transform`` also take Dask collections (lazily, partition by partition).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import _fit_context, is_classifier
from sklearn.utils import check_random_state

from .._device import shard_device
from .._params import real_range
from ..data._input import check_costs, check_groups, encode_known_classes
from ..data._scales import check_boosting_scale_values
from ..engine.binning import BinMapper
from ..selectors._base import check_weighted_sides, eval_triples, feature_budget
from ..selectors.gbfs import _PARAMS_DOC, GBFSClassifier, GBFSRegressor
from ._backend import ClusterBackend
from ._data import classes_of, load
from ._estimator import DEFAULT_TIMEOUT, DaskEstimatorBase, data_token, warm_key
from ._exact import fsum_from_parts
from ._group import ShardGroup
from ._gt import ShardedRaw
from ._rows import ShardRows
from ._validation import split_validation

__all__ = ["DaskGBFSClassifier", "DaskGBFSRegressor"]


def default_client(client):
    """``client``, or the current ``distributed`` client (``Client()`` sets it)."""
    if client is not None:
        from distributed import Client

        if not isinstance(client, Client):  # "nope" failed later as an AttributeError
            raise TypeError(
                f"client must be a distributed.Client or None (the current "
                f"client); got {type(client).__name__} {client!r:.80}."
            )
        return client
    from distributed import default_client as current

    try:
        return current()
    except ValueError:
        raise ValueError(
            "no Dask client: create one first (from dask.distributed import "
            "Client; client = Client(...)) or pass client= to the estimator."
        ) from None


def check_cluster_params(est, gpu_shards=True):
    """The parameters a distributed fit does not take, refused with what to do instead:
    ``stability_rounds`` (its refits draw half of the rows in one place),
    ``pool_ranking="heldout"`` (so is its held-out split), and
    ``device="gpu"`` where the shards cannot run on a GPU (``gpu_shards`` False: ControlBurn;
    GT-GBM's group tests). Returns the shards' device (``_device.shard_device``)."""
    if getattr(est, "stability_rounds", 0):
        raise ValueError(
            "stability_rounds is not supported by the Dask estimators (its "
            "refits draw half of the rows in one place): use "
            "stability_rounds=0, or the single-process estimator."
        )
    if getattr(est, "pool_ranking", "gain") == "heldout":
        raise ValueError(
            "pool_ranking='heldout' is not supported by the Dask estimators (its "
            "held-out rows are drawn in one place): use pool_ranking='gain', or "
            "the single-process estimator."
        )
    refuse = None
    if not gpu_shards:
        refuse = (
            f"device='gpu': {type(est).__name__} runs its workers' kernels on the CPU "
            "backend (its single-feature trees and lasso are not built for GPU "
            "shards); use device='cpu' or 'auto'."
        )
    elif getattr(est, "split_search", "exact") == "group_testing":
        refuse = (
            "device='gpu' with split_search='group_testing': GT-GBM's group tests run "
            "on the CPU shards only (their per-shard blocked sums are not built for GPU "
            "shards); use device='cpu', or split_search='exact' on GPU shards."
        )
    return shard_device(est.device, refuse)


def bin_on_cluster(
    group, loaded, mapper, categories, evals=(), positive_only=True, keep_raw=False, fit=True
):
    """Fit ``mapper`` on the rows the single process would use (unless not ``fit``: a warm
    start keeps its cut points) and bin every shard (and the shards of the validation groups
    ``evals``); ``categories`` the category codes.

    The rows of positive weight in global order are the single process's ``X[w > 0]`` (GBFS;
    all rows with ``positive_only=False``, as ControlBurn bins); the mapper's own seeded
    subsample (``BinMapper.sample_rows``) picks among them by global index, and those rows
    are gathered from the shards, so ``mapper`` gets exactly the cut points of
    ``BinMapper.fit`` on the whole table. Returns the bytes gathered.
    """
    sample_bytes = _fit_mapper(group, loaded, mapper, categories, positive_only) if fit else 0
    group.phase = "binning"
    group.call("bin", mapper.cuts_padded_, mapper.n_bins_ - 1, keep_raw)
    for ev in evals:
        ev.phase = "binning"
        ev.call("bin", mapper.cuts_padded_, mapper.n_bins_ - 1)
    return sample_bytes


def _fit_mapper(group, loaded, mapper, categories, positive_only):
    """``bin_on_cluster``'s cut points: the gathered sample, fitted; returns its bytes."""
    n_pos = np.array([s.n_pos if positive_only else s.n for s in loaded.summaries], dtype=np.int64)
    pos_off = np.concatenate([[0], np.cumsum(n_pos)])
    idx = mapper.sample_rows(int(pos_off[-1]))
    picks = []
    for i in range(len(loaded.summaries)):
        if idx is None:
            picks.append(None)
        else:
            lo, hi = np.searchsorted(idx, [pos_off[i], pos_off[i + 1]])
            picks.append(idx[lo:hi] - pos_off[i])
    group.phase = "gathering the binning sample"
    got = group.call(
        "sample", per_shard=[([picks[i] for i in parts], positive_only) for parts in group.parts]
    )
    rows = {}
    for parts, block in zip(group.parts, got):
        at = 0
        for i in parts:
            m = n_pos[i] if idx is None else picks[i].shape[0]
            rows[i] = block[at : at + m]
            at += m
    sample = np.concatenate([rows[i] for i in sorted(rows)])
    mapper.fit(sample, categories=categories)
    return int(sample.nbytes)


def target_kind(est):
    """How a shard encodes the target for the boosting kernels (``_boosting_target``)."""
    if not is_classifier(est):
        return "float"
    return "binary" if len(est.classes_) == 2 else "codes"


class _DaskGBFSMixin(DaskEstimatorBase):
    """The distributed ``fit`` and the Dask-aware ``predict`` / ``transform``."""

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
        pool_ranking="gain",
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
        client=None,
        timeout=DEFAULT_TIMEOUT,
    ):
        super().__init__(
            mu=mu,
            penalty_scaling=penalty_scaling,
            feature_costs=feature_costs,
            feature_groups=feature_groups,
            categorical_features=categorical_features,
            n_features_to_select=n_features_to_select,
            tol=tol,
            stability_rounds=stability_rounds,
            pool_ranking=pool_ranking,
            split_search=split_search,
            gt_s=gt_s,
            gt_delta=gt_delta,
            gt_subsets=gt_subsets,
            n_estimators=n_estimators,
            learning_rate=learning_rate,
            max_depth=max_depth,
            max_bins=max_bins,
            reg_lambda=reg_lambda,
            min_child_weight=min_child_weight,
            min_split_gain=min_split_gain,
            hessian=hessian,
            cat_smooth=cat_smooth,
            cat_l2=cat_l2,
            min_data_per_group=min_data_per_group,
            max_cat_threshold=max_cat_threshold,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            warm_start=warm_start,
            device=device,
            n_jobs=n_jobs,
            random_state=random_state,
            verbose=verbose,
        )
        self.client = client
        self.timeout = timeout

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, sample_weight_eval_set=None):
        """Fit on a Dask cluster; the same model as the single-process ``fit`` on
        ``X.compute()``, bit for bit.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features) or dask.dataframe.DataFrame
            Partitions stay on the workers that compute them; NaN marks a missing value.
        y : dask.array.Array of shape (n_samples,), dask Series or one-column DataFrame
            Partitioned like X (the same rows in each partition).
        sample_weight : like y, default=None
        eval_set : tuple (X_val, y_val) or list of such tuples of Dask collections
            Validation data, as in the single-process ``fit`` (early stopping watches the
            last pair).
        sample_weight_eval_set : list of Dask collections or None, default=None

        Returns
        -------
        self : object
        """
        device = check_cluster_params(self)
        self._check_validation_params(eval_set)
        client = default_client(self.client)
        timeout = float(self.timeout)
        classify = is_classifier(self)
        t0 = time.perf_counter()
        loaded = load(
            client,
            X,
            y,
            sample_weight,
            classify=classify,
            timeout=timeout,
            estimator=self,
            device=device,
        )
        d = loaded.n_features
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        costs = check_costs(self.feature_costs, d)
        groups = check_groups(self.feature_groups, d)
        if classify:
            self.classes_ = classes_of(loaded.summaries)
        self._objective = self._make_objective()
        weighted = sample_weight is not None
        self._check_scales(loaded, weighted)
        evals_loaded = self._load_evals(client, eval_set, sample_weight_eval_set, timeout, device)
        split_bytes = 0
        if self.validation_fraction is not None:  # the rows one process holds out
            loaded, held, split_bytes = split_validation(
                client,
                loaded,
                self.validation_fraction,
                seed,
                self.classes_ if classify else None,
                timeout,
            )
            if weighted:
                check_weighted_sides(
                    self.validation_fraction,
                    [(part.n, sum(p.n_pos for p in part.summaries)) for part in (loaded, held)],
                )
            evals_loaded = [(held, weighted, "the validation_fraction rows")]
        # warm_start on the same data (its Dask token) and parameters (all but
        # n_features_to_select and tol): the cut points and earlier mu probes are reused
        key = (
            warm_key(self, data_token(X, y, sample_weight), ("n_features_to_select", "tol"))
            if self.warm_start
            else None
        )
        warm = key is not None and getattr(self, "_warm_key_", None) == key
        history = list(getattr(self, "_mu_history_", [])) if warm else []
        group_testing = self.split_search == "group_testing"
        groups_open = []
        try:
            group = ShardGroup(client, loaded, timeout, self.n_jobs, device=device)
            groups_open.append(group)
            kind = target_kind(self)
            classes = getattr(self, "classes_", None)
            group.call("set_target", classes, kind)
            evals = []
            for lv, w_val, what in evals_loaded:
                g = ShardGroup(client, lv, timeout, self.n_jobs, what=what, device=device)
                groups_open.append(g)
                g.call("set_target", classes, kind)
                evals.append(ShardRows(g, lv.n, d, w_val))
            if not warm:
                self.bin_mapper_ = BinMapper(self.max_bins, random_state=seed)
            sample_bytes = bin_on_cluster(
                group,
                loaded,
                self.bin_mapper_,
                self.category_codes_,
                [e.group for e in evals],
                keep_raw=group_testing,
                fit=not warm,
            )
            times = {"bin": time.perf_counter() - t0}
            backend = ClusterBackend(group, self.bin_mapper_.n_bins_)
            budget = feature_budget(self.n_features_to_select, self.tol, d)
            gt = None
            if group_testing:  # the standardized columns, then the float rows are dropped
                gt = self._group_test_search(
                    ShardedRaw(group, d), None, d, budget.asked, seed, backend, times
                )
                group.defer("drop_raw")
            rows = ShardRows(
                group,
                loaded.n,
                d,
                weighted,
                backend,
                unit_hessian=not self.hessian,
                divisor=self.penalty_scaling == "root_sse",
            )
            before = (
                group.bytes_sent,
                group.bytes_received,
                group.calls,
                group.bytes_between_workers,
                group.reductions,
                group.reduce_seconds,
            )
            # the fitted device_ is the backend's (ClusterBackend.fitted_device)
            self._fit_binned(
                backend,
                rows,
                evals,
                costs,
                groups,
                times,
                warm=(key, history),
                gt=gt,
                budget=budget,
            )
            self.cluster_ = {
                "workers": list(group.addresses),
                "partitions": [list(p) for p in group.parts],
                "bytes_to_workers": int(group.bytes_sent),
                "bytes_from_workers": int(group.bytes_received),
                "bytes_between_workers": int(group.bytes_between_workers),
                "binning_sample_bytes": sample_bytes,
                "validation_split_bytes": split_bytes,
                "calls": int(group.calls),
                "boost_bytes_to_workers": int(group.bytes_sent - before[0]),
                "boost_bytes_from_workers": int(group.bytes_received - before[1]),
                "boost_calls": int(group.calls - before[2]),
                "boost_bytes_between_workers": int(group.bytes_between_workers - before[3]),
                "boost_reductions": int(group.reductions - before[4]),
                "boost_reduce_seconds": group.reduce_seconds - before[5],
                "histogram_slots": int(backend.layout.n_slots),
                "recoveries": [r for g in groups_open for r in g.recoveries],
                "shard_backends": group.call("backend_name"),
            }
        finally:
            for g in groups_open:
                g.close()
        return self

    def _load_evals(self, client, eval_set, sample_weight_eval_set, timeout, device="cpu"):
        """The ``eval_set`` pairs' partitions, checked against the training data: a list of
        (Loaded, weighted, name)."""
        classify = is_classifier(self)
        pairs = eval_triples(eval_set, sample_weight_eval_set)
        out = []
        for i, (Xv, yv, wv) in enumerate(pairs):
            what = "eval_set" if len(pairs) == 1 else f"eval_set[{i}]"
            lv = load(
                client,
                Xv,
                yv,
                wv,
                classify=classify,
                timeout=timeout,
                estimator=self,
                reset=False,
                what=what,
                device=device,
            )
            if classify:
                for s in lv.summaries:
                    encode_known_classes(s.labels, self.classes_, what)
            out.append((lv, wv is not None, what))
        return out

    def _check_scales(self, loaded, weighted):
        """``_scales.check_boosting_scales`` from the partitions' summaries."""
        S = [s for s in loaded.summaries if s.n]
        W = fsum_from_parts(s.w_sum for s in S) if weighted else float(loaded.n)
        w_max = max(s.w_max for s in S) if weighted else 1.0
        R = None if is_classifier(self) else (max(s.y_max for s in S) - min(s.y_min for s in S))
        check_boosting_scale_values(self, loaded.n, W, w_max, R)


_CLUSTER_PARAMS_DOC = """    client : distributed.Client or None, default=None
        The cluster to fit on (None: the current client, the last ``Client()`` created).
    timeout : float > 0, default=600
        Seconds any one wait on the workers may take (loading the partitions, one tree
        level, rebuilding a lost worker's shard, ...); past it the fit stops with an error
        naming the step and the workers that did not answer. A worker lost mid-fit is
        replaced: Dask recomputes its partitions, a new shard replays what the lost one had
        done, and the fit goes on with the same model (``cluster_["recoveries"]`` lists
        them); only partitions that cannot be recomputed (scattered data) stop the fit.
"""

_CONSTRAINTS = {"client": "no_validation", "timeout": [real_range(0, closed="neither")]}

_CLASSES_DOC = """    classes_ : ndarray of shape (n_classes,)
        The class labels.
"""

_GBFS_CLUSTER_DOC = """    cluster_ : dict
        The workers and partitions of the fit, the array bytes sent each way, and
        ``"shard_backends"``: each shard's backend ("cpu" or "gpu").
"""


def dask_doc(summary, params_doc, attributes=""):
    """A Dask estimator's docstring: ``summary``, then the single-process ``params_doc`` with
    the cluster's parameters (``client``, ``timeout``) before its Attributes, and
    ``attributes`` appended to them."""
    params_doc = params_doc.replace(  # the held-out split is drawn in one place: refused
        'pool_ranking : {"heldout", "gain"}, default="heldout"',
        'pool_ranking : {"heldout", "gain"}, default="gain"\n        On a cluster "gain" only '
        '("heldout" is refused). In one process:',
        1,
    )
    return (
        summary
        + "\n"
        + params_doc.replace("    Attributes\n", _CLUSTER_PARAMS_DOC + "\n    Attributes\n", 1)
        + attributes
    )


class DaskGBFSRegressor(_DaskGBFSMixin, GBFSRegressor):
    __doc__ = dask_doc(
        "Gradient Boosted Feature Selection for regression on a Dask cluster: "
        "the model of ``GBFSRegressor`` on the same rows, bit for bit.",
        _PARAMS_DOC,
        _GBFS_CLUSTER_DOC,
    )
    _parameter_constraints = {**GBFSRegressor._parameter_constraints, **_CONSTRAINTS}


class DaskGBFSClassifier(_DaskGBFSMixin, GBFSClassifier):
    __doc__ = dask_doc(
        "Gradient Boosted Feature Selection for classification on a Dask "
        "cluster: the model of ``GBFSClassifier`` on the same rows, bit for bit.",
        _PARAMS_DOC,
        _CLASSES_DOC + _GBFS_CLUSTER_DOC,
    )
    _parameter_constraints = {**GBFSClassifier._parameter_constraints, **_CONSTRAINTS}
