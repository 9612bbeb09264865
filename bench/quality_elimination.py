"""GBFS's exact-k pool chosen by recursive elimination, measured on the quality bench without
changing gpufs: a candidate rule, not a gpufs option.

Exact k ranks its pool once by held-out saving (``_exact_k.rank_by_heldout``). Here that
ranking is repeated: keep the best ``max(k, ceil(keep * n))`` of the n remaining by
``saving - z * se`` and rank the survivors again with new ranking fits, until k remain.
Eliminated features rank below every survivor, the later-eliminated first (Gregorutti,
Michel and Saint-Pierre, "Correlation and variable importance in random forests",
Statistics and Computing 27(3), 2017). Records: ``results/quality_s20_rfe50.jsonl`` (z = 2,
as the final ranking), ``results/quality_s21_rfe50z{0,1}.jsonl``.

Run (everything after ``--`` goes to ``bench_quality.py``)::

    python bench/quality_elimination.py --keep 0.5 --z 1 -- --methods gbfs --splits 5 \\
        --tag s21_rfe50z1
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np


def eliminating(rank, k, keep, z):
    """A ``rank_by_heldout`` that eliminates: ``rank(pool) -> (saving, se, trees)`` with
    saving and se ndarrays of shape (n_features,) float64, read at the pool's features.

    Returns ``ranked(pool) -> (saving, se, trees)``: each survivor's saving and se from the
    last ranking it was in, every eliminated feature's saving ``-1e12 * (100 - step)`` (below
    every survivor, a later step higher) and se 0, 0 elsewhere, and the trees of every
    ranking summed.
    """

    def ranked(pool):
        current = [int(f) for f in pool]
        eliminated, trees, step = {}, 0, 0
        while True:
            saving, se, t = rank(current)
            trees += t
            n_keep = max(k, math.ceil(keep * len(current)))
            if n_keep >= len(current):
                break
            bound = saving - z * se
            order = sorted(current, key=lambda f: (-bound[f], current.index(f)))
            for f in order[n_keep:]:
                eliminated[f] = -1e12 * (100 - step)
            current = order[:n_keep]
            step += 1
            if len(current) <= k:  # the k are chosen: no ranking fits to order them again
                break
        out_saving, out_se = np.zeros_like(saving), np.zeros_like(se)
        out_saving[current], out_se[current] = saving[current], se[current]
        for f, v in eliminated.items():
            out_saving[f] = v
        return out_saving, out_se, trees

    return ranked


def install(keep, z):
    """Patch gpufs's exact k (this process only) to rank its pool by elimination."""
    import gpufs.selectors._exact_k as ek

    original_rank, original_fit = ek.rank_by_heldout, ek.fit_exact_k
    k_of_fit = {}

    def fit_exact_k(setup, k, *args, **kwargs):
        k_of_fit["k"] = k
        return original_fit(setup, k, *args, **kwargs)

    def rank_by_heldout(setup, heldout, mu, pool, seed):
        def rank(current):
            return original_rank(setup, heldout, mu, current, seed)

        return eliminating(rank, k_of_fit["k"], keep, z)(pool)

    ek.rank_by_heldout = rank_by_heldout
    for module in list(sys.modules.values()):  # the modules that imported fit_exact_k by name
        if getattr(module, "fit_exact_k", None) is original_fit:
            module.fit_exact_k = fit_exact_k


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)  # ours before it, the runner's after
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=float, default=0.5, help="share kept at each step")
    ap.add_argument("--z", type=float, default=2.0, help="standard errors off the saving")
    args = ap.parse_args(argv[:cut])
    import bench_quality
    import gpufs.selectors.gbfs  # noqa: F401  (imports fit_exact_k by name: patched below)

    install(args.keep, args.z)
    bench_quality.main(argv[cut + 1 :])


if __name__ == "__main__":
    main()
