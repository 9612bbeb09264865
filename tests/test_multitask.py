"""Multitask A-GBM (Han et al., AISTATS 2020, Algorithm 1): the shared and per-task prices,
the known answer (three tasks sharing two features, each with one of its own), the goal (fewer
distinct features than separate fits at the same per-task error), both input forms, prediction
by task, save/load with its checks, and CPU == simulated GPU (``_cudasim_multitask.py``)."""

import json
import os
import re

import numpy as np
import pytest
from sklearn.base import clone

import _background_files
from gpufs import GBFSRegressor, MultiTaskGBFSClassifier, MultiTaskGBFSRegressor
from gpufs.engine.multitask_boosting import MultiTaskPenaltyState
from gpufs.io.model_io import ModelFileError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")


# --- the penalty ------------------------------------------------------------------------


def test_prices_of_shared_and_task_sets():
    costs = np.array([1.0, 1.0, 2.0, 1.0])
    st = MultiTaskPenaltyState(0.3, [0.1, 0.2], costs, np.arange(4, dtype=np.int32))
    t0, t1 = st.task(0), st.task(1)
    np.testing.assert_allclose(t0.penalty_vector(), [0.4, 0.4, 0.8, 0.4])
    np.testing.assert_allclose(t1.penalty_vector(), [0.5, 0.5, 1.0, 0.5])
    t0.global_tree_index = 7
    assert t0.admit([2, 1], tree_index=3) == [2, 1]
    # task 0 uses 1 and 2: free for it; task 1 pays only its own price for them
    np.testing.assert_allclose(t0.penalty_vector(), [0.4, 0.0, 0.0, 0.4])
    np.testing.assert_allclose(t1.penalty_vector(), [0.5, 0.2, 0.4, 0.5])
    assert st.shared.order == [2, 1] and st.shared.first_use_tree[2] == 7
    assert t0.first_use_tree[1] == 3 and t1.order == []
    t1.global_tree_index = 8
    assert t1.admit([1, 3], tree_index=0) == [1, 3]
    assert st.shared.order == [2, 1, 3]  # 1 was already in Omega_G
    assert st.shared.first_use_tree[1] == 7 and st.shared.first_use_tree[3] == 8
    np.testing.assert_allclose(t0.penalty_vector(), [0.4, 0.0, 0.0, 0.1])


def test_groups_become_free_together_in_both_sets():
    st = MultiTaskPenaltyState(0.3, [0.1, 0.1], np.ones(4), np.array([0, 0, 1, 1], np.int32))
    st.task(0).admit([0], 0)
    np.testing.assert_allclose(st.task(0).penalty_vector(), [0.0, 0.0, 0.4, 0.4])
    np.testing.assert_allclose(st.task(1).penalty_vector(), [0.1, 0.1, 0.4, 0.4])


# --- known answer and goal --------------------------------------------------------------


def _three_tasks(rng, n, d=20):
    """Task t: y = x0 + x1 (shared) + 1.5 x_{2+t} (its own) + noise, d columns."""
    Xs, ys = [], []
    for t in range(3):
        X = rng.normal(size=(n, d))
        ys.append(X[:, 0] + X[:, 1] + 1.5 * X[:, 2 + t] + 0.2 * rng.normal(size=n))
        Xs.append(X)
    return Xs, ys


def test_known_answer_three_tasks_share_two_features():
    Xs, ys = _three_tasks(np.random.default_rng(0), 300)
    est = MultiTaskGBFSRegressor(
        mu_G=0.05, mu_t=0.03, n_estimators=30, max_depth=3, device="cpu"
    ).fit(Xs, ys)
    assert sorted(est.selected_features_.tolist()) == [0, 1, 2, 3, 4]
    for t in range(3):
        assert sorted(est.selected_features_by_task_[t].tolist()) == [0, 1, 2 + t]
    # the shared pair entered Omega_G once, through the first task that needed it
    path = est.selection_path_
    assert sorted(path["features"]) == [0, 1, 2, 3, 4]
    entry = dict(zip(path["features"], path["entry_task"]))
    assert [entry[f] for f in (2, 3, 4)] == [0, 1, 2]  # an own feature: through its own task
    np.testing.assert_array_equal(est.support_, np.arange(20) < 5)
    assert est.transform(Xs[0]).shape == (300, 5)
    Xt, yt = _three_tasks(np.random.default_rng(1), 500)
    for t in range(3):
        assert est.score(Xt[t], yt[t], task=t) > 0.8  # 30 shallow trees: underfit, not wrong
    # first use per task: recorded where the task's own trees first split on the feature
    for t in range(3):
        feat = np.stack([tr.feature for tr in est.ensembles_[t].trees])
        for f in est.selected_features_by_task_[t]:
            assert est.first_use_tree_by_task_[t, f] == np.flatnonzero((feat == f).any(1))[0]


