"""``BrowserBackend``: pages loaded in headless Chromium through Selenium, from a pool of drivers.

    crawler = Crawler(router, backend=BrowserBackend(drivers=4, wait_for="#results li"))

Each request borrows one WebDriver from the pool for the life of its session, so a handler that asks
for ``Driver`` drives the very tab its page was loaded in. Selenium blocks, so every call into it runs
in a worker thread (``anyio.to_thread.run_sync`` under a ``CapacityLimiter``), never on the event loop.

Selenium is the optional ``[browser]`` extra: this module imports it only when a driver starts, so
``import spire`` works without it, and ``BrowserBackend()`` says what to install when it is missing.

The browser follows redirects itself; the response carries the final URL, and the URLs that led there
in ``redirects``. Status and headers come from Chrome's performance log (the DevTools
``Network.responseReceived`` event of the main document), because WebDriver reports neither. An HTML
page's body is the DOM as rendered (``page_source``) in UTF-8; any other document (JSON, plain text,
XML, an image) keeps the bytes the server sent.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import importlib.util
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
from parsel import Selector

from spire_core import errors
from spire_core.backend.base import request_exits
from spire_core.backend.http import DEFAULT_MAX_BODY
from spire_core.outcome import seconds
from spire_core.response import Headers, Response
from spire_core.seed import Seed

if TYPE_CHECKING:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["CHROMIUM_FLAGS", "AsyncDriver", "BrowserBackend", "WaitFor", "translate"]

T = TypeVar("T")

#: A CSS selector to wait for, or a function of the driver that returns something truthy when ready.
WaitFor = str | Callable[["WebDriver"], object]

#: Flags every driver starts with. Without the background-networking ones, Chromium's own
#: connections (updates, sync, field trials) leave a machine that only reaches its targets.
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

_NET_ERROR = re.compile(r"net::(ERR_[A-Z0-9_]+)")
_NET_ERRORS: tuple[tuple[tuple[str, ...], type[errors.SpireError]], ...] = (
    (("ERR_TIMED_OUT", "ERR_CONNECTION_TIMED_OUT"), errors.TimeoutError_),
    (("ERR_CERT_", "ERR_SSL_", "ERR_BAD_SSL_"), errors.TlsError),
    (("ERR_PROXY_", "ERR_TUNNEL_"), errors.ProxyError),
    (("ERR_TOO_MANY_REDIRECTS",), errors.TooManyRedirects),
    (("ERR_CONTENT_DECODING_FAILED",), errors.DecodeError),
    (("ERR_INVALID_URL", "ERR_UNSAFE_PORT", "ERR_DISALLOWED_URL_SCHEME", "ERR_UNKNOWN_URL_SCHEME"), errors.InvalidUrl),
    (
        (
            "ERR_CONNECTION_",
            "ERR_NAME_",
            "ERR_ADDRESS_",
            "ERR_EMPTY_RESPONSE",
            "ERR_NETWORK_",
            "ERR_INTERNET_DISCONNECTED",
            "ERR_SOCKET_",
            "ERR_HTTP2_",
            "ERR_INVALID_HTTP_RESPONSE",
            "ERR_CONTENT_LENGTH_MISMATCH",
            "ERR_INCOMPLETE_CHUNKED_ENCODING",
        ),
        errors.ConnectError,
    ),
)
#: What WebDriver says when the browser or its tab is gone.
_LOST = (
    "invalid session id",
    "chrome not reachable",
    "disconnected",
    "tab crashed",
    "session deleted",
    "no such window",
    "target window already closed",
)
_HTML_TYPES = frozenset({"", "text/html", "application/xhtml+xml"})
#: Headers that describe the bytes on the wire, not the body a browser response carries.
_WIRE_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})


def _message(exc: BaseException) -> str:
    """The first line of an exception's message: Selenium appends a stack trace of the driver."""
    text = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    return str(text).strip().splitlines()[0]


def _net_error(code: str) -> type[errors.SpireError] | None:
    for prefixes, kind in _NET_ERRORS:
        if code.startswith(prefixes):
            return kind
    return None


