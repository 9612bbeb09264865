"""The CPU split search over compacted bins (``split._compact_bins``): a (node, feature) pair
whose node has fewer rows than the feature has bins is scanned over a copy of its bins without
the empty ones. Every per-feature result (score, gain, bin, missing side, left sums) must be the
full scan's, bit for bit: empty first and last bins, missing values or none, one-bin and
two-bin features, all-empty nodes, ties between equal candidates."""

import numpy as np
import pytest

from gpufs.backends.base import SplitParams
from gpufs.backends.cpu._args import PerFeature, SearchSlots, split_args
from gpufs.backends.cpu.split import COMPACT_ROWS_PER_BIN, _search_ser
from gpufs.rules._hist_layout import HistLayout


def _search(hist, layout, n_bins, node_g, node_h, node_n, penalty):
    k, d = hist.shape[0], n_bins.shape[0]
    split = SplitParams(
        n_bins=n_bins,
        g_scale=2.0**20,
        h_scale=2.0**20,
        reg_lambda=1.0,
        gain_divisor=1.0,
        min_child_weight=1e-3,
        min_split_gain=0.0,
        layout=layout,
    )
    sp = split_args(split)
    pf = PerFeature(
        *(
            np.full((k, d), -7, dt)
            for dt in (np.float64, np.float64, np.int64, np.int64, np.int64, np.int64)
        )
    )
    slots = SearchSlots(
        hist,
        layout.offset,
        node_g,
        node_h,
        np.ones(k, np.bool_),
        np.zeros((k, 0, 256), np.uint8),
        node_n,
    )
    feats = np.arange(d, dtype=np.int32)
    _search_ser(slots, feats, d, penalty, np.ones(d, np.bool_), sp, pf)
    return pf


def _case(seed, k=6, d=40):
    rng = np.random.default_rng(seed)
    n_bins = rng.choice([1, 2, 3, 5, 17, 64, 255], size=d).astype(np.int32)
    layout = HistLayout.from_n_bins(n_bins)
    hist = np.zeros((k, layout.n_slots, 2), np.int64)
    off = layout.offset
    for s in range(k):
        fill = rng.choice([0.0, 0.02, 0.2, 0.6, 1.0])
        for f in range(d):
            nb = int(n_bins[f])
            full = rng.random(nb) < fill
            if rng.random() < 0.3:
                full[0] = False
            if rng.random() < 0.3:
                full[-1] = False
            cnt = rng.integers(1, 4, size=nb) * full
            # coarse values so that equal candidates (ties) occur
            g = rng.integers(-3, 4, size=nb) * cnt * (1 << 18)
            h = cnt * (1 << 18)
            hist[s, off[f] : off[f] + nb, 0] = g
            hist[s, off[f] : off[f] + nb, 1] = h
            if rng.random() < 0.5:  # missing values
                hist[s, off[f + 1] - 1] = (rng.integers(-3, 4) << 18, 1 << 18)
    # every feature of a node sums to the same node total: put the rest in the missing bin
    tot = np.zeros((k, d, 2), np.int64)
    for f in range(d):
        tot[:, f] = hist[:, off[f] : off[f + 1]].sum(axis=1)
    node_tot = tot.max(axis=1) + (1 << 18)
    for f in range(d):
        hist[:, off[f + 1] - 1] += node_tot - tot[:, f]
    penalty = rng.choice([0.0, 0.5], size=d)
    return hist, layout, n_bins, node_tot[:, 0].copy(), node_tot[:, 1].copy(), penalty


@pytest.mark.parametrize("seed", range(6))
def test_compacted_scan_is_the_full_scan(seed):
    hist, layout, n_bins, node_g, node_h, penalty = _case(seed)
    k = hist.shape[0]
    assert COMPACT_ROWS_PER_BIN > 0
    compact = _search(hist, layout, n_bins, node_g, node_h, np.zeros(k, np.int64), penalty)
    full = _search(hist, layout, n_bins, node_g, node_h, np.full(k, 10**9, np.int64), penalty)
    for name, a, b in zip(PerFeature._fields, compact, full):
        assert np.array_equal(a, b), name
    # the cases reach the interesting splits: missing-left ones and splits past empty bins
    valid = full.score > -np.inf
    assert valid.any() and (full.missing_left[valid] == 1).any()
