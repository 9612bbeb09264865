"""The histogram layout: where each feature's bins sit in a node's flat histogram.

Owns the one description of a histogram that both backends and a cluster's workers read.
Feature f has the slots ``offset[f] .. offset[f + 1] - 1``: its value bins first, its missing
bin last (LightGBM's bin offsets, XGBoost's ``feature_segments``), so a column with two
distinct values takes 3 slots, not 256. A node's histogram is (n_slots, 2) int64 (g, h), a
level's (n_nodes, n_slots, 2). ``BinMapper.hist_layout`` builds it once per fit; the full
layout (256 slots per feature) is the dense (n_features, 256) histogram of the tests.

A sparse feature's most frequent slot (``most_freq``, chosen at binning) may be left out of the
accumulation and derived from the node's totals (LightGBM's ``most_freq_bin``): exact in int64.

``slot_of`` is plain scalar Python that both backends compile (part of the numba cache
digest, ``gpufs._numba_setup``).
"""

from __future__ import annotations

import numpy as np

from .._types import HIST_DTYPE, MAX_VALUE_BINS, MISSING_BIN, MOST_FREQ_MIN_FRACTION, N_HIST_BINS

__all__ = ["HistLayout", "layout_of", "slot_of", "split_input", "tree_layout"]


def slot_of(b, lo, last):
    """The slot of bin ``b`` (uint8; 255 = missing) of the feature whose slots are
    ``lo .. last``: ``lo + b`` for a value bin, ``last`` for the missing bin (a value bin is
    below the feature's bin count, so only the missing bin reaches past ``last``)."""
    s = lo + b
    return s if s < last else last


class HistLayout:
    """Where each feature's (g, h) bins sit in a node's flat histogram (module docstring).

    Parameters
    ----------
    offset : array-like of shape (n_features + 1,), int
        Feature f's slots are ``offset[f] .. offset[f + 1] - 1`` (at least 2: one value bin
        and the missing bin; at most 256), value bins first, the missing bin last.
    most_freq : array-like of shape (n_features,), int, or None, default=None
        The slot (within the feature) that may be derived from the node's totals instead of
        accumulated, -1 where none is (the default for every feature).

    Attributes
    ----------
    offset : ndarray of shape (n_features + 1,), int64
    most_freq : ndarray of shape (n_features,), int32
    n_features : int
    n_slots : int
        Slots of one node's histogram (``offset[-1]``).
    has_most_freq : bool
        Whether some feature's most frequent slot is derived.
    """

    __slots__ = ("offset", "most_freq", "n_features", "n_slots", "has_most_freq", "_hash")

    def __init__(self, offset, most_freq=None):
        offset = np.ascontiguousarray(offset, np.int64)
        width = np.diff(offset)
        if (
            offset.ndim != 1
            or offset.shape[0] < 1
            or offset[0] != 0
            or (width.size and (width.min() < 2 or width.max() > N_HIST_BINS))
        ):
            raise ValueError(
                "a histogram layout's offsets start at 0 and give each feature "
                f"2 to {N_HIST_BINS} slots"
            )
        self.offset = offset
        self.n_features = int(offset.shape[0] - 1)
        self.n_slots = int(offset[-1])
        if most_freq is None:
            most_freq = np.full(self.n_features, -1, np.int32)
        most_freq = np.ascontiguousarray(most_freq, np.int32)
        if most_freq.shape != (self.n_features,) or np.any(most_freq >= width):
            raise ValueError("most_freq must give each feature one of its slots, or -1")
        self.most_freq = most_freq
        #: whether some feature's most frequent slot is derived
        self.has_most_freq = bool(np.any(most_freq >= 0))
        self._hash = hash((offset.tobytes(), most_freq.tobytes()))

    # --- construction ---------------------------------------------------------------------
    @classmethod
    def from_n_bins(cls, n_bins, most_freq_bin=None, most_freq_frac=None):
        """The compact layout of features with ``n_bins`` value bins each.

        Parameters
        ----------
        n_bins : array-like of shape (n_features,), int
            Value bins per feature (1 .. 255); each feature gets ``n_bins + 1`` slots.
        most_freq_bin : array-like of shape (n_features,), int, or None
            Each feature's most frequent bin (a value bin, or 255 for the missing bin).
        most_freq_frac : array-like of shape (n_features,), float, or None
            The fraction of the rows it holds: a feature is sparse (its most frequent slot
            derived, ``most_freq``) when it is at least ``MOST_FREQ_MIN_FRACTION``.

        Returns
        -------
        HistLayout
        """
        n_bins = np.clip(np.asarray(n_bins, np.int64).reshape(-1), 1, MAX_VALUE_BINS)
        offset = np.zeros(n_bins.shape[0] + 1, np.int64)
        np.cumsum(n_bins + 1, out=offset[1:])
        most_freq = None
        if most_freq_bin is not None and most_freq_frac is not None:
            b = np.asarray(most_freq_bin, np.int64)
            local = np.where(b == MISSING_BIN, n_bins, b)
            sparse = (np.asarray(most_freq_frac, np.float64) >= MOST_FREQ_MIN_FRACTION) & (
                local <= n_bins
            )
            most_freq = np.where(sparse, local, -1)
        return cls(offset, most_freq)

    @classmethod
    def full(cls, n_features):
        """The full layout: 256 slots per feature, slot b of a feature holding bin b, so a
        level's histogram reshapes to the dense (n_nodes, n_features, 256, 2).

        Parameters
        ----------
        n_features : int

        Returns
        -------
        HistLayout
        """
        return cls(np.arange(int(n_features) + 1, dtype=np.int64) * N_HIST_BINS)

    def without_most_freq(self):
        """The same slots, every bin accumulated (no slot derived).

        Returns
        -------
        HistLayout
        """
        if not self.has_most_freq:
            return self
        return HistLayout(self.offset)

    # --- what it says -----------------------------------------------------------------------
    @property
    def widths(self):
        """Slots per feature, (n_features,) int64."""
        return np.diff(self.offset)

    @property
    def is_full(self):
        """Whether every feature has 256 slots (the dense layout)."""
        return bool(np.all(self.widths == N_HIST_BINS))

    def nbytes(self, n_nodes=1):
        """Bytes of the histograms of ``n_nodes`` nodes."""
        return int(n_nodes) * self.n_slots * 2 * np.dtype(HIST_DTYPE).itemsize

    def slots_of(self, feats):
        """Every slot of the listed features, in order.

        Parameters
        ----------
        feats : array-like of shape (n_feats,), int

        Returns
        -------
        ndarray of shape (sum of their widths,), int64
        """
        feats = np.asarray(feats, np.int64).reshape(-1)
        lo, hi = self.offset[feats], self.offset[feats + 1]
        if feats.size == 0:
            return np.zeros(0, np.int64)
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(hi - lo)[:-1]]), hi - lo)
        return starts + np.arange(int((hi - lo).sum()), dtype=np.int64)

    def dense(self, hist):
        """A histogram in this layout as the dense (..., n_features, 256, 2) array: slot t of
        feature f at bin t, its last slot (the missing bin) at bin 255, zeros elsewhere.

        Parameters
        ----------
        hist : ndarray of shape (..., n_slots, 2)

        Returns
        -------
        ndarray of shape (..., n_features, 256, 2)
        """
        hist = np.asarray(hist)
        lead = hist.shape[:-2]
        out = np.zeros(lead + (self.n_features, N_HIST_BINS, 2), hist.dtype)
        for f in range(self.n_features):
            lo, hi = int(self.offset[f]), int(self.offset[f + 1])
            out[..., f, : hi - lo - 1, :] = hist[..., lo : hi - 1, :]
            out[..., f, MISSING_BIN, :] = hist[..., hi - 1, :]
        return out

    def compact(self, dense):
        """The inverse of ``dense``: a dense (..., n_features, 256, 2) histogram in this
        layout (value bins past a feature's width must be zero).

        Parameters
        ----------
        dense : ndarray of shape (..., n_features, 256, 2)

        Returns
        -------
        ndarray of shape (..., n_slots, 2)
        """
        dense = np.asarray(dense)
        lead = dense.shape[:-3]
        out = np.zeros(lead + (self.n_slots, 2), dense.dtype)
        for f in range(self.n_features):
            lo, hi = int(self.offset[f]), int(self.offset[f + 1])
            out[..., lo : hi - 1, :] = dense[..., f, : hi - lo - 1, :]
            out[..., hi - 1, :] = dense[..., f, MISSING_BIN, :]
        return out

    def __eq__(self, other):
        return self is other or (
            isinstance(other, HistLayout)
            and self._hash == other._hash
            and np.array_equal(self.offset, other.offset)
            and np.array_equal(self.most_freq, other.most_freq)
        )

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return (
            f"HistLayout(n_features={self.n_features}, n_slots={self.n_slots}, "
            f"sparse={int((self.most_freq >= 0).sum())})"
        )

    def __getstate__(self):
        return {"offset": self.offset, "most_freq": self.most_freq}

    def __setstate__(self, state):
        self.__init__(state["offset"], state["most_freq"])


