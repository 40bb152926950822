"""The live progress of a crawl: a redrawn display on a terminal, else a plain line every few seconds.

polite: 1 request/s per host, 1 in flight per host; robots.txt obeyed (--per-second, --max-in-flight to change)
pages=120 queue=340 requests=131 errors=3 rate=12.4/s eta=27s elapsed=10s
errors by category: status=2 connect=1
last error: http://example.com/x: HttpStatusError: HTTP status 404

``errors=`` counts tries that failed, as they happen: each retry and each failure of a URL, and each
robots.txt read tried again, so a dead host shows in it from its first refused connection (the stats
line's ``failed=`` counts the URLs that failed for good, after their retries).

The ETA is the queue over the rate it has shrunk at lately (``QueueTrend``): while links are found
faster than pages are crawled, the queue grows and there is no honest ETA, so none is shown (``-``).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Awaitable, Callable
from typing import IO

import anyio

from spire_core.limits import HostLimits
from spire_core.log import FailureLog
from spire_core.stats import CrawlStats

__all__ = ["Progress", "QueueTrend", "pace", "politeness"]


def _per_second(rate: float) -> str:
    if rate >= 1:
        return f"{rate:g} request{'s' if rate != 1 else ''}/s"
    return f"1 request every {1 / rate:g} s"


def pace(limits: HostLimits, *, robots: bool) -> str:
    """The limits a crawl works within: ``1 request/s per host, 1 in flight per host; robots.txt obeyed``."""
    parts = []
    if limits.per_second is not None:
        parts.append(f"{_per_second(limits.per_second)} per host")
    if limits.max_in_flight is not None:
        parts.append(f"{limits.max_in_flight} in flight per host")
    if limits.max_total_in_flight is not None:
        parts.append(f"{limits.max_total_in_flight} in flight overall")
    if limits.hosts:
        parts.append(f"{len(limits.hosts)} host override{'s' if len(limits.hosts) != 1 else ''}")
    obeyed = "robots.txt obeyed" if robots else "robots.txt ignored"
    return f"{', '.join(parts) if parts else 'no limit per host'}; {obeyed}"


def politeness(limits: HostLimits, *, robots: bool, change: str) -> str:
    """``pace`` in one sentence for a crawl's start, with how to ``change`` it: what makes it as slow as it is.

    >>> politeness(HostLimits(max_in_flight=1, per_second=1.0), robots=True, change="--per-second to change")
    'polite: 1 request/s per host, 1 in flight per host; robots.txt obeyed (--per-second to change)'
    """
    return f"polite: {pace(limits, robots=robots)} ({change})"


class QueueTrend:
    """How fast the queue shrinks, over the last ``window`` seconds; an ETA only while it does.

    An ETA of "the queue over the crawl's rate" is wrong by 10x early in a site crawl: each page
    adds more links than it takes off. This one is the queue over its net shrink rate, and none
    until the queue has been watched for ``settle`` seconds and has shrunk over them.
    """

    def __init__(self, *, window: float = 60.0, settle: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.settle = settle
        self.clock = clock
        self._samples: collections.deque[tuple[float, int]] = collections.deque()

    def eta(self, queue: int) -> float | None:
        """Seconds until the queue is empty at its recent net rate, or ``None`` when it is not shrinking."""
        now = self.clock()
        self._samples.append((now, queue))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()  # keep one sample at least ``window`` old
        then, queued_then = self._samples[0]
        if not queue or now - then < self.settle or queued_then <= queue:
            return None
        return queue / ((queued_then - queue) / (now - then))


class Progress:
    """Shows ``stats`` against ``pending()`` work; ``mode`` is ``auto``, ``live``, ``plain`` or ``none``.

    ``limits``, when given, is a sentence shown first (``politeness``): the pace the crawl keeps.
    """

    def __init__(
        self,
        title: str,
        *,
        stats: Callable[[], CrawlStats],
        pending: Callable[[], Awaitable[int]],
        failures: Callable[[], FailureLog],
        mode: str = "auto",
        stream: IO[str],
        every: float = 5.0,
        limits: str | None = None,
        trend: QueueTrend | None = None,
    ) -> None:
        if mode == "auto":
            mode = "live" if stream.isatty() else "plain"
        self.title = title
        self.mode = mode
        self._stats = stats
        self._pending = pending
        self._failures = failures
        self.stream = stream
        self.every = every
        self.limits = limits
        self.trend = trend if trend is not None else QueueTrend()

    async def lines(self) -> list[str]:
        """The figures: one ``key=value`` line, then errors by category and the last error when there are any."""
        stats = self._stats()  # read live: a run starts with fresh stats
        queue = await self._pending()
        seconds = self.trend.eta(queue)
        eta = f"{seconds:.0f}s" if seconds is not None else "-"
        lines = [
            f"pages={stats.pages} queue={queue} requests={stats.requests} errors={self._failures().failed_tries} "
            f"rate={stats.rate:.1f}/s eta={eta} elapsed={stats.elapsed:.0f}s"
        ]
        if stats.errors_by_category:
            by_category = " ".join(f"{name}={n}" for name, n in stats.errors_by_category.most_common())
            lines.append(f"errors by category: {by_category}")
        last = self._failures().last
        if last is not None:
            url, message = last
            lines.append(f"last error: {url}: {message[:200]}")
        return lines

    async def run(self) -> None:
        """Show progress until cancelled."""
        if self.mode == "none":
            await anyio.sleep_forever()
        if self.mode == "plain":
            if self.limits is not None:
                print(self.limits, file=self.stream, flush=True)
            while True:
                await anyio.sleep(self.every)
                print("progress", (await self.lines())[0], file=self.stream, flush=True)
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        console = Console(file=self.stream)
        head = [Text(self.title, style="bold"), *([Text(self.limits)] if self.limits is not None else [])]
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while True:
                live.update(Text("\n").join([*head, *(Text(line) for line in await self.lines())]))
                await anyio.sleep(0.25)
