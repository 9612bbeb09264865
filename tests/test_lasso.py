"""Tests for gpufs.lasso: ControlBurn's non-negative weighted lasso over tree weights.

The solver is checked against cvxpy (Clarabel, tight tolerances) on small forests of real
scikit-learn trees, then lambda_max, the bisection to exactly k features, determinism,
sketching and every rejected input.
"""
import warnings

import numpy as np
import pytest
from sklearn.tree import DecisionTreeRegressor

from gpufs import lasso
from gpufs._device import gpu_available
from gpufs.lasso import (TreeLasso, UnreachableKError, lambda_max, lasso_path, select_k,
                         selected_features, selection_path, solve_lasso, tree_costs)


def _forest(m, n_trees, n_features=8, seed=0, loss="squared", depth_max=3):
    """Bagged small regression trees on synthetic data: A (m, T), y (m,), masks (T, F)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, n_features))
    X[:, 1] = X[:, 0] + 0.3 * rng.normal(size=m)  # a correlated pair, as in the paper
    f = X[:, 0] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] * X[:, 4]
    y = f + 0.5 * rng.normal(size=m)
    if loss == "logistic":
        y = (y > np.median(y)).astype(float)
    A = np.empty((m, n_trees))
    masks = np.zeros((n_trees, n_features), dtype=bool)
    for i in range(n_trees):
        idx = rng.integers(0, m, m)
        tree = DecisionTreeRegressor(max_depth=1 + i % depth_max, max_features=0.5,
                                     random_state=int(rng.integers(1 << 30)))
        tree.fit(X[idx], y[idx] - y.mean())
        A[:, i] = tree.predict(X)
        used = tree.tree_.feature[tree.tree_.feature >= 0]
        masks[i, used] = True
    return A, y, masks


def _cvxpy_solve(A, y, u, lam, loss, sample_weight=None, fit_intercept=True):
    cp = pytest.importorskip("cvxpy")
    m, n_trees = A.shape
    r = np.ones(m) if sample_weight is None else np.asarray(sample_weight, float)
    W = r.sum()
    w = cp.Variable(n_trees, nonneg=True)
    b = cp.Variable() if fit_intercept else 0.0
    z = A @ w + b
    if loss == "squared":
        fit = cp.sum(cp.multiply(r, cp.square(z - y))) / W
    else:
        fit = cp.sum(cp.multiply(r, cp.logistic(z) - cp.multiply(y, z))) / W
    prob = cp.Problem(cp.Minimize(fit + lam * (u @ w)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "solution may be inaccurate" at 1e-12 gaps
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12,
                   max_iter=500)
    return np.asarray(w.value), prob.value


# name -> (m, T, loss, cost kind, sample weights, fit_intercept)
CASES = {
    "squared": (120, 24, "squared", "count", False, True),
    "squared-costs-weights": (150, 40, "squared", "feature", True, True),
    "squared-groups": (100, 30, "squared", "group", False, True),
    "squared-no-intercept": (80, 20, "squared", "feature", False, False),
    "squared-wide": (30, 40, "squared", "feature", True, True),  # T > m: direct (non-Gram) path
    "logistic": (150, 24, "logistic", "count", False, True),
    "logistic-costs-weights": (200, 40, "logistic", "feature", True, True),
    "logistic-groups": (120, 30, "logistic", "group", True, True),
    "logistic-no-intercept": (100, 16, "logistic", "feature", False, False),
}


def _case(name):
    m, n_trees, loss, cost_kind, weighted, fit_intercept = CASES[name]
    seed = sorted(CASES).index(name)
    A, y, masks = _forest(m, n_trees, seed=seed, loss=loss)
    rng = np.random.default_rng(100 + seed)
    n_features = masks.shape[1]
    if cost_kind == "count":
        u = tree_costs(masks)
    elif cost_kind == "feature":
        u = tree_costs(masks, feature_costs=rng.uniform(0.2, 3.0, n_features))
    else:
        groups = np.array([0, 0, 1, 2, 2, 3, 4, 4])
        u = tree_costs(masks, groups=groups, group_costs=rng.uniform(0.5, 2.0, 5))
    r = rng.uniform(0.2, 3.0, m) if weighted else None
    return A, y, u, loss, r, fit_intercept


@pytest.mark.parametrize("frac", [0.3, 0.03])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_cvxpy(name, frac):
    A, y, u, loss, r, fit_intercept = _case(name)
    prob = TreeLasso(A, y, u, loss=loss, sample_weight=r, fit_intercept=fit_intercept)
    lam = frac * prob.lambda_max()
    res = prob.solve(lam)
    assert res.converged and res.kkt <= lasso.DEFAULT_TOL
    w = np.asarray(res.weights)
    assert np.all(w >= 0)
    w_ref, obj_ref = _cvxpy_solve(A, y, u, lam, loss, r, fit_intercept)
    assert abs(res.objective - obj_ref) <= 1e-6 * abs(obj_ref)
    # Our objective can only be at or below the reference (up to the reference's accuracy).
    assert res.objective <= obj_ref + 1e-9 * abs(obj_ref)
    np.testing.assert_array_equal(w > 1e-6, w_ref > 1e-6)
    assert (w > 0).sum() >= 1
    # Not on a support-change boundary: support weights are clearly positive.
    assert w[w > 0].min() > 1e-5


def test_tree_costs_by_hand():
    masks = np.array([[1, 1, 0, 0],
                      [0, 0, 1, 0],
                      [0, 0, 0, 0],
                      [1, 0, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(tree_costs(masks), [2, 1, 0, 3])
    np.testing.assert_allclose(tree_costs(masks, feature_costs=[1.0, 2.0, 0.5, 4.0]),
                               [3.0, 0.5, 0.0, 5.5])
    groups = [0, 0, 1, 1]
    # One per group by default; a tree pays once per group however many members it uses.
    np.testing.assert_array_equal(tree_costs(masks, groups=groups), [1, 1, 0, 2])
    np.testing.assert_allclose(tree_costs(masks, groups=groups, group_costs=[3.0, 5.0]),
                               [3.0, 5.0, 0.0, 8.0])
    # Without group_costs a group costs the sum of its members' feature costs.
    np.testing.assert_allclose(tree_costs(masks, [1.0, 2.0, 0.5, 4.0], groups=groups),
                               [3.0, 4.5, 0.0, 7.5])


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_lambda_max_is_the_threshold(loss):
    A, y, masks = _forest(150, 30, seed=3, loss=loss)
    u = tree_costs(masks, feature_costs=np.linspace(0.5, 2.0, masks.shape[1]))
    prob = TreeLasso(A, y, u, loss=loss)
    lmax = prob.lambda_max()
    assert lmax > 0
    assert lmax == lambda_max(A, y, u, loss=loss)
    at = prob.solve(lmax)
    assert not np.any(np.asarray(at.weights) > 0)
    below = prob.solve(lmax * (1 - 1e-3))
    assert np.any(np.asarray(below.weights) > 0)
    above = prob.solve(lmax * 1.5)
    assert not np.any(np.asarray(above.weights) > 0)


def test_lambda_max_with_a_free_tree():
    # A tree that splits on nothing costs 0 and is never penalized: lambda_max is where every
    # *penalized* tree is 0, with the free tree fitted.
    A, y, masks = _forest(120, 20, seed=4)
    rng = np.random.default_rng(0)
    A = np.concatenate([A, (y - y.mean() + rng.normal(size=y.size))[:, None] * 0.3], axis=1)
    masks = np.concatenate([masks, np.zeros((1, masks.shape[1]), bool)])
    u = tree_costs(masks)
    assert u[-1] == 0
    prob = TreeLasso(A, y, u)
    lmax = prob.lambda_max()
    at = np.asarray(prob.solve(lmax).weights)
    assert at[-1] > 0 and not np.any(at[:-1] > 0)
    assert np.any(np.asarray(prob.solve(0.99 * lmax).weights)[:-1] > 0)


def _one_feature_per_tree(m=200, n=8, seed=0, loss="squared"):
    """EBM-like forest (paper 3.2.4): tree i uses only feature i, so G is the identity."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n))
    beta = np.linspace(1.0, 0.2, n)
    y = A @ beta + 0.3 * rng.normal(size=m)
    if loss == "logistic":
        y = (y > 0).astype(float)
    return A, y, np.eye(n, dtype=bool)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_bisection_hits_every_k(loss):
    A, y, masks = _one_feature_per_tree(loss=loss)
    n = masks.shape[1]
    for k in range(1, n + 1):
        sel = select_k(A, y, masks, k, loss=loss)
        assert sel.exact and sel.k == k and sel.features.size == k
        np.testing.assert_array_equal(sel.features, selected_features(sel.weights, masks))
        # The lambda it reports really gives those features.
        res = solve_lasso(A, y, tree_costs(masks), sel.lam, loss=loss)
        np.testing.assert_array_equal(selected_features(res.weights, masks), sel.features)
    path = selection_path(A, y, masks, n, loss=loss)
    assert path.ks == list(range(1, n + 1)) and path.unreachable == {}
    for k, sel in path.selections.items():
        assert sel.features.size == k
    assert np.all(np.diff(path.lambdas) < 0)
    assert path.lambdas[0] == pytest.approx(path.lambda_max)


