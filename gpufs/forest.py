"""Feature-diverse forests for ControlBurn (paper 004, section 3.2), grown on the shared grower.

Owns: incremental depth bagging (Algorithm 1), incremental depth bag-boosting (Algorithm 2), the
tree variants of section 3.2.4 (feature-sparse trees and single-feature "EBM" trees), per-tree
feature subsampling, the training-loss convergence rule and the out-of-bag (OOB) stopping rule,
and the two outputs the selection step needs: ``A`` (m x T), every tree's prediction on every
training row, and the per-tree feature masks (T x F bool). The lasso over tree weights lives in
``gpufs.lasso``; the estimators in ``gpufs.selectors.controlburn``.

There is no second tree implementation here: every tree is ``gpufs.grower.grow_tree`` on the
binned matrix, through the backend of the device, with fixed-point gradients.

Trees
-----
Every tree is a least-squares regression tree fit to a residual ``e`` (unit hessians,
``reg_lambda = 0``, learning rate 1), so a leaf holds the (weighted) mean residual of its
in-bag rows. A bootstrap sample is a vector of integer counts ``c`` (n_samples,) drawn on the
host from a seeded ``numpy.random.RandomState`` (``bincount`` of m uniform draws of a row) and
moved to the device; the grower sees ``g = -e * c * w`` and ``h = c * w`` (``w`` the sample
weights scaled to mean 1), so a row drawn twice counts twice and an out-of-bag row counts zero,
on both devices alike. ``min_child_weight`` (default 1) is then "at least one in-bag row".
Because the grower partitions *all* rows, a tree's prediction on every training row (in-bag or
not) comes from its row -> leaf assignment without re-traversal; that is column t of ``A``.

Tree types (``tree_type``):
  * ``"full"``: the plain tree (optionally on a random subset of ``max_features`` features,
    drawn per tree).
  * ``"sparse"``: a feature-sparse tree (section 3.2.4): inside each tree a split on a feature
    the tree does not use yet pays ``sparse_mu * cost[f]`` (GBFS penalty with ``root_sse``
    scaling, so ``sparse_mu`` is a fraction of the root's best gain; groups become free
    together), through ``gpufs.penalties.PenaltyState``, fresh for every tree.
  * ``"single"``: single-feature trees (the EBM variant): one bag member is a sweep over all
    features in a random order, each tree restricted to one feature and fit to the residual the
    previous trees of the sweep left (one backfitting pass); every such tree is its own column
    of ``A`` and uses exactly one feature, so the selection matrix G is the identity per tree.

Losses and the convergence rule (section 3.2.1)
-----------------------------------------------
The train loss of a candidate forest output ``raw`` is reported *relative to the loss of the
constant base prediction* (the weighted mean of y, or the base log-odds / class log-priors), so
the tolerance is scale-free: for squared error it is ``1 - R^2``. Regression uses squared error;
classification uses the log loss (binary: logistic, multiclass: softmax) in bag-boosting, and the
squared error on the class indicators (the Brier score) in bagging, whose averaged trees are
class-probability estimates (a least-squares tree on an indicator is a probability tree).
A sequence of losses has *converged* when it has at least ``n_tail`` (N = 5) entries and its
last N entries lie in a tube of width ``tol`` (epsilon = 1e-3): ``max - min <= tol``
(:func:`loss_converged`). A round also ends after ``max_trees_per_round`` bag members (a safety
cap; the record says which rule ended each round).

Algorithm 1, incremental depth bagging (``method="bag"``)
--------------------------------------------------------
For d = 1 .. max_depth: grow depth-d trees on bootstrap samples of the target residual
``y - base``; after each tree record the relative train loss of ``base + mean(depth-d trees)``;
when that sequence has converged, go to d + 1. As in the authors' code, the loss tracked at depth
d is that of the depth-d trees' average (Algorithm 1 line 6 literally says "forest F": the mean of
all trees so far moves by ~1/T per tree and the rule would fire before depth d is represented).
The forest's own output is ``base + mean(all trees)``.

Algorithm 2, incremental depth bag-boosting (``method="bagboost"``, default)
---------------------------------------------------------------------------
``F`` starts at the base prediction. Round r = 1, 2, ... grows depth-r trees on bootstrap samples
of the pseudo-residual ``e = -dL/dF`` at the current ``F`` (squared error: ``y - F``; logistic:
``y - p``; softmax: ``1[y=k] - p_k``, one tree per class per bag member, same bootstrap), and
records the relative train loss of ``F + mean(round's trees)`` until it converges. Then the OOB
improvement of the round is

    delta_r = L_oob(F) - L_oob(F + oob_mean)

over the rows that are out of bag for at least one tree of the round, ``oob_mean`` being, per
row, the mean prediction of the round's trees whose bootstrap left that row out (the row's loss
weighted by its sample weight). ``F <- F + mean(round's trees)``. The forest stops after the
first round with ``delta_r <= 0`` (that round is kept: in Algorithm 2 ``F <- F u F'`` happens
before delta is tested, as in the authors' code), or when ``max_depth`` rounds were grown, or
when a round has no OOB row. ``min_rounds`` (default 1) keeps going through non-positive deltas
for that many rounds (a coverage remedy).

Everything is deterministic given ``random_state``: same data and seed -> the same bootstrap
counts, feature subsets, trees, ``A`` and masks, on the CPU and on the GPU (fixed-point
histograms).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field

import numpy as np
from sklearn.utils._param_validation import StrOptions, validate_parameter_constraints

from ._params import int_range, real_range
from ._types import RAW_DTYPE
from .grower import TreeParams, grow_tree
from .penalties import PenaltyState
from .objectives import Logistic, Softmax, SquaredError
from .quantize import exact_mean, fixed_point_scale, quantize
from .tree import Tree, TreeEnsemble, n_nodes_for_depth

__all__ = ["ForestParams", "Forest", "grow_forest", "loss_converged", "METHODS", "TREE_TYPES"]

METHODS = ("bagboost", "bag")
TREE_TYPES = ("full", "sparse", "single")
#: The grower's deepest tree (node arrays of 2**(d+1) - 1 entries).
MAX_FOREST_DEPTH = 16


def loss_converged(losses, n_tail: int = 5, tol: float = 1e-3) -> bool:
    """True when the last ``n_tail`` losses lie within a tube of width ``tol`` (section 3.2.1).

    Needs at least ``n_tail`` losses: ``max(losses[-n_tail:]) - min(losses[-n_tail:]) <= tol``.
    """
    if len(losses) < n_tail:
        return False
    tail = losses[-n_tail:]
    return max(tail) - min(tail) <= tol


@dataclass(frozen=True)
class ForestParams:
    """How to grow the forest (see the module docstring).

    method : "bagboost" (Algorithm 2) or "bag" (Algorithm 1)
    tree_type : "full", "sparse" or "single"
    max_depth : d_max, the deepest trees (bag: the last depth; bagboost: the most rounds), <= 16
    n_tail, tol : the convergence rule (N = 5, epsilon = 1e-3)
    max_trees_per_round : cap on bag members per depth (bag) or round (bagboost)
    min_rounds : bagboost: rounds grown before a non-positive OOB improvement may stop it
    max_features : None (all), int (count), float in (0, 1] (fraction) or "sqrt": features
        each tree may split on, drawn per tree ("full" and "sparse" trees)
    sparse_mu : price of a new feature inside a "sparse" tree (root_sse scaling)
    min_child_weight : least sum of in-bag weights (scaled to mean 1) in a child
    verbose : tqdm progress bar over trees
    """

    method: str = "bagboost"
    tree_type: str = "full"
    max_depth: int = 10
    n_tail: int = 5
    tol: float = 1e-3
    max_trees_per_round: int = 100
    min_rounds: int = 1
    max_features: object = None
    sparse_mu: float = 0.1
    min_child_weight: float = 1.0
    verbose: bool = False


@dataclass
class Forest:
    """A grown forest and what the selection step needs.

    ensemble : TreeEnsemble of all trees, padded to the deepest depth (unweighted: a tree's leaf
        values are its own predictions; ``tree_column`` is the output column / class)
    A : (n_samples, n_trees) float64 on the device: tree t's prediction on training row i
    feature_masks : (n_trees, n_features) bool (host): tree t splits on feature f
    tree_depth, tree_round, tree_member : (n_trees,) int64: depth, round (bag: depth level), and
        bag member (within the round) of each tree
    member_loss : relative train loss after each bag member, per round (list of lists)
    round_stop : why each round ended ("converged" or "max_trees_per_round")
    oob_improvement : delta of each bagboost round (empty for bag)
    stop_reason : why the forest stopped growing
    base_score : (n_outputs,) the constant base prediction
    train_raw : (n_samples, n_outputs) the forest's own output on the training rows (device)
    """

    ensemble: TreeEnsemble
    A: object
    feature_masks: np.ndarray
    tree_depth: np.ndarray
    tree_round: np.ndarray
    tree_member: np.ndarray
    member_loss: list = field(default_factory=list)
    round_stop: list = field(default_factory=list)
    oob_improvement: list = field(default_factory=list)
    stop_reason: str = ""
    base_score: np.ndarray | None = None
    train_raw: object = None
    method: str = "bagboost"

    @property
    def n_trees(self) -> int:
        return int(self.feature_masks.shape[0])

    @property
    def tree_column(self) -> np.ndarray:
        return np.asarray(self.ensemble.tree_column, dtype=np.int64)

    def coverage(self) -> np.ndarray:
        """bool (n_features,): features used by at least one tree."""
        return self.feature_masks.any(axis=0)

    def tree_gains(self) -> np.ndarray:
        """float64 (n_trees, n_features): total split gain of each tree on each feature."""
        s = self.ensemble.stacked()
        out = np.zeros(self.feature_masks.shape)
        rows, nodes = np.nonzero(s["feature"] >= 0)
        np.add.at(out, (rows, s["feature"][rows, nodes]), s["gain"][rows, nodes])
        return out

    def tree_predictions(self, X, backend):
        """(n_samples, n_trees) per-tree predictions on float X (NaN = missing)."""
        xp = backend.xp
        out = xp.empty((X.shape[0], self.n_trees), dtype=RAW_DTYPE)
        for t in range(self.n_trees):
            raw = xp.zeros((X.shape[0], self.ensemble.n_outputs), dtype=RAW_DTYPE)
            self.ensemble.predict_raw(X, backend, start=t, stop=t + 1, out=raw)
            out[:, t] = raw[:, int(self.ensemble.tree_column[t])]
        return out

    def drop_predictions(self) -> None:
        """Forget ``A`` and ``train_raw`` (device memory) once the selection is made."""
        self.A = None
        self.train_raw = None


# --------------------------------------------------------------------------------------------
# Per-tree helpers
# --------------------------------------------------------------------------------------------


class _SubsetPenalty(PenaltyState):
    """A PenaltyState whose splits are restricted to a feature subset (per-tree subsampling)."""

    def __init__(self, mu, costs, groups, scaling, subset_mask):
        super().__init__(mu, costs, groups, scaling, None)
        self.subset_mask = subset_mask

    def allowed_mask(self) -> np.ndarray:
        return super().allowed_mask() & self.subset_mask


class _ColumnBins:
    """The bin mapper seen by a one-column slice of Xb (single-feature trees)."""

    def __init__(self, bin_mapper, feature):
        self.bin_mapper, self.feature = bin_mapper, int(feature)

    def threshold_value(self, feature, bin_threshold):
        return self.bin_mapper.threshold_value(self.feature, bin_threshold)


def _pad_tree(tree: Tree, depth: int) -> Tree:
    """The same tree in the arrays of a complete tree of ``depth`` (extra nodes unused)."""
    n = n_nodes_for_depth(depth)
    out = Tree.empty(depth)
    m = tree.arrays["feature"].shape[0]
    for k, a in tree.arrays.items():
        out.arrays[k][:m] = a
    assert m <= n
    return out


#: The constraints of every ``ForestParams`` field (scikit-learn's parameter validation); the
#: ControlBurn estimators take theirs from here.
FOREST_PARAMETER_CONSTRAINTS = {
    "method": [StrOptions(set(METHODS))],
    "tree_type": [StrOptions(set(TREE_TYPES))],
    "max_depth": [int_range(1, MAX_FOREST_DEPTH)],
    "n_tail": [int_range(1)],
    "tol": [real_range(0)],
    "max_trees_per_round": [int_range(1)],
    "min_rounds": [int_range(1)],
    "max_features": [None, int_range(1), real_range(0, 1, closed="right"),
                     StrOptions({"sqrt", "log2"})],
    "sparse_mu": [real_range(0)],
    "min_child_weight": [real_range(0)],
    "verbose": ["verbose"],
}


def _n_subset(max_features, d):
    """Features per tree for a valid ``max_features`` (None -> all)."""
    if max_features is None:
        return d
    if max_features == "sqrt":
        return max(1, int(math.sqrt(d)))
    if max_features == "log2":
        return max(1, int(math.log2(d))) if d > 1 else 1
    if isinstance(max_features, numbers.Integral):
        return min(int(max_features), d)
    return max(1, int(max_features * d))


def check_forest_params(p: ForestParams) -> None:
    """Raise ``InvalidParameterError`` (a ValueError naming the field) for bad settings."""
    validate_parameter_constraints(FOREST_PARAMETER_CONSTRAINTS, asdict(p),
                                   caller_name="ForestParams")
    if p.tree_type == "single" and p.max_features is not None:
        raise ValueError("max_features does not apply to tree_type='single' (every tree already "
                         "uses one feature); leave it None.")


def _progress(verbose, desc):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(desc=desc, unit="tree")


# --------------------------------------------------------------------------------------------
# The forest
# --------------------------------------------------------------------------------------------


def _objective_and_target(xp, task, method, y, n_classes):
    """(objective, target, n_outputs) of the forest: squared error for regression and for
    bagging's class indicators, logistic / softmax for bag-boosting classifiers."""
    if task == "regression":
        return SquaredError(), xp.asarray(y, dtype=RAW_DTYPE), 1
    if task != "classification":
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    codes = xp.asarray(y).astype(np.int64)
    if method == "bag":
        if n_classes == 2:
            return SquaredError(), codes.astype(RAW_DTYPE), 1
        K = int(n_classes)
        return SquaredError(K), (codes[:, None] == xp.arange(K)[None, :]).astype(RAW_DTYPE), K
    if n_classes == 2:
        return Logistic(), codes.astype(RAW_DTYPE), 1
    return Softmax(n_classes), codes, int(n_classes)


