"""``TagControl``: pause a tag for a while, or skip it for the rest of the crawl."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from spire_core.clock import MONOTONIC, Clock
from spire_core.frontier.base import Frontier, Lease, Ready, Wait, always_ready
from spire_core.frontier.facade import Facade
from spire_core.outcome import Done, Outcome, PauseTag, SkipTag
from spire_core.seed import Seed

__all__ = ["TagControl"]


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
        next_end = self._resume_expired()
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
            elif tag is not None and self.is_paused(tag):
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
