"""The CPU engine: the backend interface on host numpy arrays, by numba kernels.

Modules named like ``cuda_kernels/``'s: ``histogram`` (row- or column-wise, sparse rows,
sibling subtraction), ``split`` (the search), ``partition``, ``level`` (the level step and its
two halves), ``objective`` (gradients, losses, fixed point), ``binning``, ``predict``,
``update``, ``_device_fns`` (the shared rules, inlined); ``backend`` holds ``CPUBackend``.

Shapes and dtypes (``gpufs._types``): ``Xb`` (n_samples, n_features) uint8, bin 255 missing;
``gh`` (n_samples, 2) int64 fixed-point (g, h); ``rows`` (n_samples,) int32, one segment per
node; ``node_*`` (n_nodes,) int64; ``hist`` (n_slots, layout.n_slots, 2) int64; ``raw``
(n_samples, n_outputs) float64. Every parallel loop has a ``_*_par`` (``prange``) and a
``_*_ser`` driver of one body; the reasons: ``docs/module_notes.rst``.
"""

from ... import _threading

_threading.configure()  # numba's threading layer, chosen before the first parallel kernel

from ..base import SplitPlan
from .backend import BinnedMatrix, CPUBackend
from .level import PARALLEL_MIN_WORK

__all__ = ["BinnedMatrix", "CPUBackend", "PARALLEL_MIN_WORK", "SplitPlan"]
