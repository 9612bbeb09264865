"""Selection frequencies over subsampled refits: GBFS's ``stability_rounds``.

Stability selection (Meinshausen and Buhlmann, "Stability selection", Journal of the Royal
Statistical Society B, 2010) asks how often a feature is chosen when the fit sees half of the
rows. Here each of B refits draws half of the training rows without replacement (seeded by
the fit's seed and the refit's index), runs at the pool fit's price without a budget
(``_exact_k``), and chooses its k features by total split gain, as the full fit does; a
feature's frequency is the fraction of the B choices that hold it. The refits use the exact
split search (GT-GBM's group tests are standardized over all rows) and no validation data. A
refit that draws only rows of sample weight 0 chooses nothing (a warning says how many did).
Small refits run side by side on the host's threads (``BoostSetup.fit_independent``), with
the frequencies of one at a time.
"""

from __future__ import annotations

import numpy as np

from .._device import to_host
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
    from ._exact_k import take_rows, total_gains

    rows = setup.rows
    if not isinstance(rows, DeviceRows):
        raise ValueError(
            "stability_rounds needs the rows in this process (not supported by "
            "the Dask estimators)."
        )
    n, d = rows.shape
    half = max(1, n // 2)
    w = None if rows.w is None else np.asarray(to_host(rows.w), dtype=np.float64)

    def refit(b):
        def fit(refit_setup, on_round_start):
            rng = np.random.default_rng([int(seed), b])
            idx = np.sort(rng.choice(n, half, replace=False))
            if w is not None and not w[idx].sum() > 0:
                # rows that weigh nothing hold no evidence (and no mean to start from)
                return None, 0
            sub = take_rows(refit_setup.backend, rows, idx)
            pen = refit_setup.penalties(mu)
            fitted = refit_setup._replace(rows=sub).fit(pen, on_round_start=on_round_start)
            gains = total_gains(fitted.ensemble)
            chosen = sorted(pen.order, key=lambda f: (-gains[f], pen.order.index(f)))[:k]
            return chosen, int(fitted.ensemble.n_trees)

        return fit

    # the refits side by side on the host (``BoostSetup.fit_independent``)
    refits = setup._replace(candidate_search=None).fit_independent(
        [refit(b) for b in range(int(n_refits))], half * d
    )
    counts, n_trees = np.zeros(d), 0
    for chosen, trees in refits:
        if chosen is not None:
            counts[chosen] += 1
        n_trees += trees
    empty = sum(chosen is None for chosen, _ in refits)
    if empty:
        from .._warnings import warn_from_caller

        warn_from_caller(
            f"stability_rounds={int(n_refits)}: {empty} of the half-row refits drew only rows "
            f"of sample weight 0 ({np.count_nonzero(w)} of {n} rows weigh anything); they "
            "choose no feature, so every frequency counts them as 0."
        )
    return counts / int(n_refits), n_trees
