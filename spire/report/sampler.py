"""``Sampler``: what the ledger does not record, watched while a crawl runs: requests in flight, host pauses.

The ledger keeps each request; how many were in flight at once, and when a host was paused, are
the host limits' live state. A ``Sampler`` reads it once a second for the report's timeline and
its per-host table.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import anyio

from spire_core.limits import HostStats

__all__ = ["HostPauses", "Sampler"]

#: Why a host limit pauses an origin: the two causes the engine has (``HostGate.pause`` callers).
PAUSE_CAUSES = "a pause_on status such as 429 or 503, or robots.txt's Crawl-delay"


@dataclasses.dataclass(slots=True)
class HostPauses:
    """One origin's pauses seen: how many, the longest, and until when the last one runs."""

    count: int = 0
    longest: float = 0.0
    until: float = 0.0

    def text(self, now: float) -> str:
        """``paused 2 times (longest 30 s), now for 12 s more``: the table cell."""
        text = f"paused {self.count} time{'s' if self.count != 1 else ''} (longest {_seconds(self.longest)})"
        if self.until > now:
            text += f", now for {_seconds(self.until - now)} more"
        return f"{text}: {PAUSE_CAUSES}"


def _seconds(value: float) -> str:
    """``30 s``, ``1.5 s``, ``0.3 s``: a pause rounded to what a reader needs, never a 1 s pause as 0 s."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f}".removesuffix(".0") + " s"


class Sampler:
    """Samples ``host_stats()`` (a ``Crawler``'s) every ``every`` seconds while ``run`` runs.

    sampler = Sampler(crawler.host_stats)
    tg.start_soon(sampler.run)
    ... sampler.in_flight  # [(second, requests in flight), ...]
    """

    def __init__(
        self,
        host_stats: Callable[[], Sequence[HostStats]],
        *,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._host_stats = host_stats
        self.every = every
        self.clock = clock
        self.started = clock()
        #: ``(seconds since the sampler started, requests in flight)``, one a sample.
        self.in_flight: list[tuple[int, int]] = []
        self.pauses: dict[str, HostPauses] = {}

    def sample(self) -> None:
        """Take one sample now."""
        now = self.clock()
        hosts = self._host_stats()
        self.in_flight.append((round(now - self.started), sum(host.in_flight for host in hosts)))
        for host in hosts:
            if host.paused_until <= now:
                continue
            seen = self.pauses.setdefault(host.origin, HostPauses())
            if host.paused_until != seen.until:
                if seen.until <= now:  # a new pause, not the running one made longer
                    seen.count += 1
                seen.until = host.paused_until
            # From the pause's start when the gate says it (a sample comes up to a second into it).
            begun = host.paused_from if 0 < host.paused_from <= now else now
            seen.longest = max(seen.longest, host.paused_until - begun)

    def pause_texts(self) -> dict[str, str]:
        """Each paused origin's table cell (``HostPauses.text``)."""
        now = self.clock()
        return {origin: pauses.text(now) for origin, pauses in self.pauses.items()}

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            self.sample()
            await anyio.sleep(self.every)
