"""The lasso a forest poses: which columns of ``A`` enter it, with which target, rows and loss.

ControlBurn (Liu, Xie, Udell, "ControlBurn: Feature Selection by Sparse Forests", KDD 2021)
weights the trees of a forest by a lasso on their predictions. This module turns a forest's
per-tree predictions into that problem for each kind of target:

* regression: the squared loss on ``y``, with a free intercept;
* two classes: the logistic loss on the 0/1 codes, with a free intercept (the trees fit the
  logit);
* more classes: each tree predicts one class's indicator (``tree_output``), so the problem is
  the stacked squared loss over the classes: block c holds class c's rows of indicators
  ``[y == c]`` and the predictions of class c's trees, each centred by its weighted mean
  (the per-class intercepts, eliminated exactly), and no other trees (zeros elsewhere).

Trees that use no feature (a stump of a constant target) carry no selection and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._device import namespace_of

__all__ = ["LassoProblem", "forest_lasso_problem"]


@dataclass
class LassoProblem:
    """The arguments of :class:`gpufs.lasso.TreeLasso` / :func:`gpufs.lasso.select_k` for one
    forest.

    Parameters
    ----------
    A : ndarray of shape (n_rows, n_kept_trees), float64
        The kept trees' predictions (stacked per class for a multiclass target).
    y : ndarray of shape (n_rows,), float64
        The target of the loss.
    sample_weight : ndarray of shape (n_rows,), float64, or None
        Row weights.
    loss : {"squared", "logistic"}
    fit_intercept : bool
        Whether the problem has a free intercept.
    trees : ndarray of shape (n_kept_trees,), int64
        The forest's indices of the kept trees (host).
    """

    A: object
    y: object
    sample_weight: object
    loss: str
    fit_intercept: bool
    trees: np.ndarray


def forest_lasso_problem(A, feature_masks, tree_output, y, sample_weight, n_classes):
    """The tree-weight lasso of a forest (see the module docstring).

    Parameters
    ----------
    A : ndarray of shape (n_samples, n_trees), float64
        Every tree's predictions on the training rows (numpy or cupy).
    feature_masks : ndarray of shape (n_trees, n_features), bool
        The features each tree uses (host).
    tree_output : ndarray of shape (n_trees,), int
        The output column (class, for a multiclass forest) each tree predicts (host).
    y : ndarray of shape (n_samples,)
        The encoded target on ``A``'s device: float64 for regression, class codes otherwise.
    sample_weight : ndarray of shape (n_samples,), float64, or None
    n_classes : int
        0 for regression, else the number of classes.

    Returns
    -------
    LassoProblem
        In ``A``'s namespace.
    """
    xp = namespace_of(A)
    trees = np.flatnonzero(np.asarray(feature_masks).any(axis=1))
    A = A[:, xp.asarray(trees)] if trees.size < feature_masks.shape[0] else A
    if n_classes == 0:
        return LassoProblem(A, y, sample_weight, "squared", True, trees)
    if n_classes == 2:
        return LassoProblem(
            A, xp.asarray(y, dtype=np.float64), sample_weight, "logistic", True, trees
        )
    m = A.shape[0]
    cols = np.asarray(tree_output)[trees]
    wv = xp.ones(m) if sample_weight is None else xp.asarray(sample_weight, dtype=np.float64)
    W = float(wv.sum())
    S = xp.zeros((m * n_classes, trees.size), dtype=np.float64)
    Y = xp.zeros(m * n_classes, dtype=np.float64)
    codes = xp.asarray(y).astype(np.int64)
    for c in range(n_classes):
        sel = xp.asarray(np.flatnonzero(cols == c))
        block = slice(c * m, (c + 1) * m)
        if sel.size:
            Ac = A[:, sel]
            S[block, sel] = Ac - (wv @ Ac) / W
        yc = (codes == c).astype(np.float64)
        Y[block] = yc - float(wv @ yc) / W
    return LassoProblem(S, Y, xp.tile(wv, n_classes), "squared", False, trees)