def translate(exc: BaseException, url: str | None) -> errors.SpireError:
    """The spire error for a Selenium (or driver connection) exception: the one place they are mapped.

    Chrome's network errors (``net::ERR_...``) map like their httpx counterparts; a page that does
    not finish loading is a timeout; a browser that crashed or went away is a connect error.
    """
    from selenium.common.exceptions import NoSuchDriverException, SessionNotCreatedException, TimeoutException

    if isinstance(exc, errors.SpireError):
        return exc
    message = _message(exc)
    net = _NET_ERROR.search(str(exc))
    if net is not None:
        kind = _net_error(net.group(1)) or errors.FetchError
        return kind(f"Chromium failed to load the page: {net.group(0)}", url=url)
    if isinstance(exc, TimeoutException | TimeoutError):
        return errors.TimeoutError_(f"Chromium timed out: {message}", url=url)
    if isinstance(exc, SessionNotCreatedException | NoSuchDriverException):
        return errors.ConfigError(f"Chromium did not start: {message}", url=url)
    if _lost(exc):
        return errors.ConnectError(f"lost the browser: {message}", url=url)
    return errors.FetchError(message, url=url)


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the browser or its tab is gone (crashed, quit, unreachable)."""
    from urllib3.exceptions import HTTPError as DriverConnectionError

    return isinstance(exc, DriverConnectionError | OSError) or any(lost in _message(exc) for lost in _LOST)


def _breaks_driver(exc: BaseException) -> bool:
    """Whether a driver whose page load raised ``exc`` should be discarded rather than reused.

    Spire's own errors (a failed wait, a network error reported by the page) leave the driver sound;
    anything else, a page-load timeout included, may have left its renderer hung.
    """
    return not isinstance(exc, errors.SpireError) and _NET_ERROR.search(str(exc)) is None


def _find(given: str | None, names: Iterable[str], what: str) -> str:
    if given is not None:
        found = shutil.which(given)
        if found is None:
            raise errors.ConfigError(f"{what} not found at {given!r}")
        return found
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    raise errors.ConfigError(f"{what} not found on PATH; install it (Debian: apt install chromium chromium-driver)")


class _Browser:
    """One Chromium under one chromedriver, with the temporary profile it owns."""

    __slots__ = ("broken", "driver", "extra_headers", "main_frame", "profile")

    def __init__(self, driver: WebDriver, profile: str, main_frame: str) -> None:
        self.driver = driver
        self.profile = profile
        self.main_frame = main_frame
        self.extra_headers: dict[str, str] = {}
        self.broken = False

    def quit(self) -> None:
        """Blocking: end the browser and delete its profile; never raises."""
        with contextlib.suppress(Exception):  # a browser already gone still leaves its profile
            self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)


class _LoadFailed(Exception):
    """The main document failed to load; the message holds Chrome's ``net::ERR_...`` code."""


@dataclasses.dataclass
class _Document:
    """One main-frame document request, read from the performance log."""

    request_id: str
    urls: list[str]
    response: dict[str, Any] | None = None
    failure: str | None = None


class _Navigation:
    """The main-frame documents a navigation requested, in order, from performance-log entries."""

    def __init__(self, frame: str) -> None:
        self.frame = frame
        self.documents: dict[str, _Document] = {}

    def read(self, entries: Iterable[Mapping[str, Any]]) -> None:
        for entry in entries:
            raw = entry.get("message", "")
            if '"Document"' not in raw:  # cheap: most entries are subresources
                continue
            message = json.loads(raw)["message"]
            method, params = message.get("method"), message.get("params", {})
            request_id = params.get("requestId")
            document = self.documents.get(request_id)
            if method == "Network.requestWillBeSent":
                if params.get("type") != "Document" or params.get("frameId") != self.frame:
                    continue
                url = params["request"]["url"]
                if document is None:
                    self.documents[request_id] = _Document(request_id, [url])
                else:
                    document.urls.append(url)  # a redirect: the same request, its next URL
            elif document is None:
                continue
            elif method == "Network.responseReceived":
                document.response = params["response"]
            elif method == "Network.loadingFailed":
                document.failure = params.get("errorText") or "net::ERR_FAILED"

    def final(self, url: str) -> tuple[_Document, tuple[str, ...]]:
        """The document the tab ended on, and every URL that led to it, first first."""
        documents = list(self.documents.values())
        if not documents:
            raise errors.FetchError("Chromium loaded no document for the page", url=url)
        last = documents[-1]
        if last.failure is not None:
            raise _LoadFailed(last.failure)
        hops = [hop for document in documents[:-1] for hop in document.urls] + last.urls[:-1]
        return last, tuple(hops)


def _performance_log(driver: WebDriver) -> list[dict[str, Any]]:
    """Blocking: the performance-log entries since the last read (reading empties the log)."""
    entries: list[dict[str, Any]] = driver.get_log("performance")  # type: ignore[no-untyped-call]
    return entries