def test_bisection_on_a_real_forest_with_groups():
    A, y, masks = _forest(200, 40, seed=5)
    groups = np.array([0, 0, 1, 2, 2, 3, 4, 4])
    path = selection_path(A, y, masks, 5, groups=groups)
    assert set(path.ks) | set(path.unreachable) == set(range(1, 6))
    for k, sel in path.selections.items():
        assert sel.features.size == k
        # Selected = every feature of the trees with positive weight.
        used = masks[np.asarray(sel.weights) > 0].any(axis=0)
        np.testing.assert_array_equal(np.flatnonzero(used), sel.features)
    for k, why in path.unreachable.items():
        assert "jumps" in why or "no lambda" in why


def test_unreachable_k_is_reported():
    # Every tree uses two features: the count moves in steps of 2, odd k are unreachable.
    A, y, eye = _one_feature_per_tree(n=6)
    masks = np.repeat(eye, 2, axis=1)  # tree i uses features 2i and 2i+1
    with pytest.raises(UnreachableKError, match=r"k=3 is unreachable: the number of selected "
                                                r"features jumps from 2 .* to 4") as info:
        select_k(A, y, masks, 3)
    assert info.value.below.k == 2 and info.value.above.k == 4
    below = select_k(A, y, masks, 3, strict=False)
    assert not below.exact and below.k == 2
    path = selection_path(A, y, masks, 6)
    assert path.ks == [2, 4, 6]
    assert sorted(path.unreachable) == [1, 3, 5]
    assert "jumps from 0" in path.unreachable[1]


