"""GPU backend: numba.cuda kernels (``gpufs.cuda_kernels``) on cupy arrays.

Owns ``GPUBackend``, the interface of ``backends.cpu.CPUBackend`` on the device (same methods,
arguments, shapes, dtypes and results, bit for bit): a round's gradients and their fixed
point, a tree's start, the level step (search and decision, partition, the next histograms:
four launches), the rows' half of a level for a Dask shard (``gpu.level``), the raw-score
update, prediction, and the kernels one at a time for tests. X, the binned matrix, gradients,
rows, histograms and raw scores stay on the device; the host sees a few small copies per tree
and one per level. The device plumbing is ``gpu.device``'s, a tree's memory
``gpu.workspace``'s. Under ``NUMBA_ENABLE_CUDASIM=1`` the same kernels run on numpy arrays
(``xp = numpy``, tiny launch sizes). Where data lives and the launch geometry, in full:
``docs/module_notes.rst``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ..._device import check_gpu_stack, get_namespace, to_host
from ..._types import (
    BLD_COUNT,
    BLD_FIRST_TASK,
    BLD_SLOT,
    BLD_START,
    CTRL_BUILD_TASKS,
    CTRL_N_FEATS,
    CTRL_N_SEGMENTS,
    CTRL_SPLIT_TASKS,
    HIST_DTYPE,
    N_HIST_BINS,
    N_OUT,
    NODE_G,
    NODE_H,
    OUT_LEFT_COUNT,
    PF_BIN,
    PF_G_LEFT,
    PF_GAIN,
    PF_H_LEFT,
    PF_MISSING_LEFT,
    PF_SCORE,
    SPL_BIN,
    SPL_CAT_BITS,
    SPL_COUNT,
    SPL_FEATURE,
    SPL_FIRST_TASK,
    SPL_IS_CAT,
    SPL_MISSING_LEFT,
    SPL_NODE,
    SPL_SLOT,
    SPL_START,
    X_BINNED_DTYPE,
)
from ...rules._hist_layout import split_input, tree_layout
from ..base import best_splits, cut_matrix, kernel_for
from . import launch_rules
from .device import (  # noqa: F401
    KERNEL_MAX_DYNAMIC_SHARED,
    KERNEL_MAX_THREADS,
    DeviceMixin,
    GPUOutOfMemoryError,
    _fmt_bytes,
    _load_kernels,
    _simulator_enabled,
    quiet_low_occupancy_warnings,
)
from .graphs import LevelGraphs
from .level import advance_level, decide_level
from .workspace import DeviceBinnedMatrix, _GPUTree, _Workspace

__all__ = ["DeviceBinnedMatrix", "GPUBackend", "GPUOutOfMemoryError"]


class _LevelViews(NamedTuple):
    """The kernels' views of one level's parameters, as the search kernel reads them
    (``_Workspace.set_params``, ``.categorical``, ``.view_of``): the scalars (float64), the
    penalty (d,) float64, allowed and used (d,) bool, the categorical slots (d,) int32, the
    categorical scan's scratch (S, max(n_cat, 1), 256) uint8 and the bin counts (d,) int32."""

    scalars: object
    penalty: object
    allowed: object
    used: object
    cat_slot: object
    cat_order: object
    n_bins: object


