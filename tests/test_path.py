"""Selection paths (gpufs.path) and their one plot (gpufs.plotting.plot_selection_path)."""

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from gpufs import ControlBurnRegressor, GBFSClassifier, StagewiseClassifier  # noqa: E402
from gpufs.path import PathPoint, SelectionPath, mu_path, plot_path, selection_path  # noqa: E402


@pytest.fixture(scope="module")
def named():
    rng = np.random.default_rng(0)
    cols = ["age", "income_in_thousands_of_dollars_per_year", "zip", "height", "weight", "noise"]
    X = pd.DataFrame(rng.normal(size=(300, 6)), columns=cols)
    y = (
        X["age"]
        - X["height"]
        + 0.5 * X["income_in_thousands_of_dollars_per_year"]
        + 0.4 * rng.normal(size=300)
        > 0
    ).astype(int)
    return X, y


def test_gbfs_path_follows_the_selection_record(named):
    X, y = named
    est = GBFSClassifier(
        mu=0.01,
        n_estimators=15,
        max_depth=2,
        validation_fraction=0.25,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    p = selection_path(est)
    sel = est.selected_features_.tolist()
    assert p.n_features == list(range(1, len(sel) + 1))
    assert p.features == [X.columns[f] for f in sel]
    assert p.extra["entry_tree"] == [int(est.first_use_tree_[f]) for f in sel]
    rec = est.selection_record_
    entries = p.extra["entry_tree"] + [len(rec["train_loss"])]
    for j in range(len(sel)):
        last = max(entries[j + 1] - 1, entries[j])
        assert p.train_loss[j] == rec["train_loss"][last]
        assert p.val_loss[j] == rec["val_loss"][last]


def test_stagewise_path_is_its_cost_history(named):
    X, y = named
    est = StagewiseClassifier(n_features_to_select=3).fit(X, y)
    p = selection_path(est)
    assert p.n_features == [1, 2, 3]
    assert p.features == [X.columns[f] for f in est.selected_features_]
    np.testing.assert_array_equal(p.train_loss, est.cost_history_[1:4])
    assert p.val_loss is None


def test_numpy_input_gets_scikit_learn_names(named):
    X, y = named
    est = StagewiseClassifier(n_features_to_select=2).fit(X.to_numpy(), y)
    assert selection_path(est).features == [f"x{f}" for f in est.selected_features_]


def test_controlburn_path_by_default_has_names_and_lasso_losses(named, tmp_path):
    X, y = named
    # unpruned: the pruned forest of this small table covers 2 features, the third is filled
    est = ControlBurnRegressor(
        n_features_to_select=3, max_depth=2, random_state=0, device="cpu", oob_prune=None
    ).fit(X, y.astype(float))
    sp = est.selection_path_
    assert sp["k"] and max(sp["k"]) == 3  # up to the selection's size
    assert sp["features"][3] == sorted(est.selected_features_.tolist())
    for k in sp["k"]:
        assert len(sp["features"][k]) == k
        assert sp["names"][k] == [X.columns[f] for f in sp["features"][k]]
    losses = [sp["train_loss"][k] for k in sp["k"]]
    assert losses == sorted(losses, reverse=True)  # more features, lower lasso loss
    # the training loss is the lasso objective without its penalty: below the variance of y
    assert 0 < losses[-1] < losses[0] < float(np.var(y.astype(float)))
    p = selection_path(est)
    assert p.n_features == sp["k"] and p.val_loss is None
    entered = [f for k in sp["k"] for f in p.features[sp["k"].index(k)].split(", ")]
    assert set(entered) == set(sp["names"][3])
    # a model loaded from its file (no forest_) has the same path
    est.save_model(tmp_path / "cb.json")
    from gpufs.io.model_io import load_model

    loaded = load_model(tmp_path / "cb.json")
    assert not hasattr(loaded, "forest_")
    assert selection_path(loaded) == p


def test_controlburn_path_without_losses_says_what_to_do(named):
    X, y = named
    est = ControlBurnRegressor(
        n_features_to_select=2, max_depth=2, random_state=0, device="cpu"
    ).fit(X, y.astype(float))
    # the path of a model written before the losses were recorded
    est.selection_path_ = {k: v for k, v in est.selection_path_.items() if k != "train_loss"}
    with pytest.raises(ValueError, match="did not record the lasso's loss per k; fit it again"):
        selection_path(est)


def test_selection_path_rejects_other_objects():
    with pytest.raises(ValueError, match="fitted gpufs selector"):
        selection_path(object())


def test_mu_path_names_the_features(named):
    X, y = named
    pts = mu_path(
        GBFSClassifier(n_estimators=5, max_depth=2, random_state=0, device="cpu"), X, y, [0.5, 0.01]
    )
    assert [p.mu for p in pts] == [0.5, 0.01]
    for p in pts:
        assert p.n_selected == len(p.selected_features) == len(p.selected_names)
        assert p.selected_names == [X.columns[f] for f in p.selected_features]


def test_plot_selection_path_all_families(named):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y = named
    g = GBFSClassifier(
        mu=0.01,
        n_estimators=10,
        max_depth=2,
        validation_fraction=0.25,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    s = StagewiseClassifier(n_features_to_select=3).fit(X, y)
    c = ControlBurnRegressor(
        n_features_to_select=3, max_depth=2, random_state=0, device="cpu", oob_prune=None
    ).fit(X, y.astype(float))
    from gpufs.plotting import plot_selection_path

    ax = plot_selection_path(g)
    fig = ax.figure
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert any("age" in t for t in labels)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["GBFSClassifier (train)", "GBFSClassifier (validation)"]
    plt.close(fig)

    # three families, three losses: three axes, one above the other, never one "loss" axis
    axes = plot_selection_path(g, s, c)
    assert [a.get_ylabel() for a in axes] == [
        "boosting log-loss",
        "stagewise logistic cost",
        "lasso training loss",
    ]
    legends = [[t.get_text() for t in a.get_legend().get_texts()] for a in axes]
    assert legends == [
        ["GBFSClassifier (train)", "GBFSClassifier (validation)"],
        ["StagewiseClassifier"],
        ["ControlBurnRegressor"],
    ]
    plt.close(axes[0].figure)
    with pytest.raises(
        ValueError,
        match=r"3 different losses \(boosting log-loss, stagewise "
        r"logistic cost, lasso training loss\).*got 1",
    ):
        plot_selection_path(g, s, c, ax=plt.subplots()[1])
    assert plot_selection_path(g, g, ax=plt.subplots()[1]).get_ylabel() == "boosting log-loss"
    plt.close("all")

    ax = plot_selection_path(c)  # ControlBurn alone: its k-path, entering names as ticks
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), c.selection_path_["k"])
    assert ax.get_ylabel() == "lasso training loss"
    ticks = " ".join(t.get_text() for t in ax.get_xticklabels())
    assert all(name[:8] in ticks for name in c.selected_feature_names_)
    plt.close(ax.figure)

    pts = [PathPoint(0.1, [0], 1, 0.7, ["age"]), PathPoint(0.01, [0, 3], 2, 0.8, ["age", "height"])]
    ax = plot_path(pts)
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), [1, 2])
    np.testing.assert_array_equal(line.get_ydata(), [0.7, 0.8])
    assert [t.get_text() for t in ax.texts] == ["mu=0.1", "mu=0.01"]
    plt.close(ax.figure)

    # a long name is shortened around an ellipsis, keeping its start and its end
    custom = SelectionPath(
        [1, 2], ["a", "income_in_thousands_of_dollars_per_year"], [1.0, 0.5], label="mine"
    )
    ax = plot_selection_path(custom)
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "1\n+a",
        "2\n+income_i\N{HORIZONTAL ELLIPSIS}_per_year",
    ]
    plt.close(ax.figure)

    # labels that do not fit side by side are turned upright, each "k +name" on one line
    crowded = SelectionPath(
        list(range(1, 13)),
        [f"a_long_column_name_{i}" for i in range(12)],
        list(range(12, 0, -1)),
        label="crowded",
    )
    ax = plot_selection_path(crowded)
    ticks = ax.get_xticklabels()
    assert [t.get_text() for t in ticks][0] == "1 +a_long_column_name_0"
    assert {t.get_rotation() for t in ticks} == {90.0}
    assert not _overlapping_texts(ax.figure)
    plt.close(ax.figure)
    # ... while a few short ones stay horizontal, however many ticks there are
    roomy = SelectionPath(list(range(1, 9)), list("abcdefgh"), list(range(8, 0, -1)))
    ax = plot_selection_path(roomy)
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    plt.close(ax.figure)

    with pytest.raises(ValueError, match="at least one"):
        plot_selection_path()


