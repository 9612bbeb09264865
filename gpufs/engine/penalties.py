"""Who pays what: the GBFS / A-GBM feature penalty and the used-feature set Omega.

Owns the one computation of the penalty vector handed to the split kernels, the state of which
features the ensemble already uses, and the rule for when a feature becomes free.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import numpy as np

from .._device import namespace_of
from .quantize import exact_sum

PENALTY_SCALINGS = ("none", "root_sse")


class PenaltyState:
    """Omega, the groups made free by it, and the penalty vector they imply.

    Parameters
    ----------
    mu : float >= 0
        The price of a new feature (times its cost).
    costs : ndarray of shape (n_features,), float64 >= 0
    groups : ndarray of shape (n_features,), int32
        Group label 0..n_groups-1 of each feature (a feature is free once its group is used).
    scaling : {"none", "root_sse"}, default="none"
        Divide the gains by the root's largest gain (A-GBM) or not (GBFS).
    n_features_to_select : int or None, default=None
        The feature budget (None: no budget).

    Attributes
    ----------
    used : ndarray of shape (n_features,), bool
        Omega: the features the ensemble uses.
    first_use_tree : ndarray of shape (n_features,), int64
        The tree that first used each feature (-1: none).
    order : list of int
        The features of Omega in the order they entered.
    """

    def __init__(self, mu, costs, groups, scaling="none", n_features_to_select=None):
        if scaling not in PENALTY_SCALINGS:
            raise ValueError(f"penalty_scaling must be one of {PENALTY_SCALINGS}, got {scaling!r}.")
        self.mu = float(mu)
        self.costs = np.asarray(costs, dtype=np.float64)
        self.groups = np.asarray(groups, dtype=np.int32)
        self.scaling = scaling
        self.k = n_features_to_select
        n_features = self.costs.shape[0]
        self.used = np.zeros(n_features, dtype=bool)
        self.group_used = np.zeros(int(self.groups.max()) + 1 if n_features else 0, dtype=bool)
        self.first_use_tree = np.full(n_features, -1, dtype=np.int64)
        self.order: list[int] = []
        self.candidates = None  # the current tree's candidates (None: all features)
        self.candidates_by_tree: list[np.ndarray] = []
        self._changed()

    def _changed(self) -> None:
        """Forget the answers derived from Omega and the candidates: every method that changes
        them calls this. The grower asks for the penalty vector, the allowed mask and the
        candidate features at every tree, and Omega changes in a few trees of a fit: computed
        once per change, not per tree (a tree of 151 rows spent 15 us in them). The arrays
        handed out are shared: callers read them and never write into them."""
        self._memo: dict = {}

    def penalty_vector(self) -> np.ndarray:
        """The penalty of a split on each feature now.

        Returns
        -------
        ndarray of shape (n_features,), float64
            ``mu * cost`` for the features of groups not yet used, else 0.
        """
        v = self._memo.get("penalty")
        if v is None:
            pays = ~self.group_used[self.groups]
            v = self._memo["penalty"] = np.where(pays, self.mu * self.costs, 0.0)
        return v

    def budget_left(self):
        """How many more features may enter Omega.

        Returns
        -------
        int or None
            None without a budget.
        """
        if self.k is None:
            return None
        return max(0, int(self.k) - len(self.order))

    def allowed_mask(self) -> np.ndarray:
        """The features a split may use now.

        Returns
        -------
        ndarray of shape (n_features,), bool
            Every feature, or only Omega's once the budget is spent.
        """
        mask = self._memo.get("allowed")
        if mask is None:
            if self.budget_left() == 0:
                mask = self.used.copy()
            elif self.candidates is not None:
                mask = self.group_used[self.groups]
                mask[self.candidates] = True
            else:
                mask = np.ones_like(self.used)
            self._memo["allowed"] = mask
        return mask

    def set_tree_candidates(self, candidates) -> None:
        """Record the candidates of the tree about to grow (GT-GBM's group tests).

        Called by the grower before each tree when it is given a candidate search; without
        one, ``candidates`` stays None and every feature is a candidate.

        Parameters
        ----------
        candidates : array-like of int
            The features the tree may bring into Omega (empty once the budget is spent).
        """
        self.candidates = np.asarray(candidates, np.int64)
        self.candidates_by_tree.append(self.candidates)
        self._changed()

    def candidate_features(self, n_features: int) -> np.ndarray:
        """The features whose histograms can matter in the next tree.

        Parameters
        ----------
        n_features : int

        Returns
        -------
        ndarray of shape (n_candidates,), int32
            Sorted: those a split may use now or that are in Omega (the fallback's set); only
            Omega's once the budget is spent. With a tree's group-test candidates, also the
            other members of their groups, which become free within the tree when a
            candidate enters.
        """
        feats = self._memo.get("candidates")
        if feats is None:
            mask = self.allowed_mask() | self.used
            if self.candidates is not None and self.budget_left() != 0:
                mask |= np.isin(self.groups, self.groups[self.candidates])
            feats = self._memo["candidates"] = np.flatnonzero(mask).astype(np.int32)
        return feats

    def admit(self, features, tree_index: int) -> list[int]:
        """Put features into Omega, in the given order.

        Parameters
        ----------
        features : iterable of int
        tree_index : int
            Recorded in ``first_use_tree`` for the new ones.

        Returns
        -------
        list of int
            The features that were not in Omega before.
        """
        new = []
        for f in features:
            f = int(f)
            if not self.used[f]:
                self.used[f] = True
                self.group_used[self.groups[f]] = True
                self.first_use_tree[f] = tree_index
                self.order.append(f)
                new.append(f)
        if new:
            self._changed()
        return new

    def snapshot(self, n_trees=None) -> dict:
        """Omega and what follows from it, copied (``restore`` puts it back).

        Parameters
        ----------
        n_trees : int or None, default=None
            None: the state now. An int: the state before tree ``n_trees`` grew, read from
            ``first_use_tree`` (the features first used by an earlier tree, their groups,
            and the group tests' candidates of those trees).

        Returns
        -------
        dict
            ``used``, ``group_used``, ``first_use_tree`` (copies), ``order`` and the group
            tests' ``candidates_by_tree`` so far.
        """
        if n_trees is None:
            used, group_used = self.used.copy(), self.group_used.copy()
            first, order = self.first_use_tree.copy(), list(self.order)
            candidates = list(self.candidates_by_tree)
        else:
            first = self.first_use_tree
            first = np.where((first >= 0) & (first < n_trees), first, -1)
            used = first >= 0
            group_used = np.zeros_like(self.group_used)
            group_used[self.groups[used]] = True
            order = [f for f in self.order if used[f]]
            candidates = list(self.candidates_by_tree[:n_trees])
        return {
            "used": used,
            "group_used": group_used,
            "first_use_tree": first,
            "order": order,
            "candidates_by_tree": candidates,
        }

    def restore(self, snap: dict) -> None:
        """Set Omega to a snapshot.

        Parameters
        ----------
        snap : dict
            A ``snapshot`` of a state over the same features and groups.
        """
        if snap["used"].shape != self.used.shape or (
            snap["group_used"].shape != self.group_used.shape
        ):
            raise ValueError("the snapshot is of a penalty state over other features or groups")
        self.used = snap["used"].copy()
        self.group_used = snap["group_used"].copy()
        self.first_use_tree = snap["first_use_tree"].copy()
        self.order = list(snap["order"])
        self.candidates_by_tree = list(snap.get("candidates_by_tree", []))
        self._changed()

    def gain_divisor(self, g, h) -> float:
        """The divisor of every gain of a tree grown on these gradients.

        The sum runs over rows with h > 0. The same on every device and in any row order:
        each row's g * g / h is one IEEE multiplication and one IEEE division (numpy and cupy
        round them identically, and nothing can fuse them), and sum g^2/h, G and H are
        fixed-point sums (``quantize.exact_sum``); the rest is host arithmetic.

        Parameters
        ----------
        g, h : ndarray of shape (n_samples,), float64
            Weighted gradients and hessians (numpy or cupy).

        Returns
        -------
        float
            1.0 for ``scaling="none"``; else the root's largest gain
            ``0.5 * (sum g^2/h - G^2/H)``, or 1.0 when that is not positive.
        """
        if self.scaling == "none":
            return 1.0
        xp = namespace_of(g)
        pos = h > 0
        G = exact_sum(g)
        H = exact_sum(h)
        total = exact_sum(xp.where(pos, g * g / xp.where(pos, h, 1.0), 0.0))
        div = 0.5 * (total - G * G / H) if H > 0 else 0.0
        # A perfectly fit root has nothing left to explain; any positive divisor keeps the
        # score finite, and then no split gains anything anyway.
        return div if div > 0 else 1.0
