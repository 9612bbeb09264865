"""The CPU backend: ``CPUBackend``, the engine's interface on host numpy arrays.

Owns the host side of the CPU engine: the tree state (``_CPUTree``), the binned matrix in both
layouts (``BinnedMatrix``), scratch buffers reused across a fit's trees, and the choice of
serial or ``prange`` driver for each call. The compiled kernels live in the sibling modules,
named like ``cuda_kernels/``'s; the GPU's counterpart of this module is ``backends/gpu/backend.py``.
Shapes and dtypes: the package docstring and ``gpufs.backends.base``.
"""

from __future__ import annotations

import numba
import numpy as np

from ..._device import to_host
from ..._threading import current_limit
from ..._types import HIST_DTYPE, N_HIST_BINS, ROW_INDEX_DTYPE, X_BINNED_DTYPE, read_only
from ...rules._categorical import CAT_WORDS
from ...rules._hist_layout import split_input, tree_layout
from ..base import LevelResult, SplitPlan, best_splits, cut_matrix, kernel_for
from ._args import (
    Decisions,
    FixedScales,
    HistSource,
    LevelOut,
    LevelState,
    NodeSums,
    PerFeature,
    Rows,
    Run,
    SearchSlots,
    Segments,
    Selection,
    SplitRule,
    TreeArrays,
    split_args,
)
from .binning import _bin_transform, _columns_of
from .group_testing import CPUSteps
from .histogram import (
    AUTO,
    COLUMNS,
    ROWS,
    ROWS_PER_TASK,
    TASKS_PER_THREAD,
    build_histograms,
    row_cost,
    sparse_rows,
    task_table,
)
from .level import (
    PARALLEL_MIN_WORK,
    TINY_ROWS_PER_SLOT,
    _bound_sample_sum,
    _bound_terms_par,
    _bound_terms_ser,
    _gain_bound_pays,
    _grow_levels_flat,
    _is_tiny,
    _level_advance,
    _level_decide_entry,
    _level_step_flat,
    _root_histogram,
)
from .objective import (
    _ROUND_KINDS,
    _extremes_par,
    _extremes_ser,
    _quantize_par,
    _quantize_ser,
    _round_par,
    _round_ser,
)
from .partition import _partition
from .predict import _predict_binned, _predict_raw
from .split import _search_ser
from .update import _update_raw_par, _update_raw_ser

__all__ = ["BinnedMatrix", "CPUBackend"]

_HIST_LOOPS = {"auto": AUTO, "rows": ROWS, "columns": COLUMNS}
#: The objectives ``gradients`` takes: the round kernel's that have gradients to fit.
_GRADIENT_KINDS = {name: _ROUND_KINDS[name] for name in ("logistic", "softmax")}
#: Rows below which per-row kernels run on the calling thread only.
PARALLEL_MIN_ROWS = 1 << 15


class BinnedMatrix:
    """The binned training matrix in both layouts the CPU kernels read.

    LightGBM keeps the same two layouts for the same two reasons. The column copy costs
    n_samples x n_features bytes.

    Parameters
    ----------
    by_row : ndarray of shape (n_samples, n_features), uint8, C order
        The histograms read every feature of a row at once.
    by_column : ndarray of shape (n_features, n_samples), uint8, C order
        The partition and the column-wise histograms read one feature of many rows.
    """

    __slots__ = ("by_row", "by_column", "_sparse")

    def __init__(self, by_row, by_column):
        self.by_row = by_row
        self.by_column = by_column
        self._sparse = {}

    @property
    def shape(self):
        """(n_samples, n_features)."""
        return self.by_row.shape

    def hist_parts(self, layout):
        """The layout's part of the histogram kernels' inputs on this matrix (offsets, most
        frequent slots, and ``histogram.sparse_rows``: the row-wise list of the sparse
        features' bins other than the most frequent, the dense and the sparse features), made
        on first use and kept.

        Parameters
        ----------
        layout : HistLayout

        Returns
        -------
        tuple of ndarray
        """
        last = self._sparse.get("last")
        if last is not None and last[0] is layout:
            return last[1]
        got = self._sparse.get(layout)
        if got is None:
            if len(self._sparse) >= 4:  # a new layout per fit at most: keep a few
                self._sparse.clear()
            if layout.has_most_freq:
                rows_list = sparse_rows(self.by_column, layout)
            else:
                rows_list = (
                    np.zeros(self.shape[0] + 1, np.int64),
                    np.empty(0, np.int32),
                    np.arange(self.shape[1], dtype=np.int32),
                    np.empty(0, np.int32),
                )
            got = self._sparse[layout] = (
                (layout.offset, layout.most_freq) + rows_list + (layout.offset.astype(np.int32),)
            )
        self._sparse["last"] = (layout, got)
        return got


