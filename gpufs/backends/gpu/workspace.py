"""The GPU backend's device memory of a tree shape, and one tree's state.

Owns ``_Workspace`` (every device array of one tree shape, allocated once, with the kernels'
views of them; its small tables in one int64 allocation so a tree starts with one upload; the
level's scalars, penalty vector and masks uploaded only when they change), ``_GPUTree`` (the
workspace a tree runs in and the host's copy of what the levels' copies brought back: the
node table, the active nodes) and ``DeviceBinnedMatrix`` (the binned matrix by row and by
column). The buffer layouts are ``gpufs._types``' (``SEARCH_SCALARS``, ``N_CTRL``, ``N_BLD_ROWS``,
``N_OUT``, ``SPL_ROWS``, ...), shared with the kernels.
"""

from __future__ import annotations

import numpy as np

from ..._device import to_host
from ..._types import (
    BLD_COUNT,
    BLD_FIRST_TASK,
    CTRL_BUILD_TASKS,
    CTRL_N_FEATS,
    CTRL_N_SEGMENTS,
    HIST_DTYPE,
    N_BLD_ROWS,
    N_CTRL,
    N_HIST_BINS,
    N_NODE_ROWS,
    N_OUT,
    N_SCAL,
    NODE_COUNT,
    NODE_G,
    NODE_H,
    OUT_ADMITTED,
    OUT_BIN,
    OUT_CAT_BITS,
    OUT_FEATURE,
    OUT_G_LEFT,
    OUT_GAIN,
    OUT_H_LEFT,
    OUT_HEADER,
    OUT_LEFT_COUNT,
    OUT_MISSING_LEFT,
    OUT_N_ADMITTED,
    OUT_N_NEXT,
    SCAL_BUDGET,
    SEARCH_SCALARS,
    SPL_ROWS,
)
from ...rules import _tasks
from ...rules._hist_layout import tree_layout
from ..base import LevelResult
from .level import level_histograms

__all__ = ["DeviceBinnedMatrix"]


class DeviceBinnedMatrix:
    """The binned training matrix on the device in both layouts the kernels read, with the
    kernels' views of them made once. The column copy costs n_samples x n_features bytes of
    device memory.

    Parameters
    ----------
    by_row : ndarray of shape (n_samples, n_features), uint8
        The histograms read every feature of a row.
    by_column : ndarray of shape (n_features, n_samples), uint8
        The partition reads one feature of a node's rows, which are in increasing order
        within the node, so neighbouring threads read neighbouring bytes.
    v_row, v_col : numba device arrays
        The kernels' views of the two.
    """

    __slots__ = ("by_row", "by_column", "v_row", "v_col")

    def __init__(self, by_row, by_column, v_row, v_col):
        self.by_row, self.by_column, self.v_row, self.v_col = by_row, by_column, v_row, v_col

    @property
    def shape(self):
        """(n_samples, n_features)."""
        return self.by_row.shape


_P0 = 8 * N_SCAL  # bytes of the scalars at the start of the workspace's params

#: Sections of the workspace's int64 table, in order: name -> shape as a function of
#: (S = node slots of the widest level, n_nodes).
_ITAB = (
    ("ctrl", lambda S, N: (N_CTRL,)),
    ("spl", lambda S, N: (SPL_ROWS, S)),
    ("bld", lambda S, N: (N_BLD_ROWS, S + 1)),
    ("nodes", lambda S, N: (N_NODE_ROWS, N)),
    ("active0", lambda S, N: (2 * S,)),
    ("active1", lambda S, N: (2 * S,)),
)


