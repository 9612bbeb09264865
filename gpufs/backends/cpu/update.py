"""The CPU's raw-score update: each leaf's value added to its rows' raw scores.

Owns ``_update_raw_par`` / ``_update_raw_ser``: the rows of a leaf are its segment of the
partitioned row indices, so no tree is traversed. The GPU's counterpart is
``cuda_kernels/update.py``.
"""

from numba import njit, prange


@njit(inline="always")
def _update_leaf(s, raw, rows, node_start, node_count, leaf_nodes, leaf_values):
    node = leaf_nodes[s]
    v = leaf_values[s]
    lo = node_start[node]
    for j in range(lo, lo + node_count[node]):
        raw[rows[j]] += v


@njit(parallel=True, cache=True, nogil=True)
def _update_raw_par(raw, rows, node_start, node_count, leaf_nodes, leaf_values):
    """raw[row] += value of the leaf whose segment holds the row (leaves hold disjoint rows)."""
    for s in prange(leaf_nodes.shape[0]):
        _update_leaf(s, raw, rows, node_start, node_count, leaf_nodes, leaf_values)


@njit(cache=True, nogil=True)
def _update_raw_ser(raw, rows, node_start, node_count, leaf_nodes, leaf_values):
    for s in range(leaf_nodes.shape[0]):
        _update_leaf(s, raw, rows, node_start, node_count, leaf_nodes, leaf_values)
