"""The GPU backend's device plumbing: launches, memory, views and timers.

Owns what ``GPUBackend``'s methods stand on (``DeviceMixin``): loading the kernels, each
kernel's largest block (``KERNEL_MAX_THREADS``), launching on cupy's stream (checked against
the real launcher's rules under the simulator, ``launch_rules``; recorded for a CUDA graph),
device allocation through one out-of-memory wrapper that names the array
(``GPUOutOfMemoryError``), small uploads reused while unchanged, the kernels' views of arrays
made once and kept, the tree shape's workspace, and the per-phase timers of ``profile=True``.
Why the views are kept, and the launch geometry: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import time
import warnings

import numpy as np

from ..._device import is_cupy_array, to_host
from ...rules import _tasks
from .launch_rules import (
    DEFAULT_DYNAMIC_SHARED,
    MAX_OPTIN_SHARED,
    check_launch,
    launch_geometry,
    max_rows_per_task,
)
from .workspace import _Workspace

__all__ = [
    "DeviceMixin",
    "GPUOutOfMemoryError",
    "KERNEL_MAX_DYNAMIC_SHARED",
    "KERNEL_MAX_THREADS",
    "quiet_low_occupancy_warnings",
]


# numba-cuda warns on every launch of a grid smaller than twice the SM count. The small
# levels at the bottom of a tree are such launches by design (a node's few rows), and the
# warning flooded every GPU fit's output on an H100; it says nothing a user can act on.
def quiet_low_occupancy_warnings():
    """Ignore numba-cuda's low-occupancy warning (process-wide, that one message only)."""
    warnings.filterwarnings(
        "ignore",
        message=r".*Grid size \d+ will likely result in GPU "
        r"under-utilization",
        module=r"numba_cuda\.",
    )


quiet_low_occupancy_warnings()

#: Each kernel's largest block (threads) this backend launches, and its largest dynamic
#: shared memory (bytes), in one place: a GPU refuses a block of T threads whose registers,
#: T x (registers per thread rounded up to 8), pass the SM's 65,536 ("too many resources
#: requested for launch"), which the simulator never sees. The SASS test
#: (``tests/test_cuda_kernels_sim.py``) checks every kernel's registers and shared memory
#: against these; ``_launch`` refuses a larger block under the simulator, and the
#: constructor refuses launch sizes past them.
KERNEL_MAX_THREADS = {
    "bin_transform_kernel": 256,
    "extremes_kernel": 256,
    "quantize_kernel": 256,  # REDUCE_BLOCK: the reductions' shared arrays are this wide
    "histogram_kernel": 1024,
    "histogram_bounded_kernel": 1024,  # hist_threads
    "partition_count_kernel": 512,  # part_threads
    "partition_scatter_kernel": 512,
    "update_leaves_kernel": 512,
    "search_kernel": 128,
    "predict_binned_kernel": 128,
    "predict_raw_kernel": 128,
    "logistic_gradients_kernel": 128,
    "softmax_gradients_kernel": 128,
    "squared_error_loss_kernel": 128,
    "logistic_loss_kernel": 128,
    "softmax_loss_kernel": 128,
    "round_squared_error_kernel": 128,
    "round_logistic_kernel": 128,
    "round_softmax_kernel": 128,
}
#: The histogram's tile of at most ``cuda_kernels.MAX_TILE_SLOTS`` slots, 4 bytes per
#: ``tile_words`` word (``MAX_BOUNDED_TILE_SLOTS`` and ``bounded_tile_words`` for the bounded
#: kernel; checked when the kernels load); the others use static shared memory.
KERNEL_MAX_DYNAMIC_SHARED = {"histogram_kernel": 49140, "histogram_bounded_kernel": 49148}


def _simulator_enabled() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _load_kernels():
    """``gpufs.cuda_kernels``: installed inside the wheel, or ``cuda_kernels/`` of a checkout."""
    try:
        from ... import cuda_kernels

        return cuda_kernels
    except ImportError:
        pass
    # Source checkout: cuda_kernels/ sits next to gpufs/ and pyproject maps it into the
    # package on install. Load it under its installed name so both layouts behave the same.
    here = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    pkg_dir = os.path.join(here, "cuda_kernels")
    spec = importlib.util.spec_from_file_location(
        "gpufs.cuda_kernels",
        os.path.join(pkg_dir, "__init__.py"),
        submodule_search_locations=[pkg_dir],
    )
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


#: numba's CUDA simulator swaps the ``cuda`` module in a kernel's globals for the launch and
#: keeps the launch's grid in module state, so two simulated launches from threads of one
#: process (Dask shards on in-process workers) would see each other's; a GPU has no such limit.
_SIMULATOR_LOCK = threading.Lock()


