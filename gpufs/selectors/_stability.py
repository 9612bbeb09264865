"""Selection frequencies over subsampled refits: GBFS's ``stability_rounds``.

Stability selection (Meinshausen and Buhlmann, "Stability selection", Journal of the Royal
Statistical Society B, 2010) asks how often a feature is chosen when the fit sees half of the
rows. Here each of B refits draws half of the training rows without replacement (seeded by
the fit's seed and the refit's index), runs at the pool fit's price without a budget
(``_exact_k``), and chooses its k features by total split gain, as the full fit does; a
feature's frequency is the fraction of the B choices that hold it. The refits use the exact
split search (GT-GBM's group tests are standardized over all rows) and no validation data.
On the host, refits of up to ``_threading.SIDE_BY_SIDE_MAX_CELLS`` cells run side by side on
the fit's threads (``_threading.run_side_by_side``), with the frequencies of one at a time.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import _threading
from .._threading import Stopped, run_side_by_side, thread_limit
from ..engine.boosting import DeviceRows

__all__ = ["selection_frequency"]


def selection_frequency(setup, mu, k, n_refits, seed):
    """How often each feature is among the k chosen in ``n_refits`` half-row refits.

    Parameters
    ----------
    setup : BoostSetup
        The fit's settings (``_boost_setup``); its rows must be :class:`DeviceRows` (arrays
        on the backend's device). Its candidate search is not used.
    mu : float >= 0
        The price of every refit.
    k : int
        How many of its features every refit chooses.
    n_refits : int >= 1
        B, the number of refits.
    seed : int
        Seeds the row draws.

    Returns
    -------
    frequency : ndarray of shape (n_features,), float64
        In [0, 1].
    n_trees : int
        Trees the refits grew.
    """
    from ._exact_k import total_gains

    backend, rows = setup.backend, setup.rows
    if not isinstance(rows, DeviceRows):
        raise ValueError(
            "stability_rounds needs the rows in this process (not supported by "
            "the Dask estimators)."
        )
    xp = backend.xp
    n, d = rows.shape
    half = max(1, n // 2)
    # Small refits run side by side on the host (``_threading.run_side_by_side``), each with
    # its own backend.
    cap = _threading.SIDE_BY_SIDE_MAX_CELLS
    side_by_side = hasattr(backend, "independent") and half * d <= cap

    def refit(b):
        def task(stop):
            fit_setup = setup._replace(candidate_search=None)
            if side_by_side:  # the fit's threads are the worker's
                fit_setup = fit_setup._replace(
                    backend=backend.independent(),
                    params=dataclasses.replace(setup.params, n_jobs=None),
                )
            rng = np.random.default_rng([int(seed), b])
            idx = xp.asarray(np.sort(rng.choice(n, half, replace=False)))
            sub = DeviceRows(
                fit_setup.backend,
                rows.Xb[idx],
                rows.y[idx],
                None if rows.w is None else rows.w[idx],
            )

            def check(_checkpoint):
                if stop.is_set():
                    raise Stopped

            pen = fit_setup.penalties(mu)
            ensemble = fit_setup._replace(rows=sub).fit(pen, on_round_start=check).ensemble
            gains = total_gains(ensemble)
            chosen = sorted(pen.order, key=lambda f: (-gains[f], pen.order.index(f)))[:k]
            return chosen, int(ensemble.n_trees)

        return task

    with thread_limit(setup.params.n_jobs) as n_threads:
        refits = run_side_by_side(
            [refit(b) for b in range(int(n_refits))], n_threads if side_by_side else 1
        )
    counts, n_trees = np.zeros(d), 0
    for chosen, trees in refits:
        counts[chosen] += 1
        n_trees += trees
    return counts / int(n_refits), n_trees
