"""Feature-diverse forests for ControlBurn (Liu, Xie, Udell, "ControlBurn: Feature Selection by
Sparse Forests", KDD 2021, section 3.2), grown on the shared grower.

Owns: incremental depth bagging (the paper's Algorithm 1), incremental depth bag-boosting (its
Algorithm 2), the tree variants of section 3.2.4 (feature-sparse trees and single-feature "EBM"
trees), per-tree feature subsampling, the training-loss convergence rule and the out-of-bag (OOB) stopping rule,
and the two outputs the selection step needs: ``A`` (m x T), every tree's prediction on every
training row, and the per-tree feature masks (T x F bool). The lasso over tree weights lives in
``gpufs.lasso``; the estimators in ``gpufs.selectors.controlburn``.

There is no second tree implementation here: every tree is ``gpufs.grower.grow_tree`` (called
in one place, ``_trees.TreeGrower.grow``) on the
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

Incremental depth bagging (``method="bag"``, ControlBurn's Algorithm 1)
-----------------------------------------------------------------------
For d = 1 .. max_depth: grow depth-d trees on bootstrap samples of the target residual
``y - base``; after each tree record the relative train loss of ``base + mean(depth-d trees)``;
when that sequence has converged, go to d + 1. As in the authors' code, the loss tracked at depth
d is that of the depth-d trees' average (the paper's Algorithm 1, line 6, literally says
"forest F": the mean of all trees so far moves by ~1/T per tree and the rule would fire before
depth d is represented).
The forest's own output is ``base + mean(all trees)``.

Incremental depth bag-boosting (``method="bagboost"``, default; ControlBurn's Algorithm 2)
-----------------------------------------------------------------------------------------
``F`` starts at the base prediction. Round r = 1, 2, ... grows depth-r trees on bootstrap samples
of the pseudo-residual ``e = -dL/dF`` at the current ``F`` (squared error: ``y - F``; logistic:
``y - p``; softmax: ``1[y=k] - p_k``, one tree per class per bag member, same bootstrap), and
records the relative train loss of ``F + mean(round's trees)`` until it converges. Then the OOB
improvement of the round is

    delta_r = L_oob(F) - L_oob(F + oob_mean)

over the rows that are out of bag for at least one tree of the round, ``oob_mean`` being, per
row, the mean prediction of the round's trees whose bootstrap left that row out (the row's loss
weighted by its sample weight). ``F <- F + mean(round's trees)``. The forest stops after the
first round with ``delta_r <= 0`` (that round is kept: in the paper's Algorithm 2
``F <- F u F'`` happens before delta is tested, as in the authors' code), or when ``max_depth`` rounds were grown, or
when a round has no OOB row. ``min_rounds`` (default 1) keeps going through non-positive deltas
for that many rounds (a coverage remedy).

Everything is deterministic given ``random_state``: same data and seed -> the same bootstrap
counts, feature subsets, trees, ``A`` and masks, on the CPU and on the GPU (fixed-point
histograms).

Modules
-------
``_params`` (:class:`ForestParams`, their constraints, the convergence rule), ``_record`` (the
:class:`Forest` record and its builder), ``_trees`` (one tree: per-tree penalties, feature
subsets and single-column bins, and the one call of the grower) and ``_algorithms`` (one class
per algorithm: :class:`IncrementalBagging`, :class:`IncrementalBagBoosting`).
"""
from ._algorithms import IncrementalBagBoosting, IncrementalBagging, grow_forest
from ._params import (FOREST_PARAMETER_CONSTRAINTS, MAX_FOREST_DEPTH, METHODS, TREE_TYPES,
                      ForestParams, check_forest_params, loss_converged)
from ._record import Forest, ForestBuilder

__all__ = ["FOREST_PARAMETER_CONSTRAINTS", "Forest", "ForestBuilder", "ForestParams",
           "IncrementalBagBoosting", "IncrementalBagging", "MAX_FOREST_DEPTH", "METHODS",
           "TREE_TYPES", "check_forest_params", "grow_forest", "loss_converged"]