def test_zero_cost_trees_are_free_features():
    """A feature of cost 0 is free: its tree is never penalized, so it is selected at every
    lambda and counts toward k."""
    A, y, masks = _one_feature_per_tree(n=6)
    costs = np.array([1.0, 1.0, 1.0, 0.0, 1.0, 1.0])       # feature 3 is free
    for k in range(1, 7):
        sel = select_k(A, y, masks, k, feature_costs=costs)
        assert sel.k == k and 3 in sel.features.tolist()
    # two free features: k = 1 cannot be reached, and says why
    costs[0] = 0.0
    with pytest.raises(UnreachableKError, match=r"k=1 is unreachable: the zero-cost \(free\) "
                                                r"trees alone select 2 features") as info:
        select_k(A, y, masks, 1, feature_costs=costs)
    assert info.value.below is None and info.value.above.features.tolist() == [0, 3]
    sparsest = select_k(A, y, masks, 1, feature_costs=costs, strict=False)
    assert not sparsest.exact and sparsest.features.tolist() == [0, 3]
    assert select_k(A, y, masks, 2, feature_costs=costs).features.tolist() == [0, 3]
    # every tree free: lambda has no effect, every useful tree is kept
    with pytest.raises(UnreachableKError, match="zero-cost"):
        select_k(A, y, masks, 2, feature_costs=np.zeros(6))
    path = selection_path(A, y, masks, 6, feature_costs=costs)
    assert path.ks == [2, 3, 4, 5, 6] and sorted(path.unreachable) == [1]


