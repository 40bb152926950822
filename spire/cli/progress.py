"""The live progress of a crawl: a redrawn display on a terminal, else a plain line every few seconds.

pages=120 queue=340 requests=131 errors=3 rate=12.4/s eta=27s elapsed=10s
errors by category: status=2 connect=1
last error: http://example.com/x: HttpStatusError: HTTP status 404
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import IO

import anyio

from spire_core.log import FailureLog
from spire_core.stats import CrawlStats

__all__ = ["Progress"]


class Progress:
    """Shows ``stats`` against ``pending()`` work; ``mode`` is ``auto``, ``live``, ``plain`` or ``none``."""

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

    async def lines(self) -> list[str]:
        """The figures: one ``key=value`` line, then errors by category and the last error when there are any."""
        stats = self._stats()  # read live: a run starts with fresh stats
        queue = await self._pending()
        done = stats.finished + stats.failed
        per_second = done / stats.elapsed if stats.elapsed > 0 else 0.0
        eta = f"{queue / per_second:.0f}s" if per_second > 0 and queue else "-"
        lines = [
            f"pages={stats.pages} queue={queue} requests={stats.requests} errors={stats.failed} "
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
            while True:
                await anyio.sleep(self.every)
                print("progress", (await self.lines())[0], file=self.stream, flush=True)
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        console = Console(file=self.stream)
        title = Text(self.title, style="bold")
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while True:
                live.update(Text("\n").join([title, *(Text(line) for line in await self.lines())]))
                await anyio.sleep(0.25)