# --- the figures' text: no two labels overlap, none leaves the figure ------------------------


def _overlapping_texts(fig):
    """Pairs of drawn Text artists (tick labels, annotations, titles, legends) whose extents
    overlap by more than a pixel, and texts outside the figure: what matplotlib's renderer
    says after laying the figure out."""
    import itertools

    from matplotlib.text import Text

    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    undrawn = set()  # tick labels outside the view limits exist but are not drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            undrawn |= {id(t.label1) for t in axis.get_major_ticks() + axis.get_minor_ticks()}
            undrawn -= {id(t.label1) for t in axis._update_ticks()}
    drawn = [
        (t.get_text(), t.get_window_extent(renderer))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and id(t) not in undrawn
    ]
    bad = [
        (a, b)
        for (a, A), (b, B) in itertools.combinations(drawn, 2)
        if min(A.x1, B.x1) - max(A.x0, B.x0) > 1 and min(A.y1, B.y1) - max(A.y0, B.y0) > 1
    ]
    box = fig.bbox
    bad += [
        (a, "outside the figure")
        for a, A in drawn
        if A.x0 < box.x0 - 1 or A.x1 > box.x1 + 1 or A.y0 < box.y0 - 1 or A.y1 > box.y1 + 1
    ]
    return bad


@pytest.fixture
def long_names():
    """Breast cancer with the long column names of a real table (50 to 60 characters)."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X.columns = [f"{c.replace(' ', '_')}_measured_at_intake_by_the_lab" for c in X.columns]
    return X, y


def test_no_text_overlaps_in_the_plots_with_real_feature_names(long_names):
    """Every plot with long real names and crowded points: no two text boxes overlap (the
    stagewise labels were turned only above 6 ticks, and the mu annotations of nearby points
    were drawn over each other, as in the shipped docs figure)."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpufs import StagewiseRegressor
    from gpufs.plotting import plot_selection_path, plot_stagewise

    X, y = long_names
    for k in (3, 8):
        axes = plot_stagewise(StagewiseClassifier(n_features_to_select=k).fit(X, y))
        assert not _overlapping_texts(axes[0].figure), k
        plt.close("all")
    # the docs figure's points: two mu at 3 features, two nearly equal scores at 14 and 16
    scores = [
        (0.5, 1, 0.877),
        (0.3, 3, 0.936),
        (0.2, 3, 0.924),
        (0.1, 4, 0.930),
        (0.05, 9, 0.936),
        (0.02, 14, 0.9415),
        (0.01, 16, 0.9415),
        (0.0, 28, 0.947),
    ]
    pts = [PathPoint(mu, list(range(n)), n, v) for mu, n, v in scores]
    for figsize in ((6, 4), (4, 3)):
        fig, ax = plt.subplots(figsize=figsize, constrained_layout=True)
        plot_path(pts, ax=ax)
        assert sorted(t.get_text() for t in ax.texts) == sorted(f"mu={m:g}" for m, _, _ in scores)
        assert not _overlapping_texts(fig), figsize
        plt.close(fig)
    g = GBFSClassifier(mu=0.01, n_estimators=20, max_depth=2, random_state=0, device="cpu").fit(
        X, y
    )
    ax = plot_selection_path(g)
    assert not _overlapping_texts(ax.figure)
    axes = plot_selection_path(g, StagewiseRegressor(n_features_to_select=4).fit(X, y))
    assert len(axes) == 2 and not _overlapping_texts(axes[0].figure)
    plt.close("all")
