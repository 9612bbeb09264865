"""GPU-vs-CPU equality checks shared by the simulator suite and the real-GPU suite.

Each ``check_*`` runs one kernel (or the whole grower / booster) on the CPU backend and on a
``GPUBackend`` (numpy arrays under the CUDA simulator, cupy arrays on a GPU) with the same input,
and asserts that the results are equal: exact equality of every array, dtypes included.
"""

from __future__ import annotations

import numpy as np

from gpufs._device import to_host
from gpufs.backends.base import SplitInfo, SplitParams, categorical_slots
from gpufs.backends.cpu import CPUBackend
from gpufs.backends.cpu import update as cpu_update
from gpufs.engine.binning import BinMapper
from gpufs.engine.boosting import BoostingParams, DeviceRows, fit_boosting
from gpufs.engine.grower import TreeParams, grow_tree
from gpufs.engine.objectives import Logistic, SquaredError
from gpufs.engine.penalties import PenaltyState
from gpufs.engine.quantize import fixed_point_scale, quantize
from gpufs.engine.tree import TREE_FIELDS
from gpufs.rules._categorical import MAX_CAT_TO_ONEHOT
from gpufs.rules._hist_layout import HistLayout

CPU = CPUBackend()


def make_data(n=64, d=6, seed=0, nan_frac=0.1, dyadic=False):
    """X with NaNs, a constant column (one bin: never split) and a duplicate column (ties).

    y is a non-dyadic float target (``dyadic=True`` rounds it to multiples of 1/8). Nothing
    needs dyadic targets any more: the base score is a correctly rounded host sum, and the
    losses and the A-GBM divisor are fixed-point sums, all the same on every device.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < nan_frac] = np.nan
    if d >= 4:
        X[:, 3] = X[:, 0]  # duplicate of feature 0: equal gains, lowest feature wins
    if d >= 6:
        X[:, 5] = 1.5  # constant: one bin
    z = np.nan_to_num(X)
    y = 2.0 * z[:, 0] + z[:, 1] - 0.5 * z[:, 2] ** 2 + 0.25 * rng.normal(size=n)
    if dyadic:
        y = np.rint(y * 8.0) / 8.0
    return X, y


def assert_same(a, b, what=""):
    a, b = to_host(a), to_host(b)
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"{what}: values differ"


def assert_same_dict(a, b, what=""):
    assert set(a) == set(b), f"{what}: keys {sorted(a)} != {sorted(b)}"
    for k in a:
        assert_same(a[k], b[k], f"{what}[{k}]")


def binned(X, max_bins=16, categorical=None):
    """(BinMapper, binned X); ``categorical``: columns of X holding category codes 0..C-1
    (NaN missing), binned as categorical features (``category_codes``)."""
    codes = None if categorical is None else category_codes(X, categorical, max_bins)
    bm = BinMapper(max_bins=max_bins).fit(X, categories=codes)
    return bm, CPU.bin_transform(X, bm.cuts_padded_, bm.n_bins_ - 1)


def category_codes(X, columns, max_bins=255):
    """The ``CategoryCodes`` of code columns: each code its own category, kept in code order
    (the columns are made with the most frequent code first, so the map is the identity)."""
    from gpufs.data._category_codes import CategoryCodes

    values, n_codes = {}, {}
    for f in columns:
        n = int(np.nanmax(X[:, f])) + 1
        assert n <= max_bins
        values[f], n_codes[f] = list(range(n)), n
    return CategoryCodes(X.shape[1], values, n_codes)


def make_cat_data(n=96, d=5, levels=(11, 3), seed=0, nan_frac=0.1):
    """X whose first ``len(levels)`` columns are category codes (code c drawn with
    probability decreasing in c, so code = frequency rank; NaN missing) and the rest normal;
    y depends on the categories (through random level effects) and on column len(levels)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.zeros(n)
    for f, L in enumerate(levels):
        p = np.linspace(2.0, 1.0, L)
        c = rng.choice(L, size=n, p=p / p.sum())
        effect = rng.normal(size=L)
        X[:, f] = c
        y += effect[c]
        X[rng.random(n) < nan_frac, f] = np.nan
    y += 0.5 * X[:, len(levels)] + 0.1 * rng.normal(size=n)
    return X, y