class _CPUTree:
    """The state of one tree being grown (host arrays; see the module docstring)."""

    __slots__ = (
        "Xb",
        "Xb_cols",
        "gh",
        "rows",
        "node_start",
        "node_count",
        "node_g",
        "node_h",
        "active",
        "_hist",
        "_root_build",
        "step_args",
        "feats",
        "n_feats",
        "full",
        "parallel",
        "q",
        "node_s",
        "slot_full",
        "groups",
        "layout",
        "src",
        "split",
        "split_flat",
    )

    # A tiny root (``level._is_tiny``) gets its histogram only when something other than
    # ``level_step`` reads it (a cluster's shard, ``decide_level``, ``advance_level``).
    @property
    def hist(self):
        """The level's histograms (n_slots, layout.n_slots, 2) int64."""
        if self._hist is None:
            self._hist = self._root_build()
            self._root_build = None
        return self._hist

    @hist.setter
    def hist(self, value):
        self._hist = value
        self._root_build = None

    def level_hist(self):
        """``hist``, or an empty (0, layout.n_slots, 2) when the root is tiny and unbuilt:
        ``level_step``'s search reads the root's rows then."""
        if self._hist is None:
            return np.empty((0, self.layout.n_slots, 2), HIST_DTYPE)
        return self._hist


class _LevelOutputs:
    """The per-slot decision arrays one level's compiled call fills (``level_step`` or
    ``decide_level``): feature, bin, missing side and gain per slot, (n_slots,) each; the
    admitted features, (d,) int64; the category bitsets, (n_slots, CAT_WORDS or 0) uint32."""

    def __init__(self, nodes, d, split):
        n_slots = nodes.shape[0]
        self.nodes = nodes
        self.feature = np.empty(n_slots, np.int32)
        self.bin = np.empty(n_slots, np.int32)
        self.missing_left = np.empty(n_slots, np.bool_)
        self.gain = np.empty(n_slots, np.float64)
        self.admitted = np.empty(d, np.int64)
        self.cat_slot, self.n_cat = split.categorical()
        self.cat_bits = np.empty((n_slots, CAT_WORDS if self.n_cat else 0), np.uint32)

    def args(self):
        """The arrays as the compiled level functions take them (a ``LevelOut``)."""
        return LevelOut(
            self.feature, self.bin, self.missing_left, self.gain, self.cat_bits, self.admitted
        )

    def result(self, n_admitted):
        return LevelResult(
            nodes=self.nodes,
            feature=self.feature,
            bin=self.bin,
            missing_left=self.missing_left,
            gain=self.gain,
            admitted=self.admitted[:n_admitted],
            cat_bits=self.cat_bits,
        )


def _nodes(st):
    """Tree state ``st``'s per-node sums (a ``NodeSums``)."""
    return NodeSums(st.node_count, st.node_g, st.node_h, st.node_s)


def _level(st, tiny_root=False):
    """Tree state ``st``'s current level (a ``LevelState``); with ``tiny_root``, an unbuilt
    tiny root's histograms stay unbuilt (``_CPUTree.level_hist``)."""
    hist = st.level_hist() if tiny_root else st.hist
    return LevelState(st.active, hist, st.feats, st.n_feats, st.full, st.slot_full)


def _advance_state(st, level):
    """Move tree state ``st`` to the next level (a compiled call's plain tuple in
    ``LevelState``'s field order)."""
    level = LevelState(*level)
    st.active = level.active
    st.hist = level.hist
    st.feats = level.feats
    st.n_feats = int(level.n_feats)
    st.full = bool(level.full)
    st.slot_full = level.slot_full