class _Workspace:
    """Every device array of one tree shape (rows, depth, features), allocated once through
    the backend's out-of-memory wrapper and reused by each tree; the kernels' views of them
    are made here once (``v``), so no launch wraps an array again.

    ``itab`` is one int64 allocation holding the small tables (control words, split table,
    build table, node table, the two active-node lists), so a tree starts with one upload.
    ``layout`` (a ``HistLayout``, default the full one) places the features' bins in the
    histograms; its offsets and feature tiles (``cuda_kernels.tiles``) are uploaded once.
    """

    def __init__(self, be, n, d, max_depth, n_slots=None, n_nodes=None, hist=True, layout=None):
        self.be = be
        layout = tree_layout(layout, None, d)
        self.key = (n, d, max_depth, layout)
        self.n, self.d = n, d
        self.layout = layout
        S = int(n_slots or 2 ** max(0, max_depth - 1))
        self.S = S
        self.n_nodes = int(max(n_nodes or 2 ** (max_depth + 1) - 1, S))
        self.rows_per_task = be._rows_per_task(n)
        T = n // self.rows_per_task + S + 2  # >= the tasks of any level
        self.max_tasks = T
        dd = max(d, 1)
        self._itab_shapes = [(name, shape(S, self.n_nodes)) for name, shape in _ITAB]
        size = sum(int(np.prod(s)) for _, s in self._itab_shapes)
        alloc = be._alloc
        # The histograms first: they are the largest, so an out-of-memory error names them.
        self.hist = [
            alloc((S, layout.n_slots, 2), HIST_DTYPE, f"a tree level's histograms ({S} nodes)")
            for _ in range(2 if hist else 0)
        ]
        tile_f, max_slots = be.kernels.tiles(layout.offset, be.tile_slots)
        self.n_tiles = int(tile_f.shape[0] - 1)
        self.tile_bytes = 4 * be.tile_words(max_slots)
        lay = alloc((d + 1 + tile_f.shape[0],), np.int64, "the histogram layout")
        self._set(lay, np.concatenate([layout.offset, tile_f]))
        self.itab = alloc((size,), np.int64, "the tree's node and task tables")
        self.rows2 = alloc((2, n), np.int32, "the row-index buffers")
        self.pf_f = alloc((2, S, dd), np.float64, "the split search's per-feature results")
        self.pf_i = alloc((4, S, dd), np.int64, "the split search's per-feature results")
        self.dec_f = alloc((2, S), np.float64, "the level's decision scratch")
        self.dec_i = alloc((3, S), np.int64, "the level's decision scratch")
        self.admitted_now = alloc((dd,), np.bool_, "the level's decision scratch")
        self.feats2 = alloc((2, dd), np.int32, "the feature lists")
        self.fmask2 = alloc((2, dd), np.uint8, "the feature lists")
        chunk = alloc((2, T + 1), np.int64, "the partition's task counts")
        self.out = alloc((OUT_HEADER + dd + N_OUT * S,), np.int64, "the level's results")
        # the search's scalars (``SEARCH_SCALARS``), the penalty vector and the feature masks
        self.params = alloc((_P0 + 10 * dd,), np.uint8, "the penalty vector and feature masks")
        self.leaves = alloc((2 * self.n_nodes,), np.int64, "the leaf values")
        views = {}
        off = 0
        for name, shape in self._itab_shapes:
            size = int(np.prod(shape))
            views[name] = self.itab[off : off + size].reshape(shape)
            off += size
        views.update(
            rows2=self.rows2,
            pf_f=self.pf_f,
            pf_i=self.pf_i,
            dec_f=self.dec_f,
            dec_i=self.dec_i,
            admitted_now=self.admitted_now,
            feats2=self.feats2,
            fmask2=self.fmask2,
            offset=lay[: d + 1],
            tile_f=lay[d + 1 :],
            chunk_left=chunk[0],
            chunk_off=chunk[1],
            out_i=self.out,
            out_f=self.out.view(np.float64),
            scal=self.params[:_P0].view(np.float64),
            pen=self.params[_P0 : _P0 + 8 * dd].view(np.float64),
            alw=self.params[_P0 + 8 * dd : _P0 + 9 * dd].view(np.bool_),
            usd=self.params[_P0 + 9 * dd :].view(np.bool_),
            leaf_i=self.leaves[: self.n_nodes],
            leaf_f=self.leaves[self.n_nodes :].view(np.float64),
        )
        for i, h in enumerate(self.hist):
            views[f"hist{i}"] = h
        self.arrays = views
        self.v = {k: be._view(a) for k, a in views.items()}
        self.hist_index = 0
        self.field_base = OUT_ADMITTED + dd  # the level's results: header, admitted, then fields
        self._params_host = None
        self._feats_host = None
        self._kept = {}
        self._cat_slot = None  # (host copy, the kernels' view) of the categorical slots
        self.cat_order = None  # (S, n_categorical, 256) uint8, allocated on first need

    def categorical(self, cat_slot, n_cat):
        """The kernels' views of the categorical slots (d,) int32 and of the categorical
        scan's order scratch (S, max(n_cat, 1), 256) uint8 (allocated once per width)."""
        width = max(int(n_cat), 1)
        if self.cat_order is None or self.cat_order.shape[1] != width:
            self.cat_order = self.be._alloc(
                (self.S, width, N_HIST_BINS), np.uint8, "the categorical split search's scratch"
            )
            self.v["cat_order"] = self.be._view(self.cat_order)
        # by content: without categorical features every level passes a new all -1 array
        host = np.asarray(to_host(cat_slot), np.int32)
        if self._cat_slot is None or not np.array_equal(self._cat_slot[0], host):
            self._cat_slot = (host.copy(), self.be._view(self.be.xp.asarray(host)))
        return self._cat_slot[1], self.v["cat_order"]

    def view_of(self, a):
        """The kernels' view of a caller's array that every level passes (the bin counts),
        made on first use and kept with the array."""
        kept = self._kept.get(id(a))
        if kept is None or kept[0] is not a:
            if len(self._kept) >= 8:  # callers that pass a new array per tree: keep a few
                self._kept.clear()
            kept = self._kept[id(a)] = (a, self.be._view(self.be.xp.asarray(a)))
        return kept[1]

    def tasks_for(self, counts):
        """Tasks of segments of ``counts`` rows (``_tasks.gpu_task_count``)."""
        return _tasks.gpu_task_count(np.asarray(counts, np.int64), self.rows_per_task)

    def itab_host(self):
        """Zeroed host sections shaped as ``itab``'s (fill, then ``upload_itab``)."""
        buf = np.zeros(self.itab.shape[0], np.int64)
        out = {"_buf": buf}
        off = 0
        for name, shape in self._itab_shapes:
            size = int(np.prod(shape))
            out[name] = buf[off : off + size].reshape(shape)
            off += size
        return out

    def upload_itab(self, host):
        self._set(self.itab, host["_buf"])

    def _set(self, dev, host):
        if self.be._cupy:
            dev.set(np.ascontiguousarray(host))
        else:
            dev[...] = host

    def begin(self, st):
        """Upload a new tree's tables: every row in the root, whose histogram is built next."""
        n = st.n
        tab = self.itab_host()
        root_tasks = int(self.tasks_for(n))
        ctrl = tab["ctrl"]
        ctrl[CTRL_N_SEGMENTS], ctrl[CTRL_BUILD_TASKS], ctrl[CTRL_N_FEATS] = (
            1,
            root_tasks,
            st.n_feats,
        )
        tab["bld"][BLD_COUNT, 0] = n
        tab["bld"][BLD_FIRST_TASK, 1] = root_tasks
        nodes = tab["nodes"]  # the root: start 0, every row
        nodes[NODE_COUNT, 0], nodes[NODE_G, 0], nodes[NODE_H, 0] = n, st.root_g, st.root_h
        self.upload_itab(tab)
        if st.n_feats and (
            self._feats_host is None or not np.array_equal(self._feats_host, st.feats)
        ):
            self.set_feats(0, st.feats)
            self._feats_host = st.feats.copy()
        self.v["Xcols"] = st.data.v_col

    def set_feats(self, index, feats):
        """Upload feature list ``index`` (0 or 1) and its mask."""
        self._set(self.feats2[index, : feats.shape[0]], np.asarray(feats, np.int32))
        mask = np.zeros(self.fmask2.shape[1], np.uint8)
        mask[np.asarray(feats, np.int64)] = 1
        self._set(self.fmask2[index], mask)

    def zero_hist(self, index, n_slots):
        """Zero the first ``n_slots`` slots of histogram buffer ``index`` (a memset, no
        kernel): the histogram kernel adds into them."""
        h = self.hist[index]
        n_slots = min(n_slots, h.shape[0])
        if self.be._recording is not None:  # in order with the level's recorded launches
            ptr = h.data.ptr if self.be._cupy else h.ctypes.data
            self.be._recording.append(("memset", ptr, n_slots * h.strides[0], h, n_slots))
        elif self.be._cupy:
            nbytes = n_slots * h.strides[0]
            self.be.xp.cuda.runtime.memsetAsync(
                h.data.ptr, 0, nbytes, self.be.xp.cuda.get_current_stream().ptr
            )
        else:
            h[:n_slots] = 0

    def set_params(self, penalty, allowed, used, split=None, budget=-1):
        """Upload the level's scalars (``SEARCH_SCALARS`` from ``split`` and ``budget``), penalty
        vector and masks (one copy, only when they changed); returns the kernels' views
        (scalars float64, penalty float64, allowed bool, used bool). Scalars in device memory,
        not launch arguments: a level's launches are then the same from tree to tree (what a
        CUDA graph replays)."""
        d = self.d
        host = np.zeros(self.params.shape[0], np.uint8)
        dd = max(d, 1)
        if split is not None:
            scal = np.array(
                [
                    float(budget) if i == SCAL_BUDGET else float(getattr(split, a))
                    for i, a in enumerate(SEARCH_SCALARS)
                ],
                np.float64,
            )
            host[:_P0] = scal.view(np.uint8)
        host[_P0 : _P0 + 8 * d] = np.ascontiguousarray(penalty, np.float64).view(np.uint8)
        host[_P0 + 8 * dd : _P0 + 8 * dd + d] = np.asarray(allowed, np.bool_).view(np.uint8)
        host[_P0 + 9 * dd : _P0 + 9 * dd + d] = np.asarray(used, np.bool_).view(np.uint8)
        if self._params_host is None or not np.array_equal(self._params_host, host):
            self._set(self.params, host)
            self._params_host = host
        return self.v["scal"], self.v["pen"], self.v["alw"], self.v["usd"]

    def set_leaves(self, leaves, values):
        m = leaves.shape[0]
        host = np.zeros(2 * self.n_nodes, np.int64)
        host[:m] = leaves
        host[self.n_nodes : self.n_nodes + m] = values.view(np.int64)
        self._set(self.leaves, host)
        return self.v["leaf_i"], self.v["leaf_f"]