class GPUBackend(DeviceMixin):
    """Tree kernels on device arrays (numba.cuda on cupy; numpy under the CUDA simulator).

    Parameters
    ----------
    xp : array namespace, optional
        cupy on a GPU (the default); ``numpy`` under the simulator (the default there).
    profile : bool, optional
        Accumulate synchronized wall time per phase in ``self.timings`` (seconds) and launch
        counts in ``self.launches``. Default: the environment variable ``GPUFS_PROFILE=1``.
        Synchronizing around every phase costs time: leave it off for end-to-end timings.
        (Set the attribute ``kernel_events = True`` for device time per kernel instead:
        ``kernel_times()``.)
    cuda_graphs : bool, optional
        Replay each level's launches as a CUDA graph (``gpu.graphs``). Default False: this
        path has not run on a GPU yet (under the simulator the recorded launches are replayed
        instead); enable it to measure it.
    hist_optin_shared : bool, optional
        Let the histogram's feature tiles use the device's opt-in shared memory (227 KiB per
        block on Hopper, the attribute of NVIDIA/numba-cuda#94) instead of 48 KiB: fewer, wider
        tiles, so each row's gradients are read fewer times. Default False: which is faster
        awaits a GPU run (``bench_gpu_vs_xgboost.py --hist-optin-shared``).
    hist_kernel : {"bounded", "split_word"}, optional
        The histogram kernel (``launch_rules.HIST_KERNEL`` by default, "bounded"): both give
        the CPU's histograms bit for bit; "bounded" needs fixed-point gradients bounded per
        row as ``gpufs.engine.quantize`` makes them, and caps tasks at ``PACK_CHUNK_ROWS`` rows.
    hist_threads, tile_slots, part_threads, min_rows_per_task, max_blocks, search_threads :
        launch sizes (defaults for a real GPU; tiny ones under the simulator).
        ``part_threads`` must be a power of two <= 512, ``search_threads`` one <= 128;
        ``tile_slots`` <= ``cuda_kernels.MAX_TILE_SLOTS`` (``MAX_BOUNDED_TILE_SLOTS`` for the
        bounded kernel; more with ``hist_optin_shared``; a tile holds at least the widest
        feature's slots).
    """

    name = "gpu"
    #: one ``level_step`` per level (a level is a fixed sequence of kernels and one copy)
    grow_levels = None

    def __init__(
        self,
        xp=None,
        profile=None,
        *,
        hist_threads=None,
        tile_slots=None,
        part_threads=None,
        min_rows_per_task=None,
        max_blocks=None,
        search_threads=None,
        cuda_graphs=False,
        hist_optin_shared=False,
        hist_kernel=None,
    ):
        self.simulator = _simulator_enabled()
        if not self.simulator:
            check_gpu_stack()  # a broken numpy / numba-cuda pair: one clear error, here
        if xp is None:
            xp = np if self.simulator else get_namespace("gpu")
        self.xp = xp
        self._cupy = xp is not np
        self.kernels = _load_kernels()
        k = self.kernels
        assert 4 * k.tile_words(k.MAX_TILE_SLOTS) == KERNEL_MAX_DYNAMIC_SHARED["histogram_kernel"]
        assert (
            4 * k.bounded_tile_words(k.MAX_BOUNDED_TILE_SLOTS)
            == KERNEL_MAX_DYNAMIC_SHARED["histogram_bounded_kernel"]
        )
        self.hist_kernel = launch_rules.HIST_KERNEL if hist_kernel is None else hist_kernel
        launch_rules.max_rows_per_task(self.hist_kernel)  # refuses an unknown name
        bounded = self.hist_kernel == "bounded"
        self._hist_fn = k.histogram_bounded_kernel if bounded else k.histogram_kernel
        self.tile_words = k.bounded_tile_words if bounded else k.tile_words
        from numba import cuda

        self._cuda = cuda
        if self._cupy:
            self._sm_count = cuda.get_current_device().MULTIPROCESSOR_COUNT
        else:
            self._sm_count = 1
        small = not self._cupy  # simulator: one Python thread per CUDA thread
        self.hist_threads = hist_threads or (16 if small else 256)
        # The histogram's dynamic shared memory limit: 48 KiB, or the device's opt-in one.
        self.hist_optin = self._optin_limit() if hist_optin_shared else 0
        self._max_tile_slots = k.MAX_BOUNDED_TILE_SLOTS if bounded else k.MAX_TILE_SLOTS
        while self.hist_optin and 4 * self.tile_words(self._max_tile_slots + 1) <= self.hist_optin:
            self._max_tile_slots += 1
        self._optin_kernels = {}  # kernel -> its specialization with the attribute set
        # 33 KB of shared memory (the former 8 features of 256 bins): 2,048 split-word slots,
        # 4,096 bounded ones; with the opt-in, the largest tile that fits
        self.tile_slots = tile_slots or (
            40 if small else self._max_tile_slots if self.hist_optin else 4096 if bounded else 2048
        )
        self.part_threads = part_threads or (8 if small else 256)
        # one block per (node, feature), a thread per bin of a chunk (``split._scan_block``);
        # 32: a 256-bin feature in 8 chunks (to be tuned on a GPU: 64 and 128 also work)
        self.search_threads = search_threads or (8 if small else 32)
        self.min_rows_per_task = min_rows_per_task or (16 if small else 2048)
        self.max_blocks = max_blocks or (2 if small else 32 * self._sm_count)
        self._check_geometry()
        self.profile = (os.environ.get("GPUFS_PROFILE") == "1") if profile is None else profile
        self.kernel_events = False  # CUDA events around every launch (``kernel_times``)
        self.reset_timings()
        self._reduce_threads = 16 if small else self.kernels.REDUCE_BLOCK
        self._uploads = {}  # name -> (host copy, device array): re-upload only on change
        self._scratch = {}  # workspace, last prepared binned matrix, ...
        self._streams = {}  # cupy stream pointer -> numba external stream
        self._capture_stream = None  # cuda.core stream the CUDA graphs are captured on
        # The kernels' views of arrays that every round or tree passes again (``_kept_view``):
        # "caller" the fit's raw scores, targets and weights (a few, most recent last);
        # "round" the round's gradients; "tree" the tree's fixed-point gradients.
        self._kept = {"caller": {}, "round": {}, "tree": {}}
        self.cuda_graphs = bool(cuda_graphs)
        self.graphs = LevelGraphs(self) if self.cuda_graphs else None
        self._recording = None  # a level's operations while they are recorded for a graph

    # --- the backend interface ------------------------------------------------------------
    def bin_transform(self, X, cuts_padded, n_cuts):
        """Float X (n, d) -> uint8 bins (n, d) with the cut matrix (d, 254), +inf padded."""
        with self._phase("bin_transform"):
            X = self._float_input(X)
            cuts = self._upload("cuts", cut_matrix(cuts_padded, n_cuts), np.float64)
            out = self._alloc(X.shape, X_BINNED_DTYPE, "the binned matrix")
            if X.size:
                threads = 256 if self._cupy else 32
                self._launch(
                    "bin_transform",
                    self.kernels.bin_transform_kernel,
                    self._grid_1d(X.size, threads),
                    threads,
                    X,
                    cuts,
                    out,
                )
            return out

    def _rows_input(self, raw, y):
        xp = self.xp
        with self._oom("the raw scores and targets", np.shape(raw), np.float64):
            raw = xp.ascontiguousarray(xp.asarray(raw, dtype=np.float64))
            y = xp.asarray(y)
            if not self._cupy:
                y = np.ascontiguousarray(y)  # the simulator copies arrays, only contiguous ones
        return raw, y

    def gradients(self, objective, raw, y):
        """Per-row gradients and hessians of ``objective`` ("logistic" or "softmax").

        Same arguments and results as ``CPUBackend.gradients``, bit for bit: (g, h), each
        (n_outputs, n) float64 on the device, from ``gpufs.rules._exactmath``'s formulas.
        """
        kernel = kernel_for(
            {
                "logistic": self.kernels.logistic_gradients_kernel,
                "softmax": self.kernels.softmax_gradients_kernel,
            },
            objective,
        )
        with self._phase("objective"):
            raw, y = self._rows_input(raw, y)
            n, k = raw.shape
            g = self._alloc((k, n), np.float64, "the gradients")
            h = self._alloc((k, n), np.float64, "the hessians")
            if n:
                threads = 128 if self._cupy else 32
                self._launch("objective", kernel, self._grid_1d(n, threads), threads, raw, y, g, h)
            return g, h

    def loss_terms(self, objective, raw, y):
        """Per-row losses (n,) float64 on the device; ``CPUBackend.loss_terms``, bit for bit."""
        kernel = kernel_for(
            {
                "squared_error": self.kernels.squared_error_loss_kernel,
                "logistic": self.kernels.logistic_loss_kernel,
                "softmax": self.kernels.softmax_loss_kernel,
            },
            objective,
        )
        with self._phase("objective"):
            raw, y = self._rows_input(raw, y)
            out = self._alloc(raw.shape[:1], np.float64, "the per-row losses")
            if raw.shape[0]:
                threads = 128 if self._cupy else 32
                self._launch(
                    "objective", kernel, self._grid_1d(raw.shape[0], threads), threads, raw, y, out
                )
            return out

    # --- one boosting round's gradients and their fixed point ------------------------------
    def _reduce_grid(self, n):
        return self._grid_1d(n, self._reduce_threads)

    def round_gradients(self, objective, raw, y):
        """(g, h, loss_terms) as ``CPUBackend.round_gradients``, bit for bit, in one pass:
        g, h (n_outputs, n) and loss_terms (n,) float64 on the device."""
        kernel = kernel_for(
            {
                "squared_error": self.kernels.round_squared_error_kernel,
                "logistic": self.kernels.round_logistic_kernel,
                "softmax": self.kernels.round_softmax_kernel,
            },
            objective,
        )
        with self._phase("gradients"):
            raw, y = self._rows_input(raw, y)
            n, k = raw.shape
            g = self._alloc((k, n), np.float64, "the gradients")
            h = self._alloc((k, n), np.float64, "the hessians")
            loss = self._alloc((n,), np.float64, "the per-row losses")
            # views made once here: the round's extremes and quantize launches take g[c], h[c]
            vg, vh, vl = self._keep_new("round", g, h, loss, *g, *h)[:3]
            if n:
                threads = 128 if self._cupy else 32
                self._launch(
                    "gradients",
                    kernel,
                    self._grid_1d(n, threads),
                    threads,
                    self._kept_view(raw),
                    self._kept_view(y),
                    vg,
                    vh,
                    vl,
                )
            return g, h, loss

    def _weights_arg(self, w):
        if w is not None:
            return self._kept_view(w)
        empty = self._scratch.get("no_weights")
        if empty is None:
            empty = self._scratch["no_weights"] = self._view(
                self._alloc((0,), np.float64, "no weights")
            )
        return empty

    def _block_results(self, name, blocks, width, dtype):
        """(device array, its view) of ``blocks`` x ``width`` per-block results of a reducing
        kernel, allocated once per size and reused (the host copies them out each call)."""
        key = (name, blocks)
        got = self._scratch.get(key)
        if got is None:
            a = self._alloc((blocks, width), dtype, f"the {name}")
            got = self._scratch[key] = (a, self._view(a))
        return got

    def gradient_extremes(self, g, h, w, unit_hessian, divisor):
        """(max |g w|, max |h w|, max |q|) as host floats (``quantize.prepare_gradients``):
        one fused pass, each block's maxima brought to the host in one small copy."""
        with self._phase("gradients"):
            n = int(g.shape[0])
            blocks = self._reduce_grid(n)
            out, v_out = self._block_results("gradient extremes", blocks, 3, np.float64)
            vg = self._kept_view(g, "round")
            self._launch(
                "gradients",
                self.kernels.extremes_kernel,
                blocks,
                self._reduce_threads,
                vg,
                self._kept_view(h, "round") if h is not None else vg,
                self._weights_arg(w),
                bool(unit_hessian),
                bool(divisor),
                v_out,
            )
        m = self._to_host(out).max(axis=0)
        return float(m[0]), float(m[1]), float(m[2])

    def quantize_gradients(
        self, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s, low_scales, divisor
    ):
        """(gh (n, 2) int64 on the device, sums (8,) int64 on the host) as
        ``CPUBackend.quantize_gradients``: one fused pass, each block's int64 sums brought to
        the host in one small copy (integer sums: the same in any order)."""
        with self._phase("gradients"):
            n = int(g.shape[0])
            blocks = self._reduce_grid(n)
            if self.cuda_graphs:  # one buffer per fit: the histogram's graphs replay
                got = self._scratch.get(("gh", n))
                if got is None:
                    a = self._alloc((n, 2), np.int64, "the fixed-point gradients")
                    got = self._scratch[("gh", n)] = (a, self._view(a))
                gh, v_gh = got
                self._kept["tree"] = {self._view_key(gh): v_gh}
            else:
                gh = self._alloc((n, 2), np.int64, "the fixed-point gradients")
                (v_gh,) = self._keep_new("tree", gh)  # the tree's kernels take this view
            sums, v_sums = self._block_results("fixed-point sums", blocks, 8, np.int64)
            e1, e2, lo = ([float(v) for v in a] for a in (e1s, e2s, low_scales))
            vg = self._kept_view(g, "round")
            self._launch(
                "gradients",
                self.kernels.quantize_kernel,
                blocks,
                self._reduce_threads,
                vg,
                self._kept_view(h, "round") if h is not None else vg,
                self._weights_arg(w),
                bool(unit_hessian),
                float(g_scale),
                float(h_scale),
                e1[0],
                e2[0],
                lo[0],
                e1[1],
                e2[1],
                lo[1],
                e1[2],
                e2[2],
                lo[2],
                bool(divisor),
                v_gh,
                v_sums,
            )
        return gh, self._to_host(sums).sum(axis=0)

    # --- the level step ---------------------------------------------------------------------
    def prepare_binned(self, Xb):
        """The binned matrix as the tree kernels read it (a ``DeviceBinnedMatrix``: by row
        for the histograms, by column for the partition); prepare it once per fit."""
        if isinstance(Xb, DeviceBinnedMatrix):
            return Xb
        last = self._scratch.get("binned")
        if last is not None and self._scratch.get("binned_from") is Xb:
            return last
        xp = self.xp
        with (
            self._phase("prepare_binned"),
            self._oom("the binned matrix", Xb.shape, X_BINNED_DTYPE),
        ):
            by_row = xp.ascontiguousarray(Xb, dtype=X_BINNED_DTYPE)  # no copy when it is
            by_col = self._alloc(
                (Xb.shape[1], Xb.shape[0]), X_BINNED_DTYPE, "the binned matrix by column"
            )
            by_col[...] = xp.asarray(by_row).T  # an elementwise copy: no temporary
        data = DeviceBinnedMatrix(by_row, by_col, self._view(by_row), self._view(by_col))
        self._scratch["binned"], self._scratch["binned_from"] = data, Xb
        return data

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
        """Begin a tree: every row in the root, the root's histogram over ``feats`` (int32
        sorted feature indices) built, in ``layout`` (default ``split``'s, else the full
        layout; the GPU accumulates every bin, so a layout's most frequent bins are not
        derived here). ``data`` is ``prepare_binned``'s result (or the binned matrix).
        Returns the tree state for ``level_step``; it lives in the backend's workspace, so it
        is valid until the next ``start_tree``.

        ``penalty``, ``groups`` and ``split`` let the CPU backend skip histograms of paying
        features at nodes whose gain bound cannot pay them; that changes no decision, and
        the GPU builds every feature's histograms, so it ignores them."""
        data = self.prepare_binned(data)
        n, d = data.shape
        ws = self._workspace(n, d, int(max_depth), tree_layout(layout, split, d))
        st = _GPUTree(
            ws,
            data,
            gh,
            self._kept_view(gh, "tree"),
            int(root_g),
            int(root_h),
            n,
            np.ascontiguousarray(feats, dtype=np.int32),
        )
        with self._phase("start_tree"):
            ws.begin(st)  # the root's rows are every row in order: no launch (``ident``)
            if st.n_feats and n:
                self.hist_bytes += n * (st.n_feats + 20)
                ws.zero_hist(ws.hist_index, 1)
                self._histogram(
                    ws,
                    st,
                    cur=0,
                    fcur=0,
                    n_build_tasks=ws.tasks_for(n),
                    n_feats=st.n_feats,
                    out=ws.hist_index,
                    ident=True,
                )
        return st

    def _histogram(self, ws, st, cur, fcur, n_build_tasks, n_feats, out, ident=False):
        if n_build_tasks == 0 or n_feats == 0:
            return
        if self.simulator and self.hist_kernel == "bounded":
            # The bounded kernel's precondition (``gpufs.engine.quantize`` guarantees it; checked
            # here, where it is free, so a test feeding other values fails loudly).
            from ...engine.quantize import QGRAD_BOUND

            if st.gh.size and int(np.abs(st.gh).max()) > QGRAD_BOUND:
                raise ValueError(
                    "the bounded histogram kernel needs |gh| <= QGRAD_BOUND "
                    "(gpufs.engine.quantize); use hist_kernel='split_word'"
                )
        self._launch(
            "histogram",
            self._hist_fn,
            (n_build_tasks, ws.n_tiles),
            self.hist_threads,
            st.data.v_row,
            st.v_gh,
            ws.v["rows2"],
            cur,
            ident,
            ws.v["bld"],
            ws.v["ctrl"],
            ws.v["fmask2"],
            fcur,
            ws.v["offset"],
            ws.v["tile_f"],
            ws.rows_per_task,
            ws.v[f"hist{out}"],
            shared=ws.tile_bytes,
            optin_shared=self.hist_optin,
        )

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Decide, partition and prepare the next level of tree state ``st``.

        Kernels, all on device arrays: search (one block per (node, feature); siblings'
        histograms derived there by subtraction; its last block decides by the shared
        ``gpufs.rules._level`` rule), partition count (its last block plans) and scatter, and when
        ``build_next`` the smaller children's histograms.
        Grids are sized by upper bounds the host knows (its copy of the node counts; with
        ``cuda_graphs``, the tree shape's, and the launches run as one graph); the exact
        counts stay on the device. Then one device -> host copy brings the level's
        decisions, left counts and children's sums. Returns a ``LevelResult``.
        """
        ws = st.ws
        k = st.n_active
        with self._phase("level"):
            cat_slot, n_cat = split.categorical()
            views = _LevelViews(
                *ws.set_params(penalty, allowed, used, split, int(budget)),
                *ws.categorical(cat_slot, n_cat),
                ws.view_of(split.n_bins),
            )
            graph = self.graphs is not None
            if graph:
                self._recording = []
            try:
                self._level_launches(st, views, build_next, graph)
            finally:
                ops, self._recording = self._recording, None
            if graph:
                self.graphs.run(ops)
        out = self._to_host(ws.out[: ws.field_base + N_OUT * k])  # the level's one copy
        res = st.apply_level(out, n_cat > 0)
        if build_next and st.n_active:
            c = st.node_count[st.active]
            self.hist_bytes += int(np.minimum(c[0::2], c[1::2]).sum()) * (st.n_feats + 20)
        return res

    def _level_launches(self, st, views, build_next, graph):
        """The level's launches (``level_step``), in order, reading the level's device
        parameters ``views`` (``_LevelViews``); recorded when ``graph``."""
        ws, k, d = st.ws, st.n_active, st.d
        cur = a = st.level & 1  # the rows' and the active nodes' double buffers
        hist = ws.hist_index ^ cur
        threads = self.search_threads
        # search, then (its last block) the level's decisions: one launch
        self._launch(
            "search",
            self.kernels.search_kernel,
            self._grid_1d(k * d, 1),
            threads,
            ws.v[f"hist{hist}"],
            ws.v[f"hist{hist ^ 1}"],
            ws.v["bld"],
            st.level > 0,
            ws.v["nodes"],
            ws.v[f"active{a}"],
            k,
            ws.v["feats2"],
            st.fcur,
            ws.v["ctrl"],
            ws.v["offset"],
            views.n_bins,
            views.penalty,
            views.allowed,
            views.used,
            views.scalars,
            views.cat_slot,
            views.cat_order,
            ws.v["pf_f"],
            ws.v["pf_i"],
            True,
            ws.v["fmask2"],
            ws.v[f"active{1 - a}"],
            ws.v["admitted_now"],
            ws.rows_per_task,
            ws.v["dec_f"],
            ws.v["dec_i"],
            ws.v["spl"],
            ws.v["out_i"],
            ws.v["out_f"],
        )
        counts = st.node_count[st.active]
        # grids: bounds from this tree's counts, or for a graph the tree shape's (the
        # same every tree, so the level replays)
        n_tasks = ws.max_tasks if graph else int(ws.tasks_for(counts).sum())
        self._partition(
            ws, cur, n_tasks, lc_base=ws.field_base + OUT_LEFT_COUNT * k, ident=st.level == 0
        )
        if build_next:
            n_build = ws.max_tasks if graph else int(ws.tasks_for(counts // 2).sum())
            ws.zero_hist(hist ^ 1, 2 * k)
            self._histogram(
                ws,
                st,
                cur=cur ^ 1,
                fcur=st.fcur ^ 1,
                n_build_tasks=n_build,
                n_feats=st.n_feats,
                out=hist ^ 1,
            )

    def _partition(self, ws, cur, n_tasks, lc_base, ident=False):
        if n_tasks == 0:
            return
        pt = self.part_threads
        # count, then (its last block) the plan: one launch; then the scatter
        self._launch(
            "partition",
            self.kernels.partition_count_kernel,
            n_tasks,
            pt,
            ws.v["Xcols"],
            ws.v["rows2"],
            cur,
            ident,
            ws.v["spl"],
            ws.v["ctrl"],
            ws.rows_per_task,
            ws.v["chunk_left"],
            ws.v["chunk_off"],
            ws.v["nodes"],
            ws.v["bld"],
            ws.v["out_i"],
            lc_base,
        )
        self._launch(
            "partition",
            self.kernels.partition_scatter_kernel,
            n_tasks,
            pt,
            ws.v["Xcols"],
            ws.v["rows2"],
            cur,
            ident,
            ws.v["spl"],
            ws.v["ctrl"],
            ws.rows_per_task,
            ws.v["chunk_off"],
            ws.v["nodes"],
        )

    def advance_level(self, st, plan, build_next):
        """The rows' half of ``level_step`` by a ``SplitPlan`` decided elsewhere (a Dask
        driver's ``CPUBackend.decide_level``): ``CPUBackend.advance_level``'s meaning and
        result, bit for bit (``gpu.level``); the level's histograms are then complete in
        ``st.hist`` (on the device). Returns the rows each split sent left, (n_split,) int64."""
        return advance_level(self, st, plan, build_next)

    def decide_level(self, st, penalty, allowed, used, budget, split):
        """``CPUBackend.decide_level`` for a tree advanced by ``advance_level``: the level's
        decisions by the search kernel, read back as (``LevelResult``, ``SplitPlan``), bit
        for bit the CPU's (``gpu.level``). A Dask driver decides on the host instead."""
        return decide_level(self, st, penalty, allowed, used, budget, split)

    def node_sums(self, st):
        """Host (node_g, node_h, node_count) of the tree (n_nodes,) int64 each: assembled
        from the levels' copies, no transfer of its own."""
        return st.node_g, st.node_h, st.node_count

    def update_raw(self, raw_column, st, leaf_nodes, leaf_values):
        """Add each leaf's value to the raw scores of its rows (in place, no traversal)."""
        leaves = np.asarray(leaf_nodes, np.int64).reshape(-1)
        if leaves.shape[0] == 0 or st.n == 0:
            return
        with self._phase("update_raw"):
            ws = st.ws
            li, lf = ws.set_leaves(leaves, np.asarray(leaf_values, np.float64))
            self._update_leaves(
                raw_column, ws.v["rows2"], ws.v["nodes"], li, lf, leaves.shape[0], st.n, ident=True
            )

    def _update_leaves(
        self, raw_column, rows2, nodes, leaf_nodes, leaf_values, n_leaves, n, ident=False
    ):
        parts = max(1, -(-n // (n_leaves * self.min_rows_per_task)))
        parts = min(parts, 65535)
        self._launch(
            "update_raw",
            self.kernels.update_leaves_kernel,
            (n_leaves, parts),
            self.part_threads,
            self._kept_view(raw_column),
            rows2,
            ident,
            nodes,
            leaf_nodes,
            leaf_values,
        )

    # --- the kernels one at a time (tests; the level step runs the same kernels) -----------
    def histograms(
        self, Xb, gh, rows, node_start, node_count, build_nodes, feats=None, layout=None
    ):
        """Histograms of ``build_nodes`` in ``layout`` (every bin accumulated), as
        ``CPUBackend.histograms``: (len(build_nodes), layout.n_slots, 2) int64, or without a
        layout (len(build_nodes), d, 256, 2), the full layout's array."""
        xp = self.xp
        build = np.asarray(to_host(build_nodes), np.int64).reshape(-1)
        n, d = Xb.shape
        given = layout
        layout = tree_layout(layout, None, d)
        feats = np.arange(d, dtype=np.int32) if feats is None else np.asarray(feats, np.int32)
        m = build.shape[0]
        out = self._alloc((m, layout.n_slots, 2), HIST_DTYPE, "the histograms", zero=True)
        if m and d:
            ws = _Workspace(self, n, d, 1, n_slots=m, hist=False, layout=layout)
            starts = np.asarray(node_start, np.int64)[build]
            counts = np.asarray(node_count, np.int64)[build]
            tasks = ws.tasks_for(counts)
            itab = ws.itab_host()
            bld = itab["bld"]
            bld[BLD_START, :m], bld[BLD_COUNT, :m], bld[BLD_SLOT, :m] = starts, counts, np.arange(m)
            bld[BLD_FIRST_TASK, : m + 1] = np.concatenate([[0], np.cumsum(tasks)])
            ctrl = itab["ctrl"]
            ctrl[CTRL_N_SEGMENTS], ctrl[CTRL_BUILD_TASKS] = m, int(tasks.sum())
            ctrl[CTRL_N_FEATS] = feats.shape[0]
            ws.upload_itab(itab)
            ws.set_feats(0, feats)
            ws.rows2[0] = xp.asarray(rows)
            st = _GPUTree(
                ws,
                self.prepare_binned(xp.asarray(Xb)),
                xp.asarray(gh),
                self._view(xp.asarray(gh)),
                0,
                0,
                n,
                feats,
            )
            ws.v["hist0"] = self._view(out)
            self._histogram(
                ws, st, cur=0, fcur=0, n_build_tasks=int(tasks.sum()), n_feats=feats.shape[0], out=0
            )
        if given is None:
            return out.reshape(m, d, N_HIST_BINS, 2)
        return out

    def find_splits(self, hist, node_g, node_h, penalty, allowed, split):
        """``Backend.find_splits``: the level step's search kernel, then ``_level``'s rule per
        slot (``best_splits``, a categorical split's bitset from the scan order the kernel
        wrote); equal to ``CPUBackend.find_splits``, bit for bit. ``hist`` is (k, n_slots,
        2) in ``split``'s layout, or the dense (k, d, 256, 2) (the full layout)."""
        xp = self.xp
        hist, layout = split_input(xp.ascontiguousarray(xp.asarray(hist)), split)
        k, d = int(hist.shape[0]), layout.n_features
        ws = _Workspace(self, 1, d, 1, n_slots=k, hist=False, layout=layout)
        itab = ws.itab_host()
        itab["nodes"][NODE_G, :k] = np.asarray(node_g, np.int64)
        itab["nodes"][NODE_H, :k] = np.asarray(node_h, np.int64)
        itab["active0"][:k] = np.arange(k)
        itab["ctrl"][CTRL_N_FEATS] = d
        ws.upload_itab(itab)
        ws.feats2[0] = xp.arange(d, dtype=np.int32)
        allowed = np.asarray(allowed, np.bool_)
        scal, pen, alw, usd = ws.set_params(penalty, allowed, np.zeros(d, np.bool_), split)
        cat_slot, n_cat = split.categorical()
        v_slot, v_order = ws.categorical(cat_slot, n_cat)
        threads = self.search_threads
        if k and d:
            hist_v = self._view(hist)
            self._launch(
                "search",
                self.kernels.search_kernel,
                self._grid_1d(k * d, 1),
                threads,
                hist_v,
                hist_v,
                ws.v["bld"],
                False,
                ws.v["nodes"],
                ws.v["active0"],
                k,
                ws.v["feats2"],
                0,
                ws.v["ctrl"],
                ws.v["offset"],
                self._view(xp.asarray(split.n_bins, np.int32)),
                pen,
                alw,
                usd,
                scal,
                v_slot,
                v_order,
                ws.v["pf_f"],
                ws.v["pf_i"],
                False,
                ws.v["fmask2"],
                ws.v["active1"],
                ws.v["admitted_now"],
                ws.rows_per_task,
                ws.v["dec_f"],
                ws.v["dec_i"],
                ws.v["spl"],
                ws.v["out_i"],
                ws.v["out_f"],
            )
        pf_f = self._to_host(ws.pf_f)
        pf_i = self._to_host(ws.pf_i)
        order = self._to_host(ws.cat_order) if n_cat else None
        return best_splits(
            allowed,
            pf_f[PF_SCORE, :k, :d],
            pf_f[PF_GAIN, :k, :d],
            pf_i[PF_BIN, :k, :d],
            pf_i[PF_MISSING_LEFT, :k, :d],
            pf_i[PF_G_LEFT, :k, :d],
            pf_i[PF_H_LEFT, :k, :d],
            cat_slot=cat_slot if n_cat else None,
            cat_order=order,
        )

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
        """Stable in-place partition of each split node's segment, as
        ``CPUBackend.partition`` (categorical splits too); returns left counts (n_split,)
        int64."""
        xp = self.xp
        nodes = np.asarray(to_host(split_nodes), np.int64).reshape(-1)
        m = nodes.shape[0]
        if m == 0:
            return np.zeros(0, np.int64)
        n, d = Xb.shape
        n_nodes = int(2 * nodes.max() + 3)
        ws = _Workspace(self, n, d, 1, n_slots=m, n_nodes=n_nodes, hist=False)
        starts = np.asarray(node_start, np.int64)[nodes]
        counts = np.asarray(node_count, np.int64)[nodes]
        tasks = ws.tasks_for(counts)
        itab = ws.itab_host()
        spl = itab["spl"]
        spl[SPL_NODE, :m], spl[SPL_SLOT, :m] = nodes, np.arange(m)
        spl[SPL_FEATURE, :m] = np.asarray(to_host(split_feature), np.int64)
        spl[SPL_BIN, :m] = np.asarray(to_host(split_bin), np.int64)
        spl[SPL_MISSING_LEFT, :m] = np.asarray(to_host(missing_left), np.int64)
        spl[SPL_START, :m], spl[SPL_COUNT, :m] = starts, counts
        spl[SPL_FIRST_TASK, :m] = np.concatenate([[0], np.cumsum(tasks)[:-1]])
        if split_cat is not None:
            spl[SPL_CAT_BITS:SPL_IS_CAT, :m] = np.asarray(split_bits, np.int64).T
            spl[SPL_IS_CAT, :m] = np.asarray(split_cat, np.int64)
        ctrl = itab["ctrl"]
        ctrl[CTRL_N_SEGMENTS], ctrl[CTRL_SPLIT_TASKS] = m, int(tasks.sum())
        ws.upload_itab(itab)
        ws.rows2[0] = xp.asarray(rows)
        data = self.prepare_binned(xp.asarray(Xb))
        ws.v["Xcols"] = data.v_col
        self._partition(ws, 0, int(tasks.sum()), lc_base=0)
        lc = self._to_host(ws.out[:m])
        moved = self._to_host(ws.rows2[1])
        host_rows = to_host(rows).copy()
        for s in range(m):
            a, c = int(starts[s]), int(counts[s])
            host_rows[a : a + c] = moved[a : a + c]
        rows[...] = xp.asarray(host_rows)
        return lc.astype(np.int64)

    def group_test_steps(self):
        """GT-GBM's group-test steps on this device (``gpu.group_testing.DeviceSteps``: a
        step's pseudo-features as one matrix product)."""
        from .group_testing import DeviceSteps

        return DeviceSteps

    def predict_binned(
        self, Xb, feature, bin_threshold, missing_left, value, tree_column, out, is_cat, cat_bits
    ):
        with self._phase("predict"):
            self._predict(
                self.kernels.predict_binned_kernel,
                Xb,
                feature,
                bin_threshold,
                missing_left,
                value,
                tree_column,
                out,
                is_cat,
                cat_bits,
            )
            return out

    def predict_raw(
        self, X, feature, threshold, missing_left, value, tree_column, out, is_cat, cat_bits
    ):
        with self._phase("predict"):
            self._predict(
                self.kernels.predict_raw_kernel,
                self._float_input(X),
                feature,
                threshold,
                missing_left,
                value,
                tree_column,
                out,
                is_cat,
                cat_bits,
            )
            return out

    def _predict(self, kernel, X, feature, *trees):
        """Launch a prediction kernel on (X, feature, *trees): a thread per row of X, each
        walking every tree (no launch without rows or trees)."""
        if X.shape[0] and feature.shape[0]:
            threads = 128 if self._cupy else 32
            self._launch(
                "predict", kernel, self._grid_1d(X.shape[0], threads), threads, X, feature, *trees
            )
