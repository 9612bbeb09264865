"""What a real CUDA launch accepts, checked where no GPU does the checking.

The numba CUDA simulator runs kernels launched with geometries a GPU refuses: on an H200,
``LaunchConfig.grid must be an int, or a tuple with up to 3 ints (got (np.int64(20), 2, 1))``
failed 19 of 34 GPU tests that all passed under the simulator. ``GPUBackend._launch`` turns
every geometry into Python ints (``launch_geometry``) and, under the simulator, hands the
exact objects it launches with to ``check_launch``, which applies the hardware launcher's
rules: cuda.core's own ``LaunchConfig`` type checks (when cuda.core imports), positive
dimensions within CUDA's limits, at most 1,024 threads per block, and dynamic shared memory
within 48 KiB, or within the device's opt-in limit for a kernel that opts in.
"""

from __future__ import annotations

import functools

#: CUDA's limits for every compute capability gpufs targets (sm_70 and later).
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
#: Dynamic shared memory a kernel gets without opting in (numba-cuda does not opt in).
DEFAULT_DYNAMIC_SHARED = 48 * 1024
#: The largest opt-in limit of the GPUs gpufs targets (Hopper: 227 KiB per block; Ampere's
#: A100 allows 163 KiB; a real device's own limit is read from it where there is one).
MAX_OPTIN_SHARED = 227 * 1024


#: The histogram kernel a ``GPUBackend`` launches unless told otherwise (``hist_kernel=``),
#: the one switch for A/B runs on a device:
#:   "bounded"    ``histogram_bounded_kernel``: one int32 shared word per (slot, quantity),
#:                two fire-and-forget 32-bit shared atomics per element; needs the per-row
#:                bound of ``gpufs.engine.quantize`` and tasks of at most ``max_rows_per_task``
#:                rows. The default: half the shared atomics of the split words, no carry
#:                logic, no atomic whose result is waited for, and twice the features per
#:                tile (read in the SASS; not yet timed on a GPU).
#:   "split_word" ``histogram_kernel``: (low, high) 32-bit word pairs with carries, exact
#:                for any int64 values and task size (the kernel timed on the H100 at
#:                16ccc71).
HIST_KERNEL = "bounded"
HIST_KERNELS = ("bounded", "split_word")


def max_rows_per_task(hist_kernel):
    """The most rows one histogram task (one block) may sum with ``hist_kernel``: for the
    bounded kernel ``gpufs.engine.quantize.PACK_CHUNK_ROWS`` (2**16 - 1 rows of values at most
    2**15 in magnitude sum within an int32 word); no limit (None) for the split words.

    Parameters
    ----------
    hist_kernel : str
        One of ``HIST_KERNELS``.

    Returns
    -------
    int or None
    """
    if hist_kernel not in HIST_KERNELS:
        raise ValueError(f"hist_kernel must be one of {HIST_KERNELS}, got {hist_kernel!r}")
    if hist_kernel == "bounded":
        from ...engine.quantize import PACK_CHUNK_ROWS

        return PACK_CHUNK_ROWS
    return None


class LaunchError(ValueError):
    """A launch configuration a real GPU would refuse."""


def _as_dims(value):
    """A geometry as a 3-tuple of Python ints (numpy integers included), or the value
    unchanged when it is not one (``check_launch`` then says why)."""
    if isinstance(value, tuple):
        dims = value
    else:
        dims = (value,)
    try:
        out = tuple(int(v) for v in dims) + (1,) * (3 - len(dims))
    except (TypeError, ValueError):
        return value
    return out


def launch_geometry(grid, block):
    """A launch geometry in the form the real launcher takes.

    Parameters
    ----------
    grid, block : int or tuple of up to 3 ints
        Python or numpy integers.

    Returns
    -------
    grid, block : tuple of 3 int
        Python ints, missing dimensions 1.
    """
    return _as_dims(grid), _as_dims(block)


@functools.lru_cache(maxsize=1)
def _core_launch_config():
    try:
        from cuda.core import LaunchConfig
    except Exception:  # cuda.core comes with numba-cuda; without it, our checks alone
        return None
    return LaunchConfig


def _check_dims(what, value, limits):
    ok_type = type(value) is int or (
        isinstance(value, tuple) and 1 <= len(value) <= 3 and all(type(v) is int for v in value)
    )
    if not ok_type:
        shown = value if isinstance(value, tuple) else type(value)
        raise LaunchError(
            f"{what} must be an int, or a tuple with up to 3 ints (got {shown!r}): "
            f"numpy integers are refused by the real launcher"
        )
    dims = value if isinstance(value, tuple) else (value,)
    for axis, (v, top) in enumerate(zip(dims, limits)):
        if not 1 <= v <= top:
            raise LaunchError(
                f"{what}[{axis}] = {v} is outside [1, {top}]: a GPU refuses the "
                f"launch (a zero-sized grid is 'invalid configuration argument')"
            )
    return dims


def check_launch(name, grid, block, shared=0, optin_shared=0, max_threads=MAX_THREADS_PER_BLOCK):
    """Raise ``LaunchError`` when a GPU would refuse launching ``name`` this way.

    Parameters
    ----------
    name : str
        The kernel (for the message).
    grid, block : int or tuple of up to 3 ints
        Exactly what is handed to the launcher.
    shared : int
        Bytes of dynamic shared memory.
    optin_shared : int
        The kernel's opted-in dynamic shared memory limit in bytes (0: not opted in, 48 KiB).
    max_threads : int
        The kernel's declared largest block (``gpu.KERNEL_MAX_THREADS``): the block its
        registers were checked for (a larger one may need more than a GPU's 65,536).
    """
    try:
        _check_dims("grid", grid, MAX_GRID)
        block_dims = _check_dims("block", block, MAX_BLOCK)
        threads = 1
        for v in block_dims:
            threads *= v
        if threads > MAX_THREADS_PER_BLOCK:
            raise LaunchError(
                f"block {block!r} has {threads} threads, more than {MAX_THREADS_PER_BLOCK}"
            )
        if threads > max_threads:
            raise LaunchError(
                f"block {block!r} has {threads} threads, more than the "
                f"{max_threads} its registers were checked for"
            )
        if type(shared) is not int or shared < 0:
            raise LaunchError(f"dynamic shared memory must be a non-negative int (got {shared!r})")
        limit = DEFAULT_DYNAMIC_SHARED
        if optin_shared:
            if optin_shared > MAX_OPTIN_SHARED:
                raise LaunchError(
                    f"opt-in shared memory {optin_shared} B is over the largest "
                    f"device limit, {MAX_OPTIN_SHARED} B"
                )
            limit = optin_shared
        if shared > limit:
            raise LaunchError(
                f"{shared} B of dynamic shared memory is over the {limit} B a "
                f"block may use" + ("" if optin_shared else " without opting in")
            )
        LaunchConfig = _core_launch_config()
        if LaunchConfig is not None:
            try:
                LaunchConfig(grid=grid, block=block, shmem_size=shared)
            except (TypeError, ValueError) as e:
                raise LaunchError(str(e)) from e
    except LaunchError as e:
        raise LaunchError(f"launch of {name}: {e}") from None
