"""CUDA graphs of the GPU backend's level steps (``GPUBackend(cuda_graphs=True)``, opt-in).

Owns recording a level's operations (kernel launches and memsets), the cache of graphs keyed
by what those operations are, and replaying them. A level's launches are the same from tree
to tree when their grids are sized from the tree shape's bounds and their scalars live in
device memory (``_Workspace.set_params``), so after the first tree each level is one graph
launch instead of numba's per-launch argument handling (60 us of host time per launch on an
H200). On a GPU a graph is built through cuda.core's ``GraphBuilder``, which numba-cuda takes
as a launch stream (NVIDIA/numba-cuda PR 836). Under the CUDA simulator there are no graphs:
a "graph" is the recorded list, replayed op by op, which checks that replaying a recorded
level gives the CPU's trees. NOT YET RUN ON A GPU: the plain launches stay the default until
a GPU run has measured this path (``bench/bench_gpu_vs_xgboost.py --cuda-graphs``).
"""

from __future__ import annotations

from collections import OrderedDict


class LevelGraphs:
    """Recorded level steps and their graphs, keyed by the operations' full description.

    Parameters
    ----------
    backend : GPUBackend
        Captures and launches the graphs.
    capacity : int, default=64
        Graphs kept (least recently used dropped first); each holds its arguments' views.
    """

    def __init__(self, backend, capacity=64):
        self.be = backend
        self.capacity = capacity
        self.graphs = OrderedDict()  # key -> (ops, graph)
        self.captured = 0
        self.replayed = 0

    @staticmethod
    def key(ops):
        """What makes two recordings the same graph: kernels, geometries, and each argument
        by value (scalars) or by identity (device views: kept objects, held by the cache, so
        an identity cannot be reused by another array while its graph is cached).

        Parameters
        ----------
        ops : list of tuple
            The recorded operations, in order: ("memset", address, bytes, array, slots) or
            (phase, kernel, grid, block, shared bytes, arguments).

        Returns
        -------
        tuple
            Hashable; equal for two recordings that one graph replays.
        """
        out = []
        for op in ops:
            if op[0] == "memset":  # ("memset", address, bytes, array, slots)
                out.append(op[:3])
                continue
            _, kernel, grid, block, shared, args = op
            out.append(
                (
                    id(kernel),
                    grid,
                    block,
                    shared,
                    tuple(
                        a if isinstance(a, (bool, int, float)) else ("view", id(a)) for a in args
                    ),
                )
            )
        return tuple(out)

    def run(self, ops):
        """Run a recorded level: the cached graph of the same operations, else a new one.

        Parameters
        ----------
        ops : list of tuple
            The level's recorded operations (``key``'s form).
        """
        k = self.key(ops)
        got = self.graphs.pop(k, None)
        if got is None:
            got = (ops, self.be._graph_capture(ops))
            self.captured += 1
            if len(self.graphs) >= self.capacity:
                self.graphs.popitem(last=False)
        else:
            self.replayed += 1
        self.graphs[k] = got
        self.be._graph_launch(got[1])
