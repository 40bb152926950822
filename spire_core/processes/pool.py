"""``ProcessPool``: the crawl's worker processes, as the crawl's own process sees them.

    Crawler(router, processes=4).run(seeds)

The crawl's process keeps the frontier, the host gate, robots.txt, the request cap, the seen set
and the datasets: everything that must be exact. Each worker process (forked from it, so it has the
same router, backend settings and policy) fetches and handles the seeds it is handed, and sends
back the outcome with the links and items its handler staged; the crawl's process commits them as
it would its own. A worker asks the crawl's process over its channel for what it cannot decide
alone: a host slot for a redirect to another origin, a redirect hop's admission, the seen check of
its links, a download's admission (robots.txt, the budget) and its slot. A worker that dies hands
its seeds back to the frontier (and its downloads' slots to the gate) and is replaced; a seed that
was in ``WORKER_DEATHS`` workers when they died fails as ``WorkerCrashed`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import os
import shutil
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from spire_core.admission import Admission
from spire_core.errors import ConfigError, SpireError, WorkerCrashed
from spire_core.frontier.base import Lease
from spire_core.log import logger
from spire_core.processes.channel import Channel
from spire_core.processes.child import run_child, tally_path
from spire_core.processes.forker import EXITED, Forker
from spire_core.processes.messages import (
    AdmitDownload,
    AdmitHop,
    AdmitMove,
    Answered,
    Cancel,
    Claim,
    Counts,
    CountsDelta,
    Finished,
    Handled,
    Hello,
    Mistake,
    Pace,
    Release,
    Sending,
    Stop,
    Take,
    Work,
    WorkerSpec,
)
from spire_core.processes.tally import Tally
from spire_core.robots import Robots, RobotsGate
from spire_core.seed import Seed
from spire_core.seed_fetcher import NextHop
from spire_core.send import GateSlot
from spire_core.stats import CrawlStats

__all__ = ["ProcessPool", "Services"]

log = logger("processes")

#: Worker processes that die before they connect, one after another, before the crawl gives up.
EARLY_DEATHS = 3
#: How long a closing pool waits for its workers to exit before it kills them (and for a dead one's status).
EXIT_WAIT = 5.0
#: How long a worker told to stop may take to send its last counts and exit before it is killed (one
#: blocked in a handler never answers; one that is not needs well under a second).
STOP_WAIT = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class Services:
    """What the crawl's process answers for its workers: admission, redirect hops, robots.txt, downloads."""

    admission: Admission
    redirects: NextHop
    robots: RobotsGate | None
    #: The crawl's counts, which the workers' counts are added to.
    stats: CrawlStats
    #: A download's admission (``Run.download_slot``): robots.txt, the budget, the slot it is to take.
    download_slot: Callable[[Seed], Awaitable[GateSlot]]


@dataclasses.dataclass(slots=True, eq=False)
class _Pending:
    lease: Lease
    slot: GateSlot
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    result: Handled | BaseException | None = None


@dataclasses.dataclass(slots=True, eq=False)
class _Child:
    pid: int
    channel: Channel | None = None
    gone: bool = False
    #: Set when the forker reaped it, with ``status`` (an exit code, or minus the signal).
    exited: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    status: int | None = None
    #: Kept for a seed that must run alone (it was in a worker that died).
    alone: bool = False
    pending: dict[int, _Pending] = dataclasses.field(default_factory=dict)
    #: The slots of the downloads its handlers have under way, by id (from the ids of leases).
    downloads: dict[int, GateSlot] = dataclasses.field(default_factory=dict)
    #: The robots.txt rules sent to this worker, by origin.
    rules: dict[str, Robots] = dataclasses.field(default_factory=dict)
    #: The requests and pages its messages counted, to compare with its tally when it is gone.
    told_requests: int = 0
    told_pages: int = 0
    #: How far into the pool's log of staged keys this worker has been told.
    told_keys: int = 0


#: Entries of the log of staged keys kept before those every worker was told are dropped.
KEYS_KEPT = 256


