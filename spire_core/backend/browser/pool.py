"""``DriverPool``: a bounded pool of browsers that stays healthy over a long crawl.

At most ``size`` browsers run, started on first need. Each serves one request at a time and goes
back to the pool after it; a browser is quit instead (and a fresh one starts on the next need) when it
broke (crashed, hung, lost), when it has served ``recycle_after`` pages, or when its process tree's
resident memory passed ``max_rss`` bytes. A browser keeps the proxy it started with: a request
through another proxy takes a browser on that one, and when all run, an idle one on another proxy
is quit to make room (counted as recycled for ``proxy``). Selenium blocks, so every call into it runs in a worker
thread (``anyio.to_thread.run_sync`` under a ``CapacityLimiter``), never on the event loop.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.lowlevel

from spire_core import errors
from spire_core.backend.browser.chromium import Chromium, Launch
from spire_core.backend.browser.faults import breaks_driver, lost, translate
from spire_core.session.proxies import ProxyAddress

__all__ = ["DriverPool", "PoolStats"]

T = TypeVar("T")


@dataclasses.dataclass
class PoolStats:
    """What the pool did: browsers started, quit by reason, and the most memory one was seen to use."""

    started: int = 0
    recycled: Counter[str] = dataclasses.field(default_factory=Counter)
    peak_rss: int = 0


class DriverPool:
    """Lends browsers one request at a time; ``recycle_after`` pages or ``max_rss`` bytes retire one."""

    def __init__(self, launch: Launch, *, size: int, recycle_after: int | None, max_rss: int | None) -> None:
        if size < 1:
            raise errors.ConfigError(f"drivers must be at least 1, not {size}")
        if recycle_after is not None and recycle_after < 1:
            raise errors.ConfigError(f"recycle_after must be at least 1 page, not {recycle_after}")
        if max_rss is not None and max_rss < 1:
            raise errors.ConfigError(f"max_rss must be a positive number of bytes, not {max_rss}")
        self.launch = launch
        self.size = size
        self.recycle_after = recycle_after
        self.max_rss = max_rss
        self.stats = PoolStats()
        self._idle: list[Chromium] = []
        self._live: set[Chromium] = set()
        # Synchronisation belongs to one event loop; a pool reused under another loop makes new ones.
        self._loop: anyio.lowlevel.EventLoopToken | None = None
        self._slots: anyio.Semaphore
        self._limiter: anyio.CapacityLimiter

    def _bind_loop(self) -> None:
        token = anyio.lowlevel.current_token()
        if token != self._loop:
            self._loop = token
            self._slots = anyio.Semaphore(self.size)
            self._limiter = anyio.CapacityLimiter(self.size)

    async def acquire(self, url: str, proxy: ProxyAddress | None = None) -> Chromium:
        """A browser for one request through ``proxy``: an idle one on that proxy, or a new one while
        fewer than ``size`` run; when all run, an idle one on another proxy is quit to make room."""
        self._bind_loop()
        await self._slots.acquire()
        try:
            for index in range(len(self._idle) - 1, -1, -1):
                if self._idle[index].proxy == proxy:
                    return self._idle.pop(index)
            if self._idle and len(self._live) >= self.size:
                other = self._idle.pop(0)
                self._live.discard(other)
                self.stats.recycled["proxy"] += 1
                await anyio.to_thread.run_sync(other.quit, limiter=self._limiter)
            try:
                browser = await anyio.to_thread.run_sync(Chromium.start, self.launch, proxy, limiter=self._limiter)
            except Exception as exc:
                raise translate(exc, url) from exc
        except BaseException:
            self._slots.release()
            raise
        self.stats.started += 1
        self._live.add(browser)
        return browser

    async def give_back(self, browser: Chromium) -> None:
        """Return ``browser`` after its request: to the idle list, or quit when it is done for. Its tab
        moves nowhere from now on (a timer of the page it holds fires into nothing)."""
        browser.idle()
        self._bind_loop()
        try:
            retire = self._retirement(browser)
            if retire is None and self.max_rss is not None:
                retire = await anyio.to_thread.run_sync(self._over_memory, browser, limiter=self._limiter)
            if retire is None:
                self._idle.append(browser)
                return
            self.stats.recycled[retire] += 1
            self._live.discard(browser)
            await anyio.to_thread.run_sync(browser.quit, limiter=self._limiter)
        finally:
            self._slots.release()

    def _retirement(self, browser: Chromium) -> str | None:
        """Why ``browser`` should be quit now (``broken``, ``closed``, ``pages``), or None."""
        if browser.broken:
            return "broken"
        if browser not in self._live:
            return "closed"
        if self.recycle_after is not None and browser.pages >= self.recycle_after:
            return "pages"
        return None

    def _over_memory(self, browser: Chromium) -> str | None:
        """Blocking: ``memory`` when ``browser``'s process tree holds more than ``max_rss`` bytes."""
        rss = browser.rss()
        if rss is None or self.max_rss is None:
            return None
        self.stats.peak_rss = max(self.stats.peak_rss, rss)
        return "memory" if rss > self.max_rss else None

    async def run(self, browser: Chromium, fn: Callable[[], T], url: str | None, *, user: bool = False) -> T:
        """Run ``fn`` in a worker thread, translating Selenium's exceptions; mark a browser they broke.

        With ``user`` (a handler's own Selenium code), an exception that is not Selenium's passes
        unchanged, and only a lost browser breaks it: a missing element leaves it sound.
        """
        from selenium.common.exceptions import WebDriverException
        from urllib3.exceptions import HTTPError as DriverConnectionError

        self._bind_loop()
        try:
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter)
        except errors.SpireError:
            raise
        except Exception as exc:
            if user and not isinstance(exc, WebDriverException | DriverConnectionError | OSError):
                raise
            if lost(exc) or (not user and breaks_driver(exc)):
                browser.broken = True
            raise translate(exc, url) from exc

    async def rss(self) -> int:
        """The bytes resident in every running browser's process tree, now (0 without ``/proc``)."""
        self._bind_loop()
        browsers = list(self._live)

        def total() -> int:
            return sum(browser.rss() or 0 for browser in browsers)

        return await anyio.to_thread.run_sync(total)  # not behind the drivers' limiter: they may all be busy

    async def aclose(self) -> None:
        """Quit every idle browser; one still lent out is quit when it comes back."""
        self._bind_loop()
        idle, self._idle = self._idle, []
        self._live.clear()  # those still lent out are no longer live: give_back quits them
        if idle:
            with anyio.CancelScope(shield=True):
                async with anyio.create_task_group() as tg:
                    for browser in idle:
                        tg.start_soon(self._quit, browser)

    async def _quit(self, browser: Chromium) -> None:
        await anyio.to_thread.run_sync(browser.quit, limiter=self._limiter)
