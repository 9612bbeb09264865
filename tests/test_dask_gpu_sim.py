"""The Dask GPU shards under the numba CUDA simulator (``tests/_cudasim_dask.py``).

``test_dask_gpu_shards_under_the_cuda_simulator`` runs that file in its own pytest process
with ``NUMBA_ENABLE_CUDASIM=1`` (``_background_files``): ``GPUBackend.advance_level`` against
the CPU's, and Dask fits with ``device="gpu"`` on a ``LocalCluster`` against the CPU shards
and one process, bit for bit.
"""

import pytest

import _background_files

pytest.importorskip("distributed")


def test_dask_gpu_shards_under_the_cuda_simulator():
    _background_files.assert_passed("_cudasim_dask.py")
