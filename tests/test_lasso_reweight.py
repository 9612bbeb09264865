"""The reweighting steps of the tree-weight lasso (``gpufs.lasso``: ``usage_discount``, the
``discount`` of ``tree_costs``, ``TreeLasso.with_costs`` and ``reweight_steps`` of
``select_k`` / ``selections_by_k`` / ``select_at_lambda``): the discount by hand, near-copies
collapsing onto one column, the path agreeing with select_k, bad input."""

import numpy as np
import pytest

from _lasso_data import _forest
from gpufs.lasso import (
    Datafit,
    Reweighting,
    TreeLasso,
    UnreachableKError,
    select_at_lambda,
    select_k,
    selected_features,
    selections_by_k,
    tree_costs,
    usage_discount,
)

MASKS = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 0]], dtype=bool)


def test_usage_discount_by_hand():
    w = np.array([1.0, 0.5, 0.0, 0.0])
    # usage v = G w = [1.5, 0.5, 0]; eps = 0.5 * 1.5 = 0.75; factor = eps / (eps + v)
    np.testing.assert_allclose(usage_discount(w, MASKS), [0.75 / 2.25, 0.75 / 1.25, 1.0])
    np.testing.assert_allclose(usage_discount(w, MASKS, eps=1.0), [1.5 / 3.0, 1.5 / 2.0, 1.0])
    # per group: group 0 = features 0 and 1 (used by trees 0 and 1), group 1 = feature 2
    np.testing.assert_allclose(usage_discount(w, MASKS, groups=[0, 0, 1]), [0.75 / 2.25, 1.0])
    np.testing.assert_array_equal(usage_discount(np.zeros(4), MASKS), np.ones(3))


def test_tree_costs_with_a_discount_by_hand():
    disc = np.array([0.5, 1.0, 0.0])
    np.testing.assert_allclose(
        tree_costs(MASKS, [1.0, 2.0, 3.0], discount=disc), [0.5, 0.5 + 2.0, 0.0, 2.0]
    )
    # groups: the discount is per group (tree 1 touches group 0 once)
    np.testing.assert_allclose(
        tree_costs(MASKS, groups=[0, 0, 1], discount=[0.25, 1.0]), [0.25, 0.25, 1.0, 0.25]
    )
    np.testing.assert_array_equal(tree_costs(MASKS, discount=np.ones(3)), tree_costs(MASKS))


def test_bad_discounts():
    with pytest.raises(ValueError, match="discount has shape"):
        tree_costs(MASKS, discount=np.ones(2))
    with pytest.raises(ValueError, match=r"lie in \[0, 1\]"):
        tree_costs(MASKS, discount=[0.5, 1.5, 1.0])
    with pytest.raises(ValueError, match="eps must be > 0"):
        usage_discount(np.ones(4), MASKS, eps=0.0)
    with pytest.raises(ValueError, match="weights has shape"):
        usage_discount(np.ones(3), MASKS)
    A, y, masks = _forest(100, 10, seed=1)
    with pytest.raises(ValueError, match="reweight_steps must be an integer >= 0"):
        select_k(A, y, masks, 2, reweight=Reweighting(steps=-1))
    with pytest.raises(ValueError, match="reweight_eps must be a number > 0"):
        select_k(A, y, masks, 2, reweight=Reweighting(steps=1, eps=0))
    with pytest.raises(ValueError, match="lam must be a finite number >= 0"):
        select_at_lambda(A, y, masks, -1.0)


def test_with_costs_solves_the_problem_with_those_costs():
    A, y, masks = _forest(200, 30, seed=2)
    u = tree_costs(masks)
    u2 = tree_costs(masks, discount=np.linspace(0.2, 1.0, masks.shape[1]))
    base = TreeLasso(A, y, u)
    lam = 0.3 * base.lambda_max()
    other = base.with_costs(u2)
    fresh = TreeLasso(A, y, u2)
    assert other.lambda_max() == fresh.lambda_max() != base.lambda_max()
    np.testing.assert_array_equal(other.solve(lam).weights, fresh.solve(lam).weights)
    # the original keeps its costs
    np.testing.assert_array_equal(base.solve(lam).weights, TreeLasso(A, y, u).solve(lam).weights)


def _two_copies_and_a_weaker_signal(seed):
    """Columns 0 and 1: noisy copies of s1; column 2: a noisy s2 that y depends on less."""
    rng = np.random.RandomState(seed)
    m = 500
    s1, s2 = rng.randn(m), rng.randn(m)
    A = np.column_stack([s1 + 0.5 * rng.randn(m), s1 + 0.5 * rng.randn(m), s2 + 0.5 * rng.randn(m)])
    y = s1 + 0.6 * s2 + 0.1 * rng.randn(m)
    return A, y, np.eye(3, dtype=bool)