def grow_forest(backend, Xb, y, w, task: str, n_classes: int, bin_mapper, params: ForestParams,
                costs=None, groups=None, random_state: int = 0) -> Forest:
    """Grow a ControlBurn forest on binned data (see the module docstring for the rules).

    Parameters
    ----------
    backend : CPUBackend or GPUBackend (``gpufs.backends.get_backend``)
    Xb : uint8 (n_samples, n_features) on the backend's device
    y : (n_samples,) float64 targets (regression) or int class codes 0..K-1, same device
    w : (n_samples,) float64 sample weights or None, same device
    task : "regression" or "classification"
    n_classes : number of classes (classification)
    bin_mapper : the fitted ``binning.BinMapper`` of Xb
    costs, groups : per-feature costs (float64 (F,)) and group labels (int32 (F,), 0..G-1),
        used by feature-sparse trees; None -> ones / singletons
    random_state : int seed of the host RandomState that draws bootstraps and feature subsets
    """
    check_forest_params(params)
    xp = backend.xp
    m, d = Xb.shape
    if m == 0 or d == 0:
        raise ValueError(f"cannot grow a forest on data of shape {(m, d)}")
    costs = np.ones(d) if costs is None else np.asarray(costs, dtype=np.float64)
    groups = (np.arange(d, dtype=np.int32) if groups is None
              else np.asarray(groups, dtype=np.int32))
    rng = np.random.RandomState(int(random_state))
    n_bins = xp.asarray(bin_mapper.n_bins_)

    if w is not None:
        wsum = float(w.sum())
        w = xp.asarray(w, dtype=np.float64) * (m / wsum)

    # Targets and loss.
    objective, target, K = _objective_and_target(xp, task, params.method, y, n_classes)

    def mean_loss(raw, rows=None):
        """Weighted mean loss over all rows, or over the bool mask ``rows`` (``raw`` then
        holds only those rows)."""
        if raw.shape[0] == 0:
            return 0.0
        if rows is None:
            return objective.loss(raw, target, w, backend)
        return objective.loss(raw, target[rows], None if w is None else w[rows], backend)

    base = np.asarray(objective.init_score(target, w), dtype=np.float64)
    base_raw = xp.tile(xp.asarray(base, dtype=RAW_DTYPE), (m, 1))
    base_loss = mean_loss(base_raw)

    def rel(raw):
        v = mean_loss(raw)
        return v / base_loss if base_loss > 0 else 0.0

    single = params.tree_type == "single"
    n_sub = _n_subset(params.max_features, d)
    if single:
        cols = [xp.ascontiguousarray(Xb[:, f:f + 1]) for f in range(d)]
        col_nbins = [n_bins[f:f + 1] for f in range(d)]
        col_bins = [_ColumnBins(bin_mapper, f) for f in range(d)]

    trees: list[Tree] = []
    tree_cols, tree_depth, tree_round, tree_member = [], [], [], []
    masks: list[np.ndarray] = []
    A_cols = []
    member_loss, round_stop, oob_impr = [], [], []
    stop_reason = ""
    bar = _progress(params.verbose, f"gpufs ControlBurn forest ({params.method})")

    def grow_one(Xb_, nb_, bm_, resid_col, cw, depth, feature_map=None, subset=None):
        g = -resid_col * cw
        h = cw
        g_scale, h_scale = fixed_point_scale(g, m), fixed_point_scale(h, m)
        gq, hq = quantize(g, g_scale), quantize(h, h_scale)
        dd = Xb_.shape[1]
        if params.tree_type == "sparse":
            pen = _SubsetPenalty(params.sparse_mu, costs, groups, "root_sse",
                                 subset if subset is not None else np.ones(d, bool))
            divisor = pen.gain_divisor(g, h)
        elif subset is not None:
            pen = _SubsetPenalty(0.0, costs, groups, "none", subset)
            divisor = 1.0
        else:
            pen = PenaltyState(0.0, np.ones(dd), np.arange(dd, dtype=np.int32), "none", None)
            divisor = 1.0
        tp = TreeParams(max_depth=depth, reg_lambda=0.0, learning_rate=1.0,
                        min_child_weight=float(params.min_child_weight), min_split_gain=0.0)
        grown = grow_tree(backend, Xb_, gq, hq, g_scale, h_scale, nb_, bm_, pen, tp,
                          len(trees), gain_divisor=divisor)
        pred = xp.zeros(m, dtype=RAW_DTYPE)
        grown.add_to(pred)
        tree = grown.tree
        if feature_map is not None:
            f = tree.arrays["feature"]
            f[f >= 0] = feature_map
        return tree, pred

    raw = base_raw.copy()          # bagboost: the forest F so far
    bag_sum = xp.zeros((m, K), dtype=RAW_DTYPE)  # bag: sum of all trees
    n_members_total = 0
    depth, rnd = 1, 0
    while True:
        resid = objective.negative_gradient(raw, target, backend)  # bag: y - base
        round_sum = xp.zeros((m, K), dtype=RAW_DTYPE)
        oob_sum = xp.zeros((m, K), dtype=RAW_DTYPE)
        oob_n = xp.zeros(m, dtype=RAW_DTYPE)
        losses = []
        j = 0
        while True:
            counts_h = np.bincount(rng.randint(0, m, size=m), minlength=m).astype(np.float64)
            counts = xp.asarray(counts_h)
            cw = counts if w is None else counts * w
            oob = counts == 0
            if single:
                order = rng.permutation(d)
            for k in range(K):
                if single:
                    r_cur = resid[:, k].copy()
                    member_pred = xp.zeros(m, dtype=RAW_DTYPE)
                    for f in order.tolist():
                        tree, pred = grow_one(cols[f], col_nbins[f], col_bins[f], r_cur, cw,
                                              depth, feature_map=f)
                        r_cur = r_cur - pred
                        member_pred = member_pred + pred
                        _record(trees, tree_cols, tree_depth, tree_round, tree_member, masks,
                                A_cols, tree, k, depth, rnd, j, pred, d)
                        if bar is not None:
                            bar.update(1)
                    pred = member_pred
                else:
                    subset = None
                    if n_sub < d:
                        subset = np.zeros(d, dtype=bool)
                        subset[rng.choice(d, n_sub, replace=False)] = True
                    tree, pred = grow_one(Xb, n_bins, bin_mapper, resid[:, k], cw, depth,
                                          subset=subset)
                    _record(trees, tree_cols, tree_depth, tree_round, tree_member, masks,
                            A_cols, tree, k, depth, rnd, j, pred, d)
                    if bar is not None:
                        bar.update(1)
                round_sum[:, k] += pred
                oob_sum[:, k] += xp.where(oob, pred, 0.0)
            oob_n += oob
            j += 1
            losses.append(rel(raw + round_sum / j))
            if bar is not None:
                bar.set_postfix(round=rnd + 1, depth=depth, loss=f"{losses[-1]:.4g}")
            if loss_converged(losses, params.n_tail, params.tol):
                round_stop.append("converged")
                break
            if j >= params.max_trees_per_round:
                round_stop.append("max_trees_per_round")
                break
        member_loss.append(losses)
        n_members_total += j
        rnd += 1
        if params.method == "bag":
            bag_sum += round_sum
            if depth >= params.max_depth:
                stop_reason = f"reached max_depth={params.max_depth}"
                break
        else:
            has_oob = oob_n > 0
            if bool(has_oob.any()):
                oob_mean = oob_sum[has_oob] / oob_n[has_oob][:, None]
                cur = raw[has_oob]
                before = mean_loss(cur, has_oob)
                after = mean_loss(cur + oob_mean, has_oob)
                delta = before - after
            else:
                delta = float("nan")
            oob_impr.append(delta)
            raw = raw + round_sum / j
            if not (delta == delta):
                stop_reason = "no out-of-bag row in the last round"
                break
            if delta <= 0 and rnd >= params.min_rounds:
                stop_reason = f"OOB improvement {delta:.6g} <= 0 in round {rnd}"
                break
            if depth >= params.max_depth:
                stop_reason = f"reached max_depth={params.max_depth}"
                break
        depth += 1
    if bar is not None:
        bar.close()

    max_d = max(tree_depth) if tree_depth else 1
    ens = TreeEnsemble(max_depth=max_d, n_features=d, base_score=np.asarray(base, np.float64))
    for t, c in zip(trees, tree_cols):
        ens.append(_pad_tree(t, max_d) if t.arrays["feature"].shape[0] < n_nodes_for_depth(max_d)
                   else t, c)
    A = xp.stack(A_cols, axis=1) if A_cols else xp.zeros((m, 0), dtype=RAW_DTYPE)
    train_raw = raw if params.method == "bagboost" else base_raw + bag_sum / max(n_members_total, 1)
    return Forest(ensemble=ens, A=A,
                  feature_masks=(np.stack(masks) if masks else np.zeros((0, d), dtype=bool)),
                  tree_depth=np.asarray(tree_depth, np.int64),
                  tree_round=np.asarray(tree_round, np.int64),
                  tree_member=np.asarray(tree_member, np.int64), member_loss=member_loss,
                  round_stop=round_stop, oob_improvement=oob_impr, stop_reason=stop_reason,
                  base_score=np.asarray(base, np.float64), train_raw=train_raw,
                  method=params.method)


def _record(trees, tree_cols, tree_depth, tree_round, tree_member, masks, A_cols, tree, column,
            depth, rnd, member, pred, d):
    trees.append(tree)
    tree_cols.append(int(column))
    tree_depth.append(int(depth))
    tree_round.append(int(rnd))
    tree_member.append(int(member))
    mask = np.zeros(d, dtype=bool)
    f = tree.arrays["feature"]
    mask[f[f >= 0]] = True
    masks.append(mask)
    A_cols.append(pred)