def layout_of(bin_mapper, n_bins, n_features):
    """The histogram layout of a tree: the bin mapper's (``BinMapper.hist_layout``, built
    once per fit), or the compact layout of ``n_bins`` for other mappers.

    Parameters
    ----------
    bin_mapper : object
        The tree's bin mapper.
    n_bins : ndarray of shape (n_features,), int32
        Value bins per feature (on any device).
    n_features : int

    Returns
    -------
    HistLayout
    """
    get = getattr(bin_mapper, "hist_layout", None)
    if get is not None:
        layout = get()
        if layout.n_features == n_features:
            return layout
    from .._device import to_host

    return HistLayout.from_n_bins(to_host(n_bins))


def split_input(hist, split):
    """(hist, layout) of ``find_splits``' input: a dense (k, d, 256, 2) histogram is the full
    layout's (k, d * 256, 2); a (k, n_slots, 2) one is in ``split``'s layout.

    Parameters
    ----------
    hist : ndarray of shape (k, n_slots, 2) or (k, n_features, 256, 2), int64
    split : SplitParams

    Returns
    -------
    hist : ndarray of shape (k, n_slots, 2), int64
    layout : HistLayout
    """
    if hist.ndim == 4:
        k, d = hist.shape[0], hist.shape[1]
        return hist.reshape(k, d * N_HIST_BINS, 2), HistLayout.full(d)
    return hist, tree_layout(None, split, len(split.n_bins))


def tree_layout(layout, split, n_features):
    """The histogram layout of a tree: ``layout``, else ``split``'s (``SplitParams.layout``,
    or the compact layout of its bin counts), else the full layout of ``n_features``.

    Parameters
    ----------
    layout : HistLayout or None
    split : SplitParams or None
    n_features : int

    Returns
    -------
    HistLayout
    """
    if layout is None and split is not None:
        layout = split.hist_layout()
    if layout is None:
        layout = HistLayout.full(n_features)
    if layout.n_features != n_features:
        raise ValueError(
            f"the histogram layout has {layout.n_features} features, the data {n_features}"
        )
    return layout