def test_path_reports_ks_beyond_the_end():
    A, y, masks = _one_feature_per_tree(n=5)
    A[:, 4] = np.random.default_rng(1).normal(size=A.shape[0])  # pure noise tree
    y = A[:, :4] @ np.ones(4)  # noiseless: at tiny lambda the noise tree may still enter
    path = selection_path(A, y, masks, 5, lambda_min_ratio=0.5, n_lambdas=3)
    for k in set(range(1, 6)) - set(path.ks):
        assert k in path.unreachable


def test_deterministic():
    A, y, masks = _forest(150, 40, seed=6, loss="logistic")
    u = tree_costs(masks)
    runs = [solve_lasso(A, y, u, 1e-3, loss="logistic") for _ in range(2)]
    assert runs[0].weights.tobytes() == runs[1].weights.tobytes()
    assert runs[0].intercept == runs[1].intercept and runs[0].n_iter == runs[1].n_iter
    A2, y2, masks2 = _forest(150, 40, seed=6)
    sels = [select_k(A2, y2, masks2, 3, sketch="count", sketch_size=100) for _ in range(2)]
    assert sels[0].weights.tobytes() == sels[1].weights.tobytes()
    assert sels[0].lam == sels[1].lam
    paths = [selection_path(A2, y2, masks2, 4) for _ in range(2)]
    assert paths[0].lambdas.tobytes() == paths[1].lambdas.tobytes()
    for k in paths[0].ks:
        assert (paths[0].selections[k].weights.tobytes()
                == paths[1].selections[k].weights.tobytes())


def test_weights_nonnegative_along_a_path():
    A, y, masks = _forest(150, 40, seed=7)
    u = tree_costs(masks)
    lams = [0.5, 0.05, 0.005, 1e-4]
    res = lasso_path(A, y, u, lams)
    assert [r.lam for r in res] == lams  # returned in the order asked
    for r in res:
        assert r.converged and np.all(np.asarray(r.weights) >= 0)
    # Warm starts do not change the answer.
    cold = solve_lasso(A, y, u, 0.005)
    assert cold.objective == pytest.approx(res[2].objective, rel=1e-12)
    assert np.array_equal(np.asarray(cold.weights) > 0, np.asarray(res[2].weights) > 0)
    grid = lasso_path(A, y, u, n_lambdas=5)
    assert len(grid) == 5 and not np.any(np.asarray(grid[0].weights) > 0)


@pytest.mark.parametrize("kind", ["gaussian", "count", "rows"])
def test_sketch_close_to_unsketched(kind):
    A, y, masks = _forest(20_000, 30, seed=8)
    u = tree_costs(masks)
    full = TreeLasso(A, y, u)
    lam = 0.05 * full.lambda_max()
    exact = full.solve(lam)
    sk = TreeLasso(A, y, u, sketch=kind, sketch_size=2000, random_state=0)
    res = sk.solve(lam)
    # The full-data objective at the sketched solution is within 1% of the optimum.
    assert exact.objective <= res.objective <= exact.objective * 1.01
    assert res.objective == pytest.approx(full.objective(res.weights, res.intercept, lam))
    assert abs(res.solved_objective - exact.objective) <= 0.1 * exact.objective
    assert sk.lambda_max() == pytest.approx(full.lambda_max(), rel=0.1)


