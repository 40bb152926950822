"""``HttpBackend``: HTTP over one pooled aiohttp session, or httpx for HTTP/2 and given transports.

Redirects are never followed here; the crawler follows them, admitting each hop against its origin.
aiohttp and httpx exceptions are translated into spire's errors in ``translate``, the one place.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta

import aiohttp
import httpx

from spire_core import errors
from spire_core.outcome import seconds
from spire_core.response import Headers, Response
from spire_core.seed import Seed

__all__ = ["DEFAULT_USER_AGENT", "HttpBackend", "Timeouts"]

DEFAULT_USER_AGENT = "spire/0.1 (+a polite crawler)"
DEFAULT_MAX_BODY = 100 * 1024 * 1024
_CHUNK = 64 * 1024


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


def translate(exc: BaseException, url: str) -> errors.SpireError:
    """The spire error for an aiohttp or httpx exception: the one place they are mapped."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ProxyError | aiohttp.ClientProxyConnectionError | aiohttp.ClientHttpProxyError):
        return errors.ProxyError(message, url=url)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return errors.TimeoutError_(message or "timed out", url=url)
    if isinstance(exc, aiohttp.ClientSSLError) or (
        isinstance(exc, httpx.ConnectError) and ("SSL" in message or "certificate" in message)
    ):
        return errors.TlsError(message, url=url)
    if isinstance(exc, httpx.DecodingError) or (
        isinstance(exc, aiohttp.ClientPayloadError) and "encoding" in message.lower()
    ):
        return errors.DecodeError(message, url=url)
    if isinstance(
        exc,
        httpx.ConnectError
        | httpx.ReadError
        | httpx.WriteError
        | httpx.RemoteProtocolError
        | aiohttp.ClientConnectionError
        | aiohttp.ClientPayloadError,
    ):
        return errors.ConnectError(message, url=url)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL | aiohttp.InvalidURL):
        return errors.InvalidUrl(message, url=url)
    if isinstance(exc, aiohttp.ClientResponseError):
        return errors.FetchError(f"malformed response: {message}", url=url)
    if isinstance(exc, OSError):
        return errors.ConnectError(message, url=url)
    return errors.FetchError(message, url=url)


