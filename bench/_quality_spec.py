"""What the quality bench compares, shared by ``bench_quality.py`` (which runs it) and
``quality_summary.py`` (which tabulates its records) without importing the runner: the gpufs
families, the peers, the goal's tolerance, the seed and the planted families' names."""

#: The seed of the splits, the selectors and the refits.
SEED = 0

#: The goal: a gpufs family is the best or within TOL of the best peer.
TOL = 0.005
GPUFS = ("gbfs", "controlburn", "stagewise")
PEERS = ("rf_topk", "lgbm_cegb", "l1", "sfm_lgbm_gain")
#: The planted families of ``bench_quality.py`` (name -> the number of planted signals).
PLANTED_FAMILIES = {
    "sinusoids_d1000": 5,
    "sinusoids_d5000": 5,
    "copies_reg": 3,
    "copies_clf": 3,
    "categorical": 3,
    "noise_churn": 4,
    "noise_categories": 3,
    "noise_continuous": 3,
    "noise_integers": 3,
    "exact_fill": 8,
}
#: The k each planted family runs at, where not the number of its signals.
PLANTED_KS = {
    "noise_churn": (3, 4, 5),
    "noise_categories": (2, 3),
    "noise_continuous": (2, 3),
    "noise_integers": (2, 3),
    "exact_fill": (10,),
}
#: The phases of GBFS's ``fit_times_`` that make up an exact-k fit, summed for the bench's
#: ``search_time_ratio`` (``mu_probes`` breaks ``mu_search`` down, ``compile`` is outside the
#: phases). Before 2026-11-30 the ratio left out ``heldout`` (the ranking's fits and
#: permutations), so earlier records understate exact k's cost.
EXACT_K_PHASES = ("bin", "mu_search", "pool", "heldout", "stability", "boost")
