"""Plots of fitted gpufs selectors (matplotlib, imported lazily inside each function).

Owns the figures only; it reads fitted attributes and never refits. Text is placed by its
measured size (the renderer's extent of each label), never by a count of ticks: tick labels
stay horizontal while each fits its share of the axis and turn upright otherwise, and point
annotations take the first nearby spot that overlaps no other annotation.
"""
from __future__ import annotations

import numpy as np

__all__ = ["plot_selection_frequency", "plot_selection_path", "plot_stagewise"]


def _feature_labels(estimator):
    from .path import feature_names

    return feature_names(estimator)


def _extents(texts, renderer):
    return [t.get_window_extent(renderer) for t in texts if t.get_visible() and t.get_text()]


def _any_overlap(boxes, pad=1.0):
    """Whether two of the display-space boxes overlap (by more than ``pad`` pixels)."""
    boxes = sorted(boxes, key=lambda b: b.x0)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if b.x0 >= a.x1 - pad:
                break
            if min(a.y1, b.y1) - max(a.y0, b.y0) > pad:
                return True
    return False


def _set_tick_labels(ax, flat, upright=None, fontsize=8):
    """x tick labels sized by their width: ``flat`` horizontal when no two overlap, else
    ``upright`` (default ``flat``; an upright label has room for a longer name) rotated 90
    degrees, in smaller type if even those collide. Returns the angle."""
    fig = ax.figure
    labels = flat
    ax.set_xticklabels(labels, fontsize=fontsize, rotation=0, ha="center")
    fig.draw_without_rendering()  # run the layout, so the axis has its final width
    renderer = fig.canvas.get_renderer()
    if not _any_overlap(_extents(ax.get_xticklabels(), renderer)):
        return 0
    labels = flat if upright is None else upright
    for size in (fontsize, fontsize - 1, fontsize - 2):
        ax.set_xticklabels(labels, fontsize=size, rotation=90, ha="center", va="top",
                           rotation_mode="default")
        fig.draw_without_rendering()
        if not _any_overlap(_extents(ax.get_xticklabels(), renderer)):
            break
    return 90


#: Where an annotation may go, in points from its point: beside, above, below, further out.
_SPOTS = [(4, 4, "left", "bottom"), (4, -4, "left", "top"), (-4, 4, "right", "bottom"),
          (-4, -4, "right", "top"), (0, 8, "center", "bottom"), (0, -8, "center", "top"),
          (4, 14, "left", "bottom"), (4, -14, "left", "top"), (-4, 14, "right", "bottom"),
          (-4, -14, "right", "top"), (0, 22, "center", "bottom"), (0, -22, "center", "top")]


def _annotate_apart(ax, points, texts, fontsize=7):
    """Annotate each (x, y) of ``points`` with its text at the first of ``_SPOTS`` where the
    text stays inside the axes and overlaps no annotation placed before it."""
    fig = ax.figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    placed = []
    for (x, y), text in zip(points, texts):
        note = None
        for dx, dy, ha, va in _SPOTS:
            if note is not None:
                note.remove()
            note = ax.annotate(text, (x, y), fontsize=fontsize, textcoords="offset points",
                               xytext=(dx, dy), ha=ha, va=va)
            box = note.get_window_extent(renderer)
            fits = (box.x0 >= inside.x0 and box.x1 <= inside.x1 and box.y0 >= inside.y0
                    and box.y1 <= inside.y1)
            if fits and not _any_overlap(placed + [box]):
                break
        else:  # no free spot: keep the first one
            note.remove()
            dx, dy, ha, va = _SPOTS[0]
            note = ax.annotate(text, (x, y), fontsize=fontsize, textcoords="offset points",
                               xytext=(dx, dy), ha=ha, va=va)
            box = note.get_window_extent(renderer)
        placed.append(box)


