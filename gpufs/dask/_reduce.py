"""Histograms summed among the workers: a binomial tree over a fit's shards.

Owns the workers' half of the reduction (the driver's half is ``ShardGroup.reduce``). A
level's call leaves each shard's histograms of its rows kept under the call's tag
(``Shard.kept``); the driver then asks shard 0 for the sum. Shard i's children are i + 2**k
for every 2**k below i's lowest set bit (all k for shard 0) while i + 2**k < W: shard 0
asks 1, 2, 4, ..., shard 4 asks 5 and 6, shard 6 asks 7, so the farthest shard is at most
ceil(log2 W) hops from shard 0 (:func:`depth`) and each shard but 0 sends one sum. A shard
asks its children at once, worker to worker (the
worker's RPC, the call a Dask actor handle makes), and adds their sums to a copy of its own:
int64, exact in any order, so the total is the single process's. The driver receives one
sum whatever W. A child that cannot be reached raises :class:`PeerLost` naming it, so the
driver rebuilds that shard (not the one that asked) and asks again; a shard's kept payload
is never changed by a reduction, so asking again gives the same sum.
"""

from __future__ import annotations

import asyncio

__all__ = ["PeerLost", "children", "depth", "reduce_subtree"]


class PeerLost(RuntimeError):
    """Shard ``shard`` (at ``address``) could not be reached during a reduction."""

    def __init__(self, shard, address, why):
        super().__init__(shard, address, why)
        self.shard, self.address, self.why = int(shard), address, why

    def __str__(self):
        return f"shard {self.shard} at {self.address} unreachable ({self.why})"


def children(i, n):
    """Shard i's children in the binomial tree over n shards (list of int, ascending)."""
    low = i & -i if i else n  # i's lowest set bit; the root's children span every power
    out, step = [], 1
    while step < low and i + step < n:
        out.append(i + step)
        step *= 2
    return out


def depth(n):
    """Hops from the farthest shard to shard 0 in the tree over n shards: the most set bits
    of a shard index below n (at most ceil(log2 n))."""
    last = int(n) - 1
    b = last.bit_length()
    return b if last == (1 << b) - 1 else b - 1


async def reduce_subtree(kept, tag, peers, me):
    """The sum of the payloads kept under ``tag`` by shard ``me`` and its descendants.

    Parameters
    ----------
    kept : tuple of (int, ndarray of int64) or None
        Shard ``me``'s (tag, payload).
    tag : int
        The call whose payloads are summed.
    peers : list of tuple of (str, str)
        Every shard's (worker address, actor key), in shard order.
    me : int
        This shard's index.

    Returns
    -------
    total : ndarray of int64, the payload's shape
    between : int
        Bytes of the sums this subtree's shards received from their children.
    """
    if kept is None or kept[0] != tag:
        raise RuntimeError(
            f"gpufs.dask: shard {me} holds the histograms of call "
            f"{None if kept is None else kept[0]}, asked for call {tag}"
        )
    own = kept[1]
    kids = children(me, len(peers))
    if not kids:
        return own, 0
    from distributed import get_worker
    from distributed.protocol import to_serialize

    worker = get_worker()

    async def pull(j):
        address, key = peers[j]
        try:
            resp = await worker.rpc(address).actor_execute(
                actor=key,
                function="reduce",
                args=[to_serialize(tag), to_serialize(peers), to_serialize(j)],
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise PeerLost(j, address, f"{type(exc).__name__}: {exc}") from None
        if resp["status"] != "OK":
            raise resp["exception"]  # a deeper PeerLost passes through unchanged
        return resp["result"]

    got = await asyncio.gather(*(pull(j) for j in kids))
    total = own.copy()  # the kept payload stays as it is: a retried reduction reads it again
    between = 0
    for part, inner in got:
        total += part
        between += int(part.nbytes) + int(inner)
    return total, between
