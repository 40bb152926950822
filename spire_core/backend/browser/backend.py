"""``BrowserBackend``: pages loaded in headless Chromium through Selenium, from a healthy pool of drivers.

    crawler = Crawler(router, backend=BrowserBackend(drivers=4, waits={"listing": PageWait.css("#results li")}))

Each request borrows one browser from the pool for the life of its session, so a handler that asks
for ``Driver`` drives the very tab its page was loaded in. Selenium is the optional ``[browser]``
extra: it is imported only when a driver starts, so ``import spire`` works without it.

A redirect of the page is not followed by the browser: the load stops before the target is
requested (``Interceptor``) and the response is the 3xx the site sent, with an absolute
``Location``, so the crawl admits each hop like a link and sends it as a load of its own, as over
HTTP; a navigation of the page's own during the load (a refresh, a script, a form) is stopped too
and answered as a 303 to its target. After the load, while a handler holds the tab, each move of
its main frame to another URL (a script's timer, a handler's click, and the redirects they meet)
is sent only once the crawl admits it as a link of the page (``session.navigations``); a refused
one leaves the tab on its page. Status and headers come from Chrome's performance log (``navigation``), because
WebDriver reports neither. An HTML page's body is the DOM as rendered (``page_source``) in UTF-8;
any other document (JSON, plain text, XML, an image) keeps the bytes the server sent, and an error
status with an empty body keeps its empty body. A download (``Crawler.download``) goes over HTTP,
with the browser's identity and proxies.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import anyio

from spire_core import errors
from spire_core.backend.base import request_exits
from spire_core.backend.browser.blocking import Blocking
from spire_core.backend.browser.chromium import Chromium, Launch, find_binary
from spire_core.backend.browser.driver import AsyncDriver
from spire_core.backend.browser.navigation import (
    HTML_TYPES,
    Document,
    Navigation,
    Traffic,
    performance_log,
    response_headers,
    worth_waiting_on,
)
from spire_core.backend.browser.pool import DriverPool
from spire_core.backend.browser.waits import PageWait, settle, waits_of
from spire_core.backend.http import DEFAULT_MAX_BODY, HttpBackend
from spire_core.outcome import seconds
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from spire_core.session.navigations import Admit, judge
from spire_core.session.pacing import marker
from spire_core.session.proxies import ProxyAddress, ProxyPool
from spire_core.url import is_robots_txt

if TYPE_CHECKING:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["WAIT_KEY", "BrowserBackend"]

#: ``Seed.user_data`` key naming the waits for that one seed: a key of ``waits`` (a tag or any name
#: given there), or ``None`` for no wait at all.
WAIT_KEY = "browser.wait"


def _positive(value: float | timedelta, name: str) -> float:
    duration = seconds(value)
    if duration is None or not duration > 0:
        raise errors.ConfigError(f"{name} must be a positive duration, not {value!r}")
    return duration


def _host_names(given: Collection[str] | None) -> frozenset[str] | None:
    if given is None:
        return None
    if isinstance(given, str):
        raise errors.ConfigError(f"resolve_only is a collection of host names, not one string: {{{given!r}}}")
    names = frozenset(given)
    bad = sorted(name for name in names if not name or any(c in name for c in " ,/@"))
    if bad:
        raise errors.ConfigError(f"resolve_only holds bare host names (no scheme, path or comma), not {bad}")
    return names


def _unjudged(page: str, target: str) -> bool:
    """Outside a crawl's request path there is no admission to ask: a handler's tab goes where it is sent."""
    return True


def _redirect_response(seed: Seed, stopped: tuple[str, Document], elapsed: float) -> Response:
    """The redirect a page load stopped at, as the site sent it, for the crawl to admit its hop.

    Its ``Location`` is the absolute URL the browser would have gone to next. A navigation of the
    page's own (a meta refresh, a script's ``location=``, a form) is a 303 from the page it left, so
    the crawl admits it as it admits a redirect.
    """
    source, document = stopped
    redirect = document.redirect or {}
    given = document.redirect_headers if document.redirect_headers is not None else redirect.get("headers", {})
    headers = [(name, value) for name, value in response_headers(given) if name.lower() != "location"]
    headers.append(("Location", document.urls[-1]))
    return Response(
        url=source,
        status=int(redirect.get("status", 303 if document.redirect is None else 302)),
        headers=Headers(headers),
        body=b"",
        seed=seed,
        elapsed=elapsed,
    )


def _for_a_handler(seed: Seed, response: Response) -> bool:
    """Whether a handler may drive the tab that loaded ``response``: not a redirect's, nor robots.txt's.

    A robots.txt is read for the crawl, often in the middle of another seed's redirect chain: its
    tab held until that seed's handler ends would leave the chain's next hop no browser to load in.
    """
    return not response.is_redirect and not is_robots_txt(seed.url)


def _browser_proxy(address: ProxyAddress) -> ProxyAddress:
    """``address``, if Chromium can use it: it logs in to an HTTP(S) proxy only (never to SOCKS)."""
    if address.username is not None and address.scheme.startswith("socks"):
        raise errors.ConfigError(
            f"Chromium cannot log in to a SOCKS proxy ({address.redacted}): use an http:// proxy for a login"
        )
    return address


def _one_proxy(proxy: object, proxies: ProxyPool | None) -> ProxyAddress | None:
    """The fixed proxy ``proxy=`` names, checked (and ``proxies`` is a pool); a pool belongs in ``proxies=``."""
    if proxies is not None and not isinstance(proxies, ProxyPool):
        raise errors.ConfigError(f"proxies= takes a ProxyPool([...]) of proxy URLs, not {type(proxies).__name__}")
    if proxy is None:
        return None
    if isinstance(proxy, ProxyPool):
        raise errors.ConfigError("proxy= takes one proxy URL; give a pool as BrowserBackend(proxies=ProxyPool([...]))")
    if not isinstance(proxy, str):
        raise errors.ConfigError(f'proxy= takes one proxy URL, e.g. proxy="http://127.0.0.1:3128", not {proxy!r}')
    if proxies is not None:
        raise errors.ConfigError("give BrowserBackend one proxy= or a pool of proxies=, not both")
    return _browser_proxy(ProxyAddress.parse(proxy))


class BrowserBackend:
    """Loads pages in a pool of headless Chromium drivers, each serving one request at a time.

        BrowserBackend(drivers=4, wait=PageWait.ready(), waits={"product": PageWait.css("h1", optional=True)})

    After each load the backend waits for what the seed's tag asks in ``waits`` (one ``PageWait`` or
    several, run in order), else for ``wait``; a seed can name other waits with
    ``user_data={"browser.wait": name}``. ``wait_timeout`` bounds ``Driver.click`` and
    ``Driver.wait_for``. A driver is recycled after ``recycle_after`` pages, or once the memory of
    its process tree passes ``max_rss`` bytes. ``blocking`` refuses resource types and URL patterns.
    ``proxy`` (``http://[user:password@]host:port`` or ``socks5://host:port``) is every driver's;
    ``proxies`` (a ``ProxyPool``) picks one per request as ``HttpBackend`` does (sticky per origin,
    strikes, bans, another proxy for a retry), and a proxy's login answers its challenge through
    DevTools. ``user_agent`` is every driver's identity, and robots.txt is obeyed for its product
    token (``MyBot/2.0`` obeys the ``mybot`` group). With ``resolve_only`` (host names, e.g.
    ``{"127.0.0.1", "localhost"}``) the browser resolves those names and fails every other one as
    not found, without a DNS query. Chromium's own services (updates, sync, account checks,
    network time...) are off (``CHROMIUM_FLAGS``). ``options`` are Selenium ``ChromeOptions`` to
    start from; spire adds its flags to a copy. ``chromium`` and ``chromedriver`` override the
    binaries found on PATH; Selenium Manager never runs, so nothing is downloaded. Only GET can be
    loaded; ``seed.headers`` (credentials included) are sent with the requests for the page's own
    origin, never to another origin.
    """

    def __init__(
        self,
        *,
        drivers: int = 2,
        headless: bool = True,
        wait: PageWait | Sequence[PageWait] | None = None,
        waits: Mapping[str, PageWait | Sequence[PageWait]] | None = None,
        wait_timeout: float | timedelta = 10.0,
        page_load_timeout: float | timedelta = 30.0,
        script_timeout: float | timedelta = 30.0,
        recycle_after: int | None = 100,
        max_rss: int | None = None,
        blocking: Blocking | None = None,
        proxy: str | None = None,
        proxies: ProxyPool | None = None,
        user_agent: str | None = None,
        resolve_only: Collection[str] | None = None,
        chromium: str | None = None,
        chromedriver: str | None = None,
        options: Options | None = None,
        max_body_size: int = DEFAULT_MAX_BODY,
    ) -> None:
        if importlib.util.find_spec("selenium") is None:
            raise errors.ConfigError("BrowserBackend needs Selenium: pip install 'spire-crawl[browser]'")
        #: The proxies pages go through, chosen per request (``None``: one fixed ``proxy``, or direct).
        self.proxies = proxies
        self._proxy = _one_proxy(proxy, proxies)
        for address in proxies.addresses if proxies is not None else ():
            _browser_proxy(address)
        self.wait = waits_of(wait)
        self.waits: Mapping[str, tuple[PageWait, ...]] = MappingProxyType(
            {name: waits_of(given) for name, given in (waits or {}).items()}
        )
        self.wait_timeout = _positive(wait_timeout, "wait_timeout")
        self.max_body_size = max_body_size
        launch = Launch(
            chromium=find_binary(chromium, ("chromium", "chromium-browser", "google-chrome"), "Chromium"),
            chromedriver=find_binary(chromedriver, ("chromedriver",), "chromedriver"),
            headless=headless,
            options=options,
            user_agent=user_agent,
            resolve_only=_host_names(resolve_only),
            page_load_timeout=_positive(page_load_timeout, "page_load_timeout"),
            script_timeout=_positive(script_timeout, "script_timeout"),
            blocking=blocking if blocking is not None else Blocking(),
        )
        self.pool = DriverPool(launch, size=drivers, recycle_after=recycle_after, max_rss=max_rss)
        self._pages: dict[int, tuple[Response, AsyncDriver]] = {}
        self._http: HttpBackend | None = None  # the downloads' side, made on the first one

    @property
    def drivers(self) -> int:
        return self.pool.size

    @property
    def user_agent(self) -> str | None:
        """The User-Agent every driver sends (``None``: Chromium's own); robots.txt is obeyed for its
        product token, as for ``HttpBackend``'s."""
        return self.pool.launch.user_agent

    def http_beside(self) -> HttpBackend:
        """A new ``HttpBackend`` with this one's identity: its ``user_agent`` (when it names one), its
        proxy or proxies; for what a browser cannot fetch (a download) and ``AdaptiveBackend``'s HTTP side."""
        proxies = self.proxies
        if proxies is None and self._proxy is not None:
            proxies = ProxyPool([self._proxy.url])
        if self.user_agent is None:
            return HttpBackend(proxies=proxies, max_body_size=self.max_body_size)
        return HttpBackend(proxies=proxies, user_agent=self.user_agent, max_body_size=self.max_body_size)

    async def download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        """Stream ``seed``'s body to ``path`` over HTTP (``http_beside``): a browser cannot hand a body
        over as it arrives. ``Crawler.download`` sends it on the crawl's request path like any request."""
        if self._http is None:
            self._http = self.http_beside()
        return await self._http.download(seed, path, limit=limit)

    def waits_for(self, seed: Seed) -> tuple[PageWait, ...]:
        """The waits a seed's page gets: its own choice by name, else its tag's, else the default."""
        data = seed.user_data or {}
        if WAIT_KEY in data:
            chosen = data[WAIT_KEY]
            if chosen is None:
                return ()
            if not isinstance(chosen, str) or chosen not in self.waits:
                raise errors.ConfigError(
                    f"the seed asks for waits {chosen!r}, but the backend has waits for {sorted(self.waits)}",
                    url=seed.url,
                )
            return self.waits[chosen]
        if seed.tag is not None and seed.tag in self.waits:
            return self.waits[seed.tag]
        return self.wait

    async def fetch(self, seed: Seed) -> Response:
        """Load ``seed`` (GET only) in a pooled driver, wait for what its tag asks, return the page.

        Inside a request (``request_exits()``) the driver of a page stays lent to it, so the handler
        can drive the tab (``driver_for``), and goes back to the pool when the request ends; outside
        one, or after a redirect or a robots.txt, it goes back at once.
        """
        if seed.method.upper() != "GET":
            raise errors.ConfigError(
                f"BrowserBackend loads pages with GET only, not {seed.method}: use HttpBackend for it", url=seed.url
            )
        waits = self.waits_for(seed)
        proxy = self._proxy_for(seed)
        browser = await self.pool.acquire(seed.url, proxy)
        driver = AsyncDriver(self.pool, browser, wait_timeout=self.wait_timeout)
        try:
            async with driver.lock:
                sent, moves = marker(), judge() or _unjudged
                response = await self.pool.run(browser, lambda: self._load(browser, seed, waits, sent, moves), seed.url)
            if proxy is not None:
                self._observe(seed, proxy, response)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self.pool.give_back(browser)
            if proxy is None or not isinstance(exc, errors.SpireError):
                raise
            failure = self._failed(seed, proxy, exc, lost=browser.broken)
            if failure is exc:
                raise
            raise failure from exc
        exits = request_exits()
        if exits is None or not _for_a_handler(seed, response):
            await self.pool.give_back(browser)
            return response
        key = id(response)
        self._pages[key] = (response, driver)

        async def give_back() -> None:
            with anyio.CancelScope(shield=True):
                driver.closed = True
                self._pages.pop(key, None)
                await self.pool.give_back(browser)

        exits.push_async_callback(give_back)
        return response

    def _proxy_for(self, seed: Seed) -> ProxyAddress | None:
        """The proxy ``seed`` goes through: the pool's choice (sticky per origin, another on a retry),
        the one fixed proxy, or none."""
        if self.proxies is None:
            return self._proxy
        return self.proxies.choose(seed.origin, attempt=seed.attempt, key=seed.unique_key)

    def _observe(self, seed: Seed, proxy: ProxyAddress, response: Response) -> None:
        """Mark ``response`` with its proxy and tell the pool (a block page is a strike); a 407 fails."""
        response.proxy = proxy.redacted
        if response.status == 407:
            raise errors.ProxyError(
                f"proxy {proxy.redacted} refused the request (407 Proxy Authentication Required)", url=seed.url
            )
        if self.proxies is not None:
            self.proxies.observe(seed.origin, proxy, response, key=seed.unique_key)

    def _failed(self, seed: Seed, proxy: ProxyAddress, error: errors.SpireError, *, lost: bool) -> errors.SpireError:
        """``error`` marked with its proxy and told to the pool (a proxy error is a strike); a connection
        failure through a proxy is the proxy's, as over HTTP, unless the browser itself was ``lost``."""
        if isinstance(error, errors.ConnectError) and not lost:
            error = errors.ProxyError(f"through proxy {proxy.redacted}: {error}", url=error.url or seed.url)
        error.proxy = proxy.redacted
        if self.proxies is not None:
            self.proxies.failed(seed.origin, proxy, error)
        return error

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

    def _load(
        self, browser: Chromium, seed: Seed, waits: tuple[PageWait, ...], sent: Callable[[], None], moves: Admit
    ) -> Response:
        """Blocking: load ``seed`` in ``browser``, wait for ``waits``, and build its response; ``sent()``
        is called as the page's request goes out (its origin's spacing counts from then, not from
        the wait for a tab and a browser's start). After the load, the tab moves on where ``moves`` admits."""
        driver = browser.driver
        started = time.perf_counter()
        performance_log(driver)  # drop what earlier pages and handlers left in the log
        browser.send_headers(seed.origin, seed.headers or {})
        if "#" in seed.url and driver.current_url.split("#", 1)[0] == seed.url.split("#", 1)[0]:
            driver.get("about:blank")  # a change of fragment alone would not load the document again
        browser.pages += 1
        navigation = Navigation(browser.main_frame)
        with browser.loading(sent, moves) as stopped:
            driver.get(seed.url)
            traffic = Traffic(time.monotonic())

            def quiet_for() -> float:
                entries = performance_log(driver)
                now = time.monotonic()
                navigation.read(entries)
                traffic.read(entries, now)
                return traffic.quiet_for(now)

            quiet_for()
            redirect = navigation.stopped(stopped)
            if redirect is not None:
                return _redirect_response(seed, redirect, time.perf_counter() - started)
            loaded, _ = navigation.final(seed.url)  # a network error fails now, not after a wait
            if waits and worth_waiting_on(loaded.response):
                for wait in waits:
                    settle(driver, wait, seed.url, quiet_for)
                quiet_for()  # a script may have navigated while we waited
                redirect = navigation.stopped(stopped)
                if redirect is not None:
                    return _redirect_response(seed, redirect, time.perf_counter() - started)
        document, hops = navigation.final(seed.url)
        return self._response(driver, seed, document, hops, time.perf_counter() - started)

    def _response(
        self, driver: WebDriver, seed: Seed, document: Document, hops: tuple[str, ...], elapsed: float
    ) -> Response:
        """Blocking: the response for the document the tab holds."""
        found = document.response
        if found is None:
            raise errors.FetchError("Chromium received no response for the page", url=seed.url)
        url = driver.current_url if not document.empty else document.urls[-1]
        mime = str(found.get("mimeType", "")).lower()
        raw_headers = response_headers(found.get("headers", {}))
        body: bytes | None
        content_type: str | None = None
        if document.empty:
            body = b""  # what the server sent; the tab shows Chromium's own error page instead
        elif mime not in HTML_TYPES:
            body, content_type = self._original_body(driver, document)
        else:
            body = None
        if body is None:
            body, content_type = driver.page_source.encode("utf-8"), "text/html; charset=utf-8"
        if content_type is not None:
            raw_headers = [(name, value) for name, value in raw_headers if name.lower() != "content-type"]
            raw_headers.append(("Content-Type", content_type))
        if len(body) > self.max_body_size:
            raise errors.BodyLimitError(f"the page passed the {self.max_body_size}-byte cap", url=url)
        return Response(
            url=url,
            status=int(found.get("status", 0)),
            headers=Headers(raw_headers),
            body=body,
            seed=seed,
            elapsed=elapsed,
            redirects=hops,
        )

    @staticmethod
    def _original_body(driver: WebDriver, document: Document) -> tuple[bytes | None, str | None]:
        """A non-HTML document's own bytes, through DevTools; ``None`` when Chrome no longer has them."""
        from selenium.common.exceptions import WebDriverException

        try:
            found: dict[str, Any] = driver.execute_cdp_cmd(
                "Network.getResponseBody", {"requestId": document.request_id}
            )
        except WebDriverException:
            return None, None
        if found.get("base64Encoded"):
            return base64.b64decode(found.get("body", "")), None
        # DevTools hands text over decoded, so it travels on as UTF-8.
        mime = str((document.response or {}).get("mimeType") or "text/plain")
        return str(found.get("body", "")).encode("utf-8"), f"{mime}; charset=utf-8"

    async def aclose(self) -> None:
        """Quit every idle driver and delete its profile (a driver still lent out is quit when it
        returns), and close the downloads' HTTP side."""
        http, self._http = self._http, None
        try:
            if http is not None:
                await http.aclose()
        finally:
            await self.pool.aclose()
