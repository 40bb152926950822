"""``HttpBackend``: HTTP over one pooled aiohttp session, or httpx for HTTP/2 and given transports.

Redirects are never followed here; the crawler follows them, admitting each hop against its origin.
aiohttp and httpx exceptions are translated into spire's errors in ``translate``, the one place.
Both paths read the raw body and undo its content coding with spire's bounded ``ContentDecoder``,
so the body cap holds against compression bombs; the request deadline and the body deadline are
cancel scopes, so they fire during a stall (a server trickling its headers included).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import importlib.util
import inspect
import os
import socket
import ssl
import tempfile
import time
import urllib.parse
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import NoReturn

import aiohttp
import anyio
import anyio.to_thread
import httpx

from spire_core import errors
from spire_core.backend.abilities import DEFAULT_USER_AGENT, PoolStats
from spire_core.backend.altsvc import Http3Mode, http3_mode
from spire_core.backend.connections import BoundedConnector, HostCap, Lane, idle_aiohttp, idle_httpx
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from spire_core.session.addresses import check_resolved
from spire_core.session.credentials import CREDENTIAL_HEADERS
from spire_core.session.decoding import OFFERED, ContentDecoder
from spire_core.session.identity import Identity
from spire_core.session.proxies import ProxyAddress, ProxyPool
from spire_core.session.redact import redact_text
from spire_core.session.streaming import BodyStream, StreamedResponse
from spire_core.session.timeouts import Timeouts, deadline

__all__ = ["DEFAULT_USER_AGENT", "GuardedResolver", "HttpBackend", "PoolStats", "Timeouts", "WireHeaders", "translate"]

DEFAULT_MAX_BODY = 100 * 1024 * 1024
_CHUNK = 64 * 1024


def translate(exc: BaseException, url: str) -> errors.SpireError:
    """The spire error for an aiohttp or httpx exception: the one place they are mapped."""
    message = redact_text(str(exc) or type(exc).__name__)
    if (isinstance(exc, aiohttp.ClientHttpProxyError) and exc.status in (502, 503, 504)) or (
        isinstance(exc, httpx.ProxyError) and message.startswith(("502", "503", "504"))
    ):  # the proxy's answer to CONNECT: it works, the site behind it does not
        return errors.ProxyTargetError(f"the proxy could not reach the site: {message}", url=url)
    if isinstance(exc, httpx.ProxyError | aiohttp.ClientProxyConnectionError | aiohttp.ClientHttpProxyError):
        return errors.ProxyError(message, url=url)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return errors.FetchTimeout(message or "timed out", url=url)
    if isinstance(exc, aiohttp.ClientSSLError) or (
        isinstance(exc, httpx.ConnectError) and ("SSL" in message or "certificate" in message)
    ):
        return errors.TlsError(message, url=url)
    if isinstance(exc, httpx.DecodingError):
        return errors.DecodeError(message, url=url)
    if isinstance(exc, aiohttp.ClientResponseError) or _malformed(exc, message):
        return errors.ProtocolError(f"malformed response: {message}", url=url)
    if _cut_short(exc, message):
        return errors.IncompleteBody(f"the server closed before the end of the body: {message}", url=url)
    # what is left of a payload or protocol error is a reset mid-body (chunked or not) or a server
    # that hung up before answering: the connection failed, not the framing
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
    if isinstance(exc, OSError):
        return errors.ConnectError(message, url=url)
    return errors.FetchError(message, url=url)


# h11 (the httpx path) says "bad Content-Length" and "conflicting Content-Length headers"; aiohttp's
# parser raises ClientResponseError for the same framing, so both paths call it "protocol". The httpx
# path's dialer says "not HTTP" of bytes no response begins with, then a close (aiohttp: a bad status line).
_MALFORMED = (
    "invalid",
    "malformed",
    "can not decode",
    "cannot decode",
    "illegal",
    "bad chunk",
    "content-length",
    "not http",
)


def _malformed(exc: BaseException, message: str) -> bool:
    """Whether a payload or protocol error means the response broke HTTP's framing (not that it was cut short)."""
    if not isinstance(exc, aiohttp.ClientPayloadError | httpx.RemoteProtocolError):
        return False
    lowered = message.lower()
    return any(marker in lowered for marker in _MALFORMED)


def _cut_short(exc: BaseException, message: str) -> bool:
    """Whether the server closed in order before the body's framing was complete (a reset is not this).

    h11 (httpx) says "peer closed connection without sending complete message body"; aiohttp raises
    ``ContentLengthError`` or ``TransferEncodingError`` under its payload error, naming a reset in
    the message when there was one.
    """
    if isinstance(exc, httpx.RemoteProtocolError):
        return "without sending complete message body" in message
    if isinstance(exc, aiohttp.ClientPayloadError):
        short = (aiohttp.http_exceptions.ContentLengthError, aiohttp.http_exceptions.TransferEncodingError)
        return isinstance(exc.__cause__, short) and "ConnectionResetError" not in message
    return False


