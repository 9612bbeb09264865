"""Raw-score update from the row partition that growth already computed (no tree traversal).

``update_leaves_kernel(raw, rows2, ident, nodes, leaf_nodes, leaf_values)``
  raw          (n,) float64, one output column of the raw scores (any stride), in place
  rows2        (2, n) int32 row buffers: a node at depth t keeps its rows in rows2[t % 2]
               (``partition`` docstring); with ``ident`` the root's rows are every row in
               order (no buffer holds them: a root leaf's position j is row j)
  nodes        (4, n_nodes) int64 node table (segment start and count in rows 0 and 1)
  leaf_nodes   (n_leaves,) int64; leaf_values (n_leaves,) float64
  raw[row] += leaf_values[l] for every row of leaf l: one addition per row, as on the CPU, so
  the result is the same bit for bit. Leaves hold disjoint rows: no two threads touch one
  entry.

Launch: grid (n_leaves, parts): block (l, p) takes the p-th of ``parts`` near-equal pieces of
leaf l's segment; any block size.
"""

from numba import cuda

from gpufs._types import NODE_COUNT, NODE_START

from ._device_fns import row_at


@cuda.jit(cache=True)
def update_leaves_kernel(raw, rows2, ident, nodes, leaf_nodes, leaf_values):
    leaf = cuda.blockIdx.x
    node = leaf_nodes[leaf]
    v = leaf_values[leaf]
    depth = 0
    m = node + 1
    while m > 1:
        m >>= 1
        depth += 1
    rows = rows2[depth & 1]
    start = nodes[NODE_START, node]
    count = nodes[NODE_COUNT, node]
    part = cuda.blockIdx.y
    parts = cuda.gridDim.y
    lo = start + (part * count) // parts
    hi = start + ((part + 1) * count) // parts
    for j in range(lo + cuda.threadIdx.x, hi, cuda.blockDim.x):
        raw[row_at(rows, j, ident and depth == 0)] += v
