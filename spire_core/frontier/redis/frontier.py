"""``RedisFrontier``: the crawl's queues and leases in Redis, shared by many workers on many machines.

    frontier = RedisFrontier("redis://queue.internal:6379/0", name="shop").dedup().retry(3)
    await Crawler(router, frontier=frontier).arun(["https://shop.example/"])

Every change of state is one script of ``scripts.py``, run atomically on the server's clock. This
module holds the queue and the leases; beside it sit the seen set (``seen.py``), the host slots
every worker shares (``slots.py``), the item streams (``items.py``), the fleet's status
(``status.py``), the record format (``records.py``) and the connection (``connection.py``). An
``origins`` member whose queue is gone does not keep the crawl alive: once nothing else is queued,
delayed or leased, such members are dropped and the crawl is done.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel

from spire_core import checks
from spire_core.dataset.base import Dataset
from spire_core.dataset.redis import RedisDataset
from spire_core.errors import ConfigError, SpireError
from spire_core.frontier.base import Lease, PushResult, Ready, Wait, always_ready
from spire_core.frontier.bloom import Bloom
from spire_core.frontier.facades import FrontierOps
from spire_core.frontier.items import StagedItems, documents, place_in
from spire_core.frontier.redis.connection import Connection, RedisError, glob_escape, redacted
from spire_core.frontier.redis.items import ItemStreams
from spire_core.frontier.redis.records import BadRecord, decode, encode, error_text
from spire_core.frontier.redis.scripts import Scripts
from spire_core.frontier.redis.seen import SeenSet
from spire_core.frontier.redis.slots import SharedHostSlots
from spire_core.frontier.redis.status import FleetStatus, read_status
from spire_core.ledger import LedgerMode, LedgerSink, LedgerView
from spire_core.ledger_redis import RedisLedger, RedisLedgerView
from spire_core.ledger_stores import LightLedger
from spire_core.limits import HostLimits
from spire_core.outcome import Fail, Outcome, Retry
from spire_core.seed import Seed

__all__ = ["RedisFrontier"]

logger = logging.getLogger("spire.frontier")
logger.addHandler(logging.NullHandler())

T = TypeVar("T", bound=BaseModel)

_WORKER_NUMBERS = itertools.count(1)

#: Origins a lease examines per round trip, and how many rounds it pages through when the calling
#: process is busy with all of them.
_CANDIDATES = 16
_PAGES = 4
#: How often a lease re-examines the crawl after another worker won the race for its origins.
_RACES = 8
#: Seeds per push script: big pushes are split so that no script blocks Redis for long.
_PUSH_BATCH = 500


class RedisFrontier(FrontierOps):
    """Seeds in Redis, shared by every worker that opens the same ``url`` and ``name``.

    Same semantics as ``MemoryFrontier``: per-origin queues by priority (forefront first), the seen
    set for ``unique`` pushes, delayed retries, and leases. What it adds for many workers:

    - ``per_origin_in_flight`` and ``per_origin_interval`` are stored in Redis and honoured by every
      worker together: one host gets at most that many leases out at once across the whole crawl,
      and its leases start at least ``interval`` seconds apart. Given here, they replace the stored
      values; left out, the stored ones (or none) apply. Each worker's own ``HostLimits`` still apply too.
    - ``host_limits`` (a crawl's ``HostLimits``, overrides included) are written per origin as its
      seeds are pushed, and held the same way across workers; where several limits apply, the
      tightest wins. A page retried after a ``pause_on`` status pauses its origin for every worker.
      ``spire worker`` passes its script's.
    - A lease expires ``lease_ttl`` seconds after it was taken or last renewed; any worker then hands
      its seed out again, first in its origin's queue. A worker renews its leases whenever it talks to
      the frontier a third of the TTL after the last renewal, and ``keep_alive()`` renews them on a
      timer for handlers that can run longer than the TTL.
    - ``lease`` says ``Wait(None)`` only when nothing is queued, delayed or leased by any worker;
      otherwise it waits at most ``poll`` seconds, so a worker notices seeds other workers push.
    - A lost connection (Redis restarting, a network blip) is tried again for up to
      ``reconnect_for`` seconds, logged on the ``spire.frontier`` logger, before a command fails
      with ``ConnectError``; nothing is lost meanwhile.
    - ``dataset(Model)`` keeps items in a stream of the crawl, added by their page's ack (exactly
      once); ``status()`` reports the crawl across its workers; ``.dedup(bloom=n)`` keeps the seen
      set as Bloom bitmaps.

    ``fresh=True`` deletes the crawl's keys when the frontier is first used (``clear()`` does it any
    time). Seeds' ``user_data`` must be JSON (tuples come back as lists). Needs an asyncio event
    loop (redis-py's client) and Redis 6.2 or later.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        name: str = "spire",
        lease_ttl: float | timedelta = 60.0,
        per_origin_in_flight: int | None = None,
        per_origin_interval: float | timedelta | None = None,
        poll: float | timedelta = 0.5,
        fresh: bool = False,
        connect_timeout: float | timedelta = 5.0,
        reconnect_for: float | timedelta = 10.0,
        host_limits: HostLimits | None = None,
    ) -> None:
        #: The server's URL, its password hidden: what messages and ``repr`` show.
        self.url = redacted(url)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a RedisFrontier needs a non-empty name, not {name!r}")
        self.name = name
        self.lease_ttl = checks.duration("lease_ttl", lease_ttl, positive=True)
        if per_origin_in_flight is not None:
            checks.count("per_origin_in_flight", per_origin_in_flight)
        interval = None if per_origin_interval is None else checks.duration("per_origin_interval", per_origin_interval)
        self.poll = checks.duration("poll", poll, positive=True)
        timeout = checks.duration("connect_timeout", connect_timeout, positive=True)
        self._connection = Connection(
            url,
            prefix=name + ":",
            connect_timeout=timeout,
            reconnect_for=checks.duration("reconnect_for", reconnect_for),
            ensure_open=self.open,
        )
        self._prefix = name + ":"
        self._fresh = fresh
        self._opened = False
        self._closed = False
        self._open_lock: anyio.Lock | None = None
        self._scripts = Scripts(self._connection.client)
        self._seen = SeenSet(self._connection, self._scripts, name)
        self._slots = SharedHostSlots(
            self._connection,
            self._scripts,
            per_origin_in_flight=per_origin_in_flight,
            per_origin_interval=interval,
            host_limits=host_limits,
        )
        self._items = ItemStreams(self._connection)
        #: The crawl's ledger (``open_ledger``): this worker's lines, written after each push and report.
        self.ledger: LedgerView | None = None
        self._sink: LedgerSink | None = None
        self._ledger_writes: RedisLedger | None = None
        #: Records this object moved to the dead-letter list because no seed could be read from them.
        self.bad_records = 0
        #: Tokens of the leases this object handed out and has not settled: the ones it renews.
        self._held: set[str] = set()
        self._renewed_at = 0.0
        #: This object's name in the crawl's list of live workers.
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{next(_WORKER_NUMBERS)}"

    def __repr__(self) -> str:
        return f"RedisFrontier({self.url!r}, name={self.name!r})"

    @property
    def per_origin_in_flight(self) -> int | None:
        """The in-flight cap per origin this object stores for the whole crawl (``None``: the stored one)."""
        return self._slots.per_origin_in_flight

    @property
    def per_origin_interval(self) -> float | None:
        """The lease spacing per origin this object stores for the whole crawl (``None``: the stored one)."""
        return self._slots.per_origin_interval

    @property
    def host_limits(self) -> HostLimits | None:
        """The ``HostLimits`` written per origin as seeds are pushed, for every worker to hold."""
        return self._slots.host_limits

    @property
    def reconnect_for(self) -> float:
        """How long a lost connection is tried again before a command fails (``ConnectError``)."""
        return self._connection.reconnect_for

    # -- connection -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, store the per-origin limits, and clear the crawl when ``fresh``; once.

        Every other method opens on first use; call it to fail early on a wrong URL.
        """
        if self._closed:
            raise SpireError(f"the frontier {self!r} is closed")
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = anyio.Lock()
        async with self._open_lock:
            if self._opened:
                return
            try:
                await self._connection.client.ping()
                await self._slots.store_limits()
                if not self._fresh:  # else clear() records it, once the old crawl is gone
                    await self._seen.check()
            except RedisError as exc:
                raise ConfigError(f"cannot use the Redis frontier at {self.url}: {exc}") from exc
            self._opened = True
            if self._fresh:
                await self.clear()

    async def __aenter__(self) -> RedisFrontier:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Hand back the leases this object still holds, then disconnect."""
        if self._closed:
            return
        connection = self._connection
        with contextlib.suppress(SpireError):
            for token in list(self._held):
                await connection.run(self._scripts.settle, token, "release", 0, "")
            if self._opened:
                await self._write_ledger()  # the attempts of leases handed back, the last refusals
                with connection.translated():
                    await connection.client.zrem(self._prefix + "workers", self.worker_id)  # no longer live
        self._held.clear()
        self._items.clear()
        self._closed = True
        await connection.aclose()

    async def clear(self) -> None:
        """Delete every key of this crawl: its queues, seen set, leases, failures and limits."""
        await self.open()
        client = self._connection.client
        with self._connection.translated():
            batch: list[str] = []
            async for key in client.scan_iter(match=glob_escape(self._prefix) + "*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    await client.unlink(*batch)
                    batch.clear()
            if batch:
                await client.unlink(*batch)
            await self._slots.store_limits()
            await self._seen.check()
        self._held.clear()

    async def _run(self, script: Any, *args: str | float) -> Any:
        return await self._connection.run(script, *args)

    # -- the Frontier protocol --------------------------------------------------------------------

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        result = PushResult()
        batch = list(seeds)
        for start in range(0, len(batch), _PUSH_BATCH):
            chunk = batch[start : start + _PUSH_BATCH]
            await self._slots.store_origin_limits(chunk)
            if unique:
                await self._seen.ready()
            mode = self._seen.mode if unique else "0"
            args: list[str | float] = ["1" if forefront else "0", mode]
            for seed in chunk:
                args += (self._seen.key(seed.unique_key) if unique else "", encode(seed))
            flags = await self._run(self._scripts.push, *args)
            for seed, added in zip(chunk, flags, strict=True):
                (result.added if added else result.duplicates).append(seed)
        if self._sink is not None:
            self._sink.pushed(result.added)
            await self._write_ledger()
        return result

    def open_ledger(self, mode: LedgerMode) -> LedgerSink:
        """Keep the crawl's ledger (``KeepsLedger``): ``full`` in Redis beside the queue, shared by
        every worker (see ``spire_core.ledger_redis`` for when a line is written); ``light`` in memory."""
        if self._sink is None:
            if mode == "light":
                light = LightLedger()
                self._sink, self.ledger = light, light
            else:
                client, call = self._connection.client, self._connection.call
                self._ledger_writes = RedisLedger(client, self._prefix, call)
                self._sink = self._ledger_writes
                self.ledger = RedisLedgerView(client, self._prefix, call)
        return self._sink

    async def _write_ledger(self) -> None:
        if self._ledger_writes is not None:
            await self._ledger_writes.flush()

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        return await self._seen.seen(keys)

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        return await self._seen.claim(keys)

    async def hold(self, origin: str) -> float:
        """Take a slot of ``origin`` shared with every worker, outside a lease (to read its robots.txt):
        0 once taken, else the seconds to wait before asking again (``unhold`` gives it back)."""
        return await self._slots.hold(origin)

    async def unhold(self, origin: str) -> None:
        """Give back a slot ``hold`` took."""
        await self._slots.unhold(origin)

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait:
        await self._renew_if_due()
        for _ in range(_RACES):
            admitted: list[tuple[float, str, str]] = []
            local_wait = math.inf
            offset = 0
            while True:
                view = await self._run(self._scripts.scan, offset, _CANDIDATES)
                listed = view[0]
                for entry in listed:
                    score, order, origin = entry.split("\t", 2)
                    until = ready(origin)
                    if until <= 0:
                        admitted.append((float(score), order, origin))
                    else:
                        local_wait = min(local_wait, until)
                if admitted or len(listed) < _CANDIDATES or offset >= _CANDIDATES * (_PAGES - 1):
                    break
                offset += _CANDIDATES  # every origin listed is busy here: look further down the line
            if not admitted:
                return await self._wait(view, local_wait)
            admitted.sort()  # best priority first, then the oldest (or forefront) seed
            # Shielded: a lease taken in Redis but cancelled on its way back would be held by no one
            # until it expired; recorded in ``_held``, ``aclose`` hands it back. Past the TTL there
            # is nothing left to protect, so a hung server cannot hold a shutdown for longer.
            taken = None
            with anyio.move_on_after(self.lease_ttl, shield=True):
                taken = await self._run(self._scripts.take, self.lease_ttl, *(origin for _, _, origin in admitted))
                if taken is not None:
                    if not self._held:
                        self._renewed_at = time.monotonic()
                    self._held.add(taken[0])
            if taken is not None:
                token, record, origin = taken
                try:
                    return Lease(decode(record), token)
                except BadRecord as exc:
                    await self._set_aside(token, record, origin, exc)
        return Wait(0.0)  # other workers won every race (or their seeds were bad): look again at once

    async def _set_aside(self, token: str, record: str, origin: str, error: BadRecord) -> None:
        """Move a leased record that is no seed to the dead-letter list, and say so."""
        self._held.discard(token)
        await self._run(self._scripts.bury, token, json.dumps([record, str(error)], separators=(",", ":")), origin)
        self.bad_records += 1
        logger.warning("the Redis frontier at %s: %s; moved to %sdead", self.url, error, self._prefix)

    async def dead_letters(self) -> list[tuple[str, str]]:
        """The records moved aside because no seed could be read from them, each with why."""
        entries = await self._connection.call(lambda: self._connection.client.lrange(self._prefix + "dead", 0, -1))
        return [(str(record), str(why)) for record, why in map(json.loads, entries)]

    async def _wait(self, view: list[Any], local_wait: float) -> Wait:
        queued, delayed, leased = int(view[4]), int(view[5]), int(view[6])
        if queued and not (delayed or leased or view[0]) and math.isinf(local_wait):
            queued = int(await self._run(self._scripts.prune))  # the origins in line may be stale: without a queue
        if not (queued or delayed or leased):
            return Wait(None)
        waits = [self.poll, local_wait]
        waits += [w for w in map(_seconds_or_none, view[1:4]) if w is not None]
        # Capped by ``poll``: a seed another worker pushes, or a lease it settles, is seen soon.
        return Wait(max(0.0, min(waits)))

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        token = str(lease.token)
        self._held.discard(token)
        staged = self._items.take(token)
        if isinstance(outcome, Retry):
            retried = encode(lease.seed.retried())
            await self._run(
                self._scripts.settle, token, "retry", outcome.delay or 0.0, retried, self._slots.pause_after(outcome)
            )
        elif isinstance(outcome, Fail):
            failure = json.dumps([encode(lease.seed), error_text(outcome.error)], separators=(",", ":"))
            await self._run(self._scripts.settle, token, "fail", 0, failure, self._slots.pause_after(outcome))
        else:
            await self._run(self._scripts.settle, token, "done", 0, "", *(part for pair in staged for part in pair))
        if self._sink is not None:
            self._sink.settled(lease.seed, outcome)
            await self._write_ledger()
        await self._renew_if_due()
        return outcome

    async def release(self, lease: Lease) -> None:
        token = str(lease.token)
        self._held.discard(token)
        self._items.take(token)
        await self._run(self._scripts.settle, token, "release", 0, "")

    async def pending(self) -> int:
        return int(await self._run(self._scripts.pending))

    # -- the Bloom seen set -----------------------------------------------------------------------

    def use_bloom(self, bloom: Bloom) -> None:
        self._seen.use_bloom(bloom)

    # -- items committed with their page's ack ----------------------------------------------------

    def dataset(self, model: type[T], *, stream: str | None = None) -> Dataset[T]:
        """A ``RedisDataset`` of ``model`` in this crawl, whose items are added with their page's ack.

        Fits ``Crawler(datasets=frontier.dataset)``: every model then gets its stream here.
        """
        return RedisDataset(model, self, stream=stream)

    def holds(self, dataset: Dataset[Any]) -> bool:
        return place_in(self, dataset) is not None

    def stage(self, lease: Lease, items: StagedItems) -> None:
        self._items.stage(str(lease.token), documents(self, items))

    def check_place(self, place: str) -> None:
        self._items.check_place(place)

    async def append_rows(self, place: str, documents: list[str]) -> None:
        await self._items.append_rows(place, documents)

    async def read_rows(self, place: str, after: str | None, count: int) -> list[tuple[str, str]]:
        return await self._items.read_rows(place, after, count)

    # -- beyond the protocol ----------------------------------------------------------------------

    async def status(self, *, hosts: int = 10) -> FleetStatus:
        """A snapshot of the crawl as every worker shares it, with the ``hosts`` origins next in line."""
        return await read_status(self._connection, hosts=hosts)

    async def failures(self) -> list[tuple[Seed, str]]:
        """Seeds settled as failed for good, with their error as text (``"ValueError: boom"``)."""
        entries = await self._connection.call(lambda: self._connection.client.lrange(self._prefix + "failed", 0, -1))
        found: list[tuple[Seed, str]] = []
        for entry in entries:
            try:
                record, error = json.loads(entry)
                found.append((decode(record), error))
            except (BadRecord, ValueError, TypeError) as exc:
                logger.warning("the Redis frontier at %s: a failed entry that cannot be read: %s", self.url, exc)
        return found

    async def renew(self) -> int:
        """Extend every lease this object holds to ``lease_ttl`` from now; return how many it still holds.

        A lease that expired before it was renewed is lost: another worker may be handling its seed.
        """
        self._renewed_at = time.monotonic()
        lost = await self._run(self._scripts.renew, self.lease_ttl, self.worker_id, *self._held)
        self._held.difference_update(lost)
        return len(self._held)

    async def _renew_if_due(self) -> None:
        if self._held and time.monotonic() - self._renewed_at >= self.lease_ttl / 3:
            await self.renew()

    @contextlib.asynccontextmanager
    async def keep_alive(self) -> AsyncIterator[RedisFrontier]:
        """Renew this object's leases every third of ``lease_ttl`` while the block runs.

        For handlers that may run longer than the TTL (a slow browser page), where no call to the
        frontier renews the leases in between:

            async with frontier.keep_alive():
                await crawler.arun(seeds)
        """

        async def renew_forever() -> None:
            while True:
                await self.renew()  # at once too: the heartbeat shows this worker live from the start
                await anyio.sleep(self.lease_ttl / 3)

        async with anyio.create_task_group() as tg:
            tg.start_soon(renew_forever)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()


def _seconds_or_none(text: str) -> float | None:
    return float(text) if text else None