class HttpBackend:
    """Fetches over HTTP with pooling and keep-alive, a body cap and timeouts.

        HttpBackend(timeout=10, max_body_size=10 * 2**20, headers={"Accept-Language": "en"})

    The body cap counts decoded bytes, so a gzip bomb stops at the cap. By default requests travel
    on one aiohttp ``ClientSession`` (its pool, keep-alive and cookie jar): the crawler already does
    what an HTTP client adds on top (redirects, retries, limits), and aiohttp alone costs about half
    what httpx over aiohttp does. ``http2=True``, or an httpx ``transport=`` (a proxy, a test seam),
    sends through httpx instead, with an ``httpx.Cookies`` jar. Either way, cookies follow the cookie
    rules (domain and path matching, expiry).
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
        self._http2 = http2
        self._max_connections = max_connections
        self._verify = verify
        self._given_transport = transport
        self._session: aiohttp.ClientSession | None = None
        self._transport: httpx.AsyncBaseTransport | None = None
        #: The httpx path's cookie jar (the aiohttp path keeps its own in its session).
        self.cookies = httpx.Cookies()

    def check_event_loop(self) -> None:
        """``ConfigError`` when the default transport (aiohttp, asyncio only) is used under another loop."""
        if self._via_httpx:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise errors.ConfigError(
                "HttpBackend's default transport (aiohttp) runs on asyncio only: run the crawl under asyncio "
                "(anyio.run(crawler.arun)), or give it an httpx transport, which works under trio too: "
                "HttpBackend(transport=httpx.AsyncHTTPTransport())"
            ) from None

    @property
    def user_agent(self) -> str:
        """The User-Agent sent with every request (robots.txt rules are read for its product token)."""
        return self._headers["User-Agent"]

    @property
    def _via_httpx(self) -> bool:
        return self._http2 or self._given_transport is not None

    async def fetch(self, seed: Seed) -> Response:
        """Send ``seed`` as written and read its body, up to the cap, within the body timeout."""
        started = time.perf_counter()
        try:
            if self._via_httpx:
                status, headers, body = await self._fetch_httpx(seed)
            else:
                status, headers, body = await self._fetch_aiohttp(seed)
        except errors.SpireError:
            raise
        except (httpx.HTTPError, httpx.InvalidURL, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise translate(exc, seed.url) from exc
        return Response(
            url=seed.url,
            status=status,
            headers=headers,
            body=body,
            seed=seed,
            elapsed=time.perf_counter() - started,
        )

    # -- aiohttp ----------------------------------------------------------------------------------

    def _aiohttp_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self.check_event_loop()
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                ssl=self._aiohttp_ssl(),
            )
            timeouts = self.timeouts
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=dict(self._headers),
                # unsafe: keep cookies from hosts that are IP addresses too (a crawl of 127.0.0.1 has them)
                cookie_jar=aiohttp.CookieJar(unsafe=True),
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=seconds(timeouts.connect), sock_read=seconds(timeouts.read)
                ),
            )
        return self._session

    def _aiohttp_ssl(self) -> ssl.SSLContext | bool:
        """aiohttp's own verified context (made once, when aiohttp loads) unless a CA bundle is named."""
        if isinstance(self._verify, str):
            return httpx.create_ssl_context(verify=self._verify)
        return self._verify

    async def _fetch_aiohttp(self, seed: Seed) -> tuple[int, Headers, bytes]:
        session = self._aiohttp_session()
        async with session.request(
            seed.method, seed.url, headers=seed.headers, data=seed.body, allow_redirects=False
        ) as response:
            headers = Headers(response.raw_headers)
            body = await self._read(response.content.iter_chunked(_CHUNK), headers, seed.url)
            return response.status, headers, body

    async def _read(self, decoded: AsyncIterator[bytes], headers: Headers, url: str) -> bytes:
        """The body from its decoded chunks, within the size cap and the body timeout.

        The deadline is checked as chunks arrive (no cancel scope per request): a read that stalls is
        ended by the per-read timeout, so a body never takes longer than body + read.
        """
        cap = self.max_body_size
        self._check_declared(headers, url)
        deadline = time.monotonic() + (seconds(self.timeouts.body) or float("inf"))
        chunks: list[bytes] = []
        size = 0
        async for chunk in decoded:
            size += len(chunk)  # decoded bytes: the content coding is already undone
            if size > cap:
                raise errors.BodyLimitError(f"body passed the {cap}-byte cap", url=url)
            if time.monotonic() > deadline:
                raise errors.TimeoutError_("the body took longer than its timeout", url=url)
            chunks.append(chunk)
        return b"".join(chunks)

    # -- httpx ------------------------------------------------------------------------------------

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The httpx transport of the httpx path, created on first use inside the running event loop."""
        if self._transport is None:
            self._transport = self._given_transport or httpx.AsyncHTTPTransport(
                http2=True,
                limits=httpx.Limits(max_connections=self._max_connections),
                verify=self._verify,
            )
        return self._transport

    def _request(self, seed: Seed) -> httpx.Request:
        headers = self._headers
        if seed.headers:
            headers = headers.copy()
            headers.update(seed.headers)
        request = httpx.Request(
            seed.method,
            seed.url,
            headers=headers,
            content=seed.body,
            extensions={"timeout": self.timeouts.httpx().as_dict()},
        )
        if self.cookies.jar:
            self.cookies.set_cookie_header(request)
        return request

    async def _fetch_httpx(self, seed: Seed) -> tuple[int, Headers, bytes]:
        request = self._request(seed)
        response = await self.transport.handle_async_request(request)
        response.request = request  # httpx's own transport leaves it unset; the cookie jar reads it
        try:
            if "set-cookie" in response.headers:
                self.cookies.extract_cookies(response)
            body = await self._read(response.aiter_bytes(), response.headers, seed.url)
        finally:
            await response.aclose()
        return response.status_code, response.headers, body

    def _check_declared(self, headers: Headers, url: str) -> None:
        """Refuse at once a body whose declared, uncompressed length is over the cap."""
        cap = self.max_body_size
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap and "content-encoding" not in headers:
            raise errors.BodyLimitError(f"body of {declared} bytes is over the {cap}-byte cap", url=url)

    async def aclose(self) -> None:
        """Close the connection pool; the next request opens a new one."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        transport, self._transport = self._transport, None
        if transport is not None and transport is not self._given_transport:
            await transport.aclose()
