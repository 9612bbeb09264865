"""ControlBurn's near-copy rule: k different features, not copies of one.

Owns what ControlBurn does when the k features of its lasso hold near-copies, two columns
whose absolute Pearson correlation is at least ``NEAR_COPY`` (0.9): the lasso is asked for a
pool of ``POOL_FACTOR * k`` features (its plain lasso, searched coarsely), the pool's
near-copies are grouped (greedily, most important first: a feature joins the first group
whose leader it is a near-copy of), and the k groups of largest total importance with at
least ``POOL_MIN_SHARE`` (1 %) of the pool's importance are kept, each by its most important
feature. The places left go to the forest's other features grouped the same way and ranked
by the forest's importance (every tree at weight 1) summed over each group's near-copies (a
forest divides a variable's importance among its copies: Gregorutti, Michel and Saint-Pierre,
"Correlation and variable importance in random forests", Statistics and Computing 27, 2017).
Reasons and measurements: ``docs/module_notes.rst``, ``docs/guide/controlburn.rst``.
"""

from __future__ import annotations

import numpy as np

from .._device import namespace_of, to_host

__all__ = [
    "NEAR_COPY",
    "POOL_BISECT_RTOL",
    "POOL_FACTOR",
    "POOL_LAMBDA_MIN_RATIO",
    "POOL_MIN_SHARE",
    "abs_correlation",
    "choose_k",
    "column_correlation",
    "has_near_copies",
]

#: Two columns are near-copies when their absolute Pearson correlation is at least this.
NEAR_COPY = 0.9
#: The pool is this many times k.
POOL_FACTOR = 3
#: The pool's lambda bisection stops at this relative width (the k search's is 1e-7).
POOL_BISECT_RTOL = 1e-3
#: The pool's descent stops below this fraction of lambda_max (the k search's is 1e-6).
POOL_LAMBDA_MIN_RATIO = 1e-3
#: A pool group below this share of the pool's total importance is not kept on the pool's word.
POOL_MIN_SHARE = 0.01


def abs_correlation(X, features):
    """Absolute Pearson correlation of some columns (missing values at the column mean).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        numpy or cupy.
    features : sequence of int

    Returns
    -------
    ndarray of shape (n_selected, n_selected), float64, on the host
        A constant column correlates 0 with every other.
    """
    xp = namespace_of(X)
    return column_correlation(X[:, xp.asarray(np.asarray(features, dtype=np.int64))], xp)


def column_correlation(cols, xp):
    """``abs_correlation`` of all the columns of ``cols`` (n_samples, m), in the namespace
    ``xp`` (numpy, cupy, or ``dask.array``, whose result is computed): the Gram matrix of
    the centred columns, scaled by their norms.

    Parameters
    ----------
    cols : array of shape (n_samples, m)
    xp : module

    Returns
    -------
    ndarray of shape (m, m), float64, on the host
    """
    cols = cols.astype(np.float64)
    mean = xp.nanmean(cols, axis=0)
    cols = xp.where(xp.isnan(cols), mean, cols) - mean
    gram = cols.T @ cols
    if hasattr(gram, "compute"):  # dask: the one pass over the partitions
        gram = gram.compute()
    gram = np.asarray(to_host(gram), dtype=np.float64)
    norm = np.sqrt(np.maximum(np.diag(gram), 0.0))
    norm = np.where(norm > 0, norm, np.inf)
    return np.abs(gram / norm[:, None] / norm[None, :])


def has_near_copies(corr) -> bool:
    """Whether two different columns of a correlation matrix are near-copies.

    Parameters
    ----------
    corr : ndarray of shape (m, m)

    Returns
    -------
    bool
    """
    c = np.array(corr, dtype=np.float64)
    np.fill_diagonal(c, 0.0)
    return bool((c >= NEAR_COPY).any())


