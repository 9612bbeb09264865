"""How a node's row segment is cut into tasks, written once and compiled for both devices.

Owns the task rule of the histogram and partition kernels. A tree node's rows are one
contiguous segment of the row-index array; a kernel works on *tasks*, runs of consecutive
positions of one segment. A segment of ``count`` rows cut into ``n`` tasks gives task ``i``
the positions ``[start + i * count // n, start + (i + 1) * count // n)``: near-equal runs that
tile the segment in order (``task_bounds``).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations


def task_bounds(start, count, n_tasks, i):
    """Positions ``[lo, hi)`` of task ``i`` of the ``n_tasks`` near-equal runs that cut the
    segment of ``count`` rows at ``start``.

    Parameters
    ----------
    start, count, n_tasks, i : int (or int64 arrays of one shape)

    Returns
    -------
    lo, hi : int (or int64 arrays)
    """
    return start + (i * count) // n_tasks, start + ((i + 1) * count) // n_tasks


def cpu_task_count(count, rows_per_task, n_tasks_max):
    """Tasks of a segment of ``count`` rows on the CPU: ``count // rows_per_task``, at least
    one and at most ``n_tasks_max`` (a few per thread)."""
    return min(max(count // rows_per_task, 1), n_tasks_max)


def gpu_task_count(count, rows_per_task):
    """Tasks of a segment of ``count`` rows on the GPU: ``ceil(count / rows_per_task)`` (0 for
    an empty segment)."""
    return (count + rows_per_task - 1) // rows_per_task