def _redundant_tasks(rng, n, T=4, copies=5, d_noise=15):
    """Every task: y = z + noise with five interchangeable copies of z (z + small noise):
    one copy suffices, and which copy looks best differs from task to task."""
    Xs, ys = [], []
    for _ in range(T):
        z = rng.normal(size=n)
        C = z[:, None] + 0.15 * rng.normal(size=(n, copies))
        Xs.append(np.hstack([C, rng.normal(size=(n, d_noise))]))
        ys.append(z + 0.3 * rng.normal(size=n))
    return Xs, ys


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_goal_fewer_distinct_features_than_separate_fits_at_the_same_error(seed):
    rng = np.random.default_rng(seed)
    Xs, ys = _redundant_tasks(rng, 300)
    Xt, yt = _redundant_tasks(rng, 2000)
    mu_G, mu_t = 0.04, 0.01
    mt = MultiTaskGBFSRegressor(
        mu_G=mu_G, mu_t=mu_t, n_estimators=40, max_depth=3, device="cpu"
    ).fit(Xs, ys)
    # separately, a new feature costs what a brand-new feature costs a multitask fit
    sep = [
        GBFSRegressor(mu=mu_G + mu_t, n_estimators=40, max_depth=3, device="cpu").fit(X, y)
        for X, y in zip(Xs, ys)
    ]
    distinct_sep = set().union(*(s.selected_features_.tolist() for s in sep))
    assert len(mt.selected_features_) < len(distinct_sep)
    e_mt = np.array(
        [np.mean((mt.predict(X, task=t) - y) ** 2) for t, (X, y) in enumerate(zip(Xt, yt))]
    )
    e_sep = np.array([np.mean((s.predict(X) - y) ** 2) for s, X, y in zip(sep, Xt, yt)])
    assert np.all(e_mt <= 1.05 * e_sep), (e_mt, e_sep)
    assert e_mt.mean() <= 1.02 * e_sep.mean(), (e_mt, e_sep)


# --- input forms and prediction ---------------------------------------------------------


def test_list_form_equals_task_column_form():
    rng = np.random.default_rng(3)
    Xs, ys = _three_tasks(rng, 80, d=6)
    a = MultiTaskGBFSRegressor(n_estimators=8, mu_t=0.02, device="cpu").fit(Xs, ys)
    # the same rows interleaved, with string task ids in the order of the list
    labels = np.array(["a", "b", "c"])
    X, y = np.vstack(Xs), np.concatenate(ys)
    task = np.repeat(labels, 80)
    perm = rng.permutation(240)
    b = MultiTaskGBFSRegressor(n_estimators=8, mu_t=0.02, device="cpu").fit(
        X[perm], y[perm], task=task[perm]
    )
    np.testing.assert_array_equal(b.tasks_, labels)
    np.testing.assert_array_equal(a.tasks_, [0, 1, 2])
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    for t in range(3):
        np.testing.assert_array_equal(
            a.selected_features_by_task_[t], b.selected_features_by_task_[t]
        )
        np.testing.assert_array_equal(a.predict(Xs[t], task=t), b.predict(Xs[t], task=labels[t]))
    # one label per row: rows of several tasks in one call
    np.testing.assert_array_equal(
        b.predict(X, task=task), np.concatenate([a.predict(Xs[t], task=t) for t in range(3)])
    )


