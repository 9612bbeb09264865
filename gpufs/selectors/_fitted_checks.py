"""Checks of a model file's fitted fields that several selector families share.

Owns the invariants between a loaded ensemble and the selection a family reports (first use,
positive split gains, importances as gain shares), the bins' ``max_bins``, the device and the
per-round validation losses, and the exact-k fill kept apart from a selection
(``selection_filled``). Each family's codec (``_gbfs_io``, ``_stagewise_io``,
``_controlburn_io``, ``_multitask_io``) calls them; the readers are ``gpufs.io._strict_json``'s.
"""

from __future__ import annotations

import numpy as np

from ..io._strict_json import (
    MAX_CLASSES,
    read_float_array,
    read_index_list,
    read_list,
    read_str,
)


def selection_and_fill(est):
    """``(selected, filled)`` lists of a fitted selector for its model file: the features it
    selected itself, then ``selection_filled_`` (the last entries of ``selected_features_``,
    empty when it has none), kept apart."""
    filled = np.asarray(getattr(est, "selection_filled_", ()), dtype=np.int64)
    selected = np.asarray(est.selected_features_)
    return selected[: selected.size - filled.size].tolist(), filled.tolist()


def read_selection_filled(f, at, n_features, selected, by):
    """The ``selection_filled`` field of a fitted object (absent in files written before it:
    none), checked to share no feature with ``selected``, which ``by`` (the model, the lasso)
    chose itself.

    Returns
    -------
    ndarray of shape (n_filled,), int64
    """
    if "selection_filled" not in f:
        return np.zeros(0, np.int64)
    filled = read_index_list(f["selection_filled"], at["selection_filled"], n_features)
    if np.intersect1d(filled, selected).size:
        at["selection_filled"].fail(f"a filled feature is also one {by} selected.")
    return filled


def check_first_use(ens, first, at):
    """``first`` (n_features,) is, per feature, the first tree that splits on it (-1: none)."""
    derived = np.full(first.shape[0], -1, dtype=np.int64)
    if ens.n_trees:
        feat = ens.stacked()["feature"]
        for t in range(ens.n_trees - 1, -1, -1):
            derived[feat[t][feat[t] >= 0]] = t
    bad = np.flatnonzero(derived != first)
    if bad.size:
        f = int(bad[0])
        by = f"tree {int(derived[f])}" if derived[f] >= 0 else "no tree"
        at[f].fail(f"feature {f} is first split on by {by}, not {int(first[f])}.")


def check_split_gains(ens, at):
    """Every split of a fitted model has a positive gain: a split is made only when its
    (penalized) gain beats ``min_split_gain`` >= 0. (A standalone ensemble, which may be
    built by hand, is not held to this.)"""
    if not ens.n_trees:
        return
    s = ens.stacked()
    bad = np.argwhere((s["feature"] >= 0) & ~(s["gain"] > 0))
    if bad.size:
        t, i = (int(x) for x in bad[0])
        at[t][i].fail(f"a split's gain must be positive, got {s['gain'][t, i].item()!r}.")


def check_importances(imp, ensembles, at):
    """Importances are each feature's share of the split gains of the trees (all zero
    without splits), as the fit computes them."""
    gains = np.zeros(imp.shape[0])
    for ens in ensembles:
        if ens.n_trees:
            s = ens.stacked()
            split = s["feature"] >= 0
            np.add.at(gains, s["feature"][split], s["gain"][split])
    total = gains.sum()
    expect = gains / total if total > 0 else gains
    if not np.allclose(imp, expect, rtol=1e-12, atol=1e-15):
        at.fail("not the trees' split gains (each feature's share of the total gain).")


def check_max_bins(est, at):
    if est.bin_mapper_.max_bins != est.max_bins:
        at["bins"]["max_bins"].fail(
            f"{est.bin_mapper_.max_bins} differs from params.max_bins {est.max_bins}."
        )


def n_outputs(est):
    """Raw-score columns: 1 for a regressor or a binary classifier, else the classes."""
    k = len(est.classes_) if hasattr(est, "classes_") else 1
    return 1 if k <= 2 else k


def read_device(v, at):
    """The device a model was fit on: "cpu" or "gpu"."""
    return read_str(v, at, {"cpu", "gpu"})


def read_loss_lists(v, at, length):
    """``evals_result``: one loss array of ``length`` per validation set."""
    read_list(v, at, max_length=MAX_CLASSES)
    return [
        read_float_array(r, at[i], (length,), lo=0.0, nonfinite=("NaN", "Infinity"))
        for i, r in enumerate(v)
    ]
