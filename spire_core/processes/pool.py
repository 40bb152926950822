"""``ProcessPool``: the crawl's worker processes, as the crawl's own process sees them.

    Crawler(router, processes=4).run(seeds)

The crawl's process keeps the frontier, the host gate, robots.txt, the request cap, the seen set
and the datasets: everything that must be exact. Each worker process (forked from it, so it has the
same router, backend settings and policy) fetches and handles the seeds it is handed, and sends
back the outcome with the links and items its handler staged; the crawl's process commits them as
it would its own. A worker asks the crawl's process over its channel for what it cannot decide
alone: a host slot for a redirect to another origin, a redirect hop's admission, the seen check of
its links. A worker that dies hands its seeds back to the frontier and is replaced; a seed that
was in ``WORKER_DEATHS`` workers when they died fails as ``WorkerCrashed`` instead.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
import multiprocessing.process
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.to_thread
import sniffio

from spire_core import checks
from spire_core.admission import Admission
from spire_core.errors import ConfigError, SpireError, WorkerCrashed
from spire_core.frontier.base import Lease
from spire_core.log import logger
from spire_core.processes.channel import Channel
from spire_core.processes.child import run_child
from spire_core.processes.messages import Handled, WorkerSpec
from spire_core.robots import Robots, RobotsGate
from spire_core.seed import Seed
from spire_core.seed_fetcher import GateSlot, NextHop
from spire_core.stats import CrawlStats

__all__ = ["WORKER_DEATHS", "ProcessPool", "Services", "process_count"]

log = logger("processes")

#: A seed in flight on this many worker processes when they died fails (``WorkerCrashed``).
WORKER_DEATHS = 3
#: Worker processes that die before they connect, one after another, before the crawl gives up.
EARLY_DEATHS = 3
#: How often the pool looks for worker processes that exited without closing their channel.
WATCH_INTERVAL = 0.5
#: How long a closing pool waits for its workers to exit before it terminates them.
EXIT_WAIT = 5.0


def process_count(processes: int | Literal["auto"]) -> int:
    """``processes`` as a number: ``"auto"`` is every core this process may use."""
    if processes == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1
    checks.count("processes", processes)
    if processes > 1 and "fork" not in multiprocessing.get_all_start_methods():
        raise ConfigError("processes > 1 forks worker processes, which this platform cannot do; use processes=1")
    return processes


@dataclasses.dataclass(frozen=True, slots=True)
class Services:
    """What the crawl's process answers for its workers: admission, redirect hops, robots.txt."""

    admission: Admission
    redirects: NextHop
    robots: RobotsGate | None
    #: The crawl's counts, which the workers' counts are added to.
    stats: CrawlStats


@dataclasses.dataclass(slots=True, eq=False)
class _Pending:
    lease: Lease
    slot: GateSlot
    child: _Child
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    result: Handled | BaseException | None = None


@dataclasses.dataclass(slots=True, eq=False)
class _Child:
    process: multiprocessing.process.BaseProcess
    channel: Channel | None = None
    pid: int | None = None
    gone: bool = False
    #: Kept for a seed that must run alone (it was in a worker that died).
    alone: bool = False
    pending: dict[int, _Pending] = dataclasses.field(default_factory=dict)
    #: The robots.txt rules sent to this worker, by origin.
    rules: dict[str, Robots] = dataclasses.field(default_factory=dict)


