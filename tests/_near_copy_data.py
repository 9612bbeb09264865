"""Groups of near-copies whose signals differ in kind (tests and ``bench/bench_quality.py``).

Three groups of three near-copies (``z_j + N(0, 0.1^2)``, correlation about 0.99 within a
group) and six noise columns; the target depends on z_0, z_1, z_2 in one of four designs: a
main effect, an interaction only and a weak main effect (``main_inter_weak``); an
interaction-only pair and a main effect (``inter_only``); strong, medium and weak main effects
(``strong_weak``); a step, a sine and a weak line (``threshold``). A user keeps one copy of
each group.
"""

import numpy as np

DESIGNS = ("main_inter_weak", "inter_only", "strong_weak", "threshold")


def near_copy_groups(seed, design, task, m=1000, n_copies=3, noise=0.1, n_noise=6):
    """(X (m, 3 n_copies + n_noise), y, group of every column): groups 0-2 are the copies of
    z_0..z_2, the noise columns are groups 3, 4, ...; ``task`` "regression" (y = f + N(0,
    0.5^2)) or "classification" (y = 1 when f + logistic noise is above the median of f)."""
    rng = np.random.RandomState(seed)
    Z = rng.randn(m, 3)
    f = {
        "main_inter_weak": 2.0 * Z[:, 0] + 1.5 * Z[:, 0] * Z[:, 1] + 0.5 * Z[:, 2],
        "inter_only": 2.0 * Z[:, 0] * Z[:, 1] + 1.0 * Z[:, 2],
        "strong_weak": 3.0 * Z[:, 0] + 1.0 * Z[:, 1] + 0.4 * Z[:, 2],
        "threshold": 2.0 * (Z[:, 0] > 0.5) + np.sin(2 * Z[:, 1]) + 0.4 * Z[:, 2],
    }[design]
    if task == "classification":
        y = (f + rng.logistic(size=m) > np.median(f)).astype(int)
    else:
        y = f + 0.5 * rng.randn(m)
    cols = [Z[:, [j]] + noise * rng.randn(m, n_copies) for j in range(3)]
    cols.append(rng.randn(m, n_noise))
    groups = np.r_[np.repeat(np.arange(3), n_copies), np.arange(3, 3 + n_noise)]
    return np.hstack(cols), y, groups


def interaction_groups(seed, task, m=3000, n_copies=4, noise=0.1, n_noise=8):
    """Issue 35's case: three groups of ``n_copies`` near-copies of z_0..z_2 (|corr| about
    0.99) and ``n_noise`` noise columns; f = 1.5 z_0 - 1.2 z_1 + z_2 z_0 (the third group acts
    only through an interaction with the first). Returns (X, y, group of every column) as
    :func:`near_copy_groups` does."""
    rng = np.random.RandomState(seed)
    Z = rng.randn(m, 3)
    f = 1.5 * Z[:, 0] - 1.2 * Z[:, 1] + Z[:, 2] * Z[:, 0]
    if task == "classification":
        y = (f + rng.logistic(size=m) > np.median(f)).astype(int)
    else:
        y = f + 0.5 * rng.randn(m)
    cols = [Z[:, [j]] + noise * rng.randn(m, n_copies) for j in range(3)]
    cols.append(rng.randn(m, n_noise))
    groups = np.r_[np.repeat(np.arange(3), n_copies), np.arange(3, 3 + n_noise)]
    return np.hstack(cols), y, groups
