"""The boosting loop (``gpufs.engine.boosting.fit_boosting``): rounds computed by hand, the
selection record, validation losses and early stopping, the softmax layout (one tree per
class per round, all fit at the round's start), unit hessians, and row-order invariance of
fitted ensembles."""

import numpy as np
import pytest

from gpufs import GBFSClassifier, GBFSRegressor
from gpufs.backends.cpu import CPUBackend
from gpufs.engine.binning import BinMapper
from gpufs.engine.boosting import BoostingParams, DeviceRows, SelectionRecord, fit_boosting
from gpufs.engine.grower import TreeParams, grow_tree
from gpufs.engine.objectives import Softmax, SquaredError
from gpufs.engine.penalties import PenaltyState
from gpufs.engine.quantize import fixed_point_scale, quantize

CPU = CPUBackend()

# Four rows, one feature with bins (0, 0, 1, 1), y = (0, 0, 2, 2): the base score is 1 and
# every round's stump splits bin 0 from bin 1. Squared error g = raw - y, h = 1; with
# reg_lambda = 0 and learning rate 1/2 each leaf moves its rows halfway to their target:
#   round 1: raw (1, 1, 1, 1) -> (0.5, 0.5, 1.5, 1.5), mean (raw - y)^2 = 0.25
#   round 2: -> (0.25, 0.25, 1.75, 1.75), 0.0625;  round 3: -> 0.125 / 1.875, 0.015625
XB = np.array([[0], [0], [1], [1]], np.uint8)
Y = np.array([0.0, 0.0, 2.0, 2.0])
MAPPER = BinMapper.from_dict(
    {"max_bins": 255, "subsample": None, "random_state": 0, "cuts": [[0.5]]}
)


def _fit(n_estimators=3, eval_data=None, n_iter_no_change=None, mu=0.0):
    params = BoostingParams(
        n_estimators=n_estimators,
        n_iter_no_change=n_iter_no_change,
        tree=TreeParams(max_depth=1, reg_lambda=0.0, learning_rate=0.5),
    )
    ps = PenaltyState(mu, np.ones(1), np.zeros(1, np.int32))
    val = None if eval_data is None else DeviceRows(CPU, *eval_data)
    return fit_boosting(CPU, DeviceRows(CPU, XB, Y), SquaredError(), ps, MAPPER, params, val)


def test_rounds_computed_by_hand():
    ens, record, n_rounds = _fit()
    assert n_rounds == 3 and ens.n_trees == 3 and ens.base_score.tolist() == [1.0]
    for t, step in zip(ens.trees, (0.5, 0.25, 0.125)):
        assert t.feature.tolist() == [0, -1, -1] and t.bin_threshold[0] == 0
        assert t.value[1:].tolist() == [-step, step]
    raw = ens.predict_binned(XB, CPU)[:, 0]
    assert raw.tolist() == [0.125, 0.125, 1.875, 1.875]
    assert isinstance(record, SelectionRecord)
    assert record.tree_column == [0, 0, 0]
    assert record.features_added == [[0], [], []]
    assert record.train_loss == [0.25, 0.0625, 0.015625]
    assert all(np.isnan(v) for v in record.val_loss) and len(record.val_loss) == 3
    assert record.as_dict()["train_loss"] == record.train_loss


def test_a_penalty_no_split_pays_gives_constant_trees():
    ens, record, n_rounds = _fit(mu=10.0)  # gain 2 at most (1/2 * 4 / 1): never pays
    assert n_rounds == 3 and all((t.feature == -1).all() for t in ens.trees)
    assert record.features_added == [[], [], []] and record.train_loss == [1.0] * 3


def test_validation_loss_and_early_stopping_at_the_best_round():
    # The validation rows want 1 everywhere: the base score is their best model and every
    # round moves away from it, so round 1 is the best and one worse round stops the fit.
    y_val = np.ones(4)
    ens, record, n_rounds = _fit(n_estimators=10, eval_data=(XB, y_val, None), n_iter_no_change=1)
    assert ens.n_trees == 2 and n_rounds == 1
    assert record.val_loss == [0.25, 0.5625]  # mean (raw - 1)^2 after rounds 1 and 2
    ens, record, n_rounds = _fit(n_estimators=4, eval_data=(XB, y_val, None))
    assert ens.n_trees == 4 and n_rounds == 4  # without n_iter_no_change: every round
    assert len(record.val_loss) == 4 and record.val_loss == sorted(record.val_loss)