def pool_groups(features, importance, corr, positions=None):
    """The near-copy groups of a pool, greedily (most important first: a feature joins the
    first group whose leader it is a near-copy of), largest total importance first.

    Parameters
    ----------
    features : sequence of int
    importance : ndarray of shape (n_features,)
    corr : ndarray of shape (len(features), len(features))
        ``abs_correlation`` of ``features``.
    positions : iterable of int or None, default=None
        The positions in ``features`` to group (None: all).

    Returns
    -------
    list of [int, list of int, float]
        Each group's leader position, member positions (in ``features``) and total importance.
    """
    positions = range(len(features)) if positions is None else positions
    order = sorted(positions, key=lambda i: (-importance[features[i]], features[i]))
    groups = []
    for i in order:
        g = next((g for g in groups if corr[i, g[0]] >= NEAR_COPY), None)
        if g is not None:
            g[1].append(i)
            g[2] += float(importance[features[i]])
        else:
            groups.append([i, [i], float(importance[features[i]])])
    groups.sort(key=lambda g: (-g[2], features[g[0]]))
    return groups


def _material(groups):
    """The groups (:func:`pool_groups`) that hold at least ``POOL_MIN_SHARE`` of their total
    importance (and more than 0), in their order."""
    total = sum(g[2] for g in groups)
    return [g for g in groups if g[2] > 0 and g[2] >= POOL_MIN_SHARE * total]


def n_material_groups(features, importance, corr):
    """How many groups of a pool (:func:`pool_groups`) hold at least ``POOL_MIN_SHARE`` of the
    pool's total importance (and more than 0).

    Parameters
    ----------
    features, importance, corr
        As :func:`pool_groups`.

    Returns
    -------
    int
    """
    return len(_material(pool_groups([int(f) for f in features], importance, corr)))


def choose_k(features, importance, corr, k, n_pool=None, forest_importance=None):
    """The k features of a pool, one per group of near-copies (module docstring).

    Parameters
    ----------
    features : sequence of int
        The pool, then (from position ``n_pool`` on) further candidates: features the pool's
        lasso did not keep, taken only when the pool holds fewer than k groups of at least
        ``POOL_MIN_SHARE`` of its importance.
    importance : ndarray of shape (n_features,)
        Every feature's importance in the pool's solution (ranks the pool).
    corr : ndarray of shape (len(features), len(features))
        ``abs_correlation`` of ``features``.
    k : int >= 1
    n_pool : int or None, default=None
        How many of ``features`` are the pool (None: all).
    forest_importance : ndarray of shape (n_features,) or None, default=None
        Every feature's importance in the forest (every tree at weight 1): ranks the
        candidates for the places the pool's groups leave, summed over each group of
        near-copies (None: ``importance``).

    Returns
    -------
    chosen : list of int
        k features (fewer if there are fewer candidates): the pool's groups of at least
        ``POOL_MIN_SHARE`` of its importance (most important first), then the other
        candidates' groups by their summed forest importance, each by its leader; a second
        member of a group only when every group is taken.
    merged : list of list of int
        The groups of more than one feature, each leader first.
    """
    features = [int(f) for f in features]
    n_pool = len(features) if n_pool is None else int(n_pool)
    fimp = importance if forest_importance is None else forest_importance
    kept = _material(pool_groups(features, importance, corr, range(n_pool)))[:k]
    # The rest: every other candidate (the pool's small groups, then the features beyond it)
    # unless it is a near-copy of a kept group (it then joins that group), grouped the same
    # way by the forest's importance and ranked by the group's sum of it.
    in_kept = {i for g in kept for i in g[1]}
    loose = []
    for i in sorted(
        (i for i in range(len(features)) if i not in in_kept),
        key=lambda i: (-fimp[features[i]], features[i]),
    ):
        g = next((g for g in kept if corr[i, g[0]] >= NEAR_COPY), None)
        if g is not None:
            g[1].append(i)
        else:
            loose.append(i)
    others = pool_groups(features, fimp, corr, loose)
    chosen = [g[0] for g in kept] + [g[0] for g in others[: k - len(kept)]]
    # Only then a second member of a group (the pool's most important first).
    pool_order = sorted(range(n_pool), key=lambda i: (-importance[features[i]], features[i]))
    rest = sorted(range(n_pool, len(features)), key=lambda i: (-fimp[features[i]], features[i]))
    copies = [i for i in pool_order + rest if i not in chosen]
    chosen += copies[: k - len(chosen)]
    return (
        [features[i] for i in chosen],
        [[features[i] for i in g[1]] for g in kept + others if len(g[1]) > 1],
    )