def _short(name, width=18):
    """A tick label that fits: long names keep their start and their end (where column
    families usually differ) around an ellipsis."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "\N{HORIZONTAL ELLIPSIS}" + name[-(width - 1 - head):]


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
    import matplotlib.pyplot as plt

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
    losses = list(dict.fromkeys(p.loss_name for p in resolved))
    if ax is None:
        _, axes = plt.subplots(len(losses), 1, figsize=(7, 1.2 + 3.0 * len(losses)),
                               sharex=True, squeeze=False, constrained_layout=True)
        axes = list(axes[:, 0])
    else:
        axes = list(np.ravel(ax)) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
        if len(axes) != len(losses):
            raise ValueError(
                f"these paths have {len(losses)} different losses ({', '.join(losses)}), "
                f"which one scale cannot compare: pass ax=None or {len(losses)} Axes, one "
                f"per loss; got {len(axes)}.")
    ks = sorted({int(n) for p in resolved for n in p.n_features})
    one = resolved[0]
    named_ticks = label_features and len(resolved) == 1 and any(one.features)
    for a, loss in zip(axes, losses):
        notes = []
        for i, p in enumerate(resolved):
            if p.loss_name != loss:
                continue
            color = f"C{i}"  # a path keeps its colour on every axes
            train = np.asarray(p.train_loss, float)
            if np.isfinite(train).any():
                a.plot(p.n_features, train, "o-", color=color,
                       label=f"{p.label} (train)" if p.val_loss is not None else p.label)
            if validation and p.val_loss is not None:
                a.plot(p.n_features, p.val_loss, "s--", color=color,
                       label=f"{p.label} (validation)" if np.isfinite(train).any()
                       else p.label)
            notes += [((n, v), f"mu={mu:g}") for n, mu, v in
                      zip(p.n_features, p.extra.get("mu", []), p.val_loss or [])]
        a.set_xticks(ks)
        a.margins(x=0.1, y=0.12)    # room for the mu annotations at the ends
        a.set_ylabel(loss)
        if a.get_legend_handles_labels()[1]:  # paths without a label need no legend
            a.legend(fontsize=8)
        if notes:
            _annotate_apart(a, [xy for xy, _ in notes], [t for _, t in notes])
    bottom = axes[-1]
    if named_ticks:
        by_k = dict(zip(one.n_features, one.features))
        _set_tick_labels(bottom,  # "k" over "+name", or upright "k +name" on one line
                         [f"{k}" + (f"\n+{_short(by_k[k])}" if by_k.get(k) else "") for k in ks],
                         [f"{k} +{_short(by_k[k], 24)}" if by_k.get(k) else f"{k}" for k in ks])
    bottom.set_xlabel("number of selected features"
                      + (" (+ feature that entered)" if named_ticks else ""))
    return axes[0] if len(axes) == 1 else axes


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

    for attr in ("cost_history_", "selected_features_", "standardized_coef_"):
        if not hasattr(estimator, attr):
            raise ValueError(f"plot_stagewise needs a fitted stagewise estimator; "
                             f"{type(estimator).__name__} has no attribute {attr!r} "
                             "(call fit first).")
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
        coef = np.atleast_2d(np.asarray(estimator.standardized_coef_))   # (n_models, d)
        n_models = coef.shape[0]
        x = np.arange(len(sel))
        width = 0.8 / n_models
        classes = getattr(estimator, "classes_", None)
        for k in range(n_models):
            label = None
            if n_models > 1 and classes is not None:
                label = f"class {classes[k]}"
            a1.bar(x + (k - (n_models - 1) / 2) * width, coef[k, sel], width=width,
                   label=label)
        a1.axhline(0.0, color="k", linewidth=0.8)
        a1.set_xticks(x)
        a1.set_ylabel("weight (standardized)")
        a1.set_title("learned weights, in order of selection")
        if n_models > 1:
            a1.legend()
    # labels last, once every panel has its titles and legends: sized by their width
    _set_tick_labels(a0, [_short(t) for t in ticks], [_short(t, 24) for t in ticks])
    if len(axes) > 1:
        _set_tick_labels(axes[1], [_short(labels[j]) for j in sel],
                         [_short(labels[j], 24) for j in sel])
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

    freq = getattr(estimator, "selection_frequency_", None)
    if freq is None:
        raise ValueError(f"{type(estimator).__name__} has no selection frequencies: fit it "
                         "with n_features_to_select and stability_rounds > 0.")
    freq = np.asarray(freq, dtype=np.float64)
    gains = np.zeros_like(freq)
    pool = getattr(estimator, "selection_pool_", None) or {}
    gains[np.asarray(pool.get("features", []), dtype=np.int64)] = pool.get("gain", [])
    order = np.lexsort((-gains, -freq))             # frequency first, gain breaks ties
    chosen = set(np.asarray(estimator.selected_features_).tolist())
    k = len(chosen)
    n = max(k, int((freq > 0).sum())) if top is None else int(top)
    order = order[:max(1, n)]
    labels = _feature_labels(estimator)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 0.35 * len(order) + 2.0), 3.6),
                             constrained_layout=True)
    x = np.arange(1, len(order) + 1)
    colors = ["tab:blue" if f in chosen else "0.7" for f in order.tolist()]
    ax.bar(x, freq[order], color=colors)
    if k < len(order):
        ax.axvline(k + 0.5, color="k", linestyle="--", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels([_short(labels[f]) for f in order], rotation=90, fontsize=8)
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("rank")
    ax.set_ylabel("selection frequency")
    n_refits = getattr(estimator, "stability_rounds", None)
    ax.set_title(f"selected in how many of {n_refits} half-row refits (k = {k} in colour)")
    return ax