def test_task_id_column_of_a_data_frame():
    """fit(df, y, task="column"): the column gives each row's task and is not a feature;
    predict(df, task="column") reads it the same way; equal to the array form."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(12)
    Xs, ys = _three_tasks(rng, 70, d=5)
    X, y = np.vstack(Xs), np.concatenate(ys)
    task = np.repeat(["de", "fr", "us"], 70)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    df.insert(2, "country", task)
    a = MultiTaskGBFSRegressor(n_estimators=6, mu_t=0.02, device="cpu").fit(df, y, task="country")
    b = MultiTaskGBFSRegressor(n_estimators=6, mu_t=0.02, device="cpu").fit(
        df.drop(columns=["country"]), y, task=task
    )
    assert list(a.feature_names_in_) == [f"f{i}" for i in range(5)]
    np.testing.assert_array_equal(a.tasks_, ["de", "fr", "us"])
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    np.testing.assert_array_equal(a.predict(df, task="country"), b.predict(X, task=task))
    np.testing.assert_array_equal(
        a.predict(df.drop(columns=["country"]), task="fr"), b.predict(X, task="fr")
    )
    with pytest.raises(
        ValueError,
        match=r"task='region': a string names the task-id column "
        r"of a data frame X, and X has no such column",
    ):
        MultiTaskGBFSRegressor(n_estimators=2, device="cpu").fit(df, y, task="region")


def test_per_task_prices_and_the_root_sse_condition():
    Xs, ys = _three_tasks(np.random.default_rng(4), 60, d=5)
    est = MultiTaskGBFSRegressor(n_estimators=3, mu_t=[0.0, 0.1, 0.2], device="cpu")
    np.testing.assert_array_equal(est.fit(Xs, ys).mu_t_, [0.0, 0.1, 0.2])
    with pytest.raises(ValueError, match=r"one price per task: 3 tasks"):
        MultiTaskGBFSRegressor(mu_t=[0.1, 0.1], device="cpu").fit(Xs, ys)
    with pytest.raises(ValueError, match=r"mu_G \+ mu_t must be < 1.*task 2"):
        MultiTaskGBFSRegressor(mu_G=0.5, mu_t=[0.1, 0.1, 0.5], device="cpu").fit(Xs, ys)
    # without the scaling prices are in loss units: any size is allowed
    MultiTaskGBFSRegressor(
        mu_G=5.0, mu_t=1.0, penalty_scaling="none", n_estimators=2, device="cpu"
    ).fit(Xs, ys)


def test_bad_input_messages():
    Xs, ys = _three_tasks(np.random.default_rng(5), 40, d=5)
    X, y = np.vstack(Xs), np.concatenate(ys)
    est = MultiTaskGBFSRegressor(n_estimators=2, device="cpu")
    with pytest.raises(ValueError, match="give the task of every row"):
        est.fit(X, y)
    with pytest.raises(ValueError, match=r"task= is for a single X"):
        est.fit(Xs, ys, task=np.zeros(120))
    with pytest.raises(ValueError, match="as many targets as tables"):
        est.fit(Xs, ys[:2])
    with pytest.raises(ValueError, match="sample_weight must be a list of 3"):
        est.fit(Xs, ys, sample_weight=np.ones(120))
    # issue 26: a missing task id was reported as "Input y contains NaN", a None as a
    # TypeError from sorting
    with pytest.raises(
        ValueError,
        match=r"task has 1 missing value \(NaN or None\), at row "
        r"119; every row needs a task id",
    ):
        est.fit(X, y, task=np.r_[np.zeros(119), np.nan])
    labels = np.array(["a", "b", "c"] * 40, dtype=object)
    labels[[5, 7]] = None
    with pytest.raises(
        ValueError,
        match=r"task has 2 missing values \(NaN or None\), at "
        r"rows \[5, 7\]",
    ):
        est.fit(X, y, task=labels)
    labels[[5, 7]] = [1, 2]
    with pytest.raises(ValueError, match=r"task has ids of mixed types"):
        est.fit(X, y, task=labels)
    est.fit(X, y, task=np.repeat([10, 20, 30], 40))
    with pytest.raises(
        ValueError,
        match=r"task 40 was not seen in fit; the tasks are "
        r"\[10, 20, 30\]",
    ):
        est.predict(X[:3], task=40)
    with pytest.raises(ValueError, match="predict needs task="):
        est.predict(X[:3])
    with pytest.raises(ValueError, match="one label per row: 3 rows"):
        est.predict(X[:3], task=[10, 20])


def test_classifier_binary_and_clone():
    rng = np.random.default_rng(6)
    Xs, ys = _three_tasks(rng, 150, d=8)
    yc = [np.where(y > 0, "pos", "neg") for y in ys]
    est = MultiTaskGBFSClassifier(n_estimators=15, mu_t=0.02, device="cpu").fit(Xs, yc)
    np.testing.assert_array_equal(est.classes_, ["neg", "pos"])
    assert {0, 1} <= set(est.selected_features_.tolist())
    p = est.predict_proba(Xs[1], task=1)
    assert p.shape == (150, 2) and np.allclose(p.sum(1), 1)
    assert est.score(Xs[1], yc[1], task=1) > 0.8
    assert set(est.predict(Xs[0], task=0)) <= {"neg", "pos"}
    c = clone(est)
    assert not hasattr(c, "ensembles_") and c.get_params()["mu_t"] == 0.02


# --- save / load ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["regressor", "softmax"])
def test_save_load_round_trip(tmp_path, kind):
    rng = np.random.default_rng(7)
    Xs, ys = _three_tasks(rng, 90, d=6)
    if kind == "regressor":
        est = MultiTaskGBFSRegressor(n_estimators=6, mu_t=[0.01, 0.02, 0.03], device="cpu")
        task = np.repeat([5, 7, 9], 90)
    else:
        ys = [np.digitize(y, [-1, 1]) for y in ys]
        est = MultiTaskGBFSClassifier(n_estimators=4, max_depth=2, device="cpu")
        task = np.repeat(["x", "y", "z"], 90)
    X, y = np.vstack(Xs), np.concatenate(ys)
    X[rng.random(X.shape) < 0.05] = np.nan
    est.fit(X, y, task=task)
    path = tmp_path / "m.json"
    est.save_model(path)
    got = type(est).load_model(path)
    np.testing.assert_array_equal(got.tasks_, est.tasks_)
    np.testing.assert_array_equal(got.predict(X, task=task), est.predict(X, task=task))
    np.testing.assert_array_equal(got.selected_features_, est.selected_features_)
    for a, b in zip(got.selected_features_by_task_, est.selected_features_by_task_):
        np.testing.assert_array_equal(a, b)
    # derived from the trees on load, recorded by the penalty state in fit: the same
    np.testing.assert_array_equal(got.first_use_tree_by_task_, est.first_use_tree_by_task_)
    np.testing.assert_array_equal(got.mu_t_, est.mu_t_)
    assert got.selection_path_ == est.selection_path_
    assert json.dumps(got.selection_records_) == json.dumps(est.selection_records_)  # NaNs


def test_load_refuses_inconsistent_selections(tmp_path):
    Xs, ys = _three_tasks(np.random.default_rng(8), 80, d=6)
    est = MultiTaskGBFSRegressor(n_estimators=6, mu_t=0.03, device="cpu").fit(Xs, ys)
    path = tmp_path / "m.json"
    est.save_model(path)
    doc = json.loads(path.read_text())

    def load(mutate):
        d = json.loads(json.dumps(doc))
        mutate(d["fitted"])
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(d))
        return MultiTaskGBFSRegressor.load_model(p)

    unused = sorted(set(range(6)) - set(est.selected_features_by_task_[0].tolist()))[0]
    with pytest.raises(
        ModelFileError,
        match=re.escape("selected_features_by_task[0]: not the features task's trees split on"),
    ):
        load(lambda f: f["selected_features_by_task"][0].append(unused))
    with pytest.raises(ModelFileError, match="not the union of the tasks' selected features"):
        load(lambda f: f["selected_features"].pop())
    with pytest.raises(ModelFileError, match=r"fitted.ensembles: expected 3 entries, got 2"):
        load(lambda f: f["ensembles"].pop())
    with pytest.raises(
        ModelFileError,
        match=r"ensembles\[1\].n_trees: 5 trees, but the model "
        r"has 6 rounds",
    ):

        def drop_tree(f):
            e = f["ensembles"][1]
            e["n_trees"] -= 1
            e["tree_column"].pop()
            for v in e["trees"].values():
                v.pop()

        load(drop_tree)
    with pytest.raises(ModelFileError, match=r"mu_t"):
        load(lambda f: f["mu_t"].__setitem__(0, -1.0))
    with pytest.raises(ModelFileError, match=r"tasks.values: a model has at least one task"):
        load(lambda f: f["tasks"].__setitem__("values", []))


# --- CPU == simulated GPU ---------------------------------------------------------------


@pytest.mark.cudasim
def test_multitask_under_the_cuda_simulator():
    code, out = _background_files.result("_cudasim_multitask.py")
    tail = out[-4000:]
    assert code == 0, f"simulator multitask check failed:\n{tail}"
    assert re.search(r"\d+ passed", out)


@pytest.mark.gpu
def test_multitask_on_a_real_gpu():
    """CPU vs a real GPU: the same Omega_G, Omega_t and trees (cupy input, task column)."""
    from gpufs._device import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU with cupy")
    import cupy as cp

    Xs, ys = _three_tasks(np.random.default_rng(11), 5000)
    X, y, task = np.vstack(Xs), np.concatenate(ys), np.repeat([0, 1, 2], 5000)
    kw = dict(mu_G=0.05, mu_t=0.03, n_estimators=10, max_depth=3)
    cpu = MultiTaskGBFSRegressor(device="cpu", **kw).fit(X, y, task=task)
    gpu = MultiTaskGBFSRegressor(device="gpu", **kw).fit(cp.asarray(X), cp.asarray(y), task=task)
    np.testing.assert_array_equal(cpu.selected_features_, gpu.selected_features_)
    for a, b in zip(cpu.selected_features_by_task_, gpu.selected_features_by_task_):
        np.testing.assert_array_equal(a, b)
    for ea, eb in zip(cpu.ensembles_, gpu.ensembles_):
        sa, sb = ea.stacked(), eb.stacked()
        for key in sa:
            np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
    np.testing.assert_array_equal(
        cpu.predict(X, task=task), cp.asnumpy(gpu.predict(cp.asarray(X), task=task))
    )


def test_a_constant_target_warns_that_nothing_was_selected():
    """Issue 26: MultiTaskGBFSRegressor selected nothing on a constant target, silently."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(150, 4))
    with pytest.warns(
        UserWarning,
        match=r"no feature was selected: the target is constant "
        r"in every task, so no split can lower the loss",
    ):
        m = MultiTaskGBFSRegressor(n_estimators=5, device="cpu").fit(
            X, np.full(150, 2.5), task=np.arange(150) % 3
        )
    assert m.selected_features_.size == 0
    np.testing.assert_allclose(m.predict(X, task=np.arange(150) % 3), 2.5)
    y = X[:, 0] * (np.arange(150) % 3 == 0)  # constant (0) in two of the three tasks
    with pytest.warns(
        UserWarning,
        match=r"no feature was selected: no split on any feature "
        r"paid its price in 5 rounds",
    ):
        MultiTaskGBFSRegressor(n_estimators=5, mu_G=0.9, mu_t=0.05, device="cpu").fit(
            X, y, task=np.arange(150) % 3
        )


def test_a_task_whose_rows_all_weigh_nothing_is_named_plainly():
    """The error names the task as the user wrote it ("task 1"), not numpy's repr."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    task = np.arange(60) % 2
    w = (task == 0).astype(float)
    with pytest.raises(ValueError, match=r"every sample weight of task 1 is 0"):
        MultiTaskGBFSRegressor(n_estimators=2, device="cpu").fit(
            X, X[:, 0], task=task, sample_weight=w
        )
