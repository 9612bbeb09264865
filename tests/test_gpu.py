"""CPU vs real GPU: identical kernels, trees and selections (``@pytest.mark.gpu``).

Skipped unless cupy sees a CUDA device (``gpufs._device.gpu_available()``). Run on a GPU
machine with ``python -m pytest -q -m gpu tests/test_gpu.py``.

Everything is compared for exact equality, on ordinary data: non-dyadic float targets,
sample weights, logistic and softmax losses, the A-GBM scaling ``root_sse``. Nothing on the
fitting path depends on the device's float rounding: the base score is a correctly rounded
host sum; gradients and losses come from ``gpufs.rules._exactmath`` (exp / log written with
+, -, *, /, compiled without fused multiply-adds on both devices), not from glibc's or CUDA's
``exp``; the A-GBM divisor and the losses are fixed-point sums; histograms are int64 sums.
"""

import numpy as np
import pytest

from gpufs._device import gpu_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU with cupy"),
]

from _cudasim_checks import (  # noqa: E402
    CPU,
    Logistic,
    assert_same,
    binned,
    check_bin_transform,
    check_find_splits,
    check_fit_boosting,
    check_grow_tree,
    check_histograms,
    check_objective,
    check_partition,
    check_predict,
    check_update_raw,
    grads,
    make_data,
    segments,
)


@pytest.fixture(scope="module")
def gpu():
    from gpufs.backends.gpu.backend import GPUBackend

    return GPUBackend()


@pytest.fixture(scope="module")
def cp():
    import cupy

    return cupy


