"""The planted categorical problem (tests and ``bench/bench_categorical.py``).

The signal is in one 30-level categorical column and two numeric columns, among many noise
columns: ``y = effect[city] + 0.5 * x1 + 0.5 * x2 + noise``, the level effects ~ N(0, 3^2).
A categorical split uses the 30 levels at once; one-hot encoded, each level is a column that
explains about a thirtieth of the categorical signal, yet more than x1 or x2 alone, so a
budget of three one-hot columns goes to three levels of the categorical and misses x1 and x2.
"""

import numpy as np

PLANTED = ("city", "x1", "x2")


def planted(n=2000, n_noise=50, n_levels=30, seed=0, frame="pandas"):
    """(X, y): X a pandas (or polars) table with the string column "city", numeric "x1",
    "x2" and ``n_noise`` normal columns "noise0", ...; y float64 (n,)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    levels = np.array([f"c{i:02d}" for i in range(n_levels)], dtype=object)
    city = rng.integers(0, n_levels, n)
    effect = 3.0 * rng.normal(size=n_levels)
    X = pd.DataFrame(rng.normal(size=(n, n_noise)), columns=[f"noise{i}" for i in range(n_noise)])
    X.insert(int(rng.integers(0, n_noise)), "x1", rng.normal(size=n))
    X.insert(int(rng.integers(0, n_noise)), "x2", rng.normal(size=n))
    X.insert(int(rng.integers(0, n_noise)), "city", levels[city])
    y = (
        effect[city]
        + 0.5 * X["x1"].to_numpy()
        + 0.5 * X["x2"].to_numpy()
        + 0.3 * rng.normal(size=n)
    )
    if frame == "polars":
        import polars as pl

        X = pl.from_pandas(X)
    return X, y


def one_hot(X):
    """X with "city" one-hot encoded (pandas): columns "city_c00", ... in place of "city"."""
    import pandas as pd

    return pd.get_dummies(X, columns=["city"], dtype=float)


def original_feature(name):
    """The planted table's column a one-hot column comes from."""
    return "city" if name.startswith("city_") else name
