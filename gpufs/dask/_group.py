"""The driver's line to the workers: one stateful actor per worker, called all at once.

Owns the communication of a distributed fit: creating one :class:`~gpufs.dask._shard.Shard`
actor on each worker that holds partitions (the partitions never move), calling the same
method on every shard concurrently and waiting for all the answers with a timeout
(:meth:`ShardGroup.call`), turning a lost worker or a timeout into a :class:`ClusterError`
that says what happened and where, and counting the array bytes that travel each way (the
benchmark reports them).

Every wait has a timeout: nothing here can hang on a dead or stuck worker.
"""
from __future__ import annotations

import asyncio
import time

import numpy as np

__all__ = ["ClusterError", "ShardGroup", "wait_futures"]


class ClusterError(RuntimeError):
    """A distributed fit stopped: a worker was lost, a call timed out, or a worker failed."""


def _array_bytes(obj) -> int:
    """Bytes of the numpy arrays in ``obj`` (nested tuples, lists, dicts, NamedTuples)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(_array_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_array_bytes(o) for o in obj.values())
    return 0


def wait_futures(client, futures, timeout, what):
    """The results of Dask futures, waiting at most ``timeout`` seconds in all.

    Raises ClusterError naming ``what`` on a timeout or a lost worker; an exception raised by
    the task itself propagates unchanged.
    """
    from distributed import wait

    try:
        done, not_done = wait(futures, timeout=timeout, return_when="ALL_COMPLETED") \
            if futures else (set(), set())
    except TimeoutError:  # distributed raises where older versions returned the unfinished
        not_done = [f for f in futures if not f.done()] or futures
    if not_done:
        raise ClusterError(f"gpufs.dask: timed out after {timeout:g} s {what} "
                           f"({len(not_done)} of {len(futures)} tasks unfinished).")
    lost = [f for f in futures if f.status not in ("finished", "error")]
    if lost:
        raise ClusterError(f"gpufs.dask: a worker was lost {what} (task status "
                           f"{lost[0].status!r}).")
    try:
        return client.sync(client._gather, futures, callback_timeout=timeout)
    except TimeoutError:
        raise ClusterError(f"gpufs.dask: timed out after {timeout:g} s gathering the results "
                           f"{what}.") from None


class ShardGroup:
    """The shards of one fit: one actor per worker holding partitions, in worker order.

    Parameters
    ----------
    client : distributed.Client
    loaded : _data.Loaded
        The checked partitions (their futures say which worker holds each).
    timeout : float
        Seconds any one call (or the creation of the shards) may take.
    n_jobs : int or None
        Threads each shard's kernels may use (``gpufs._threading.thread_limit``).
    what : str
        The data's name in messages.

    Attributes
    ----------
    addresses : list of str
        The workers, one shard each.
    parts : list of list of int
        The partitions each shard holds, in row order.
    bytes_sent, bytes_received : int
        Array bytes passed to and returned by shard calls so far.
    """

    def __init__(self, client, loaded, timeout, n_jobs=None, what="X"):
        from ._shard import Shard

        self.client = client
        self.timeout = float(timeout)
        self.what = what
        self.bytes_sent = 0
        self.bytes_received = 0
        self.calls = 0
        self.phase = "starting"
        self._pending = []
        try:
            who = client.sync(client.scheduler.who_has, keys=[f.key for f in loaded.futures],
                              callback_timeout=self.timeout)
        except TimeoutError:
            raise ClusterError(f"gpufs.dask: timed out after {self.timeout:g} s asking the "
                               f"scheduler where the partitions of {what} are.") from None
        by_worker: dict = {}
        for i, f in enumerate(loaded.futures):
            holders = sorted(who.get(f.key, ()))
            if not holders:
                raise ClusterError(f"gpufs.dask: partition {i} of {what} is held by no worker "
                                   "(was a worker lost while loading?).")
            by_worker.setdefault(holders[0], []).append(i)
        self.addresses = sorted(by_worker)
        self.parts = [by_worker[a] for a in self.addresses]
        offsets = loaded.offsets
        self._futures = [
            client.submit(Shard, [loaded.futures[i] for i in idx],
                          [int(offsets[i]) for i in idx], n_jobs, actor=True, workers=[a],
                          allow_other_workers=False, pure=False)
            for a, idx in zip(self.addresses, self.parts)]
        self.actors = wait_futures(client, self._futures, self.timeout,
                                   f"starting the shards of {what}")
        # global row indices of each shard's local rows, in its local order
        self.rows = [np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in idx])
                     .astype(np.int64) for idx in self.parts]

    def __len__(self):
        return len(self.actors)

    def close(self):
        """Release the shards (their workers drop the fit's arrays)."""
        self.actors = []
        for f in self._futures:
            f.release()
        self._futures = []

    def _where(self):
        return f" during {self.phase}" if self.phase else ""

    def defer(self, method, *args, callback=None):
        """Queue ``method(*args)`` to run on every shard at the start of the next call (one
        round trip fewer); ``callback`` gets its answers in shard order then."""
        self._pending.append((method, args, callback))

    def call(self, method, *args, per_shard=None):
        """Call ``method`` on every shard at once and return the answers in shard order.

        ``args`` go to every shard; ``per_shard`` (a list with one tuple per shard) adds
        arguments for each shard after them. The deferred calls run first, on each shard, in
        the order they were queued. Raises ClusterError when a worker is lost, a call times
        out, or a shard raises (the worker's exception is chained).
        """
        if not self.actors:
            raise ClusterError("gpufs.dask: the shards were released (the fit ended).")
        self.calls += 1
        pending, self._pending = self._pending, []
        queued = [(m, a) for m, a, _ in pending]
        sent = (_array_bytes(args) + _array_bytes([a for _, a in queued])) * len(self.actors)
        if per_shard is not None:
            sent += _array_bytes(per_shard)
        self.bytes_sent += sent
        futs = []
        for i, (addr, actor) in enumerate(zip(self.addresses, self.actors)):
            extra = () if per_shard is None else tuple(per_shard[i])
            try:
                futs.append(actor.call(queued, method, args + extra))
            except RuntimeError as exc:  # "Worker holding Actor was lost"
                raise self._lost(addr, exc) from exc
        answers = self._wait(futs)
        self.bytes_received += _array_bytes(answers)
        for j, (_, _, callback) in enumerate(pending):
            if callback is not None:
                callback([a[0][j] for a in answers])
        return [a[1] for a in answers]

    def _lost(self, addr, exc):
        parts = self.parts[self.addresses.index(addr)]
        return ClusterError(
            f"gpufs.dask: worker {addr} was lost{self._where()} ({type(exc).__name__}: "
            f"{exc}). It held partitions {parts[:10]}{' ...' if len(parts) > 10 else ''} of "
            f"{self.what}, whose rows existed only in its memory, so the fit stopped. Fit "
            "again (Dask reloads the partitions on the remaining workers).")

    def _wait(self, futs):
        timeout = self.timeout

        async def gather():
            tasks = [asyncio.ensure_future(f) for f in futs]
            done, pending = await asyncio.wait(tasks, timeout=timeout,
                                               return_when=asyncio.FIRST_EXCEPTION)
            for t in pending:
                t.cancel()
            return tasks, pending

        t0 = time.perf_counter()
        tasks, pending = self.client.sync(gather)
        for addr, t in zip(self.addresses, tasks):
            if t.done() and not t.cancelled() and t.exception() is not None:
                exc = t.exception()
                if isinstance(exc, OSError):
                    raise self._lost(addr, exc) from exc
                raise ClusterError(f"gpufs.dask: worker {addr} failed{self._where()}: "
                                   f"{type(exc).__name__}: {exc}") from exc
        if pending:
            slow = [a for a, t in zip(self.addresses, tasks) if t in pending]
            raise ClusterError(
                f"gpufs.dask: timed out after {time.perf_counter() - t0:.1f} s (timeout="
                f"{timeout:g}){self._where()}: no answer from worker(s) {slow[:4]}. Raise "
                "the estimator's timeout for slower steps, or check the workers.")
        return [t.result() for t in tasks]