def grads(y, seed=1):
    """Fixed-point gradients / hessians of a squared-error round with random raw scores."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=y.shape[0]) - y
    h = rng.uniform(0.5, 2.0, size=y.shape[0])
    n = y.shape[0]
    gs, hs = fixed_point_scale(g, n), fixed_point_scale(h, n)
    return quantize(g, gs), quantize(h, hs), gs, hs


def segments(n, counts, seed=2):
    """A permuted ``rows`` and a depth-2 node table whose level-2 nodes 3..6 have ``counts``."""
    assert sum(counts) == n
    rng = np.random.default_rng(seed)
    rows = rng.permutation(n).astype(np.int32)
    node_start = np.zeros(7, np.int64)
    node_count = np.zeros(7, np.int64)
    node_count[0] = n
    start = 0
    for node, c in zip(range(3, 7), counts):
        node_start[node], node_count[node] = start, c
        start += c
    return rows, node_start, node_count


# --- kernels ----------------------------------------------------------------------------------
def check_bin_transform(gpu, X):
    bm = BinMapper(max_bins=16).fit(X)
    cuts = bm.cuts_padded_
    # Values exactly on cut points, and infinities, test the "count of cuts < x" rule's edges.
    X = X.copy()
    X[0, :] = cuts[:, 0]
    X[1, 0], X[2, 0] = np.inf, -np.inf
    for dtype in (np.float64, np.float32):
        Xd = X.astype(dtype)
        got = gpu.bin_transform(gpu.xp.asarray(Xd), cuts, bm.n_bins_ - 1)
        assert_same(
            CPU.bin_transform(Xd, cuts, bm.n_bins_ - 1), got, f"bins {np.dtype(dtype).name}"
        )


def check_histograms(gpu, Xb, gq, hq, rows, node_start, node_count, build, layout=None):
    """CPU and GPU histograms of the build nodes are equal; with a compact ``layout`` also
    equal to the full layout's (``HistLayout.dense``), the CPU deriving the layout's most
    frequent bins from the nodes' totals and the GPU adding every bin. Returns the CPU's."""
    xp = gpu.xp
    gh = np.stack([gq, hq], axis=1)
    want = CPU.histograms(Xb, gh, rows, node_start, node_count, build, layout=layout)
    got = gpu.histograms(
        xp.asarray(Xb),
        xp.asarray(gh),
        xp.asarray(rows),
        node_start,
        node_count,
        build,
        layout=layout,
    )
    assert_same(want, got, "histograms")
    if layout is not None:
        full = CPU.histograms(Xb, gh, rows, node_start, node_count, build)
        assert_same(full, layout.dense(want), "compact histograms, expanded")
    return want


def check_find_splits(
    gpu,
    hist,
    node_g,
    node_h,
    n_bins,
    penalty,
    allowed,
    g_scale,
    h_scale,
    reg_lambda=1.0,
    gain_divisor=1.0,
    min_child_weight=1e-3,
    is_categorical=None,
    max_cat_to_onehot=MAX_CAT_TO_ONEHOT,
    **guards,
):
    """CPU and GPU ``find_splits`` give equal ``SplitInfo`` records; returns the CPU's.
    ``is_categorical`` / ``max_cat_to_onehot``: the categorical features of the search;
    ``guards``: ``SplitParams``' categorical guards (cat_smooth, ...)."""
    xp = gpu.xp
    cat_slot, n_cat = categorical_slots(is_categorical, len(n_bins))
    split = dict(
        g_scale=g_scale,
        h_scale=h_scale,
        reg_lambda=reg_lambda,
        gain_divisor=gain_divisor,
        min_child_weight=min_child_weight,
        min_split_gain=0.0,
        cat_slot=cat_slot,
        n_cat=n_cat,
        max_cat_to_onehot=max_cat_to_onehot,
        **guards,
    )
    want = CPU.find_splits(
        hist, node_g, node_h, penalty, allowed, SplitParams(n_bins=n_bins, **split)
    )
    got = gpu.find_splits(
        xp.asarray(hist),
        node_g,
        node_h,
        penalty,
        allowed,
        SplitParams(n_bins=xp.asarray(n_bins), **split),
    )
    assert isinstance(want, SplitInfo) and isinstance(got, SplitInfo)
    assert_same_dict(vars(want), vars(got), "find_splits")
    # the same search on the compact layout of the bin counts: the same splits
    layout = HistLayout.from_n_bins(n_bins)
    compact = layout.compact(hist)
    for be, xq in ((CPU, np), (gpu, xp)):
        res = be.find_splits(
            xq.asarray(compact),
            node_g,
            node_h,
            penalty,
            allowed,
            SplitParams(n_bins=xq.asarray(n_bins), layout=layout, **split),
        )
        assert_same_dict(vars(want), vars(res), f"find_splits, compact ({be.name})")
    return want


