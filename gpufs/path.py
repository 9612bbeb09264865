"""Selection paths: error against the number of selected features, for every gpufs family.

Owns the one description of a path (``SelectionPath``: the features in the order they entered,
and the training / validation loss once each had entered), how it is read from each fitted
family (``selection_path``), and ``mu_path``, which refits a GBFS estimator over a sweep of
``mu`` (the error-vs-features curve of Xu, Huang, Weinberger, Zheng, "Gradient Boosted Feature
Selection", KDD 2014, Figure 3). Drawing is ``gpufs.plotting.plot_selection_path``.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone, is_classifier

from ._path_figure import draw_paths

__all__ = [
    "PathPoint",
    "SelectionPath",
    "feature_names",
    "mu_path",
    "plot_path",
    "points_path",
    "selection_path",
]


def feature_names(estimator) -> list:
    """Column names of a fitted estimator.

    Parameters
    ----------
    estimator : fitted estimator

    Returns
    -------
    list of str
        ``feature_names_in_`` when the input had them, else ``x0, x1, ...``
        (scikit-learn's convention).
    """
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    return [f"x{j}" for j in range(int(estimator.n_features_in_))]


@dataclass
class SelectionPath:
    """Error against the number of selected features.

    Parameters
    ----------
    n_features : list of int
        The number of features at each point.
    features : list of str
        The feature that entered at each point (names when the input had column names), or
        "" where the point is not one entry (a ``mu_path`` point).
    train_loss : list of float
        The training loss at each point (NaN where unknown).
    val_loss : list of float or None, default=None
        The validation loss at each point; None without validation data.
    label : str, default=""
        The legend entry.
    loss_name : str, default="loss"
        The y-axis label, and what makes two paths comparable: ``plot_selection_path``
        draws paths of different ``loss_name`` on separate axes.
    extra : dict, default={}
        Family-specific lists, one entry per point (GBFS: ``entry_tree``; ``mu_path``:
        ``mu``).
    """

    n_features: list
    features: list
    train_loss: list
    val_loss: list | None = None
    label: str = ""
    loss_name: str = "loss"
    extra: dict = field(default_factory=dict)


def _gbfs_path(est):
    return gbfs_record_path(est, est.selection_record_)


def gbfs_record_path(est, rec) -> SelectionPath:
    """The selection path of a GBFS estimator's selection record ``rec`` (a dict of per-tree
    lists, as ``selection_record_``): GBFS's "auto" reads an unbudgeted fit's this way,
    before the estimator's own record is set."""
    names = feature_names(est)
    added = rec["features_added"]
    train, val = np.asarray(rec["train_loss"], float), np.asarray(rec["val_loss"], float)
    entry_trees = [t for t, fs in enumerate(added) for _ in fs]
    order = [f for fs in added for f in fs]
    n_trees = len(added)
    ks, feats, tl, vl = [], [], [], []
    for j, (t, f) in enumerate(zip(entry_trees, order)):
        # the model with j+1 features: up to the tree before the next entry
        last = (entry_trees[j + 1] - 1) if j + 1 < len(order) else n_trees - 1
        last = max(last, t)
        ks.append(j + 1)
        feats.append(names[f])
        tl.append(float(train[last]))
        vl.append(float(val[last]))
    has_val = bool(len(vl)) and not np.all(np.isnan(vl))
    return SelectionPath(
        ks,
        feats,
        tl,
        vl if has_val else None,
        label=type(est).__name__,
        loss_name="boosting " + ("log-loss" if is_classifier(est) else "squared error"),
        extra={"entry_tree": entry_trees},
    )


def _stagewise_path(est):
    names = feature_names(est)
    sel = [int(j) for j in est.selected_features_]
    cost = np.asarray(est.cost_history_, float)
    val = getattr(est, "validation_cost_history_", None)
    return SelectionPath(
        list(range(1, len(sel) + 1)),
        [names[j] for j in sel],
        cost[1 : len(sel) + 1].tolist(),
        None if val is None else np.asarray(val, float)[1 : len(sel) + 1].tolist(),
        label=type(est).__name__,
        loss_name="stagewise " + ("logistic cost" if is_classifier(est) else "least-squares cost"),
        extra={"cost_without_features": float(cost[0])},
    )


