"""The record of a grown forest (:class:`Forest`) and the builder that collects it tree by tree
(:class:`ForestBuilder`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._types import RAW_DTYPE
from ..engine.tree import Tree, TreeEnsemble, n_nodes_for_depth

__all__ = ["Forest", "ForestBuilder"]


@dataclass
class Forest:
    """A grown forest and what the selection step needs.

    Parameters
    ----------
    ensemble : TreeEnsemble
        All trees, padded to the deepest depth (unweighted: a tree's leaf values are its own
        predictions; ``tree_column`` is the output column / class).
    A : ndarray of shape (n_samples, n_trees), float64, on the device
        Tree t's prediction on training row i.
    feature_masks : ndarray of shape (n_trees, n_features), bool, on the host
        Tree t splits on feature f.
    tree_depth, tree_round, tree_member : ndarray of shape (n_trees,), int64
        Depth, round (bag: depth level) and bag member (within the round) of each tree.
    member_loss : list of list of float
        Relative train loss after each bag member, per round.
    round_stop : list of str
        Why each round ended ("converged" or "max_trees_per_round").
    oob_improvement : list of float
        The out-of-bag improvement of each bag-boosting round (empty for bagging).
    stop_reason : str
        Why the forest stopped growing.
    base_score : ndarray of shape (n_outputs,), float64
        The constant base prediction.
    train_raw : ndarray of shape (n_samples, n_outputs), float64, on the device
        The forest's own output on the training rows.
    method : str
        "bagboost" or "bag".
    pruned_splits : ndarray of shape (n_features,), int64, or None
        With out-of-bag pruning (``ForestParams.oob_prune``): the splits pruning removed
        from the trees, per feature. None without pruning.
    pruned_saving : ndarray of shape (n_features,), float64, or None
        With out-of-bag pruning: the sum of those splits' own out-of-bag savings
        (``gpufs.forest._prune.PruneResult``), per feature. None without pruning.
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
    pruned_splits: np.ndarray | None = None
    pruned_saving: np.ndarray | None = None

    @property
    def n_trees(self) -> int:
        """Number of trees."""
        return int(self.feature_masks.shape[0])

    @property
    def tree_column(self) -> np.ndarray:
        """ndarray of shape (n_trees,), int64: the output column (class) of each tree."""
        return np.asarray(self.ensemble.tree_column, dtype=np.int64)

    def coverage(self) -> np.ndarray:
        """The features used by at least one tree.

        Returns
        -------
        ndarray of shape (n_features,), bool
        """
        return self.feature_masks.any(axis=0)

    def tree_gains(self) -> np.ndarray:
        """Each tree's total split gain on each feature.

        Returns
        -------
        ndarray of shape (n_trees, n_features), float64
        """
        s = self.ensemble.stacked()
        out = np.zeros(self.feature_masks.shape)
        rows, nodes = np.nonzero(s["feature"] >= 0)
        np.add.at(out, (rows, s["feature"][rows, nodes]), s["gain"][rows, nodes])
        return out

    def tree_predictions(self, X, backend):
        """Per-tree predictions on raw data.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float64
            NaN marks a missing value; on the backend's device.
        backend : CPUBackend or GPUBackend

        Returns
        -------
        ndarray of shape (n_samples, n_trees), float64
        """
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


def _pad_tree(tree: Tree, depth: int, categorical: bool) -> Tree:
    """The same tree in the arrays of a complete tree of ``depth`` (extra nodes unused), with
    room for category bitsets when ``categorical`` (a single-feature tree on a numeric column
    of a table with categorical columns has none of its own)."""
    out = Tree.empty(depth, categorical=categorical)
    m = tree.arrays["feature"].shape[0]
    for k, a in tree.arrays.items():
        if a.ndim == 2:
            out.arrays[k][:m, : a.shape[1]] = a
        else:
            out.arrays[k][:m] = a
    return out


class ForestBuilder:
    """Collects the trees of a forest as they are grown, with their place in it.

    Parameters
    ----------
    n_features : int
    is_categorical : ndarray of shape (n_features,), bool, or None, default=None
        The categorical features (their splits keep category bitsets).
    """

    def __init__(self, n_features: int, is_categorical=None):
        self.n_features = int(n_features)
        self.is_categorical = is_categorical
        self._trees: list[Tree] = []
        self._column: list[int] = []
        self._depth: list[int] = []
        self._round: list[int] = []
        self._member: list[int] = []
        self._masks: list[np.ndarray] = []
        self._predictions: list = []

    @property
    def n_trees(self) -> int:
        """Trees added so far (the index the next tree gets)."""
        return len(self._trees)

    def add(
        self, tree: Tree, prediction, *, column: int, depth: int, round_index: int, member: int
    ) -> None:
        """Record one grown tree.

        Parameters
        ----------
        tree : Tree
        prediction : ndarray of shape (n_samples,), float64
            The tree's prediction on every training row (a column of ``A``).
        column : int
            Output column (class) the tree fits.
        depth, round_index, member : int
            Its depth, round and bag member.
        """
        self._trees.append(tree)
        self._column.append(int(column))
        self._depth.append(int(depth))
        self._round.append(int(round_index))
        self._member.append(int(member))
        mask = np.zeros(self.n_features, dtype=bool)
        f = tree.arrays["feature"]
        mask[f[f >= 0]] = True
        self._masks.append(mask)
        self._predictions.append(prediction)

    def build(
        self,
        xp,
        n_samples: int,
        *,
        base_score,
        train_raw,
        method: str,
        member_loss,
        round_stop,
        oob_improvement,
        stop_reason: str,
        pruned_splits=None,
        pruned_saving=None,
    ) -> Forest:
        """The :class:`Forest` of the trees added (every tree padded to the deepest one).

        Parameters
        ----------
        xp : module
            The array namespace of the trees' predictions.
        n_samples : int
            Training rows (the height of ``A`` when no tree was added).
        base_score, train_raw, method, member_loss, round_stop, oob_improvement, stop_reason
        pruned_splits, pruned_saving
            The :class:`Forest` fields of the same names.

        Returns
        -------
        Forest
        """
        max_d = max(self._depth) if self._depth else 1
        ens = TreeEnsemble(
            max_depth=max_d,
            n_features=self.n_features,
            base_score=np.asarray(base_score, np.float64),
            is_categorical=self.is_categorical,
        )
        words = ens.stacked()["cat_bits"].shape[2]
        for t, c in zip(self._trees, self._column):
            short = t.arrays["feature"].shape[0] < n_nodes_for_depth(max_d)
            narrow = t.arrays["cat_bits"].shape[1] != words
            ens.append(_pad_tree(t, max_d, ens.categorical) if short or narrow else t, c)
        A = (
            xp.stack(self._predictions, axis=1)
            if self._predictions
            else xp.zeros((n_samples, 0), dtype=RAW_DTYPE)
        )
        masks = np.stack(self._masks) if self._masks else np.zeros((0, self.n_features), dtype=bool)
        return Forest(
            ensemble=ens,
            A=A,
            feature_masks=masks,
            tree_depth=np.asarray(self._depth, np.int64),
            tree_round=np.asarray(self._round, np.int64),
            tree_member=np.asarray(self._member, np.int64),
            member_loss=member_loss,
            round_stop=round_stop,
            oob_improvement=oob_improvement,
            stop_reason=stop_reason,
            base_score=np.asarray(base_score, np.float64),
            train_raw=train_raw,
            method=method,
            pruned_splits=pruned_splits,
            pruned_saving=pruned_saving,
        )