def check_partition(
    gpu,
    Xb,
    rows,
    node_start,
    node_count,
    split_nodes,
    feature,
    bin_,
    ml,
    split_cat=None,
    split_bits=None,
):
    xp = gpu.xp
    rows_cpu = rows.copy()
    want = CPU.partition(
        Xb, rows_cpu, node_start, node_count, split_nodes, feature, bin_, ml, split_cat, split_bits
    )
    rows_gpu = xp.asarray(rows)
    got = gpu.partition(
        xp.asarray(Xb),
        rows_gpu,
        node_start,
        node_count,
        split_nodes,
        feature,
        bin_,
        ml,
        split_cat,
        split_bits,
    )
    assert_same(want, got, "left counts")
    assert_same(rows_cpu, rows_gpu, "partitioned rows")


def check_update_raw(gpu, rows, node_start, node_count, leaf_nodes, leaf_values, n_outputs=1):
    xp = gpu.xp
    rng = np.random.default_rng(5)
    raw = rng.normal(size=(rows.shape[0], n_outputs))
    raw_cpu = raw.copy()
    raw_gpu = xp.asarray(raw)
    col = n_outputs - 1  # with n_outputs > 1 the column is a strided view
    cpu_col = np.ascontiguousarray(raw_cpu[:, col])
    cpu_update._update_raw_ser(
        cpu_col,
        rows,
        node_start,
        node_count,
        np.asarray(leaf_nodes, np.int64),
        np.asarray(leaf_values, np.float64),
    )
    raw_cpu[:, col] = cpu_col
    # the raw-score update's kernel with one row buffer for both depth parities (the level
    # step's trees reach it through ``update_raw``)
    leaves = np.asarray(leaf_nodes, np.int64)
    nodes = np.zeros((4, len(node_start)), np.int64)
    nodes[0], nodes[1] = node_start, node_count
    gpu._update_leaves(
        raw_gpu[:, col],
        gpu._view(xp.stack([xp.asarray(rows)] * 2)),
        gpu._view(xp.asarray(nodes)),
        gpu._view(xp.asarray(leaves)),
        gpu._view(xp.asarray(np.asarray(leaf_values, np.float64))),
        leaves.shape[0],
        int(rows.shape[0]),
    )
    assert_same(raw_cpu, raw_gpu, "raw after update")


def check_predict(gpu, ensemble, X, Xb):
    xp = gpu.xp
    want_b = ensemble.predict_binned(Xb, CPU)
    want_r = ensemble.predict_raw(X, CPU)
    got_b = ensemble.predict_binned(xp.asarray(Xb), gpu)
    got_r = ensemble.predict_raw(xp.asarray(X), gpu)
    assert_same(want_b, got_b, "predict_binned")
    assert_same(want_r, got_r, "predict_raw")
    got_r32 = ensemble.predict_raw(xp.asarray(X.astype(np.float32)), gpu)
    assert_same(ensemble.predict_raw(X.astype(np.float32), CPU), got_r32, "predict_raw f32")


def objective_case(name, n=48, seed=0, n_classes=3):
    """(objective, raw, y) with raw scores over a wide range (|raw| up to ~40, a few extreme
    rows) and non-dyadic targets."""
    from gpufs.engine.objectives import Softmax

    rng = np.random.default_rng(seed)
    K = n_classes if name == "softmax" else 1
    raw = rng.normal(size=(n, K)) * 3.0
    raw[: min(n, 4)] *= 13.0  # saturated rows: p within an ulp of 0 or 1
    if name == "squared_error":
        return SquaredError(), raw, rng.normal(size=n) / 3.0
    if name == "logistic":
        return Logistic(), raw, (rng.random(n) < 0.4).astype(np.int32)
    return Softmax(K), raw, rng.integers(0, K, n).astype(np.int32)


