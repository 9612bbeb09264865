"""The driver's line to the workers: one stateful actor per worker, called all at once.

Owns the communication of a distributed fit: creating one :class:`~gpufs.dask._shard.Shard`
actor on each worker that holds partitions (the partitions never move), calling the same
method on every shard concurrently and waiting for all the answers with a timeout
(:meth:`ShardGroup.call`), rebuilding a shard whose worker was lost (Dask recomputes its
partitions from their graph; a new shard replays the :class:`~gpufs.dask._journal.Journal`,
then the interrupted call is sent to it), summing the shards' histograms among the workers
(:meth:`ShardGroup.reduce`, the tree of ``_reduce``: the driver receives one sum), turning
what cannot be recovered (a timeout, a shard that raised, partitions that cannot be
recomputed) into a :class:`ClusterError` that says what happened and where, and counting the
array bytes that travel each way.

Every wait has a timeout: nothing here can hang on a dead or stuck worker.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

from ._journal import Journal
from ._reduce import PeerLost

__all__ = ["ClusterError", "ShardGroup", "wait_futures"]

#: Seconds between the checks, while a call is unanswered, that its workers are still in the
#: cluster (a killed worker's calls would otherwise fail only when its connection times out).
POLL_S = 1.0


class ClusterError(RuntimeError):
    """A distributed fit stopped: a lost worker's partitions could not be recomputed, a call
    timed out, or a worker failed."""


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
        with client.as_current():  # ``wait`` asks for the current client
            done, not_done = (
                wait(futures, timeout=timeout, return_when="ALL_COMPLETED")
                if futures
                else (set(), set())
            )
    except TimeoutError:  # distributed raises where older versions returned the unfinished
        not_done = [f for f in futures if not f.done()] or futures
    if not_done:
        raise ClusterError(
            f"gpufs.dask: timed out after {timeout:g} s {what} "
            f"({len(not_done)} of {len(futures)} tasks unfinished)."
        )
    lost = [f for f in futures if f.status not in ("finished", "error")]
    if lost:
        raise ClusterError(
            f"gpufs.dask: a worker was lost {what} (task status {lost[0].status!r})."
        )
    try:
        return client.sync(client._gather, futures, callback_timeout=timeout)
    except TimeoutError:
        raise ClusterError(
            f"gpufs.dask: timed out after {timeout:g} s gathering the results {what}."
        ) from None


def _bind(actor, client):
    """An actor handle bound to ``client``, with no future to wait on when its worker is lost.

    A handle binds itself, when unpickled, to the current global client (not necessarily
    the fit's, when the fit's client is not the default one), and on a failed call waits for
    its actor's task to be recomputed, which a lost worker's actor (pinned to that worker)
    never is: without the future its calls fail at once, and ``ShardGroup`` rebuilds it.
    """
    actor._client = client
    actor._future = None
    return actor


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
    device : {"cpu", "gpu"}, default="cpu"
        The shards' backend (``Shard``'s ``device``).

    Attributes
    ----------
    addresses : list of str
        The workers, one shard each (a rebuilt shard's new worker).
    parts : list of list of int
        The partitions each shard holds, in row order.
    bytes_sent, bytes_received : int
        Array bytes passed to and returned by shard calls (and reductions) so far: what
        passes through the driver.
    bytes_between_workers : int
        Array bytes the shards sent each other in reductions so far (never via the driver).
    calls, reductions : int
        Calls and reductions so far (each a round trip from the driver).
    reduce_seconds : float
        Wall seconds the driver waited for reductions so far.
    bytes_replayed : int
        Array bytes sent to rebuild shards (their journals and the calls sent again).
    recoveries : list of dict
        One per rebuilt shard: the worker lost, the new one, the step, the partitions, the
        journal entries replayed and the seconds the rebuild took.
    """

    def __init__(self, client, loaded, timeout, n_jobs=None, what="X", device="cpu"):
        self.client = client
        self.device = device
        self.timeout = float(timeout)
        self.what = what
        self.loaded = loaded
        self.n_jobs = n_jobs
        self.bytes_sent = 0
        self.bytes_received = 0
        self.bytes_replayed = 0
        self.bytes_between_workers = 0
        self.calls = 0
        self.reductions = 0
        self.reduce_seconds = 0.0
        self.phase = "starting"
        self.journal = Journal()
        self.recoveries = []
        self._pending = []
        who = self._who_has(
            loaded.futures, f"asking the scheduler where the partitions of {what} are"
        )
        by_worker: dict = {}
        for i, f in enumerate(loaded.futures):
            holders = sorted(who.get(f.key, ()))
            if not holders:
                raise ClusterError(
                    f"gpufs.dask: partition {i} of {what} is held by no worker "
                    "(was a worker lost while loading?)."
                )
            by_worker.setdefault(holders[0], []).append(i)
        self.addresses = sorted(by_worker)
        self.parts = [by_worker[a] for a in self.addresses]
        self._futures = [self._submit_shard(i, a) for i, a in enumerate(self.addresses)]
        self.actors = [
            _bind(a, client)
            for a in wait_futures(
                client, self._futures, self.timeout, f"starting the shards of {what}"
            )
        ]
        # global row indices of each shard's local rows, in its local order
        offsets = loaded.offsets
        self.rows = [
            np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in idx]).astype(np.int64)
            for idx in self.parts
        ]

    def _who_has(self, futures, what):
        try:
            return self.client.sync(
                self.client.scheduler.who_has,
                keys=[f.key for f in futures],
                callback_timeout=self.timeout,
            )
        except TimeoutError:
            raise ClusterError(f"gpufs.dask: timed out after {self.timeout:g} s {what}.") from None

    def _submit_shard(self, i, address):
        from ._shard import Shard

        idx = self.parts[i]
        offsets = self.loaded.offsets
        return self.client.submit(
            Shard,
            [self.loaded.futures[j] for j in idx],
            [int(offsets[j]) for j in idx],
            self.n_jobs,
            self.device,
            actor=True,
            workers=[address],
            allow_other_workers=False,
            pure=False,
        )

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

    def defer(self, method, *args, callback=None, replay=None):
        """Queue ``method(*args)`` to run on every shard at the start of the next call (one
        round trip fewer); ``callback`` gets its answers in shard order then. ``replay``
        (method, args): what the journal keeps instead, for a call whose effect a rebuilt
        shard gets another way (the raw-score update of a finished tree)."""
        self._pending.append((method, args, callback, replay))

    def call(self, method, *args, per_shard=None):
        """Call ``method`` on every shard at once and return the answers in shard order.

        ``args`` go to every shard; ``per_shard`` (a list with one tuple per shard) adds
        arguments for each shard after them. The deferred calls run first, on each shard, in
        the order they were queued. A shard whose worker is lost is rebuilt on another worker
        (its partitions recomputed by Dask, its journal replayed) and the call is sent to it
        again. Raises ClusterError when a call times out, a shard raises (the worker's
        exception is chained), or a lost shard's partitions cannot be recomputed.
        """
        if not self.actors:
            raise ClusterError("gpufs.dask: the shards were released (the fit ended).")
        self.calls += 1
        pending, self._pending = self._pending, []
        queued = [(m, a) for m, a, _, _ in pending]
        sent = (_array_bytes(args) + _array_bytes([a for _, a in queued])) * len(self.actors)
        if per_shard is not None:
            sent += _array_bytes(per_shard)
        self.bytes_sent += sent
        self.journal.maybe_compact()
        mark = len(self.journal)  # the state before this call: what a rebuild replays
        for m, a, _, replay in pending:
            self.journal.record(*(replay or (m, a)))
        self.journal.record(method, args, per_shard)

        def send(i):
            extra = () if per_shard is None else tuple(per_shard[i])
            return self.actors[i].call(queued, method, args + extra)

        answers = [None] * len(self.actors)
        todo = list(range(len(self.actors)))
        for _ in range(2 * len(self.actors) + 2):
            got, lost = self._round(todo, send)
            for i, a in got.items():
                answers[i] = a
            if not lost:
                break
            for i, exc in lost.items():
                self._rebuild(i, exc, mark)
                self.bytes_replayed += sent // max(1, len(self.actors))
            todo = sorted(lost)
        else:
            raise ClusterError(
                f"gpufs.dask: workers kept being lost{self._where()}; the fit stopped."
            )
        self.bytes_received += _array_bytes(answers)
        for j, (_, _, callback, _) in enumerate(pending):
            if callback is not None:
                callback([a[0][j] for a in answers])
        return [a[1] for a in answers]

    def call_reduced(self, method, *args, per_shard=None):
        """:meth:`call` of a method whose answers are (small, payload), with the payloads
        (int64 arrays of one shape, or None on every shard) summed among the workers.

        The call gets one more argument, its tag (None for a single shard, which returns its
        payload: it is the sum); each shard keeps its payload under the tag and answers
        True, then :meth:`reduce` brings the sum. Returns (the small answers in shard order,
        the summed payload or None).
        """
        if len(self.actors) == 1:
            small, payload = self.call(method, *args, None, per_shard=per_shard)[0]
            return [small], payload
        tag = self.calls + 1  # this call's number: a replayed journal keeps it
        answers = self.call(method, *args, tag, per_shard=per_shard)
        small = [a[0] for a in answers]
        return small, (None if answers[0][1] is None else self.reduce(tag))

    def reduce(self, tag):
        """The sum over the shards of the payloads kept under ``tag``, summed in the
        workers' binomial tree (``_reduce``) and brought from shard 0: the driver receives
        one payload whatever the number of shards.

        A shard lost during the reduction (its worker gone from the cluster, or unreachable
        from its parent) is rebuilt with its whole journal (the call that kept the payload
        included), and the reduction is asked again. Raises ClusterError as :meth:`call`.
        """
        if not self.actors:
            raise ClusterError("gpufs.dask: the shards were released (the fit ended).")
        t0 = time.perf_counter()
        for _ in range(2 * len(self.actors) + 2):
            peers = [(a, f.key) for a, f in zip(self.addresses, self._futures)]
            got, lost = self._round([0], lambda i: self.actors[0].reduce(tag, peers, 0), watch=True)
            if not lost:
                self.reductions += 1
                total, between = got[0]
                self.bytes_received += _array_bytes(total)
                self.bytes_between_workers += int(between)
                self.reduce_seconds += time.perf_counter() - t0
                return total
            mark = len(self.journal)
            for i, exc in sorted(lost.items()):
                self._rebuild(i, exc, mark)
        raise ClusterError(f"gpufs.dask: workers kept being lost{self._where()}; the fit stopped.")

    # --- waiting, and what a lost worker costs ------------------------------------------------
    def _round(self, idx, send, watch=False):
        """Send to shards ``idx`` and wait: ({i: answer}, {i: exception of a lost worker});
        ``watch``: see :meth:`_wait`."""
        futs, lost = {}, {}
        for i in idx:
            try:
                futs[i] = send(i)
            except (RuntimeError, OSError) as exc:  # "Worker holding Actor was lost"
                lost[i] = exc
        got, more = self._wait(futs, watch)
        lost.update(more)
        return got, lost

    def _wait(self, futs, watch=False):
        """The answers of actor futures ``futs`` ({shard: future}), waiting at most the
        timeout; a shard whose worker left the cluster is reported lost at once. ``watch``:
        every shard's worker is watched (a reduction, whose call reaches them all), and the
        wait ends, the shards that left reported lost, as soon as one leaves."""
        timeout = self.timeout
        addresses = {i: self.addresses[i] for i in (range(len(self.addresses)) if watch else futs)}
        client = self.client

        async def gather():
            loop = asyncio.get_running_loop()
            tasks = {i: asyncio.ensure_future(f) for i, f in futs.items()}
            for t in tasks.values():  # a lost worker's call fails later: retrieve it then
                t.add_done_callback(lambda t: t.cancelled() or t.exception())
            deadline = loop.time() + timeout
            gone = set()
            while True:
                waiting = [t for i, t in tasks.items() if not t.done() and i not in gone]
                left = deadline - loop.time()
                if not waiting or left <= 0 or gone - tasks.keys():
                    break
                await asyncio.wait(waiting, timeout=min(left, POLL_S))
                if any(not t.done() for t in waiting):
                    alive = await client.scheduler.ncores(workers=list(set(addresses.values())))
                    gone |= {
                        i
                        for i in addresses
                        if addresses[i] not in alive and (i not in tasks or not tasks[i].done())
                    }
            return tasks, gone

        t0 = time.perf_counter()
        tasks, gone = self.client.sync(gather)
        got, asked = {}, set()  # asked: shards whose call failed for a lost watched shard
        lost = {
            i: ConnectionError(f"worker {addresses[i]} left the cluster")
            for i in gone - tasks.keys()
        }  # a watched shard: its parent's call is dropped
        for i, t in tasks.items():
            if i in gone and not t.done():
                lost[i] = ConnectionError(f"worker {addresses[i]} left the cluster")
            elif t.done() and not t.cancelled() and t.exception() is not None:
                exc = t.exception()
                if isinstance(exc, PeerLost) and watch:  # lost: the shard, not its parent
                    lost.setdefault(exc.shard, exc)
                    asked.add(i)
                elif isinstance(exc, OSError):
                    lost[i] = exc
                else:
                    raise ClusterError(
                        f"gpufs.dask: worker {addresses[i]} failed"
                        f"{self._where()}: {type(exc).__name__}: {exc}"
                    ) from exc
            elif t.done() and not t.cancelled():
                got[i] = t.result()
        slow = [addresses[i] for i in tasks if i not in (got.keys() | lost.keys() | asked)]
        if slow and not gone - tasks.keys():
            # a reduction waits on every worker: any of them may be the stuck one
            stuck = list(addresses.values()) if watch else slow
            raise ClusterError(
                f"gpufs.dask: timed out after {time.perf_counter() - t0:.1f} s (timeout="
                f"{timeout:g}){self._where()}: no answer from worker(s) {stuck[:4]}"
                f"{' (summing histograms among them)' if watch else ''}. Raise the "
                "estimator's timeout for slower steps, or check the workers."
            )
        return got, lost

    def _rebuilt_holders(self, futs, old, parts, exc):
        """{worker: how many of ``futs`` it holds}, once Dask holds every one of them again on
        a worker other than ``old`` (it recomputes lost keys that a client still wants)."""
        deadline = time.perf_counter() + self.timeout
        while True:
            bad = sorted({f.status for f in futs} & {"cancelled", "error"})
            if bad:
                shown = f"{parts[:10]}{' ...' if len(parts) > 10 else ''}"
                raise ClusterError(
                    f"gpufs.dask: worker {old} was lost{self._where()} ({type(exc).__name__}: "
                    f"{exc}). It held partitions {shown} of {self.what}, which cannot be "
                    f"rebuilt (Dask reports them {bad}: their only copy was in that worker's "
                    "memory and no graph can recompute them, as for scattered data), so the "
                    "fit stopped. Fit again, from data Dask can recompute or read again."
                ) from exc
            who = self._who_has(futs, f"finding the rebuilt partitions of {self.what}")
            holders = [[a for a in who.get(f.key, ()) if a != old] for f in futs]
            if all(holders):
                alive = self.client.sync(
                    self.client.scheduler.ncores, workers=sorted({a for h in holders for a in h})
                )
                holders = [[a for a in h if a in alive] for h in holders]
                if all(holders):
                    counts: dict = {}
                    for h in holders:
                        for a in h:
                            counts[a] = counts.get(a, 0) + 1
                    return counts
            if time.perf_counter() > deadline:
                raise ClusterError(
                    f"gpufs.dask: timed out after {self.timeout:g} s waiting for Dask to "
                    f"recompute partitions {parts[:10]} of {self.what}, lost with worker "
                    f"{old}{self._where()}."
                ) from exc
            time.sleep(0.1)

    def _rebuild(self, i, exc, mark):
        """Shard ``i``'s worker was lost: a new shard on the worker that now holds its
        partitions (recomputed by Dask from their graph), brought to the state before the
        current call by replaying the first ``mark`` journal entries."""
        t0 = time.perf_counter()
        old = lost_at = self.addresses[i]
        parts = self.parts[i]
        futs = [self.loaded.futures[j] for j in parts]
        entries = self.journal.replay_for(i, mark)
        for _ in range(3):  # the worker it is rebuilt on may be lost too
            self._futures[i].release()
            counts = self._rebuilt_holders(futs, lost_at, parts, exc)
            address = min(counts, key=lambda a: (-counts[a], a))
            self.addresses[i] = address
            self._futures[i] = self._submit_shard(i, address)
            self.actors[i] = _bind(
                wait_futures(
                    self.client,
                    [self._futures[i]],
                    self.timeout,
                    f"rebuilding a shard of {self.what}",
                )[0],
                self.client,
            )
            self.bytes_replayed += _array_bytes([a for _, a in entries])
            _, lost = self._round([i], lambda i: self.actors[i].replay(entries))
            if not lost:
                break
            lost_at, exc = address, lost[i]
        else:
            raise ClusterError(
                f"gpufs.dask: the workers a shard of {self.what} was rebuilt on "
                f"were lost too{self._where()}; the fit stopped."
            ) from exc
        self.recoveries.append(
            {
                "lost": old,
                "worker": address,
                "phase": self.phase,
                "partitions": list(parts),
                "replayed": len(entries),
                "seconds": time.perf_counter() - t0,
            }
        )
