"""The settings every boosting run of one GBFS fit shares, in one record.

Owns :class:`BoostSetup`: the backend, the binned training rows, the objective, the cut
points, the loop's hyperparameters, the penalty's costs, groups and scaling, and GT-GBM's
candidate search. The ``mu`` search's probes, the exact-k pool and final fits, the
stability refits and the plain fit all start from it (``_mu_search``, ``_exact_k``,
``_stability``, ``gbfs``), so none of them passes these one by one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..engine.boosting import BoostingFit, BoostingParams, fit_boosting
from ..engine.penalties import PenaltyState

__all__ = ["BoostSetup"]


class BoostSetup(NamedTuple):
    """What the boosting runs of one GBFS fit share.

    Parameters
    ----------
    backend : CPUBackend or GPUBackend
        Or ``gpufs.dask``'s cluster backend.
    rows : BoostingRows
        The binned training rows.
    objective : SquaredError, Logistic or Softmax
    bin_mapper : BinMapper
        The cut points the rows were binned with.
    params : BoostingParams
    costs : ndarray of shape (n_features,), float64
    groups : ndarray of shape (n_features,), int32
    scaling : {"none", "root_sse"}
        ``penalty_scaling``.
    candidate_search : GroupTestSearch or None, default=None
        GT-GBM's group tests; None: the exact search.
    """

    backend: object
    rows: object
    objective: object
    bin_mapper: object
    params: BoostingParams
    costs: np.ndarray
    groups: np.ndarray
    scaling: str
    candidate_search: object = None

    def penalties(self, mu: float, k=None) -> PenaltyState:
        """A fresh penalty state at price ``mu`` with budget ``k``.

        Parameters
        ----------
        mu : float >= 0
        k : int or None, default=None

        Returns
        -------
        PenaltyState
        """
        return PenaltyState(mu, self.costs, self.groups, self.scaling, k)

    def fit(self, penalties, val_rows=None, **kwargs) -> BoostingFit:
        """``boosting.fit_boosting`` on these settings.

        Parameters
        ----------
        penalties : PenaltyState
        val_rows : BoostingRows or None, default=None
        **kwargs
            ``fit_boosting``'s ``on_round_start`` and ``resume``.

        Returns
        -------
        BoostingFit
        """
        return fit_boosting(
            self.backend,
            self.rows,
            self.objective,
            penalties,
            self.bin_mapper,
            self.params,
            val_rows,
            candidate_search=self.candidate_search,
            **kwargs,
        )