def check_objective(gpu, name, n=48, seed=0, weighted=True):
    """Gradients, per-row losses, mean loss and the root_sse divisor: equal bit for bit."""
    xp = gpu.xp
    obj, raw, y = objective_case(name, n, seed)
    w = np.random.default_rng(seed + 1).uniform(0.1, 3.0, n) if weighted else None
    dw = None if w is None else xp.asarray(w)
    if name != "squared_error":
        want = CPU.gradients(name, raw, y)
        got = gpu.gradients(name, xp.asarray(raw), xp.asarray(y))
        assert_same(want[0], got[0], f"{name} g")
        assert_same(want[1], got[1], f"{name} h")
    assert_same(
        CPU.loss_terms(name, raw, y),
        gpu.loss_terms(name, xp.asarray(raw), xp.asarray(y)),
        f"{name} losses",
    )
    a = obj.loss(raw, y, w, backend=CPU)
    b = obj.loss(xp.asarray(raw), xp.asarray(y), dw, backend=gpu)
    assert a == b, f"{name} loss {a!r} != {b!r}"
    ga, ha = obj.gradients(raw, y, backend=CPU)
    gb, hb = obj.gradients(xp.asarray(raw), xp.asarray(y), backend=gpu)
    pen = _penalties(2, 0.1, scaling="root_sse")
    for k in range(ga.shape[0]):
        da = pen.gain_divisor(ga[k] * (1.0 if w is None else w), ha[k])
        db = pen.gain_divisor(gb[k] * (1.0 if dw is None else dw), hb[k])
        assert da == db, f"{name} divisor {da!r} != {db!r}"
    return ga, ha


def check_prepare_gradients(
    gpu, name, n=48, seed=0, weighted=True, unit_hessian=False, divisor=True
):
    """One round's fused gradients (``round_gradients``) and their fixed point
    (``quantize.prepare_gradients``: extremes, scales, gh, exact sums, A-GBM divisor)."""
    from gpufs.engine.quantize import prepare_gradients

    xp = gpu.xp
    _, raw, y = objective_case(name, n, seed)
    w = np.random.default_rng(seed + 1).uniform(0.1, 3.0, n) if weighted else None
    want = CPU.round_gradients(name, raw, y)
    got = gpu.round_gradients(name, xp.asarray(raw), xp.asarray(y))
    for a, b, what in zip(want, got, ("g", "h", "loss terms")):
        assert_same(a, b, f"{name} round {what}")
    for k in range(want[0].shape[0]):
        pa = prepare_gradients(
            CPU, want[0][k], want[1][k], w, unit_hessian=unit_hessian, divisor=divisor
        )
        pb = prepare_gradients(
            gpu,
            got[0][k],
            got[1][k],
            None if w is None else xp.asarray(w),
            unit_hessian=unit_hessian,
            divisor=divisor,
        )
        assert_same(pa.gh, pb.gh, f"{name} gh")
        for attr in ("g_scale", "h_scale", "G_q", "H_q", "gain_divisor"):
            assert getattr(pa, attr) == getattr(pb, attr), f"{name} {attr}"


# --- the whole grower / booster ---------------------------------------------------------------
def _penalties(d, mu, k=None, scaling="none", groups=None):
    costs = np.linspace(1.0, 2.0, d)
    groups = np.arange(d) if groups is None else np.asarray(groups)
    return PenaltyState(mu, costs, groups, scaling, k)


def assert_same_tree(a, b, what="tree"):
    for k in TREE_FIELDS:
        assert_same(a.arrays[k], b.arrays[k], f"{what}.{k}")


