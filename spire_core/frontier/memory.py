"""``MemoryFrontier``: seeds partitioned by origin, in memory."""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import math
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import cast

from spire_core.errors import ConfigError
from spire_core.frontier.base import Lease, PushResult, Ready, Wait, always_ready
from spire_core.frontier.facades import FrontierOps
from spire_core.ledger import LedgerMode, LedgerSink, LedgerView
from spire_core.ledger_stores import LightLedger, MemoryLedger
from spire_core.outcome import Fail, Outcome, Retry
from spire_core.recrawl import Generation, Recrawl
from spire_core.seed import Seed

__all__ = ["MemoryFrontier"]

# Every queued seed has an order number: pushes count up from 0, forefront pushes and released
# leases count down from -1. A seed goes before another of its priority when its order is lower, in
# its own origin and across origins alike, which is what the SQLite and Redis stores do too.

# Below this many spent slots at the front of a lane, compacting it would cost more than it frees.
_COMPACT_AFTER = 32


class _Lane:
    """Seeds of one origin and one priority, lowest order first, each with its order beside it.

    A list read from a moving ``start``, with the orders in a parallel int64 array, costs about
    16 bytes a seed where a heap entry ``(-priority, order, seed)`` cost about 100. Slots before
    ``start`` are spent, or headroom for forefront seeds, and hold ``None``. A lane in use is never
    empty.
    """

    __slots__ = ("orders", "seeds", "start")

    def __init__(self, seed: Seed, order: int) -> None:
        self.seeds: list[Seed | None] = [seed]
        self.orders = array("q", (order,))
        self.start = 0

    def __iter__(self) -> Iterator[Seed]:
        return (seed for seed in self.seeds[self.start :] if seed is not None)

    def put(self, seed: Seed, order: int) -> None:
        """Place ``seed`` by its order: a push is the newest, a forefront push or release the lowest."""
        orders = self.orders
        if order > orders[-1]:
            self.seeds.append(seed)
            orders.append(order)
        elif order < orders[self.start]:
            start = self.start
            if start == 0:
                # Headroom in proportion to the lane, so a run of forefront pushes moves it rarely.
                room = max(8, len(orders) // 4)
                self.seeds[0:0] = [None] * room
                orders[0:0] = array("q", bytes(8 * room))
                start = room
            start -= 1
            self.seeds[start] = seed
            orders[start] = order
            self.start = start
        else:
            # A retry whose delay has ended: it keeps the place its report gave it.
            at = bisect.bisect_left(orders, order, self.start)
            self.seeds.insert(at, seed)
            orders.insert(at, order)

    def take(self) -> Seed:
        """Remove and return the first seed; the lane is empty after when ``seeds`` is."""
        seeds, start = self.seeds, self.start
        seed = seeds[start]
        assert seed is not None  # a lane in use holds a seed at its start (an assert, not a call a lease)
        seeds[start] = None  # a leased seed must not stay alive in the lane
        start += 1
        if start == len(seeds):
            seeds.clear()
            del self.orders[:]
            start = 0
        elif start >= _COMPACT_AFTER and start * 2 >= len(seeds):
            del seeds[:start]
            del self.orders[:start]
            start = 0
        self.start = start
        return seed


class _Queue:
    """One origin's seeds: its best seed in place, the rest of that priority in a lane, lower ones aside.

    An origin with one seed is then one small object, which matters in a crawl of many hosts.
    ``(rank, head)`` is ``(-priority, order)`` of the best seed: the best origin has the lowest.
    Most origins only ever see one priority, and then ``lower`` stays ``None``.
    """

    __slots__ = ("first", "head", "lower", "rank", "rest")

    def __init__(self, seed: Seed, order: int) -> None:
        self.first: Seed | None = seed  # ``None`` once the queue is empty
        self.rank = -seed.priority
        self.head = order
        self.rest: _Lane | None = None
        self.lower: dict[int, _Lane] | None = None  # by rank

    def add(self, seed: Seed, order: int) -> None:
        rank = -seed.priority
        if rank == self.rank:
            if order > self.head:
                rest = self.rest
                if rest is None:
                    self.rest = _Lane(seed, order)
                elif order > rest.orders[-1]:  # the common case, a plain push: inlined for speed
                    rest.seeds.append(seed)
                    rest.orders.append(order)
                else:
                    rest.put(seed, order)
                return
            self.rest = self._lane()  # a forefront seed, a release or a retry goes ahead of the best
        elif rank < self.rank:
            if self.lower is None:
                self.lower = {}
            self.lower[self.rank] = self._lane()  # a better priority: the best lane steps aside
            self.rest = None
            self.rank = rank
        else:
            if self.lower is None:
                self.lower = {}
            lane = self.lower.get(rank)
            if lane is None:
                self.lower[rank] = _Lane(seed, order)
            else:
                lane.put(seed, order)
            return
        self.first, self.head = seed, order

    def __iter__(self) -> Iterator[Seed]:
        if self.first is not None:
            yield self.first
        if self.rest is not None:
            yield from self.rest
        for lane in (self.lower or {}).values():
            yield from lane

    def _lane(self) -> _Lane:
        """The best priority's seeds as one lane, the first seed included."""
        first = cast(Seed, self.first)
        if self.rest is None:
            return _Lane(first, self.head)
        self.rest.put(first, self.head)
        return self.rest

    def pop(self) -> Seed:
        """Remove and return the best seed; ``first`` is ``None`` after when the queue is empty."""
        seed = self.first
        assert seed is not None  # popped only while the queue holds a seed
        lane = self.rest
        if lane is None:
            if not self.lower:
                self.first = None
                return seed
            self.rank = min(self.lower)
            lane = self.lower.pop(self.rank)
            if not self.lower:
                self.lower = None
        self.head = lane.orders[lane.start]
        self.first = lane.take()
        self.rest = lane if lane.seeds else None
        return seed


class MemoryFrontier(FrontierOps):
    """Seeds held in memory, one priority queue per origin.

    ``lease`` hands out the best-priority seed among the origins that ``ready`` admits now, so a
    busy, paused or rate-spaced origin never holds up another. Retries wait in a delay queue.

    The origins wait in a heap by their best seed, so a lease asks ``ready`` about origins best
    first and stops at the first one admitted: it costs O(log origins) for each origin it asks,
    and it asks only those ahead of the one it hands out (busy, rate-spaced or paused ones), never
    every queued origin. The answer reflects ``ready`` now: nothing it said before is remembered.

        frontier = MemoryFrontier().dedup().max_depth(5).retry(3)
    """

    def __init__(self) -> None:
        self._queues: dict[str, _Queue] = {}
        # ``(rank, head, origin)`` of each queued origin, best first. An entry whose origin's best
        # seed has changed since is stale, and dropped when it comes to the top.
        self._heap: list[tuple[int, int, str]] = []
        self._delayed: list[tuple[float, int, Seed]] = []
        self._leased: dict[int, Seed] = {}
        self._seen: set[str] = set()
        self._order = itertools.count()
        self._front = itertools.count(-1, -1)
        self._tokens = itertools.count()
        self._queued = 0
        #: Seeds settled as failed for good.
        self.failed: list[tuple[Seed, BaseException]] = []
        #: The ledger it keeps (``open_ledger``), told of each seed it queues and settles.
        self.ledger: LedgerView | None = None
        self._sink: LedgerSink | None = None

    def __repr__(self) -> str:
        return f"MemoryFrontier(queued={self._queued}, leased={len(self._leased)})"

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        result = PushResult()
        added = result.added
        seen = self._seen
        order = self._front if forefront else self._order
        for seed in seeds:
            if unique:
                key = seed.unique_key
                if key in seen:
                    result.duplicates.append(seed)
                    continue
                seen.add(key)
            self._place(seed, next(order))
            added.append(seed)
        self._queued += len(added)
        if self._sink is not None:
            self._sink.pushed(added)
        return result

    def open_ledger(self, mode: LedgerMode) -> LedgerSink:
        """Keep the crawl's ledger in memory (``KeepsLedger``): every URL (``full``) or counts (``light``)."""
        if self._sink is None:
            sink = MemoryLedger() if mode == "full" else LightLedger()
            self._sink, self.ledger = sink, sink
        return self._sink

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        seen = self._seen
        return [key in seen for key in keys]

    # -- page states for recrawls (``Recrawlable``) --------------------------------------------------

    def _pages(self) -> MemoryLedger:
        if not isinstance(self._sink, MemoryLedger):
            raise ConfigError(
                "a crawl that keeps page states (recrawl=) needs the full ledger: leave Crawler(ledger=) at 'full'"
            )
        return self._sink

    def keep_pages(self, policy: Recrawl) -> None:
        self._pages().keep_pages(policy)

    async def generation(self) -> Generation:
        ledger = self._pages()
        return Generation(ledger.generation, ledger.finished)

    async def begin_recrawl(self) -> int:
        ledger = self._pages()
        for seed, _ in self.failed:
            # Failed last time: tried afresh (a revisit still carries the state its page had).
            self._enqueue(dataclasses.replace(seed, attempt=0), next(self._order))
        self.failed.clear()
        waiting = [seed for queue in self._queues.values() for seed in queue]
        waiting += [seed for _, _, seed in self._delayed]
        revisits = ledger.begin()
        ledger.pushed(waiting)  # still queued from the crawl before: queued in this one
        self._seen = {seed.unique_key for seed in waiting}
        self._seen.update(ledger.not_due())
        return len((await self.push(revisits, unique=True)).added)

    async def finish_generation(self) -> None:
        self._pages().finished = True

    def lastmod_trust(self) -> Mapping[str, tuple[int, bool]]:
        return dict(self._pages().hosts)

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        seen = self._seen
        new: list[bool] = []
        for key in keys:
            new.append(key not in seen)
            seen.add(key)
        return new

    def _place(self, seed: Seed, order: int) -> None:
        """Put ``seed`` in its origin's queue, and the origin in the heap when its best seed changed."""
        origin = seed.origin
        queue = self._queues.get(origin)
        if queue is None:
            queue = self._queues[origin] = _Queue(seed, order)
        else:
            rank, head = queue.rank, queue.head
            queue.add(seed, order)
            if queue.rank == rank and queue.head == head:
                return
        heapq.heappush(self._heap, (queue.rank, queue.head, origin))

    def _enqueue(self, seed: Seed, order: int) -> None:
        self._place(seed, order)
        self._queued += 1

    def _promote_due(self) -> float | None:
        """Queue the delayed seeds whose time has come; return seconds until the next one."""
        delayed = self._delayed
        now = time.monotonic()
        while delayed and delayed[0][0] <= now:
            _, order, seed = heapq.heappop(delayed)
            self._enqueue(seed, order)
        return delayed[0][0] - now if delayed else None

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait:
        next_delayed = self._promote_due()
        heap, queues = self._heap, self._queues
        refused: list[tuple[int, int, str]] = []  # back in the heap after this lease
        best: _Queue | None = None
        wait = math.inf
        while heap:
            entry = heapq.heappop(heap)
            rank, head, origin = entry
            queue = queues.get(origin)
            if queue is None or queue.head != head or queue.rank != rank:
                continue  # stale: the origin has a newer entry, or no queue
            until = ready(origin)
            if until <= 0:
                best = queue
                break
            refused.append(entry)
            wait = min(wait, until)
        for entry in refused:
            heapq.heappush(heap, entry)
        if best is not None:
            seed = best.pop()
            if best.first is None:
                del queues[seed.origin]
            else:
                heapq.heappush(heap, (best.rank, best.head, seed.origin))
            self._queued -= 1
            token = next(self._tokens)
            self._leased[token] = seed
            return Lease(seed, token)
        if next_delayed is not None:
            wait = min(wait, next_delayed)
        return Wait(None if math.isinf(wait) else wait)

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        seed = self._leased.pop(lease.token, None)
        if seed is None:
            return outcome
        if self._sink is not None:
            self._sink.settled(seed, outcome)
        if isinstance(outcome, Retry):
            heapq.heappush(
                self._delayed, (time.monotonic() + (outcome.delay or 0.0), next(self._order), seed.retried())
            )
        elif isinstance(outcome, Fail):
            self.failed.append((seed, outcome.error))
        return outcome

    async def release(self, lease: Lease) -> None:
        seed = self._leased.pop(lease.token, None)
        if seed is not None:
            self._enqueue(seed, next(self._front))

    async def pending(self) -> int:
        return self._queued + len(self._delayed) + len(self._leased)

    async def aclose(self) -> None:
        """Nothing to release: a memory frontier ends with its process."""
