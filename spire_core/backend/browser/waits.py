"""``PageWait``: what a page must show before it is read, for how long, and whether its absence is an error.

    PageWait.css("#results li")                  # a selector matches
    PageWait.css(".reviews", optional=True)      # ... or the page settled without it: not an error
    PageWait.ready()                             # document.readyState is "complete"
    PageWait.quiet(0.5)                          # no request started or ended for 0.5 s
    PageWait.until(lambda webdriver: webdriver.title != "loading")

A ``BrowserBackend`` applies them per tag (``waits={"listing": PageWait.css(...)}``), with a default for
every other page (``wait=``) and a per-seed choice by name (``Seed(user_data={"browser.wait": ...})``).
An optional wait does not sit out its timeout on a page that lacks its selector: once the document is
complete and the network has been quiet for ``settle`` seconds, the page is as done as it gets.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from spire_core import errors
from spire_core.outcome import seconds

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["POLL", "PageWait", "WaitFor", "settle", "waits_of"]

#: A CSS selector to wait for, or a function of the driver that returns something truthy when ready.
WaitFor = str | Callable[["WebDriver"], object]
#: How often a wait looks at the page again, in seconds.
POLL = 0.05


def _css(selector: str) -> str:
    from cssselect import GenericTranslator, SelectorError

    try:
        GenericTranslator().css_to_xpath(selector)
    except SelectorError as exc:
        raise errors.ConfigError(f"not a CSS selector: {selector!r} ({exc})") from None
    return selector


def _duration(value: float | timedelta, what: str) -> float:
    duration = seconds(value) or 0.0
    if duration < 0:
        raise errors.ConfigError(f"{what} must not be negative, not {duration:g} s")
    return duration


@dataclasses.dataclass(frozen=True, slots=True)
class PageWait:
    """One condition a loaded page is waited on for, up to ``timeout`` seconds. Build it with a constructor."""

    selector: str | None = None
    condition: Callable[[WebDriver], object] | None = None
    document_ready: bool = False
    idle: float | None = None
    timeout: float = 10.0
    optional: bool = False
    settle: float = 0.3

    @classmethod
    def css(
        cls,
        selector: str,
        *,
        timeout: float | timedelta = 10.0,
        optional: bool = False,
        settle: float | timedelta = 0.3,
    ) -> PageWait:
        """Until ``selector`` matches an element; with ``optional``, a page that settles without one is fine."""
        return cls(
            selector=_css(selector),
            timeout=_duration(timeout, "timeout"),
            optional=optional,
            settle=_duration(settle, "settle"),
        )

    @classmethod
    def ready(cls, *, timeout: float | timedelta = 10.0) -> PageWait:
        """Until the document is complete (``document.readyState``): its scripts, images and frames loaded."""
        return cls(document_ready=True, timeout=_duration(timeout, "timeout"))

    @classmethod
    def quiet(cls, idle: float | timedelta = 0.5, *, timeout: float | timedelta = 10.0) -> PageWait:
        """Until no request has started or ended for ``idle`` seconds, and none is in flight."""
        return cls(idle=_duration(idle, "idle"), timeout=_duration(timeout, "timeout"))

    @classmethod
    def until(
        cls, condition: Callable[[WebDriver], object], *, timeout: float | timedelta = 10.0, optional: bool = False
    ) -> PageWait:
        """Until ``condition(webdriver)`` returns something truthy (it runs in the driver's thread)."""
        return cls(condition=condition, timeout=_duration(timeout, "timeout"), optional=optional)

    @classmethod
    def of(cls, given: PageWait | WaitFor, *, timeout: float | timedelta = 10.0) -> PageWait:
        """A ``PageWait`` from what a user naturally writes: a ``PageWait``, a CSS selector or a function."""
        if isinstance(given, PageWait):
            return given
        if isinstance(given, str):
            return cls.css(given, timeout=timeout)
        return cls.until(given, timeout=timeout)

    def describe(self) -> str:
        if self.selector is not None:
            return repr(self.selector)
        if self.condition is not None:
            return getattr(self.condition, "__name__", "a condition")
        if self.document_ready:
            return "the document to be ready"
        return f"{self.idle:g} s of network quiet"


def waits_of(given: PageWait | Sequence[PageWait] | None) -> tuple[PageWait, ...]:
    """The waits to run in order, from one ``PageWait``, several, or none."""
    if given is None:
        return ()
    if isinstance(given, PageWait):
        return (given,)
    waits = tuple(given)
    for wait in waits:
        if not isinstance(wait, PageWait):
            raise errors.ConfigError(f"a wait must be a PageWait (PageWait.css, PageWait.ready, ...), not {wait!r}")
    return waits


def _ready(driver: WebDriver) -> bool:
    state: object = driver.execute_script("return document.readyState")
    return state == "complete"


def _met(driver: WebDriver, wait: PageWait, quiet_for: Callable[[], float]) -> bool:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    if wait.selector is not None:
        return bool(driver.find_elements(By.CSS_SELECTOR, wait.selector))
    if wait.condition is not None:
        try:
            return bool(wait.condition(driver))
        except (NoSuchElementException, StaleElementReferenceException):
            return False
    if wait.document_ready:
        return _ready(driver)
    return quiet_for() >= (wait.idle or 0.0)


def settle(
    driver: WebDriver,
    wait: PageWait,
    url: str,
    quiet_for: Callable[[], float],
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Blocking: wait for ``wait`` on the page; ``True`` once met, ``False`` for an optional one given up on.

    ``quiet_for()`` says how long the page's network has been quiet. A required wait that runs out
    raises ``FetchTimeout`` (transient; the driver stays sound).
    """
    deadline = clock() + wait.timeout
    while True:
        if _met(driver, wait, quiet_for):
            return True
        if wait.optional and quiet_for() >= wait.settle and _ready(driver):
            return False  # the page is done loading and still lacks it: it will not come
        if clock() >= deadline:
            if wait.optional:
                return False
            raise errors.FetchTimeout(f"waited {wait.timeout:g} s for {wait.describe()}", url=url)
        time.sleep(POLL)
