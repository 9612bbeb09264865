"""Quantile binning: cut points per feature, and the map from float features to uint8 bins.

Owns the cut-point rule. It uses only exact operations (row sampling by host-chosen indices,
sorting, gathering, comparisons), so the same data gives the same cut points whether the
columns sit in numpy or in cupy, and therefore the same bins on both devices.

The rules in full, the reasons and the measurements: ``docs/module_notes.rst``.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._device import is_host_namespace, namespace_of, to_host
from .._threading import current_limit
from .._types import CUT_DTYPE, MAX_VALUE_BINS, MISSING_BIN
from ..data._category_codes import categories_to_dict, read_categories
from ..io._strict_json import (
    MAX_BINNED_FEATURES,
    At,
    floats_out,
    plain,
    read_float_array,
    read_int,
    read_list,
    read_obj,
)

#: Columns whose subsample is sorted at once in ``BinMapper.fit``: at least 16, and as many
#: as keep a block's float64 copy near ``_BLOCK_VALUES`` values (wide tables of few rows get
#: big blocks: fewer array calls per column).
_COLUMN_BLOCK = 16
_BLOCK_VALUES = 1 << 20


class BinMapper:
    """Learns cut points on X and maps float features to uint8 bins.

    Parameters
    ----------
    max_bins : int, 2..255
        Most value bins per feature (a separate bin always holds NaN).
    subsample : int or None
        Rows used to find the cut points (None: all rows).
    random_state : int
        Seed of the subsample.

    Attributes
    ----------
    cuts_ : list of ndarray of shape (n_bins_[f] - 1,), float64
        The sorted cut points of every feature.
    cuts_padded_ : ndarray of shape (n_features, 254), float64
        The cut points padded with +inf.
    n_bins_ : ndarray of shape (n_features,), int32
        Value bins per feature (the missing bin not counted).
    is_categorical_ : ndarray of shape (n_features,), bool
        The categorical features.
    categories_ : CategoryCodes or None
        Their category -> code (= bin) maps.
    most_freq_bin_ : ndarray of shape (n_features,), int32
        Each feature's most frequent bin in the subsample (255: the missing bin), the first
        of equals; with ``most_freq_frac_`` it shapes the histogram layout
        (``hist_layout``). Training only: not saved with a model (a loaded mapper has -1).
    most_freq_frac_ : ndarray of shape (n_features,), float64
        The fraction of the subsample's rows in that bin (0 for a loaded mapper).
    """

    def __init__(self, max_bins: int = 255, subsample: int | None = 200_000, random_state: int = 0):
        if not (2 <= int(max_bins) <= MAX_VALUE_BINS):
            raise ValueError(f"max_bins must be in [2, {MAX_VALUE_BINS}], got {max_bins}.")
        self.max_bins = int(max_bins)
        self.subsample = subsample
        self.random_state = random_state

    def fit(self, X, categories=None):
        """Learn the cut points of every feature (the rule of ``docs/module_notes.rst``).

        Columns are processed in blocks (``_COLUMN_BLOCK`` at a time, more when the subsample
        has few rows), so the float64 sorted copy of the subsample never holds more than a
        few blocks (T + 1 on T threads, ``_map_blocks``): the memory of a fit is not doubled
        by its binning.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float
            numpy or cupy; NaN marks a missing value.
        categories : CategoryCodes or None, default=None
            The input door's codes of X's categorical columns (coded 0..n_codes-1).

        Returns
        -------
        self : BinMapper
        """
        xp = namespace_of(X)
        n, d = X.shape
        idx = self.sample_rows(n)
        if idx is not None:
            idx = xp.asarray(idx)
        self._set_categories(categories, d)
        self.cuts_ = []
        self.most_freq_bin_ = np.zeros(d, np.int32)
        self.most_freq_frac_ = np.zeros(d, np.float64)
        m = n if idx is None else len(idx)
        width = max(_COLUMN_BLOCK, _BLOCK_VALUES // max(m, 1))
        # Columns of small integers are counted, not sorted (``_small_int_cuts``).
        found = self._small_int_cuts(X, idx, m) if _counts_small_ints(xp, X) else {}
        rest = np.array([f for f in range(d) if f not in found], np.int64)
        blocks = [rest[i : i + width] for i in range(0, rest.shape[0], width)]

        def fit_block(cols):
            """The cut points and most frequent bins of the columns ``cols`` (increasing)."""
            lo, hi = int(cols[0]), int(cols[-1]) + 1
            block = X[:, lo:hi] if hi - lo == cols.shape[0] else X[:, cols]
            sample = block if idx is None else block[idx]
            cuts, sorted_, n_valid, counts = self._fit_block(xp, _sortable(xp, sample))
            freq = []
            for j, f in enumerate(cols):
                if self.is_categorical_[f]:
                    cuts[j] = category_cuts(categories.n_codes[int(f)])
                    counts[j] = None
                freq.append(_most_frequent(xp, sorted_[j], int(n_valid[j]), cuts[j], counts[j]))
            return cols, cuts, freq, sorted_

        held = None
        for cols, cuts, freq, sorted_ in _map_blocks(fit_block, blocks, xp):
            # A block's sorted copy is let go only once the next block's exists: freed
            # first, its pages went back to the system (glibc) and the next block's copies
            # faulted them in again (8,000 x 1,500 counts, one core: 136 -> 221 ms).
            held = sorted_  # noqa: F841
            for f, c, fr in zip(cols, cuts, freq):
                found[int(f)] = (c, fr)
        for f in range(d):
            self.cuts_.append(found[f][0])
            self.most_freq_bin_[f], self.most_freq_frac_[f] = found[f][1]
        self._pad()
        return self

    def sample_rows(self, n: int):
        """The rows of an ``n``-row X whose values place the cut points.

        ``fit(X)`` equals ``fit`` on ``X[sample_rows(n)]`` (what a cluster gathers from its
        workers, ``gpufs.dask``).

        Parameters
        ----------
        n : int
            Rows of X.

        Returns
        -------
        ndarray of shape (subsample,), int64, or None
            Sorted host indices of the seeded subsample; None for all rows.
        """
        if self.subsample is None or n <= self.subsample:
            return None
        rng = np.random.RandomState(self.random_state)
        return np.sort(rng.choice(n, self.subsample, replace=False))

    def _set_categories(self, categories, d):
        self.__dict__.pop("_categorical_slots", None)
        self.categories_ = categories
        self.is_categorical_ = np.zeros(d, dtype=bool)
        if categories is not None:
            if categories.n_features != d:
                raise ValueError(f"categories describe {categories.n_features} columns, X has {d}.")
            if max(categories.n_codes.values(), default=0) > self.max_bins:
                raise ValueError(
                    f"a categorical column has more codes than max_bins={self.max_bins}."
                )
            self.is_categorical_ = categories.is_categorical

    def hist_layout(self):
        """The histogram layout of the fitted features (``gpufs.rules._hist_layout``): n_bins_ + 1
        slots per feature, the most frequent bin of the sparse ones derived. Made once per
        fit.

        Returns
        -------
        HistLayout
        """
        layout = self.__dict__.get("_hist_layout")
        if layout is None:
            from ..rules._hist_layout import HistLayout

            freq = getattr(self, "most_freq_bin_", None)
            layout = HistLayout.from_n_bins(
                self.n_bins_, freq, getattr(self, "most_freq_frac_", None)
            )
            self._hist_layout = layout
        return layout

    def categorical_slots(self):
        """(cat_slot, n_cat) of the fitted features (``backends.base.categorical_slots``).
        Made once per fit.

        Returns
        -------
        cat_slot : ndarray of shape (n_features,), int32
        n_cat : int
        """
        slots = self.__dict__.get("_categorical_slots")
        if slots is None:
            from ..backends.base import categorical_slots

            slots = categorical_slots(getattr(self, "is_categorical_", None), len(self.cuts_))
            self._categorical_slots = slots
        return slots

    def _pad(self):
        self.__dict__.pop("_hist_layout", None)
        self.__dict__.pop("_categorical_slots", None)
        d = len(self.cuts_)
        self.n_bins_ = np.array([c.shape[0] + 1 for c in self.cuts_], dtype=np.int32)
        self.cuts_padded_ = np.full((d, MAX_VALUE_BINS - 1), np.inf, dtype=CUT_DTYPE)
        for f, c in enumerate(self.cuts_):
            self.cuts_padded_[f, : c.shape[0]] = c

    #: Rows of X's head that pick the columns ``_small_int_cuts`` counts.
    SMALL_INT_HEAD = 64
    #: Columns counted in one pass of ``_small_int_cuts`` (their counts: 8 MiB).
    SMALL_INT_CHUNK = 4096

    def _small_int_cuts(self, X, idx, m):
        """{column: (cuts, (most frequent bin, its fraction))} of the columns of host X whose
        ``m`` rows of the subsample (``idx``) hold only NaN and integers 0 .. 255 in at most
        ``max_bins`` distinct values, and of the categorical ones among them: the cut points
        and bins ``_fit_block`` finds by sorting, from the rows per value
        (``backends.cpu.binning.small_int_counts``): one pass, no sort, no copy. Only the
        columns whose first ``SMALL_INT_HEAD`` rows are of that kind are counted, so a table
        of other values pays for no pass."""
        from ..backends.cpu.binning import SMALL_INT_VALUES, small_int_counts

        rows = slice(self.SMALL_INT_HEAD) if idx is None else idx[: self.SMALL_INT_HEAD]
        head = X[rows]
        with np.errstate(invalid="ignore"):
            ok = (head >= 0) & (head < SMALL_INT_VALUES) & (head == np.floor(head))
        cand = np.flatnonzero((ok | np.isnan(head)).all(axis=0))
        if cand.shape[0] == 0:
            return {}
        # one chunk per thread: a wide chunk reads whole rows (8,000 x 1,500 counts, one
        # thread: 16 columns a pass 112 ms, 131 55 ms, 1,500 31 ms)
        threads = current_limit() or 1
        size = min(self.SMALL_INT_CHUNK, -(-cand.shape[0] // threads))
        chunks = [cand[i : i + size] for i in range(0, cand.shape[0], size)]
        found = {}
        for cols, (counts, n_nan, small) in _map_blocks(
            lambda cols: (cols, small_int_counts(X, idx, cols)), chunks, np
        ):
            found.update(self._cuts_of_counts(cols[small], counts[small], n_nan[small], m))
        return found

    def _cuts_of_counts(self, cols, counts, n_nan, m):
        """``_small_int_cuts``'s result for ``cols`` (w,) from their rows per value
        ``counts`` (w, 256) and NaN rows ``n_nan`` (w,), out of ``m``; vectorized over the
        columns but for the categorical ones."""
        n_valid = m - n_nan
        present = counts > 0
        n_distinct = present.sum(axis=1)
        _, values = np.nonzero(present)  # row-major: each column's values ascending
        values = values.astype(np.float64)
        mids = (0.5 * values[:-1] + 0.5 * values[1:]).astype(CUT_DTYPE)
        starts = np.concatenate([[0], np.cumsum(n_distinct)])
        found = {}
        for j in range(cols.shape[0]):
            f, c = int(cols[j]), counts[j]
            if self.is_categorical_[f]:
                # code k in bin k, the codes from the last cut point on in the last bin
                cuts = category_cuts(self.categories_.n_codes[f])
                per_bin = np.append(c[: cuts.shape[0]], c[cuts.shape[0] :].sum())
            elif n_distinct[j] > self.max_bins:
                continue  # quantile cut points: the sort's
            else:  # one bin per value present (none: one empty bin)
                cuts = mids[starts[j] : starts[j] + max(n_distinct[j] - 1, 0)].copy()
                per_bin = c[present[j]] if n_distinct[j] else np.zeros(1, np.int64)
            found[f] = (cuts, _most_frequent_of_counts(m, int(n_valid[j]), per_bin))
        return found

    def _fit_block(self, xp, sample):
        """Cut points of the columns of ``sample`` (float32 or float64 rows of the subsample),
        the columns sorted as float64 (NaN last; (columns, rows), each row of it contiguous),
        their counts of non-missing values (host), and the rows per bin of the columns whose
        every distinct value has a bin (None for the others)."""
        d = sample.shape[1]
        # NaN last (numpy, cupy). float32 columns are sorted as float32 and then widened:
        # widening is exact and keeps the order, so the values are those of sorting the
        # float64 copy, for half the bytes moved and twice the values per vector.
        sorted_ = xp.sort(xp.ascontiguousarray(sample.T), axis=1).astype(np.float64, copy=False)
        n_valid = (~xp.isnan(sorted_)).sum(axis=1).astype(np.int64)
        i = xp.arange(self.max_bins, dtype=np.int64)[None, :]
        pos = (i * xp.maximum(n_valid - 1, 0)[:, None]) // (self.max_bins - 1)
        picked = to_host(xp.take_along_axis(sorted_, pos, axis=1))  # (d, max_bins)
        # distinct non-missing values per feature (NaNs sort last and are not counted)
        cols = xp.arange(sorted_.shape[1])[None, :]
        new_value = (sorted_[:, 1:] != sorted_[:, :-1]) & (cols[:, 1:] < n_valid[:, None])
        n_distinct = to_host(new_value.sum(axis=1) + (n_valid > 0))
        n_valid = to_host(n_valid)
        cuts = []
        counts = []
        for f in range(d):
            nv = int(n_valid[f])
            if nv == 0:
                cuts.append(np.empty(0, CUT_DTYPE))
                counts.append(np.zeros(1, np.int64))
                continue
            if n_distinct[f] <= self.max_bins:
                # the distinct values of the sorted column (np.unique's, without its sort)
                col = to_host(sorted_[f, :nv])
                first = np.flatnonzero(np.concatenate([[True], col[1:] != col[:-1]]))
                u = col[first]
                counts.append(np.diff(np.append(first, nv)))  # one bin per value
            else:
                u = np.unique(picked[f])
                counts.append(None)
            cuts.append((0.5 * u[:-1] + 0.5 * u[1:]).astype(CUT_DTYPE))
        return cuts, sorted_, n_valid, counts

    def transform(self, X, backend):
        """The bins of X, computed by ``backend``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float32 or float64
            On ``backend``'s device (a ValueError says so otherwise); NaN marks a missing
            value.
        backend : CPUBackend or GPUBackend

        Returns
        -------
        Xb : ndarray of shape (n_samples, n_features), uint8
            On X's device; bin 255 for missing values.
        """
        if not backend.owns(X):
            raise ValueError(
                f"X is on a different device from the {backend.name} backend: "
                "move it there first (gpufs.data._input.check_X does)."
            )
        return backend.bin_transform(X, self.cuts_padded_, self.n_bins_ - 1)

    def threshold_value(self, feature: int, bin_threshold: int) -> float:
        """The raw-value threshold of a split 'bin <= bin_threshold' on ``feature``.

        Bin b holds the x with x <= cuts[b], so the threshold is cuts[bin_threshold]; for the
        top bin (``bin_threshold = n_bins - 1``, the split that sends every value left and the
        missing values right) it is +inf: every non-missing x, +inf included, goes left.

        Parameters
        ----------
        feature : int
        bin_threshold : int

        Returns
        -------
        float
        """
        cuts = self.cuts_[feature]
        if bin_threshold >= cuts.shape[0]:
            return float("inf")
        return float(cuts[bin_threshold])

    def threshold_values(self, features, bins) -> np.ndarray:
        """``threshold_value`` of many splits at once.

        Parameters
        ----------
        features, bins : array-like of shape (n_splits,), int

        Returns
        -------
        ndarray of shape (n_splits,), float64
        """
        features = np.asarray(features, np.int64)
        bins = np.asarray(bins, np.int64)
        cuts = self.cuts_padded_
        # a bin past the feature's last cut has no threshold (inf); the clip only keeps the
        # gather inside the padded table for those
        inner = bins < self.n_bins_[features] - 1
        return np.where(inner, cuts[features, np.minimum(bins, cuts.shape[1] - 1)], np.inf)

    # --- persistence (the JSON form: bins_to_dict / read_bins below) ---------------------
    def to_dict(self) -> dict:
        """The fitted cut points in the JSON form of the model files.

        Returns
        -------
        dict
        """
        return bins_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> BinMapper:
        """A fitted mapper from ``to_dict``'s form, validated first.

        Parameters
        ----------
        d : dict
            ``to_dict``'s form (numpy arrays and scalars are accepted too).

        Returns
        -------
        BinMapper
            A ValueError naming the field is raised for anything invalid.
        """
        return cls._from_validated(*read_bins(plain(d)))

    @classmethod
    def _from_validated(cls, max_bins, subsample, random_state, cuts, categories=None) -> BinMapper:
        """A fitted mapper from checked cut points (float64 arrays, non-decreasing) and
        category maps (those of categorical features: ``category_cuts``)."""
        m = cls(max_bins, subsample, random_state)
        m.cuts_ = [np.asarray(c, dtype=CUT_DTYPE) for c in cuts]
        m._set_categories(categories, len(m.cuts_))
        m._no_most_freq()
        m._pad()
        return m

    def _no_most_freq(self):
        """No most frequent bins known (a mapper read from a file: they are not saved)."""
        d = len(self.cuts_)
        self.most_freq_bin_ = np.full(d, -1, np.int32)
        self.most_freq_frac_ = np.zeros(d, np.float64)

    def __setstate__(self, state):  # mappers pickled before categorical features existed
        self.__dict__.update(state)
        if "cuts_" in state and "is_categorical_" not in state:
            self.categories_ = None
            self.is_categorical_ = np.zeros(len(self.cuts_), dtype=bool)
        if "cuts_" in state and "most_freq_bin_" not in state:
            self._no_most_freq()


def _map_blocks(fit_block, blocks, xp):
    """``fit_block(block)`` for each of ``blocks``, in order. On the host inside a fit's
    thread limit (``gpufs._threading.thread_limit``) of T > 1 threads, the blocks run on T
    Python threads, at most T at a time (numpy's sort and copies, and the compiled counts,
    release the GIL), so the memory held is T blocks; the results are the serial ones (8,000
    x 1,500 counts on two threads: 152 -> 114 ms; 200,000 x 100: 733 -> 376 ms)."""
    threads = min(current_limit() or 1, len(blocks))
    if threads <= 1 or not is_host_namespace(xp):
        yield from (fit_block(b) for b in blocks)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="gpufs-bins") as pool:
        pending = deque()
        for b in blocks:
            if len(pending) == threads:
                yield pending.popleft().result()
            pending.append(pool.submit(fit_block, b))
        while pending:
            yield pending.popleft().result()


def _sortable(xp, sample):
    """``sample`` as the cut search sorts it: float32 and float64 as they are, any other
    dtype as float64."""
    sample = xp.asarray(sample)
    if sample.dtype == np.float32 or sample.dtype == np.float64:
        return sample
    return sample.astype(np.float64)


def _most_frequent(xp, sorted_col, n_valid, cuts, counts=None):
    """(bin, fraction of the rows) of the most frequent bin of one column of the subsample
    (sorted, NaN last; ``n_valid`` values not NaN) under ``cuts`` (host, sorted): the first of
    equals in bin order, the missing bin (255) last. ``counts``: the rows per value bin when
    known (else found from the cuts)."""
    m = int(sorted_col.shape[0])
    if m == 0:
        return 0, 0.0
    if counts is None:
        # values <= cuts[b] are in bins 0..b: the counts per bin are the steps of positions
        pos = np.zeros(cuts.shape[0] + 2, np.int64)
        if cuts.shape[0] and n_valid:
            pos[1:-1] = to_host(
                xp.searchsorted(sorted_col[:n_valid], xp.asarray(cuts), side="right")
            )
        pos[-1] = n_valid
        counts = np.diff(pos)
    return _most_frequent_of_counts(m, n_valid, counts)


def _most_frequent_of_counts(m, n_valid, counts):
    """(bin, fraction of the ``m`` rows) of the most frequent bin given the rows per value
    bin ``counts`` (host) and ``n_valid`` rows not missing: the first of equals, the missing
    bin (255) last."""
    if m == 0:
        return 0, 0.0
    b = int(np.argmax(counts))
    if m - n_valid > counts[b]:
        return MISSING_BIN, (m - n_valid) / m
    return b, counts[b] / m


def _counts_small_ints(xp, X) -> bool:
    """Whether ``BinMapper.fit`` looks for columns of small integers in X
    (``_small_int_cuts``): a host (numpy), C-ordered float32 or float64 X (what the input
    door makes)."""
    return (
        isinstance(X, np.ndarray) and X.dtype in (np.float32, np.float64) and X.flags.c_contiguous
    )


def category_cuts(n_codes):
    """Cut points of a categorical feature: k + 0.5 for k = 0 .. n_codes - 2, so code k
    falls in bin k.

    Parameters
    ----------
    n_codes : int
        The feature's number of category codes.

    Returns
    -------
    cuts : ndarray of shape (max(n_codes - 1, 0),), float64
    """
    return np.arange(max(int(n_codes) - 1, 0), dtype=CUT_DTYPE) + 0.5


# --- the JSON form of a fitted BinMapper (model files) ---------------------------------------


def bins_to_dict(bm) -> dict:
    """The JSON form of a fitted :class:`gpufs.engine.binning.BinMapper`.

    Parameters
    ----------
    bm : BinMapper

    Returns
    -------
    dict
    """
    out = {
        "max_bins": int(bm.max_bins),
        "subsample": None if bm.subsample is None else int(bm.subsample),
        "random_state": int(bm.random_state),
        "cuts": [floats_out(c) for c in bm.cuts_],
    }
    categories = getattr(bm, "categories_", None)
    if categories is not None:
        out["categories"] = categories_to_dict(categories)
    return out


def read_bins(d, at=None, n_features=None):
    """Validate a bins dict.

    Parameters
    ----------
    d : object
        The parsed dict.
    at : At or None, default=None
        Where it sits in the file (for the error messages).
    n_features : int or None, default=None
        The features the enclosing model declares (checked when given).

    Returns
    -------
    max_bins, subsample, random_state : int, int or None, int
    cuts : list of ndarray of shape (n_cuts,), float64
        Finite and non-decreasing, at most ``max_bins - 1`` each.
    categories : CategoryCodes or None
        The categorical features' codes, whose cuts are ``category_cuts``.
    """
    at = at or At("bins")
    read_obj(d, at, ["max_bins", "subsample", "random_state", "cuts"], ["categories"])
    max_bins = read_int(d["max_bins"], at["max_bins"], 2, MAX_VALUE_BINS)
    subsample = None if d["subsample"] is None else read_int(d["subsample"], at["subsample"], 1)
    random_state = read_int(d["random_state"], at["random_state"], 0, 2**32 - 1)
    cuts_in = read_list(d["cuts"], at["cuts"], n_features, MAX_BINNED_FEATURES)
    if not cuts_in:
        at["cuts"].fail("a model needs at least one feature.")
    cuts = []
    for f, c in enumerate(cuts_in):
        read_list(c, at["cuts"][f], max_length=max_bins - 1)
        a = read_float_array(c, at["cuts"][f], (len(c),))
        down = np.flatnonzero(a[1:] < a[:-1])
        if down.size:
            at["cuts"][f][int(down[0]) + 1].fail("cut points must be in increasing order.")
        cuts.append(a.astype(CUT_DTYPE))
    categories = None
    if d.get("categories") is not None:
        categories = read_categories(d["categories"], at["categories"], len(cuts), max_bins)
        for f, n in categories.n_codes.items():
            if not np.array_equal(cuts[f], category_cuts(n)):
                at["cuts"][f].fail(
                    f"a categorical feature with {n} codes has the cut points "
                    "k + 0.5 for k < n - 1."
                )
    return max_bins, subsample, random_state, cuts, categories