class ProcessPool:
    """``count`` worker processes handling the crawl's seeds; start one with ``ProcessPool.start``."""

    def __init__(self, spec: WorkerSpec, services: Services) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="spire-"))
        self._path = str(self._directory / "pool.sock")
        # A worker flushes its copy of stdout and stderr when it exits: what is buffered now would be
        # written twice (a JSON line of `spire crawl -o -`, say), so it goes out first.
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        self._services = services
        self._children: dict[int, _Child] = {}
        self._forker = Forker(functools.partial(run_child, spec, self._path))
        #: The unique keys each worker's pages staged, as ``(pid, keys)``; entry 0 is number ``_keys_from``.
        self._keys: list[tuple[int, list[str]]] = []
        self._keys_from = 0
        self._ids = itertools.count()
        self._deaths: Counter[str] = Counter()
        self._early_deaths = 0
        self._failure: SpireError | None = None
        self._changed = anyio.Event()
        self._closing = False
        self._scope = anyio.CancelScope()

    @classmethod
    async def start(cls, tg: anyio.abc.TaskGroup, spec: WorkerSpec, count: int, *, services: Services) -> ProcessPool:
        """Start ``count`` worker processes; the pool's own tasks run in ``tg``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigError("processes > 1 runs on asyncio: start the crawl with crawler.run()") from None
        pool = cls(spec, services)
        listener = await anyio.create_unix_listener(pool._path)
        tg.start_soon(pool._serve, listener)
        for _ in range(count):
            pool._forker.fork()
        return pool

    # -- handing out seeds ------------------------------------------------------------------------

    async def handle(self, lease: Lease, slot: GateSlot) -> Handled:
        """Have a worker process fetch and handle ``lease``'s seed under ``slot``; its result.

        Raises ``WorkerCrashed`` when the worker dies first, and the ``ConfigError`` of a mistake
        in the crawl's code.
        """
        seed = lease.seed
        # A seed that was in a worker when it died runs alone, so a seed that kills workers kills no other.
        suspect = self._deaths[seed.unique_key] > 0
        child, channel = await self._least_busy(alone=suspect)
        lease_id = next(self._ids)
        pending = _Pending(lease, slot)
        child.pending[lease_id] = pending
        update = self._rules_update(child, seed)
        channel.send(Work(lease_id, seed, slot.origin is not None, slot.spaced, update, self._keys_for(child)))
        try:
            await pending.done.wait()
        except BaseException:
            channel.send(Cancel(lease_id))
            raise
        finally:
            child.pending.pop(lease_id, None)
            if suspect:
                child.alone = False
            if not child.pending:
                self._changes()
        result = pending.result
        if isinstance(result, BaseException):
            raise result
        assert result is not None  # set with the event
        if result.links:
            self._keys.append((child.pid, [seed.unique_key for seeds, _ in result.links for seed in seeds]))
        return result

    def _keys_for(self, child: _Child) -> list[str]:
        """The keys other workers staged since ``child`` was last told (its own it knows)."""
        log, first = self._keys, self._keys_from
        keys = [key for pid, batch in log[child.told_keys - first :] if pid != child.pid for key in batch]
        child.told_keys = first + len(log)
        if len(log) > KEYS_KEPT:
            told = min((other.told_keys for other in self._children.values() if other.channel is not None), default=0)
            if told > first:
                del log[: told - first]
                self._keys_from = told
        return keys

    def _rules_update(self, child: _Child, seed: Seed) -> tuple[str, Robots] | None:
        robots = self._services.robots
        rules = robots.rules(seed.url) if robots is not None else None
        if rules is None or child.rules.get(seed.origin) is rules:
            return None
        child.rules[seed.origin] = rules
        return seed.origin, rules

    async def _least_busy(self, *, alone: bool) -> tuple[_Child, Channel]:
        """The worker with the fewest seeds in hand; with ``alone``, one with none, kept for this seed."""
        while True:
            if self._failure is not None:
                raise self._failure
            ready = [
                child
                for child in self._children.values()
                if child.channel is not None and not child.alone and not child.gone
            ]
            if ready:
                child = min(ready, key=lambda child: len(child.pending))
                if not alone:
                    assert child.channel is not None  # filtered above
                    return child, child.channel
                child.alone = True  # nothing new goes to it: it finishes what it has, then takes this seed
                while child.pending and not child.gone:
                    await self._changed.wait()
                if not child.gone and child.channel is not None:
                    return child, child.channel
                continue
            await self._changed.wait()

    def _changes(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- worker processes -------------------------------------------------------------------------

    async def _serve(self, listener: anyio.abc.Listener[anyio.abc.SocketStream]) -> None:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(self._follow_forker)
            with self._scope:
                await listener.serve(self._connected, task_group=tg)
            tg.cancel_scope.cancel()

    async def _connected(self, stream: anyio.abc.SocketStream) -> None:
        holder: list[_Child] = []

        async def on_call(request: Any) -> Any:
            if not holder:
                raise SpireError("the crawl does not take this worker process")
            return await self._call(holder[0], request)

        def on_message(message: Any) -> None:
            if holder:
                self._message(holder[0], message)
            elif type(message) is Hello:
                child = self._hello(message.pid, channel)
                if child is not None:
                    holder.append(child)

        channel = Channel(stream, on_message=on_message, on_call=on_call)
        try:
            await channel.run()
        finally:
            with anyio.CancelScope(shield=True):
                if holder:
                    self._settle_counts(holder[0])  # every message it sent has been read
                    await self._lost(holder[0])
                await channel.aclose()

    def _hello(self, pid: int, channel: Channel) -> _Child | None:
        child = self._children.setdefault(pid, _Child(pid))  # its hello may come before the forker's word
        if child.gone:
            return None
        child.channel = channel
        child.told_keys = self._keys_from + len(self._keys)  # a new worker learns what is staged from now on
        self._early_deaths = 0
        self._changes()
        return child

    def _message(self, child: _Child, message: Any) -> None:
        match message:
            case Finished(lease_id=lease_id, handled=handled, counts=counts):
                self._count(child, counts)
                pending = child.pending.get(lease_id)
                if pending is not None:
                    pending.slot.release()
                    pending.result = handled
                    pending.done.set()
            case Counts(counts=counts):
                self._count(child, counts)
            case Sending(lease_id=lease_id):
                slot = _slot(child, lease_id)
                if slot is not None:
                    slot.sending()
            case Answered(lease_id=lease_id, status=status, retry_after=retry_after):
                slot = _slot(child, lease_id)
                if slot is not None:
                    slot.answered(status, {} if retry_after is None else {"retry-after": retry_after})
            case Release(lease_id=lease_id):
                slot = _slot(child, lease_id)
                if slot is not None:
                    slot.release()
                child.downloads.pop(lease_id, None)  # a download's release is its end
            case Mistake(lease_id=lease_id, error=error):
                pending = child.pending.get(lease_id)
                if pending is not None:
                    pending.result = error
                    pending.done.set()
            case _:
                raise SpireError(
                    f"worker process {child.pid} sent {type(message).__name__}, which the crawl does not take"
                )
        # A message for a lease not in hand is for a seed the crawl let go of (shutting down): nothing to do.

    def _count(self, child: _Child, counts: CountsDelta) -> None:
        counts.add_to(self._services.stats)
        child.told_requests += counts.requests
        child.told_pages += counts.pages

    def _settle_counts(self, child: _Child) -> None:
        """Count what a worker that is gone sent and received but could not tell (it was killed mid-seed)."""
        path = tally_path(self._path, child.pid)
        requests, pages = Tally.read(path)
        path.unlink(missing_ok=True)
        stats = self._services.stats
        stats.requests += max(0, requests - child.told_requests)
        stats.pages += max(0, pages - child.told_pages)
        child.told_requests, child.told_pages = requests, pages

    async def _call(self, child: _Child, request: Any) -> Any:
        match request:
            case Take(lease_id=lease_id, origin=origin):
                slot = _slot(child, lease_id)
                if slot is None:
                    raise SpireError("the crawl let go of this seed")
                await slot.take(origin)
                if _slot(child, lease_id) is not slot:  # let go of (or released) while it waited: not held
                    slot.release()
                return slot.spaced
            case Pace(lease_id=lease_id):
                slot = _slot(child, lease_id)
                if slot is None:
                    raise SpireError("the crawl let go of this seed")
                await slot.another()
                return None
            case AdmitHop(seed=seed, current=current, response=response, chain=chain):
                return await self._services.redirects.next_hop(seed, current, response, chain)
            case AdmitMove(seed=seed, page=page, target=target):
                return await self._services.redirects.navigation(seed, page, target)
            case AdmitDownload(seed=seed):
                download = await self._services.download_slot(seed)
                download_id = next(self._ids)
                child.downloads[download_id] = download
                return download_id
            case Claim(keys=keys):
                return await self._services.admission.claim(keys)
        raise SpireError(f"a worker process asked {type(request).__name__}, which the crawl does not answer")

    async def _follow_forker(self) -> None:
        """Note each worker the forker started, and each one it reaped (one that never connected too)."""
        while True:
            records = await anyio.to_thread.run_sync(self._forker.records, abandon_on_cancel=True)
            if not records:
                return  # the forker is gone: the pool is closing
            for pid, what, status in records:
                child = self._children.setdefault(pid, _Child(pid))
                if what == EXITED:
                    child.status = status
                    child.exited.set()
                    await self._lost(child)

    async def _lost(self, child: _Child) -> None:
        if child.gone:
            return
        child.gone = True
        for download in child.downloads.values():
            download.release()  # its downloads ended with it
        child.downloads.clear()
        if self._closing:
            return
        with anyio.move_on_after(EXIT_WAIT):
            await child.exited.wait()  # its channel closed: the forker reaps it in a moment
        self._children.pop(child.pid, None)
        code = child.status
        how = "still exiting" if code is None else f"exit code {code}" if code >= 0 else f"signal {-code}"
        if child.channel is None:
            self._early_deaths += 1
            if self._early_deaths >= EARLY_DEATHS:
                self._failure = SpireError(f"worker processes die before they start ({how}); see the log above")
                self._changes()
                return
        for pending in list(child.pending.values()):
            key = pending.lease.seed.unique_key
            self._deaths[key] += 1
            pending.result = WorkerCrashed(
                f"worker process {child.pid} died ({how}) while it handled the seed",
                url=pending.lease.seed.url,
                deaths=self._deaths[key],
            )
            pending.done.set()
        log.warning(
            "worker process %s died (%s) with %d seeds in hand; they go back to the frontier, and a new worker starts",
            child.pid,
            how,
            len(child.pending),
        )
        self._forker.fork()
        self._changes()

    # -- closing ----------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop every worker process (those that do not exit in time are killed), then the forker."""
        if self._closing:
            return
        self._closing = True
        children = list(self._children.values())
        for child in children:
            if child.channel is not None:
                child.channel.send(Stop())
        with anyio.move_on_after(STOP_WAIT):
            for child in children:
                await child.exited.wait()
        for child in children:
            if not child.exited.is_set():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
        with anyio.move_on_after(EXIT_WAIT):
            for child in children:
                await child.exited.wait()
        self._scope.cancel()
        for child in children:
            if child.channel is not None:
                await child.channel.aclose()
        await anyio.to_thread.run_sync(self._forker.close, EXIT_WAIT)
        shutil.rmtree(self._directory, ignore_errors=True)


def _slot(child: _Child, slot_id: int) -> GateSlot | None:
    """The slot ``child`` holds, or is to take, by ``slot_id``: a lease's, or a download's."""
    pending = child.pending.get(slot_id)
    return pending.slot if pending is not None else child.downloads.get(slot_id)