class CPUBackend:
    """The tree engine on host numpy arrays (numba; see the module docstring).

    Parameters
    ----------
    n_threads : int or None
        Threads the kernels may use (None: what ``numba.get_num_threads()`` says for the
        calling thread, which ``gpufs._threading.thread_limit`` sets from ``n_jobs``).
    rows_per_task : int
        Rows of one histogram or partition task (tests make it tiny to exercise chunking).
    parallel_min_work : int
        Row x feature updates below which a level runs on the calling thread only.
    gain_bounds : {"auto", "always", "never"}
        Node gain bounds that let a node skip the paying features' histograms
        (``_gain_bound_pays``): kept when they may pay off (``_bounds_may_skip``), in every
        tree with penalties, or never. No tree depends on it (tests use "always").
    hist_loop : {"auto", "rows", "columns"}
        How histograms are filled (``histogram``): by the rule of ``histogram.use_columns``,
        or always row-wise or column-wise (LightGBM's ``force_row_wise`` /
        ``force_col_wise``). No tree depends on it.
    most_freq : bool
        Read sparse features from the sparse rows list and derive their most frequent bin
        from the node's totals (``HistLayout.most_freq``); False accumulates every bin (a
        cluster's workers, whose node totals are the cluster's). No tree depends on it.
    """

    name = "cpu"
    xp = np

    def __init__(
        self,
        n_threads=None,
        rows_per_task=ROWS_PER_TASK,
        parallel_min_work=PARALLEL_MIN_WORK,
        gain_bounds="auto",
        hist_loop="auto",
        most_freq=True,
    ):
        if gain_bounds not in ("auto", "always", "never"):
            raise ValueError(
                f"gain_bounds must be 'auto', 'always' or 'never', got {gain_bounds!r}"
            )
        if hist_loop not in _HIST_LOOPS:
            raise ValueError(f"hist_loop must be 'auto', 'rows' or 'columns', got {hist_loop!r}")
        self.n_threads = n_threads
        self.rows_per_task = int(rows_per_task)
        self.parallel_min_work = int(parallel_min_work)
        self.gain_bounds = gain_bounds
        self.hist_loop = hist_loop
        self.most_freq = bool(most_freq)
        self._scratch = {}

    def independent(self):
        """A backend of the same settings with its own scratch buffers: for a fit that runs
        on another Python thread beside this backend's (``_threading.run_side_by_side``)."""
        return CPUBackend(
            self.n_threads,
            self.rows_per_task,
            self.parallel_min_work,
            self.gain_bounds,
            self.hist_loop,
            self.most_freq,
        )

    # --- scratch buffers reused across trees of one fit ----------------------------------
    def _buffer(self, name, shape, dtype):
        buf = self._scratch.get(name)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._scratch[name] = np.empty(shape, dtype)
        return buf

    def _threads(self):
        if self.n_threads is not None:
            return int(self.n_threads)
        n = current_limit()  # inside a fit: no lock per call
        return numba.get_num_threads() if n is None else n

    def _run(self, parallel, tiny=0.0):
        """How a compiled call runs (a ``Run``): on the thread pool when ``parallel``; tiny
        nodes (``level._is_tiny``) with ``tiny`` > 0 (a level step in one call only: a
        cluster's driver decides on histograms alone)."""
        return Run(
            bool(parallel),
            self._threads(),
            self.rows_per_task,
            self.parallel_min_work,
            _HIST_LOOPS[self.hist_loop],
            float(tiny),
        )

    def _rows(self, st):
        """Tree state ``st``'s rows and this backend's row buffers (a ``Rows``)."""
        n = st.Xb.shape[0]
        return Rows(
            st.src,
            st.node_start,
            st.q,
            self._buffer("scratch_rows", (n,), ROW_INDEX_DTYPE),
            self._buffer("go_left", (n,), np.uint8),
        )

    # --- arrays and the device -------------------------------------------------------------
    def owns(self, a):
        """Whether ``a`` is a host (numpy) array, the only kind this backend computes on."""
        return isinstance(a, np.ndarray)

    def to_device(self, a):
        """``a`` as a numpy array (a host copy of a device array; ``a`` itself for numpy)."""
        return to_host(a)

    def synchronize(self):
        """Nothing to wait for: every CPU kernel has returned when its call returns."""

    def task_table(self, seg_start, seg_count):
        """``Backend.task_table``: how ``partition`` cuts segments into tasks (the level step
        cuts the same way when its level runs in parallel): a segment of ``c`` rows into
        ``min(max(c // rows_per_task, 1), 4 x threads)`` near-equal runs with several
        threads, one run otherwise (``gpufs.rules._tasks``). The row-wise histograms cut by the
        same rule, with ``rows_per_task`` lowered to about ``histogram.HIST_TASK_WORK``
        updates per task for builds of fewer rows than threads x ``rows_per_task``."""
        n_threads = self._threads()
        n_tasks_max = TASKS_PER_THREAD * n_threads if n_threads > 1 else 1
        t_seg, t_lo, t_hi, _ = task_table(
            np.asarray(seg_start, np.int64),
            np.asarray(seg_count, np.int64),
            n_tasks_max,
            self.rows_per_task,
        )
        return t_seg, t_lo, t_hi

    # --- binning --------------------------------------------------------------------------
    def bin_transform(self, X, cuts_padded, n_cuts):
        """Float X (n, d) -> uint8 bins (n, d) with the cut matrix (d, 254), +inf padded.

        float32 and float64 X are binned as they are (no float64 copy of float32 data)."""
        X = np.asarray(X)
        if X.dtype != np.float32 and X.dtype != np.float64:
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        out = np.empty(X.shape, dtype=X_BINNED_DTYPE)
        cuts = cut_matrix(cuts_padded, n_cuts)
        _bin_transform(read_only(X), cuts, np.asarray(to_host(n_cuts), np.int64), out)
        return out

    # --- gradients ------------------------------------------------------------------------
    def _rows_parallel(self, n):
        return self._threads() > 1 and n >= PARALLEL_MIN_ROWS

    def round_gradients(self, objective, raw, y):
        """Gradients, hessians and per-row losses of ``objective`` at ``raw``, in one pass.

        Returns (g, h, loss_terms): g and h (n_outputs, n) float64 (row k is output column
        k), loss_terms (n,) float64 -- the loss of the raw scores *before* the round's trees,
        i.e. the loss after the previous round. The formulas are ``gpufs.rules._exactmath``'s, so
        the GPU backend returns the same bits.
        """
        raw = np.ascontiguousarray(raw, dtype=np.float64)
        n, k = raw.shape
        g = np.empty((k, n), np.float64)
        h = np.empty((k, n), np.float64)
        loss = np.empty(n, np.float64)
        kind = kernel_for(_ROUND_KINDS, objective)
        (_round_par if self._rows_parallel(n) else _round_ser)(kind, raw, _labels(y), g, h, loss)
        return g, h, loss

    def round_labels(self, y):
        """``y`` as ``round_gradients`` reads it (float64: ``_labels``), for a caller that
        passes the same labels every round to convert them once (``boosting.DeviceRows``):
        ``round_gradients`` takes float64 labels as they are, without a copy.

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
            Targets or class codes.

        Returns
        -------
        ndarray of shape (n_samples,), float64
        """
        return _labels(y)

    def gradients(self, objective, raw, y):
        """Per-row gradients and hessians of ``objective`` ("logistic" or "softmax").

        raw (n, n_outputs) float64; y (n,) labels / class codes. Returns (g, h), each
        (n_outputs, n) float64: row k is output column k. The formulas are
        ``gpufs.rules._exactmath``'s, so the GPU backend returns the same bits.
        """
        kernel_for(_GRADIENT_KINDS, objective)  # names the objectives it takes
        g, h, _ = self.round_gradients(objective, raw, y)  # the round's kernel: nothing to compile
        return g, h

    def loss_terms(self, objective, raw, y):
        """Per-row losses (n,) float64 of ``objective`` ("squared_error", "logistic" or
        "softmax"), by ``gpufs.rules._exactmath``'s formulas (the same bits as the GPU backend)."""
        # The round's kernel, its gradients thrown away: a loss kernel of its own cost 10 s of
        # the first fit's compile (the losses are the round's bit for bit: test_exactmath).
        _, _, loss = self.round_gradients(objective, raw, y)
        return loss

    def _chunks(self, n):
        return TASKS_PER_THREAD * self._threads() if self._rows_parallel(n) else 1

    def gradient_extremes(self, g, h, w, unit_hessian, divisor):
        """(max |g w|, max |h w|, max |q|) as host floats (``quantize.prepare_gradients``)."""
        n = g.shape[0]
        out = np.zeros((self._chunks(n), 3), np.float64)
        (_extremes_par if out.shape[0] > 1 else _extremes_ser)(
            g, _no_weights(h), _no_weights(w), bool(unit_hessian), bool(divisor), out
        )
        m = _over_chunks(np.maximum, out)
        return float(m[0]), float(m[1]), float(m[2])

    def quantize_gradients(
        self, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales, divisor
    ):
        """(gh (n, 2) int64, sums int64 (8,)): see ``quantize.prepare_gradients``."""
        n = g.shape[0]
        gh = np.empty((n, 2), np.int64)
        sums = np.empty((self._chunks(n), 8), np.int64)
        (_quantize_par if sums.shape[0] > 1 else _quantize_ser)(
            g,
            _no_weights(h),
            _no_weights(w),
            bool(unit_hessian),
            tuple(  # a plain tuple (``objective._quantize_ser``)
                FixedScales(
                    float(g_scale),
                    float(h_scale),
                    np.asarray(e1s, np.float64),
                    np.asarray(e2s, np.float64),
                    np.asarray(low_scales, np.float64),
                    bool(divisor),
                )
            ),
            gh,
            sums,
        )
        return gh, _over_chunks(np.add, sums)

    # --- trees ----------------------------------------------------------------------------
    def prepare_binned(self, Xb):
        """The binned matrix as the tree kernels read it (a ``BinnedMatrix``); prepare it once
        per fit and pass it to every ``start_tree``."""
        if isinstance(Xb, BinnedMatrix):
            return Xb
        Xb = np.ascontiguousarray(Xb, dtype=X_BINNED_DTYPE)
        cols = np.empty((Xb.shape[1], Xb.shape[0]), X_BINNED_DTYPE)
        if Xb.size:
            _columns_of(Xb, cols)
        return BinnedMatrix(Xb, cols)

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
        """Begin a tree: every row in the root, its histogram over ``feats`` (int32 sorted
        feature indices) built. ``data`` is ``prepare_binned``'s result (or the uint8 binned
        matrix, prepared here). Returns the tree state for ``level_step``.

        With the level's ``penalty`` vector, the feature ``groups`` (int32 (n_features,)) and
        the tree's ``split`` parameters (``grower.SplitParams``), the tree keeps each node's
        gain bound and builds the paying features' histograms only at nodes where one of them
        could score (``_gain_bound_pays``); without them every node covers ``feats``. The
        histograms are in ``layout`` (default: ``split``'s, else the full layout).
        """
        data = self.prepare_binned(data)
        Xb = data.by_row
        n, d = Xb.shape
        st = _CPUTree()
        st.split = st.split_flat = st.step_args = None
        st.Xb = Xb
        st.Xb_cols = data.by_column
        st.gh = gh
        st.layout = tree_layout(layout, split, d)
        if not self.most_freq:
            st.layout = st.layout.without_most_freq()
        n_nodes = 2 ** (max_depth + 1) - 1
        st.rows = self._buffer("rows", (n,), ROW_INDEX_DTYPE)
        st.rows[:] = np.arange(n, dtype=ROW_INDEX_DTYPE)
        st.src = self._hist_source(data, gh, st.rows, st.layout)
        st.node_start = np.zeros(n_nodes, np.int64)
        st.node_count = np.zeros(n_nodes, np.int64)
        st.node_g = np.zeros(n_nodes, np.int64)
        st.node_h = np.zeros(n_nodes, np.int64)
        st.node_count[0] = n
        st.node_g[0] = root_g
        st.node_h[0] = root_h
        st.active = np.zeros(1, np.int64)
        feats = np.ascontiguousarray(feats, dtype=np.int32)
        st.node_s = np.zeros(n_nodes, np.float64)
        st.q = np.empty(0, np.float64)
        st.groups = (
            np.zeros(d, np.int32)
            if groups is None
            else np.ascontiguousarray(groups, dtype=np.int32)
        )
        st.slot_full = np.ones(1, np.bool_)
        n_threads = self._threads()
        bounded = False
        if penalty is not None and split is not None and n:
            feat_pen = np.asarray(penalty)[feats]  # the listed features' penalties
            bounded = self._bounds_may_skip(gh, root_g, root_h, max_depth, feat_pen, split)
        if bounded:
            st.q, st.node_s[0] = self._bound_terms(gh, split, n_threads)
            free = feat_pen == 0.0
            pay_min = float(feat_pen[~free].min())
            if not _gain_bound_pays(
                st.node_s[0],
                int(root_g),
                int(root_h),
                1.0 / split.g_scale,
                1.0 / split.h_scale,
                float(split.reg_lambda),
                n,
                float(split.gain_divisor),
                pay_min,
                float(split.min_split_gain),
            ):
                st.slot_full[0] = False
                feats = feats[free]
        st.feats = feats
        st.n_feats = int(st.feats.shape[0])
        st.full = st.n_feats == d
        # the compiled rule's own Python: a call from Python would box ``src`` field by field
        cost = row_cost.py_func(st.src, st.n_feats, st.full)
        st.parallel = n_threads > 1 and n * max(cost, 1) >= self.parallel_min_work

        def build():
            priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
            hist, self._scratch["priv"] = _root_histogram(
                tuple(self._run(st.parallel)),
                tuple(st.src),
                int(root_g),
                int(root_h),
                st.feats,
                st.n_feats,
                st.full,
                priv,
            )
            return hist

        if _is_tiny(n, d, st.layout.n_slots, TINY_ROWS_PER_SLOT):
            st._hist, st._root_build = None, build
        else:
            st.hist = build()
        return st

    def _hist_source(self, data, gh, rows, layout):
        """The histogram kernels' inputs (``histogram.build_histograms``' ``src``)."""
        return HistSource(
            data.by_row,
            data.by_column,
            gh,
            rows,
            self._buffer("ghs", (data.shape[0], 2), np.int64),
            *data.hist_parts(layout),
        )

    #: Rows of the sample that estimates a tree's root gain bound (``_bounds_may_skip``).
    BOUND_SAMPLE_ROWS = 4096

    def _bounds_may_skip(self, gh, root_g, root_h, max_depth, feat_penalty, split):
        """Whether keeping node gain bounds in this tree may let some node skip the paying
        features (a cost/benefit guess only: the decisions never depend on it).

        The bounds cost a pass over the rows and a gather per row and level. They can only
        pay off when a node at the deepest histogram level, holding about 2**-(depth - 1) of
        the rows, may have a bound below the cheapest penalty: estimated from the root's bound
        over a strided sample of the rows. ``feat_penalty``: the penalties of the tree's
        listed features, (n_feats,) float64.
        """
        paying = feat_penalty[feat_penalty > 0]
        if paying.size == 0 or self.gain_bounds == "never":
            return False
        if self.gain_bounds == "always":
            return True
        step = max(1, gh.shape[0] // self.BOUND_SAMPLE_ROWS)
        s_est = step * _bound_sample_sum(gh, step, 1.0 / split.g_scale, 1.0 / split.h_scale)
        G, H = root_g / split.g_scale, root_h / split.h_scale
        root_bound = 0.5 * (s_est - G * G / (H + split.reg_lambda))
        deepest = root_bound / 2.0 ** max(0, max_depth - 1) / split.gain_divisor
        return not deepest > 8.0 * float(paying.min()) + max(0.0, split.min_split_gain)

    def _bound_terms(self, gh, split, n_threads):
        """(q, sum q): each row's ``_bound_term`` (n,) float64 and their sum."""
        n = gh.shape[0]
        q = self._buffer("bound_terms", (n,), np.float64)
        chunks = TASKS_PER_THREAD * n_threads if self._rows_parallel(n) else 1
        sums = np.zeros(chunks, np.float64)
        (_bound_terms_par if chunks > 1 else _bound_terms_ser)(
            gh, 1.0 / split.g_scale, 1.0 / split.h_scale, q, sums
        )
        return q, float(_over_chunks(np.add, sums))

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Decide, partition and prepare the next level of tree state ``st``.

        ``split`` is a ``SplitParams``. Returns a ``LevelResult`` of host arrays (the
        decisions of this level's nodes and the features that entered Omega)."""
        out = _LevelOutputs(st.active, st.Xb.shape[1], split)
        # the named tuples as plain tuples (``level._level_step_flat`` says why)
        n_adm, level, self._scratch["priv"] = _level_step_flat(
            *self._step_args(st, split),
            tuple(Selection(penalty, allowed, used, budget)),
            st.groups,
            build_next,
            tuple(out.args()),
        )
        result = out.result(n_adm)
        _advance_state(st, level)
        return result

    def grow_levels(self, st, penalty, allowed, used, budget, split, depth, max_depth, tree):
        """``level_step`` for levels ``depth``, ``depth + 1``, ... of tree state ``st`` in one
        compiled call (``level._grow_levels_flat``), until a level admits a feature, no node
        splits or the tree reaches ``max_depth``. Writes each split's feature, bin, missing
        side, gain and bitset into ``tree`` (a ``Tree``) at its node.

        Returns (depth reached, whether the tree is done, the admitted features (n,) int64 in
        order): the caller admits them and calls again with the new penalties."""
        depth, done, admitted, level, self._scratch["priv"] = _grow_levels_flat(
            *self._step_args(st, split),
            tuple(Selection(penalty, allowed, used, budget)),
            st.groups,
            int(depth),
            int(max_depth),
            tuple(
                TreeArrays(
                    tree.feature, tree.bin_threshold, tree.missing_left, tree.gain, tree.cat_bits
                )
            ),
        )
        _advance_state(st, level)
        return depth, done, admitted

    def _step_args(self, st, split):
        """The level step's first six arguments as plain tuples: the run, the rows, the
        histogram scratch, the node sums, the level (an unbuilt tiny root left unbuilt) and the
        split parameters."""
        priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
        if st.split is not split:  # the tree's levels share one SplitParams: cast it once
            st.split, st.split_flat = split, tuple(split_args(split))
        if st.step_args is None:  # the same every level of the tree: made once
            rows = self._rows(st)
            st.step_args = (
                tuple(self._run(st.parallel, TINY_ROWS_PER_SLOT)),
                (tuple(rows.src),) + tuple(rows[1:]),
            )
        return (
            *st.step_args,
            priv,
            tuple(_nodes(st)),
            tuple(_level(st, tiny_root=True)),
            st.split_flat,
        )

    # --- the level step in two halves, for a cluster (``gpufs.dask``) ---------------------
    # ``level_step`` runs ``_level_decide`` then ``_level_advance`` in one compiled call. A
    # cluster runs them apart: the driver decides once on the histograms summed over the
    # workers (exact int64 sums), and every worker advances its own rows by the decisions.

    def decide_level(self, st, penalty, allowed, used, budget, split):
        """The decisions of ``level_step`` from the level's histograms and the nodes' sums;
        reads no rows.

        ``st`` needs ``active``, ``hist``, ``layout``, ``node_g``, ``node_h``, ``node_count``,
        ``node_s``, ``q``, ``slot_full``, ``feats``, ``n_feats`` and ``full`` (a
        ``start_tree`` state, or a driver's state without rows, whose ``q`` is empty). The
        arguments are ``level_step``'s. Returns (``LevelResult``, ``SplitPlan``): the plan is
        what ``advance_level`` needs, a few numbers per split.
        """
        d = int(np.asarray(split.n_bins).shape[0])
        out = _LevelOutputs(st.active, d, split)
        penalty = np.asarray(penalty, np.float64)
        dec = Decisions(
            *_level_decide_entry(
                self._threads(),
                st.layout.offset,
                _nodes(st),
                _level(st),
                split_args(split),
                Selection(penalty, allowed, used, budget),
                st.q.shape[0] > 0,
                out.args(),
            )
        )
        result = out.result(dec.n_admitted)
        plan = SplitPlan(*dec, penalty, split)
        return result, plan

    def advance_level(self, st, plan, build_next):
        """The rows' half of ``level_step``: partition ``st``'s rows by ``plan``
        (``decide_level``'s), set the children's segments and sums, and (``build_next``) build
        the next level's histograms of these rows (the smaller child of each split by this
        process's row counts, its sibling by exact subtraction). Advances ``st`` to the next
        level; returns the rows each split sent left, (n_split,) int64."""
        priv = self._scratch.get("priv", np.empty((0, 0), HIST_DTYPE))
        level, left, self._scratch["priv"] = _level_advance(
            self._run(st.parallel),
            self._rows(st),
            priv,
            _nodes(st),
            _level(st),
            split_args(plan.split),
            plan.penalty,
            st.groups,
            Decisions(*plan[: len(Decisions._fields)]),
            bool(build_next),
        )
        _advance_state(st, level)
        return left

    def node_sums(self, st):
        """Host (node_g, node_h, node_count) of the tree (n_nodes,) int64 each."""
        return st.node_g, st.node_h, st.node_count

    def update_raw(self, raw_column, st, leaf_nodes, leaf_values):
        """Add each leaf's value to the raw scores of its rows (in place, no traversal)."""
        target = raw_column
        if not raw_column.flags.c_contiguous:  # a column of a (n, K) array (softmax)
            target = np.ascontiguousarray(raw_column)
        kernel = _update_raw_par if self._rows_parallel(st.rows.shape[0]) else _update_raw_ser
        kernel(
            target,
            st.rows,
            st.node_start,
            st.node_count,
            np.asarray(leaf_nodes, np.int64),
            np.asarray(leaf_values, np.float64),
        )
        if target is not raw_column:
            raw_column[...] = target

    # --- kernels exposed for tests (the level step uses the same drivers) -----------------
    def histograms(
        self, Xb, gh, rows, node_start, node_count, build_nodes, feats=None, layout=None
    ):
        """Histograms of ``build_nodes``, by the level step's drivers: (len(build_nodes),
        layout.n_slots, 2) int64 in ``layout``; without one, in the full layout, returned as
        (len(build_nodes), d, 256, 2) (the same array). With a layout that derives the most
        frequent bins, the nodes' totals are the sums of ``gh`` over their rows."""
        build = np.asarray(build_nodes, np.int64)
        data = self.prepare_binned(Xb)
        d = data.shape[1]
        given = layout
        layout = tree_layout(layout, None, d)
        if not self.most_freq:
            layout = layout.without_most_freq()
        feats = np.arange(d, dtype=np.int32) if feats is None else np.asarray(feats, np.int32)
        gh = np.ascontiguousarray(gh, np.int64)
        rows = np.ascontiguousarray(rows, ROW_INDEX_DTYPE)
        starts = np.asarray(node_start, np.int64)[build]
        counts = np.asarray(node_count, np.int64)[build]
        totals = np.zeros((build.shape[0], 2), np.int64)
        for i in range(build.shape[0] if layout.has_most_freq else 0):  # exact int64 sums
            totals[i] = gh[rows[starts[i] : starts[i] + counts[i]]].sum(axis=0)
        out = np.zeros((build.shape[0], layout.n_slots, 2), HIST_DTYPE)
        n_threads = self._threads()
        segs = Segments(
            starts,
            counts,
            np.arange(build.shape[0], dtype=np.int64),
            totals[:, 0].copy(),
            totals[:, 1].copy(),
        )
        build_histograms(
            n_threads > 1,
            self._run(n_threads > 1),
            self._hist_source(data, gh, rows, layout),
            segs,
            feats,
            feats.shape[0],
            feats.shape[0] == d,
            out,
            np.empty((0, 0), HIST_DTYPE),
        )
        if given is None:
            return out.reshape(build.shape[0], d, N_HIST_BINS, 2)
        return out

    def find_splits(self, hist, node_g, node_h, penalty, allowed, split):
        """``Backend.find_splits``: ``_gain``'s bin scan (``_categorical``'s for categorical
        features) per (slot, feature) by the level step's serial driver, then ``_level``'s
        rule per slot (``best_splits``). ``hist`` is (k, n_slots, 2) in ``split``'s layout, or
        the dense (k, d, 256, 2) (the full layout)."""
        hist, layout = split_input(np.ascontiguousarray(hist, HIST_DTYPE), split)
        k, d = hist.shape[0], layout.n_features
        feats = np.arange(d, dtype=np.int32)
        allowed = np.asarray(allowed, np.bool_)
        sp = split_args(split)
        cat_order = np.zeros((k, sp.n_cat, N_HIST_BINS), np.uint8)
        pf = PerFeature(
            *(
                np.empty((k, d), dt)
                for dt in (np.float64, np.float64, np.int64, np.int64, np.int64, np.int64)
            )
        )
        _search_ser(
            SearchSlots(
                hist,
                layout.offset,
                np.asarray(node_g, np.int64),
                np.asarray(node_h, np.int64),
                np.ones(k, np.bool_),
                cat_order,
                np.zeros(k, np.int64),
            ),
            feats,
            d,
            np.asarray(penalty, np.float64),
            allowed,
            sp,
            pf,
        )
        return best_splits(allowed, *pf, cat_slot=sp.cat_slot, cat_order=cat_order)

    def partition(
        self,
        Xb,
        rows,
        node_start,
        node_count,
        split_nodes,
        split_feature,
        split_bin,
        missing_left,
        split_cat=None,
        split_bits=None,
    ):
        """Stable in-place partition of each split node's segment (left rows, then right
        rows, each in their original order); returns left counts (n_split,) int64.
        ``split_cat`` (n_split,) bool marks categorical splits, whose left sets are the
        bitsets ``split_bits`` (n_split, CAT_WORDS) uint32."""
        split_nodes = np.asarray(split_nodes, np.int64)
        m = split_nodes.shape[0]
        sc = np.zeros(m, np.bool_) if split_cat is None else np.asarray(split_cat, np.bool_)
        sbits = (
            np.zeros((m, 0), np.uint32)
            if split_bits is None
            else np.ascontiguousarray(split_bits, np.uint32)
        )
        n_threads = self._threads()
        return _partition(
            self._run(n_threads > 1),
            self.prepare_binned(Xb).by_column,
            rows,
            np.empty_like(rows),
            np.empty(rows.shape[0], np.uint8),
            np.asarray(node_start, np.int64)[split_nodes],
            np.asarray(node_count, np.int64)[split_nodes],
            SplitRule(
                np.asarray(split_feature, np.int64),
                np.asarray(split_bin, np.int64),
                np.asarray(missing_left, np.bool_),
                sc,
                sbits,
            ),
            np.empty(0, np.float64),
            np.empty((m, 2), np.float64),
        )

    def group_test_steps(self):
        """GT-GBM's group-test steps on this device (``group_testing.CPUSteps``: columns
        summed by numba kernels)."""
        return CPUSteps

    # --- prediction -----------------------------------------------------------------------
    def predict_binned(
        self, Xb, feature, bin_threshold, missing_left, value, tree_column, out, is_cat, cat_bits
    ):
        _predict_binned(
            Xb, feature, bin_threshold, missing_left, value, tree_column, out, is_cat, cat_bits
        )
        return out

    def predict_raw(
        self, X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits
    ):
        X = np.asarray(X)
        if X.dtype != np.float32 and X.dtype != np.float64:
            X = X.astype(np.float64)
        X = read_only(np.ascontiguousarray(X))
        _predict_raw(X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits)
        return out


_NO_WEIGHTS = np.empty(0, np.float64)


def _no_weights(w):
    return _NO_WEIGHTS if w is None else w


def _over_chunks(ufunc, per_chunk):
    """``ufunc`` (np.add, np.maximum) reduced over the first axis of a kernel's per-chunk
    results: a serial pass's one chunk is the answer as it is, without numpy's reduction
    set-up (a few microseconds, paid by every tree)."""
    return per_chunk[0] if per_chunk.shape[0] == 1 else ufunc.reduce(per_chunk, axis=0)


def _labels(y):
    """y (n,) as float64, the one label type of the objective kernels: targets, 0/1 labels
    and class codes alike (codes are exact in it), so no task compiles its own kernels;
    read-only (``read_only``), so a read-only y compiles nothing either."""
    return read_only(np.asarray(y, dtype=np.float64))