@pytest.mark.parametrize("seed", [0, 3, 5])
def test_reweighting_moves_the_weight_of_near_copies_onto_one(seed):
    A, y, masks = _two_copies_and_a_weaker_signal(seed)
    plain = select_k(A, y, masks, 2)
    # The plain lasso keeps both copies: averaging their noise pays as much as s2 does.
    assert plain.features.tolist() == [0, 1]
    rw = select_k(A, y, masks, 2, reweight=Reweighting(steps=3))
    assert rw.exact and rw.k == 2 and 2 in rw.features.tolist()
    np.testing.assert_array_equal(rw.features, selected_features(rw.weights, masks))
    assert rw.n_solves > plain.n_solves
    # The loss it reports is the objective without the (discounted) penalty.
    assert rw.loss <= rw.objective and plain.loss <= plain.objective


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_path_entries_are_what_select_k_selects(loss):
    A, y, masks = _forest(300, 40, seed=4, loss=loss)
    path = selections_by_k(
        A, y, masks, 5, datafit=Datafit(loss=loss), reweight=Reweighting(steps=3)
    )
    plain = selections_by_k(A, y, masks, 5, datafit=Datafit(loss=loss))
    assert path.lambda_max == plain.lambda_max
    np.testing.assert_array_equal(path.lambdas, plain.lambdas)
    assert path.n_solves > plain.n_solves
    for k in range(1, 6):
        if k in path.selections:
            sel = select_k(
                A, y, masks, k, datafit=Datafit(loss=loss), reweight=Reweighting(steps=3)
            )
            assert path.selections[k].features.tolist() == sel.features.tolist()
            assert path.selections[k].lam == sel.lam
        else:
            with pytest.raises(UnreachableKError):
                select_k(A, y, masks, k, datafit=Datafit(loss=loss), reweight=Reweighting(steps=3))
            assert path.unreachable[k]


def test_select_at_lambda():
    A, y, masks = _two_copies_and_a_weaker_signal(0)
    lam = select_k(A, y, masks, 2).lam
    plain = select_at_lambda(A, y, masks, lam)
    assert plain.features.tolist() == [0, 1] and plain.k == 2
    rw = select_at_lambda(A, y, masks, lam, reweight=Reweighting(steps=3))
    # at the same lambda the copies collapse onto one; s2 does not pay at this lambda yet
    assert rw.k == 1 and rw.features.tolist() in ([0], [1])
    assert rw.lam == lam
    # zero steps is the plain lasso; no tree has weight above lambda_max
    lmax = TreeLasso(A, y, tree_costs(masks)).lambda_max()
    assert select_at_lambda(A, y, masks, 2 * lmax, reweight=Reweighting(steps=3)).k == 0


def test_record_holds_the_last_search():
    A, y, masks = _two_copies_and_a_weaker_signal(0)
    record = {}
    sel = select_k(A, y, masks, 2, reweight=Reweighting(steps=3), record=record)
    assert record["path"].selections[2].features.tolist() == sel.features.tolist()


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_path_shares_the_solves_its_searches_repeat(loss, monkeypatch):
    """Issue 35, item 2: the searches for k = 1..k_max (each with its reweighting steps)
    descend from lambda_max by the same halvings, so selections_by_k solves each common step
    once (``_search._sharing``). The path is the same bit for bit as with every search solving
    on its own, with fewer solves (squared loss on this forest: 74 instead of 91)."""
    import contextlib

    from gpufs.lasso import _search

    calls = []
    solve = TreeLasso.solve

    def counted(self, lam, **kw):
        calls.append(lam)
        return solve(self, lam, **kw)

    monkeypatch.setattr(TreeLasso, "solve", counted)
    A, y, masks = _forest(300, 40, seed=4, loss=loss)

    def path():
        calls.clear()
        p = selections_by_k(
            A, y, masks, 6, datafit=Datafit(loss=loss), reweight=Reweighting(steps=3)
        )
        return p, len(calls)

    shared, n_shared = path()
    with monkeypatch.context() as m:
        m.setattr(_search, "_sharing", contextlib.nullcontext)
        alone, n_alone = path()
    assert shared.ks == alone.ks and shared.unreachable == alone.unreachable
    for k, sel in alone.selections.items():
        other = shared.selections[k]
        assert other.lam == sel.lam and other.loss == sel.loss
        np.testing.assert_array_equal(other.features, sel.features)
        np.testing.assert_array_equal(np.asarray(other.weights), np.asarray(sel.weights))
    # n_solves counts the solves each search used, as before.
    assert shared.n_solves == alone.n_solves == n_alone
    assert n_shared < 0.85 * n_alone, (n_shared, n_alone)
