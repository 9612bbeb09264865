"""The tree and ensemble data model shared by the CPU and the GPU.

Owns the struct-of-arrays representation (below), the prediction entry points, host/device
moves, and the JSON entry points (the format itself: ``gpufs.model_io``).

A tree of depth D is a complete binary tree of ``n_nodes = 2**(D+1) - 1`` nodes; node i has
children 2i+1 and 2i+2. Per node:
  feature        int32    split feature, -1 for a leaf or an unused node
  bin_threshold  uint8    go left iff bin <= bin_threshold (missing bin: see missing_left)
  threshold      float64  go left iff x <= threshold (raw-data prediction)
  missing_left   bool     where a missing value goes
  value          float64  leaf output, learning rate applied (set on internal nodes too)
  gain           float64  loss reduction of the split (0 on leaves)
  cover          float64  sum of hessians of the node's rows
  count          int64    rows in the node
  cat_bits       uint32   (n_nodes, W): on a split of a categorical feature, the bitset of the
                          category bins sent left (``gpufs._categorical``); W = CAT_WORDS in
                          an ensemble with categorical features, else 0 (no memory)
A split on a categorical feature (``TreeEnsemble.is_categorical``) sends bin b left iff bit b
of its ``cat_bits`` is set (the missing bin by missing_left); its bin_threshold and threshold
are 0. An ensemble stacks these as (n_trees, n_nodes) arrays ((n_trees, n_nodes, W) for
cat_bits); ``tree_column[t]`` is the output column (class, for softmax) that tree t adds to,
and ``base_score`` (n_outputs,) starts every row.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _types as T
from ._categorical import CAT_WORDS

TREE_FIELDS = {
    "feature": T.FEATURE_DTYPE,
    "bin_threshold": T.BIN_THRESHOLD_DTYPE,
    "threshold": T.THRESHOLD_DTYPE,
    "missing_left": np.bool_,
    "value": T.VALUE_DTYPE,
    "gain": T.GAIN_DTYPE,
    "cover": T.COVER_DTYPE,
    "count": T.COUNT_DTYPE,
    "cat_bits": np.uint32,
}
#: Fields with a second axis: name -> its length in a tree with / without categorical splits.
_WIDE = {"cat_bits": (CAT_WORDS, 0)}


def _field_shape(name, n_nodes, categorical):
    wide = _WIDE.get(name)
    if wide is None:
        return (n_nodes,)
    return (n_nodes, wide[0] if categorical else wide[1])


def n_nodes_for_depth(max_depth: int) -> int:
    """Nodes of a complete binary tree of depth ``max_depth``.

    Parameters
    ----------
    max_depth : int >= 0

    Returns
    -------
    int
        ``2 ** (max_depth + 1) - 1``.
    """
    return 2 ** (max_depth + 1) - 1


@dataclass
class Tree:
    """One tree: a struct of 1-D host arrays over its nodes (see the module docstring).

    Every field of ``TREE_FIELDS`` is also an attribute (``tree.feature`` is
    ``tree.arrays["feature"]``).

    Parameters
    ----------
    arrays : dict of str to ndarray of shape (n_nodes,)
        One array per field of ``TREE_FIELDS``, of its dtype.
    """

    arrays: dict

    @classmethod
    def empty(cls, max_depth: int, categorical: bool = False) -> "Tree":
        """A tree of depth ``max_depth`` with every node a leaf of value 0.

        Parameters
        ----------
        max_depth : int >= 0
        categorical : bool, default=False
            Give the tree room for category bitsets (``cat_bits``).

        Returns
        -------
        Tree
            ``feature`` -1 everywhere, every other field 0.
        """
        n = n_nodes_for_depth(max_depth)
        arrays = {k: np.zeros(_field_shape(k, n, categorical), dtype=dt)
                  for k, dt in TREE_FIELDS.items()}
        arrays["feature"][:] = -1
        return cls(arrays)

    def __getattr__(self, name):
        try:
            return self.__dict__["arrays"][name]
        except KeyError:
            raise AttributeError(name) from None

    def used_features(self) -> np.ndarray:
        """The features the tree splits on.

        Returns
        -------
        ndarray of shape (n_used,), int32
            Sorted, without repetition.
        """
        f = self.arrays["feature"]
        return np.unique(f[f >= 0])


@dataclass
class TreeEnsemble:
    """A boosted or bagged ensemble: its trees, the output column each adds to, and the base
    score every row starts from. Arrays are kept on the host.

    Parameters
    ----------
    max_depth : int
        Depth of every tree (each has ``2 ** (max_depth + 1) - 1`` nodes).
    n_features : int
        Features of the data the trees split.
    base_score : ndarray of shape (n_outputs,), float64
        The raw score of every row before any tree.
    trees : list of Tree, default=[]
    tree_column : list of int, default=[]
        The output column (class, for softmax) each tree adds to.
    is_categorical : ndarray of shape (n_features,), bool, or None, default=None
        The categorical features, whose splits use the trees' category bitsets (None: none).
    """

    max_depth: int
    n_features: int
    base_score: np.ndarray                      # (n_outputs,) float64
    trees: list = field(default_factory=list)   # list[Tree]
    tree_column: list = field(default_factory=list)
    #: bool (n_features,): the categorical features (None: none), whose splits use cat_bits
    is_categorical: np.ndarray | None = None
    _stacked: dict | None = field(default=None, repr=False, init=False)
    _device_cache: dict | None = field(default=None, repr=False, init=False)

    @property
    def n_trees(self) -> int:
        """Number of trees."""
        return len(self.trees)

    @property
    def categorical(self) -> bool:
        """Whether any feature is categorical (the trees then carry category bitsets)."""
        return self.is_categorical is not None and bool(np.any(self.is_categorical))

    def categorical_mask(self) -> np.ndarray:
        """The categorical features.

        Returns
        -------
        mask : ndarray of shape (n_features,), bool
            All False when there are none.
        """
        if self.is_categorical is None:
            return np.zeros(self.n_features, dtype=np.bool_)
        return np.ascontiguousarray(self.is_categorical, dtype=np.bool_)

    @property
    def n_outputs(self) -> int:
        """Number of output columns (classes for softmax, else 1)."""
        return int(np.asarray(self.base_score).shape[0])

    def append(self, tree: Tree, column: int) -> None:
        """Add a tree that adds to output column ``column``.

        Parameters
        ----------
        tree : Tree
            Of depth ``max_depth``.
        column : int
            Its output column, in ``[0, n_outputs)``.
        """
        self.trees.append(tree)
        self.tree_column.append(int(column))
        self._stacked = None
        self._device_cache = None

    def stacked(self, start: int = 0, stop: int | None = None) -> dict:
        """The trees ``trees[start:stop]`` as stacked host arrays.

        Parameters
        ----------
        start : int, default=0
        stop : int or None, default=None

        Returns
        -------
        dict
            Every field of ``TREE_FIELDS`` as an ndarray of shape (n_trees, n_nodes), and
            ``"tree_column"``, an int32 ndarray of shape (n_trees,). The whole ensemble's
            arrays are kept until the next ``append``.
        """
        if start == 0 and stop is None and self._stacked is not None:
            return self._stacked
        trees = self.trees[start:stop]
        n_nodes = n_nodes_for_depth(self.max_depth)
        out = {}
        for k, dt in TREE_FIELDS.items():
            out[k] = (np.stack([t.arrays[k] for t in trees]) if trees
                      else np.zeros((0,) + _field_shape(k, n_nodes, self.categorical),
                                    dtype=dt))
        out["tree_column"] = np.asarray(self.tree_column[start:stop], dtype=np.int32)
        out["is_categorical"] = self.categorical_mask()
        if start == 0 and stop is None:
            self._stacked = out
        return out

    def _arrays_for(self, backend, start=0, stop=None) -> dict:
        """The stacked arrays on ``backend``'s device; the whole ensemble's are kept per
        backend kind, so repeated predictions copy them to a device once."""
        arrs = self.stacked(start, stop)
        if start or stop is not None:
            return {k: backend.to_device(v) for k, v in arrs.items()}
        if self._device_cache is None:
            self._device_cache = {}
        cached = self._device_cache.get(backend.name)
        if cached is None:
            cached = self._device_cache[backend.name] = {k: backend.to_device(v)
                                                         for k, v in arrs.items()}
        return cached

    def _init_raw(self, backend, n):
        xp = backend.xp
        return xp.tile(xp.asarray(self.base_score, dtype=T.RAW_DTYPE), (n, 1))

    def predict_raw(self, X, backend, start=0, stop=None, out=None):
        """Raw scores from float features.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float32 or float64
            On ``backend``'s device; NaN marks a missing value.
        backend : CPUBackend or GPUBackend
        start, stop : int, default=0 and None
            Use the trees ``trees[start:stop]`` only.
        out : ndarray of shape (n_samples, n_outputs), float64, default=None
            Scores to add the trees to, in place; None starts from ``base_score``.

        Returns
        -------
        raw : ndarray of shape (n_samples, n_outputs), float64
            On ``backend``'s device (``out`` when given).
        """
        a = self._arrays_for(backend, start, stop)
        if out is None:
            out = self._init_raw(backend, X.shape[0])
        return backend.predict_raw(X, a["feature"], a["threshold"], a["missing_left"],
                                   a["value"], a["tree_column"], out, a["is_categorical"],
                                   a["cat_bits"])

    def predict_binned(self, Xb, backend, start=0, stop=None, out=None):
        """Raw scores from binned features; equal to ``predict_raw`` on the same rows.

        Parameters
        ----------
        Xb : ndarray of shape (n_samples, n_features), uint8
            Binned by the ensemble's ``BinMapper``, on ``backend``'s device.
        backend : CPUBackend or GPUBackend
        start, stop : int, default=0 and None
            Use the trees ``trees[start:stop]`` only.
        out : ndarray of shape (n_samples, n_outputs), float64, default=None
            Scores to add the trees to, in place; None starts from ``base_score``.

        Returns
        -------
        raw : ndarray of shape (n_samples, n_outputs), float64
        """
        a = self._arrays_for(backend, start, stop)
        if out is None:
            out = self._init_raw(backend, Xb.shape[0])
        return backend.predict_binned(Xb, a["feature"], a["bin_threshold"], a["missing_left"],
                                      a["value"], a["tree_column"], out, a["is_categorical"],
                                      a["cat_bits"])

    # --- persistence: always through host arrays (format and checks: gpufs.model_io) ---------
    def to_dict(self) -> dict:
        """The ensemble in the JSON form of ``gpufs.model_io``.

        Returns
        -------
        dict
            Plain lists, numbers and strings (+inf thresholds as the string "Infinity").
        """
        from .model_io import ensemble_to_dict

        return ensemble_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TreeEnsemble":
        """An ensemble from ``to_dict``'s form, validated completely first, so the arrays are
        safe for the compiled kernels.

        Parameters
        ----------
        d : dict
            ``to_dict``'s form (numpy arrays and scalars are accepted too).

        Returns
        -------
        TreeEnsemble
            A ValueError naming the field is raised for anything invalid.
        """
        from .model_io import ensemble_from_dict, plain

        return ensemble_from_dict(plain(d))

    def to_json(self) -> str:
        """The ensemble as strict JSON text.

        Returns
        -------
        str
            Python's float repr round-trips exactly, so a loaded ensemble predicts
            bit-identically.
        """
        from .model_io import dumps

        return dumps(self.to_dict())

    @classmethod
    def from_json(cls, s: str) -> "TreeEnsemble":
        """An ensemble from ``to_json``'s text (strict JSON, validated).

        Parameters
        ----------
        s : str

        Returns
        -------
        TreeEnsemble
        """
        from .model_io import loads

        return cls.from_dict(loads(s))

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_stacked"] = None
        state["_device_cache"] = None  # device arrays never travel in a pickle
        return state
