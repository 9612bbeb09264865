"""The tree-weight lasso's solver (``gpufs.lasso._solver``): against cvxpy (Clarabel, tight
tolerances) on small forests of real scikit-learn trees, lambda_max, warm-started paths,
sketching, row weights, determinism, convergence warnings and every rejected input."""

import numpy as np
import pytest

from _lasso_data import _cvxpy_solve, _forest, small  # noqa: F401 (a fixture)
from gpufs import lasso
from gpufs._device import gpu_available
from gpufs.lasso import (
    Datafit,
    SolverOptions,
    TreeLasso,
    lambda_max,
    lasso_path,
    select_k,
    solve_lasso,
    tree_costs,
)

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
    prob = TreeLasso(
        A, y, u, datafit=Datafit(loss=loss, sample_weight=r, fit_intercept=fit_intercept)
    )
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


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_lambda_max_is_the_threshold(loss):
    A, y, masks = _forest(150, 30, seed=3, loss=loss)
    u = tree_costs(masks, feature_costs=np.linspace(0.5, 2.0, masks.shape[1]))
    prob = TreeLasso(A, y, u, datafit=Datafit(loss=loss))
    lmax = prob.lambda_max()
    assert lmax > 0
    assert lmax == lambda_max(A, y, u, datafit=Datafit(loss=loss))
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
    sk = TreeLasso(A, y, u, datafit=Datafit(sketch=kind, sketch_size=2000, random_state=0))
    res = sk.solve(lam)
    # The full-data objective at the sketched solution is within 1% of the optimum.
    assert exact.objective <= res.objective <= exact.objective * 1.01
    assert res.objective == pytest.approx(full.objective(res.weights, res.intercept, lam))
    assert abs(res.solved_objective - exact.objective) <= 0.1 * exact.objective
    assert sk.lambda_max() == pytest.approx(full.lambda_max(), rel=0.1)


def test_rows_sketch_logistic():
    A, y, masks = _forest(5000, 20, seed=9, loss="logistic")
    u = tree_costs(masks)
    full = TreeLasso(A, y, u, datafit=Datafit(loss="logistic"))
    lam = 0.1 * full.lambda_max()
    rows = Datafit(loss="logistic", sketch="rows", sketch_size=2500)
    res = TreeLasso(A, y, u, datafit=rows).solve(lam)
    assert res.objective <= full.solve(lam).objective * 1.02


def test_row_weights_match_repeated_rows():
    # Integer row weights are the same problem as repeated rows.
    A, y, masks = _forest(60, 20, seed=10)
    u = tree_costs(masks)
    reps = np.random.default_rng(0).integers(1, 4, size=60)
    a = solve_lasso(A, y, u, 0.01, datafit=Datafit(sample_weight=reps))
    b = solve_lasso(np.repeat(A, reps, axis=0), np.repeat(y, reps), u, 0.01)
    np.testing.assert_allclose(a.weights, b.weights, rtol=1e-9, atol=1e-12)
    assert a.intercept == pytest.approx(b.intercept, rel=1e-9)


def test_not_converged_warns():
    A, y, masks = _forest(150, 40, seed=11, loss="logistic")
    with pytest.warns(Warning, match="stopped after 3 iterations"):
        res = solve_lasso(
            A,
            y,
            tree_costs(masks),
            1e-4,
            datafit=Datafit(loss="logistic"),
            solver=SolverOptions(max_iter=3),
        )
    assert not res.converged and res.n_iter == 3


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU with cupy")
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_gpu_matches_cpu(loss):
    import cupy

    A, y, masks = _forest(500, 40, seed=12, loss=loss)
    u = tree_costs(masks)
    cpu = solve_lasso(A, y, u, 1e-3, datafit=Datafit(loss=loss))
    gpu = solve_lasso(cupy.asarray(A), y, u, 1e-3, datafit=Datafit(loss=loss))
    assert isinstance(gpu.weights, cupy.ndarray)
    np.testing.assert_allclose(gpu.weights.get(), cpu.weights, rtol=1e-8, atol=1e-10)
    again = solve_lasso(cupy.asarray(A), y, u, 1e-3, datafit=Datafit(loss=loss))
    assert again.weights.get().tobytes() == gpu.weights.get().tobytes()
    sel_c = select_k(A, y, masks, 3, datafit=Datafit(loss=loss))
    sel_g = select_k(cupy.asarray(A), y, masks, 3, datafit=Datafit(loss=loss))
    np.testing.assert_array_equal(sel_c.features, sel_g.features)