def _headers(raw: Mapping[str, str]) -> list[tuple[str, str]]:
    """DevTools joins repeated headers with newlines; split them back into separate values."""
    return [
        (name, value)
        for name, joined in raw.items()
        if name.lower() not in _WIRE_HEADERS
        for value in str(joined).split("\n")
    ]


def _renders(response: Mapping[str, Any] | None) -> bool:
    """Whether a document is a page worth waiting on: HTML, and not an error status."""
    if response is None:
        return False
    return int(response.get("status", 0)) < 400 and str(response.get("mimeType", "")).lower() in _HTML_TYPES


def _wait(driver: WebDriver, condition: WaitFor, timeout: float, url: str, what: str | None = None) -> Any:
    """Blocking: wait until ``condition`` holds; a ``TimeoutError_`` (the driver stays sound) when not."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    check = (
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, condition))
        if isinstance(condition, str)
        else condition
    )
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(check)
    except TimeoutException:
        if what is None:
            what = repr(condition) if isinstance(condition, str) else getattr(condition, "__name__", "a condition")
        raise errors.TimeoutError_(f"waited {timeout:g} s for {what}", url=url) from None


class BrowserBackend:
    """Loads pages in a pool of headless Chromium drivers, each serving one request at a time.

        BrowserBackend(drivers=4, page_load_timeout=20, wait_for="main article")

    ``drivers`` browsers at most, started on first need, each with a fresh temporary profile;
    cookies and storage persist within one driver across the pages it loads. ``wait_for`` (a CSS
    selector or a function of the WebDriver) is awaited after every load, for up to ``wait_timeout``.
    ``options`` are Selenium ``ChromeOptions`` to start from (extra arguments, preferences,
    a proxy); spire adds its flags to a copy. ``chromium`` and ``chromedriver`` override the
    binaries found on PATH; Selenium Manager never runs, so nothing is downloaded.
    Only GET can be loaded; ``seed.headers`` are sent with the page and its subresources.
    """

    def __init__(
        self,
        *,
        drivers: int = 2,
        headless: bool = True,
        page_load_timeout: float | timedelta = 30.0,
        wait_for: WaitFor | None = None,
        wait_timeout: float | timedelta = 10.0,
        chromium: str | None = None,
        chromedriver: str | None = None,
        options: Options | None = None,
        user_agent: str | None = None,
        max_body_size: int = DEFAULT_MAX_BODY,
    ) -> None:
        if drivers < 1:
            raise errors.ConfigError(f"drivers must be at least 1, not {drivers}")
        if importlib.util.find_spec("selenium") is None:
            raise errors.ConfigError("BrowserBackend needs Selenium: pip install 'spire[browser]'")
        self.drivers = drivers
        self.headless = headless
        self.page_load_timeout = seconds(page_load_timeout) or 0.0
        self.wait_for = wait_for
        self.wait_timeout = seconds(wait_timeout) or 0.0
        self.chromium = _find(chromium, ("chromium", "chromium-browser", "google-chrome"), "Chromium")
        self.chromedriver = _find(chromedriver, ("chromedriver",), "chromedriver")
        self.options = options
        self.user_agent = user_agent
        self.max_body_size = max_body_size
        self._idle: list[_Browser] = []
        self._live: set[_Browser] = set()
        self._pages: dict[int, tuple[Response, AsyncDriver]] = {}
        # Synchronisation belongs to one event loop; a backend reused under another loop makes new ones.
        self._loop: anyio.lowlevel.EventLoopToken | None = None
        self._slots: anyio.Semaphore
        self._limiter: anyio.CapacityLimiter

    # -- the pool ---------------------------------------------------------------------------------

    def _bind_loop(self) -> None:
        token = anyio.lowlevel.current_token()
        if token != self._loop:
            self._loop = token
            self._slots = anyio.Semaphore(self.drivers)
            self._limiter = anyio.CapacityLimiter(self.drivers)

    def _chrome_options(self, profile: str) -> Options:
        from selenium.webdriver.chrome.options import Options

        options = copy.deepcopy(self.options) if self.options is not None else Options()
        flags = [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        if self.headless:
            flags.insert(0, "--headless=new")
        if self.user_agent is not None:
            flags.append(f"--user-agent={self.user_agent}")
        present = {argument.split("=", 1)[0] for argument in options.arguments}
        for flag in flags:
            if flag.split("=", 1)[0] not in present:
                options.add_argument(flag)
        if not options.binary_location:
            options.binary_location = self.chromium
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        options.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
        return options

    def _start(self) -> _Browser:
        """Blocking: start one Chromium with its own temporary profile."""
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.chrome.webdriver import WebDriver

        profile = tempfile.mkdtemp(prefix="spire-chromium-")
        try:
            driver = WebDriver(
                options=self._chrome_options(profile), service=Service(executable_path=self.chromedriver)
            )
        except BaseException:
            shutil.rmtree(profile, ignore_errors=True)
            raise
        try:
            driver.set_page_load_timeout(self.page_load_timeout)
            # chromedriver names a window by its DevTools target id, which is also its main frame's id.
            frame = driver.current_window_handle
            # A browser asks every site for its icon; a crawler has no use for it.
            driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/favicon.ico"]})
        except BaseException:
            _Browser(driver, profile, "").quit()
            raise
        return _Browser(driver, profile, str(frame))

    async def _acquire(self, url: str) -> _Browser:
        await self._slots.acquire()
        try:
            if self._idle:
                return self._idle.pop()
            try:
                browser = await anyio.to_thread.run_sync(self._start, limiter=self._limiter)
            except Exception as exc:
                raise translate(exc, url) from exc
        except BaseException:
            self._slots.release()
            raise
        self._live.add(browser)
        return browser

    async def _give_back(self, browser: _Browser) -> None:
        try:
            if browser.broken or browser not in self._live:
                self._live.discard(browser)
                await anyio.to_thread.run_sync(browser.quit, limiter=self._limiter)
            else:
                self._idle.append(browser)
        finally:
            self._slots.release()

    async def _run(self, browser: _Browser, fn: Callable[[], T], url: str | None, *, user: bool = False) -> T:
        """Run ``fn`` in a worker thread, translating Selenium's exceptions; discard a driver they broke.

        With ``user`` (a handler's own Selenium code), an exception that is not Selenium's passes
        unchanged, and only a lost browser discards the driver: a missing element leaves it sound.
        """
        from selenium.common.exceptions import WebDriverException
        from urllib3.exceptions import HTTPError as DriverConnectionError

        try:
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter)
        except errors.SpireError:
            raise
        except Exception as exc:
            if user and not isinstance(exc, WebDriverException | DriverConnectionError | OSError):
                raise
            if _lost(exc) or (not user and _breaks_driver(exc)):
                browser.broken = True
            raise translate(exc, url) from exc

    # -- fetching -------------------------------------------------------------------------------

    async def fetch(self, seed: Seed) -> Response:
        """Load ``seed`` (GET only) in a pooled driver, wait for ``wait_for`` if set, return the page.

        Inside a request (``request_exits()``) the driver stays lent to it, so the handler can drive
        the tab (``driver_for``), and goes back to the pool when the request ends; outside one it
        goes back at once.
        """
        if seed.method.upper() != "GET":
            raise errors.ConfigError(
                f"BrowserBackend loads pages with GET only, not {seed.method}: use HttpBackend for it", url=seed.url
            )
        self._bind_loop()
        browser = await self._acquire(seed.url)
        driver = AsyncDriver(self, browser)
        try:
            async with driver._lock:
                response = await self._run(browser, lambda: self._load(browser, seed), seed.url)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._give_back(browser)
            raise
        exits = request_exits()
        if exits is None:
            await self._give_back(browser)
            return response
        key = id(response)
        self._pages[key] = (response, driver)

        async def give_back() -> None:
            with anyio.CancelScope(shield=True):
                driver._closed = True
                self._pages.pop(key, None)
                await self._give_back(browser)

        exits.push_async_callback(give_back)
        return response

    def driver_for(self, response: Response) -> AsyncDriver:
        """The driver whose tab holds ``response``'s page, while the session that loaded it is open."""
        found = self._pages.get(id(response))
        if found is None or found[0] is not response:
            raise errors.ConfigError(
                "this page's browser session has closed, so its driver went back to the pool: a Driver "
                "is only available while the session that loaded the page is open (in a handler)",
                url=response.url,
            )
        return found[1]

    def _load(self, browser: _Browser, seed: Seed) -> Response:
        """Blocking: load ``seed`` in ``browser`` and build its response."""
        driver = browser.driver
        started = time.perf_counter()
        _performance_log(driver)  # drop what earlier pages and handlers left in the log
        headers = dict(seed.headers) if seed.headers else {}
        if headers != browser.extra_headers:
            driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": headers})
            browser.extra_headers = headers
        if "#" in seed.url and driver.current_url.split("#", 1)[0] == seed.url.split("#", 1)[0]:
            driver.get("about:blank")  # a change of fragment alone would not load the document again
        driver.get(seed.url)
        navigation = _Navigation(browser.main_frame)
        navigation.read(_performance_log(driver))
        loaded, _ = navigation.final(seed.url)  # a network error fails now, not after a wait
        if self.wait_for is not None and _renders(loaded.response):
            _wait(driver, self.wait_for, self.wait_timeout, seed.url)
            navigation.read(_performance_log(driver))
        document, hops = navigation.final(seed.url)
        response = document.response
        if response is None:
            raise errors.FetchError("Chromium received no response for the page", url=seed.url)
        url = driver.current_url
        mime = str(response.get("mimeType", "")).lower()
        raw_headers = _headers(response.get("headers", {}))
        body, content_type = None, None
        if mime not in _HTML_TYPES:
            body, content_type = self._original_body(driver, document)
        if body is None:
            body, content_type = driver.page_source.encode("utf-8"), "text/html; charset=utf-8"
        if content_type is not None:
            raw_headers = [(name, value) for name, value in raw_headers if name.lower() != "content-type"]
            raw_headers.append(("Content-Type", content_type))
        if len(body) > self.max_body_size:
            raise errors.BodyLimitError(f"the page passed the {self.max_body_size}-byte cap", url=url)
        return Response(
            url=url,
            status=int(response.get("status", 0)),
            headers=Headers(raw_headers),
            body=body,
            seed=seed,
            elapsed=time.perf_counter() - started,
            redirects=hops,
        )

    @staticmethod
    def _original_body(driver: WebDriver, document: _Document) -> tuple[bytes | None, str | None]:
        """A non-HTML document's own bytes, through DevTools; ``None`` when Chrome no longer has them."""
        from selenium.common.exceptions import WebDriverException

        try:
            found = driver.execute_cdp_cmd("Network.getResponseBody", {"requestId": document.request_id})
        except WebDriverException:
            return None, None
        if found.get("base64Encoded"):
            return base64.b64decode(found.get("body", "")), None
        # DevTools hands text over decoded, so it travels on as UTF-8.
        mime = str((document.response or {}).get("mimeType") or "text/plain")
        return str(found.get("body", "")).encode("utf-8"), f"{mime}; charset=utf-8"

    async def aclose(self) -> None:
        """Quit every idle driver and delete its profile; a driver still lent out is quit when it returns."""
        self._bind_loop()
        idle, self._idle = self._idle, []
        for browser in idle:
            self._live.discard(browser)
        self._live.clear()  # those still lent out are no longer live: _give_back quits them
        if idle:
            with anyio.CancelScope(shield=True):
                async with anyio.create_task_group() as tg:
                    for browser in idle:
                        tg.start_soon(self._quit, browser)

    async def _quit(self, browser: _Browser) -> None:
        await anyio.to_thread.run_sync(browser.quit, limiter=self._limiter)


class AsyncDriver:
    """The browser tab a request's page was loaded in, driven from async code.

        @router.handler("search")
        async def search(driver: Driver) -> None:
            await driver.click("button.more")
            page = await driver.selector()

    Each call runs in a worker thread; calls on one driver run one at a time. It is usable until the
    handler finishes, when the driver goes back to the pool.
    """

    def __init__(self, backend: BrowserBackend, browser: _Browser) -> None:
        self._backend = backend
        self._browser = browser
        self._lock = anyio.Lock()
        self._closed = False

    async def run(self, fn: Callable[[WebDriver], T]) -> T:
        """Run ``fn(webdriver)`` in a worker thread and return its result.

        Selenium's exceptions come out as spire errors; the function's own exceptions pass unchanged.
        """
        if self._closed:
            raise errors.ConfigError("this Driver went back to the pool when its handler finished")
        browser = self._browser
        async with self._lock:
            return await self._backend._run(browser, lambda: fn(browser.driver), None, user=True)

    async def click(self, css: str, *, within: float | timedelta | None = None) -> None:
        """Wait until an element matching ``css`` is clickable (up to ``wait_timeout``), then click it."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions

        limit = seconds(within) if within is not None else self._backend.wait_timeout

        def click(driver: WebDriver) -> None:
            clickable = expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, css))
            _wait(driver, clickable, limit or 0.0, driver.current_url, f"a clickable {css!r}").click()

        await self.run(click)

    async def wait_for(self, condition: WaitFor, *, within: float | timedelta | None = None) -> None:
        """Wait until a CSS selector matches, or ``condition(webdriver)`` is truthy; ``TimeoutError_`` if not."""
        limit = seconds(within) if within is not None else self._backend.wait_timeout
        await self.run(lambda driver: _wait(driver, condition, limit or 0.0, driver.current_url))

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
