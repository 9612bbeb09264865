"""The tree and ensemble data model shared by the CPU and the GPU.

Owns the struct-of-arrays representation (``TREE_FIELDS``: per node of a complete binary
tree, node i's children 2i+1 and 2i+2), the prediction entry points, host/device moves, and
the ensemble's JSON form (``ensemble_to_dict`` / ``ensemble_from_dict``, which checks every
invariant of the arrays before any of them reaches compiled code).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import _types as T
from ..io._strict_json import (
    FORMAT_VERSION,
    MAX_CLASSES,
    MAX_COUNT,
    MAX_DEPTH,
    MAX_FEATURES,
    MAX_NODES,
    At,
    dumps,
    floats_out,
    loads,
    plain,
    read_bool_array,
    read_float_array,
    read_index_list,
    read_int,
    read_int_array,
    read_list,
    read_obj,
    short,
)
from ..rules._categorical import CAT_WORDS

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
    """One tree: a struct of 1-D host arrays over its nodes (``docs/module_notes.rst``).

    Every field of ``TREE_FIELDS`` is also an attribute (``tree.feature`` is
    ``tree.arrays["feature"]``).

    Parameters
    ----------
    arrays : dict of str to ndarray of shape (n_nodes,)
        One array per field of ``TREE_FIELDS``, of its dtype.
    """

    arrays: dict

    @classmethod
    def empty(cls, max_depth: int, categorical: bool = False) -> Tree:
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
        arrays = {
            k: np.zeros(_field_shape(k, n, categorical), dtype=dt) for k, dt in TREE_FIELDS.items()
        }
        arrays["feature"][:] = -1
        return cls(arrays)

    def __getattr__(self, name):
        try:
            return self.__dict__["arrays"][name]
        except KeyError:
            raise AttributeError(name) from None


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
    base_score: np.ndarray  # (n_outputs,) float64
    trees: list = field(default_factory=list)  # list[Tree]
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
        stop = _whole(self, stop)
        if start == 0 and stop is None and self._stacked is not None:
            return self._stacked
        trees = self.trees[start:stop]
        n_nodes = n_nodes_for_depth(self.max_depth)
        out = {}
        for k, dt in TREE_FIELDS.items():
            out[k] = (
                np.stack([t.arrays[k] for t in trees])
                if trees
                else np.zeros((0,) + _field_shape(k, n_nodes, self.categorical), dtype=dt)
            )
        out["tree_column"] = np.asarray(self.tree_column[start:stop], dtype=np.int32)
        out["is_categorical"] = self.categorical_mask()
        if start == 0 and stop is None:
            self._stacked = out
        return out

    def _arrays_for(self, backend, start=0, stop=None) -> dict:
        """The stacked arrays on ``backend``'s device; the whole ensemble's are kept per
        backend kind, so repeated predictions copy them to a device once."""
        stop = _whole(self, stop)
        arrs = self.stacked(start, stop)
        if start or stop is not None:
            return {k: backend.to_device(v) for k, v in arrs.items()}
        if self._device_cache is None:
            self._device_cache = {}
        cached = self._device_cache.get(backend.name)
        if cached is None:
            cached = self._device_cache[backend.name] = {
                k: backend.to_device(v) for k, v in arrs.items()
            }
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
        return backend.predict_raw(
            X,
            a["feature"],
            a["threshold"],
            a["missing_left"],
            a["value"],
            a["tree_column"],
            out,
            a["is_categorical"],
            a["cat_bits"],
        )

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
        return backend.predict_binned(
            Xb,
            a["feature"],
            a["bin_threshold"],
            a["missing_left"],
            a["value"],
            a["tree_column"],
            out,
            a["is_categorical"],
            a["cat_bits"],
        )

    # --- persistence: always through host arrays (ensemble_to_dict / ensemble_from_dict) -
    def to_dict(self) -> dict:
        """The ensemble in the JSON form of the model files.

        Returns
        -------
        dict
            Plain lists, numbers and strings (+inf thresholds as the string "Infinity").
        """
        return ensemble_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TreeEnsemble:
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
        return ensemble_from_dict(plain(d))

    def to_json(self) -> str:
        """The ensemble as strict JSON text.

        Returns
        -------
        str
            Python's float repr round-trips exactly, so a loaded ensemble predicts
            bit-identically.
        """
        return dumps(self.to_dict())

    @classmethod
    def from_json(cls, s: str) -> TreeEnsemble:
        """An ensemble from ``to_json``'s text (strict JSON, validated).

        Parameters
        ----------
        s : str

        Returns
        -------
        TreeEnsemble
        """
        return cls.from_dict(loads(s))

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_stacked"] = None
        state["_device_cache"] = None  # device arrays never travel in a pickle
        return state


# --- the JSON form of an ensemble (model files) ---------------------------------------------

#: The format tag of a standalone ensemble (``TreeEnsemble.to_dict``).
ENSEMBLE_FORMAT = "gpufs.TreeEnsemble"


def ensemble_fields(ens) -> dict:
    """The JSON form of an ensemble inside a model file (no format tags).

    Parameters
    ----------
    ens : TreeEnsemble

    Returns
    -------
    dict
        Plain lists, numbers and strings.
    """
    s = ens.stacked()
    trees = {}
    for k, dt in TREE_FIELDS.items():
        if k == "cat_bits":
            continue
        trees[k] = floats_out(s[k]) if np.dtype(dt).kind == "f" else s[k].tolist()
    out = {
        "max_depth": int(ens.max_depth),
        "n_features": int(ens.n_features),
        "n_outputs": int(ens.n_outputs),
        "n_trees": int(ens.n_trees),
        "base_score": floats_out(ens.base_score),
        "tree_column": s["tree_column"].tolist(),
        "trees": trees,
    }
    if ens.categorical:
        # the bitsets of the categorical splits only: [node, word 0, ..., word 7] per split
        is_cat = ens.categorical_mask()
        split = (s["feature"] >= 0) & is_cat[np.maximum(s["feature"], 0)]
        out["categorical_features"] = np.flatnonzero(is_cat).tolist()
        trees["cat_bits"] = [
            [[int(i)] + s["cat_bits"][t, i].tolist() for i in np.flatnonzero(split[t])]
            for t in range(ens.n_trees)
        ]
    return out


def ensemble_to_dict(ens) -> dict:
    """The JSON form of a :class:`gpufs.engine.tree.TreeEnsemble` (standalone: with format tags).

    Parameters
    ----------
    ens : TreeEnsemble

    Returns
    -------
    dict
    """
    return {"format": ENSEMBLE_FORMAT, "format_version": FORMAT_VERSION, **ensemble_fields(ens)}


def ensemble_from_dict(
    d, at=None, *, n_features=None, n_outputs=None, cuts=None, tagged=True, categorical=None
):
    """Validate an ensemble dict and build the :class:`gpufs.engine.tree.TreeEnsemble`.

    Parameters
    ----------
    d : object
        The parsed dict.
    at : At or None, default=None
        Where it sits in the file (for the error messages).
    n_features, n_outputs : int or None, default=None
        What the enclosing model declares (checked when given).
    cuts : list of ndarray or None, default=None
        The bin mapper's cut points; with them every split's threshold must be the cut point
        its bin threshold names.
    tagged : bool, default=True
        The dict carries ``format`` and ``format_version`` (a standalone ensemble).
    categorical : ndarray of shape (n_features,), bool, or None, default=None
        The bin mapper's categorical features, which the ensemble's
        ``categorical_features`` must equal.

    Returns
    -------
    TreeEnsemble
    """
    at = at or At("ensemble")
    keys = ["max_depth", "n_features", "n_outputs", "n_trees", "base_score", "tree_column", "trees"]
    optional = ["categorical_features"]
    if tagged:
        if type(d) is not dict or d.get("format") != ENSEMBLE_FORMAT:
            found = d.get("format") if type(d) is dict else None
            at.fail(f"not a gpufs ensemble (format={short(found)}, expected {ENSEMBLE_FORMAT!r}).")
        read_obj(d, at, keys + ["format", "format_version"], optional)
        if d["format_version"] != FORMAT_VERSION:
            at["format_version"].fail(
                f"version {short(d['format_version'])} is not {FORMAT_VERSION}."
            )
    else:
        read_obj(d, at, keys, optional)
    depth = read_int(d["max_depth"], at["max_depth"], 0, MAX_DEPTH)
    d_feat = read_int(d["n_features"], at["n_features"], 1, MAX_FEATURES)
    if n_features is not None and d_feat != n_features:
        at["n_features"].fail(f"{d_feat} differs from the model's n_features_in {n_features}.")
    k_out = read_int(d["n_outputs"], at["n_outputs"], 1, MAX_CLASSES)
    if n_outputs is not None and k_out != n_outputs:
        at["n_outputs"].fail(f"{k_out} outputs, but the model has {n_outputs}.")
    n_nodes = n_nodes_for_depth(depth)
    n_trees = read_int(d["n_trees"], at["n_trees"], 0, MAX_NODES // n_nodes)
    base = read_float_array(d["base_score"], at["base_score"], (k_out,))
    col = read_int_array(d["tree_column"], at["tree_column"], (n_trees,), 0, k_out - 1, np.int32)
    tat = at["trees"]
    is_cat = np.zeros(d_feat, dtype=bool)
    if d.get("categorical_features") is not None:
        cf = read_index_list(d["categorical_features"], at["categorical_features"], d_feat)
        if np.any(np.diff(cf) <= 0):
            at["categorical_features"].fail("feature indices must be increasing.")
        is_cat[cf] = True
    if categorical is not None and not np.array_equal(is_cat, categorical):
        at["categorical_features"].fail("differs from the categorical features of the bins.")
    fields = [k for k in TREE_FIELDS if k != "cat_bits"]
    read_obj(d["trees"], tat, fields + (["cat_bits"] if is_cat.any() else []))
    shape = (n_trees, n_nodes)
    feature = read_int_array(
        d["trees"]["feature"], tat["feature"], shape, -1, d_feat - 1, T.FEATURE_DTYPE
    )
    a = {"feature": feature}
    a["bin_threshold"] = read_int_array(
        d["trees"]["bin_threshold"],
        tat["bin_threshold"],
        shape,
        0,
        T.MAX_VALUE_BINS - 1,
        T.BIN_THRESHOLD_DTYPE,
    )
    a["threshold"] = read_float_array(
        d["trees"]["threshold"], tat["threshold"], shape, nonfinite=("Infinity",)
    )
    a["missing_left"] = read_bool_array(d["trees"]["missing_left"], tat["missing_left"], shape)
    a["value"] = read_float_array(d["trees"]["value"], tat["value"], shape)
    a["gain"] = read_float_array(d["trees"]["gain"], tat["gain"], shape)
    a["cover"] = read_float_array(d["trees"]["cover"], tat["cover"], shape, lo=0.0)
    a["count"] = read_int_array(d["trees"]["count"], tat["count"], shape, 0, MAX_COUNT)
    _check_tree_structure(a, depth, tat)
    a["cat_bits"] = _read_cat_bits(d["trees"].get("cat_bits"), tat["cat_bits"], a, is_cat, cuts)
    if cuts is not None:
        _check_thresholds(a, cuts, tat, is_cat)
    _check_no_overflow(a["value"], col, base, k_out, tat["value"])
    ens = TreeEnsemble(
        max_depth=depth,
        n_features=d_feat,
        base_score=base,
        is_categorical=is_cat if is_cat.any() else None,
    )
    for t in range(n_trees):
        ens.append(Tree({k: a[k][t].copy() for k in TREE_FIELDS}), int(col[t]))
    return ens


def _check_tree_structure(a, depth, at):
    """The complete-binary-tree invariants of ``docs/module_notes.rst``, over all trees at once."""
    feature = a["feature"]
    n_trees, n_nodes = feature.shape
    if n_trees == 0:
        return
    internal = feature >= 0
    first_last = 2**depth - 1  # first node of the last level
    bad = np.argwhere(internal[:, first_last:])
    if bad.size:
        t, i = bad[0]
        at["feature"][int(t)][int(i) + first_last].fail(
            f"a split on the last level of a depth-{depth} tree (its children would be "
            "outside the tree)."
        )
    used = np.zeros_like(internal)
    used[:, 0] = True
    for level in range(depth):
        lo, hi = 2**level - 1, 2 ** (level + 1) - 1
        parent = used[:, lo:hi] & internal[:, lo:hi]
        used[:, 2 * lo + 1 : 2 * hi + 1 : 2] = parent
        used[:, 2 * lo + 2 : 2 * hi + 2 : 2] = parent
    leaf = used & ~internal
    defaults = {
        "feature": -1,
        "bin_threshold": 0,
        "threshold": 0.0,
        "missing_left": False,
        "value": 0.0,
        "gain": 0.0,
        "cover": 0.0,
        "count": 0,
    }
    for k, dflt in defaults.items():
        bad = np.argwhere(~used & (a[k] != dflt))
        if bad.size:
            t, i = (int(x) for x in bad[0])
            at[k][t][i].fail(
                f"node {i} of tree {t} is below a leaf (unused) but holds "
                f"{a[k][t, i].item()!r}, not {dflt!r}."
            )
    for k in ("bin_threshold", "threshold", "missing_left", "gain"):
        bad = np.argwhere(leaf & (a[k] != defaults[k]))
        if bad.size:
            t, i = (int(x) for x in bad[0])
            at[k][t][i].fail(
                f"node {i} of tree {t} is a leaf but holds "
                f"{a[k][t, i].item()!r}, not {defaults[k]!r}."
            )
    inner = np.argwhere(internal)
    if inner.size:
        t, i = inner[:, 0], inner[:, 1]
        c = a["count"]
        bad = np.flatnonzero(c[t, i] != c[t, 2 * i + 1] + c[t, 2 * i + 2])
        if bad.size:
            tt, ii = int(t[bad[0]]), int(i[bad[0]])
            at["count"][tt][ii].fail(
                f"node {ii} of tree {tt} holds {int(c[tt, ii])} rows, "
                "not the sum of its children's."
            )
        thr = a["threshold"][t, i]
        bad = np.flatnonzero(~np.isfinite(thr) & (thr != np.inf))
        if bad.size:
            tt, ii = int(t[bad[0]]), int(i[bad[0]])
            at["threshold"][tt][ii].fail("a split threshold must be a number or 'Infinity'.")


def _read_cat_bits(v, at, a, is_cat, cuts):
    """The category bitsets of the categorical splits -> uint32 (n_trees, n_nodes, W).

    Every split on a categorical feature has exactly one entry ``[node, w0, ..., w7]`` (nodes
    increasing), no other node has one; words are in [0, 2**32); no bit at or above the
    feature's bin count is set (255 without cut points: the missing bin follows
    ``missing_left``); such a split's bin threshold and threshold are 0."""
    feature = a["feature"]
    n_trees, n_nodes = feature.shape
    if not is_cat.any():
        return np.zeros((n_trees, n_nodes, 0), np.uint32)
    out = np.zeros((n_trees, n_nodes, CAT_WORDS), np.uint32)
    cat_split = (feature >= 0) & is_cat[np.maximum(feature, 0)]
    for k in ("bin_threshold", "threshold"):
        bad = np.argwhere(cat_split & (a[k] != 0))
        if bad.size:
            t, i = (int(x) for x in bad[0])
            at.fail(
                f"node {i} of tree {t} splits a categorical feature but its {k} is "
                f"{a[k][t, i].item()!r}, not 0."
            )
    n_bins = (
        np.full(is_cat.shape[0], T.MAX_VALUE_BINS, np.int64)
        if cuts is None
        else np.array([c.shape[0] + 1 for c in cuts], dtype=np.int64)
    )
    read_list(v, at, n_trees)
    for t, entries in enumerate(v):
        want = np.flatnonzero(cat_split[t])
        read_list(entries, at[t], want.shape[0])
        if not entries:
            continue
        rows = read_int_array(entries, at[t], (len(entries), 1 + CAT_WORDS), 0, 2**32 - 1)
        nodes = rows[:, 0]
        if not np.array_equal(nodes, want):
            j = int(np.flatnonzero(nodes != want)[0])
            at[t][j][0].fail(
                f"tree {t}'s categorical splits are at nodes {want.tolist()[:8]}; "
                f"entry {j} names node {int(nodes[j])}."
            )
        words = rows[:, 1:].astype(np.uint32)
        bit = np.arange(32 * CAT_WORDS)
        is_set = ((words[:, bit // 32] >> (bit % 32).astype(np.uint32)) & 1).astype(bool)
        limit = n_bins[feature[t, nodes]]
        bad = np.argwhere(is_set & (bit[None, :] >= limit[:, None]))
        if bad.size:
            j, b = (int(x) for x in bad[0])
            at[t][j].fail(
                f"bit {b} is set, but feature {int(feature[t, nodes[j]])} has {int(limit[j])} bins."
            )
        out[t, nodes] = words
    return out


def _check_thresholds(a, cuts, at, is_cat=None):
    """Every numeric split: bin threshold below its feature's bin count, threshold = that cut
    point (+inf for the top bin, whose split sends every value left and missing values
    right). Categorical splits are checked by ``_read_cat_bits``."""
    numeric = a["feature"] >= 0
    if is_cat is not None:
        numeric &= ~is_cat[np.maximum(a["feature"], 0)]
    inner = np.argwhere(numeric)
    if not inner.size:
        return
    t, i = inner[:, 0], inner[:, 1]
    f = a["feature"][t, i].astype(np.int64)
    bt = a["bin_threshold"][t, i].astype(np.int64)
    n_cuts = np.array([c.shape[0] for c in cuts], dtype=np.int64)
    bad = np.flatnonzero(bt > n_cuts[f])
    if bad.size:
        j = bad[0]
        at["bin_threshold"][int(t[j])][int(i[j])].fail(
            f"bin threshold {int(bt[j])} >= n_bins {int(n_cuts[f[j]] + 1)} of feature {int(f[j])}."
        )
    top = bt == n_cuts[f]
    bad = np.flatnonzero(top & a["missing_left"][t, i])
    if bad.size:
        j = bad[0]
        at["missing_left"][int(t[j])][int(i[j])].fail(
            "a split on the top bin sends every value left; its missing values must go right."
        )
    flat = np.concatenate(cuts + [np.zeros(1)])
    start = np.concatenate([[0], np.cumsum(n_cuts)[:-1]])
    expected = np.where(top, np.inf, flat[np.where(top, 0, start[f] + bt)])
    bad = np.flatnonzero(expected != a["threshold"][t, i])
    if bad.size:
        j = bad[0]
        at["threshold"][int(t[j])][int(i[j])].fail(
            f"threshold {a['threshold'][t[j], i[j]].item()!r} is not the cut point "
            f"{expected[j].item()!r} "
            f"that bin threshold {int(bt[j])} of feature {int(f[j])} names."
        )


def _check_no_overflow(value, col, base, k_out, at):
    """No row's raw score (base + one leaf value per tree) can overflow float64."""
    if value.shape[0] == 0:
        return
    with np.errstate(over="ignore"):
        bound = np.abs(base).astype(np.float64)
        np.add.at(bound, col.astype(np.int64), np.abs(value).max(axis=1))
    if not np.isfinite(bound).all():
        at.fail("leaf values so large that a prediction would overflow float64.")


def _whole(ensemble, stop):
    """``stop``, or None when it reaches the last tree: ``trees[:n_trees]`` is the whole
    ensemble, whose stacked arrays are kept (exact k's permutations predicted 700 trees 361
    times with ``stop=n_trees`` and stacked them anew each time: 3.7 of an 11 s fit)."""
    return None if stop is not None and stop >= len(ensemble.trees) else stop
