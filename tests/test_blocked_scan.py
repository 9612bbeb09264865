"""The CPU's blocked bin scan (``_gain.make_scan_feature_blocked``) against the scalar scan
that the GPU compiles (``_gain.make_scan_feature``): for every (node, feature) the same score,
gain, bin, missing side and left sums, bit for bit.

Cases meant to separate them if they differ: empty first, middle and last bins (the scalar
scan skips empty bins, the blocked one scores them), missing values or none, one- and two-bin
features, candidates made invalid by ``min_child_weight``, ties between equal candidates (coarse
gradients), gain divisors other than 1 and penalties large enough that different gains give the
same score (``score = gain / divisor - penalty`` rounds them together: the first candidate of the
best score must still win).
"""

import numpy as np
import pytest
from numba import njit

from gpufs.backends.cpu._device_fns import _scan_feature, _scan_feature_blocked


@njit(cache=False, error_model="numpy")
def _both(hist, nbs, G_q, H_q, g_inv, h_inv, lam, div, mcw, pen, out_s, out_b):
    buf_q = np.empty((4, 257), np.int64)
    buf_gain = np.empty((2, 257), np.float64)
    for k in range(hist.shape[0]):
        G = G_q[k] * g_inv
        H = H_q[k] * h_inv
        for f in range(nbs.shape[0]):
            lo = 256 * f
            last = lo + 255
            nb = nbs[f]
            r = _scan_feature(
                hist, k, lo, last, nb, G_q[k], H_q[k], G, H, g_inv, h_inv, lam, div, mcw, pen[f]
            )
            out_s[0, k, f] = r[0]
            out_s[1, k, f] = r[1]
            out_s[2, k, f] = r[2]
            out_s[3, k, f] = r[3]
            out_s[4, k, f] = r[4]
            out_s[5, k, f] = r[5]
            r = _scan_feature_blocked(
                hist,
                k,
                lo,
                last,
                nb,
                G_q[k],
                H_q[k],
                G,
                H,
                g_inv,
                h_inv,
                lam,
                div,
                mcw,
                pen[f],
                buf_q,
                buf_gain,
            )
            out_b[0, k, f] = r[0]
            out_b[1, k, f] = r[1]
            out_b[2, k, f] = r[2]
            out_b[3, k, f] = r[3]
            out_b[4, k, f] = r[4]
            out_b[5, k, f] = r[5]


def _case(seed, k=5, d=30):
    """Histograms of k nodes x d features in the full layout (feature f's value bin t at slot
    256 f + t, its missing bin at 256 f + 255); every feature of a node sums to the node's
    totals (the rest goes to the missing bin or, without missing values, to the last bin)."""
    rng = np.random.default_rng(seed)
    nbs = rng.choice([1, 2, 3, 5, 17, 64, 255], size=d).astype(np.int64)
    hist = np.zeros((k, 256 * d, 2), np.int64)
    unit = 1 << 18
    G_q = np.zeros(k, np.int64)
    H_q = np.zeros(k, np.int64)
    for s in range(k):
        fill = rng.choice([0.02, 0.2, 0.6, 1.0])
        coarse = rng.random() < 0.5
        per_f = []
        for f in range(d):
            nb = int(nbs[f])
            full = rng.random(nb) < fill
            if rng.random() < 0.3:
                full[0] = False
            if rng.random() < 0.3:
                full[-1] = False
            cnt = rng.integers(1, 6, size=nb) * full
            if coarse:  # equal candidates (ties)
                g = rng.integers(-3, 4, size=nb) * cnt * unit
            else:
                g = (rng.normal(size=nb) * cnt * unit).astype(np.int64)
            per_f.append((g, cnt * (unit // 4)))
        tot_g = max(int(abs(g.sum())) for g, _ in per_f) + unit
        tot_h = max(int(h.sum()) for _, h in per_f) + unit
        G_q[s], H_q[s] = tot_g, tot_h
        for f, (g, h) in enumerate(per_f):
            nb = int(nbs[f])
            lo = 256 * f
            hist[s, lo : lo + nb, 0] = g
            hist[s, lo : lo + nb, 1] = h
            rest = (tot_g - int(g.sum()), tot_h - int(h.sum()))
            if rng.random() < 0.5:  # missing values
                hist[s, lo + 255] = rest
            else:
                hist[s, lo + nb - 1, 0] += rest[0]
                hist[s, lo + nb - 1, 1] += rest[1]
    return hist, nbs, G_q, H_q, rng


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(
    "div, mcw, pen_scale",
    [(1.0, 0.0, 0.0), (1.0, 1e-3, 0.5), (3.0, 1.0, 0.0), (1.7, 1e-3, 1e16)],
)
def test_blocked_scan_equals_scalar_scan(seed, div, mcw, pen_scale):
    hist, nbs, G_q, H_q, rng = _case(seed)
    d = nbs.shape[0]
    pen = rng.choice([0.0, 1.0], size=d) * pen_scale
    out_s = np.full((6, hist.shape[0], d), np.nan)
    out_b = np.full((6, hist.shape[0], d), -np.nan)
    _both(hist, nbs, G_q, H_q, 2.0**-20, 2.0**-20, 1.0, div, mcw, pen, out_s, out_b)
    # score, gain, bin, missing side, left sums: the same bits (NaN never occurs)
    assert not np.isnan(out_s).any()
    np.testing.assert_array_equal(out_b, out_s)
    # the cases exercise what they are meant to: valid splits, missing-left winners, and
    # features with no valid candidate
    assert np.isfinite(out_s[0]).any()
    assert np.isneginf(out_s[0]).any() or mcw == 0.0


def test_cases_reach_both_missing_sides_and_merged_scores():
    """The generator makes what the comparison needs: winners with the missing bin left and
    right, and (penalty 1e16, whose ulp is 2) features whose best score is reached by a
    candidate of lower gain than the best gain's, so that the rule "the first candidate of the
    best score" and "the candidate of the best gain" differ."""
    sides, merged = set(), 0
    for seed in range(12):
        hist, nbs, G_q, H_q, rng = _case(seed)
        d = nbs.shape[0]
        plain = np.zeros((6, hist.shape[0], d))
        big = np.zeros_like(plain)
        for pen, out in ((0.0, plain), (1e16, big)):
            _both(
                hist,
                nbs,
                G_q,
                H_q,
                2.0**-20,
                2.0**-20,
                1.0,
                1.0,
                0.0,
                np.full(d, pen),
                out,
                out.copy(),
            )
        ok = np.isfinite(plain[0])
        sides |= set(plain[3][ok].astype(int).tolist())
        merged += int((big[1][ok] < plain[1][ok]).sum())
    assert sides == {0, 1}
    assert merged > 0
