"""The clock a policy reads time from: monotonic seconds, and a wait on the same time line.

Host limits, tag pauses and the robots cache take ``clock=``; a test hands them a ``FakeClock`` and
steps it, instead of sleeping:

    clock = FakeClock()
    gate = HostGate(HostLimits(per_second=1), clock=clock)
    gate.acquire(origin)
    assert gate.ready_in(origin) == 1.0
    clock.advance(1.0)
    assert gate.ready_in(origin) == 0.0
"""

from __future__ import annotations

import math
import time
from typing import Protocol

import anyio
import anyio.lowlevel

__all__ = ["MONOTONIC", "Clock", "FakeClock", "MonotonicClock", "wait_on"]


class Clock(Protocol):
    """Monotonic seconds when called, and ``sleep`` to wait a span of them."""

    def __call__(self) -> float:
        """The time now, in seconds; only differences mean anything."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait until ``seconds`` have passed on this clock."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic()``, and ``anyio.sleep``."""

    #: ``time.monotonic`` itself: read several times a request, it then costs no Python call of its own.
    __call__ = staticmethod(time.monotonic)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    def __repr__(self) -> str:
        return "MONOTONIC"


#: The clock every policy reads unless it is given another.
MONOTONIC = MonotonicClock()


class FakeClock:
    """A clock that moves only when told: ``advance(seconds)``, or a ``sleep``, which passes at once.

    Each ``sleep`` is recorded in ``slept``, so a test can check the waits a policy asked for.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        #: The span of every ``sleep`` asked for, in order.
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        if seconds < 0:
            raise ValueError(f"a clock does not go back: {seconds}")
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(max(0.0, seconds))
        await anyio.lowlevel.checkpoint()  # still a point where other tasks run and cancellation lands

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now})"


async def wait_on(clock: Clock, event: anyio.Event, at_most: float | None) -> None:
    """Wait until ``event`` is set, or ``at_most`` seconds have passed on ``clock`` (``None``: no limit).

    On the real clock this is a cancel scope's deadline; on another (a ``FakeClock``), its own ``sleep``
    ends the wait, so a pause measured on that clock also passes on it.
    """
    if at_most is None or math.isinf(at_most):
        await event.wait()
        return
    if clock is MONOTONIC:
        with anyio.move_on_after(at_most):
            await event.wait()
        return
    async with anyio.create_task_group() as tg:

        async def ring() -> None:
            await clock.sleep(at_most)
            tg.cancel_scope.cancel()

        tg.start_soon(ring)
        await event.wait()
        tg.cancel_scope.cancel()
