"""gpufs.dask on ``dask_cuda.LocalCUDACluster`` (``@pytest.mark.gpu``; skipped without a GPU,
dask_cuda or cudf).

On a CUDA cluster this checks the whole chain a RAPIDS user meets: numpy, cupy-backed and
``dask_cudf`` partitions read on the workers, on CPU shards (``device="auto"``) and on GPU
shards (``device="gpu"``: ``GPUBackend.advance_level`` on each worker's GPU), every Dask fit
equal, bit for bit, to the single-process estimator fitted on the GPU (which gives the CPU's
trees; ``tests/test_gpu.py``). CI runs the GPU shards under the simulator
(``tests/test_dask_gpu_sim.py``).
"""

import numpy as np
import pytest

from gpufs._device import gpu_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU with cupy"),
]

dask_cuda = pytest.importorskip("dask_cuda")
distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")


def _same_trees(a, b):
    sa, sb = a.ensemble_.stacked(), b.ensemble_.stacked()
    return all(np.array_equal(sa[k], sb[k]) for k in sa)


def test_local_cuda_cluster_equals_the_gpu_estimator():
    from gpufs import GBFSClassifier, GBFSRegressor
    from gpufs.dask import DaskGBFSClassifier, DaskGBFSRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 8))
    X[rng.random(X.shape) < 0.05] = np.nan
    Xz = np.nan_to_num(X)
    y = 2 * Xz[:, 0] - Xz[:, 3] + 0.3 * rng.normal(size=5000)
    kw = dict(n_estimators=8, max_depth=4, random_state=0)
    with (
        dask_cuda.LocalCUDACluster(n_workers=1, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        import cupy

        ref = GBFSRegressor(device="gpu", **kw).fit(X, y)
        Xd, yd = da.from_array(X, chunks=(1700, 8)), da.from_array(y, chunks=1700)
        for device, Xin in (("auto", Xd), ("gpu", Xd), ("gpu", Xd.map_blocks(cupy.asarray))):
            est = DaskGBFSRegressor(client=client, device=device, **kw).fit(Xin, yd)
            assert est.cluster_["shard_backends"] == ["gpu" if device == "gpu" else "cpu"]
            assert _same_trees(ref, est)
            assert np.array_equal(ref.selected_features_, est.selected_features_)

        cudf = pytest.importorskip("cudf")
        dask_cudf = pytest.importorskip("dask_cudf")
        labels = (y > 0).astype(np.int64)
        frame = cudf.DataFrame({f"f{i}": X[:, i] for i in range(8)})
        ref = GBFSClassifier(device="gpu", **kw).fit(frame, cudf.Series(labels))
        for device in ("auto", "gpu"):
            est = DaskGBFSClassifier(client=client, device=device, **kw).fit(
                dask_cudf.from_cudf(frame, npartitions=3),
                dask_cudf.from_cudf(cudf.Series(labels), npartitions=3),
            )
            assert _same_trees(ref, est)
            assert list(est.selected_feature_names_) == list(ref.selected_feature_names_)
