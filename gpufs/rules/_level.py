"""The decisions of one tree level, written once and compiled for both devices.

Owns the rule that turns the split search's per-node results into the level's splits: which
candidate each node takes (its best split, or its best split on the features already used
when the feature budget is spent), which nodes become leaves, and which features enter Omega.
The CPU backend compiles these functions with ``numba.njit``; the GPU backend compiles the
same functions with ``numba.cuda.jit(device=True)`` and runs them in a one-thread kernel, so
both devices decide identically (like ``gpufs.rules._gain`` for the gain formula).

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

import math

#: ``choice`` codes written by ``decide_level``.
LEAF = 0
TAKE_BEST = 1
TAKE_FALLBACK = 2


def best_over_features(k, feats, n_feats, allowed, used, pf_score):
    """(best feature over ``allowed``, its score, best over ``used``, its score) of slot k.

    ``pf_score`` (n_slots, n_features) float64 is each feature's best score (-inf: none);
    ``feats[:n_feats]`` (int32, increasing) are the features whose scores were computed. A
    feature of -1 means no valid candidate. Strict ``>`` in increasing feature order: ties go
    to the lowest feature.
    """
    b_f = -1
    b_s = -math.inf
    u_f = -1
    u_s = -math.inf
    for i in range(n_feats):
        f = feats[i]
        s = pf_score[k, f]
        if allowed[f] and s > b_s:
            b_s = s
            b_f = f
        if used[f] and s > u_s:
            u_s = s
            u_f = f
    return b_f, b_s, u_f, u_s


def decide_level(
    n_slots,
    best_f,
    best_s,
    fb_f,
    fb_s,
    used,
    admitted_now,
    budget,
    min_split_gain,
    choice,
    admitted,
):
    """Decide every slot of a level, in slot (= node) order; returns how many features entered.

    ``best_f`` / ``best_s`` and ``fb_f`` / ``fb_s`` (n_slots,): the best and the best-on-Omega
    candidate of each slot (``best_over_features``). ``used`` (n_features,) bool: Omega at the
    level's start; ``admitted_now`` (n_features,) bool, all False on entry, marks the features
    this level admits; ``budget``: admissions still allowed (< 0: unlimited). Writes
    ``choice[s]`` (LEAF, TAKE_BEST or TAKE_FALLBACK) and the admitted features, in order, to
    ``admitted[:returned count]``.
    """
    n_adm = 0
    for s in range(n_slots):
        f = best_f[s]
        score = best_s[s]
        c = TAKE_BEST
        if f >= 0 and budget >= 0 and not used[f] and not admitted_now[f] and n_adm >= budget:
            f = fb_f[s]
            score = fb_s[s]
            c = TAKE_FALLBACK
        if f < 0 or not (score > min_split_gain):
            choice[s] = LEAF
            continue
        if not used[f] and not admitted_now[f]:
            admitted_now[f] = True
            admitted[n_adm] = f
            n_adm += 1
        choice[s] = c
    return n_adm
