"""Plots of fitted gpufs selectors (matplotlib, imported lazily inside each function).

Owns the figures of fitted selectors only; it reads fitted attributes and never refits. Text
is placed by its measured size (``gpufs._path_figure``, which also draws the paths), never by
a count of ticks.
"""

from __future__ import annotations

import numpy as np

from ._path_figure import draw_paths, set_tick_labels, short_label

__all__ = [
    "plot_pool_ranking",
    "plot_selection_frequency",
    "plot_selection_path",
    "plot_stagewise",
]


def _check_fitted(estimator, plot):
    """sklearn's NotFittedError (a ValueError) for an estimator that was never fitted."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(
        estimator, msg=f"{plot} needs a fitted %(name)s: call fit first (it was never fitted)."
    )


def _feature_labels(estimator):
    from .path import feature_names

    return feature_names(estimator)


def plot_selection_path(*paths, ax=None, validation=True, label_features=True):
    """Error against the number of selected features, for any gpufs family.

    The curve of Xu et al., "Gradient Boosted Feature Selection" (KDD 2014), Figure 3, and of
    ControlBurn's k-path (Liu, Xie, Udell, KDD 2021): one line per path, training loss solid
    and validation loss dashed in the same colour. With one path, each x tick also names the
    feature that entered there (names when the input had column names).

    Paths whose losses differ (``SelectionPath.loss_name``: GBFS's boosting log-loss, a
    stagewise cost, ControlBurn's lasso loss, ...) are not comparable on one scale: each loss
    gets its own axes, one above the other, sharing the x axis.

    Parameters
    ----------
    *paths : fitted gpufs selectors, ``gpufs.path.SelectionPath`` objects, or ``mu_path``
        results (lists of ``PathPoint``), in any mix; at least one.
    ax : matplotlib Axes, sequence of Axes, or None
        None: a new figure with ``constrained_layout`` (labels are sized to fit), with one
        axes per distinct loss. Else one Axes per distinct loss, in the order the losses
        first appear among ``paths``; a single Axes for paths of several losses raises a
        ValueError.
    validation : bool, default=True
        Draw the validation loss where the path has one.
    label_features : bool, default=True
        With a single path, write the entering feature under each tick.

    Returns
    -------
    matplotlib Axes, or a list of Axes (one per loss) when the losses differ
    """
    from .path import PathPoint, SelectionPath, points_path, selection_path

    if not paths:
        raise ValueError("plot_selection_path needs at least one path or fitted selector.")
    resolved = []
    for p in paths:
        if isinstance(p, SelectionPath):
            resolved.append(p)
        elif isinstance(p, (list, tuple)) and p and all(isinstance(q, PathPoint) for q in p):
            resolved.append(points_path(list(p)))
        else:
            resolved.append(selection_path(p))
    return draw_paths(resolved, ax, validation, label_features)


def plot_stagewise(estimator, ax=None):
    """Cost per round and the learned weights of a fitted stagewise estimator.

    Like the paper's figures (Machine Learning Refined, sec. 9.6): the top panel is the cost
    after each round, round 0 being the bias alone and round m labelled with the feature added
    there (plus the validation cost when a validation set was used); the bottom panel shows the
    standardized weight of each selected feature, in order of selection (one bar per class for a
    multiclass one-vs-rest model).

    Parameters
    ----------
    estimator : fitted ``StagewiseRegressor`` or ``StagewiseClassifier`` (anything with
        ``cost_history_``, ``selected_features_``, ``standardized_coef_``).
    ax : None, one matplotlib Axes, or a sequence of two Axes
        None: a new figure with two panels. One Axes: the cost panel only. Two: cost, weights.

    Returns
    -------
    list of the Axes drawn on.
    """
    import matplotlib.pyplot as plt

    _check_fitted(estimator, "plot_stagewise")
    for attr in ("cost_history_", "selected_features_", "standardized_coef_"):
        if not hasattr(estimator, attr):
            raise ValueError(
                f"plot_stagewise needs a fitted stagewise estimator; "
                f"{type(estimator).__name__} has no attribute {attr!r} "
                "(call fit first)."
            )
    if ax is None:
        _, axes = plt.subplots(2, 1, figsize=(8, 6), constrained_layout=True)
        axes = list(axes)
    elif isinstance(ax, (list, tuple, np.ndarray)):
        axes = list(np.ravel(ax))
        if len(axes) not in (1, 2):
            raise ValueError(f"ax must be one Axes or a sequence of two; got {len(axes)}.")
    else:
        axes = [ax]

    labels = _feature_labels(estimator)
    sel = np.asarray(estimator.selected_features_, dtype=int)
    rounds = np.arange(len(estimator.cost_history_))
    ticks = ["bias"] + [labels[j] for j in sel]  # shortened around an ellipsis when long

    a0 = axes[0]
    a0.plot(rounds, estimator.cost_history_, "o-", color="k", label="training cost")
    val = getattr(estimator, "validation_cost_history_", None)
    if val is not None:
        a0.plot(rounds, val, "s--", color="tab:orange", label="validation cost")
        a0.legend()
    a0.set_xticks(rounds)
    a0.set_xlabel("round (feature added)")
    a0.set_ylabel("cost")
    a0.set_title("stagewise cost history")

    if len(axes) > 1:
        a1 = axes[1]
        coef = np.atleast_2d(np.asarray(estimator.standardized_coef_))  # (n_models, d)
        n_models = coef.shape[0]
        x = np.arange(len(sel))
        width = 0.8 / n_models
        classes = getattr(estimator, "classes_", None)
        for k in range(n_models):
            label = None
            if n_models > 1 and classes is not None:
                label = f"class {classes[k]}"
            a1.bar(x + (k - (n_models - 1) / 2) * width, coef[k, sel], width=width, label=label)
        a1.axhline(0.0, color="k", linewidth=0.8)
        a1.set_xticks(x)
        a1.set_ylabel("weight (standardized)")
        a1.set_title("learned weights, in order of selection")
        if n_models > 1:
            a1.legend()
    # labels last, once every panel has its titles and legends: sized by their width
    set_tick_labels(a0, [short_label(t) for t in ticks], [short_label(t, 24) for t in ticks])
    if len(axes) > 1:
        set_tick_labels(
            axes[1],
            [short_label(labels[j]) for j in sel],
            [short_label(labels[j], 24) for j in sel],
        )
    return axes


def plot_selection_frequency(estimator, ax=None, top=None):
    """Selection frequency against rank, for a GBFS model fitted with ``stability_rounds``.

    Stability selection's evidence (Meinshausen and Buhlmann, "Stability selection", Journal
    of the Royal Statistical Society B, 2010): one bar per feature, ranked by how often the
    refits on half of the rows chose it, the k selected features in colour and the rest grey,
    with a line after rank k. Ties are ranked by the pool fit's gain, as the selection ranks
    them.

    Parameters
    ----------
    estimator : fitted ``GBFSClassifier`` or ``GBFSRegressor``
        Fitted with ``n_features_to_select`` and ``stability_rounds`` > 0.
    ax : matplotlib Axes or None
        None: a new figure with ``constrained_layout``.
    top : int or None, default=None
        Bars to draw: the ``top`` best ranked; None: every feature chosen at least once, and
        at least the k selected.

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt

    _check_fitted(estimator, "plot_selection_frequency")
    freq = getattr(estimator, "selection_frequency_", None)
    if freq is None:
        name = type(estimator).__name__
        if not hasattr(estimator, "stability_rounds"):
            raise ValueError(
                f"{name} has no selection frequencies: they come from GBFS's stability_rounds."
            )
        if not getattr(estimator, "stability_rounds", 0):
            raise ValueError(
                f"{name} has no selection frequencies: fit it with "
                "n_features_to_select and stability_rounds > 0."
            )
        raise ValueError(
            f"{name} has no selection frequencies: stability_rounds="
            f"{estimator.stability_rounds} refits only with a number of features to select, "
            f"and n_features_to_select={estimator.n_features_to_select!r}"
            f"{' with tol' if estimator.n_features_to_select == 'auto' else ''} gives none. "
            "Set n_features_to_select to a number."
        )
    freq = np.asarray(freq, dtype=np.float64)
    gains = np.zeros_like(freq)
    pool = getattr(estimator, "selection_pool_", None) or {}
    gains[np.asarray(pool.get("features", []), dtype=np.int64)] = pool.get("gain", [])
    order = np.lexsort((-gains, -freq))  # frequency first, gain breaks ties
    chosen = set(np.asarray(estimator.selected_features_).tolist())
    k = len(chosen)
    n = max(k, int((freq > 0).sum())) if top is None else int(top)
    order = order[: max(1, n)]
    labels = _feature_labels(estimator)
    if ax is None:
        _, ax = plt.subplots(
            figsize=(max(5.0, 0.35 * len(order) + 2.0), 3.6), constrained_layout=True
        )
    x = np.arange(1, len(order) + 1)
    colors = ["tab:blue" if f in chosen else "0.7" for f in order.tolist()]
    ax.bar(x, freq[order], color=colors)
    if k < len(order):
        ax.axvline(k + 0.5, color="k", linestyle="--", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels([short_label(labels[f]) for f in order], rotation=90, fontsize=8)
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("rank")
    ax.set_ylabel("selection frequency")
    n_refits = getattr(estimator, "stability_rounds", None)
    ax.set_title(f"selected in how many of {n_refits} half-row refits (k = {k} in colour)")
    return ax


def plot_pool_ranking(estimator, ax=None, top=None):
    """Exact k's held-out evidence, for a GBFS model fitted with ``n_features_to_select``.

    One point per pool feature (``selection_pool_``), in the order exact k ranked the pool:
    what the feature saves on rows the ranking fits did not see (its column permuted; the
    model's loss there rises by that much: ``selection_pool_["heldout_gain"]``), with a bar
    of two standard errors below and above. The ranking reads each bar's lower end, the
    lower confidence bound, per unit of ``feature_costs``. The k chosen in colour and the
    rest grey, a line after rank k, and the zero line: a bar across it is no evidence that
    the feature saves anything on new rows, and among such features the bound prefers the
    ones whose saving is steady (few cut points) over the ones whose saving swings. See the
    user guide's section on exact k.

    Parameters
    ----------
    estimator : fitted ``GBFSClassifier`` or ``GBFSRegressor``
        Fitted with ``n_features_to_select`` and ``pool_ranking="heldout"`` (the default).
    ax : matplotlib Axes or None
        None: a new figure with ``constrained_layout``.
    top : int or None, default=None
        Points to draw: the ``top`` best ranked; None: every pool feature.

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt

    from .selectors._exact_k import HELDOUT_Z

    _check_fitted(estimator, "plot_pool_ranking")
    name = type(estimator).__name__
    pool = getattr(estimator, "selection_pool_", None)
    if pool is None:
        raise ValueError(
            f"{name} has no ranked pool: it comes from a fit with n_features_to_select set "
            "to a number (exact k)."
        )
    if pool.get("heldout_gain") is None:
        why = (
            "pool_ranking='gain'"
            if getattr(estimator, "pool_ranking", "gain") == "gain"
            else "the held-out ranking could not run: too few rows, or folds whose rows all "
            "weigh 0, as the fit warned"
        )
        raise ValueError(
            f"{name}'s pool was ranked by training gain ({why}): there are no held-out "
            "savings to draw. selection_pool_['gain'] holds the gains."
        )
    feats = np.asarray(pool["features"], dtype=np.int64)
    saving = np.asarray(pool["heldout_gain"], dtype=np.float64)
    se = np.asarray(pool["heldout_se"], dtype=np.float64)
    chosen = {int(f) for f in pool["chosen"]}
    place = {f: i for i, f in enumerate(feats.tolist())}
    order = [place[int(f)] for f in pool["ranked"]]  # as the fit ranked them
    order = order[: max(1, int(top))] if top is not None else order
    labels = _feature_labels(estimator)
    if ax is None:
        _, ax = plt.subplots(
            figsize=(max(5.0, 0.35 * len(order) + 2.0), 3.6), constrained_layout=True
        )
    x = np.arange(1, len(order) + 1)
    k = len(chosen)
    for xi, i in zip(x, order):
        color = "tab:blue" if int(feats[i]) in chosen else "0.6"
        ax.errorbar(xi, saving[i], yerr=HELDOUT_Z * se[i], fmt="o", color=color, capsize=3)
    ax.axhline(0.0, color="k", linewidth=0.8)
    if k < len(order):
        ax.axvline(k + 0.5, color="k", linestyle="--", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels([short_label(labels[int(feats[i])]) for i in order], rotation=90, fontsize=8)
    ax.set_xlabel("rank")
    ax.set_ylabel("held-out saving")
    ax.set_title(f"held-out saving, +/- {HELDOUT_Z:g} s.e. (k = {k} in colour)")
    return ax