def test_solver_is_deterministic():
    A, y, masks = _forest(150, 40, seed=6, loss="logistic")
    u = tree_costs(masks)
    runs = [solve_lasso(A, y, u, 1e-3, datafit=Datafit(loss="logistic")) for _ in range(2)]
    assert runs[0].weights.tobytes() == runs[1].weights.tobytes()
    assert runs[0].intercept == runs[1].intercept and runs[0].n_iter == runs[1].n_iter


def test_bad_shapes(small):
    A, y, masks, u = small
    with pytest.raises(ValueError, match="y has length 39 but A has 40 rows"):
        solve_lasso(A, y[:-1], u, 0.1)
    with pytest.raises(ValueError, match=r"costs has length 9 but A has 10 columns"):
        solve_lasso(A, y, u[:-1], 0.1)
    with pytest.raises(ValueError, match="A must be 2-D"):
        solve_lasso(A[:, 0], y, u, 0.1)
    with pytest.raises(ValueError, match="sample_weight has length 3"):
        solve_lasso(A, y, u, 0.1, datafit=Datafit(sample_weight=[1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="warm_start has"):
        TreeLasso(A, y, u).solve(0.1, warm_start=solve_lasso(A[:, :5], y, u[:5], 0.1))


def test_bad_values(small):
    A, y, masks, u = small
    bad_u = u.copy()
    bad_u[3] = -1.0
    with pytest.raises(ValueError, match=r"costs must be >= 0; entry 3 is -1\.0"):
        solve_lasso(A, y, bad_u, 0.1)
    with pytest.raises(ValueError, match="lambda must be a finite number >= 0"):
        solve_lasso(A, y, u, -0.1)
    with pytest.raises(ValueError, match="lambda must be a finite number >= 0"):
        solve_lasso(A, y, u, float("nan"))
    A_nan = A.copy()
    A_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="A contains NaN"):
        solve_lasso(A_nan, y, u, 0.1)
    with pytest.raises(ValueError, match="loss must be one of"):
        solve_lasso(A, y, u, 0.1, datafit=Datafit(loss="hinge"))
    with pytest.raises(ValueError, match=r"loss='logistic' needs y in \{0, 1\}"):
        solve_lasso(A, y, u, 0.1, datafit=Datafit(loss="logistic"))
    with pytest.raises(ValueError, match="needs both classes"):
        solve_lasso(A, np.ones_like(y), u, 0.1, datafit=Datafit(loss="logistic"))
    with pytest.raises(ValueError, match="sample_weight must be >= 0"):
        solve_lasso(A, y, u, 0.1, datafit=Datafit(sample_weight=-np.ones_like(y)))
    with pytest.raises(ValueError, match="positive sum"):
        solve_lasso(A, y, u, 0.1, datafit=Datafit(sample_weight=np.zeros_like(y)))
    with pytest.raises(ValueError, match="tol must be a positive number"):
        solve_lasso(A, y, u, 0.1, solver=SolverOptions(tol=0))
    with pytest.raises(ValueError, match="max_iter must be a positive integer"):
        solve_lasso(A, y, u, 0.1, solver=SolverOptions(max_iter=0))


def test_bad_sketch(small):
    A, y, masks, u = small
    with pytest.raises(ValueError, match="sketch must be None or one of"):
        solve_lasso(A, y, u, 0.1, datafit=Datafit(sketch="srht"))
    with pytest.raises(ValueError, match=r"sketch_size must be an integer in \[1, 40\]"):
        solve_lasso(A, y, u, 0.1, datafit=Datafit(sketch="count", sketch_size=41))
    yb = (y > np.median(y)).astype(float)
    with pytest.raises(ValueError, match="only defined for the squared loss; use sketch='rows'"):
        solve_lasso(A, yb, u, 0.1, datafit=Datafit(loss="logistic", sketch="gaussian"))


def test_proximal_newton_line_search_does_not_creep(monkeypatch):
    """The logistic solver's backtracking takes about one objective value per Newton step.

    Its Armijo test compared objectives whose predicted decrease had fallen below one ulp:
    near every solution it failed until the step had halved ~28 times, each try a pass over
    the rows, so ControlBurn on breast cancer (path_k_max=15) made 1.18 million objective
    evaluations for 42,702 Newton steps and took 100 s (now 3,259 for 2,687, 6 s), with the
    same selections."""
    import warnings

    from sklearn.datasets import load_breast_cancer

    from gpufs import ControlBurnClassifier
    from gpufs.lasso import _models

    counts = {"value": 0, "newton_hess": 0}
    for name in counts:
        original = getattr(_models._DirectLogistic, name)

        def counted(self, *a, _f=original, _n=name, **k):
            counts[_n] += 1
            return _f(self, *a, **k)

        monkeypatch.setattr(_models._DirectLogistic, name, counted)
    X, y = load_breast_cancer(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ControlBurnClassifier(n_features_to_select=3, random_state=0).fit(X, y)
    assert counts["newton_hess"] > 0  # the proximal Newton path ran
    # one value per accepted step, plus the first of each solve and a few halvings
    assert counts["value"] <= 3 * counts["newton_hess"] + 200, counts


def _rank_deficient_forest(m=27, n_base=3, copies=6, seed=0):
    """Trees that predict the same thing on a small table, as a depth-2 forest does on
    scikit-learn's check tables: ``n_base`` step columns, each repeated ``copies`` times,
    plus their pairwise sums (rank ``n_base`` among ``n_base * copies + 3`` trees), with
    costs that differ by about 1 % between the copies (as reweighted costs do)."""
    rng = np.random.default_rng(seed)
    base = np.stack([(rng.random(m) < 0.5) * rng.normal(1.0, 0.3) for _ in range(n_base)], 1)
    cols = [base[:, j] for _ in range(copies) for j in range(n_base)]
    cols += [base[:, 0] + base[:, 1], base[:, 1] + base[:, 2], base[:, 0] + base[:, 2]]
    A = np.stack(cols, 1)
    y = base @ np.array([1.5, -1.0, 0.7]) + 0.1 * rng.normal(size=m)
    u = 1.0 + 0.01 * rng.random(A.shape[1])
    return A, y, u


@pytest.mark.parametrize("seed", [0, 1])
def test_rank_deficient_support_is_polished(seed):
    """Duplicate trees make the support's Hessian singular: the Newton polish failed and FISTA
    crept along the flat directions, where only the small cost differences pull (1,000-1,500
    iterations per solve of this path, 3,500 on scikit-learn's check tables). The polish in
    the Hessian's range plus the drift along its null space reaches a KKT point in a few dozen
    iterations, at the optimal objective."""
    A, y, u = _rank_deficient_forest(seed=seed)
    path = lasso_path(A, y, u, n_lambdas=8, lambda_min_ratio=1e-3)
    for res in path:
        assert res.converged and res.kkt <= 1e-9
        assert res.n_iter <= 100, [r.n_iter for r in path]
    for res in path[1::3]:
        _, ref = _cvxpy_solve(A, y, u, res.lam, "squared")
        assert res.objective <= ref + 1e-9 * max(1.0, abs(ref))