class ProcessPool:
    """``count`` worker processes handling the crawl's seeds; start one with ``ProcessPool.start``."""

    def __init__(self, spec: WorkerSpec, count: int, services: Services) -> None:
        self._spec = spec
        self._count = count
        self._services = services
        self._children: list[_Child] = []
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count()
        self._deaths: Counter[str] = Counter()
        self._early_deaths = 0
        self._failure: SpireError | None = None
        self._changed = anyio.Event()
        self._closing = False
        self._directory = Path(tempfile.mkdtemp(prefix="spire-"))
        self._path = str(self._directory / "pool.sock")
        self._scope = anyio.CancelScope()

    @classmethod
    async def start(cls, tg: anyio.abc.TaskGroup, spec: WorkerSpec, count: int, *, services: Services) -> ProcessPool:
        """Start ``count`` worker processes; the pool's own tasks run in ``tg``."""
        if sniffio.current_async_library() != "asyncio":
            raise ConfigError("processes > 1 runs on asyncio; start the crawl with crawler.run() or under asyncio")
        pool = cls(spec, count, services)
        listener = await anyio.create_unix_listener(pool._path)
        tg.start_soon(pool._serve, listener)
        for _ in range(count):
            pool._spawn()
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
        pending = _Pending(lease, slot, child)
        child.pending[lease_id] = self._pending[lease_id] = pending
        update = self._rules_update(child, seed)
        channel.send(("lease", lease_id, seed, slot.origin is not None, slot.spaced, update))
        try:
            await pending.done.wait()
        except BaseException:
            channel.send(("cancel", lease_id))
            raise
        finally:
            child.pending.pop(lease_id, None)
            self._pending.pop(lease_id, None)
            if suspect:
                child.alone = False
            if not child.pending:
                self._changes()
        result = pending.result
        if isinstance(result, BaseException):
            raise result
        assert result is not None  # set with the event
        return result

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
            ready = [child for child in self._children if child.channel is not None and not child.alone]
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

    def _spawn(self) -> None:
        # The worker flushes its copy of stdout and stderr when it exits: what is buffered now would be
        # written twice (a JSON line of `spire crawl -o -`, say), so it goes out first.
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        context = multiprocessing.get_context("fork")
        process = context.Process(
            target=run_child,
            args=(self._spec, self._path),
            name="spire-worker",
            daemon=True,
        )
        process.start()
        self._children.append(_Child(process))

    async def _serve(self, listener: anyio.abc.Listener[anyio.abc.SocketStream]) -> None:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            with self._scope:
                await listener.serve(self._connected, task_group=tg)
            tg.cancel_scope.cancel()

    async def _connected(self, stream: anyio.abc.SocketStream) -> None:
        holder: list[_Child] = []

        def on_message(message: Any) -> None:
            if message[0] == "hello":
                child = self._hello(message[1], channel)
                if child is not None:
                    holder.append(child)
            elif holder:
                self._message(holder[0], message)

        channel = Channel(stream, on_message=on_message, on_call=self._call)
        try:
            await channel.run()
        finally:
            with anyio.CancelScope(shield=True):
                if holder:
                    await self._lost(holder[0])
                await channel.aclose()

    def _hello(self, pid: int, channel: Channel) -> _Child | None:
        found = [child for child in self._children if child.process.pid == pid]
        if not found:
            return None
        child = found[0]
        child.channel = channel
        child.pid = pid
        self._early_deaths = 0
        self._changes()
        return child

    def _message(self, child: _Child, message: tuple[Any, ...]) -> None:
        if message[0] == "stats":
            self._services.stats.add(message[1])
            return
        kind, lease_id, *rest = message
        pending = child.pending.get(lease_id)
        if pending is None:
            return  # the crawl let go of this seed (shut down): nothing to do
        if kind == "done" or kind == "config":
            pending.result = rest[0]
            pending.done.set()
        elif kind == "sending":
            pending.slot.sending()
        elif kind == "answered":
            pending.slot.answered(rest[0], rest[1])
        elif kind == "release":
            pending.slot.release()

    async def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        services = self._services
        if name == "take":
            lease_id, origin = args
            pending = self._pending.get(lease_id)
            if pending is None:
                raise SpireError("the crawl let go of this seed")
            await pending.slot.take(origin)
            return pending.slot.spaced
        if name == "next_hop":
            return await services.redirects.next_hop(*args)
        if name == "claim":
            return await services.admission.claim(*args)
        raise SpireError(f"a worker process asked for {name!r}, which the crawl does not answer")

    async def _watch(self) -> None:
        """Notice worker processes that exited (one killed before it connected, too)."""
        while True:
            for child in list(self._children):
                if not child.gone and not child.process.is_alive():
                    await self._lost(child)
            await anyio.sleep(WATCH_INTERVAL)

    async def _lost(self, child: _Child) -> None:
        if child.gone:
            return
        child.gone = True
        if child in self._children:
            self._children.remove(child)
        if self._closing:
            return
        await anyio.to_thread.run_sync(child.process.join, EXIT_WAIT)  # its channel closed: it is exiting
        code = child.process.exitcode
        how = f"exit code {code}" if code is None or code >= 0 else f"signal {-code}"
        if child.pid is None:
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
        self._spawn()
        self._changes()

    # -- closing ----------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop every worker process (those that do not exit in time are killed)."""
        if self._closing:
            return
        self._closing = True
        for child in self._children:
            if child.channel is not None:
                child.channel.send(("stop",))
        processes = [child.process for child in self._children]
        until = time.monotonic() + EXIT_WAIT
        for process in processes:
            await anyio.to_thread.run_sync(process.join, max(0.0, until - time.monotonic()))
        for process in processes:
            if process.is_alive():
                process.kill()
                await anyio.to_thread.run_sync(process.join, EXIT_WAIT)
        self._scope.cancel()
        for child in self._children:
            if child.channel is not None:
                await child.channel.aclose()
        shutil.rmtree(self._directory, ignore_errors=True)
