"""Planted noise of every type (issue 35): tables where some columns carry the signal and
others are noise of a kind that a greedy split search favours, for the tests and
``bench/bench_quality.py``.

Every generator returns ``(X, y, planted)``: X a pandas table, y the target, ``planted`` the
names of the signal columns. A selection puts "noise ahead of a signal" when it holds a noise
column while it misses a planted one (:func:`noise_ahead`).

* :func:`churn`: the churn-like table of the issue. A binary target from tenure, monthly
  charges, a 3-level ``plan`` and a 5-level ``region``; beside them a 40-level random text
  column ``agent`` and three normal noise columns.
* :func:`noise_categories`: three binary signal columns beside categorical noise columns of
  10, 40 and 200 levels (regression, or binary with ``task="clf"``).
* :func:`continuous_noise`: three binary signal columns beside eight continuous noise columns.
* :func:`integer_ids`: three binary signals beside integer noise columns of many distinct
  values (a row ID, counts of up to 500).
* :func:`churn_training_rows`: :func:`churn`'s training split as the ControlBurn checks fit
  it (text columns as category codes).
* :func:`exact_fill`: eight step signals and no noise in y, beside four noise columns: a
  short model splits on some of the eight only (exact k's fill).
"""

import numpy as np

FAMILIES = ("churn", "noise_categories", "continuous_noise", "integer_ids", "exact_fill")


def _levels(prefix, n):
    return np.array([f"{prefix}{i:03d}" for i in range(n)], dtype=object)


def _binary_target(rng, logit):
    return (rng.random(logit.shape[0]) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)


def churn(seed, n=3000):
    """The issue's churn-like table (binary target); planted: tenure, charges, plan, region."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    tenure = rng.uniform(0, 72, n)
    charges = rng.normal(70, 20, n)
    plan = rng.integers(0, 3, n)
    region = rng.integers(0, 5, n)
    logit = (
        -0.03 * (tenure - 36)
        + 0.015 * (charges - 70)
        + np.array([-0.5, 0.0, 0.5])[plan]
        + np.array([-0.4, -0.2, 0.0, 0.2, 0.4])[region]
    )
    X = pd.DataFrame(
        {
            "tenure": tenure,
            "charges": charges,
            "plan": _levels("plan", 3)[plan],
            "region": _levels("region", 5)[region],
            "agent": _levels("agent", 40)[rng.integers(0, 40, n)],
        }
    )
    for i in range(3):
        X[f"noise{i}"] = rng.normal(size=n)
    return X, _binary_target(rng, logit), ("tenure", "charges", "plan", "region")


def _binary_signals(rng, n, task, strength=(0.6, 0.45, 0.3)):
    s = rng.integers(0, 2, (n, 3)).astype(np.float64)
    f = s @ np.array(strength)
    if task == "clf":
        return s, _binary_target(rng, 2.0 * (f - f.mean()))
    return s, f + rng.normal(size=n)


def noise_categories(seed, n=3000, task="reg"):
    """Binary signals b0, b1, b2 beside categorical noise of 10, 40 and 200 levels."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    s, y = _binary_signals(rng, n, task)
    X = pd.DataFrame({f"b{i}": s[:, i] for i in range(3)})
    for lv in (10, 40, 200):
        X[f"cat{lv}"] = _levels("L", lv)[rng.integers(0, lv, n)]
    return X, y, ("b0", "b1", "b2")


def continuous_noise(seed, n=3000, task="reg"):
    """Binary signals b0, b1, b2 beside eight continuous noise columns."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    s, y = _binary_signals(rng, n, task)
    X = pd.DataFrame({f"b{i}": s[:, i] for i in range(3)})
    for i in range(8):
        X[f"noise{i}"] = rng.normal(size=n)
    return X, y, ("b0", "b1", "b2")


def integer_ids(seed, n=3000, task="reg"):
    """Binary signals b0, b1, b2 beside integer noise: a row ID and counts of up to 500."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    s, y = _binary_signals(rng, n, task)
    X = pd.DataFrame({f"b{i}": s[:, i] for i in range(3)})
    X["row_id"] = rng.permutation(n).astype(np.float64)
    for i in range(3):
        X[f"count{i}"] = rng.integers(0, 500, n).astype(np.float64)
    return X, y, ("b0", "b1", "b2")


def exact_fill(seed, n=2000):
    """Exact k where the model splits on fewer than k columns: y an exact sum of steps of
    eight columns s0..s7 (weights 1 to 8, no noise), beside four normal noise columns n0..n3,
    each of which still has a split of positive gain. 30 trees of depth 2 at mu = 0 split on
    six of the eight only (issue 35: "k = 10 returned 8 at mu = 0")."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    S = rng.random((n, 8))
    y = (S > 0.5) @ (1.0 + np.arange(8.0))
    X = pd.DataFrame(S, columns=[f"s{i}" for i in range(8)])
    for i in range(4):
        X[f"n{i}"] = rng.normal(size=n)
    return X, y, tuple(f"s{i}" for i in range(8))


def churn_training_rows(seed):
    """:func:`churn`'s table split as ``bench/bench_quality.py`` splits it (70 % for training,
    stratified, seeded by ``seed``), its text columns as category codes: ``(X_train (float64),
    y_train, column names, text column indices, planted)``."""
    import pandas as pd
    from sklearn.model_selection import train_test_split

    X, y, planted = churn(seed)
    cols = list(X.columns)
    text = [j for j, c in enumerate(cols) if not pd.api.types.is_numeric_dtype(X[c])]
    X = X.assign(**{cols[j]: pd.factorize(X[cols[j]])[0].astype(np.float64) for j in text})
    Xtr, _, ytr, _ = train_test_split(
        X.to_numpy(np.float64), y, test_size=0.3, random_state=seed, stratify=y
    )
    return Xtr, ytr, cols, text, planted


def noise_ahead(selected, planted):
    """Whether a selection (column names) holds a noise column while it misses a planted
    one."""
    sel = set(selected)
    return bool(sel - set(planted)) and not set(planted) <= sel
