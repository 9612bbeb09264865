"""gpufs on a Dask cluster: GBFS and ControlBurn on data that stays in the workers.

``DaskGBFSClassifier``, ``DaskGBFSRegressor``, ``DaskControlBurnClassifier`` and
``DaskControlBurnRegressor`` take ``dask.array`` / ``dask.dataframe`` collections on a
``distributed.Client`` and fit the same model as the single-process estimator on the same
rows, bit for bit, with any number of workers and any partitioning: the cut points come from
the single process's own seeded sample (gathered by global row index), and every number that
steers the fit is an exact sum across workers (int64 fixed-point histograms and gradient sums,
exact float sums for the initial score and the losses); the split decisions are made once, on
the driver, by the shared decision rule, and sent back.

There is no second boosting loop or tree grower: the driver runs ``gpufs.engine.boosting
.fit_boosting``, the GBFS ``mu`` search (with its warm start) and the ControlBurn forest
algorithms unchanged, with a backend whose level step decides on the summed histograms and a
``BoostingRows`` whose per-row work runs on the workers.

Modules: ``_data`` (partitions in, checked, category codes learned from all partitions),
``_validation`` (the ``validation_fraction`` split), ``_group`` (one actor per worker, calls
with timeouts, lost workers' shards rebuilt), ``_journal`` (what a rebuilt shard replays),
``_shard`` (a worker's rows and the kernels it runs on them), ``_backend`` (the grower's
backend interface on the driver), ``_gt`` (GT-GBM's group tests on the shards), ``_rows`` (the
boosting loop's per-row interface on the workers), ``_exact`` (sums that add across workers),
``_gbfs`` and ``_controlburn`` (the estimators), ``_estimator`` (what they share), ``_predict``
(lazy predictions on Dask collections).

Needs Dask: the checkout's ``dask`` extra, ``python -m pip install ".[dask]"`` (gpufs is not on
the package index).
"""

try:
    import dask  # noqa: F401
    import distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'gpufs.dask needs Dask: python -m pip install "dask[distributed,dataframe]"'
        ' (or ".[dask]" in the gpufs checkout).'
    ) from exc

from ._controlburn import DaskControlBurnClassifier, DaskControlBurnRegressor
from ._gbfs import DaskGBFSClassifier, DaskGBFSRegressor
from ._group import ClusterError

__all__ = [
    "ClusterError",
    "DaskControlBurnClassifier",
    "DaskControlBurnRegressor",
    "DaskGBFSClassifier",
    "DaskGBFSRegressor",
]
