"""Drawing selection paths, and placing a figure's text so that none of it overlaps.

Owns the drawing of ``gpufs.path.SelectionPath`` objects (``draw_paths``: one axes per loss,
train and validation curves, mu annotations, the entering feature under each tick) and the
text placement every gpufs figure uses: tick labels horizontal while each fits its share of
the axis and upright otherwise, point annotations at the first nearby spot that overlaps no
other. It imports no other gpufs module, so ``gpufs.path`` and ``gpufs.plotting`` can both
draw with it without importing each other; matplotlib is imported inside ``draw_paths``.
"""

from __future__ import annotations

import numpy as np


def _extents(texts, renderer):
    return [t.get_window_extent(renderer) for t in texts if t.get_visible() and t.get_text()]


def _any_overlap(boxes, pad=1.0):
    """Whether two of the display-space boxes overlap (by more than ``pad`` pixels)."""
    boxes = sorted(boxes, key=lambda b: b.x0)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if b.x0 >= a.x1 - pad:
                break
            if min(a.y1, b.y1) - max(a.y0, b.y0) > pad:
                return True
    return False


def set_tick_labels(ax, flat, upright=None, fontsize=8):
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
        ax.set_xticklabels(
            labels, fontsize=size, rotation=90, ha="center", va="top", rotation_mode="default"
        )
        fig.draw_without_rendering()
        if not _any_overlap(_extents(ax.get_xticklabels(), renderer)):
            break
    return 90


#: Where an annotation may go, in points from its point: beside, above, below, further out.
_SPOTS = [
    (4, 4, "left", "bottom"),
    (4, -4, "left", "top"),
    (-4, 4, "right", "bottom"),
    (-4, -4, "right", "top"),
    (0, 8, "center", "bottom"),
    (0, -8, "center", "top"),
    (4, 14, "left", "bottom"),
    (4, -14, "left", "top"),
    (-4, 14, "right", "bottom"),
    (-4, -14, "right", "top"),
    (0, 22, "center", "bottom"),
    (0, -22, "center", "top"),
]


def annotate_apart(ax, points, texts, fontsize=7):
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
            note = ax.annotate(
                text,
                (x, y),
                fontsize=fontsize,
                textcoords="offset points",
                xytext=(dx, dy),
                ha=ha,
                va=va,
            )
            box = note.get_window_extent(renderer)
            fits = (
                box.x0 >= inside.x0
                and box.x1 <= inside.x1
                and box.y0 >= inside.y0
                and box.y1 <= inside.y1
            )
            if fits and not _any_overlap(placed + [box]):
                break
        else:  # no free spot: keep the first one
            note.remove()
            dx, dy, ha, va = _SPOTS[0]
            note = ax.annotate(
                text,
                (x, y),
                fontsize=fontsize,
                textcoords="offset points",
                xytext=(dx, dy),
                ha=ha,
                va=va,
            )
            box = note.get_window_extent(renderer)
        placed.append(box)


def short_label(name, width=18):
    """A tick label that fits: long names keep their start and their end (where column
    families usually differ) around an ellipsis."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "\N{HORIZONTAL ELLIPSIS}" + name[-(width - 1 - head) :]


def draw_paths(resolved, ax, validation, label_features):
    """Draw selection paths (``gpufs.plotting.plot_selection_path`` after it resolved its
    arguments).

    Parameters
    ----------
    resolved : list of SelectionPath
        At least one.
    ax : matplotlib Axes, sequence of Axes, or None
        As in ``plot_selection_path``.
    validation : bool
        Draw the validation loss where a path has one.
    label_features : bool
        With a single path, write the entering feature under each tick.

    Returns
    -------
    matplotlib Axes, or a list of Axes (one per loss) when the losses differ
    """
    import matplotlib.pyplot as plt

    losses = list(dict.fromkeys(p.loss_name for p in resolved))
    if ax is None:
        _, axes = plt.subplots(
            len(losses),
            1,
            figsize=(7, 1.2 + 3.0 * len(losses)),
            sharex=True,
            squeeze=False,
            constrained_layout=True,
        )
        axes = list(axes[:, 0])
    else:
        axes = list(np.ravel(ax)) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
        if len(axes) != len(losses):
            raise ValueError(
                f"these paths have {len(losses)} different losses ({', '.join(losses)}), "
                f"which one scale cannot compare: pass ax=None or {len(losses)} Axes, one "
                f"per loss; got {len(axes)}."
            )
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
                a.plot(
                    p.n_features,
                    train,
                    "o-",
                    color=color,
                    label=f"{p.label} (train)" if p.val_loss is not None else p.label,
                )
            if validation and p.val_loss is not None:
                a.plot(
                    p.n_features,
                    p.val_loss,
                    "s--",
                    color=color,
                    label=f"{p.label} (validation)" if np.isfinite(train).any() else p.label,
                )
            notes += [
                ((n, v), f"mu={mu:g}")
                for n, mu, v in zip(p.n_features, p.extra.get("mu", []), p.val_loss or [])
            ]
        a.set_xticks(ks)
        a.margins(x=0.1, y=0.12)  # room for the mu annotations at the ends
        a.set_ylabel(loss)
        if a.get_legend_handles_labels()[1]:  # paths without a label need no legend
            a.legend(fontsize=8)
        if notes:
            annotate_apart(a, [xy for xy, _ in notes], [t for _, t in notes])
    bottom = axes[-1]
    if named_ticks:
        by_k = dict(zip(one.n_features, one.features))
        # "k" over "+name", or upright "k +name" on one line
        flat = [f"{k}" + (f"\n+{short_label(by_k[k])}" if by_k.get(k) else "") for k in ks]
        upright = [f"{k} +{short_label(by_k[k], 24)}" if by_k.get(k) else f"{k}" for k in ks]
        set_tick_labels(bottom, flat, upright)
    bottom.set_xlabel(
        "number of selected features" + (" (+ feature that entered)" if named_ticks else "")
    )
    return axes[0] if len(axes) == 1 else axes
