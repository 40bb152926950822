"""Facades: frontiers that add behaviour on top of another one, and the fluent calls that stack them.

    frontier = MemoryFrontier().dedup().max_depth(5).retry(3).avoid_traps(max_per_prefix=500)

``Facade`` forwards every call to ``inner``; each facade overrides the calls it changes: ``Dedup``
queues each logical request once, ``DepthLimit`` keeps the crawl within a number of links of its
first seeds, ``Retrying`` turns failures into delayed re-queues as a ``RetryPolicy`` says,
``TagControl`` pauses or skips a tag, ``AvoidTraps`` caps the seeds one URL path prefix may admit.
Every store and every facade is composable (``FrontierOps``), and each fluent call makes a facade:
the two refer to each other, so they live in this one module.

A retried seed goes back to the frontier with a due time; when it is due it is leased again and
waits its turn in the host limits like any seed, holding no slot while it waits. An infinite
calendar (``/calendar/2024/05/01`` links to the next day, forever) or a faceted search has more
pages than any crawl can fetch: counting admitted seeds per path prefix bounds each such space
without knowing its shape.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import TypeVar, cast

import anyio

from spire_core import checks
from spire_core import url as urls
from spire_core.clock import MONOTONIC, Clock
from spire_core.errors import ConfigError, RetryWaitTooLong, SpireError
from spire_core.frontier.base import Composable, Frontier, Lease, PushResult, Ready, Wait, always_ready
from spire_core.frontier.bloom import Bloom, BloomStore
from spire_core.outcome import Done, Fail, Outcome, PauseTag, Retry, SkipTag
from spire_core.seed import Seed
from spire_core.session.retry import RetryPolicy
from spire_core.skips import SkipReason

__all__ = [
    "find_facade",
    "AvoidTraps",
    "Dedup",
    "DepthLimit",
    "Facade",
    "FrontierOps",
    "Retrying",
    "TagControl",
    "path_prefix",
    "store_of",
]


class FrontierOps:
    """Fluent composition of facades: ``MemoryFrontier().dedup().max_depth(5).retry(3)``.

    The facades are defined in this module with it: each is composable, and each fluent call makes
    one, so the two refer to each other.
    """

    def dedup(self, *, bloom: int | None = None, error_rate: float = 0.01) -> Composable:
        """Queue each ``unique_key`` once; later pushes of it report a duplicate.

        ``bloom=capacity`` makes the seen set a Bloom filter of that many keys at ``error_rate``.
        """
        return Dedup(self._as_frontier(), bloom=bloom, error_rate=error_rate)

    def max_depth(self, depth: int) -> Composable:
        """Reject seeds deeper than ``depth`` links from the first seeds."""
        return DepthLimit(self._as_frontier(), depth)

    def retry(
        self,
        attempts: int | RetryPolicy = 3,
        *,
        backoff: float | timedelta = 1.0,
        max_backoff: float | timedelta = 60.0,
        jitter: float = 1.0,
    ) -> Composable:
        """Try a seed up to ``attempts`` times in all, with exponential backoff and jitter, or as a
        ``RetryPolicy`` says (``RetryPolicy.transient()``'s defaults: the same jitter everywhere)."""
        return Retrying(self._as_frontier(), attempts, backoff=backoff, max_backoff=max_backoff, jitter=jitter)

    def tag_control(self, *, clock: Clock = MONOTONIC) -> Composable:
        """Honour ``PauseTag`` and ``SkipTag`` outcomes, timing pauses on ``clock``."""
        return TagControl(self._as_frontier(), clock=clock)

    def avoid_traps(self, *, max_per_prefix: int = 1000, depth: int = 2) -> Composable:
        """Admit at most ``max_per_prefix`` seeds per origin and first ``depth`` path segments."""
        return AvoidTraps(self._as_frontier(), max_per_prefix=max_per_prefix, depth=depth)

    def _as_frontier(self) -> Frontier:
        return cast(Frontier, self)  # every class using this mixin implements the protocol


class Facade(FrontierOps):
    """Forwards every call to ``inner``; a facade overrides only the calls it changes."""

    def __init__(self, inner: Frontier) -> None:
        self.inner = inner

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        return await self.inner.push(seeds, forefront=forefront, unique=unique)

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        return await self.inner.seen(keys)

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        return await self.inner.claim(keys)

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait:
        return await self.inner.lease(ready)

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        return await self.inner.report(lease, outcome)

    async def release(self, lease: Lease) -> None:
        await self.inner.release(lease)

    async def pending(self) -> int:
        return await self.inner.pending()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


F = TypeVar("F", bound="Facade")


def find_facade(frontier: Frontier, kind: type[F]) -> F | None:
    """The facade of ``kind`` among ``frontier``'s facades, outermost first; ``None`` when it has none."""
    while isinstance(frontier, Facade):
        if isinstance(frontier, kind):
            return frontier
        frontier = frontier.inner
    return None


def store_of(frontier: Frontier) -> Frontier:
    """The store at the bottom of ``frontier``'s facades."""
    while isinstance(frontier, Facade):
        frontier = frontier.inner
    return frontier


class Dedup(Facade):
    """Every push becomes unique: a seed whose ``unique_key`` was queued before is a duplicate.

    The seen set lives in the store underneath (in memory, in the SQLite file, in Redis), so it is
    written in the same step as the queue and survives with it. It is exact, unless ``bloom`` gives
    a capacity: then it is a Bloom filter of that many keys at ``error_rate`` false positives (see
    ``spire_core.frontier.bloom``), kept by the store when it can (Redis, SQLite), else by this facade
    in this process's memory.
    """

    def __init__(self, inner: Frontier, *, bloom: int | Bloom | None = None, error_rate: float = 0.01) -> None:
        super().__init__(inner)
        self.bloom = Bloom(bloom, error_rate) if isinstance(bloom, int) else bloom
        self._filter = None
        if self.bloom is not None:
            store = store_of(inner)
            if isinstance(store, BloomStore):
                store.use_bloom(self.bloom)
            else:
                self._filter = self.bloom.in_memory()

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = True) -> PushResult:
        seen = self._filter
        if seen is None:
            return await self.inner.push(seeds, forefront=forefront, unique=True)
        result = PushResult()
        fresh: list[Seed] = []
        for seed in seeds:
            key = seed.unique_key
            if key in seen:
                result.duplicates.append(seed)
            else:
                seen.add(key)
                fresh.append(seed)
        return result.merge(await self.inner.push(fresh, forefront=forefront))

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        if self._filter is None:
            return await self.inner.seen(keys)
        return [key in self._filter for key in keys]

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        seen = self._filter
        if seen is None:
            return await self.inner.claim(keys)
        new: list[bool] = []
        for key in keys:
            new.append(key not in seen)
            seen.add(key)
        return new


