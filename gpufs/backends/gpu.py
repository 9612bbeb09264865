"""GPU backend: numba.cuda kernels (``gpufs.cuda_kernels``) on cupy arrays.

Implements the interface of ``backends.cpu.CPUBackend`` (same methods, arguments, shapes,
dtypes and results, bit for bit). Owns: device allocation (every array of a fit through one
out-of-memory wrapper that names the array, its size and what to do), launch sizes, the
kernels' views of the device arrays (made once: per workspace, per fit for the caller's raw
scores, targets and weights, at allocation for a round's gradients; never per launch: on an
H200 a launch cost 205 us of host time with cupy arguments, 60 us with kept views), each
kernel's largest block (``KERNEL_MAX_THREADS``), and the per-phase timers of ``profile=True``.

Where data lives: X, the binned matrix, gradients, rows, histograms, node tables, task tables
and raw scores stay on the device from input to model. Per tree the host sees:
  * two small copies while preparing the gradients: the largest magnitudes (which fix the
    power-of-two fixed-point scales) and the exact int64 sums (``quantize.prepare_gradients``);
  * one copy per level: the level's decisions, the features it admitted to Omega, the left
    counts and the children's sums, packed in one int64 buffer (``split._decide``).
The host keeps its own copy of the node table from those, so ``node_sums`` costs nothing.
Uploads (host -> device) are the tree's tables at its start, the penalty vector and masks when
they change, and the leaf values at the end.

A level is a fixed sequence of launches, every one sized by an upper bound the host knows from
its node counts (blocks past the device's exact counts skip the work):
  search (one thread per (node, feature): a sibling's histogram by subtraction, then
  ``_gain``'s bin scan; its last block decides: the shared ``_level`` rule), partition count
  (its last block plans: block-level scans) and scatter, and when the next level is searched:
  a memset and the smaller children's histograms. Four launches per level; per tree the
  extremes and quantizing of the gradients, the root's histogram (the root's rows need no
  launch: ``ident``) and the raw-score update. ``launches`` counts them per phase and the
  simulator suite asserts the budget.

Simulator: under ``NUMBA_ENABLE_CUDASIM=1`` there is no cupy; ``GPUBackend()`` then runs the same
kernels on numpy arrays (``xp = numpy``), with tiny launch sizes so the simulator (one Python
thread per CUDA thread) stays fast. CI checks every kernel that way against the CPU backend.

Launch geometry (each kernel module's docstring says what a kernel owns):
  histogram    grid (tasks, feature tiles), ``hist_threads`` threads, a tile of whole
               features of at most ``tile_slots`` histogram slots in dynamic shared memory
               (16.5 bytes per slot; a feature has its bins + 1 slots, ``gpufs._hist_layout``)
  partition    grid (tasks,) x ``part_threads``; plan: one block
  update_raw   grid (leaves, pieces) x ``part_threads``
  elementwise  (binning, prediction, gradients, losses) grid-stride loops, at most
               ``max_blocks`` blocks
A task is a run of at most ``rows_per_task`` consecutive positions of one node's segment,
fixed per tree shape so that the root's launch has a few blocks per SM.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
import warnings

import numpy as np

from .. import _tasks
from .._device import check_gpu_stack, get_namespace, is_cupy_array, to_host
from .._categorical import CAT_WORDS
from .._hist_layout import split_input, tree_layout
from .._types import HIST_DTYPE, N_HIST_BINS, N_OUT, SPL_ROWS, X_BINNED_DTYPE
from .base import LevelResult, best_splits, kernel_for
from ._gpu_advance import advance_level, level_histograms
from ._gpu_graphs import LevelGraphs
from .launch_rules import (DEFAULT_DYNAMIC_SHARED, MAX_OPTIN_SHARED, check_launch,
                           launch_geometry)


# numba-cuda warns on every launch of a grid smaller than twice the SM count. The small
# levels at the bottom of a tree are such launches by design (a node's few rows), and the
# warning flooded every GPU fit's output on an H100; it says nothing a user can act on.
def quiet_low_occupancy_warnings():
    """Ignore numba-cuda's low-occupancy warning (process-wide, that one message only)."""
    warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU "
                            r"under-utilization", module=r"numba_cuda\.")


quiet_low_occupancy_warnings()

#: Each kernel's largest block (threads) this backend launches, and its largest dynamic
#: shared memory (bytes), in one place: a GPU refuses a block of T threads whose registers,
#: T x (registers per thread rounded up to 8), pass the SM's 65,536 ("too many resources
#: requested for launch"), which the simulator never sees. The SASS test
#: (``tests/test_cuda_kernels_sim.py``) checks every kernel's registers and shared memory
#: against these; ``_launch`` refuses a larger block under the simulator, and the
#: constructor refuses launch sizes past them.
KERNEL_MAX_THREADS = {
    "bin_transform_kernel": 256, "extremes_kernel": 256,
    "quantize_kernel": 256,  # REDUCE_BLOCK: the reductions' shared arrays are this wide
    "histogram_kernel": 1024, "partition_count_kernel": 512,  # hist_ / part_threads
    "partition_scatter_kernel": 512, "update_leaves_kernel": 512, "search_kernel": 128,
    "predict_binned_kernel": 128, "predict_raw_kernel": 128,
    "logistic_gradients_kernel": 128, "softmax_gradients_kernel": 128,
    "squared_error_loss_kernel": 128, "logistic_loss_kernel": 128, "softmax_loss_kernel": 128,
    "round_squared_error_kernel": 128, "round_logistic_kernel": 128,
    "round_softmax_kernel": 128,
}
#: The histogram's tile of at most ``cuda_kernels.MAX_TILE_SLOTS`` slots, 4 bytes per
#: ``tile_words`` word (checked when the kernels load); the others use static shared memory.
KERNEL_MAX_DYNAMIC_SHARED = {"histogram_kernel": 49140}


