"""ControlBurn's fill of a short selection (``selection_filled_``).

Owns the rule that makes ``n_features_to_select = k`` return k features when the lasso's
selection holds fewer: the forest covers fewer than k features (out-of-bag pruning,
``oob_prune``, removes the splits that do not hold up on the rows a tree's bootstrap left out,
and with them their columns), or no lambda, not even 0, selects more. The places left go
first to the forest's other split features by importance, then to the features only pruned
splits used, by those splits' out-of-bag saving: the squared error a split saved on rows it
did not see, which a noise split does not earn the way it earns its in-bag gain. The whole
rule is in :func:`fill_candidates`.
"""

from __future__ import annotations

import numpy as np

from ._near_copies import NEAR_COPY

__all__ = ["fill_candidates"]

#: How many candidates past the places left the near-copy check looks at (their correlation
#: matrix is one pass over the rows).
_NEAR_COPY_WINDOW = 8


def fill_candidates(
    selected,
    n_fill,
    covered,
    forest_importance,
    pruned_splits=None,
    pruned_saving=None,
    corr_of=None,
):
    """The features that fill a short selection, best first.

    The places left go, in this order, to (1) the other features the forest's kept splits
    use, by their importance with every tree at weight 1 (the near-copy rule's ranking of the
    forest's features, ``_near_copies``); (2) the features only pruned splits used, by the
    sum of those splits' own out-of-bag savings (``gpufs.forest._prune.PruneResult``). Ties go
    to the lower index; a feature no tree split on, even before pruning, is never chosen.
    With ``corr_of``, a candidate that is a near-copy (absolute correlation >= 0.9) of a
    feature already chosen goes after every other candidate, as the near-copy rule keeps one
    feature per group (the check looks at the best ``n_fill + 8`` candidates: one
    correlation matrix, one pass over the rows).

    Parameters
    ----------
    selected : sequence of int
        The selection so far.
    n_fill : int >= 0
        Places left.
    covered : ndarray of shape (n_features,), bool
        The features the forest's (pruned) trees split on.
    forest_importance : ndarray of shape (n_features,), float64
        Each feature's importance with every tree at weight 1.
    pruned_splits : ndarray of shape (n_features,), int64, or None
        Splits out-of-bag pruning removed, per feature (``Forest.pruned_splits``; None: the
        forest was not pruned).
    pruned_saving : ndarray of shape (n_features,), float64, or None
        The sum of those splits' out-of-bag savings (``Forest.pruned_saving``).
    corr_of : callable or None, default=None
        ``corr_of(features)``: the absolute correlation matrix of those columns.

    Returns
    -------
    list of int
        At most ``n_fill`` features, none of ``selected``.
    """
    if n_fill <= 0:
        return []
    taken = {int(f) for f in selected}
    covered = np.asarray(covered, bool)
    imp = np.asarray(forest_importance, np.float64)
    kept = [f for f in np.flatnonzero(covered).tolist() if f not in taken]
    kept.sort(key=lambda f: (-imp[f], f))
    pruned = []
    if pruned_splits is not None:
        saving = np.asarray(pruned_saving, np.float64)
        only = (np.asarray(pruned_splits) > 0) & ~covered
        pruned = [f for f in np.flatnonzero(only).tolist() if f not in taken]
        pruned.sort(key=lambda f: (-saving[f], f))
    ranked = kept + pruned
    if corr_of is None or not ranked:
        return ranked[:n_fill]
    window = ranked[: n_fill + _NEAR_COPY_WINDOW]
    base = [int(f) for f in selected]
    corr = np.asarray(corr_of(base + window), np.float64)
    chosen_pos = list(range(len(base)))  # positions in base + window
    waiting = []
    for i in range(len(base), len(base) + len(window)):
        if len(chosen_pos) - len(base) == n_fill:
            break
        if chosen_pos and (corr[i, chosen_pos] >= NEAR_COPY).any():
            waiting.append(i)
        else:
            chosen_pos.append(i)
    out = [window[i - len(base)] for i in chosen_pos[len(base) :]]
    # the near-copies go last, after the candidates past the window (not checked)
    rest = ranked[len(window) :] + [window[i - len(base)] for i in waiting]
    return out + rest[: n_fill - len(out)]
