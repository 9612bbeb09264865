"""One worker's part of a distributed fit: a Dask actor that keeps its rows and works on them.

Owns everything a worker does, on the partitions it holds, with one backend's kernels (the
CPU's, or the GPU's: ``device="gpu"``, every array of the fit on the worker's GPU, cupy; numpy
under the simulator): the binning sample and the bins, the target, the raw scores, the
gradients and their fixed point, the tree state (its row segments per node), the histograms of
its rows, the partition by the driver's decisions, the raw-score update, the two-pass
pieces of the exact sums, and its rows' part of GT-GBM's group tests. The arrays stay in the
worker's memory across levels, trees and rounds; a call returns only numbers, histograms or
(for a forest) one small value per row. Every method is a function of the rows and its
arguments, so a shard that replays the driver's journal (``replay``) holds a lost one's state.

Row order inside a shard does not matter: histograms and fixed-point sums are int64 sums, and
every per-row result is a function of the row alone.
"""

from __future__ import annotations

import numpy as np

from .._device import namespace_of, to_host
from .._threading import thread_limit
from ..backends._shard_backend import shard_backend
from ..backends.cpu import BinnedMatrix
from ..engine.group_testing import (
    CPUSteps,
    pseudo_feature_bins,
    pseudo_feature_extremes,
    pseudo_feature_histograms,
    standardize_extremes,
    standardize_with,
)
from ..engine.quantize import exact_sum_words
from ..rules._hist_layout import HistLayout
from ._exact import fsum_part, sum_stats
from ._reduce import reduce_subtree

__all__ = ["Shard"]


class _FirstStep:
    """A shard's part of ``group_testing.FirstStep``: the sums and bins of its rows."""

    def __init__(self, sums):
        self.sums, self.bins = sums, None


