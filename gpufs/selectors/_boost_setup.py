"""The settings every boosting run of one GBFS fit shares, in one record.

Owns :class:`BoostSetup`: the backend, the binned training rows, the objective, the cut
points, the loop's hyperparameters, the penalty's costs, groups and scaling, and GT-GBM's
candidate search. The ``mu`` search's probes, the exact-k pool and final fits, the
stability refits and the plain fit all start from it (``_mu_search``, ``_exact_k``,
``_stability``, ``gbfs``), so none of them passes these one by one; independent fits of it
run side by side on the host's threads (``BoostSetup.fit_independent``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from .. import _threading
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

    def fit_independent(self, fits, cells: int) -> list:
        """``[fit(setup, on_round_start) for fit in fits]``, side by side where they can be.

        For fits that share nothing but these settings (exact k's ranking folds, the
        stability refits): on a backend with ``independent()`` (the host's), more than one
        fit, at most ``_threading.SIDE_BY_SIDE_MAX_CELLS`` cells each, they run on Python
        threads (``_threading.run_side_by_side``), each given a copy of this setup with its
        own backend (a backend's scratch buffers are per fit) and the worker's share of the
        threads; else one at a time with this setup, under its ``n_jobs``. Either way the
        results are the same, bit for bit.

        Parameters
        ----------
        fits : sequence of callable
            ``fit(setup, on_round_start)``: runs its fit on ``setup`` and passes
            ``on_round_start`` to ``BoostSetup.fit`` (it ends the fit with
            ``_threading.Stopped`` when another fails or the caller is interrupted).
        cells : int
            The largest fit's rows x columns.

        Returns
        -------
        list
            The fits' results, in their order.
        """
        side = (
            len(fits) > 1
            and hasattr(self.backend, "independent")
            and cells <= _threading.SIDE_BY_SIDE_MAX_CELLS
        )

        def task_of(fit):
            def task(stop):
                setup = self
                if side:  # the fit's threads are the worker's (``run_side_by_side``)
                    setup = self._replace(
                        backend=self.backend.independent(),
                        params=dataclasses.replace(self.params, n_jobs=None),
                    )

                def on_round_start(_checkpoint):
                    if stop.is_set():
                        raise _threading.Stopped

                return fit(setup, on_round_start)

            return task

        with _threading.thread_limit(self.params.n_jobs) as n_threads:
            return _threading.run_side_by_side(
                [task_of(fit) for fit in fits], n_threads if side else 1
            )