class DeviceMixin:
    """The device plumbing of ``GPUBackend`` (its attributes are set by its constructor)."""

    # --- plumbing -------------------------------------------------------------------------
    def _check_geometry(self):
        v = self.part_threads
        top = KERNEL_MAX_THREADS["partition_count_kernel"]  # its plan's registers
        if v < 1 or v > top or v & (v - 1):
            raise ValueError(f"part_threads must be a power of two <= {top}, got {v}")
        if not 1 <= self.hist_threads <= KERNEL_MAX_THREADS["histogram_kernel"]:
            raise ValueError(
                f"hist_threads must be in [1, "
                f"{KERNEL_MAX_THREADS['histogram_kernel']}], got "
                f"{self.hist_threads}"
            )
        v = self.search_threads
        if v < 1 or v > self.kernels.MAX_SEARCH_THREADS or v & (v - 1):
            raise ValueError(
                f"search_threads must be a power of two <= "
                f"{self.kernels.MAX_SEARCH_THREADS}, got {v}"
            )
        cap = max_rows_per_task(self.hist_kernel)
        if cap is not None and not 1 <= self.min_rows_per_task <= cap:
            raise ValueError(
                f"min_rows_per_task must be in [1, {cap}] with the "
                f"{self.hist_kernel!r} histogram kernel, got "
                f"{self.min_rows_per_task}"
            )
        if not 1 <= self.tile_slots <= self._max_tile_slots:
            raise ValueError(
                f"tile_slots must be in [1, {self._max_tile_slots}], got {self.tile_slots}"
            )

    def _optin_limit(self):
        """The device's opt-in dynamic shared memory per block (bytes); under the simulator
        the largest of the GPUs gpufs targets (``launch_rules.MAX_OPTIN_SHARED``)."""
        if not self._cupy:
            return MAX_OPTIN_SHARED
        dev = self._cuda.get_current_device()
        return int(dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)

    def _opted_in(self, kernel, args):
        """``kernel`` specialized for ``args`` with its dynamic shared memory limit raised to
        ``hist_optin`` (cuKernelSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES on the compiled
        function: numba-cuda has no public API for it, NVIDIA/numba-cuda#94). Once per kernel
        and fit's argument types. Never run on a GPU so far."""
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
        """Whether ``a`` is an array of this backend's namespace (``Backend.owns``).

        Parameters
        ----------
        a : object
            Any value.

        Returns
        -------
        bool
            True for a cupy array (a numpy array under the simulator).
        """
        return is_cupy_array(a) if self._cupy else isinstance(a, np.ndarray)

    def to_device(self, a):
        """``a`` as an array of this backend's namespace (``Backend.to_device``).

        Parameters
        ----------
        a : array_like
            Any array, of any shape and dtype.

        Returns
        -------
        ndarray
            ``a`` on the device (cupy; numpy under the simulator), same shape and dtype;
            ``a`` itself when it is one already.
        """
        return self.xp.asarray(a)

    def task_table(self, seg_start, seg_count):
        """How the histogram and partition kernels cut segments into tasks
        (``Backend.task_table``).

        A segment of ``c`` rows becomes ceil(c / rows_per_task) near-equal runs
        (``gpufs.rules._tasks``), ``rows_per_task`` fixed per tree shape (``_rows_per_task`` of
        the fit's rows: here of the segments' total).

        Parameters
        ----------
        seg_start, seg_count : array_like of shape (n_segments,), int
            First row position and row count of each segment.

        Returns
        -------
        t_seg, t_lo, t_hi : ndarray of shape (n_tasks,), int64
            Each task's segment, first row position and end (exclusive), tasks in segment
            order.
        """
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
            check_launch(
                name,
                grid,
                block,
                shared,
                optin_shared,
                max_threads=KERNEL_MAX_THREADS.get(name, 1024),
            )
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
        if self.simulator:  # one simulated launch at a time per process (see _SIMULATOR_LOCK)
            with _SIMULATOR_LOCK:
                kernel[grid, block, self._stream(), shared](*args)
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
        """Device milliseconds per kernel since ``reset_timings``.

        From the CUDA events recorded around each launch when ``kernel_events`` is true
        (events do not synchronize the host; this waits for them).

        Returns
        -------
        dict of str to float
            Kernel phase name -> milliseconds summed over its launches; empty without events
            (and under the simulator).
        """
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
        if (
            cached is not None
            and cached[0].shape == host_array.shape
            and np.array_equal(cached[0], host_array)
        ):
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
        return (
            f"gpufs ran out of GPU memory allocating {what} {tuple(shape)} "
            f"({np.dtype(dtype).name}): needed {_fmt_bytes(need)}, free {_fmt_bytes(free)} "
            f"of {_fmt_bytes(total)} on the device. A fit holds the binned matrix twice "
            f"(n_rows x n_features bytes by row and by column), 16 bytes of fixed-point "
            f"gradients per row, and the histograms of two tree levels (2 x "
            f"2**(max_depth - 1) x 16 bytes x the features' bins + 1 each). To fit: use "
            f"fewer rows (subsample them, or fit on a smaller batch), fewer features or a "
            f"smaller max_depth, free other GPU memory or use a GPU with more memory, or "
            f"fit with device='cpu'."
        )

    def _rows_per_task(self, total_rows):
        """Rows per task so the root's launch has a few blocks per SM, but never tiny tasks,
        nor more than the histogram kernel sums exactly (``launch_rules.max_rows_per_task``)."""
        rpt = max(self.min_rows_per_task, -(-int(total_rows) // (8 * self._sm_count)))
        cap = max_rows_per_task(self.hist_kernel)
        return rpt if cap is None else min(rpt, cap)

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
        "caller" keeps the 16 most recently passed; "round" and "tree" hold only the current
        round's and tree's arrays (``_keep_new`` replaces them)."""
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

    # --- memory statistics (benchmarks) ---------------------------------------------------
    def memory_stats(self):
        """What is known about device memory use (bytes); empty under the simulator.

        ``device_used_max``: the most device memory in use (total - free, the pool's cached
        blocks counting as used) seen at the end of any phase; sampled only with
        ``profile=True``. ``pool_total``: bytes cupy's default pool holds now (it keeps its
        high-water mark unless freed). ``rmm_peak``: rmm's statistics peak, when the caller
        enabled ``rmm.statistics`` before fitting.

        Returns
        -------
        dict of str to int
            The keys above that are known, each in bytes.
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
