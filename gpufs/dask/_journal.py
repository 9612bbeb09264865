"""What a lost shard is rebuilt from: the driver's journal of the calls that made its state.

Owns :class:`Journal`: every state-changing call a :class:`~gpufs.dask._group.ShardGroup`
sends, in order, with the slots of shard state each one reads and writes
(:data:`EFFECTS`). A fresh shard that replays the journal on the same partitions holds the
same state as the lost one, because every shard method is a function of its rows and its
arguments. The journal stays short: a call whose writes are all overwritten before anything
reads them is dropped (a backward liveness pass, :meth:`Journal.compact`), so it holds the
setup calls, the raw scores' history since the last ``init_raw`` (one small entry per tree),
the live snapshots, and the calls of the current round and tree. Methods that change nothing
(:data:`QUERIES`) are not journaled.
"""

from __future__ import annotations

import numpy as np

__all__ = ["EFFECTS", "Journal", "QUERIES", "SETUP"]

#: Setup calls: replayed always, in order (the rows, target, bins, standardized columns).
SETUP = frozenset({"set_target", "bin", "drop_raw", "gt_standardize", "store_weights"})

#: Calls that read shard state and change none of it.
QUERIES = frozenset(
    {
        "sample",
        "target",
        "init_parts",
        "words",
        "extremes",
        "leaf_of_rows",
        "gt_column_extremes",
        "gt_hist",
        "tree_predictions",
        "noop",
        "backend_name",
    }
)


def _snap(args):
    return f"snap:{int(args[0])}"


#: method -> function of (its arguments, whether it has per-shard arguments) giving (slots
#: read, slots written); a written slot is overwritten whole (a call that adds to a slot also
#: reads it). ``start_tree`` with per-shard arguments brings its own gradients (a forest).
EFFECTS = {
    "init_raw": lambda a, own: ((), ("raw",)),
    "replay_tree": lambda a, own: (("raw",), ("raw",)),
    "predict": lambda a, own: (("raw",), ("raw",)),
    "snapshot_raw": lambda a, own: (("raw",), (_snap(a),)),
    "restore_raw": lambda a, own: ((_snap(a),), ("raw",)),
    "drop_snapshot": lambda a, own: ((), (_snap(a),)),
    "round": lambda a, own: (("raw",), ("grad", "loss")),
    "loss_terms": lambda a, own: (("raw",), ("loss",)),
    "quantize": lambda a, own: (("grad",), ("gh",)),
    "start_tree": lambda a, own: (() if own else ("gh",), ("gh", "tree")),
    "advance": lambda a, own: (("tree", "gh"), ("tree",)),
    "gt_begin": lambda a, own: (("gh",), ("gt",)),
    "gt_sums": lambda a, own: (("gt", "gt_first"), ("gt",)),
    "gt_keep": lambda a, own: (("gt",), ("gt",)),
    "gt_first_sums": lambda a, own: ((), ("gt_first",)),
    "gt_first_bins": lambda a, own: (("gt_first",), ("gt_first",)),
}


class _Entry:
    __slots__ = ("method", "args", "per_shard", "reads", "writes")

    def __init__(self, method, args, per_shard):
        self.method, self.args, self.per_shard = method, tuple(args), per_shard
        if method in SETUP:
            self.reads = self.writes = None
        else:
            reads, writes = EFFECTS[method](self.args, per_shard is not None)
            self.reads, self.writes = frozenset(reads), frozenset(writes)


class Journal:
    """The state-changing calls of one shard group, oldest first (see the module docstring).

    ``per_shard`` arguments (a list with one tuple per shard) are kept with their entry, so
    shard i replays exactly the calls it received.
    """

    def __init__(self):
        self.entries = []
        self._compacted = 0

    def __len__(self):
        return len(self.entries)

    def record(self, method, args, per_shard=None):
        """Journal one call (queries are ignored)."""
        if method in QUERIES:
            return
        if method not in SETUP and method not in EFFECTS:
            raise KeyError(f"gpufs.dask: shard method {method!r} has no journal effects")
        self.entries.append(_Entry(method, args, per_shard))

    def maybe_compact(self):
        """:meth:`compact` once the journal has doubled since the last compaction (so the
        passes cost O(1) per call, amortized)."""
        if len(self.entries) > 2 * self._compacted + 16:
            self.compact()

    def compact(self):
        """Drop the calls whose effects no later state depends on; merge runs of
        validation predictions into one call (the same additions, in the same order)."""
        live = set()
        for e in self.entries:
            if e.writes:
                live |= e.writes
        kept = []
        for e in reversed(self.entries):
            if e.writes is None:
                kept.append(e)
            elif e.writes & live:
                kept.append(e)
                live -= e.writes
                live |= e.reads
        kept.reverse()
        # a drop whose snapshot was never kept is a no-op
        snaps = {e.args[0] for e in kept if e.method == "snapshot_raw"}
        kept = [e for e in kept if e.method != "drop_snapshot" or e.args[0] in snaps]
        self.entries = _merge_predictions(kept)
        self._compacted = len(self.entries)

    def replay_for(self, shard, upto=None):
        """The (method, args) calls shard ``shard`` replays: the first ``upto`` entries."""
        entries = self.entries if upto is None else self.entries[:upto]
        return [
            (e.method, e.args + (() if e.per_shard is None else tuple(e.per_shard[shard])))
            for e in entries
        ]


def _merge_predictions(entries):
    """Adjacent ``predict`` entries as one: their trees stacked in order."""
    out = []
    for e in entries:
        prev = out[-1] if out else None
        if e.method == "predict" and prev is not None and prev.method == "predict":
            a, b = prev.args[0], e.args[0]
            merged = {
                k: (a[k] if k == "is_categorical" else np.concatenate([a[k], b[k]])) for k in a
            }
            out[-1] = _Entry("predict", (merged,), None)
        else:
            out.append(e)
    return out