class DepthLimit(Facade):
    """Rejects seeds whose ``depth`` is over ``max_depth``, with the reason ``"depth"``."""

    def __init__(self, inner: Frontier, max_depth: int) -> None:
        checks.count("max_depth", max_depth, minimum=0)
        super().__init__(inner)
        self.limit = max_depth

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        kept: list[Seed] = []
        result = PushResult()
        for seed in seeds:
            if seed.depth > self.limit:
                result.rejected.append((seed, SkipReason.DEPTH))
            else:
                kept.append(seed)
        if kept:
            result.merge(await self.inner.push(kept, forefront=forefront, unique=unique))
        return result


class Retrying(Facade):
    """Turns a ``Retry`` into a delayed re-queue while the policy's attempts remain, and into ``Fail`` after.

        Retrying(frontier, RetryPolicy.transient(attempts=5))
        Retrying(frontier, 3, backoff=0.5)     # RetryPolicy.transient with these settings

    The wait is the ``Retry``'s own (``Retry(after=...)``), else the server's (``Retry-After``), else
    the policy's backoff; a wait past the policy's ``max_wait`` fails the seed with ``RetryWaitTooLong``.
    Every final error is marked with the number of tries made (``error.attempts``).
    """

    def __init__(
        self,
        inner: Frontier,
        attempts: int | RetryPolicy = 3,
        *,
        backoff: float | timedelta = 1.0,
        max_backoff: float | timedelta = 60.0,
        jitter: float = 1.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(inner)
        if isinstance(attempts, RetryPolicy):
            self.policy = attempts
        else:
            self.policy = RetryPolicy.transient(
                attempts=attempts, backoff=backoff, max_backoff=max_backoff, jitter=jitter, rng=random.Random(seed)
            )

    @property
    def attempts(self) -> int:
        return self.policy.attempts

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        tries = lease.seed.attempt + 1
        if isinstance(outcome, Retry):
            if tries >= self.policy.attempts:
                error = outcome.error or SpireError(f"gave up after {tries} attempts", url=lease.seed.url)
                outcome = Fail(error)
            else:
                try:
                    delay = self.policy.wait(outcome.error, lease.seed.attempt, outcome.delay)
                except RetryWaitTooLong as too_long:
                    too_long.__cause__ = outcome.error
                    outcome = Fail(too_long)
                else:
                    outcome = Retry(after=delay, error=outcome.error)
        if isinstance(outcome, Fail) and isinstance(outcome.error, SpireError):
            outcome.error.attempts = tries
        return await self.inner.report(lease, outcome)


class TagControl(Facade):
    """Honours ``PauseTag`` and ``SkipTag`` outcomes.

    A seed of a paused tag that the store hands out is held here, still leased (so a crash loses
    nothing), and handed out once the pause ends. A seed of a skipped tag is settled as done and
    reported to ``on_skip``. Pauses are timed on ``clock`` (a ``FakeClock`` in tests).
    """

    def __init__(self, inner: Frontier, *, clock: Clock = MONOTONIC) -> None:
        super().__init__(inner)
        self.clock = clock
        self._paused: dict[str, float] = {}
        self._held: dict[str, list[Lease]] = {}
        self._resumed: deque[Lease] = deque()
        self._skipped_tags: set[str] = set()
        #: Called with each seed dropped because its tag was skipped (the crawler counts them).
        self.on_skip: Callable[[Seed], None] | None = None

    def _skip(self, seed: Seed) -> None:
        if self.on_skip is not None:
            self.on_skip(seed)

    def pause(self, tag: str, duration: float) -> None:
        self._paused[tag] = max(self._paused.get(tag, 0.0), self.clock() + duration)

    def is_paused(self, tag: str | None) -> bool:
        return tag is not None and self._paused.get(tag, 0.0) > self.clock()

    def _resume_expired(self) -> float | None:
        """Move the held seeds of ended pauses to the front; return the time to the next pause end."""
        now = self.clock()
        next_end: float | None = None
        for tag, until in list(self._paused.items()):
            if until <= now:
                del self._paused[tag]
                self._resumed.extend(self._held.pop(tag, ()))
            else:
                next_end = until - now if next_end is None else min(next_end, until - now)
        return next_end

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait:
        # Most crawls never pause a tag: with no pause and nothing held, the store's lease is the answer.
        next_end = self._resume_expired() if self._paused else None
        if self._resumed:
            for _ in range(len(self._resumed)):
                lease = self._resumed.popleft()
                if ready(lease.origin) <= 0:
                    return lease
                self._resumed.append(lease)
        while True:
            result = await self.inner.lease(ready)
            if isinstance(result, Wait):
                waits = [w for w in (result.seconds, next_end) if w is not None]
                if self._resumed:
                    waits.append(0.05)
                return Wait(min(waits) if waits else None)
            tag = result.seed.tag
            if tag in self._skipped_tags:
                self._skip(result.seed)
                await self.inner.report(result, SkipTag(tag))
            elif tag is not None and self._paused and self.is_paused(tag):
                self._held.setdefault(tag, []).append(result)
            else:
                return result

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        if isinstance(outcome, PauseTag):
            self.pause(outcome.tag, outcome.duration)
            if lease.seed.tag == outcome.tag:
                self._held.setdefault(outcome.tag, []).append(lease)
                return outcome
            await self.inner.report(lease, Done())
            return outcome
        if isinstance(outcome, SkipTag):
            self._skipped_tags.add(outcome.tag)
            for held in self._held.pop(outcome.tag, ()):
                self._skip(held.seed)
                await self.inner.report(held, outcome)
        return await self.inner.report(lease, outcome)

    async def aclose(self) -> None:
        for lease in [*self._resumed, *(held for leases in self._held.values() for held in leases)]:
            await self.inner.release(lease)
        self._resumed.clear()
        self._held.clear()
        await self.inner.aclose()


def path_prefix(url: str, depth: int) -> str:
    """The origin of ``url`` and the first ``depth`` segments of its path, ending in ``/``.

    The last segment counts like the others and the query never does, so with ``depth=2``
    ``https://host/calendar/2024/05/01`` gives ``https://host/calendar/2024/``, and with ``depth=1``
    ``https://host/search?q=a`` gives ``https://host/search/``. Empty segments (``//``) are skipped.
    """
    parts = urls.split(url)
    path = parts.rest.partition("?")[0]
    segments = [segment for segment in path.split("/") if segment][:depth]
    return parts.origin + "/" + "".join(segment + "/" for segment in segments)


class AvoidTraps(Facade):
    """Admits at most ``max_per_prefix`` seeds per path prefix; rejects the rest with the reason ``"trap"``.

    A seed's prefix is ``path_prefix(seed.url, depth)``: its origin and the first ``depth`` segments
    of its path. Only seeds the store below added count: a duplicate, or a seed a facade below
    rejected, leaves room for another. Over the cap, a seed whose unique key was seen before is
    still reported as a duplicate, not a trap. ``depth=0`` caps each origin as a whole.

    The counts live in this object, so they are per process: a resumed crawl counts from zero, and
    each worker on a shared ``RedisFrontier`` caps what it admits itself.
    """

    def __init__(self, inner: Frontier, *, max_per_prefix: int = 1000, depth: int = 2) -> None:
        if max_per_prefix < 1:
            raise ConfigError(f"max_per_prefix must be at least 1, not {max_per_prefix}")
        if depth < 0:
            raise ConfigError(f"depth must be 0 or more, not {depth}")
        super().__init__(inner)
        self.max_per_prefix = max_per_prefix
        self.depth = depth
        self._admitted: Counter[str] = Counter()
        # One push at a time: seeds are counted only once the store says it added them, and a
        # concurrent push must not see room that the one in progress is about to fill.
        self._lock = anyio.Lock()

    def admitted(self, prefix: str) -> int:
        """How many seeds under ``prefix`` (as ``path_prefix`` writes it) were admitted so far."""
        return self._admitted[prefix]

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        result = PushResult()
        waiting = [(seed, path_prefix(seed.url, self.depth)) for seed in seeds]
        async with self._lock:
            # Rounds: offer each prefix as many seeds as it has room for; when the store turns some
            # away as duplicates, their room goes to the seeds held back, in their order.
            while waiting:
                offered: list[Seed] = []
                held: list[tuple[Seed, str]] = []
                room = {prefix: self.max_per_prefix - self._admitted[prefix] for _, prefix in waiting}
                for seed, prefix in waiting:
                    if room[prefix] > 0:
                        room[prefix] -= 1
                        offered.append(seed)
                    else:
                        held.append((seed, prefix))
                if not offered:
                    # A seed queued before is a duplicate, full prefix or not: say so, as the store would.
                    seen = await self.inner.seen([seed.unique_key for seed, _ in held])
                    for (seed, _), was_seen in zip(held, seen, strict=True):
                        if was_seen:
                            result.duplicates.append(seed)
                        else:
                            result.rejected.append((seed, SkipReason.TRAP))
                    break
                pushed = await self.inner.push(offered, forefront=forefront, unique=unique)
                for seed in pushed.added:
                    self._admitted[path_prefix(seed.url, self.depth)] += 1
                result.merge(pushed)
                waiting = held
        return result
