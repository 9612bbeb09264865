"""The journal a lost shard is rebuilt from (``gpufs.dask._journal``), in one process.

A Dask GBFS fit runs with its shards in this process (``LocalGroup``: the real ``ShardGroup``
call path, journal included, without a cluster); before every call, a fresh shard on fresh
copies of the same partitions replays the journal and must hold the live shard's state, array
for array (raw scores and their snapshots, gradients, fixed-point gradients, the tree's row
segments and histograms, the group tests' state), through the search for exactly k features
(snapshots, restores, abandoned probes), softmax, a validation set and GT-GBM's per-fit group
tests with a shard that holds none of their rows; and the fit equals the single process's. The
compaction keeps what the state depends
on and drops the rest.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")

from gpufs import GBFSClassifier  # noqa: E402
from gpufs.dask import DaskGBFSClassifier, _gbfs  # noqa: E402
from gpufs.dask._data import Loaded, _Layout, load_part, summary_of  # noqa: E402
from gpufs.dask._group import ShardGroup  # noqa: E402
from gpufs.dask._journal import Journal  # noqa: E402
from gpufs.dask._shard import Shard  # noqa: E402


class _LocalLoaded(Loaded):
    """``Loaded`` whose partitions are made here, afresh on demand (``make``)."""

    def make(self, i):
        X, y, w = self.blocks[i]
        return load_part(
            i,
            X,
            y,
            w,
            self.classify,
            _Layout(X.shape[1], None, None),
            ("array", X.shape[1], "float64"),
        )


def _local_load(
    client, X, y, sample_weight, *, classify, timeout, estimator, reset=True, what="X", device="cpu"
):
    cuts = [0, X.shape[0] // 3, X.shape[0] // 2, X.shape[0]]
    blocks = [
        (X[a:b], y[a:b], None if sample_weight is None else sample_weight[a:b])
        for a, b in zip(cuts[:-1], cuts[1:])
    ]
    if reset:
        estimator.n_features_in_, estimator.category_codes_ = X.shape[1], None
    loaded = _LocalLoaded(
        futures=[],
        summaries=[],
        offsets=np.array(cuts, np.int64),
        n=X.shape[0],
        n_features=X.shape[1],
        dtype="float64",
    )
    loaded.blocks, loaded.classify = blocks, classify
    loaded.summaries = [summary_of(loaded.make(i)) for i in range(len(blocks))]
    return loaded


def _same_state(a, b, where):
    """Every array of shard state equal in shards ``a`` (live) and ``b`` (replayed)."""
    for name in ("y", "w", "raw", "G", "Hs", "gh", "Q", "gt_bins"):
        x, y = getattr(a, name, None), getattr(b, name, None)
        assert (x is None) == (y is None), (where, name)
        if x is not None:
            assert np.array_equal(x, y), (where, name)
    assert hasattr(a, "data") == hasattr(b, "data"), where
    if hasattr(a, "data"):
        assert np.array_equal(a.data.by_row, b.data.by_row), where
    assert a.snapshots.keys() == b.snapshots.keys(), where
    for k in a.snapshots:
        assert np.array_equal(a.snapshots[k], b.snapshots[k]), (where, "snapshot", k)
    assert a.vec.keys() == b.vec.keys(), where
    for k in a.vec:
        assert np.array_equal(a.vec[k], b.vec[k]), (where, "vec", k)
    assert (a.st is None) == (b.st is None), where
    if a.st is not None:
        for name in ("rows", "node_start", "node_count", "active"):
            assert np.array_equal(getattr(a.st, name), getattr(b.st, name)), (where, name)
        f = a.st.feats[: a.st.n_feats].astype(np.int64)  # the histograms' defined features
        assert np.array_equal(f, b.st.feats[: b.st.n_feats]), where
        slots = a.st.layout.slots_of(f)  # the compact layout's slots of those features
        assert np.array_equal(a.st.layout.offset, b.st.layout.offset), (where, "layout")
        assert np.array_equal(a.st.hist[:, slots], b.st.hist[:, slots]), (where, "hist")
    for name in ("both", "prev", "row_of"):
        x = getattr(getattr(a, "gt", None), name, None)
        y = getattr(getattr(b, "gt", None), name, None)
        assert (x is None) == (y is None) and (x is None or np.array_equal(x, y)), (where, name)
    # the histograms kept for the reduction among the workers, under the same call's tag
    assert (a.kept is None) == (b.kept is None), where
    if a.kept is not None:
        assert a.kept[0] == b.kept[0] and np.array_equal(a.kept[1], b.kept[1]), (where, "kept")
    if hasattr(a, "gt_first"):
        assert np.array_equal(a.gt_first.sums, b.gt_first.sums), where
        assert np.array_equal(a.gt_first.bins, b.gt_first.bins), where


class LocalGroup(ShardGroup):
    """A ShardGroup whose two shards live in this process; before every call, fresh shards
    replay the journal and are compared with the live ones."""

    checks = 0
    reductions = 0

    def __init__(self, client, loaded, timeout, n_jobs=None, what="X", device="cpu"):
        self.client, self.timeout, self.what, self.loaded, self.n_jobs = (
            None,
            float(timeout),
            what,
            loaded,
            n_jobs,
        )
        self.bytes_sent = self.bytes_received = self.bytes_replayed = self.calls = 0
        self.bytes_between_workers = self.reductions = 0
        self.reduce_seconds = 0.0
        self.phase, self.journal, self.recoveries, self._pending = "starting", Journal(), [], []
        self.parts = [[0, 1], [2]]
        self.addresses = ["local-0", "local-1"]
        self._futures = []
        self.actors = [self._fresh(i) for i in range(2)]
        off = loaded.offsets
        self.rows = [np.concatenate([np.arange(off[j], off[j + 1]) for j in p]) for p in self.parts]

    def _fresh(self, i):
        return Shard(
            [self.loaded.make(j) for j in self.parts[i]],
            [int(self.loaded.offsets[j]) for j in self.parts[i]],
            1,
        )

    def call(self, method, *args, per_shard=None):
        for i, live in enumerate(self.actors):
            fresh = self._fresh(i)
            fresh.replay(self.journal.replay_for(i))
            _same_state(live, fresh, (self.what, self.phase, method))
            LocalGroup.checks += 1
        return super().call(method, *args, per_shard=per_shard)

    def _round(self, idx, send):
        return {i: send(i) for i in idx}, {}

    def reduce(self, tag):
        # the workers' tree, in this process: the kept payloads of the call, summed
        assert all(a.kept is not None and a.kept[0] == tag for a in self.actors)
        LocalGroup.reductions += 1
        return self.actors[0].kept[1] + self.actors[1].kept[1]

    def close(self):
        self.actors = []


@pytest.mark.filterwarnings("ignore:split_search='group_testing'")
@pytest.mark.parametrize("pool_ranking", ["gain", "heldout"])
def test_replayed_journal_holds_the_live_state_at_every_call(monkeypatch, pool_ranking):
    """With ``pool_ranking="heldout"`` (issue 35) the cluster fit is refused before any shard
    is called: it once ran the gain ranking instead, and its mu probes differed from the
    one-process fit's (``test_exact_k``'s held-out split test)."""
    rng = np.random.default_rng(0)
    n, d = 240, 8
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < 0.05] = np.nan
    Xz = np.nan_to_num(X)
    y = np.digitize(
        2 * Xz[:, 1] - Xz[:, 5] + 0.5 * Xz[:, 6] + 0.3 * rng.normal(size=n), [-1.0, 1.0]
    )
    Xv, yv = X[:80] + 0.1, y[:80]
    # the second shard's rows all weigh 0: it holds none of the group tests' rows
    w = np.where(np.arange(n) < n // 2, rng.random(n) + 0.5, 0.0)
    kw = dict(
        n_estimators=6,
        max_depth=3,
        n_features_to_select=2,
        split_search="group_testing",
        gt_s=2,
        gt_subsets="per_fit",
        random_state=3,
        pool_ranking=pool_ranking,
    )
    monkeypatch.setattr(_gbfs, "load", _local_load)
    monkeypatch.setattr(_gbfs, "ShardGroup", LocalGroup)
    monkeypatch.setattr(_gbfs, "default_client", lambda c: None)
    LocalGroup.checks = LocalGroup.reductions = 0
    if pool_ranking == "heldout":
        with pytest.raises(ValueError, match="pool_ranking='heldout' is not supported"):
            DaskGBFSClassifier(**kw).fit(X, y, sample_weight=w, eval_set=(Xv, yv))
        assert LocalGroup.checks == LocalGroup.reductions == 0
        return
    ref = GBFSClassifier(**kw).fit(X, y, sample_weight=w, eval_set=(Xv, yv))
    est = DaskGBFSClassifier(**kw).fit(X, y, sample_weight=w, eval_set=(Xv, yv))
    assert LocalGroup.checks > 200 and LocalGroup.reductions > 50
    assert len(ref.mu_search_) > 1 and est.mu_search_ == [
        dict(p, seconds=q["seconds"]) for p, q in zip(ref.mu_search_, est.mu_search_)
    ]
    sa, sb = ref.ensemble_.stacked(), est.ensemble_.stacked()
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)
    assert np.array_equal(ref.selected_features_, est.selected_features_)
    assert np.array_equal(ref.evals_result_[0], est.evals_result_[0])


def test_compaction_keeps_what_the_state_depends_on():
    j = Journal()
    j.record("set_target", (None, "float"))
    j.record("bin", (np.zeros((2, 3)), np.ones(2, np.int32), False))
    j.record("init_raw", (np.zeros(1),))
    for _t in range(40):  # rounds of one tree each: only the raw-score history accumulates
        j.record("round", ("squared_error", False, False))
        j.record("quantize", (0,))
        j.record("start_tree", (3, None, None, None))
        j.record("advance", (None, True, None))
        j.record("replay_tree", (0, 3, [], np.zeros(1), np.zeros(1)))
        j.maybe_compact()
    j.compact()
    methods = [e.method for e in j.entries]
    assert methods == (
        ["set_target", "bin", "init_raw"]
        + ["replay_tree"] * 39
        + ["round", "quantize", "start_tree", "advance", "replay_tree"]
    )
    # a snapshot restored later is kept with the history it copies; a dropped one is not
    j = Journal()
    for m, a in [
        ("init_raw", (0,)),
        ("snapshot_raw", (1,)),
        ("replay_tree", ("a",)),
        ("snapshot_raw", (2,)),
        ("replay_tree", ("b",)),
        ("drop_snapshot", (1,)),
        ("init_raw", (1,)),
        ("restore_raw", (2,)),
        ("replay_tree", ("c",)),
    ]:
        j.record(m, a)
    j.compact()
    assert [(e.method, e.args[0]) for e in j.entries] == [
        ("init_raw", 0),
        ("replay_tree", "a"),
        ("snapshot_raw", 2),
        ("restore_raw", 2),
        ("replay_tree", "c"),
    ]
    # runs of validation predictions are one call with the trees in order
    j = Journal()
    j.record("init_raw", (0,))
    for t in range(3):
        j.record(
            "predict", ({"value": np.full((1, 2), float(t)), "is_categorical": np.zeros(2, bool)},)
        )
    j.record("loss_terms", ("squared_error",))
    j.compact()
    assert [e.method for e in j.entries] == ["init_raw", "predict", "loss_terms"]
    assert j.entries[1].args[0]["value"][:, 0].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(KeyError, match="has no journal effects"):
        j.record("no_such_method", ())