def _controlburn_path(est):
    path = est.selection_path_
    if path is None or "train_loss" not in path:
        raise ValueError(
            f"{type(est).__name__} has no losses on its selection path: it was fitted (or "
            "saved) by a gpufs version that did not record the lasso's loss per k; fit it "
            "again."
        )
    names = feature_names(est)
    ks = sorted(int(k) for k in path["train_loss"])
    prev, feats = set(), []
    for k in ks:
        cur = [int(f) for f in path["features"][k]]
        new = [f for f in cur if f not in prev]
        feats.append(", ".join(names[f] for f in new))
        prev = set(cur)
    val = path.get("val_loss")
    return SelectionPath(
        ks,
        feats,
        [float(path["train_loss"][k]) for k in ks],
        None if val is None else [float(val[k]) for k in ks],
        label=type(est).__name__,
        loss_name="lasso training loss",
    )


def selection_path(estimator) -> SelectionPath:
    """The selection path of a fitted GBFS, stagewise or ControlBurn estimator.

    Parameters
    ----------
    estimator : fitted ``GBFSClassifier``, ``GBFSRegressor``, ``StagewiseClassifier``,
        ``StagewiseRegressor``, ``ControlBurnClassifier`` or ``ControlBurnRegressor``

    Returns
    -------
    SelectionPath
    """
    if hasattr(estimator, "selection_record_"):
        return _gbfs_path(estimator)
    if hasattr(estimator, "cost_history_"):
        return _stagewise_path(estimator)
    if hasattr(estimator, "tree_weights_"):  # ControlBurn (a loaded one has no forest_)
        return _controlburn_path(estimator)
    raise ValueError(
        f"selection_path needs a fitted gpufs selector; got "
        f"{type(estimator).__name__} (is it fitted?)."
    )


@dataclass
class PathPoint:
    """One fit of ``mu_path``.

    Parameters
    ----------
    mu : float
        The penalty the fit ran at.
    selected_features : list of int
        The selected features, in order of selection.
    n_selected : int
        How many.
    val_score : float
        The validation score of the fit.
    selected_names : list of str, default=[]
        The selected features' names.
    """

    mu: float
    selected_features: list
    n_selected: int
    val_score: float
    selected_names: list = field(default_factory=list)


def mu_path(estimator, X, y, mus, X_val=None, y_val=None, scoring=None):
    """Fit ``clone(estimator).set_params(mu=mu)`` for each mu.

    Parameters
    ----------
    estimator : a GBFS estimator (any estimator with a ``mu`` parameter and
        ``selected_features_``)
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    mus : iterable of float
    X_val, y_val : validation data (default: the training data, which overstates the score)
    scoring : None (the estimator's ``score``) or a callable ``scoring(est, X, y)``

    Returns
    -------
    list of PathPoint, in the order of ``mus``.
    """
    if X_val is None:
        X_val, y_val = X, y
    points = []
    for mu in mus:
        est = clone(estimator).set_params(mu=float(mu)).fit(X, y)
        score = est.score(X_val, y_val) if scoring is None else scoring(est, X_val, y_val)
        sel = [int(f) for f in est.selected_features_]
        names = feature_names(est)
        points.append(PathPoint(float(mu), sel, len(sel), float(score), [names[f] for f in sel]))
    return points


def points_path(points, label="mu path") -> SelectionPath:
    """A ``mu_path`` result as a SelectionPath of validation scores.

    Parameters
    ----------
    points : list of PathPoint
    label : str, default="mu path"
        The legend entry.

    Returns
    -------
    SelectionPath
        The points sorted by the number of features (then by decreasing mu).
    """
    pts = sorted(points, key=lambda p: (p.n_selected, -p.mu))
    return SelectionPath(
        [p.n_selected for p in pts],
        ["" for _ in pts],
        [float("nan")] * len(pts),
        [p.val_score for p in pts],
        label=label,
        loss_name="validation score",
        extra={"mu": [p.mu for p in pts]},
    )


def plot_path(points, ax=None, label=None):
    """Draw a ``mu_path`` result: ``gpufs.plotting.plot_selection_path`` of its points.

    Parameters
    ----------
    points : list of PathPoint
    ax : matplotlib Axes or None, default=None
        None: a new figure.
    label : str or None, default=None
        The legend entry (None: "mu path").

    Returns
    -------
    matplotlib Axes
    """
    # the drawing of gpufs.plotting.plot_selection_path, without importing gpufs.plotting
    # (which imports this module)
    return draw_paths(
        [points_path(points, label or "mu path")], ax, validation=True, label_features=True
    )
