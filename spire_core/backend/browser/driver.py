"""``AsyncDriver``: the browser tab a request's page was loaded in, driven from async code."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from parsel import Selector

from spire_core import errors
from spire_core.backend.browser.chromium import Chromium
from spire_core.backend.browser.pool import DriverPool
from spire_core.backend.browser.waits import PageWait, WaitFor, settle
from spire_core.outcome import seconds

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["AsyncDriver"]

T = TypeVar("T")


def _never_quiet() -> float:
    """An optional wait in a handler never gives up early: the network is not watched there."""
    return 0.0


class AsyncDriver:
    """The browser tab a request's page was loaded in, driven from async code.

        @router.handler("search")
        async def search(driver: Driver) -> None:
            await driver.click("button.more")
            page = await driver.selector()

    Each call runs in a worker thread; calls on one driver run one at a time. It is usable until the
    handler finishes, when the driver goes back to the pool.
    """

    def __init__(self, pool: DriverPool, browser: Chromium, *, wait_timeout: float) -> None:
        self._pool = pool
        self._browser = browser
        self._wait_timeout = wait_timeout
        self.lock = anyio.Lock()
        self.closed = False

    async def run(self, fn: Callable[[WebDriver], T]) -> T:
        """Run ``fn(webdriver)`` in a worker thread and return its result.

        Selenium's exceptions come out as spire errors; the function's own exceptions pass unchanged.
        """
        if self.closed:
            raise errors.ConfigError("this Driver went back to the pool when its handler finished")
        browser = self._browser
        async with self.lock:
            return await self._pool.run(browser, lambda: fn(browser.driver), None, user=True)

    def _limit(self, within: float | timedelta | None) -> float:
        limit = seconds(within)
        return limit if limit is not None else self._wait_timeout

    async def click(self, css: str, *, within: float | timedelta | None = None) -> None:
        """PageWait until an element matching ``css`` is clickable (up to ``wait_timeout``), then click it."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.wait import WebDriverWait

        limit = self._limit(within)

        def click(driver: WebDriver) -> None:
            clickable = expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, css))
            try:
                element = WebDriverWait(driver, limit, poll_frequency=0.05).until(clickable)
            except TimeoutException:
                raise errors.FetchTimeout(
                    f"waited {limit:g} s for a clickable {css!r}", url=driver.current_url
                ) from None
            element.click()

        await self.run(click)

    async def wait_for(self, condition: PageWait | WaitFor, *, within: float | timedelta | None = None) -> None:
        """PageWait until a ``PageWait`` holds, a CSS selector matches, or ``condition(webdriver)`` is truthy.

        ``FetchTimeout`` when a required wait runs out. ``PageWait.quiet`` belongs to the backend's
        waits: the network is watched only while the page loads.
        """
        wait = PageWait.of(condition, timeout=self._limit(within))
        if wait.idle is not None:
            raise errors.ConfigError(
                "network quiet is watched only while a page loads: give PageWait.quiet to the backend's waits"
            )
        await self.run(lambda driver: settle(driver, wait, driver.current_url, _never_quiet))

    async def execute(self, script: str, *args: Any) -> Any:
        """Run JavaScript in the page (``return`` a value to get it back)."""
        return await self.run(lambda driver: driver.execute_script(script, *args))

    async def html(self) -> str:
        """The DOM as it is now, serialised."""
        return await self.run(lambda driver: driver.page_source)

    async def selector(self) -> Selector:
        """The DOM as it is now, parsed into a parsel ``Selector``."""
        source, url = await self.run(lambda driver: (driver.page_source, driver.current_url))
        return Selector(text=source, base_url=url, type="html")

    async def url(self) -> str:
        """The tab's URL now (a click or a script may have navigated)."""
        return await self.run(lambda driver: driver.current_url)

    async def screenshot(self, *, full_page: bool = False) -> bytes:
        """The tab as a PNG: the viewport, or with ``full_page`` the whole page (DevTools' capture)."""

        def capture(driver: WebDriver) -> bytes:
            shot = driver.execute_cdp_cmd(
                "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": full_page}
            )
            return base64.b64decode(shot["data"])

        return await self.run(capture)
