"""Test data for the tree-weight lasso tests: small forests of scikit-learn trees, one-feature
trees, the ``small`` fixture (import it by name), and a cvxpy reference solver."""

import warnings

import numpy as np
import pytest
from sklearn.tree import DecisionTreeRegressor

from gpufs.lasso import tree_costs


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
        tree = DecisionTreeRegressor(
            max_depth=1 + i % depth_max, max_features=0.5, random_state=int(rng.integers(1 << 30))
        )
        tree.fit(X[idx], y[idx] - y.mean())
        A[:, i] = tree.predict(X)
        used = tree.tree_.feature[tree.tree_.feature >= 0]
        masks[i, used] = True
    return A, y, masks


@pytest.fixture(scope="module")
def small():
    """A forest of 10 trees on 40 rows: ``(A, y, masks, tree_costs(masks))``."""
    A, y, masks = _forest(40, 10, seed=13)
    return A, y, masks, tree_costs(masks)


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
        prob.solve(
            solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, max_iter=500
        )
    return np.asarray(w.value), prob.value


def _one_feature_per_tree(m=200, n=8, seed=0, loss="squared"):
    """EBM-like forest (ControlBurn, section 3.2.4): tree i uses only feature i, so G is the
    identity."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n))
    beta = np.linspace(1.0, 0.2, n)
    y = A @ beta + 0.3 * rng.normal(size=m)
    if loss == "logistic":
        y = (y > 0).astype(float)
    return A, y, np.eye(n, dtype=bool)
