"""Multitask A-GBM: the shared and per-task used sets, and the interleaved boosting loop.

Owns the penalty of multitask A-GBM (Han, Rao, Sorokina, Subbian, "Scalable Feature Selection
for (Multitask) Gradient Boosted Trees", AISTATS 2020, Section 3, loss (2) and Algorithm 1)
and the loop that grows each task's trees in turn.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._threading import thread_limit
from .boosting import BoostingParams, SelectionRecord
from .grower import grow_tree_packed
from .penalties import PenaltyState
from .quantize import exact_mean, prepare_gradients
from .tree import TreeEnsemble

__all__ = ["MultiTaskPenaltyState", "MultiTaskResult", "TaskPenaltyState", "fit_multitask_boosting"]


class TaskPenaltyState(PenaltyState):
    """Omega_t of one task, with the shared Omega_G's price added to its penalty vector.

    ``used``, ``order`` and ``first_use_tree`` are task t's (tree indices of task t's own
    ensemble); ``shared`` is the :class:`gpufs.engine.penalties.PenaltyState` of Omega_G, whose
    ``first_use_tree`` counts the trees of all tasks in the order they were grown.

    Parameters
    ----------
    shared : PenaltyState
        Omega_G and its price ``mu_G`` (same costs, groups and scaling).
    mu_t : float >= 0
        This task's price.
    """

    def __init__(self, shared: PenaltyState, mu_t: float):
        super().__init__(mu_t, shared.costs, shared.groups, shared.scaling, None)
        self.shared = shared
        self.global_tree_index = 0

    def penalty_vector(self) -> np.ndarray:
        """The penalty of a split on each feature for this task now.

        Returns
        -------
        ndarray of shape (n_features,), float64
            ``mu_G * cost`` where Omega_G does not cover the feature's group, plus
            ``mu_t * cost`` where Omega_t does not.
        """
        return self.shared.penalty_vector() + super().penalty_vector()

    def admit(self, features, tree_index: int) -> list[int]:
        """Put features into Omega_t and Omega_G.

        Parameters
        ----------
        features : iterable of int
        tree_index : int
            The tree of this task's ensemble (recorded in ``first_use_tree``).

        Returns
        -------
        list of int
            The features new to this task.
        """
        new = super().admit(features, tree_index)
        self.shared.admit(new, self.global_tree_index)
        return new


class MultiTaskPenaltyState:
    """Omega_G and every task's Omega_t.

    Parameters
    ----------
    mu_G : float >= 0
        Shared price: a feature no task has used yet pays it.
    mu_t : ndarray of shape (n_tasks,), float64 >= 0
        Each task's price: a feature this task has not used yet pays it.
    costs : ndarray of shape (n_features,), float64 >= 0
    groups : ndarray of shape (n_features,), int32
        Group label 0..n_groups-1 of each feature.
    scaling : {"none", "root_sse"}, default="root_sse"
    """

    def __init__(self, mu_G, mu_t, costs, groups, scaling="root_sse"):
        self.shared = PenaltyState(mu_G, costs, groups, scaling, None)
        self.scaling = scaling
        self.tasks = [TaskPenaltyState(self.shared, float(m)) for m in np.asarray(mu_t, float)]

    def task(self, t: int) -> TaskPenaltyState:
        """The penalty state the grower uses for a task's trees.

        Parameters
        ----------
        t : int
            The task.

        Returns
        -------
        TaskPenaltyState
        """
        return self.tasks[t]


@dataclass
class MultiTaskResult:
    """What :func:`fit_multitask_boosting` returns.

    Parameters
    ----------
    ensembles : list of TreeEnsemble
        Every task's ensemble.
    records : list of SelectionRecord
        Every task's selection record (one entry per tree of that task).
    """

    ensembles: list
    records: list


def fit_multitask_boosting(
    backend,
    Xbs,
    ys,
    ws,
    objective,
    state: MultiTaskPenaltyState,
    bin_mapper,
    params: BoostingParams,
) -> MultiTaskResult:
    """Algorithm 1: boosting rounds, each growing one tree (per output column) per task.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Xbs : list of ndarray of shape (n_t, n_features), uint8
        Every task's rows, binned with ``bin_mapper``, on the backend's device.
    ys : list of ndarray of shape (n_t,)
        Every task's float64 targets or int32 class codes.
    ws : list of (ndarray of shape (n_t,), float64, or None)
        Every task's sample weights.
    objective : SquaredError, Logistic or Softmax
        Shared by all tasks.
    state : MultiTaskPenaltyState
        Omega_G and the Omega_t grow in place.
    bin_mapper : BinMapper
    params : BoostingParams
        ``n_iter_no_change`` is ignored: there is no validation data.

    Returns
    -------
    MultiTaskResult
    """
    with thread_limit(params.n_jobs):
        return _fit(backend, Xbs, ys, ws, objective, state, bin_mapper, params)


def _fit(backend, Xbs, ys, ws, objective, state, bin_mapper, params):
    xp = backend.xp
    n_tasks = len(Xbs)
    d = Xbs[0].shape[1]
    n_bins = xp.asarray(bin_mapper.n_bins_)
    K = objective.n_outputs(getattr(objective, "n_classes", 0))
    divisor = state.scaling == "root_sse"
    ensembles, raws, datas, records = [], [], [], []
    for t in range(n_tasks):
        base = np.asarray(objective.init_score(ys[t], ws[t]), dtype=np.float64)
        ensembles.append(
            TreeEnsemble(
                max_depth=params.tree.max_depth,
                n_features=d,
                base_score=base,
                is_categorical=getattr(bin_mapper, "is_categorical_", None),
            )
        )
        raws.append(xp.tile(xp.asarray(base), (Xbs[t].shape[0], 1)))
        datas.append(backend.prepare_binned(Xbs[t]))
        records.append(SelectionRecord())
    grown_so_far = 0
    for it in range(params.n_estimators):
        for t in range(n_tasks):
            G, Hs, terms = backend.round_gradients(objective.name, raws[t], ys[t])
            if it > 0:
                records[t].train_loss.extend([exact_mean(terms, ws[t])] * K)
            pen = state.task(t)
            for k in range(K):
                prep = prepare_gradients(
                    backend, G[k], Hs[k], ws[t], unit_hessian=not params.hessian, divisor=divisor
                )
                pen.global_tree_index = grown_so_far
                grown = grow_tree_packed(
                    backend,
                    datas[t],
                    prep,
                    n_bins,
                    bin_mapper,
                    pen,
                    params.tree,
                    ensembles[t].n_trees,
                )
                grown.add_to(raws[t][:, k])
                ensembles[t].append(grown.tree, k)
                records[t].tree_column.append(k)
                records[t].features_added.append(grown.new_features)
                records[t].val_loss.append(np.nan)
                grown_so_far += 1
    for t in range(n_tasks):
        if ensembles[t].n_trees:
            records[t].train_loss.extend(
                [objective.loss(raws[t], ys[t], ws[t], backend=backend)] * K
            )
    return MultiTaskResult(ensembles=ensembles, records=records)