# --- kernels on data sets of several sizes ----------------------------------------------------
@pytest.mark.parametrize("n,d", [(64, 6), (5000, 30), (200_000, 12)])
def test_kernels(gpu, n, d):
    X, y = make_data(n, d, seed=n)
    check_bin_transform(gpu, X)
    bm, Xb = binned(X, 255)
    gq, hq, gs, hs = grads(y)
    c = [n // 3, 1, n // 4, n - n // 3 - 1 - n // 4]
    rows, ns, nc = segments(n, c)
    nodes = np.array([3, 4, 5, 6])
    hist = check_histograms(gpu, Xb, gq, hq, rows, ns, nc, nodes)
    node_g, node_h = hist[:, 0, :, 0].sum(axis=1), hist[:, 0, :, 1].sum(axis=1)
    pen = np.linspace(0.0, 3.0, d)
    check_find_splits(gpu, hist, node_g, node_h, bm.n_bins_, pen, np.ones(d, bool), gs, hs)
    check_find_splits(
        gpu,
        hist,
        node_g,
        node_h,
        bm.n_bins_,
        np.zeros(d),
        np.arange(d) % 3 != 0,
        gs,
        hs,
        min_child_weight=5.0,
    )
    rng = np.random.default_rng(0)
    check_partition(
        gpu,
        Xb,
        rows,
        ns,
        nc,
        np.array([3, 5, 6]),
        rng.integers(0, d, 3),
        rng.integers(0, 50, 3),
        np.array([True, False, True]),
    )
    check_update_raw(gpu, rows, ns, nc, nodes, rng.normal(size=4), n_outputs=3)


# --- whole trees and selections ---------------------------------------------------------------
@pytest.mark.parametrize("n,d,mu,depth", [(3000, 20, 0.5, 4), (100_000, 40, 2.0, 6)])
def test_grow_tree(gpu, n, d, mu, depth):
    X, y = make_data(n, d, seed=1)
    check_grow_tree(gpu, X, y, mu=mu, max_depth=depth, max_bins=255)


@pytest.mark.parametrize(
    "n,d,mu,scaling",
    [(2000, 10, 0.0, "none"), (20_000, 50, 0.5, "none"), (20_000, 50, 0.05, "root_sse")],
)
def test_fit_boosting(gpu, n, d, mu, scaling):
    X, y = make_data(n, d, seed=2)
    ens, rec, pen = check_fit_boosting(
        gpu,
        X,
        y,
        mu=mu,
        n_estimators=10,
        max_depth=5,
        max_bins=255,
        eval_rows=n // 5,
        scaling=scaling,
        weighted=scaling == "root_sse",
    )
    check_predict(gpu, ens, X, binned(X, 255)[1])


def test_fit_boosting_budget_groups(gpu):
    X, y = make_data(10_000, 24, seed=3)
    check_fit_boosting(
        gpu, X, y, mu=0.3, n_estimators=8, max_depth=4, k=4, groups=np.arange(24) // 3, max_bins=64
    )


def test_million_rows(gpu):
    """1,000,000 rows: the same trees and the same selected features on both devices."""
    X, y = make_data(1_000_000, 20, seed=4, nan_frac=0.05)
    _, _, pen = check_fit_boosting(gpu, X, y, mu=1.0, n_estimators=5, max_depth=6, max_bins=255)
    assert len(pen.order) >= 2


# --- logistic / softmax: exact gradients, losses and divisors ---------------------------------
@pytest.mark.parametrize("name", ["logistic", "softmax", "squared_error"])
@pytest.mark.parametrize("n", [1000, 300_000])
def test_objective_kernels(gpu, name, n):
    check_objective(gpu, name, n=n, seed=n)


@pytest.mark.parametrize(
    "scaling,hessian", [("none", True), ("root_sse", True), ("root_sse", False)]
)
def test_fit_boosting_logistic(gpu, scaling, hessian):
    X, y = make_data(50_000, 16, seed=5)
    yb = (y + np.random.default_rng(5).normal(size=y.shape[0]) > 0.3).astype(np.int32)
    _, _, pen = check_fit_boosting(
        gpu,
        X,
        yb,
        objective=Logistic(),
        mu=0.05,
        n_estimators=12,
        max_depth=6,
        max_bins=255,
        scaling=scaling,
        hessian=hessian,
        weighted=True,
        eval_rows=10_000,
        n_iter_no_change=3,
    )
    assert len(pen.order) >= 2


def test_fit_boosting_softmax(gpu):
    from gpufs.engine.objectives import make_objective

    X, y = make_data(40_000, 12, seed=6)
    yc = np.digitize(y, np.quantile(y, [0.3, 0.55, 0.8])).astype(np.int32)  # 4 classes
    _, _, pen = check_fit_boosting(
        gpu,
        X,
        yc,
        objective=make_objective("classification", 4),
        mu=0.02,
        n_estimators=5,
        max_depth=5,
        max_bins=255,
        scaling="root_sse",
        weighted=True,
        eval_rows=8000,
        n_iter_no_change=2,
    )
    assert len(pen.order) >= 2


def test_init_score_cupy_equals_numpy(cp):
    from gpufs.engine.objectives import Softmax, SquaredError

    X, y = make_data(100_003, 3, seed=9)
    w = np.random.default_rng(9).uniform(0.1, 3.0, y.shape[0])
    yb = (y > 0.2).astype(np.int32)
    yc = np.digitize(y, [-0.5, 0.5]).astype(np.int32)
    for obj, t in ((SquaredError(), y), (Logistic(), yb), (Softmax(3), yc)):
        for ww in (None, w):
            a = obj.init_score(t, ww)
            b = obj.init_score(cp.asarray(t), None if ww is None else cp.asarray(ww))
            assert_same(np.asarray(a), np.asarray(b), f"{obj.name} init_score")


# --- the public estimator, cupy input ---------------------------------------------------------
@pytest.mark.parametrize("scaling", ["none", "root_sse"])
def test_estimator_cupy_input(cp, scaling):
    from gpufs.selectors.gbfs import GBFSRegressor

    X, y = make_data(50_000, 15, seed=6)
    w = np.random.default_rng(6).uniform(0.5, 2.0, y.shape[0])
    kw = dict(
        mu=0.5 if scaling == "none" else 0.05,
        penalty_scaling=scaling,
        n_estimators=10,
        max_depth=4,
        random_state=0,
    )
    cpu = GBFSRegressor(device="cpu", **kw).fit(X, y, sample_weight=w)
    gpu = GBFSRegressor(device="gpu", **kw).fit(
        cp.asarray(X), cp.asarray(y), sample_weight=cp.asarray(w)
    )
    assert gpu.device_ == "gpu"
    np.testing.assert_array_equal(cpu.selected_features_, gpu.selected_features_)
    for t, (a, b) in enumerate(zip(cpu.ensemble_.trees, gpu.ensemble_.trees)):
        for k in ("feature", "bin_threshold", "threshold", "missing_left", "value"):
            assert_same(a.arrays[k], b.arrays[k], f"tree {t}.{k}")
    np.testing.assert_equal(cpu.selection_record_, gpu.selection_record_)  # NaN == NaN
    pred = gpu.predict(cp.asarray(X))
    assert type(pred).__module__.split(".")[0] == "cupy"
    np.testing.assert_array_equal(cpu.predict(X), cp.asnumpy(pred))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_cupy_input(cp, n_classes):
    from gpufs.selectors.gbfs import GBFSClassifier

    X, y = make_data(30_000, 10, seed=7)
    yc = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    kw = dict(
        mu=0.05,
        penalty_scaling="root_sse",
        n_estimators=6,
        max_depth=4,
        random_state=0,
        validation_fraction=0.2,
        n_iter_no_change=2,
    )
    cpu = GBFSClassifier(device="cpu", **kw).fit(X, yc)
    gpu = GBFSClassifier(device="gpu", **kw).fit(cp.asarray(X), cp.asarray(yc))
    np.testing.assert_array_equal(cpu.selected_features_, gpu.selected_features_)
    sa, sb = cpu.ensemble_.stacked(), gpu.ensemble_.stacked()
    for key in sa:
        assert_same(sa[key], sb[key], key)
    np.testing.assert_equal(cpu.selection_record_, gpu.selection_record_)  # NaN == NaN


def test_estimator_cudf_input(cp):
    cudf = pytest.importorskip("cudf")
    from gpufs.selectors.gbfs import GBFSRegressor

    X, y = make_data(20_000, 8, seed=8)
    names = [f"c{i}" for i in range(X.shape[1])]
    kw = dict(mu=0.5, penalty_scaling="none", n_estimators=5, max_depth=4, random_state=0)
    cpu = GBFSRegressor(device="cpu", **kw).fit(X, y)
    df = cudf.DataFrame({n: X[:, i] for i, n in enumerate(names)})
    gpu = GBFSRegressor(device="gpu", **kw).fit(df, cudf.Series(y))
    np.testing.assert_array_equal(cpu.selected_features_, gpu.selected_features_)
    assert list(gpu.selected_feature_names_) == [names[f] for f in cpu.selected_features_]


def test_binning_on_gpu_matches_cpu(gpu, cp):
    from gpufs.engine.binning import BinMapper

    X, _ = make_data(100_000, 10, seed=7)
    a = BinMapper(max_bins=255).fit(X)
    b = BinMapper(max_bins=255).fit(cp.asarray(X))
    for ca, cb in zip(a.cuts_, b.cuts_):
        assert_same(ca, cb, "cuts")
    assert_same(a.transform(X, CPU), b.transform(cp.asarray(X), gpu), "bins")


# --- memory -----------------------------------------------------------------------------------
def test_out_of_memory_is_a_clear_error(gpu, cp):
    from gpufs.backends.gpu.backend import GPUOutOfMemoryError, _fmt_bytes

    Xb = cp.zeros((1000, 100), dtype=np.uint8)
    gh = cp.zeros((1000, 2), dtype=np.int64)
    # Depth 24: a level of 2**23 nodes x 100 features x 4 KiB = 3.4 TB of histograms.
    with pytest.raises(GPUOutOfMemoryError) as err:
        gpu.start_tree(Xb, gh, 0, 0, 24, np.arange(100, dtype=np.int32))
    msg = str(err.value)
    assert "a tree level's histograms" in msg
    assert f"needed {_fmt_bytes(2**23 * 100 * 256 * 2 * 8)}" in msg
    assert "free" in msg and "max_depth" in msg and "device='cpu'" in msg
    # The device is still usable afterwards.
    assert int(cp.arange(10).sum()) == 45


def test_exact_k_fills_to_k_on_the_gpu():
    """Issue 35 / 37: exact k returns k on the device too. Where the model splits on 6
    columns only, k = 10 is filled from the best remaining candidates, the same ones as on
    the CPU (the same rule, on histograms built by the device)."""
    import _planted_noise as pn
    from gpufs import GBFSRegressor

    X, y, _ = pn.exact_fill(0)
    kw = dict(n_features_to_select=10, mu=0.0, n_estimators=30, max_depth=2, random_state=0)
    got = GBFSRegressor(device="gpu", **kw).fit(X, y)
    want = GBFSRegressor(device="cpu", **kw).fit(X, y)
    assert got.selected_features_.size == 10 and got.selection_filled_.size == 4
    np.testing.assert_array_equal(got.selected_features_, want.selected_features_)
    np.testing.assert_array_equal(got.selection_filled_, want.selection_filled_)


def test_guarded_categorical_fit_equals_the_cpu():
    """The categorical guards (estimator defaults) on the device: the same trees."""
    import _planted_noise as pn
    from gpufs import GBFSClassifier

    X, y, _ = pn.churn(0)
    kw = dict(n_features_to_select=3, random_state=0)
    got = GBFSClassifier(device="gpu", **kw).fit(X, y)
    want = GBFSClassifier(device="cpu", **kw).fit(X, y)
    np.testing.assert_array_equal(got.selected_features_, want.selected_features_)
    np.testing.assert_array_equal(got.predict_proba(X), want.predict_proba(X))
