"""The boosting loop shared by every boosted selector.

Owns: binning the training data once, the rounds of gradient boosting (gradients -> fixed point
-> one tree per output column -> raw-score update from the grower's row partition), the
per-tree selection record, validation scoring and early stopping, and the progress bar.
Device-agnostic: the backend and its array namespace do all array work.

Every number that steers fitting is the same on the CPU and the GPU: gradients and losses come
from the backend's exact objective kernels (``objectives`` docstring), the A-GBM divisor and
the losses are fixed-point sums (``quantize.exact_sum``), and histograms are int64 sums. So
the trees, the selected features and the early-stopping round are identical on both devices.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._threading import thread_limit
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
        return {"tree_column": list(self.tree_column),
                "features_added": [list(f) for f in self.features_added],
                "train_loss": list(self.train_loss), "val_loss": list(self.val_loss)}


@dataclass
class BoostingCheckpoint:
    """A boosting fit's state at the start of a round.

    A fit that resumes from it (``fit_boosting(resume=...)``) grows the same trees as one that
    ran those rounds itself, as long as its penalty state would have made the same decisions
    in them (the exact-k search's final fit: see ``selectors._k_search``).

    Parameters
    ----------
    rounds : int
        The round whose start this is.
    trees, tree_column : list
        The fit's own append-only lists of trees and their output columns, of which the first
        ``rounds * n_outputs`` entries are the checkpoint's (taking a checkpoint copies no
        tree).
    raw : ndarray of shape (n_samples, n_outputs), float64
        A copy of the training raw scores then, on the backend's device.
    record : SelectionRecord
        The fit's selection record (the same append-only rule).
    penalty : dict
        Omega then (``PenaltyState.snapshot``).
    """

    rounds: int
    trees: list
    tree_column: list
    raw: object
    record: "SelectionRecord"
    penalty: dict


def _progress(total, verbose, desc):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="tree")


def fit_boosting(backend, Xb, y, w, objective, penalties, bin_mapper: BinMapper,
                 params: BoostingParams, eval_data=None, *, on_round_start=None, resume=None):
    """Fit a boosted ensemble on binned data.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
    Xb : ndarray of shape (n_samples, n_features), uint8
        On the backend's device.
    y : ndarray of shape (n_samples,)
        float64 targets or int32 class codes, on the same device.
    w : ndarray of shape (n_samples,), float64, or None
        Sample weights.
    objective : SquaredError, Logistic or Softmax
        Its ``name`` picks the backend's gradient kernel.
    penalties : PenaltyState
        Omega grows in place.
    bin_mapper : BinMapper
        The cut points ``Xb`` was binned with (the trees' raw thresholds).
    params : BoostingParams
    eval_data : tuple (Xb_val, y_val, w_val) or None, default=None
        Validation data on the same device.
    on_round_start : callable or None, default=None
        Called at the start of every round with a function that returns the
        ``BoostingCheckpoint`` of that moment (taking one copies the raw scores).
    resume : BoostingCheckpoint or None, default=None
        Start from this state instead of round 0: its trees are taken as the first rounds
        (their validation losses and early stopping replayed from predictions), Omega is
        restored into ``penalties``, and growing continues at ``resume.rounds``.

    Returns
    -------
    ensemble : TreeEnsemble
        Every tree grown (early stopping does not cut it).
    record : SelectionRecord
    n_rounds : int
        The rounds to keep: the best validation round with ``n_iter_no_change``, else all.
    """
    with thread_limit(params.n_jobs):
        return _fit_boosting(backend, Xb, y, w, objective, penalties, bin_mapper, params,
                             eval_data, on_round_start, resume)


def _fit_boosting(backend, Xb, y, w, objective, penalties, bin_mapper, params, eval_data,
                  on_round_start=None, resume=None):
    xp = backend.xp
    n, d = Xb.shape
    n_bins = xp.asarray(bin_mapper.n_bins_)
    K = objective.n_outputs(getattr(objective, "n_classes", 0))
    base = np.asarray(objective.init_score(y, w), dtype=np.float64)
    ensemble = TreeEnsemble(max_depth=params.tree.max_depth, n_features=d, base_score=base,
                            is_categorical=getattr(bin_mapper, "is_categorical_", None))
    raw = xp.tile(xp.asarray(base), (n, 1))
    raw_val = None
    if eval_data is not None:
        Xb_val, y_val, w_val = eval_data
        raw_val = xp.tile(xp.asarray(base), (Xb_val.shape[0], 1))
    data = backend.prepare_binned(Xb)
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
        raw = xp.array(resume.raw, copy=True)
        for t in range(start * K):
            ensemble.append(resume.trees[t], resume.tree_column[t])
        rec = resume.record
        record.tree_column.extend(rec.tree_column[:start * K])
        record.features_added.extend(list(f) for f in rec.features_added[:start * K])
        record.train_loss.extend(rec.train_loss[:max(0, start - 1) * K])
        loss = record.train_loss[-1] if record.train_loss else np.nan

    def checkpoint(it):
        return BoostingCheckpoint(rounds=it, trees=ensemble.trees,
                                  tree_column=ensemble.tree_column, raw=xp.array(raw, copy=True),
                                  record=record, penalty=penalties.snapshot())

    for it in range(params.n_estimators):
        if it >= start:  # (a resumed round's trees are given)
            if on_round_start is not None:
                on_round_start(lambda it=it: checkpoint(it))
            # One pass over the rows: every column's gradients at the round's start, and the
            # loss of those raw scores -- the train loss after the previous round.
            G, Hs, terms = backend.round_gradients(objective.name, raw, y)
            if it > 0:
                loss = exact_mean(terms, w)
                record.train_loss.extend([loss] * K)
            for k in range(K):
                prep = prepare_gradients(backend, G[k], Hs[k], w,
                                         unit_hessian=not params.hessian, divisor=divisor)
                tree_index = ensemble.n_trees
                grown = grow_tree_packed(backend, data, prep.gh, prep.G_q, prep.H_q,
                                         prep.g_scale, prep.h_scale, n_bins, bin_mapper,
                                         penalties, params.tree, tree_index,
                                         gain_divisor=prep.gain_divisor)
                grown.add_to(raw[:, k])
                ensemble.append(grown.tree, k)
                record.tree_column.append(k)
                record.features_added.append(grown.new_features)
        val = np.nan
        if raw_val is not None:
            ensemble.predict_binned(Xb_val, backend, start=it * K, stop=(it + 1) * K,
                                    out=raw_val)
            val = objective.loss(raw_val, y_val, w_val, backend=backend)
        record.val_loss.extend([val] * K)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4g}", features=len(penalties.order))
        if raw_val is not None and params.n_iter_no_change:
            if val < best_val - 1e-12:
                best_val, best_round, rounds_since_best = val, it + 1, 0
            else:
                rounds_since_best += 1
                if rounds_since_best >= params.n_iter_no_change:
                    break
    if ensemble.n_trees:
        record.train_loss.extend([objective.loss(raw, y, w, backend=backend)] * K)
    if bar is not None:
        bar.close()
    n_rounds = ensemble.n_trees // K
    if raw_val is not None and params.n_iter_no_change and best_round > 0:
        n_rounds = best_round
    return ensemble, record, n_rounds
