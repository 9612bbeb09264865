"""The results of the tree-weight lasso: one solve, a selection of k features, a k path, and
the error raised when no lambda gives exactly k features."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["LassoResult", "Selection", "SelectionsByK", "UnreachableKError"]


class UnreachableKError(ValueError):
    """No lambda gives exactly k selected features (the count jumps over k).

    Parameters
    ----------
    message : str
        Says which k and why.
    below : Selection or None
        The selection found with the most features below k (None when the zero-cost trees
        alone select more than k features).
    above : Selection or None
        The selection found with the fewest features above k (None when not even lambda = 0
        passes k). Both let a caller fall back without solving again.
    """

    def __init__(self, message, below=None, above=None):
        super().__init__(message)
        self.below = below
        self.above = above


@dataclass(frozen=True)
class LassoResult:
    """One solve of the tree-weight lasso.

    Parameters
    ----------
    weights : ndarray of shape (n_trees,), float64
        In the namespace of ``A``, all >= 0 (exact zeros off the support).
    intercept : float
        The free intercept ``b`` (0.0 with ``fit_intercept=False``).
    objective : float
        Full-data objective of the lasso at (weights, intercept).
    solved_objective : float
        Objective of the problem actually minimized (equal to ``objective`` unless sketched).
    lam : float
        The lambda solved for.
    n_iter : int
        FISTA iterations used.
    converged : bool
        Whether the relative KKT residual reached ``tol``.
    kkt : float
        Relative KKT residual at return (see the package docstring).
    """

    weights: Any
    intercept: float
    objective: float
    solved_objective: float
    lam: float
    n_iter: int
    converged: bool
    kkt: float


@dataclass(frozen=True)
class Selection:
    """A set of selected features and the lasso solution that selects it.

    Parameters
    ----------
    k : int
        Number of selected features (the requested k when ``exact``).
    lam : float
        The lambda that gave them.
    features : ndarray of shape (k,), int64
        Sorted indices of the selected features.
    weights : ndarray of shape (n_trees,), float64
        Tree weights, in the namespace of ``A``.
    intercept : float
        The free intercept at the solution.
    objective : float
        Full-data objective at the solution (with the tree costs it was solved with).
    exact : bool
        False only when k was unreachable (``select_k(..., strict=False)``).
    n_solves : int
        Lasso solves spent (for ``select_k``; 0 for entries of a SelectionsByK).
    loss : float
        The data term of ``objective`` (the training loss of the weighted trees, without the
        penalty).
    """

    k: int
    lam: float
    features: np.ndarray
    weights: Any
    intercept: float
    objective: float
    exact: bool = True
    n_solves: int = 0
    loss: float = float("nan")


@dataclass(frozen=True)
class SelectionsByK:
    """Result of :func:`selections_by_k`.

    Parameters
    ----------
    selections : dict
        k -> Selection for every k in 1..k_max that was reached.
    unreachable : dict
        k -> why it was not reached (the count jumps over k, or the path ends first).
    lambda_max : float
        Smallest lambda with no penalized tree kept.
    lambdas : ndarray of shape (n_solved,), float64
        Every lambda solved, descending.
    n_selected : ndarray of shape (n_solved,), int64
        Feature counts there.
    n_solves : int
        Lasso solves the searches used, each counted by every search that used it (the
        searches for different k share the solves they repeat: fewer are computed).
    nearest : dict, default={}
        k -> (below, above) for every unreachable k: the selections with the most features
        below k and the fewest above it that its search found (as
        :class:`UnreachableKError` carries them; either may be None), so a caller can complete
        k without solving again.
    """

    selections: dict
    unreachable: dict
    lambda_max: float
    lambdas: np.ndarray
    n_selected: np.ndarray
    n_solves: int
    nearest: dict = field(default_factory=dict)

    @property
    def ks(self) -> list:
        """The reached k, ascending."""
        return sorted(self.selections)