def _simulator_enabled() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _load_kernels():
    """``gpufs.cuda_kernels``: installed inside the wheel, or ``cuda_kernels/`` of a checkout."""
    try:
        from .. import cuda_kernels
        return cuda_kernels
    except ImportError:
        pass
    # Source checkout: cuda_kernels/ sits next to gpufs/ and pyproject maps it into the
    # package on install. Load it under its installed name so both layouts behave the same.
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pkg_dir = os.path.join(here, "cuda_kernels")
    spec = importlib.util.spec_from_file_location(
        "gpufs.cuda_kernels", os.path.join(pkg_dir, "__init__.py"),
        submodule_search_locations=[pkg_dir])
    if spec is None:
        raise ImportError("gpufs.cuda_kernels is missing: reinstall gpufs")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpufs.cuda_kernels"] = module
    spec.loader.exec_module(module)
    return module


class GPUOutOfMemoryError(MemoryError):
    """The data does not fit in GPU memory; the message says how much was needed and free."""


def _fmt_bytes(n) -> str:
    if n is None:
        return "unknown"
    n = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} bytes" if unit == "bytes" else f"{n:,.2f} {unit}"
        n /= 1024
    return f"{n}"


class GPUBackend:
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
        Replay each level's launches as a CUDA graph (``_gpu_graphs``). Default False: this
        path has not run on a GPU yet (under the simulator the recorded launches are replayed
        instead); enable it to measure it.
    hist_optin_shared : bool, optional
        Let the histogram's feature tiles use the device's opt-in shared memory (227 KiB per
        block on Hopper, the attribute of NVIDIA/numba-cuda#94) instead of 48 KiB: fewer, wider
        tiles, so each row's gradients are read fewer times. Default False: which is faster
        awaits a GPU run (``bench_gpu_vs_xgboost.py --hist-optin-shared``).
    hist_threads, tile_slots, part_threads, min_rows_per_task, max_blocks, search_threads :
        launch sizes (defaults for a real GPU; tiny ones under the simulator).
        ``part_threads`` must be a power of two <= 512, ``search_threads`` one <= 128;
        ``tile_slots`` <= ``cuda_kernels.MAX_TILE_SLOTS`` (more with ``hist_optin_shared``;
        a tile holds at least the widest feature's slots).
    """

    name = "gpu"

    def __init__(self, xp=None, profile=None, *, hist_threads=None, tile_slots=None,
                 part_threads=None, min_rows_per_task=None, max_blocks=None,
                 search_threads=None, cuda_graphs=False, hist_optin_shared=False):
        self.simulator = _simulator_enabled()
        if not self.simulator:
            check_gpu_stack()  # a broken numpy / numba-cuda pair: one clear error, here
        if xp is None:
            xp = np if self.simulator else get_namespace("gpu")
        self.xp = xp
        self._cupy = xp is not np
        self.kernels = _load_kernels()
        assert 4 * self.kernels.tile_words(self.kernels.MAX_TILE_SLOTS) \
            == KERNEL_MAX_DYNAMIC_SHARED["histogram_kernel"]
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
        self._max_tile_slots = self.kernels.MAX_TILE_SLOTS
        while self.hist_optin and 4 * self.kernels.tile_words(self._max_tile_slots + 1) \
                <= self.hist_optin:
            self._max_tile_slots += 1
        self._optin_kernels = {}  # kernel -> its specialization with the attribute set
        # 2,048 slots (33 KB): the shared memory of the former 8 features of 256 bins; with
        # the opt-in, the largest tile that fits
        self.tile_slots = tile_slots or (40 if small else
                                         self._max_tile_slots if self.hist_optin else 2048)
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

    # --- plumbing -------------------------------------------------------------------------
    def _check_geometry(self):
        v = self.part_threads
        top = KERNEL_MAX_THREADS["partition_count_kernel"]  # its plan's registers
        if v < 1 or v > top or v & (v - 1):
            raise ValueError(f"part_threads must be a power of two <= {top}, got {v}")
        if not 1 <= self.hist_threads <= KERNEL_MAX_THREADS["histogram_kernel"]:
            raise ValueError(f"hist_threads must be in [1, "
                             f"{KERNEL_MAX_THREADS['histogram_kernel']}], got "
                             f"{self.hist_threads}")
        v = self.search_threads
        if v < 1 or v > self.kernels.MAX_SEARCH_THREADS or v & (v - 1):
            raise ValueError(f"search_threads must be a power of two <= "
                             f"{self.kernels.MAX_SEARCH_THREADS}, got {v}")
        if not 1 <= self.tile_slots <= self._max_tile_slots:
            raise ValueError(f"tile_slots must be in [1, {self._max_tile_slots}], got "
                             f"{self.tile_slots}")

    def _optin_limit(self):
        """The device's opt-in dynamic shared memory per block (bytes); under the simulator
        the largest of the GPUs gpufs targets (``launch_rules.MAX_OPTIN_SHARED``)."""
        if not self._cupy:
            return MAX_OPTIN_SHARED
        dev = self._cuda.get_current_device()
        return int(getattr(dev, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"))

    def _opted_in(self, kernel, args):
        """``kernel`` specialized for ``args`` with its dynamic shared memory limit raised to
        ``hist_optin`` (cuKernelSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES on the compiled
        function: numba-cuda has no public API for it, NVIDIA/numba-cuda#94). Once per kernel and fit's
        argument types. Never run on a GPU so far."""
        spec = self._optin_kernels.get(kernel)
        if spec is None:
            from numba.cuda.cudadrv.driver import binding, driver

            spec = kernel.specialize(*args)
            (overload,) = spec.overloads.values()
            fn = overload._codelibrary.get_cufunc()
            attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            driver.cuKernelSetAttribute(attr, int(self.hist_optin), fn.handle, fn.device.id)
            self._optin_kernels[kernel] = spec
        return spec

    def reset_timings(self):
        """Zero the per-phase timers, launch counters and the transfer counter."""
        self.timings = {}
        self.launches = {}
        self.transfers = 0  # device -> host copies (``_to_host``)
        self.hist_bytes = 0  # bytes the histogram launches had to read (rows x (d + 20))
        self.wrapped = {}  # phase -> arrays wrapped at launch (not passed as a kept view)
        self.views_made = 0  # kernels' views made of the backend's own new arrays (per round)
        self._events = []
        self._used_max = 0

    def synchronize(self):
        """Wait for all queued device work (no-op under the simulator)."""
        if self._cupy:
            self.xp.cuda.runtime.deviceSynchronize()

    def owns(self, a):
        """Whether ``a`` is an array of this backend's namespace (cupy; numpy under the
        simulator)."""
        return is_cupy_array(a) if self._cupy else isinstance(a, np.ndarray)

    def to_device(self, a):
        """``a`` as an array of this backend's namespace (``a`` itself when it is one)."""
        return self.xp.asarray(a)

    def task_table(self, seg_start, seg_count):
        """``Backend.task_table``: how the histogram and partition kernels cut segments into
        tasks: a segment of ``c`` rows into ceil(c / rows_per_task) near-equal runs
        (``gpufs._tasks``), ``rows_per_task`` fixed per tree shape (``_rows_per_task`` of the
        fit's rows: here of the segments' total)."""
        start = np.asarray(seg_start, np.int64)
        count = np.asarray(seg_count, np.int64)
        n_tasks = _tasks.gpu_task_count(count, self._rows_per_task(count.sum()))
        t_seg = np.repeat(np.arange(start.shape[0], dtype=np.int64), n_tasks)
        first = np.concatenate([[0], np.cumsum(n_tasks)[:-1]]).astype(np.int64)
        i = np.arange(t_seg.shape[0], dtype=np.int64) - first[t_seg]
        t_lo, t_hi = _tasks.task_bounds(start[t_seg], count[t_seg], n_tasks[t_seg], i)
        return t_seg, t_lo, t_hi

    @contextlib.contextmanager
    def _phase(self, name):
        if not self.profile:
            yield
            return
        self.synchronize()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.synchronize()
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0
            if self._cupy:
                free, total = self.xp.cuda.runtime.memGetInfo()
                self._used_max = max(self._used_max, total - free)

    def _stream(self):
        """numba launch stream = cupy's current stream, so both stay in order."""
        if not self._cupy:
            return 0
        ptr = self.xp.cuda.get_current_stream().ptr
        if ptr == 0:
            return 0
        stream = self._streams.get(ptr)
        if stream is None:
            stream = self._streams[ptr] = self._cuda.external_stream(ptr)
        return stream

    def _arg(self, a):
        # A cupy array passed straight to a kernel makes numba synchronize the stream it
        # exports (once per argument, per launch): a host sync per launch. Wrapping it without
        # that sync keeps launches asynchronous; we launch on cupy's stream anyway.
        if self._cupy and is_cupy_array(a):
            return self._cuda.as_cuda_array(a, sync=False)
        return a

    def _launch(self, phase, kernel, grid, block, *args, shared=0, optin_shared=0):
        self.launches[phase] = self.launches.get(phase, 0) + 1
        # The real launcher takes Python ints only (numpy integers fail on a GPU, not under
        # the simulator); the simulator checks what a GPU would (``launch_rules``).
        grid, block = launch_geometry(grid, block)
        shared = int(shared)
        if self.simulator:
            name = getattr(kernel, "__name__", phase)
            check_launch(name, grid, block, shared, optin_shared,
                         max_threads=KERNEL_MAX_THREADS.get(name, 1024))
        arrays = sum(isinstance(a, np.ndarray) or is_cupy_array(a) for a in args)
        if arrays:  # each is wrapped here (cupy) or copied in and out (the simulator)
            self.wrapped[phase] = self.wrapped.get(phase, 0) + arrays
        args = [self._arg(a) for a in args]
        if optin_shared and self._cupy and shared > DEFAULT_DYNAMIC_SHARED:
            kernel = self._opted_in(kernel, args)
        if self._recording is not None:  # a level for a CUDA graph: run at the level's end
            self._recording.append(("launch", kernel, grid, block, shared, tuple(args)))
            return
        if self.kernel_events and self._cupy:
            start, end = self.xp.cuda.Event(), self.xp.cuda.Event()
            start.record()
            kernel[grid, block, self._stream(), shared](*args)
            end.record()
            self._events.append((getattr(kernel, "__name__", phase), start, end))
            return
        kernel[grid, block, self._stream(), shared](*args)

    def _graph_capture(self, ops):
        """A level's recorded operations as an executable graph (cuda.core); under the
        simulator the list itself."""
        if not self._cupy:
            return ops
        from cuda.core import Device

        # CUDA refuses to capture on the legacy default stream (cupy's current stream
        # unless the user set one: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED on an H100), so the
        # level is captured on a private stream; capture only records, and the graph is
        # launched on cupy's current stream, in order with everything else.
        if self._capture_stream is None:
            dev = Device()
            dev.set_current()
            self._capture_stream = dev.create_stream()
        builder = self._capture_stream.create_graph_builder()
        builder.begin_building()
        for op in ops:
            self._issue(op, builder, int(builder.stream.handle))
        builder.end_building()
        return builder.complete()

    def _graph_launch(self, graph):
        if not self._cupy:
            for op in graph:
                self._issue(op, 0, 0)
            return
        from cuda.core import Stream

        graph.launch(Stream.from_handle(self.xp.cuda.get_current_stream().ptr))

    def _issue(self, op, stream, stream_ptr):
        """Run one recorded operation on ``stream`` (a numba stream or a GraphBuilder;
        ``stream_ptr`` its handle for cupy's memset)."""
        if op[0] == "memset":
            _, ptr, nbytes, h, n_slots = op
            if self._cupy:
                self.xp.cuda.runtime.memsetAsync(ptr, 0, nbytes, stream_ptr)
            else:
                h[:n_slots] = 0
            return
        _, kernel, grid, block, shared, args = op
        kernel[grid, block, stream, shared](*args)

    def kernel_times(self):
        """Device milliseconds per kernel, summed over the launches since ``reset_timings``,
        from the CUDA events recorded around each launch when ``kernel_events`` is true
        (events do not synchronize the host; this waits for them)."""
        out = {}
        if not self._events:
            return out
        self._events[-1][2].synchronize()
        for name, start, end in self._events:
            out[name] = out.get(name, 0.0) + self.xp.cuda.get_elapsed_time(start, end)
        return out

    def _to_host(self, a):
        """Device -> host copy (the per-level sync), counted, timed as its own phase."""
        self.transfers += 1
        with self._phase("host_sync"):
            return to_host(a)

    def _upload(self, name, host_array, dtype):
        """Small host array -> device, reusing the last upload when the content is unchanged."""
        host_array = np.ascontiguousarray(host_array, dtype=dtype)
        cached = self._uploads.get(name)
        if cached is not None and cached[0].shape == host_array.shape \
                and np.array_equal(cached[0], host_array):
            return cached[1]
        dev = self.xp.asarray(host_array)
        self._uploads[name] = (host_array.copy(), dev)
        return dev

    def _memory_info(self):
        """(free, total) device bytes, free including what the cupy pool holds unused."""
        if not self._cupy:
            return None, None
        try:
            free, total = self.xp.cuda.runtime.memGetInfo()
            try:
                free += self.xp.get_default_memory_pool().free_bytes()
            except Exception:
                pass
            return free, total
        except Exception:
            return None, None

    def _alloc(self, shape, dtype, what, zero=False):
        """``xp.empty`` / ``xp.zeros`` that turns out-of-memory into a GPUOutOfMemoryError."""
        with self._oom(what, shape, dtype):
            return (self.xp.zeros if zero else self.xp.empty)(shape, dtype=dtype)

    @contextlib.contextmanager
    def _oom(self, what, shape, dtype):
        """Turn an out-of-memory error inside the block into a GPUOutOfMemoryError naming
        ``what`` (the array, shaped ``shape`` of ``dtype``), its size, and what to do."""
        try:
            yield
        except GPUOutOfMemoryError:
            raise
        except MemoryError as e:  # cupy's OutOfMemoryError and rmm's bad_alloc are MemoryErrors
            raise GPUOutOfMemoryError(self._oom_message(what, shape, dtype)) from e

    def _oom_message(self, what, shape, dtype):
        need = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
        free, total = self._memory_info()
        return (f"gpufs ran out of GPU memory allocating {what} {tuple(shape)} "
                f"({np.dtype(dtype).name}): needed {_fmt_bytes(need)}, free {_fmt_bytes(free)} "
                f"of {_fmt_bytes(total)} on the device. A fit holds the binned matrix twice "
                f"(n_rows x n_features bytes by row and by column), 16 bytes of fixed-point "
                f"gradients per row, and the histograms of two tree levels (2 x "
                f"2**(max_depth - 1) x 16 bytes x the features' bins + 1 each). To fit: use "
                f"fewer rows (subsample them, or fit on a smaller batch), fewer features or a "
                f"smaller max_depth, free other GPU memory or use a GPU with more memory, or "
                f"fit with device='cpu'.")

    def _rows_per_task(self, total_rows):
        """Rows per task so the root's launch has a few blocks per SM, but never tiny tasks."""
        return max(self.min_rows_per_task, -(-int(total_rows) // (8 * self._sm_count)))

    def _grid_1d(self, n_items, threads):
        return max(1, min(self.max_blocks, -(-int(n_items) // threads)))

    def _float_input(self, X):
        with self._oom("the input matrix on the device", np.shape(X), np.float64):
            X = self.xp.asarray(X)
            if X.dtype != np.float32 and X.dtype != np.float64:
                X = X.astype(np.float64)  # float32 stays float32: the kernels widen it exactly
            if not self._cupy:
                X = np.ascontiguousarray(X)  # the simulator copies arrays, and only contiguous
        return X

    # --- the backend interface ------------------------------------------------------------
    def bin_transform(self, X, cuts_padded, n_cuts):
        """Float X (n, d) -> uint8 bins (n, d) with the cut matrix (d, 254), +inf padded."""
        with self._phase("bin_transform"):
            X = self._float_input(X)
            cuts = self._upload("cuts", cuts_padded, np.float64)
            nc = self._upload("n_cuts", n_cuts, np.int64)
            out = self._alloc(X.shape, X_BINNED_DTYPE, "the binned matrix")
            if X.size:
                threads = 256 if self._cupy else 32
                self._launch("bin_transform", self.kernels.bin_transform_kernel,
                             self._grid_1d(X.size, threads), threads, X, cuts, nc, out)
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
        (n_outputs, n) float64 on the device, from ``gpufs._exactmath``'s formulas.
        """
        kernel = kernel_for({"logistic": self.kernels.logistic_gradients_kernel,
                             "softmax": self.kernels.softmax_gradients_kernel}, objective)
        with self._phase("objective"):
            raw, y = self._rows_input(raw, y)
            n, k = raw.shape
            g = self._alloc((k, n), np.float64, "the gradients")
            h = self._alloc((k, n), np.float64, "the hessians")
            if n:
                threads = 128 if self._cupy else 32
                self._launch("objective", kernel, self._grid_1d(n, threads), threads, raw, y,
                             g, h)
            return g, h

    def loss_terms(self, objective, raw, y):
        """Per-row losses (n,) float64 on the device; ``CPUBackend.loss_terms``, bit for bit."""
        kernel = kernel_for({"squared_error": self.kernels.squared_error_loss_kernel,
                             "logistic": self.kernels.logistic_loss_kernel,
                             "softmax": self.kernels.softmax_loss_kernel}, objective)
        with self._phase("objective"):
            raw, y = self._rows_input(raw, y)
            out = self._alloc(raw.shape[:1], np.float64, "the per-row losses")
            if raw.shape[0]:
                threads = 128 if self._cupy else 32
                self._launch("objective", kernel, self._grid_1d(raw.shape[0], threads),
                             threads, raw, y, out)
            return out

    # --- one boosting round's gradients and their fixed point ------------------------------
    def _reduce_grid(self, n):
        return self._grid_1d(n, self._reduce_threads)

    def round_gradients(self, objective, raw, y):
        """(g, h, loss_terms) as ``CPUBackend.round_gradients``, bit for bit, in one pass:
        g, h (n_outputs, n) and loss_terms (n,) float64 on the device."""
        kernel = kernel_for({"squared_error": self.kernels.round_squared_error_kernel,
                             "logistic": self.kernels.round_logistic_kernel,
                             "softmax": self.kernels.round_softmax_kernel}, objective)
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
                self._launch("gradients", kernel, self._grid_1d(n, threads), threads,
                             self._kept_view(raw), self._kept_view(y), vg, vh, vl)
            return g, h, loss

    def _weights_arg(self, w):
        if w is not None:
            return self._kept_view(w)
        empty = self._scratch.get("no_weights")
        if empty is None:
            empty = self._scratch["no_weights"] = self._view(
                self._alloc((0,), np.float64, "no weights"))
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
            self._launch("gradients", self.kernels.extremes_kernel, blocks,
                         self._reduce_threads, vg,
                         self._kept_view(h, "round") if h is not None else vg,
                         self._weights_arg(w), bool(unit_hessian), bool(divisor), v_out)
        m = self._to_host(out).max(axis=0)
        return float(m[0]), float(m[1]), float(m[2])

    def quantize_gradients(self, g, h, w, unit_hessian, g_scale, h_scale, e1s, e2s,
                           low_scales, divisor):
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
            self._launch("gradients", self.kernels.quantize_kernel, blocks,
                         self._reduce_threads, vg,
                         self._kept_view(h, "round") if h is not None else vg,
                         self._weights_arg(w), bool(unit_hessian), float(g_scale),
                         float(h_scale), e1[0], e2[0], lo[0], e1[1], e2[1], lo[1], e1[2],
                         e2[2], lo[2], bool(divisor), v_gh, v_sums)
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
        with self._phase("prepare_binned"), self._oom("the binned matrix", Xb.shape,
                                                     X_BINNED_DTYPE):
            by_row = xp.ascontiguousarray(Xb, dtype=X_BINNED_DTYPE)  # no copy when it is
            by_col = self._alloc((Xb.shape[1], Xb.shape[0]), X_BINNED_DTYPE,
                                 "the binned matrix by column")
            by_col[...] = xp.asarray(by_row).T  # an elementwise copy: no temporary
        data = DeviceBinnedMatrix(by_row, by_col, self._view(by_row), self._view(by_col))
        self._scratch["binned"], self._scratch["binned_from"] = data, Xb
        return data

    def _view(self, a):
        """The array as the kernels take it, made once: numba's view of a cupy array (so no
        launch wraps it again), or the simulator's wrapper of a numpy array (no copies)."""
        if self._cupy:
            return self._cuda.as_cuda_array(a, sync=False)
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(a)

    @staticmethod
    def _view_key(a):
        """What identifies an array's memory for a kept view: address, shape, strides, dtype."""
        ptr = a.data.ptr if hasattr(a.data, "ptr") else a.__array_interface__["data"][0]
        return ptr, a.shape, a.strides, a.dtype.str

    def _kept_view(self, a, group="caller"):
        """The kernels' view of ``a``, made the first time ``a``'s memory is passed and kept
        in ``group`` (the view holds ``a``, so its address cannot be reused while kept):
        a fit's raw scores, targets and weights are wrapped once per fit, not per launch.
        "caller" keeps the 16 most recently passed; "round" and "tree" hold only the current round's
        and tree's arrays (``_keep_new`` replaces them)."""
        kept = self._kept[group]
        key = self._view_key(a)
        v = kept.pop(key, None)
        if v is None:
            if len(kept) >= (16 if group == "caller" else 64):
                kept.pop(next(iter(kept)))  # the least recently passed: a previous fit's
            v = self._view(a)
            self.views_made += 1
        kept[key] = v  # most recent last
        return v

    def _keep_new(self, group, *arrays):
        """Views of the backend's new arrays, made once at their allocation: ``group``'s old
        ones (a previous round's or tree's) are dropped first."""
        self._kept[group] = {}
        return [self._kept_view(a, group) for a in arrays]

    def _workspace(self, n, d, max_depth, layout):
        """The device arrays of a tree of this shape and histogram layout, allocated once and
        reused by every tree of the fit (each through the out-of-memory wrapper)."""
        key = (n, d, max_depth, layout)
        ws = self._scratch.get("workspace")
        if ws is not None and ws.key == key:
            return ws
        self._scratch.pop("workspace", None)
        ws = _Workspace(self, n, d, max_depth, layout=layout)
        self._scratch["workspace"] = ws
        return ws

    def start_tree(self, data, gh, root_g, root_h, max_depth, feats, penalty=None,
                   groups=None, split=None, layout=None):
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
        st = _GPUTree(ws, data, gh, self._kept_view(gh, "tree"), int(root_g), int(root_h), n,
                      np.ascontiguousarray(feats, dtype=np.int32))
        with self._phase("start_tree"):
            ws.begin(st)  # the root's rows are every row in order: no launch (``ident``)
            if st.n_feats and n:
                self.hist_bytes += n * (st.n_feats + 20)
                ws.zero_hist(ws.hist_index, 1)
                self._histogram(ws, st, cur=0, fcur=0, n_build_tasks=ws.tasks_for(n),
                                n_feats=st.n_feats, out=ws.hist_index, ident=True)
        return st

    def _histogram(self, ws, st, cur, fcur, n_build_tasks, n_feats, out, ident=False):
        if n_build_tasks == 0 or n_feats == 0:
            return
        self._launch("histogram", self.kernels.histogram_kernel,
                     (n_build_tasks, ws.n_tiles), self.hist_threads, st.data.v_row, st.v_gh,
                     ws.v["rows2"], cur, ident, ws.v["bld"], ws.v["ctrl"], ws.v["fmask2"], fcur,
                     ws.v["offset"], ws.v["tile_f"], ws.rows_per_task, ws.v[f"hist{out}"],
                     shared=ws.tile_bytes, optin_shared=self.hist_optin)

    def level_step(self, st, penalty, allowed, used, budget, split, build_next):
        """Decide, partition and prepare the next level of tree state ``st``.

        Kernels, all on device arrays: search (one block per (node, feature); siblings'
        histograms derived there by subtraction; its last block decides by the shared
        ``gpufs._level`` rule), partition count (its last block plans) and scatter, and when
        ``build_next`` the smaller children's histograms.
        Grids are sized by upper bounds the host knows (its copy of the node counts; with
        ``cuda_graphs``, the tree shape's, and the launches run as one graph); the exact
        counts stay on the device. Then one device -> host copy brings the level's
        decisions, left counts and children's sums. Returns a ``LevelResult``.
        """
        ws = st.ws
        k = st.n_active
        d = st.d
        with self._phase("level"):
            scal, pen, alw, usd = ws.set_params(penalty, allowed, used, split, int(budget))
            cat_slot, n_cat = split.categorical()
            v_slot, v_order = ws.categorical(cat_slot, n_cat)
            cur, a = st.level & 1, st.level & 1
            hist = ws.hist_index ^ cur
            graph = self.graphs is not None
            if graph:
                self._recording = []
            try:
                self._level_launches(st, ws, k, d, hist, cur, a, scal, pen, alw, usd, v_slot,
                                     v_order, split, build_next, graph)
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

    def _level_launches(self, st, ws, k, d, hist, cur, a, scal, pen, alw, usd, v_slot,
                        v_order, split, build_next, graph):
        """The level's launches (``level_step``), in order; recorded when ``graph``."""
        threads = self.search_threads
        # search, then (its last block) the level's decisions: one launch
        self._launch("search", self.kernels.search_kernel, self._grid_1d(k * d, 1),
                     threads, ws.v[f"hist{hist}"], ws.v[f"hist{hist ^ 1}"], ws.v["bld"],
                     st.level > 0, ws.v["nodes"], ws.v[f"active{a}"], k, ws.v["feats2"],
                     st.fcur, ws.v["ctrl"], ws.v["offset"], ws.view_of(split.n_bins), pen,
                     alw, usd, scal, v_slot, v_order, ws.v["pf_f"], ws.v["pf_i"],
                     True, ws.v["fmask2"], ws.v[f"active{1 - a}"], ws.v["admitted_now"],
                     ws.rows_per_task, ws.v["dec_f"], ws.v["dec_i"], ws.v["spl"],
                     ws.v["out_i"], ws.v["out_f"])
        counts = st.node_count[st.active]
        # grids: bounds from this tree's counts, or for a graph the tree shape's (the
        # same every tree, so the level replays)
        n_tasks = ws.max_tasks if graph else int(ws.tasks_for(counts).sum())
        self._partition(ws, cur, n_tasks, lc_base=ws.field_base + 4 * k,
                        ident=st.level == 0)
        if build_next:
            n_build = ws.max_tasks if graph else int(ws.tasks_for(counts // 2).sum())
            ws.zero_hist(hist ^ 1, 2 * k)
            self._histogram(ws, st, cur=cur ^ 1, fcur=st.fcur ^ 1,
                            n_build_tasks=n_build, n_feats=st.n_feats, out=hist ^ 1)

    def _partition(self, ws, cur, n_tasks, lc_base, ident=False):
        if n_tasks == 0:
            return
        pt = self.part_threads
        # count, then (its last block) the plan: one launch; then the scatter
        self._launch("partition", self.kernels.partition_count_kernel, n_tasks, pt,
                     ws.v["Xcols"], ws.v["rows2"], cur, ident, ws.v["spl"], ws.v["ctrl"],
                     ws.rows_per_task, ws.v["chunk_left"], ws.v["chunk_off"], ws.v["nodes"],
                     ws.v["bld"], ws.v["out_i"], lc_base)
        self._launch("partition", self.kernels.partition_scatter_kernel, n_tasks, pt,
                     ws.v["Xcols"], ws.v["rows2"], cur, ident, ws.v["spl"], ws.v["ctrl"],
                     ws.rows_per_task, ws.v["chunk_off"], ws.v["nodes"])

    def advance_level(self, st, plan, build_next):
        """The rows' half of ``level_step`` by a ``SplitPlan`` decided elsewhere (a Dask
        driver's ``CPUBackend.decide_level``): ``CPUBackend.advance_level``'s meaning and
        result, bit for bit (``_gpu_advance``); the level's histograms are then complete in
        ``st.hist`` (on the device). Returns the rows each split sent left, (n_split,) int64."""
        return advance_level(self, st, plan, build_next)

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
            self._update_leaves(raw_column, ws.v["rows2"], ws.v["nodes"], li, lf,
                                leaves.shape[0], st.n, ident=True)

    def _update_leaves(self, raw_column, rows2, nodes, leaf_nodes, leaf_values, n_leaves, n,
                       ident=False):
        parts = max(1, -(-n // (n_leaves * self.min_rows_per_task)))
        parts = min(parts, 65535)
        self._launch("update_raw", self.kernels.update_leaves_kernel, (n_leaves, parts),
                     self.part_threads, self._kept_view(raw_column), rows2, ident, nodes,
                     leaf_nodes, leaf_values)

    # --- the kernels one at a time (tests; the level step runs the same kernels) -----------
    def histograms(self, Xb, gh, rows, node_start, node_count, build_nodes, feats=None,
                   layout=None):
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
            bld[0, :m], bld[1, :m], bld[2, :m] = starts, counts, np.arange(m)
            bld[5, : m + 1] = np.concatenate([[0], np.cumsum(tasks)])
            itab["ctrl"][[0, 2, 4]] = m, int(tasks.sum()), feats.shape[0]
            ws.upload_itab(itab)
            ws.set_feats(0, feats)
            ws.rows2[0] = xp.asarray(rows)
            st = _GPUTree(ws, self.prepare_binned(xp.asarray(Xb)), xp.asarray(gh),
                          self._view(xp.asarray(gh)), 0, 0, n, feats)
            ws.v["hist0"] = self._view(out)
            self._histogram(ws, st, cur=0, fcur=0, n_build_tasks=int(tasks.sum()),
                            n_feats=feats.shape[0], out=0)
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
        itab["nodes"][2, :k] = np.asarray(node_g, np.int64)
        itab["nodes"][3, :k] = np.asarray(node_h, np.int64)
        itab["active0"][:k] = np.arange(k)
        itab["ctrl"][4] = d
        ws.upload_itab(itab)
        ws.feats2[0] = xp.arange(d, dtype=np.int32)
        allowed = np.asarray(allowed, np.bool_)
        scal, pen, alw, usd = ws.set_params(penalty, allowed, np.zeros(d, np.bool_), split)
        cat_slot, n_cat = split.categorical()
        v_slot, v_order = ws.categorical(cat_slot, n_cat)
        threads = self.search_threads
        if k and d:
            hist_v = self._view(hist)
            self._launch("search", self.kernels.search_kernel, self._grid_1d(k * d, 1),
                         threads, hist_v, hist_v, ws.v["bld"], False, ws.v["nodes"],
                         ws.v["active0"], k, ws.v["feats2"], 0, ws.v["ctrl"], ws.v["offset"],
                         self._view(xp.asarray(split.n_bins, np.int32)), pen, alw, usd,
                         scal, v_slot, v_order, ws.v["pf_f"], ws.v["pf_i"], False,
                         ws.v["fmask2"], ws.v["active1"], ws.v["admitted_now"],
                         ws.rows_per_task, ws.v["dec_f"], ws.v["dec_i"], ws.v["spl"],
                         ws.v["out_i"], ws.v["out_f"])
        pf_f = self._to_host(ws.pf_f)
        pf_i = self._to_host(ws.pf_i)
        order = self._to_host(ws.cat_order) if n_cat else None
        return best_splits(allowed, pf_f[0, :k, :d], pf_f[1, :k, :d], *pf_i[:, :k, :d],
                           cat_slot=cat_slot if n_cat else None, cat_order=order)

    def partition(self, Xb, rows, node_start, node_count, split_nodes, split_feature,
                  split_bin, missing_left, split_cat=None, split_bits=None):
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
        spl[0, :m], spl[1, :m] = nodes, np.arange(m)
        spl[2, :m] = np.asarray(to_host(split_feature), np.int64)
        spl[3, :m] = np.asarray(to_host(split_bin), np.int64)
        spl[4, :m] = np.asarray(to_host(missing_left), np.int64)
        spl[5, :m], spl[6, :m] = starts, counts
        spl[7, :m] = np.concatenate([[0], np.cumsum(tasks)[:-1]])
        if split_cat is not None:
            spl[8:8 + CAT_WORDS, :m] = np.asarray(split_bits, np.int64).T
            spl[8 + CAT_WORDS, :m] = np.asarray(split_cat, np.int64)
        itab["ctrl"][[0, 1]] = m, int(tasks.sum())
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
            host_rows[a:a + c] = moved[a:a + c]
        rows[...] = xp.asarray(host_rows)
        return lc.astype(np.int64)

    def group_test_steps(self):
        """GT-GBM's group-test steps on this device (``group_testing.DeviceSteps``: a step's
        pseudo-features as one matrix product)."""
        from ..group_testing import DeviceSteps

        return DeviceSteps

    def predict_binned(self, Xb, feature, bin_threshold, missing_left, value, tree_column, out,
                       is_cat, cat_bits):
        with self._phase("predict"):
            if Xb.shape[0] and feature.shape[0]:
                threads = 128 if self._cupy else 32
                self._launch("predict", self.kernels.predict_binned_kernel,
                             self._grid_1d(Xb.shape[0], threads), threads,
                             Xb, feature, bin_threshold, missing_left, value, tree_column, out,
                             is_cat, cat_bits)
            return out

    def predict_raw(self, X, feature, threshold, missing_left, value, tree_column, out, is_cat,
                    cat_bits):
        with self._phase("predict"):
            X = self._float_input(X)
            if X.shape[0] and feature.shape[0]:
                threads = 128 if self._cupy else 32
                self._launch("predict", self.kernels.predict_raw_kernel,
                             self._grid_1d(X.shape[0], threads), threads,
                             X, feature, threshold, missing_left, value, tree_column, out,
                             is_cat, cat_bits)
            return out

    # --- memory statistics (benchmarks) ---------------------------------------------------
    def memory_stats(self):
        """What is known about device memory use (bytes); empty under the simulator.

        ``device_used_max``: the most device memory in use (total - free, the pool's cached
        blocks counting as used) seen at the end of any phase; sampled only with
        ``profile=True``. ``pool_total``: bytes cupy's default pool holds now (it keeps its
        high-water mark unless freed). ``rmm_peak``: rmm's statistics peak, when the caller
        enabled ``rmm.statistics`` before fitting.
        """
        out = {}
        if not self._cupy:
            return out
        if self._used_max:
            out["device_used_max"] = int(self._used_max)
        try:
            out["pool_total"] = int(self.xp.get_default_memory_pool().total_bytes())
        except Exception:
            pass
        try:
            import rmm

            stats = rmm.statistics.get_statistics()
            if stats is not None:
                out["rmm_peak"] = int(stats.peak_bytes)
        except Exception:
            pass
        return out


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


#: The split search's scalars, in the order of ``split.search_kernel``'s ``scal`` (float64;
#: max_cat_to_onehot and the level's feature budget are small integers, exact as floats).
_SCALARS = ("g_scale", "h_scale", "reg_lambda", "gain_divisor", "min_child_weight",
            "min_split_gain", "max_cat_to_onehot", "budget")
_P0 = 8 * len(_SCALARS)  # bytes of the scalars at the start of the workspace's params

#: Sections of the workspace's int64 table, in order: name -> shape as a function of
#: (S = node slots of the widest level, n_nodes).
_ITAB = (("ctrl", lambda S, N: (8,)), ("spl", lambda S, N: (SPL_ROWS, S)),
         ("bld", lambda S, N: (6, S + 1)), ("nodes", lambda S, N: (4, N)),
         ("active0", lambda S, N: (2 * S,)), ("active1", lambda S, N: (2 * S,)))


class _Workspace:
    """Every device array of one tree shape (rows, depth, features), allocated once through
    the backend's out-of-memory wrapper and reused by each tree; the kernels' views of them
    are made here once (``v``), so no launch wraps an array again.

    ``itab`` is one int64 allocation holding the small tables (control words, split table,
    build table, node table, the two active-node lists), so a tree starts with one upload.
    ``layout`` (a ``HistLayout``, default the full one) places the features' bins in the
    histograms; its offsets and feature tiles (``cuda_kernels.tiles``) are uploaded once.
    """

    def __init__(self, be, n, d, max_depth, n_slots=None, n_nodes=None, hist=True,
                 layout=None):
        self.be = be
        xp = be.xp
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
        self.hist = [alloc((S, layout.n_slots, 2), HIST_DTYPE, f"a tree level's histograms "
                           f"({S} nodes)") for _ in range(2 if hist else 0)]
        tile_f, max_slots = be.kernels.tiles(layout.offset, be.tile_slots)
        self.n_tiles = int(tile_f.shape[0] - 1)
        self.tile_bytes = 4 * be.kernels.tile_words(max_slots)
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
        self.out = alloc((3 + dd + N_OUT * S,), np.int64, "the level's results")
        # the search's scalars (``_SCALARS``), the penalty vector and the feature masks
        self.params = alloc((_P0 + 10 * dd,), np.uint8, "the penalty vector and feature masks")
        self.leaves = alloc((2 * self.n_nodes,), np.int64, "the leaf values")
        views = {}
        off = 0
        for name, shape in self._itab_shapes:
            size = int(np.prod(shape))
            views[name] = self.itab[off: off + size].reshape(shape)
            off += size
        views.update(rows2=self.rows2, pf_f=self.pf_f, pf_i=self.pf_i,
                     dec_f=self.dec_f, dec_i=self.dec_i, admitted_now=self.admitted_now,
                     feats2=self.feats2, fmask2=self.fmask2, offset=lay[: d + 1],
                     tile_f=lay[d + 1:], chunk_left=chunk[0], chunk_off=chunk[1],
                     out_i=self.out, out_f=self.out.view(np.float64),
                     scal=self.params[:_P0].view(np.float64),
                     pen=self.params[_P0: _P0 + 8 * dd].view(np.float64),
                     alw=self.params[_P0 + 8 * dd: _P0 + 9 * dd].view(np.bool_),
                     usd=self.params[_P0 + 9 * dd:].view(np.bool_),
                     leaf_i=self.leaves[: self.n_nodes],
                     leaf_f=self.leaves[self.n_nodes:].view(np.float64))
        for i, h in enumerate(self.hist):
            views[f"hist{i}"] = h
        self.arrays = views
        self.v = {k: be._view(a) for k, a in views.items()}
        self.hist_index = 0
        self.field_base = 3 + dd  # the level's results: header, admitted, then fields
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
            self.cat_order = self.be._alloc((self.S, width, N_HIST_BINS), np.uint8,
                                             "the categorical split search's scratch")
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
            out[name] = buf[off: off + size].reshape(shape)
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
        tab["ctrl"][[0, 2, 4]] = 1, root_tasks, st.n_feats
        tab["bld"][1, 0] = n
        tab["bld"][5, 1] = root_tasks
        tab["nodes"][:, 0] = 0, n, st.root_g, st.root_h
        self.upload_itab(tab)
        if st.n_feats and (self._feats_host is None
                           or not np.array_equal(self._feats_host, st.feats)):
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
            self.be.xp.cuda.runtime.memsetAsync(h.data.ptr, 0, nbytes,
                                                self.be.xp.cuda.get_current_stream().ptr)
        else:
            h[:n_slots] = 0

    def set_params(self, penalty, allowed, used, split=None, budget=-1):
        """Upload the level's scalars (``_SCALARS`` from ``split`` and ``budget``), penalty
        vector and masks (one copy, only when they changed); returns the kernels' views
        (scalars float64, penalty float64, allowed bool, used bool). Scalars in device memory,
        not launch arguments: a level's launches are then the same from tree to tree (what a
        CUDA graph replays)."""
        d = self.d
        host = np.zeros(self.params.shape[0], np.uint8)
        dd = max(d, 1)
        if split is not None:
            host[:_P0] = np.array([float(getattr(split, a)) for a in _SCALARS[:-1]]
                                  + [float(budget)], np.float64).view(np.uint8)
        host[_P0: _P0 + 8 * d] = np.ascontiguousarray(penalty, np.float64).view(np.uint8)
        host[_P0 + 8 * dd: _P0 + 8 * dd + d] = np.asarray(allowed, np.bool_).view(np.uint8)
        host[_P0 + 9 * dd: _P0 + 9 * dd + d] = np.asarray(used, np.bool_).view(np.uint8)
        if self._params_host is None or not np.array_equal(self._params_host, host):
            self._set(self.params, host)
            self._params_host = host
        return self.v["scal"], self.v["pen"], self.v["alw"], self.v["usd"]

    def set_leaves(self, leaves, values):
        m = leaves.shape[0]
        host = np.zeros(2 * self.n_nodes, np.int64)
        host[:m] = leaves
        host[self.n_nodes: self.n_nodes + m] = values.view(np.int64)
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
        """The level's histograms on the device (``_gpu_advance.level_histograms``)."""
        return level_histograms(self)

    def apply_level(self, out, categorical=False):
        """Read the level's copy (``split._decide``'s layout), update the host's node
        table and active nodes, and return the ``LevelResult``."""
        k, d = self.n_active, self.d
        n_adm, n_next = int(out[0]), int(out[2])
        base = self.ws.field_base
        fields = out[base: base + N_OUT * k].reshape(N_OUT, k)
        feature = fields[0].astype(np.int32)
        bits = (fields[N_OUT - CAT_WORDS:].T.astype(np.uint32) if categorical
                else np.zeros((k, 0), np.uint32))
        res = LevelResult(nodes=self.active, feature=feature, bin=fields[1].astype(np.int32),
                          missing_left=fields[2] == 1, gain=fields[3].copy().view(np.float64),
                          admitted=out[3: 3 + n_adm].copy(), cat_bits=bits)
        split = feature >= 0
        nodes = self.active[split]
        lc, gl, hl = fields[4][split], fields[5][split], fields[6][split]
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
                out[a:a + c] = both[depth & 1, a:a + c]
        return out