class _GPUTree:
    """One tree being grown: the device workspace it runs in, and the host's copy of what
    the levels' copies brought back (decisions, node table), so nothing else crosses."""

    def __init__(self, ws, data, gh, v_gh, root_g, root_h, n, feats):
        self.ws, self.data, self.gh, self.v_gh = ws, data, gh, v_gh
        self.n, self.d = n, data.shape[1]
        self.root_g, self.root_h = root_g, root_h
        self.feats = feats
        self.n_feats = int(feats.shape[0])
        self.level = 0
        self.fcur = 0
        N = ws.n_nodes
        self.node_start = np.zeros(N, np.int64)
        self.node_count = np.zeros(N, np.int64)
        self.node_g = np.zeros(N, np.int64)
        self.node_h = np.zeros(N, np.int64)
        self.node_count[0], self.node_g[0], self.node_h[0] = n, root_g, root_h
        self.active = np.zeros(1, np.int64)
        self.leaves = []

    @property
    def n_active(self):
        return int(self.active.shape[0])

    @property
    def layout(self):
        """The tree's ``HistLayout``."""
        return self.ws.layout

    @property
    def hist(self):
        """The level's histograms on the device (``gpu.level.level_histograms``)."""
        return level_histograms(self)

    def level_result(self, out, categorical=False):
        """The ``LevelResult`` of the level's copy (``split._decide``'s layout) and its
        per-slot fields, (N_OUT, n_active) int64; changes nothing."""
        k = self.n_active
        n_adm = int(out[OUT_N_ADMITTED])
        base = self.ws.field_base
        fields = out[base : base + N_OUT * k].reshape(N_OUT, k)
        feature = fields[OUT_FEATURE].astype(np.int32)
        bits = (
            fields[OUT_CAT_BITS:].T.astype(np.uint32)
            if categorical
            else np.zeros((k, 0), np.uint32)
        )
        res = LevelResult(
            nodes=self.active,
            feature=feature,
            bin=fields[OUT_BIN].astype(np.int32),
            missing_left=fields[OUT_MISSING_LEFT] == 1,
            gain=fields[OUT_GAIN].copy().view(np.float64),
            admitted=out[OUT_ADMITTED : OUT_ADMITTED + n_adm].copy(),
            cat_bits=bits,
        )
        return res, fields

    def apply_level(self, out, categorical=False):
        """Read the level's copy (``split._decide``'s layout), update the host's node
        table and active nodes, and return the ``LevelResult``."""
        n_next = int(out[OUT_N_NEXT])
        res, fields = self.level_result(out, categorical)
        feature = res.feature
        split = feature >= 0
        nodes = self.active[split]
        lc = fields[OUT_LEFT_COUNT][split]
        gl, hl = fields[OUT_G_LEFT][split], fields[OUT_H_LEFT][split]
        L, R = 2 * nodes + 1, 2 * nodes + 2
        self.node_start[L] = self.node_start[nodes]
        self.node_count[L] = lc
        self.node_start[R] = self.node_start[nodes] + lc
        self.node_count[R] = self.node_count[nodes] - lc
        self.node_g[L], self.node_h[L] = gl, hl
        self.node_g[R] = self.node_g[nodes] - gl
        self.node_h[R] = self.node_h[nodes] - hl
        self.leaves.append(self.active[~split])
        nxt = np.empty(2 * nodes.shape[0], np.int64)
        nxt[0::2], nxt[1::2] = L, R
        self.active = nxt
        self.level += 1
        self.fcur ^= 1
        self.n_feats = n_next
        return res

    @property
    def rows(self):
        """The rows in their final order, each leaf's a contiguous segment (a host copy, for
        tests: the trees themselves read each leaf from its buffer)."""
        both = to_host(self.ws.rows2)
        out = np.arange(both.shape[1], dtype=both.dtype)  # the root's rows (no buffer)
        for node in np.concatenate(self.leaves + [self.active]):
            depth = int(node + 1).bit_length() - 1
            a, c = self.node_start[node], self.node_count[node]
            if depth:
                out[a : a + c] = both[depth & 1, a : a + c]
        return out
