"""The settings records of the lasso's entry points (``gpufs.lasso._options``): each refuses a
bad value when it is made, with the message the entry points gave before they took records;
an entry point refuses anything but its record; the records' defaults are the entry points'."""

import numpy as np
import pytest

from _lasso_data import _forest
from gpufs.lasso import (
    Datafit,
    KSearch,
    Reweighting,
    SolverOptions,
    select_k,
    selections_by_k,
    solve_lasso,
    tree_costs,
)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Datafit(loss="hinge"), "loss must be one of"),
        (lambda: Datafit(sketch="srht"), "sketch must be None or one of"),
        (lambda: Datafit(loss="logistic", sketch="count"), "only defined for the squared loss"),
        (lambda: KSearch(lambda_min_ratio=1.0), r"lambda_min_ratio must be in \(0, 1\)"),
        (lambda: KSearch(bisect_rtol=-1e-3), "bisect_rtol must be a number >= 0"),
        (lambda: KSearch(max_bisect=2.5), "max_bisect must be an integer >= 0"),
        (lambda: Reweighting(steps=True), "reweight_steps must be an integer >= 0"),
        (lambda: Reweighting(eps=0.0), "reweight_eps must be a number > 0"),
        (lambda: SolverOptions(tol=0.0), "tol must be a positive number"),
        (lambda: SolverOptions(max_iter=0), "max_iter must be a positive integer"),
        # not finite: tol=inf made every solve "converge" at once (then "k=2 is unreachable")
        (lambda: SolverOptions(tol=float("inf")), "tol must be a positive number"),
        (lambda: SolverOptions(tol=float("nan")), "tol must be a positive number"),
        (lambda: KSearch(bisect_rtol=float("inf")), "bisect_rtol must be a number >= 0"),
        (lambda: Reweighting(eps=float("inf")), "reweight_eps must be a number > 0"),
        # fit_intercept: a bool only (these failed later inside numpy, or were read as truthy)
        (lambda: Datafit(fit_intercept="yes"), "fit_intercept must be a bool"),
        (lambda: Datafit(fit_intercept=None), "fit_intercept must be a bool"),
        (lambda: Datafit(fit_intercept=1), "fit_intercept must be a bool"),
        # random_state: scikit-learn's check_random_state seeds (and a Generator)
        (lambda: Datafit(random_state="x"), "random_state must be None, an int"),
        (lambda: Datafit(random_state=-5), "random_state must be None, an int"),
        (lambda: Datafit(random_state=2**32), "random_state must be None, an int"),
        (lambda: Datafit(random_state=1.5), "random_state must be None, an int"),
        (lambda: Datafit(random_state=True), "random_state must be None, an int"),
    ],
)
def test_records_refuse_bad_values_when_made(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "seed", [None, 0, 7, np.int64(3), 2**32 - 1, np.random.RandomState(0), np.random.default_rng(0)]
)
def test_datafit_takes_every_random_state_scikit_learn_does(seed):
    fit = Datafit(sketch="gaussian", random_state=seed, fit_intercept=np.bool_(False))
    assert isinstance(fit.rng(), np.random.Generator)


def test_a_random_state_instance_seeds_the_sketch_reproducibly():
    A, y, masks = _forest(200, 12, n_features=6)
    a = solve_lasso(
        A,
        y,
        np.ones(A.shape[1]),
        1e-3,
        datafit=Datafit(sketch="gaussian", random_state=np.random.RandomState(5)),
    )
    b = solve_lasso(
        A,
        y,
        np.ones(A.shape[1]),
        1e-3,
        datafit=Datafit(sketch="gaussian", random_state=np.random.RandomState(5)),
    )
    np.testing.assert_array_equal(a.weights, b.weights)


def test_records_are_frozen():
    with pytest.raises(AttributeError):
        SolverOptions().tol = 1.0


def test_entry_points_take_only_their_records():
    A, y, masks = _forest(80, 12, n_features=6)
    with pytest.raises(TypeError, match="datafit must be a gpufs.lasso.Datafit, got dict"):
        solve_lasso(A, y, tree_costs(masks), 0.1, datafit={"loss": "squared"})
    with pytest.raises(TypeError, match="solver must be a gpufs.lasso.SolverOptions"):
        solve_lasso(A, y, tree_costs(masks), 0.1, solver=1e-9)
    with pytest.raises(TypeError, match="costs must be a gpufs.lasso.FeatureCosts"):
        select_k(A, y, masks, 2, costs=np.ones(6))
    with pytest.raises(TypeError, match="search must be a gpufs.lasso.KSearch"):
        select_k(A, y, masks, 2, search={"bisect_rtol": 1e-3})
    with pytest.raises(TypeError, match="reweight must be a gpufs.lasso.Reweighting"):
        selections_by_k(A, y, masks, 2, reweight=2)


def test_lambda_min_ratio_none_is_each_entry_points_own_default():
    """KSearch() leaves lambda_min_ratio to the entry point: 1e-4 for the grid of
    selections_by_k (an explicit 1e-4 gives the same sweep), 1e-6 for select_k."""
    A, y, masks = _forest(120, 30, seed=1)
    a = selections_by_k(A, y, masks, 4)
    b = selections_by_k(A, y, masks, 4, search=KSearch(lambda_min_ratio=1e-4))
    np.testing.assert_array_equal(a.lambdas, b.lambdas)
    assert KSearch().ratio(1e-6) == 1e-6 and KSearch(lambda_min_ratio=0.5).ratio(1e-6) == 0.5
