"""``validation_fraction`` on a cluster: the single process's held-out rows, split in place.

Owns :func:`split_validation`: the rows ``selectors._base.validation_split`` holds out of the
whole table (the same seeded, stratified draw, run on the driver over the global row order),
turned into two sets of partitions that stay on their workers: each partition's training rows
and its validation rows, computed by a task per partition from a bit mask (the mask travels
with the task, so Dask can recompute either half after a lost worker). What the driver reads
is the class code of every row (the draw is stratified by class), at most 4 bytes a row and
1 byte for up to 127 classes, once per fit; what it sends is one bit a row.
"""

from __future__ import annotations

import numpy as np

from .._device import namespace_of
from ..selectors._base import validation_split
from ._data import Loaded, summary_of
from ._group import wait_futures

__all__ = ["class_codes", "split_validation", "take_rows"]


def class_codes(part, classes):
    """The class code of each of a partition's rows, in the smallest signed integer dtype
    (the driver gathers them for the stratified draw)."""
    codes = np.searchsorted(classes, part.y)
    dtype = np.int8 if len(classes) < 128 else np.int16 if len(classes) < 32768 else np.int32
    return codes.astype(dtype)


def take_rows(part, packed, keep_set):
    """A new ``_data.Part`` with the rows of ``part`` whose bit in ``packed`` (``np.packbits``
    of a bool mask) equals ``keep_set``, in their order; the summary redone for them."""
    from ._data import Part, PartSummary
    from ._exact import fsum_part

    n = part.X.shape[0]
    mask = np.unpackbits(packed, count=n).astype(bool) == bool(keep_set)
    out = Part()
    out.index = part.index
    out.X = part.X[namespace_of(part.X).asarray(mask)]  # a cupy partition: on its GPU
    out.y = part.y[mask]
    out.w = None if part.w is None else part.w[mask]
    s, m = part.summary, int(mask.sum())
    w = out.w
    out.summary = PartSummary(
        index=s.index,
        n=m,
        n_pos=m if w is None else int((w > 0).sum()),
        schema=s.schema,
        dtype=s.dtype,
        labels=None if s.labels is None else np.unique(out.y),
        w_sum=None if w is None else fsum_part(w),
        w_max=1.0 if w is None else (float(w.max()) if m else 0.0),
        y_min=float(out.y.min()) if m and s.labels is None else 0.0,
        y_max=float(out.y.max()) if m and s.labels is None else 0.0,
    )
    return out


def _halves(client, loaded, masks, keep_set, timeout, what):
    futures = [
        client.submit(take_rows, f, np.packbits(m), keep_set, pure=False)
        for f, m in zip(loaded.futures, masks)
    ]
    summaries = wait_futures(
        client,
        [client.submit(summary_of, f, pure=False) for f in futures],
        timeout,
        f"splitting off {what}",
    )
    counts = np.array([s.n for s in summaries], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return Loaded(
        futures=futures,
        summaries=summaries,
        offsets=offsets,
        n=int(offsets[-1]),
        n_features=loaded.n_features,
        dtype=loaded.dtype,
    )


def split_validation(client, loaded, fraction, seed, classes, timeout):
    """(training, validation) ``Loaded`` partitions: the rows ``validation_split(n,
    fraction, seed, codes)`` gives one process on the same table in the same row order
    (stratified by the class codes of ``classes`` for a classifier, None for a regressor).

    Returns the two halves of every partition (empty halves included, so the partitions keep
    their numbers) and the number of bytes the driver gathered.
    """
    n = loaded.n
    codes, gathered = None, 0
    if classes is not None:
        got = wait_futures(
            client,
            [client.submit(class_codes, f, classes, pure=False) for f in loaded.futures],
            timeout,
            "reading the class of every row (the stratified validation split)",
        )
        codes = np.concatenate(got).astype(np.int64)
        gathered = int(sum(g.nbytes for g in got))
    _, va = validation_split(n, fraction, seed, codes)
    is_val = np.zeros(n, dtype=bool)
    is_val[va] = True
    off = loaded.offsets
    masks = [is_val[off[i] : off[i + 1]] for i in range(len(loaded.futures))]
    train = _halves(client, loaded, masks, False, timeout, "the training rows")
    val = _halves(client, loaded, masks, True, timeout, "the validation rows")
    return train, val, gathered