class HttpBackend:
    """Fetches over HTTP with pooling and keep-alive, a body cap and timeouts.

        HttpBackend(timeout=10, max_body_size=10 * 2**20, headers={"Accept-Language": "en"})

    The body cap counts decoded bytes, inflated one 64 KiB piece at a time, so a gzip, deflate or
    brotli bomb stops at the cap; a content coding spire did not offer is refused. By default requests travel
    on one aiohttp ``ClientSession`` (its pool, keep-alive and cookie jar): the crawler already does
    what an HTTP client adds on top (redirects, retries, limits), and aiohttp alone costs about half
    what httpx over aiohttp does. ``http2=True``, or an httpx ``transport=`` (a proxy, a test seam),
    sends through httpx instead, with an ``httpx.Cookies`` jar. Either way, cookies follow the cookie
    rules (domain and path matching, expiry). ``http2=True`` needs the ``http2`` extra (``h2``).
    ``http3=True`` (where the server offers it), ``"prefer"`` or ``"only"`` adds HTTP/3 over QUIC beside
    the httpx path (``http3`` extra, ``aioquic``; see ``spire_core.backend.http3``).
    """

    def __init__(
        self,
        *,
        timeout: float | timedelta | Timeouts | None = None,
        max_body_size: int = DEFAULT_MAX_BODY,
        headers: Mapping[str, str] | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        http2: bool = False,
        http3: bool | Http3Mode = False,
        max_connections: int = 256,
        max_connections_per_host: int | None = None,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
        proxies: ProxyPool | None = None,
        identity: Identity | None = None,
    ) -> None:
        if http2 and importlib.util.find_spec("h2") is None:
            raise errors.ConfigError("http2=True needs the h2 package: pip install 'spire-crawl[http2]'")
        self._http3 = http3_mode(http3)
        if self._http3 is not None and importlib.util.find_spec("aioquic") is None:
            raise errors.ConfigError("http3= needs the aioquic package: pip install 'spire-crawl[http3]'")
        if self._http3 is not None and (proxies is not None or transport is not None):
            raise errors.ConfigError(
                "HTTP/3 goes over spire's own QUIC transport, which cannot use a proxy (aioquic has no proxy "
                "support): give HttpBackend http3= or proxies= (or transport=), not both"
            )
        if proxies is not None and transport is not None:
            raise errors.ConfigError("give HttpBackend a proxy pool or a transport, not both")
        if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 0:
            raise errors.ConfigError(
                f"max_body_size is a number of bytes, 0 or more (default {DEFAULT_MAX_BODY}), not {max_body_size!r}"
            )
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise errors.ConfigError(f"max_connections must be 1 or more, not {max_connections!r}")
        if max_connections_per_host is not None and (
            isinstance(max_connections_per_host, bool)
            or not isinstance(max_connections_per_host, int)
            or max_connections_per_host < 1
        ):
            raise errors.ConfigError(
                f"max_connections_per_host must be 1 or more (None: no cap), not {max_connections_per_host!r}"
            )
        if identity is not None and proxies is not None and proxies.carries_identities:
            raise errors.ConfigError(
                "the proxies of ProxyPool.identified(...) carry their own identities: give HttpBackend "
                "the pool or an identity, not both"
            )
        #: The proxies requests go through (``None``: direct).
        self.proxies = proxies
        self._busy = 0
        self._own_timeouts = timeout is not None
        self.timeouts = Timeouts() if timeout is None else Timeouts.of(timeout)
        self.max_body_size = max_body_size
        #: The browser identity whose headers (in its order) every request carries, if any.
        self.identity = identity
        for name in headers or {}:
            if name.lower() in CREDENTIAL_HEADERS:
                raise errors.ConfigError(
                    f"HttpBackend(headers=) would send {name} to every host: give it to the origin it belongs to "
                    f"with Crawler(credentials={{'https://site.example': {{'{name}': ...}}}})"
                )
        self._user_agent = user_agent
        self._extra_headers = dict(headers or {})
        #: The backend's own lane (direct requests, and proxies without an identity of their own).
        self._lane = Lane(identity, self._headers_of(identity))
        #: The lane of each proxy of an identified pool, by proxy URL, made on first use.
        self._lanes: dict[str, Lane] = {}
        self._headers = self._lane.headers
        self._http2 = http2
        self._max_connections = max_connections
        self._per_host_cap = max_connections_per_host
        self._per_host = HostCap(max_connections_per_host)
        self._verify = verify
        self._given_transport = transport
        self._made_timeout: tuple[Timeouts, aiohttp.ClientTimeout] | None = None
        self._transport: httpx.AsyncBaseTransport | None = None
        #: The httpx path's cookie jar (the aiohttp path keeps its own in its session).
        self.cookies = self._lane.cookies
        #: Told of each request as it is written (``count_sends``): each crawl's request path, held weakly.
        self._sent: list[Callable[[], Callable[[Seed], None] | None]] = []
        #: aiohttp tells, for each time it writes a request's head (its own resend included), ``_wrote``.
        self._wire = aiohttp.TraceConfig()
        self._wire.on_request_headers_sent.append(self._wrote)
        self._wire.freeze()

    def _headers_of(self, identity: Identity | None) -> httpx.Headers:
        """What every request of ``identity`` (``None``: the plain user agent) carries, in its order."""
        if identity is not None:
            headers = httpx.Headers(identity.headers())
        else:
            headers = httpx.Headers([("User-Agent", self._user_agent), ("Accept", "*/*"), ("Accept-Encoding", OFFERED)])
        for name, value in self._extra_headers.items():
            headers[name] = value
        return headers

    def _lane_of(self, proxy: ProxyAddress | None) -> Lane:
        """The lane a request through ``proxy`` travels in: the proxy's own when it carries an identity."""
        if proxy is None or proxy.identity is None:
            return self._lane
        lane = self._lanes.get(proxy.url)
        if lane is None:
            lane = self._lanes[proxy.url] = Lane(proxy.identity, self._headers_of(proxy.identity))
        return lane

    def check_event_loop(self) -> None:
        """``ConfigError`` when the default transport (aiohttp, asyncio only) or HTTP/3 (aioquic, asyncio
        only) is used under another loop."""
        if self._via_httpx and self._http3 is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._http3 is not None:
                raise errors.ConfigError(
                    "HttpBackend(http3=...) sends HTTP/3 over aioquic, which runs on asyncio only: run the crawl "
                    "under asyncio (anyio.run(crawler.arun)), or leave http3 off under trio"
                ) from None
            raise errors.ConfigError(
                "HttpBackend's default transport (aiohttp) runs on asyncio only: run the crawl under asyncio "
                "(anyio.run(crawler.arun)), or give it an httpx transport, which works under trio too: "
                "HttpBackend(transport=httpx.AsyncHTTPTransport())"
            ) from None

    def use_timeouts(self, timeouts: Timeouts | None) -> Timeouts:
        """Adopt the crawl's ``timeouts`` (``None``: keep these); ``ConfigError`` when given others of its own."""
        if timeouts is None or timeouts == self.timeouts:
            return self.timeouts
        if self._own_timeouts:
            raise errors.ConfigError(
                f"two timeouts for one crawl: Crawler(timeouts={timeouts}) and HttpBackend(timeout={self.timeouts}); "
                "give them once, to the Crawler"
            )
        self.timeouts = timeouts
        return timeouts

    @property
    def user_agent(self) -> str:
        """The User-Agent sent with every request (robots.txt rules are read for its product token)."""
        return self._headers["User-Agent"]

    def sends_conditional(self) -> bool:
        """Yes: a recrawl's conditional request goes as given, and a 304 comes back as the response."""
        return True

    def count_sends(self, sent: Callable[[Seed], None]) -> None:
        """Call ``sent(seed)`` as each request is written: on the aiohttp path as its head goes out, each
        time aiohttp writes it; on the httpx path as it is handed to the transport. A request refused
        before (every proxy banned) is never told. Each caller is told of every request (a bound method
        is held weakly: a crawl's request path does not outlive its run)."""
        alive = [each for each in self._sent if each() is not None]
        held = weakref.WeakMethod(sent) if inspect.ismethod(sent) else (lambda: sent)
        self._sent = [*alive, held]

    def _tell(self, seed: Seed) -> None:
        for each in self._sent:
            sent = each()
            if sent is not None:
                sent(seed)

    async def _wrote(
        self, session: aiohttp.ClientSession, context: object, params: aiohttp.TraceRequestHeadersSentParams
    ) -> None:
        seed = getattr(context, "trace_request_ctx", None)
        if isinstance(seed, Seed):
            self._tell(seed)

    @property
    def _via_httpx(self) -> bool:
        return self._http2 or self._http3 is not None or self._given_transport is not None

    async def fetch(self, seed: Seed) -> Response:
        """Send ``seed`` as written and read its body, up to the cap, within the body timeout.

        Through a proxy pool, the pool picks the proxy and sees what happened: an error, or the
        response (where a block page is a strike).
        """
        proxy = self._choose(seed)
        started = time.perf_counter()
        self._busy += 1
        failure: _Failure | None = None
        try:
            with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                sink = _Collect(self.max_body_size)
                if self._via_httpx:
                    opened = await self._fetch_httpx(seed, proxy, sink)
                else:
                    opened = await self._fetch_aiohttp(seed, proxy, sink)
            if proxy is not None and opened.status == 407:
                raise errors.ProxyError("the proxy refused the request (407 Proxy Authentication Required)")
        except errors.SpireError as exc:
            raise self._failed(seed, proxy, exc) from exc.__cause__
        except (httpx.HTTPError, httpx.InvalidURL, aiohttp.ClientError, OSError, TimeoutError) as exc:
            failure = _Failure(self._failed(seed, proxy, translate(exc, seed.url)), exc)
        finally:
            self._busy -= 1
        if failure is not None:
            failure.raise_()
        return self._answered(seed, proxy, opened, sink, started)

    def _answered(
        self, seed: Seed, proxy: ProxyAddress | None, opened: _Opened, sink: _Collect, started: float
    ) -> Response:
        """The ``Response`` of a body read whole into ``sink``, marked with its identity and proxy."""
        body = sink.body()
        response = Response(
            url=seed.url,
            status=opened.status,
            headers=opened.headers,
            body=body,
            seed=seed,
            elapsed=time.perf_counter() - started,
            http_version=opened.version,
        )
        response.wire_body = sink.wire_body() if opened.coding else body
        self._marked(seed, proxy, response)
        return response

    def _marked(self, seed: Seed, proxy: ProxyAddress | None, response: Response) -> None:
        """Name ``response``'s identity and proxy, and tell the pool what the proxy carried."""
        identity = self._lane_of(proxy).identity
        if identity is not None:
            response.identity = identity.name
        if proxy is not None and self.proxies is not None:
            response.proxy = proxy.redacted
            self.proxies.observe(seed.origin, proxy, response, key=seed.unique_key)

    def _choose(self, seed: Seed) -> ProxyAddress | None:
        """The proxy for ``seed`` (``None``: direct)."""
        if self.proxies is None:
            return None
        return self.proxies.choose(seed.origin, attempt=seed.attempt, key=seed.unique_key)

    def pool_stats(self) -> PoolStats:
        """Requests holding a connection (from send to the end of the body), open connections no request
        holds (kept alive for the next), and the caps; every identity's connections are counted."""
        lanes = [self._lane, *self._lanes.values()]
        idle = sum(idle_aiohttp(lane.session) for lane in lanes if lane.session is not None)
        transports = [self._transport, *(each for lane in lanes for each in lane.transports.values())]
        idle += sum(idle_httpx(each) for each in transports if each is not None)
        return PoolStats(
            busy=self._busy,
            max_connections=self._max_connections,
            idle=idle,
            max_connections_per_host=self._per_host_cap,
        )

    def _failed(self, seed: Seed, proxy: ProxyAddress | None, error: errors.SpireError) -> errors.SpireError:
        """``error`` marked with its proxy (redacted), and told to the pool; a connection failure through a
        proxy is the proxy's (for a plain-HTTP target, the proxy is the only peer spire talks to)."""
        if proxy is None or self.proxies is None:
            return error
        if isinstance(error, errors.ConnectError):
            error = errors.ProxyError(f"through proxy {proxy.redacted}: {error}", url=error.url)
        error.url = error.url or seed.url
        error.proxy = proxy.redacted
        self.proxies.failed(seed.origin, proxy, error)
        return error

    # -- streamed bodies --------------------------------------------------------------------------

    async def stream(self, seed: Seed) -> Response:
        """Send ``seed`` and read its head only: a 2xx answer comes back as a ``StreamedResponse`` whose
        ``stream`` reads the body (within the cap and the body deadline); any other is read whole.

        The connection stays out of the pool, and the request counts as busy, until the body ends.
        """
        proxy = self._choose(seed)
        started = time.perf_counter()
        self._busy += 1
        streaming = False
        failure: _Failure | None = None
        try:
            with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                opened = await (self._open_httpx(seed, proxy) if self._via_httpx else self._open_aiohttp(seed, proxy))
                sink = _Collect(self.max_body_size)
                if not 200 <= opened.status < 300:
                    # a redirect, a block page, an error: read whole, and judged as any response
                    await self._read_whole(seed, opened, sink)
                    if proxy is not None and opened.status == 407:
                        raise errors.ProxyError("the proxy refused the request (407 Proxy Authentication Required)")
                    return self._answered(seed, proxy, opened, sink, started)
                try:
                    await sink.begin(opened, seed.url)  # a declared length over the cap
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await opened.close(False)
                    raise
                response = self._streaming(seed, proxy, opened, started)
                streaming = True
                return response
        except errors.SpireError as exc:
            raise self._failed(seed, proxy, exc) from exc.__cause__
        except (httpx.HTTPError, httpx.InvalidURL, aiohttp.ClientError, OSError, TimeoutError) as exc:
            failure = _Failure(self._failed(seed, proxy, translate(exc, seed.url)), exc)
        finally:
            if not streaming:
                self._busy -= 1
        assert failure is not None  # every other way out returned or raised
        failure.raise_()

    def _streaming(self, seed: Seed, proxy: ProxyAddress | None, opened: _Opened, started: float) -> Response:
        """The ``StreamedResponse`` of an opened 2xx answer; ``_busy`` counts it until its body ends."""
        response = StreamedResponse(
            url=seed.url,
            status=opened.status,
            headers=opened.headers,
            seed=seed,
            elapsed=time.perf_counter() - started,
            http_version=opened.version,
        )
        self._marked(seed, proxy, response)
        response.stream = BodyStream(
            response,
            _translated(opened.raw if opened.ready is None else _whole(opened.ready), seed.url),
            cap=self.max_body_size,
            body_seconds=self.timeouts.seconds("body"),
            close=opened.close,
        )
        response.stream.on_end(self._stream_ended)
        return response

    def _stream_ended(self, error: BaseException | None, size: int, dropped: bool) -> None:
        self._busy -= 1

    async def _open_aiohttp(self, seed: Seed, proxy: ProxyAddress | None) -> _Opened:
        """Send ``seed`` on its lane's aiohttp session and read the head; the connector holds the per-host cap."""
        session = self._aiohttp_session(self._lane_of(proxy))
        url, headers = self._target(seed)
        response = await session.request(
            seed.method,
            url,
            headers=headers,
            data=seed.body,
            allow_redirects=False,
            proxy=proxy.url if proxy is not None else None,
            timeout=self._client_timeout(),
            trace_request_ctx=seed,  # what ``_wrote`` tells of
        )

        async def close(whole: bool) -> None:
            if whole:
                response.release()  # read to its end: the connection goes back to the pool
                await response.wait_for_close()
            else:
                response.close()  # dropped or failed: the rest of the body is not read, the connection goes

        content = response.content
        # the whole body came with the headers (most pages): no wait, no deadline
        ready = content.read_nowait() if content.is_eof() else None
        version = f"HTTP/{response.version.major}.{response.version.minor}" if response.version else "HTTP/1.1"
        headers = WireHeaders(response.raw_headers)
        coding = headers.get("content-encoding")
        return _Opened(response.status, headers, coding, version, content.iter_chunked(_CHUNK), close, ready)

    async def _open_httpx(self, seed: Seed, proxy: ProxyAddress | None) -> _Opened:
        """Send ``seed`` on its lane's httpx transport and read the head, under the per-host cap
        (HTTP/1.1: an origin that answered over HTTP/2 multiplexes, and is bounded by the host limits only)."""
        lane = self._lane_of(proxy)
        request = self._request(seed, lane)
        transport = self._proxy_transport(lane, proxy) if proxy is not None else self.transport
        hold = await self._per_host.take((id(lane), proxy.url if proxy is not None else None, seed.origin))
        try:
            self._tell(seed)
            response = await transport.handle_async_request(request)
        except BaseException:
            hold.release()
            raise
        response.request = request  # httpx's own transport leaves it unset; the cookie jar reads it
        version = response.extensions.get("http_version", b"HTTP/1.1").decode("ascii", "replace")
        if version != "HTTP/1.1":
            hold.multiplexed()

        async def close(whole: bool) -> None:
            try:
                await response.aclose()
            finally:
                hold.release()

        try:
            if "content-length" in response.headers and "transfer-encoding" in response.headers:
                # h11 lets chunked win; aiohttp refuses, as RFC 9112 allows: the mix is how responses are smuggled
                raise errors.ProtocolError("malformed response: Transfer-Encoding with Content-Length", url=seed.url)
            if "set-cookie" in response.headers:
                lane.cookies.extract_cookies(response)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await close(False)
            raise
        coding = response.headers.get("content-encoding")
        return _Opened(response.status_code, response.headers, coding, version, response.aiter_raw(), close)

    async def _read_whole(self, seed: Seed, opened: _Opened, sink: _Collect) -> _Opened:
        """The body of an opened response into ``sink`` (``opened`` back); the response is closed either way."""
        whole = False
        try:
            await sink.begin(opened, seed.url)
            if opened.ready is not None:
                await self._take(opened.ready, opened.coding, seed.url, sink)
            else:
                await self._read(opened.raw, opened.coding, seed.url, sink)
            whole = True
        finally:
            with anyio.CancelScope(shield=True):
                await opened.close(whole)
        return opened

    # -- aiohttp ----------------------------------------------------------------------------------

    def _aiohttp_session(self, lane: Lane) -> aiohttp.ClientSession:
        """``lane``'s aiohttp session: its own connector (connections, per-host cap) and cookie jar."""
        if lane.session is None:
            self.check_event_loop()
            connector = BoundedConnector(
                limit=self._max_connections,
                limit_per_host=self._per_host_cap or 0,
                ssl=self._ssl_context(),
                resolver=GuardedResolver(),
            )
            lane.session = aiohttp.ClientSession(
                connector=connector,
                # in order and with their own case, as a browser identity sends them
                headers={name.decode(): value.decode() for name, value in lane.headers.raw},
                auto_decompress=False,  # spire's ContentDecoder inflates with bounded output
                # unsafe: keep cookies from hosts that are IP addresses too (a crawl of 127.0.0.1 has them)
                cookie_jar=aiohttp.CookieJar(unsafe=True),
                timeout=self._client_timeout(),
                trace_configs=[self._wire],
            )
        return lane.session

    def _client_timeout(self) -> aiohttp.ClientTimeout:
        """aiohttp's connect and read timeouts of ``timeouts`` (made again only when they change)."""
        timeouts = self.timeouts
        made = self._made_timeout
        if made is None or made[0] is not timeouts:
            # total=None: the request deadline is spire's own cancel scope, around the whole fetch
            client = aiohttp.ClientTimeout(
                total=None, sock_connect=timeouts.seconds("connect"), sock_read=timeouts.seconds("read")
            )
            made = self._made_timeout = (timeouts, client)
        return made[1]

    def _ssl_context(self) -> ssl.SSLContext | bool:
        """aiohttp's own verified context (made once, when aiohttp loads) unless a CA bundle is named."""
        if isinstance(self._verify, str):  # a CA bundle: trust it (and only it)
            return ssl.create_default_context(cafile=self._verify)
        return self._verify

    async def download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        """Stream the decoded body of ``seed`` to ``path``; return the bytes written.

        The body goes to a temporary file in the same folder, renamed to ``path`` when it is complete;
        any error or cancel removes it, so ``path`` never holds a partial file. A status of 400 or
        more is an ``HttpStatusError``; a ``Content-Length`` over the limit (the smaller of ``limit``
        and ``max_body_size``) is refused before the body is read. Redirects are not followed.
        """
        cap = self.max_body_size if limit is None else min(limit, self.max_body_size)
        proxy = self._choose(seed)
        sink = _Download(cap, os.fspath(path))
        self._busy += 1
        failure: _Failure | None = None
        try:
            with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                if self._via_httpx:
                    await self._fetch_httpx(seed, proxy, sink)
                else:
                    await self._fetch_aiohttp(seed, proxy, sink)
                await sink.finish()
        except errors.SpireError as exc:
            await sink.discard()
            raise self._failed(seed, proxy, exc) from exc.__cause__
        except (httpx.HTTPError, httpx.InvalidURL, aiohttp.ClientError, OSError, TimeoutError) as exc:
            await sink.discard()
            failure = _Failure(self._failed(seed, proxy, translate(exc, seed.url)), exc)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await sink.discard()
            raise
        finally:
            self._busy -= 1
        if failure is not None:
            failure.raise_()
        return sink.size

    async def _fetch_aiohttp(self, seed: Seed, proxy: ProxyAddress | None, sink: _Collect) -> _Opened:
        return await self._read_whole(seed, await self._open_aiohttp(seed, proxy), sink)

    def _target(self, seed: Seed) -> tuple[str, Mapping[str, str] | None]:
        """The URL to send, without user name and password, and the seed's headers, with those as Basic auth.

        ``http://user:pw@host/`` authenticates as a browser does, with ``Authorization: Basic``,
        unless an ``Authorization`` is already given (the crawl's ``credentials=``, the seed's or the
        backend's headers): that one wins and the URL's password is not sent.
        """
        url, basic = split_userinfo(seed.url)
        headers = seed.headers
        if basic is None:
            return url, headers
        given = {name.lower() for name in headers or ()}
        if "authorization" not in given and "authorization" not in self._headers:
            headers = {**(headers or {}), "Authorization": basic}
        return url, headers

    async def _read(self, raw: AsyncIterator[bytes], coding: str | None, url: str, sink: _Collect) -> None:
        """The body from its raw chunks into ``sink``, decoded (``coding``: its Content-Encoding) piece by
        piece, within its cap and the body deadline."""
        decoder = ContentDecoder(coding, url=url)
        with deadline(self.timeouts.seconds("body"), url=url, what="body"):
            async for chunk in raw:
                await _fill(sink, decoder, chunk, url)

    async def _take(self, raw: bytes, coding: str | None, url: str, sink: _Collect) -> None:
        """A body already received whole into ``sink``, decoded piece by piece within its cap."""
        await _fill(sink, ContentDecoder(coding, url=url), raw, url)

    # -- httpx ------------------------------------------------------------------------------------

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The httpx transport of the httpx path, created on first use inside the running event loop."""
        if self._transport is None:
            # the address policy judges what a host name resolves to as it connects (a given transport: its own)
            from spire_core.backend.dialer import guarded_transport

            self._transport = self._given_transport or guarded_transport(
                http2=self._http2,
                limits=httpx.Limits(max_connections=self._max_connections),
                verify=self._ssl_context(),
            )
            if self._http3 is not None:  # QUIC where the origin's mode and Alt-Svc choose it, this TCP otherwise
                from spire_core.backend.http3 import Http3Transport

                self._transport = Http3Transport(self._transport, mode=self._http3, verify=self._verify)
        return self._transport

    def _request(self, seed: Seed, lane: Lane) -> httpx.Request:
        url, extra = self._target(seed)
        headers = lane.headers
        if extra:
            headers = headers.copy()
            headers.update(extra)
        request = httpx.Request(
            seed.method,
            url,
            headers=headers,
            content=seed.body,
            extensions={"timeout": self.timeouts.httpx().as_dict()},
        )
        if lane.cookies.jar:
            lane.cookies.set_cookie_header(request)
        return request

    def _proxy_transport(self, lane: Lane, proxy: ProxyAddress) -> httpx.AsyncHTTPTransport:
        found = lane.transports.get(proxy.url)
        if found is None:
            found = lane.transports[proxy.url] = httpx.AsyncHTTPTransport(
                http2=self._http2,
                limits=httpx.Limits(max_connections=self._max_connections),
                verify=self._ssl_context(),
                proxy=proxy.url,
            )
        return found

    async def _fetch_httpx(self, seed: Seed, proxy: ProxyAddress | None, sink: _Collect) -> _Opened:
        return await self._read_whole(seed, await self._open_httpx(seed, proxy), sink)

    async def aclose(self) -> None:
        """Close the connection pool (every identity's); the next request opens a new one."""
        transport, self._transport = self._transport, None
        if transport is not None and transport is not self._given_transport:
            await transport.aclose()
        for lane in (self._lane, *self._lanes.values()):
            await lane.aclose()


@dataclasses.dataclass(frozen=True, slots=True)
class _Failure:
    """A translated error and the third-party exception behind it, raised outside the ``except`` block.

    aiohttp's and httpx's exceptions carry the request (``request_info`` with its headers, a connection
    key with the proxy's ``BasicAuth``), and their reprs print ``Authorization`` and
    ``Proxy-Authorization``: neither is kept as the cause nor, raised here, as the context. Only a bare
    ``OSError`` from the socket stays as the cause.
    """

    error: errors.SpireError
    original: BaseException

    def raise_(self) -> NoReturn:
        kept = None if isinstance(self.original, _CARRIES_REQUEST) else self.original
        raise self.error from kept


#: The third-party exceptions that may hold a request's headers or a proxy's credentials.
_CARRIES_REQUEST = (aiohttp.ClientError, httpx.HTTPError, httpx.InvalidURL)


class WireHeaders(httpx.Headers):
    """The ``Headers`` of a response's (name, value) byte pairs as they came off the wire (aiohttp's
    ``raw_headers``), made in one pass: httpx's own constructor checks and encodes each pair (six calls
    a header, on every response), which bytes do not need. Otherwise exactly httpx's ``Headers``."""

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        super().__init__()
        # what httpx.Headers keeps for each pair of bytes: the name as sent, its lower case, the value
        self._list = [(name, name.lower(), value) for name, value in raw]


@dataclasses.dataclass(frozen=True, slots=True)
class _Opened:
    """A response whose head has been read and whose body has not; ``close(whole)`` ends it
    (``whole``: read to its end, so its connection may be reused)."""

    status: int
    headers: Headers
    #: Its Content-Encoding (``None``: it has none), read once for the cap, the decoder and the wire body.
    coding: str | None
    version: str
    raw: AsyncIterator[bytes]
    close: Callable[[bool], Awaitable[None]]
    #: The whole body, when it came with the head (aiohttp): no read to wait for.
    ready: bytes | None = None


async def _whole(body: bytes) -> AsyncIterator[bytes]:
    """A body that came whole with its head, as the chunks of a stream."""
    for start in range(0, len(body), _CHUNK):
        yield body[start : start + _CHUNK]


async def _translated(raw: AsyncIterator[bytes], url: str) -> AsyncIterator[bytes]:
    """``raw``'s chunks, aiohttp's and httpx's errors translated as they arise mid-body."""
    try:
        async for chunk in raw:
            yield chunk
    except (httpx.HTTPError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise translate(exc, url) from None


class GuardedResolver(aiohttp.ThreadedResolver):
    """aiohttp's resolver, with each answer for the host of the request being sent judged by its crawl's
    address policy before a connection is opened (a name that resolves to a private address)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        found = await super().resolve(host, port, family)
        check_resolved(host, [answer["host"] for answer in found])
        return found


async def _fill(sink: _Collect, decoder: ContentDecoder, chunk: bytes, url: str) -> None:
    """One raw chunk into ``sink``, decoded, each piece counted against the cap before it is kept."""
    sink.received(chunk)
    cap = sink.cap
    for piece in decoder.feed(chunk):
        sink.size += len(piece)
        if sink.size > cap:
            raise errors.BodyLimitError(f"body passed the {cap}-byte cap", url=url)
        await sink.write(piece)


class _Collect:
    """Where a body goes as it is read: into memory, up to ``cap`` decoded bytes."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.size = 0
        self._chunks: list[bytes] = []
        self._wire: list[bytes] = []

    async def begin(self, opened: _Opened, url: str) -> None:
        """Refuse at once a body whose declared, uncompressed length is over the cap."""
        declared = opened.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.cap and opened.coding is None:
            raise errors.BodyLimitError(f"body of {declared} bytes is over the {self.cap}-byte cap", url=url)

    async def write(self, piece: bytes) -> None:
        self._chunks.append(piece)

    def body(self) -> bytes:
        return b"".join(self._chunks)

    # -- the wire bytes, kept for the WARC recorder ------------------------------------------------

    def received(self, chunk: bytes) -> None:
        """Keep a raw chunk as it came (content coding and all); smaller than the decoded body it makes."""
        self._wire.append(chunk)

    def wire_body(self) -> bytes:
        """The body as it came over the wire, before its content coding was undone."""
        return b"".join(self._wire)


class _Download(_Collect):
    """A body streamed to a temporary file beside ``path``, renamed to ``path`` only when complete."""

    def __init__(self, cap: int, path: str) -> None:
        super().__init__(cap)
        self.path = path
        self._folder, self._name = os.path.split(os.path.abspath(path))
        self._temp: str | None = None
        self._file: anyio.AsyncFile[bytes] | None = None
        self._url: str | None = None

    async def begin(self, opened: _Opened, url: str) -> None:
        if opened.status >= 400:
            raise errors.HttpStatusError(opened.status, url=url)
        await super().begin(opened, url)
        self._url = url
        with self._local():
            self._temp = await anyio.to_thread.run_sync(_temp_file, self._folder, self._name)
            self._file = await anyio.open_file(self._temp, "wb")

    def received(self, chunk: bytes) -> None:
        """A download keeps no wire bytes: its body goes to a file, not to a ``Response``."""

    async def write(self, piece: bytes) -> None:
        assert self._file is not None  # begin opened it
        with self._local():
            await self._file.write(piece)

    async def finish(self) -> None:
        if self._file is None or self._temp is None:
            return
        with self._local():
            file, self._file = self._file, None
            await file.aclose()  # flushes: a full disk can fail here
            await anyio.to_thread.run_sync(os.replace, self._temp, self.path)
        self._temp = None

    @contextlib.contextmanager
    def _local(self) -> Iterator[None]:
        """An ``OSError`` from this machine's disk as ``LocalFileError``: not the network's, never retried."""
        try:
            yield
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise errors.LocalFileError(
                f"cannot write the download to {self.path} ({reason}): free some space or choose another path",
                url=self._url,
                path=self.path,
            ) from exc

    async def discard(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            with contextlib.suppress(OSError):  # its flush fails again on a full disk; the file goes anyway
                await file.aclose()
        if self._temp is not None:
            await anyio.to_thread.run_sync(_remove, self._temp)
            self._temp = None


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without its user name and password, and the ``Authorization: Basic`` value they spell.

    ``("http://host/x", None)`` when the URL carries none. Percent-escapes in them are undone first,
    as a browser does (``us%40er`` is the user ``us@er``).
    """
    if "@" not in url:
        return url, None  # no userinfo can be in it (most URLs): no parse on every request
    parts = urllib.parse.urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    if not at:
        return url, None
    start = url.index("//") + 2
    bare = url[:start] + url[start + len(userinfo) + 1 :]
    user, _, password = userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return bare, "Basic " + base64.b64encode(pair).decode("ascii")


def _temp_file(folder: str, name: str) -> str:
    handle, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
    os.close(handle)
    return temp


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
