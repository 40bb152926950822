"""``HttpBackend``: HTTP over one shared ``httpx.AsyncClient``.

By default requests travel on an aiohttp-based httpx transport (``httpx-aiohttp``): the same httpx
API, a faster connection pool. ``http2=True`` switches to httpx's own transport, which speaks HTTP/2.
Redirects are never followed here; the crawler follows them, admitting each hop against its origin.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import timedelta

import aiohttp
import anyio
import httpx
from httpx_aiohttp import AiohttpTransport

from spire_core import errors
from spire_core.backend.base import Session, Shared
from spire_core.outcome import seconds
from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["DEFAULT_USER_AGENT", "HttpBackend", "Timeouts"]

DEFAULT_USER_AGENT = "spire/0.1 (+a polite crawler)"
DEFAULT_MAX_BODY = 100 * 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Timeouts:
    """Connect, per-read and whole-body timeouts, in seconds.

    ``body`` bounds the body from its first read, so a server trickling bytes fails as a timeout.
    """

    connect: float | timedelta = 10.0
    read: float | timedelta = 30.0
    body: float | timedelta = 60.0

    @classmethod
    def of(cls, value: float | timedelta | Timeouts) -> Timeouts:
        """Accept a single number (every timeout) or a ``Timeouts``."""
        return value if isinstance(value, Timeouts) else cls(value, value, value)

    def httpx(self) -> httpx.Timeout:
        read = seconds(self.read)
        return httpx.Timeout(connect=seconds(self.connect), read=read, write=read, pool=None)


def translate(exc: Exception, url: str) -> errors.SpireError:
    """The spire error for an httpx (or transport) exception: the one place they are mapped."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ProxyError):
        return errors.ProxyError(message, url=url)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return errors.TimeoutError_(message or "timed out", url=url)
    if isinstance(exc, httpx.ConnectError) and ("SSL" in message or "certificate" in message):
        return errors.TlsError(message, url=url)
    if isinstance(exc, httpx.ConnectError | httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError):
        return errors.ConnectError(message, url=url)
    if isinstance(exc, httpx.DecodingError):
        return errors.DecodeError(message, url=url)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return errors.InvalidUrl(message, url=url)
    if isinstance(exc, OSError):
        return errors.ConnectError(message, url=url)
    return errors.FetchError(message, url=url)


class HttpBackend:
    """Fetches over HTTP with pooling and keep-alive, a body cap and timeouts.

        HttpBackend(timeout=10, max_body_size=10 * 2**20, headers={"Accept-Language": "en"})

    The body cap counts decoded bytes, so a gzip bomb stops at the cap. Requests go straight to the
    httpx transport (aiohttp-based by default; httpx's own with ``http2=True``): the crawler already
    does what ``httpx.AsyncClient`` adds on top (redirects, header merging), and skipping it halves the
    cost of a request. Cookies live in one ``httpx.Cookies`` jar, which follows the cookie rules
    (domain and path matching, expiry).
    """

    def __init__(
        self,
        *,
        timeout: float | timedelta | Timeouts = Timeouts(),
        max_body_size: int = DEFAULT_MAX_BODY,
        headers: Mapping[str, str] | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        http2: bool = False,
        max_connections: int = 256,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeouts = Timeouts.of(timeout)
        self.max_body_size = max_body_size
        self._headers = httpx.Headers(
            {"User-Agent": user_agent, "Accept": "*/*", "Accept-Encoding": "gzip, deflate", **(headers or {})}
        )
        self._timeout_extension = self.timeouts.httpx().as_dict()
        self._http2 = http2
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._verify = verify
        self._given_transport = transport
        self._transport: httpx.AsyncBaseTransport | None = None
        #: The cookies the crawl's responses set, sent back by the usual rules.
        self.cookies = httpx.Cookies()

    def _make_transport(self) -> httpx.AsyncBaseTransport:
        if self._given_transport is not None:
            return self._given_transport
        if self._http2:
            return httpx.AsyncHTTPTransport(http2=True, limits=self._limits, verify=self._verify)
        return AiohttpTransport(client=self._aiohttp_session, limits=self._limits)

    def _aiohttp_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._limits.max_connections or 0,
            keepalive_timeout=self._limits.keepalive_expiry or 5.0,
            ssl=httpx.create_ssl_context(verify=self._verify),
        )
        # Cookies are the backend's jar's job; aiohttp keeping a second jar would send them twice.
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The shared transport (its connection pool), created on first use inside the running event loop."""
        if self._transport is None:
            self._transport = self._make_transport()
        return self._transport

    def session(self, seed: Seed) -> AbstractAsyncContextManager[Session]:
        return Shared(self)

    def _request(self, seed: Seed) -> httpx.Request:
        headers = self._headers
        if seed.headers:
            headers = headers.copy()
            headers.update(seed.headers)
        request = httpx.Request(
            seed.method, seed.url, headers=headers, content=seed.body, extensions={"timeout": self._timeout_extension}
        )
        if self.cookies.jar:
            self.cookies.set_cookie_header(request)
        return request

    async def fetch(self, seed: Seed) -> Response:
        """Send ``seed`` as written and read its body, up to the cap, within the body timeout."""
        started = time.perf_counter()
        try:
            request = self._request(seed)
            response = await self.transport.handle_async_request(request)
            response.request = request  # httpx's own transport leaves it unset; the cookie jar reads it
            try:
                if "set-cookie" in response.headers:
                    self.cookies.extract_cookies(response)
                with anyio.fail_after(seconds(self.timeouts.body)):
                    body = await self._read(response, seed.url)
            finally:
                await response.aclose()
        except errors.SpireError:
            raise
        except (httpx.HTTPError, httpx.InvalidURL, OSError, TimeoutError) as exc:
            raise translate(exc, seed.url) from exc
        return Response(
            url=seed.url,
            status=response.status_code,
            headers=response.headers,
            body=body,
            seed=seed,
            elapsed=time.perf_counter() - started,
        )

    async def _read(self, response: httpx.Response, url: str) -> bytes:
        cap = self.max_body_size
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap and "content-encoding" not in response.headers:
            raise errors.BodyLimitError(f"body of {declared} bytes is over the {cap}-byte cap", url=url)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > cap:
                raise errors.BodyLimitError(f"body passed the {cap}-byte cap", url=url)
            chunks.append(chunk)
        return b"".join(chunks)

    async def aclose(self) -> None:
        """Close the connection pool; the next request opens a new one."""
        transport, self._transport = self._transport, None
        if transport is not None and transport is not self._given_transport:
            await transport.aclose()