def test_train_loss_is_the_objectives_loss_of_the_ensemble():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] * 2 + rng.normal(size=300)
    w = rng.uniform(0.5, 2.0, size=300)
    bm = BinMapper(32).fit(X)
    Xb = bm.transform(X, CPU)
    obj = SquaredError()
    params = BoostingParams(n_estimators=5, tree=TreeParams(max_depth=2))
    ens, record, _ = fit_boosting(
        CPU,
        DeviceRows(CPU, Xb, y, w),
        obj,
        PenaltyState(0.0, np.ones(3), np.arange(3, dtype=np.int32)),
        bm,
        params,
    )
    for r in range(5):
        raw = ens.predict_binned(Xb, CPU, stop=r + 1)
        assert record.train_loss[r] == obj.loss(raw, y, w, backend=CPU)


def test_softmax_one_tree_per_class_per_round():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=300), [-0.5, 0.0, 0.7])  # 4 classes
    est = GBFSClassifier(n_estimators=5, mu=0.0, max_depth=2, device="cpu").fit(X, y)
    ens = est.ensemble_
    assert ens.n_outputs == 4 and ens.n_trees == 20
    assert list(ens.tree_column) == [0, 1, 2, 3] * 5
    assert est.selection_record_["tree_column"] == [0, 1, 2, 3] * 5
    assert est.decision_function(X).shape == (300, 4)
    p = est.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    # every tree of a round is fit to its class's gradients at the raw scores of the start of
    # the round (not after the previous class's tree): regrow round 2 by hand
    be = CPU
    Xb = est.bin_mapper_.transform(X, be)
    raw = ens.predict_raw(X, be, start=0, stop=4)  # after round 1
    obj = Softmax(4)
    for k in range(4):
        g, h = obj.grad_hess(raw, y.astype(np.int32), k)
        gs, hs = fixed_point_scale(g, 300), fixed_point_scale(h, 300)
        ps = PenaltyState(0.0, np.ones(4), np.arange(4, dtype=np.int32), "root_sse")
        t = grow_tree(
            be,
            Xb,
            quantize(g, gs),
            quantize(h, hs),
            gs,
            hs,
            est.bin_mapper_.n_bins_,
            est.bin_mapper_,
            ps,
            TreeParams(max_depth=2),
            tree_index=4 + k,
            gain_divisor=ps.gain_divisor(g, h),
        ).tree
        np.testing.assert_array_equal(t.feature, ens.trees[4 + k].feature)
        np.testing.assert_array_equal(t.bin_threshold, ens.trees[4 + k].bin_threshold)
        np.testing.assert_array_equal(t.value, ens.trees[4 + k].value)
    np.testing.assert_allclose(est.decision_function(X), ens.predict_raw(X, be))


def test_hessian_false_uses_unit_hessians():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    ens_unit = GBFSClassifier(n_estimators=3, hessian=False, mu=0.0, device="cpu").fit(X, y)
    s = ens_unit.ensemble_.stacked()
    reached = s["count"] > 0
    np.testing.assert_array_equal(s["cover"][reached], s["count"][reached])
    ens_h = GBFSClassifier(n_estimators=3, hessian=True, mu=0.0, device="cpu").fit(X, y)
    s = ens_h.ensemble_.stacked()
    reached = s["count"] > 0
    assert np.all(s["cover"][reached] <= 0.25 * s["count"][reached] + 1e-9)
    # regression: hessian is 1 either way, so the models are identical
    yr = X[:, 0] * 2 + rng.normal(size=200)
    a = GBFSRegressor(n_estimators=3, hessian=True, device="cpu").fit(X, yr)
    b = GBFSRegressor(n_estimators=3, hessian=False, device="cpu").fit(X, yr)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
def test_fitted_ensembles_row_order_invariant(kind):
    rng = np.random.default_rng(2)
    n = 300
    X = rng.normal(size=(n, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    if kind == "regression":
        y = np.nan_to_num(X[:, 0]) * 3 + np.nan_to_num(X[:, 1]) ** 2 + rng.normal(size=n)
        make = lambda: GBFSRegressor(n_estimators=8, mu=0.05, device="cpu")  # noqa: E731
    else:
        k = 2 if kind == "binary" else 3
        y = np.digitize(
            np.nan_to_num(X[:, 0]) + 0.5 * rng.normal(size=n),
            np.quantile(X[:, 0][~np.isnan(X[:, 0])], np.linspace(0, 1, k + 1)[1:-1]),
        )
        make = lambda: GBFSClassifier(n_estimators=8, mu=0.05, device="cpu")  # noqa: E731
    w = rng.uniform(0.5, 2.0, size=n)
    perm = rng.permutation(n)
    a = make().fit(X, y, sample_weight=w)
    b = make().fit(X[perm], y[perm], sample_weight=w[perm])
    sa, sb = a.ensemble_.stacked(), b.ensemble_.stacked()
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
    np.testing.assert_array_equal(a.ensemble_.base_score, b.ensemble_.base_score)
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
