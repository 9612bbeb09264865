"""The boosting loop shared by every boosted selector.

Owns: the rounds of gradient boosting on binned rows (gradients -> fixed point
-> one tree per output column -> raw-score update from the grower's row partition), the
per-tree selection record, validation scoring and early stopping, and the progress bar.
Device-agnostic: the backend and its array namespace do all array work.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .._threading import thread_limit
from .binning import BinMapper
from .grower import TreeParams, grow_tree_packed
from .quantize import exact_mean, prepare_gradients
from .tree import TreeEnsemble


@dataclass
class BoostingParams:
    """Hyperparameters of the boosting loop.

    Parameters
    ----------
    n_estimators : int, default=100
        Rounds (one tree per output column each).
    tree : TreeParams
        Hyperparameters of every tree.
    hessian : bool, default=True
        Use the objective's hessians; False makes every hessian 1.
    n_iter_no_change : int or None, default=None
        Stop when the validation loss has not improved for this many rounds.
    verbose : bool, default=False
        Show a progress bar.
    n_jobs : int or None, default=None
        Threads of the fit (scikit-learn's meaning).
    """

    n_estimators: int = 100
    tree: TreeParams = field(default_factory=TreeParams)
    hessian: bool = True
    n_iter_no_change: int | None = None
    verbose: bool = False
    n_jobs: int | None = None


@dataclass
class SelectionRecord:
    """What each tree did, one entry per tree in every list.

    Parameters
    ----------
    tree_column : list of int
        The output column the tree fits.
    features_added : list of list of int
        The features the tree brought into Omega, in order.
    train_loss : list of float
        The training loss after the tree's round.
    val_loss : list of float
        The validation loss after the tree's round (NaN without a validation set).
    """

    tree_column: list = field(default_factory=list)
    features_added: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)

    def as_dict(self) -> dict:
        """The record as a dict of plain lists (the four fields by name).

        Returns
        -------
        dict
        """
        return {
            "tree_column": list(self.tree_column),
            "features_added": [list(f) for f in self.features_added],
            "train_loss": list(self.train_loss),
            "val_loss": list(self.val_loss),
        }


@dataclass
class BoostingCheckpoint:
    """A boosting fit's state at the start of a round.

    A fit that resumes from it (``fit_boosting(resume=...)``) grows the same trees as one that
    ran those rounds itself, as long as its penalty state would have made the same decisions
    in them (the exact-k search's final fit: see ``selectors._mu_search``).

    Parameters
    ----------
    rounds : int
        The round whose start this is.
    trees, tree_column : list
        The fit's own append-only lists of trees and their output columns, of which the first
        ``rounds * n_outputs`` entries are the checkpoint's (taking a checkpoint copies no
        tree).
    raw : object
        A copy of the training raw scores then (``BoostingRows.snapshot_raw``: an array on
        the backend's device for :class:`DeviceRows`).
    record : SelectionRecord
        The fit's selection record (the same append-only rule).
    penalty : dict
        Omega then (``PenaltyState.snapshot``).
    """

    rounds: int
    trees: list
    tree_column: list
    raw: object
    record: SelectionRecord
    penalty: dict


class BoostingRows:
    """The rows of a boosting fit, as the loop (``fit_boosting``) reads and changes them.

    The loop does all its per-row work through these methods and its backend: the binned
    matrix the grower reads, the starting score, the raw scores (one column per output), the
    round's gradients and losses, and the predictions on validation rows.
    :class:`DeviceRows` implements them on arrays of one device; ``gpufs.dask`` on the rows
    that a cluster's workers hold. An implementation must give the loop the same bits as
    :class:`DeviceRows` on the same rows, in any order of the rows.

    Attributes
    ----------
    shape : tuple of int
        (n_samples, n_features).
    w : object
        The weights the loop passes to ``quantize.prepare_gradients`` (the backend's
        ``gradient_extremes`` / ``quantize_gradients``): None for unweighted rows, or where
        the backend applies the rows' weights itself (a cluster's workers).
    """

    shape: tuple = (0, 0)
    w: object = None

    def __init_subclass__(cls, **kwargs):
        # An implementation's methods document nothing of their own: they take the
        # protocol's docstrings, so every implementation reads the same in the API docs.
        super().__init_subclass__(**kwargs)
        for name, fn in vars(cls).items():
            proto = vars(BoostingRows).get(name)
            if callable(fn) and fn.__doc__ is None and proto is not None:
                fn.__doc__ = proto.__doc__

    def binned(self):
        """The binned matrix as the grower's backend reads it.

        Returns
        -------
        object
            ``backend.prepare_binned(Xb)``'s result, or a stand-in with its ``shape``.
        """
        raise NotImplementedError

    def init_score(self, objective):
        """The starting raw score of every row.

        Parameters
        ----------
        objective : SquaredError, Logistic or Softmax

        Returns
        -------
        ndarray of shape (n_outputs,), float64
            ``objective.init_score(y, w)``.
        """
        raise NotImplementedError

    def start_raw(self, base):
        """Set every row's raw scores to ``base``.

        Parameters
        ----------
        base : ndarray of shape (n_outputs,), float64
        """
        raise NotImplementedError

    def snapshot_raw(self):
        """A copy of the raw scores, for a checkpoint.

        Returns
        -------
        object
            What :meth:`restore_raw` takes.
        """
        raise NotImplementedError

    def restore_raw(self, snapshot):
        """Set the raw scores to a copy of a snapshot.

        Parameters
        ----------
        snapshot : object
            :meth:`snapshot_raw`'s result.
        """
        raise NotImplementedError

    def round_gradients(self, objective):
        """The round's gradients and losses at the current raw scores, in one pass.

        Parameters
        ----------
        objective : SquaredError, Logistic or Softmax

        Returns
        -------
        G, Hs : indexable by output column
            ``G[k]`` and ``Hs[k]``: the gradients and hessians of column k as the backend's
            ``gradient_extremes`` and ``quantize_gradients`` take them.
        terms : object
            The per-row losses of the current raw scores, for :meth:`mean`.
        """
        raise NotImplementedError

    def mean(self, terms):
        """The weighted mean of loss terms (``quantize.exact_mean(terms, w)``).

        Parameters
        ----------
        terms : object
            :meth:`round_gradients`' loss terms.

        Returns
        -------
        float
        """
        raise NotImplementedError

    def raw_column(self, k):
        """One output column of the raw scores, for ``GrownTree.add_to``.

        Parameters
        ----------
        k : int

        Returns
        -------
        object
            The column (a view of the raw scores for :class:`DeviceRows`).
        """
        raise NotImplementedError

    def add_trees(self, ensemble, start, stop):
        """Add the predictions of some trees on the binned rows to the raw scores.

        Parameters
        ----------
        ensemble : TreeEnsemble
        start, stop : int
            The trees ``ensemble.trees[start:stop]``.
        """
        raise NotImplementedError

    def loss(self, objective):
        """The loss of the current raw scores.

        Parameters
        ----------
        objective : SquaredError, Logistic or Softmax

        Returns
        -------
        float
            ``objective.loss(raw, y, w)``.
        """
        raise NotImplementedError


class DeviceRows(BoostingRows):
    """The rows of a fit as arrays on the backend's device.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Xb : ndarray of shape (n_samples, n_features), uint8
        On the backend's device.
    y : ndarray of shape (n_samples,)
        float64 targets or int32 class codes, on the same device.
    w : ndarray of shape (n_samples,), float64, or None
        Sample weights.
    """

    def __init__(self, backend, Xb, y, w=None):
        self.backend, self.Xb, self.y, self.w = backend, Xb, y, w
        self.shape = tuple(Xb.shape)
        self.raw = None
        self._data = None
        self._round_y = None

    def binned(self):
        if self._data is None:
            self._data = self.backend.prepare_binned(self.Xb)
        return self._data

    def init_score(self, objective):
        return np.asarray(objective.init_score(self.y, self.w), dtype=np.float64)

    def start_raw(self, base):
        xp = self.backend.xp
        self.raw = xp.tile(xp.asarray(base), (self.shape[0], 1))

    def snapshot_raw(self):
        return self.backend.xp.array(self.raw, copy=True)

    def restore_raw(self, snapshot):
        self.raw = self.backend.xp.array(snapshot, copy=True)

    def round_gradients(self, objective):
        if self._round_y is None:
            # The labels as the backend's round kernel reads them, converted once per fit,
            # not every round (the CPU's: class codes as float64). A backend without the
            # method reads them as they are.
            labels = getattr(self.backend, "round_labels", None)
            self._round_y = self.y if labels is None else labels(self.y)
        return self.backend.round_gradients(objective.name, self.raw, self._round_y)

    def mean(self, terms):
        return exact_mean(terms, self.w)

    def raw_column(self, k):
        return self.raw[:, k]

    def add_trees(self, ensemble, start, stop):
        ensemble.predict_binned(self.Xb, self.backend, start=start, stop=stop, out=self.raw)

    def loss(self, objective):
        return objective.loss(self.raw, self.y, self.w, backend=self.backend)


def _progress(total, verbose, desc):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="tree")


class BoostingFit(NamedTuple):
    """What :func:`fit_boosting` returns.

    Parameters
    ----------
    ensemble : TreeEnsemble
        Every tree grown (early stopping does not cut it).
    record : SelectionRecord
    n_rounds : int
        The rounds to keep: the best validation round with ``n_iter_no_change``, else all.
    """

    ensemble: TreeEnsemble
    record: SelectionRecord
    n_rounds: int


def fit_boosting(
    backend,
    rows: BoostingRows,
    objective,
    penalties,
    bin_mapper: BinMapper,
    params: BoostingParams,
    val_rows: BoostingRows | None = None,
    *,
    candidate_search=None,
    on_round_start=None,
    resume=None,
) -> BoostingFit:
    """Fit a boosted ensemble on binned rows.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
        Or any backend the grower runs on (``gpufs.dask``'s cluster backend).
    rows : BoostingRows
        The training rows: :class:`DeviceRows` for arrays on the backend's device, or rows
        held elsewhere (a cluster's workers).
    objective : SquaredError, Logistic or Softmax
        Its ``name`` picks the backend's gradient kernel.
    penalties : PenaltyState
        Omega grows in place.
    bin_mapper : BinMapper
        The cut points the rows were binned with (the trees' raw thresholds).
    params : BoostingParams
    val_rows : BoostingRows or None, default=None
        Validation rows, held as the training rows are.
    candidate_search : callable or None, default=None
        GT-GBM's group tests (``group_testing.GroupTestSearch``), asked for every tree's
        candidates (``grower.grow_tree_packed``); None: every feature is a candidate.
    on_round_start : callable or None, default=None
        Called at the start of every round with a function that returns the
        ``BoostingCheckpoint`` of that moment (taking one copies the raw scores).
    resume : BoostingCheckpoint or None, default=None
        Start from this state instead of round 0: its trees are taken as the first rounds
        (their validation losses and early stopping replayed from predictions), Omega is
        restored into ``penalties``, and growing continues at ``resume.rounds``.

    Returns
    -------
    BoostingFit
        ``(ensemble, record, n_rounds)``.
    """
    if not isinstance(rows, BoostingRows) or not (
        val_rows is None or isinstance(val_rows, BoostingRows)
    ):
        raise TypeError(
            "fit_boosting takes its training and validation rows as BoostingRows "
            "(DeviceRows(backend, Xb, y, w) for arrays on the backend's device)."
        )
    with thread_limit(params.n_jobs):
        return _fit_boosting(
            backend,
            rows,
            objective,
            penalties,
            bin_mapper,
            params,
            val_rows,
            candidate_search,
            on_round_start,
            resume,
        )


def _fit_boosting(
    backend,
    rows,
    objective,
    penalties,
    bin_mapper,
    params,
    val_rows,
    candidate_search,
    on_round_start,
    resume,
):
    d = rows.shape[1]
    n_bins = backend.xp.asarray(bin_mapper.n_bins_)
    K = objective.n_outputs(getattr(objective, "n_classes", 0))
    base = rows.init_score(objective)
    ensemble = TreeEnsemble(
        max_depth=params.tree.max_depth,
        n_features=d,
        base_score=base,
        is_categorical=getattr(bin_mapper, "is_categorical_", None),
    )
    rows.start_raw(base)
    if val_rows is not None:
        val_rows.start_raw(base)
    data = rows.binned()
    record = SelectionRecord()
    best_val, best_round, rounds_since_best = np.inf, 0, 0
    divisor = penalties.scaling == "root_sse"
    bar = _progress(params.n_estimators, params.verbose, "gpufs boosting")
    loss = np.nan
    start = 0
    if resume is not None:
        if params.n_iter_no_change:
            # Early stopping could end the fit inside the given rounds; nothing resumes so.
            raise ValueError("a resumed boosting fit cannot stop early (n_iter_no_change)")
        start = min(int(resume.rounds), params.n_estimators)
        penalties.restore(resume.penalty)
        if bar is not None and start == 1:
            # no loss is recorded before round 1: the given round's bar shows the starting
            # loss, as a grown first round does (the raw scores are still the base score)
            loss = rows.loss(objective)
        rows.restore_raw(resume.raw)
        for t in range(start * K):
            ensemble.append(resume.trees[t], resume.tree_column[t])
        rec = resume.record
        record.tree_column.extend(rec.tree_column[: start * K])
        record.features_added.extend(list(f) for f in rec.features_added[: start * K])
        record.train_loss.extend(rec.train_loss[: max(0, start - 1) * K])
        loss = record.train_loss[-1] if record.train_loss else loss

    def checkpoint(it):
        return BoostingCheckpoint(
            rounds=it,
            trees=ensemble.trees,
            tree_column=ensemble.tree_column,
            raw=rows.snapshot_raw(),
            record=record,
            penalty=penalties.snapshot(),
        )

    for it in range(params.n_estimators):
        if it >= start:  # (a resumed round's trees are given)
            if on_round_start is not None:
                on_round_start(lambda it=it: checkpoint(it))
            # One pass over the rows: every column's gradients at the round's start, and the
            # loss of those raw scores -- the train loss after the previous round.
            G, Hs, terms = rows.round_gradients(objective)
            if it > 0:
                loss = rows.mean(terms)
                record.train_loss.extend([loss] * K)
            elif bar is not None:  # the bar's first round shows the starting loss, not nan
                loss = rows.mean(terms)
            for k in range(K):
                prep = prepare_gradients(
                    backend, G[k], Hs[k], rows.w, unit_hessian=not params.hessian, divisor=divisor
                )
                tree_index = ensemble.n_trees
                grown = grow_tree_packed(
                    backend,
                    data,
                    prep,
                    n_bins,
                    bin_mapper,
                    penalties,
                    params.tree,
                    tree_index,
                    candidate_search,
                )
                grown.add_to(rows.raw_column(k))
                ensemble.append(grown.tree, k)
                record.tree_column.append(k)
                record.features_added.append(grown.new_features)
        val = np.nan
        if val_rows is not None:
            val_rows.add_trees(ensemble, it * K, (it + 1) * K)
            val = val_rows.loss(objective)
        record.val_loss.extend([val] * K)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4g}", features=len(penalties.order))
        if val_rows is not None and params.n_iter_no_change:
            if val < best_val - 1e-12:
                best_val, best_round, rounds_since_best = val, it + 1, 0
            else:
                rounds_since_best += 1
                if rounds_since_best >= params.n_iter_no_change:
                    break
    if ensemble.n_trees:
        record.train_loss.extend([rows.loss(objective)] * K)
    if bar is not None:
        bar.close()
    n_rounds = ensemble.n_trees // K
    if val_rows is not None and params.n_iter_no_change and best_round > 0:
        n_rounds = best_round
    return BoostingFit(ensemble, record, n_rounds)