def test_rows_sketch_logistic():
    A, y, masks = _forest(5000, 20, seed=9, loss="logistic")
    u = tree_costs(masks)
    full = TreeLasso(A, y, u, loss="logistic")
    lam = 0.1 * full.lambda_max()
    res = TreeLasso(A, y, u, loss="logistic", sketch="rows", sketch_size=2500).solve(lam)
    assert res.objective <= full.solve(lam).objective * 1.02


def test_row_weights_match_repeated_rows():
    # Integer row weights are the same problem as repeated rows.
    A, y, masks = _forest(60, 20, seed=10)
    u = tree_costs(masks)
    reps = np.random.default_rng(0).integers(1, 4, size=60)
    a = solve_lasso(A, y, u, 0.01, sample_weight=reps)
    b = solve_lasso(np.repeat(A, reps, axis=0), np.repeat(y, reps), u, 0.01)
    np.testing.assert_allclose(a.weights, b.weights, rtol=1e-9, atol=1e-12)
    assert a.intercept == pytest.approx(b.intercept, rel=1e-9)


def test_not_converged_warns():
    A, y, masks = _forest(150, 40, seed=11, loss="logistic")
    with pytest.warns(Warning, match="stopped after 3 iterations"):
        res = solve_lasso(A, y, tree_costs(masks), 1e-4, loss="logistic", max_iter=3)
    assert not res.converged and res.n_iter == 3


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU with cupy")
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_gpu_matches_cpu(loss):
    import cupy

    A, y, masks = _forest(500, 40, seed=12, loss=loss)
    u = tree_costs(masks)
    cpu = solve_lasso(A, y, u, 1e-3, loss=loss)
    gpu = solve_lasso(cupy.asarray(A), y, u, 1e-3, loss=loss)
    assert isinstance(gpu.weights, cupy.ndarray)
    np.testing.assert_allclose(gpu.weights.get(), cpu.weights, rtol=1e-8, atol=1e-10)
    again = solve_lasso(cupy.asarray(A), y, u, 1e-3, loss=loss)
    assert again.weights.get().tobytes() == gpu.weights.get().tobytes()
    sel_c = select_k(A, y, masks, 3, loss=loss)
    sel_g = select_k(cupy.asarray(A), y, masks, 3, loss=loss)
    np.testing.assert_array_equal(sel_c.features, sel_g.features)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    A, y, masks = _forest(40, 10, seed=13)
    return A, y, masks, tree_costs(masks)


def test_bad_shapes(small):
    A, y, masks, u = small
    with pytest.raises(ValueError, match="y has length 39 but A has 40 rows"):
        solve_lasso(A, y[:-1], u, 0.1)
    with pytest.raises(ValueError, match=r"costs has length 9 but A has 10 columns"):
        solve_lasso(A, y, u[:-1], 0.1)
    with pytest.raises(ValueError, match="A must be 2-D"):
        solve_lasso(A[:, 0], y, u, 0.1)
    with pytest.raises(ValueError, match="tree_feature_masks has 9 rows but A has 10 columns"):
        select_k(A, y, masks[:-1], 1)
    with pytest.raises(ValueError, match="sample_weight has length 3"):
        solve_lasso(A, y, u, 0.1, sample_weight=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="groups must have shape"):
        tree_costs(masks, groups=[0, 1])
    with pytest.raises(ValueError, match="tree_feature_masks must be 2-D"):
        tree_costs(masks[0])
    with pytest.raises(ValueError, match=r"weights has shape \(9,\) but tree_feature_masks "
                                         r"has 10 rows"):
        selected_features(np.ones(9), masks)
    with pytest.raises(ValueError, match="warm_start has"):
        TreeLasso(A, y, u).solve(0.1, warm_start=solve_lasso(A[:, :5], y, u[:5], 0.1))