def check_grow_tree(gpu, X, y, mu=0.5, max_depth=3, max_bins=16, g=None, h=None, categorical=None):
    """One tree on both backends, from ``grads(y)`` or from the given float gradients."""
    xp = gpu.xp
    bm, Xb = binned(X, max_bins, categorical)
    if g is None:
        gq, hq, gs, hs = grads(y)
    else:
        n = X.shape[0]
        gs, hs = fixed_point_scale(g, n), fixed_point_scale(h, n)
        gq, hq = quantize(g, gs), quantize(h, hs)
    params = TreeParams(max_depth=max_depth, learning_rate=0.3)
    out = []
    for be, dev in ((CPU, np.asarray), (gpu, xp.asarray)):
        pen = _penalties(X.shape[1], mu)
        grown = grow_tree(
            be, dev(Xb), dev(gq), dev(hq), gs, hs, dev(bm.n_bins_), bm, pen, params, tree_index=0
        )
        out.append((grown, pen))
    (a, pa), (b, pb) = out
    assert_same_tree(a.tree, b.tree)
    assert_same(a.state.rows, b.state.rows, "rows")
    for k in ("node_start", "node_count"):
        assert_same(getattr(a.state, k), getattr(b.state, k), k)
    for k in ("leaf_nodes", "leaf_values"):
        assert_same(getattr(a, k), getattr(b, k), k)
    assert a.new_features == b.new_features
    assert pa.order == pb.order
    assert_same(pa.first_use_tree, pb.first_use_tree, "first_use_tree")
    return a


def check_fit_boosting(
    gpu,
    X,
    y,
    objective=None,
    mu=0.5,
    n_estimators=3,
    max_depth=3,
    scaling="none",
    k=None,
    groups=None,
    hessian=True,
    eval_rows=0,
    max_bins=16,
    weighted=False,
    n_iter_no_change=None,
    categorical=None,
    tree=None,
):
    """fit_boosting on both backends: every tree array, the selection record (losses
    included, exactly) and Omega equal. ``weighted`` draws non-dyadic sample weights;
    ``categorical`` names columns of category codes (``binned``); ``tree`` more
    ``TreeParams`` (the categorical guards)."""
    xp = gpu.xp
    objective = objective or SquaredError()
    bm, Xb = binned(X, max_bins, categorical)
    params = BoostingParams(
        n_estimators=n_estimators,
        hessian=hessian,
        n_iter_no_change=n_iter_no_change,
        tree=TreeParams(max_depth=max_depth, learning_rate=0.3, **(tree or {})),
    )
    if np.issubdtype(np.asarray(y).dtype, np.integer):
        y = np.asarray(y, np.int32)
    n_fit = X.shape[0] - eval_rows
    w = np.random.default_rng(11).uniform(0.2, 3.0, X.shape[0]) if weighted else None
    res = []
    for be, dev in ((CPU, np.asarray), (gpu, xp.asarray)):
        pen = _penalties(X.shape[1], mu, k, scaling, groups)
        ev = None
        if eval_rows:
            ev = DeviceRows(
                be, dev(Xb[n_fit:]), dev(y[n_fit:]), None if w is None else dev(w[n_fit:])
            )
        rows = DeviceRows(
            be, dev(Xb[:n_fit]), dev(y[:n_fit]), None if w is None else dev(w[:n_fit])
        )
        ens, rec, n_rounds = fit_boosting(be, rows, objective, pen, bm, params, ev)
        res.append((ens, rec, n_rounds, pen))
    (ea, ra, na, pa), (eb, rb, nb, pb) = res
    assert ea.n_trees == eb.n_trees and na == nb
    assert_same(np.asarray(ea.base_score), np.asarray(eb.base_score), "base_score")
    for t, (ta, tb) in enumerate(zip(ea.trees, eb.trees)):
        assert_same_tree(ta, tb, f"tree {t}")
    assert ea.tree_column == eb.tree_column
    da, db = ra.as_dict(), rb.as_dict()
    assert da["features_added"] == db["features_added"]
    assert da["tree_column"] == db["tree_column"]
    for key in ("train_loss", "val_loss"):
        np.testing.assert_array_equal(da[key], db[key])
    assert pa.order == pb.order
    assert_same(pa.first_use_tree, pb.first_use_tree, "first_use_tree")
    return ea, ra, pa


__all__ = [n for n in dir() if n.startswith(("check_", "make_", "assert_"))] + [
    "binned",
    "category_codes",
    "grads",
    "segments",
    "CPU",
    "Logistic",
    "SquaredError",
]
