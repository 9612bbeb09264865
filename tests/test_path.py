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
    y = (X["age"] - X["height"] + 0.5 * X["income_in_thousands_of_dollars_per_year"]
         + 0.4 * rng.normal(size=300) > 0).astype(int)
    return X, y


def test_gbfs_path_follows_the_selection_record(named):
    X, y = named
    est = GBFSClassifier(mu=0.01, n_estimators=15, max_depth=2, validation_fraction=0.25,
                         random_state=0, device="cpu").fit(X, y)
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
    est = ControlBurnRegressor(n_features_to_select=3, max_depth=2, random_state=0,
                               device="cpu").fit(X, y.astype(float))
    sp = est.selection_path_
    assert sp["k"] and max(sp["k"]) == 3                   # up to the selection's size
    assert sp["features"][3] == sorted(est.selected_features_.tolist())
    for k in sp["k"]:
        assert len(sp["features"][k]) == k
        assert sp["names"][k] == [X.columns[f] for f in sp["features"][k]]
    losses = [sp["train_loss"][k] for k in sp["k"]]
    assert losses == sorted(losses, reverse=True)            # more features, lower lasso loss
    # the training loss is the lasso objective without its penalty: below the variance of y
    assert 0 < losses[-1] < losses[0] < float(np.var(y.astype(float)))
    p = selection_path(est)
    assert p.n_features == sp["k"] and p.val_loss is None
    entered = [f for k in sp["k"] for f in p.features[sp["k"].index(k)].split(", ")]
    assert set(entered) == set(sp["names"][3])
    # a model loaded from its file (no forest_) has the same path
    est.save_model(tmp_path / "cb.json")
    from gpufs.model_io import load_model

    loaded = load_model(tmp_path / "cb.json")
    assert not hasattr(loaded, "forest_")
    assert selection_path(loaded) == p


def test_controlburn_path_without_losses_says_what_to_do(named):
    X, y = named
    est = ControlBurnRegressor(n_features_to_select=2, max_depth=2, random_state=0,
                               device="cpu").fit(X, y.astype(float))
    # the path of a model written before the losses were recorded
    est.selection_path_ = {k: v for k, v in est.selection_path_.items() if k != "train_loss"}
    with pytest.raises(ValueError, match="did not record the lasso's loss per k; fit it again"):
        selection_path(est)


def test_selection_path_rejects_other_objects():
    with pytest.raises(ValueError, match="fitted gpufs selector"):
        selection_path(object())


def test_mu_path_names_the_features(named):
    X, y = named
    pts = mu_path(GBFSClassifier(n_estimators=5, max_depth=2, random_state=0, device="cpu"),
                  X, y, [0.5, 0.01])
    assert [p.mu for p in pts] == [0.5, 0.01]
    for p in pts:
        assert p.n_selected == len(p.selected_features) == len(p.selected_names)
        assert p.selected_names == [X.columns[f] for f in p.selected_features]


def test_plot_selection_path_all_families(named):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y = named
    g = GBFSClassifier(mu=0.01, n_estimators=10, max_depth=2, validation_fraction=0.25,
                       random_state=0, device="cpu").fit(X, y)
    s = StagewiseClassifier(n_features_to_select=3).fit(X, y)
    c = ControlBurnRegressor(n_features_to_select=3, max_depth=2, random_state=0,
                             device="cpu").fit(X, y.astype(float))
    from gpufs.plotting import plot_selection_path

    ax = plot_selection_path(g)
    fig = ax.figure
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert any("age" in t for t in labels)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["GBFSClassifier (train)", "GBFSClassifier (validation)"]
    plt.close(fig)

    ax = plot_selection_path(g, s, c)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["GBFSClassifier (train)", "GBFSClassifier (validation)",
                      "StagewiseClassifier", "ControlBurnRegressor"]
    plt.close(ax.figure)

    ax = plot_selection_path(c)        # ControlBurn alone: its k-path, entering names as ticks
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), c.selection_path_["k"])
    assert ax.get_ylabel() == "lasso training loss"
    ticks = " ".join(t.get_text() for t in ax.get_xticklabels())
    assert all(name[:8] in ticks for name in c.selected_feature_names_)
    plt.close(ax.figure)

    pts = [PathPoint(0.1, [0], 1, 0.7, ["age"]), PathPoint(0.01, [0, 3], 2, 0.8, ["age",
                                                                                  "height"])]
    ax = plot_path(pts)
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), [1, 2])
    np.testing.assert_array_equal(line.get_ydata(), [0.7, 0.8])
    assert [t.get_text() for t in ax.texts] == ["mu=0.1", "mu=0.01"]
    plt.close(ax.figure)

    # a long name is shortened around an ellipsis, keeping its start and its end
    custom = SelectionPath([1, 2], ["a", "income_in_thousands_of_dollars_per_year"],
                           [1.0, 0.5], label="mine")
    ax = plot_selection_path(custom)
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "1\n+a", "2\n+income_i\N{HORIZONTAL ELLIPSIS}_per_year"]
    plt.close(ax.figure)

    # labels that do not fit side by side are turned, each "k +name" on one line
    crowded = SelectionPath([1, 2, 3, 4, 5], [f"a_long_column_name_{i}" for i in range(5)],
                            [5.0, 4.0, 3.0, 2.0, 1.0], label="crowded")
    ax = plot_selection_path(crowded)
    ticks = ax.get_xticklabels()
    assert [t.get_text() for t in ticks][0] == "1 +a_long_c\N{HORIZONTAL ELLIPSIS}mn_name_0"
    assert {t.get_rotation() for t in ticks} == {45.0}
    plt.close(ax.figure)

    with pytest.raises(ValueError, match="at least one"):
        plot_selection_path()
