"""The driver's backend: the grower's interface, answered by the workers' shards.

Owns the driver's half of a distributed tree. ``gpufs.engine.boosting.fit_boosting`` (with
:class:`~gpufs.dask._rows.ShardRows`), ``gpufs.engine.grower.grow_tree_packed``,
``gpufs.engine.quantize.prepare_gradients`` and the forest algorithms run unchanged on the driver
against :class:`ClusterBackend`, which implements the backend methods they call:

* ``gradient_extremes`` / ``quantize_gradients``: each shard's maxima and int64 sums; the
  driver takes the max of the maxima and the sum of the sums (both exact);
* ``start_tree``: each shard's root histogram of its rows, summed among the workers
  (``ShardGroup.call_reduced``: int64, exact in any order; the driver receives the sum);
* ``level_step``: the decisions are made once, here, by ``CPUBackend.decide_level`` (the
  shared ``_gain`` and ``_categorical`` scans and the ``_level`` rule) on the summed
  histograms; the plan (a few numbers per split, category bitsets included) goes to every
  shard, which partitions its rows, returns its rows-left counts and keeps its left
  children's histograms (``advance_level`` of the shard's backend, the CPU's or the GPU's);
  the workers sum those, the driver
  receives the sum and derives each right child as parent - left (exact), as the single
  process derives the sibling of the child it built;
* ``node_sums``: the driver's node sums and counts (counts summed over the shards);
* ``update_raw``: each shard adds the leaf values to its rows' raw scores. The journal
  (``_journal``) keeps, instead of this call, the tree's splits (:func:`replay_plan`, a few
  numbers per split) and leaf values: a rebuilt shard partitions its rows by them again and
  adds the same values, so the live tree states need not be kept.

Per level one sum of the left children's histograms (splits x the features' histogram slots
x 16 bytes, ``gpufs.rules._hist_layout``: a feature's value bins and its missing bin, whatever the
number of shards) travels to the driver, and the plan (to every shard) travels back. The
node gain bounds of the CPU level step (which let a node skip the paying features'
histograms) are not kept on a cluster: a
node's bound is a sum over all its rows, and every shard must build the same features for the
histograms to add up; no decision depends on the bounds, so the trees are the same. Everything
else the grower needs (objective kernels on host arrays, for a forest) is the local CPU
backend's.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._types import HIST_DTYPE
from ..backends.base import SplitParams
from ..backends.cpu import CPUBackend
from ..rules._hist_layout import HistLayout, tree_layout

__all__ = ["ClusterBackend", "GradColumn", "RawColumn", "ShardedBins", "replay_plan"]

#: The split parameters a replayed partition reads (its scales only matter to the gain
#: bounds, which a cluster does not keep).
_REPLAY_SPLIT = SplitParams(
    n_bins=np.zeros(0, np.int32),
    g_scale=1.0,
    h_scale=1.0,
    reg_lambda=0.0,
    gain_divisor=1.0,
    min_child_weight=0.0,
    min_split_gain=0.0,
)


def replay_plan(plan, d):
    """The part of a level's ``SplitPlan`` that partitions rows (``advance_level`` without
    building histograms): the splits, their left sums and category bitsets, with shared
    placeholders of d entries for the per-feature arrays only a histogram build reads."""
    zeros, none = _placeholders(d)
    return plan._replace(
        penalty=zeros,
        admitted_now=none,
        n_admitted=0,
        search_full=np.zeros(0, np.bool_),
        next_feats=np.zeros(0, np.int32),
        next_n_feats=0,
        next_full=False,
        split=_REPLAY_SPLIT,
    )


_PLACEHOLDERS: dict = {}


def _placeholders(d):
    if d not in _PLACEHOLDERS:
        _PLACEHOLDERS[d] = (np.zeros(d, np.float64), np.zeros(d, np.bool_))
    return _PLACEHOLDERS[d]


class ShardedBins:
    """The binned matrix of a fit, held by the shards: only its shape lives here (and, for
    one column of it, which column)."""

    def __init__(self, n, d, column=None):
        self.shape = (int(n), int(d))
        self.column = column

    def __getitem__(self, key):
        """``Xb[:, f:f + 1]``: one column (a single-feature tree's matrix), on the shards."""
        rows, cols = key
        if (
            rows != slice(None)
            or not isinstance(cols, slice)
            or cols.step not in (None, 1)
            or self.column is not None
            or cols.stop != cols.start + 1
        ):
            raise TypeError("the shards' binned matrix is sliced by one column only")
        return ShardedBins(self.shape[0], 1, column=int(cols.start))


class _HostArrays:
    """numpy, for the host arrays of the driver's algorithms (a forest's), except that
    ``ascontiguousarray`` passes a :class:`ShardedBins` column through: the forest copies
    each column of the binned matrix for its single-feature trees, and on a cluster the
    column stays on the shards (each shard reads its own column of its rows, a view)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def ascontiguousarray(a, *args, **kwargs):
        return a if isinstance(a, ShardedBins) else np.ascontiguousarray(a, *args, **kwargs)


class GradColumn:
    """Output column k of the shards' gradients (a stand-in for a (n,) array)."""

    def __init__(self, k, n):
        self.k, self.shape = int(k), (int(n),)


class RawColumn:
    """Output column k of the shards' raw scores."""

    def __init__(self, k):
        self.k = int(k)


class _FixedPoint:
    """The shards' fixed-point gradients of the current tree."""

    shape = (0, 2)


class _DriverTree:
    """The driver's state of one tree: the level's nodes and their summed histograms, and
    the nodes' exact sums and row counts (no rows; no gain bounds: ``q`` empty)."""

    __slots__ = (
        "active",
        "hist",
        "layout",
        "node_g",
        "node_h",
        "node_count",
        "node_s",
        "q",
        "slot_full",
        "feats",
        "n_feats",
        "full",
        "parallel",
        "max_depth",
        "plans",
        "d",
    )


class ClusterBackend:
    """The backend interface of the grower, run by a :class:`~gpufs.dask._group.ShardGroup`.

    Parameters
    ----------
    group : ShardGroup
    n_bins : ndarray of shape (n_features,), int32
        Value bins per feature (each feature's histogram travels as its n_bins + 1 slots).
    """

    name = "dask"
    xp = _HostArrays()
    #: one ``level_step`` per level: the driver decides, the shards advance
    grow_levels = None
    #: the fitted estimator's ``device_`` (``selectors.gbfs.fitted_device``): the driver's
    #: trees and predictions are the CPU's
    fitted_device = "cpu"

    def __init__(self, group, n_bins):
        self.group = group
        self.local = CPUBackend()
        self.n_features = int(np.asarray(n_bins).shape[0])
        #: the compact layout of ``n_bins``: a node's histogram travels as its slots
        self.layout = HistLayout.from_n_bins(np.asarray(n_bins))
        self.tree_index = -1
        self.level = 0
        #: (output column, (unit_hessian, divisor)) -> every shard's gradient extremes, from
        #: the round's call (``ShardRows.round_gradients``)
        self.extremes = {}

    def __getattr__(self, name):  # host-array kernels (a forest's objectives) run here
        return getattr(self.__dict__["local"], name)

    def _phase(self, what, tree=None):
        t = self.tree_index if tree is None else tree
        self.group.phase = f"tree {t}, {what}"

    def prepare_binned(self, Xb):
        return Xb

    def group_test_steps(self):
        """GT-GBM's search steps on the shards (``_gt.ClusterSteps``)."""
        from ._gt import ClusterSteps

        return ClusterSteps

    # --- gradients --------------------------------------------------------------------------
    def gradient_extremes(self, g, h, w, unit_hessian, divisor):
        self._phase("gradients", self.tree_index + 1)
        # the round's call brought every column's (for the fit's flags)
        ext = self.extremes.pop((g.k, (bool(unit_hessian), bool(divisor))), None)
        if ext is None:
            ext = self.group.call("extremes", g.k, bool(unit_hessian), bool(divisor))
        m = tuple(max(e[i] for e in ext) for i in range(3))
        if not all(math.isfinite(v) for v in m):
            raise ValueError(
                "gpufs.dask: the gradients are not finite (an overflowing raw score or "
                "weight); the distributed fit does not handle infinite gradients. Standardize "
                "y or rescale sample_weight."
            )
        return m

    def quantize_gradients(
        self, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales, divisor
    ):
        sums = self.group.call(
            "quantize",
            g.k,
            bool(unit_hessian),
            float(g_scale),
            float(h_scale),
            np.asarray(e1s, np.float64),
            np.asarray(e2s, np.float64),
            np.asarray(low_scales, np.float64),
            bool(divisor),
        )
        total = [sum(int(s[i]) for s in sums) for i in range(8)]
        return _FixedPoint(), np.array(total, dtype=np.int64)

    # --- trees ------------------------------------------------------------------------------
    def start_tree(
        self,
        data,
        gh,
        root_g,
        root_h,
        max_depth,
        feats,
        penalty=None,
        groups=None,
        split=None,
        layout=None,
    ):
        """Begin a tree on the shards. ``gh`` is the shards' fixed-point gradients, or a host
        (n, 2) int64 array (a forest), sent to each shard as its rows' slice. ``penalty`` and
        ``groups`` (the node gain bounds' inputs) are not used: see the module docstring.
        The histograms are in ``layout`` (default ``split``'s), every bin accumulated."""
        g = self.group
        self.tree_index += 1
        per_shard = None
        if isinstance(gh, np.ndarray):  # sent with the call: 16 bytes per row
            per_shard = [(gh[rows],) for rows in g.rows]
        self.level = 0
        self._phase("root histogram")
        feats = np.ascontiguousarray(feats, dtype=np.int32)
        d = int(data.shape[1])  # one column for a single-feature tree
        st = _DriverTree()
        st.d = d
        n_nodes = 2 ** (int(max_depth) + 1) - 1
        st.node_g = np.zeros(n_nodes, np.int64)
        st.node_h = np.zeros(n_nodes, np.int64)
        st.node_count = np.zeros(n_nodes, np.int64)
        st.node_g[0], st.node_h[0] = int(root_g), int(root_h)
        st.node_count[0] = int(data.shape[0])
        st.node_s = np.zeros(n_nodes, np.float64)
        st.q = np.empty(0, np.float64)
        st.slot_full = np.ones(1, np.bool_)
        st.active = np.zeros(1, np.int64)
        st.feats, st.n_feats, st.full = feats, int(feats.shape[0]), feats.shape[0] == d
        st.parallel = numba.get_num_threads() > 1 and st.n_feats >= 64
        st.max_depth, st.plans = int(max_depth), []
        st.layout = tree_layout(layout, split, d).without_most_freq()
        st.hist = np.zeros((1, st.layout.n_slots, 2), HIST_DTYPE)
        _, summed = g.call_reduced(
            "start_tree",
            int(max_depth),
            feats,
            st.layout,
            getattr(data, "column", None),
            per_shard=per_shard,
        )
        self._place(st, st.hist, slice(None), feats, summed)
        return st

    @staticmethod
    def _place(st, hist, slots, feats, summed):
        """Write the shards' summed payload (``Shard._payload``) into the listed features'
        slots of the histograms at ``slots``."""
        block = hist[slots]  # a view of hist (basic slicing)
        block[:, st.layout.slots_of(feats)] = summed

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Decide here, partition on the shards, sum their left histograms, subtract."""
        self.level += 1
        self._phase(f"level {self.level}")
        result, plan = self.local.decide_level(st, penalty, allowed, used, budget, split)
        n_split = plan.split_slot.shape[0]
        if n_split == 0:
            st.active = np.zeros(0, np.int64)
            st.slot_full = np.ones(0, np.bool_)
            return result
        lefts, summed = self.group.call_reduced("advance", plan, bool(build_next))
        st.plans.append(replay_plan(plan, st.d))
        left = sum(lefts[1:], lefts[0])
        nodes = st.active[plan.split_slot]
        L, R = 2 * nodes + 1, 2 * nodes + 2
        st.node_count[L] = left
        st.node_count[R] = st.node_count[nodes] - left
        st.node_g[L] = plan.left_g
        st.node_h[L] = plan.left_h
        st.node_g[R] = st.node_g[nodes] - plan.left_g
        st.node_h[R] = st.node_h[nodes] - plan.left_h
        nxt_active = np.empty(2 * n_split, np.int64)
        nxt_active[0::2], nxt_active[1::2] = L, R
        feats, n_feats = plan.next_feats, plan.next_n_feats
        if build_next:
            nxt = np.zeros((2 * n_split, st.layout.n_slots, 2), HIST_DTYPE)
            self._place(st, nxt, slice(0, None, 2), feats[:n_feats], summed)
            # the right child = parent - left, exact in int64: the single process's sibling
            # subtraction, on the listed features' slots
            cols = st.layout.slots_of(feats[:n_feats])
            nxt[1::2, cols] = st.hist[plan.split_slot][:, cols] - nxt[0::2][:, cols]
        else:
            nxt = np.empty((0, st.layout.n_slots, 2), HIST_DTYPE)
        st.active, st.hist = nxt_active, nxt
        st.feats, st.n_feats, st.full = feats, n_feats, plan.next_full
        st.slot_full = np.ones(2 * n_split, np.bool_)
        return result

    def node_sums(self, st):
        return st.node_g, st.node_h, st.node_count

    def update_raw(self, raw_column, st, leaf_nodes, leaf_values):
        """Add the leaf values to the raw scores: on the shards (a ``RawColumn``), or into a
        host (n,) array from the shards' row -> leaf assignment (a forest)."""
        leaf_nodes = np.asarray(leaf_nodes, np.int64)
        leaf_values = np.asarray(leaf_values, np.float64)
        self._phase("raw-score update")
        if isinstance(raw_column, RawColumn):  # runs at the start of the next call
            self.group.defer(
                "update_raw",
                raw_column.k,
                leaf_nodes,
                leaf_values,
                replay=(
                    "replay_tree",
                    (raw_column.k, st.max_depth, st.plans, leaf_nodes, leaf_values),
                ),
            )
            return
        table = np.zeros(int(leaf_nodes.max()) + 1 if leaf_nodes.size else 1, np.float64)
        table[leaf_nodes] = leaf_values
        for rows, leaf in zip(self.group.rows, self.group.call("leaf_of_rows", leaf_nodes)):
            raw_column[rows] += table[leaf]  # one addition per row, as the single process
