"""ControlBurn's near-copy rule: k different features, not copies of one.

Owns what ControlBurn does when the k features of its lasso hold near-copies, two columns
whose absolute Pearson correlation is at least ``NEAR_COPY`` (0.9). A near-copy of a kept
feature brings almost nothing new, yet the lasso often keeps two copies of a strong group
before a weaker group enters (the trees of the strong group are the ones that fit first). Then
the lasso is asked for a pool of ``POOL_FACTOR * k`` features (3 k, at most the forest's
coverage), the pool's near-copies are grouped (greedily, most important first: a feature joins
the first group whose leader it is a near-copy of), and the k groups of largest total
importance are kept, each by its most important feature; with fewer than k groups the rest are
the most important remaining pool features. The pool is the plain lasso's (no reweighting:
the grouping does its work), searched coarsely. Measured on planted groups in
``bench/results/quality_*`` (``docs/guide/controlburn.rst``).
"""

from __future__ import annotations

import numpy as np

from .._device import namespace_of, to_host

__all__ = [
    "NEAR_COPY",
    "POOL_BISECT_RTOL",
    "POOL_FACTOR",
    "POOL_LAMBDA_MIN_RATIO",
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


def choose_k(features, importance, corr, k, n_pool=None):
    """The k features of a pool, one per group of near-copies (module docstring).

    Parameters
    ----------
    features : sequence of int
        The pool, then (from position ``n_pool`` on) further candidates in the order they
        are preferred: features the pool's lasso did not keep, taken only when the pool
        holds fewer than k groups.
    importance : ndarray of shape (n_features,)
        Every feature's importance in the pool's solution (ranks the pool).
    corr : ndarray of shape (len(features), len(features))
        ``abs_correlation`` of ``features``.
    k : int >= 1
    n_pool : int or None, default=None
        How many of ``features`` are the pool (None: all).

    Returns
    -------
    chosen : list of int
        k features (fewer if there are fewer candidates), most important group first: one per
        group while groups last; a second member of a group only when every group and every
        candidate outside the groups is taken.
    merged : list of list of int
        The groups of more than one feature, each leader first.
    """
    features = [int(f) for f in features]
    n_pool = len(features) if n_pool is None else int(n_pool)
    order = sorted(range(n_pool), key=lambda i: (-importance[features[i]], features[i]))
    groups = []  # [leader position, member positions, total importance]

    def group_of(i):
        return next((g for g in groups if corr[i, g[0]] >= NEAR_COPY), None)

    for i in order:
        g = group_of(i)
        if g is not None:
            g[1].append(i)
            g[2] += float(importance[features[i]])
        else:
            groups.append([i, [i], float(importance[features[i]])])
    groups.sort(key=lambda g: (-g[2], features[g[0]]))
    chosen = [g[0] for g in groups[:k]]
    # Fewer groups than k: the candidates outside the pool, each unless it is a near-copy
    # of a group already there (it then joins that group).
    for i in range(n_pool, len(features)):
        g = group_of(i)
        if g is not None:
            g[1].append(i)
        elif len(chosen) < k:
            groups.append([i, [i], 0.0])
            chosen.append(i)
    # Only then a second member of a group (the most important first).
    copies = [i for i in order + list(range(n_pool, len(features))) if i not in chosen]
    chosen += copies[: k - len(chosen)]
    return (
        [features[i] for i in chosen],
        [[features[i] for i in g[1]] for g in groups if len(g[1]) > 1],
    )