def test_bad_values(small):
    A, y, masks, u = small
    bad_u = u.copy()
    bad_u[3] = -1.0
    with pytest.raises(ValueError, match=r"costs must be >= 0; entry 3 is -1\.0"):
        solve_lasso(A, y, bad_u, 0.1)
    with pytest.raises(ValueError, match="feature_costs must be >= 0"):
        tree_costs(masks, feature_costs=-np.ones(masks.shape[1]))
    with pytest.raises(ValueError, match="group_costs must be >= 0"):
        tree_costs(masks, groups=np.zeros(masks.shape[1], int), group_costs=[-2.0])
    with pytest.raises(ValueError, match="group_costs has length 1 but groups uses labels up to 1"):
        tree_costs(masks, groups=np.arange(masks.shape[1]) % 2, group_costs=[1.0])
    with pytest.raises(ValueError, match="either feature_costs or group_costs"):
        tree_costs(masks, np.ones(masks.shape[1]), groups=np.zeros(masks.shape[1], int),
                   group_costs=[1.0])
    with pytest.raises(ValueError, match="group_costs was given without groups"):
        tree_costs(masks, group_costs=[1.0])
    with pytest.raises(ValueError, match="groups labels must be >= 0"):
        tree_costs(masks, groups=-np.ones(masks.shape[1], int))
    with pytest.raises(ValueError, match="boolean"):
        tree_costs(masks * 2)
    with pytest.raises(ValueError, match="lambda must be a finite number >= 0"):
        solve_lasso(A, y, u, -0.1)
    with pytest.raises(ValueError, match="lambda must be a finite number >= 0"):
        solve_lasso(A, y, u, float("nan"))
    A_nan = A.copy()
    A_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="A contains NaN"):
        solve_lasso(A_nan, y, u, 0.1)
    with pytest.raises(ValueError, match="loss must be one of"):
        solve_lasso(A, y, u, 0.1, loss="hinge")
    with pytest.raises(ValueError, match=r"loss='logistic' needs y in \{0, 1\}"):
        solve_lasso(A, y, u, 0.1, loss="logistic")
    with pytest.raises(ValueError, match="needs both classes"):
        solve_lasso(A, np.ones_like(y), u, 0.1, loss="logistic")
    with pytest.raises(ValueError, match="sample_weight must be >= 0"):
        solve_lasso(A, y, u, 0.1, sample_weight=-np.ones_like(y))
    with pytest.raises(ValueError, match="positive sum"):
        solve_lasso(A, y, u, 0.1, sample_weight=np.zeros_like(y))
    with pytest.raises(ValueError, match="tol must be a positive number"):
        solve_lasso(A, y, u, 0.1, tol=0)
    with pytest.raises(ValueError, match="max_iter must be a positive integer"):
        solve_lasso(A, y, u, 0.1, max_iter=0)


def test_bad_sketch(small):
    A, y, masks, u = small
    with pytest.raises(ValueError, match="sketch must be None or one of"):
        solve_lasso(A, y, u, 0.1, sketch="srht")
    with pytest.raises(ValueError, match=r"sketch_size must be an integer in \[1, 40\]"):
        solve_lasso(A, y, u, 0.1, sketch="count", sketch_size=41)
    yb = (y > np.median(y)).astype(float)
    with pytest.raises(ValueError, match="only defined for the squared loss; use sketch='rows'"):
        solve_lasso(A, yb, u, 0.1, loss="logistic", sketch="gaussian")


def test_bad_k(small):
    A, y, masks, u = small
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        select_k(A, y, masks, 0)
    with pytest.raises(ValueError, match="k must be an integer"):
        select_k(A, y, masks, 2.5)
    n_used = int(masks.any(axis=0).sum())
    with pytest.raises(ValueError, match=rf"k={n_used + 1} is larger than the number of features "
                                         rf"the forest uses: its trees split on {n_used} of the "
                                         rf"{masks.shape[1]} features"):
        select_k(A, y, masks, n_used + 1)
    with pytest.raises(ValueError, match="k_max must be >= 1"):
        selection_path(A, y, masks, 0)
    with pytest.raises(ValueError, match=rf"k_max={n_used + 1} is larger"):
        selection_path(A, y, masks, n_used + 1)
