"""``MemoryFrontier``: seeds partitioned by origin, in memory."""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Iterable, Sequence

from spire_core.frontier.base import FrontierOps, Lease, PushResult, Ready, Wait, always_ready
from spire_core.outcome import Fail, Outcome, Retry
from spire_core.seed import Seed

__all__ = ["MemoryFrontier"]

# A queue entry: (-priority, order, seed). Lower sorts first: higher priority, then older
# (or, for a forefront push, newer-first among the forefront seeds).
_Entry = tuple[int, int, Seed]


class MemoryFrontier(FrontierOps):
    """Seeds held in memory, one priority queue per origin.

    ``lease`` hands out the best-priority seed among the origins that ``ready`` admits now, so a
    busy, paused or rate-spaced origin never holds up another. Retries wait in a delay queue.

        frontier = MemoryFrontier().dedup().max_depth(5).retry(3)
    """

    def __init__(self) -> None:
        self._queues: dict[str, list[_Entry]] = {}
        self._delayed: list[tuple[float, int, Seed]] = []
        self._leased: dict[int, Seed] = {}
        self._seen: set[str] = set()
        self._order = itertools.count()
        self._front = itertools.count(-1, -1)
        self._tokens = itertools.count()
        self._queued = 0
        #: Seeds settled as failed for good.
        self.failed: list[tuple[Seed, BaseException]] = []

    def __repr__(self) -> str:
        return f"MemoryFrontier(queued={self._queued}, leased={len(self._leased)})"

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        result = PushResult()
        seen = self._seen
        order = self._front if forefront else self._order
        for seed in seeds:
            if unique:
                key = seed.unique_key
                if key in seen:
                    result.duplicates.append(seed)
                    continue
                seen.add(key)
            self._enqueue(seed, next(order))
            result.added.append(seed)
        return result

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        seen = self._seen
        return [key in seen for key in keys]

    def _enqueue(self, seed: Seed, order: int) -> None:
        origin = seed.origin
        queue = self._queues.get(origin)
        if queue is None:
            queue = self._queues[origin] = []
        heapq.heappush(queue, (-seed.priority, order, seed))
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
        best: tuple[int, int] | None = None
        best_origin = ""
        wait = math.inf
        for origin, queue in self._queues.items():
            head = queue[0]
            if best is not None and (head[0], head[1]) >= best:
                continue
            until = ready(origin)
            if until <= 0:
                best, best_origin = (head[0], head[1]), origin
            else:
                wait = min(wait, until)
        if best is not None:
            queue = self._queues[best_origin]
            seed = heapq.heappop(queue)[2]
            if not queue:
                del self._queues[best_origin]
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