class Shard:
    """The rows of one worker for one fit (created by ``ShardGroup`` with ``actor=True``).

    Parameters
    ----------
    parts : list of _data.Part
        The worker's checked partitions, in row order.
    offsets : list of int
        The global index of each part's first row.
    n_jobs : int or None
        Threads of this shard's kernels (the CPU's).
    device : {"cpu", "gpu"}, default="cpu"
        The backend of this shard's kernels: ``CPUBackend``, or ``GPUBackend`` on the
        worker's current GPU (one per worker: ``dask_cuda.LocalCUDACluster``).
    """

    def __init__(self, parts, offsets, n_jobs=None, device="cpu"):
        self.parts = list(parts)
        self.offsets = list(offsets)
        self.n = int(sum(p.X.shape[0] for p in self.parts))
        self.n_jobs = n_jobs
        self.device = device
        self.backend = self._new_backend()
        #: the namespace of the shard's arrays (cupy for a GPU shard; numpy otherwise)
        self.xp = self.backend.xp
        w = [p.w for p in self.parts]
        self.w = None if any(x is None for x in w) else self.xp.asarray(np.concatenate(w))
        self.vec = {}
        self.snapshots = {}
        self.st = None
        #: (call tag, payload): the last level's histograms, for the reduction (``_reduce``)
        self.kept = None
        self._replayer = None

    def _new_backend(self):
        """A backend for this shard's trees (``backends._shard_backend``: no node gain
        bounds, every bin accumulated, so the shards' histograms add up)."""
        return shard_backend(self.device)

    def call(self, queued, method, args):
        """Run the queued calls ((method, args) pairs, ``ShardGroup.defer``), then
        ``method(*args)``; returns (the queued calls' answers, the method's answer)."""
        done = [getattr(self, m)(*a) for m, a in queued]
        return done, getattr(self, method)(*args)

    def replay(self, entries):
        """Run a journal's calls ((method, args) pairs, ``_journal.Journal.replay_for``) in
        order, keeping none of their answers: a rebuilt shard's way to its lost state."""
        for m, a in entries:
            getattr(self, m)(*a)
        return None

    def backend_name(self):
        """The name of this shard's backend ("cpu" or "gpu")."""
        return self.backend.name

    def noop(self):
        """Nothing (a call that only carries deferred calls)."""
        return None

    # --- rows and bins --------------------------------------------------------------------
    def sample(self, picks, positive_only=True):
        """Rows for the cut points: ``picks`` (one int64 array per part, or None for all,
        indices among that part's rows of positive weight, or among all its rows when not
        ``positive_only``) -> the rows, stacked in part order, float as converted."""
        out = []
        for p, idx in zip(self.parts, picks):
            xp = namespace_of(p.X)  # a cupy partition is indexed on its device
            X = p.X if p.w is None or not positive_only else p.X[xp.asarray(p.w > 0)]
            out.append(to_host(X if idx is None else X[xp.asarray(idx, np.int64)]))
        return np.concatenate(out) if out else None

    def drop_raw(self):
        """Forget the float rows (kept by ``bin(keep_raw=True)`` for the standardized columns
        of group testing)."""
        for p in self.parts:
            p.X = None
        return None

    def bin(self, cuts_padded, n_cuts, keep_raw=False):
        """Bin every part with the agreed cut points (``BinMapper.transform``'s kernel) into
        one local binned matrix, prepared for the tree kernels. The float rows are dropped
        unless ``keep_raw``."""
        with thread_limit(self.n_jobs):
            d = cuts_padded.shape[0]
            Xb = self.xp.empty((self.n, d), np.uint8)
            at = 0
            for p in self.parts:
                m = p.X.shape[0]
                if m:
                    Xb[at : at + m] = self.backend.bin_transform(p.X, cuts_padded, n_cuts)
                at += m
            self.data = self.backend.prepare_binned(Xb)
        if not keep_raw:
            for p in self.parts:
                p.X = None
        return None

    def set_target(self, classes, kind):
        """Encode the target: ``kind`` "float" (regression), "binary" (0/1 as float64) or
        "codes" (int32 class codes); ``classes`` the sorted labels (classification)."""
        y = np.concatenate([p.y for p in self.parts]) if self.parts else np.empty(0)
        if kind == "float":
            y = np.asarray(y, dtype=np.float64)
        else:
            codes = np.searchsorted(classes, y).astype(np.int32)
            y = codes.astype(np.float64) if kind == "binary" else codes
        self.y = self.xp.asarray(y)
        return None

    def target(self):
        """The encoded target and the weights (or None) of the shard's rows, in local order
        (a forest on the driver needs them)."""
        return to_host(self.y), to_host(self.w)

    # --- exact sums -----------------------------------------------------------------------
    def init_parts(self, objective):
        """``fsum_part`` of each of ``objective.init_columns(y)`` (times w), and of w (or the
        row count): the pieces of ``objectives._exact_weighted_mean``."""
        y, w = to_host(self.y), to_host(self.w)  # once per fit
        cols = objective.init_columns(y)
        if w is None:
            return [fsum_part(c) for c in cols], None
        return [fsum_part(np.asarray(c, np.float64) * w) for c in cols], fsum_part(w)

    def words(self, name, max_abs, n):
        """``quantize.exact_sum_words`` of a stored vector at the global scales."""
        a = self.vec[name]
        if a.shape[0] == 0:
            return 0, 0
        return exact_sum_words(a, max_abs, n)

    def store_weights(self):
        """Keep w as the stored vector "w" (the denominator of weighted means); returns its
        ``sum_stats``."""
        self.vec["w"] = self.w
        return sum_stats(self.w)

    # --- boosting rounds --------------------------------------------------------------------
    def init_raw(self, base):
        """Every row's raw scores start at ``base`` (n_outputs,)."""
        self.raw = self.xp.tile(self.xp.asarray(np.asarray(base, np.float64)), (self.n, 1))
        return None

    def snapshot_raw(self, token):
        """Keep a copy of the raw scores under ``token`` (a checkpoint's)."""
        self.snapshots[token] = self.raw.copy()
        return None

    def restore_raw(self, token):
        """The raw scores become a copy of snapshot ``token``."""
        self.raw = self.snapshots[token].copy()
        return None

    def drop_snapshot(self, token):
        """Forget snapshot ``token`` (its checkpoint is gone)."""
        self.snapshots.pop(token, None)
        return None

    def round(self, objective_name, unit_hessian, divisor):
        """Gradients, hessians and losses at the current raw scores (``round_gradients``);
        keeps them and returns the stats of the loss terms (times w) and the extremes of
        every output column's gradients (``extremes``)."""
        with thread_limit(self.n_jobs):
            self.G, self.Hs, terms = self.backend.round_gradients(objective_name, self.raw, self.y)
        self.vec["loss"] = terms if self.w is None else terms * self.w
        ext = [self.extremes(k, unit_hessian, divisor) for k in range(self.G.shape[0])]
        return sum_stats(self.vec["loss"]), ext

    def loss_terms(self, objective_name):
        """The stats of this shard's loss terms (times w) at the current raw scores."""
        with thread_limit(self.n_jobs):
            terms = self.backend.loss_terms(objective_name, self.raw, self.y)
        self.vec["loss"] = terms if self.w is None else terms * self.w
        return sum_stats(self.vec["loss"])

    def extremes(self, k, unit_hessian, divisor):
        """``CPUBackend.gradient_extremes`` of output column k (a max over rows)."""
        if self.n == 0:
            return 0.0, 0.0, 0.0
        with thread_limit(self.n_jobs):
            return self.backend.gradient_extremes(
                self.G[k], self.Hs[k], self.w, unit_hessian, divisor
            )

    def quantize(self, k, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales, divisor):
        """``CPUBackend.quantize_gradients`` of column k at the global scales: keeps the
        fixed-point gradients, returns the int64 sums (8,)."""
        with thread_limit(self.n_jobs):
            self.gh, sums = self.backend.quantize_gradients(
                self.G[k],
                self.Hs[k],
                self.w,
                unit_hessian,
                g_scale,
                h_scale,
                e1s,
                e2s,
                low_scales,
                divisor,
            )
        return sums

    # --- trees ------------------------------------------------------------------------------
    def start_tree(self, max_depth, feats, layout, column=None, tag=None, gh=None):
        """Begin a tree on the stored fixed-point gradients (or on ``gh``, this shard's rows'
        fixed-point gradients computed by the driver: a forest), over every column or one
        (``column``: a single-feature tree, whose feature 0 it is); returns (None, the root
        histogram of this shard's rows on the slots of ``feats`` in ``layout`` (a
        ``HistLayout``), (1, their slots, 2) int64), the histogram kept under ``tag`` when
        one is given (``_give``)."""
        if gh is not None:
            self.gh = np.ascontiguousarray(gh, dtype=np.int64)
        data = self.data
        if column is not None:  # the column as a one-column binned matrix: views, no copy
            cols = self.data.by_column
            data = BinnedMatrix(cols[column].reshape(-1, 1), cols[column : column + 1])
        with thread_limit(self.n_jobs):
            # the root's sums are the driver's (a shard's own node sums are never read)
            self.st = self.backend.start_tree(data, self.gh, 0, 0, max_depth, feats, layout=layout)
        return None, self._give(self._payload(slice(None)), tag)

    def advance(self, plan, build_next, tag=None):
        """Partition this shard's rows by the driver's decisions (``CPUBackend
        .advance_level``); returns the rows sent left per split and, when ``build_next``, the
        left children's histograms of these rows (their siblings follow by subtraction on the
        driver), kept under ``tag`` when one is given (``_give``), else None."""
        self.kept = None
        with thread_limit(self.n_jobs):
            left = self.backend.advance_level(self.st, plan, build_next)
        if not build_next or plan.split_slot.shape[0] == 0:
            return left, None
        return left, self._give(self._payload(slice(0, None, 2)), tag)

    def _give(self, payload, tag):
        """The payload itself (no tag: the only shard, whose payload is the sum), or True
        with the payload kept under ``tag`` for the reduction among the workers."""
        if tag is None:
            return payload
        self.kept = (tag, payload)
        return True

    async def reduce(self, tag, peers, me):
        """The sum of the payloads kept under ``tag`` by this shard and its descendants in
        the binomial tree over ``peers`` (``_reduce.reduce_subtree``): (int64 array, bytes
        received from children). Async: it runs on the worker's event loop, so a shard
        waiting for its children never blocks another shard's call on the same worker."""
        return await reduce_subtree(self.kept, tag, peers, me)

    def _payload(self, slots):
        """The listed features' slots of the level's histograms at ``slots``, on the host
        (a GPU shard's selected on the device, then copied)."""
        st = self.st
        cols = st.layout.slots_of(st.feats[: st.n_feats])
        hist = st.hist[slots]
        return np.ascontiguousarray(to_host(hist[:, namespace_of(hist).asarray(cols)]))

    def update_raw(self, k, leaf_nodes, leaf_values):
        """raw[:, k] += the leaf value of each row (from the tree state's row segments)."""
        with thread_limit(self.n_jobs):
            self.backend.update_raw(self.raw[:, k], self.st, leaf_nodes, leaf_values)
        return None

    def replay_tree(self, k, max_depth, plans, leaf_nodes, leaf_values):
        """raw[:, k] += the leaf values of a finished tree, its rows partitioned again by its
        levels' splits (``_backend.replay_plan``): what ``update_raw`` did, by the same
        partition and update kernels, without the tree state or the gradients."""
        if self._replayer is None:  # its own scratch buffers: the live tree state keeps its
            self._replayer = self._new_backend()
        be = self._replayer
        # No histogram is built: the smallest layout (2 slots a feature) keeps the root's
        # empty histogram small however wide the table is.
        tiny = HistLayout.from_n_bins(np.ones(self.data.shape[1], np.int64))
        with thread_limit(self.n_jobs):
            st = be.start_tree(
                self.data,
                self.xp.zeros((self.n, 2), np.int64),
                0,
                0,
                max_depth,
                np.zeros(0, np.int32),
                layout=tiny,
            )
            for plan in plans:
                be.advance_level(st, plan, False)
            be.update_raw(self.raw[:, k], st, leaf_nodes, leaf_values)
        return None

    def leaf_of_rows(self, leaf_nodes):
        """The leaf node of each of this shard's rows, (n,) int32 in local row order (a
        forest on the driver adds the leaf values itself)."""
        st = self.st
        rows = to_host(st.rows)  # a GPU tree's: one host copy of the final order
        out = np.empty(self.n, np.int32)
        for node in np.asarray(leaf_nodes, np.int64).tolist():
            lo = st.node_start[node]
            out[rows[lo : lo + st.node_count[node]]] = node
        return out

    # --- group testing (GT-GBM, ``_gt.ClusterSteps`` on the driver) -----------------------------
    def _positive(self):
        """Local indices of the rows of positive weight (None: every row), the rows whose
        standardized columns and gradients the group tests read, as in one process."""
        if self.w is None or bool((self.w > 0).all()):
            return None
        return np.flatnonzero(self.w > 0)

    def _positive_raw(self):
        X = np.concatenate([p.X for p in self.parts]) if self.parts else None
        rows = self._positive()
        return X if rows is None else X[rows]

    def gt_column_extremes(self):
        """Each column's (min, max) over this shard's rows of positive weight, and their
        number: the driver merges them into ``standardize``'s extremes."""
        X = self._positive_raw()
        with thread_limit(self.n_jobs):
            lo, hi = standardize_extremes(X)
        return lo, hi, X.shape[0]

    def gt_standardize(self, lo, hi):
        """Keep the standardized columns of the rows of positive weight at the merged column
        extremes, (n_features, n_rows) uint8."""
        with thread_limit(self.n_jobs):
            self.Q = standardize_with(self._positive_raw(), lo, hi)
        return None

    def gt_begin(self, p, scan):
        """Start a tree's searches on the tree's fixed-point gradients (of the rows of
        positive weight)."""
        rows = self._positive()
        self.gt = CPUSteps(
            self.backend, self.Q, self.gh if rows is None else self.gh[rows], p, scan
        )
        return None

    def gt_sums(self, subsets, active, left, right, first=False):
        """A step's pseudo-features of these rows (``CPUSteps.columns``: blocked sums, the
        right halves by subtraction), kept; returns their (min, max) (2k, 2) int32, or None
        for the per-fit first step (binned already)."""
        with thread_limit(self.n_jobs):
            both, bins = self.gt.columns(
                subsets, active, left, right, self.gt_first if first else None
            )
            self.gt_bins = bins if first else None
            return None if first else pseudo_feature_extremes(both)

    def gt_hist(self, max_bins, v_lo, v_hi):
        """The step's (g, h) histograms of these rows, (2k, max_bins, 2) int64: the
        pseudo-features binned at the merged extremes (or the first step's bins)."""
        P = self.gt.both if self.gt_bins is None else self.gt_bins
        with thread_limit(self.n_jobs):
            return pseudo_feature_histograms(P, self.gt.gh, max_bins, v_lo, v_hi)

    def gt_keep(self, active, keep_left):
        """Each searched subset keeps its better half (``CPUSteps.keep``)."""
        self.gt.keep(active, keep_left)
        return None

    def gt_first_sums(self, subsets, groups):
        """The per-fit first step's pseudo-features (``FirstStep``), kept; returns their
        extremes."""
        with thread_limit(self.n_jobs):
            steps = CPUSteps(self.backend, self.Q, None, subsets.shape[0], ())
            self.gt_first = _FirstStep(steps.sums(subsets, groups))
            return pseudo_feature_extremes(self.gt_first.sums)

    def gt_first_bins(self, max_bins, v_lo, v_hi):
        """... binned at the merged extremes."""
        with thread_limit(self.n_jobs):
            self.gt_first.bins = pseudo_feature_bins(self.gt_first.sums, max_bins, v_lo, v_hi)
        return None

    def tree_predictions(self, forest):
        """``forest.tree_predictions`` of this shard's float rows, (n, n_trees) float64 in
        local row order (a ControlBurn warm start's lasso matrix)."""
        X = np.concatenate([p.X for p in self.parts])
        with thread_limit(self.n_jobs):
            return forest.tree_predictions(X, self.backend)

    # --- validation data --------------------------------------------------------------------
    def predict(self, arrays):
        """raw += the trees' outputs on this shard's binned rows (``predict_binned``)."""
        a = {k: self.xp.asarray(v) for k, v in arrays.items()}  # the trees on the device
        with thread_limit(self.n_jobs):
            self.backend.predict_binned(
                self.data.by_row,
                a["feature"],
                a["bin_threshold"],
                a["missing_left"],
                a["value"],
                a["tree_column"],
                self.raw,
                a["is_categorical"],
                a["cat_bits"],
            )
        return None
