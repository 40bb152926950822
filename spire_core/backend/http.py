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
import os
import socket
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import timedelta

import aiohttp
import anyio
import anyio.to_thread
import httpx

from spire_core import errors
from spire_core.backend.abilities import PoolStats
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from spire_core.session.addresses import check_resolved
from spire_core.session.credentials import CREDENTIAL_HEADERS
from spire_core.session.decoding import OFFERED, ContentDecoder
from spire_core.session.identity import Identity
from spire_core.session.proxies import ProxyAddress, ProxyPool
from spire_core.session.redact import redact_text
from spire_core.session.timeouts import Timeouts, deadline

__all__ = ["DEFAULT_USER_AGENT", "GuardedResolver", "HttpBackend", "PoolStats", "Timeouts", "translate"]

DEFAULT_USER_AGENT = "spire/0.1 (+a polite crawler)"
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
        return errors.ProtocolError(f"the server closed before the end of the body: {message}", url=url)
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
# parser raises ClientResponseError for the same framing, so both paths call it "protocol".
_MALFORMED = ("invalid", "malformed", "can not decode", "cannot decode", "illegal", "bad chunk", "content-length")


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
    """

    def __init__(
        self,
        *,
        timeout: float | timedelta | Timeouts | None = None,
        max_body_size: int = DEFAULT_MAX_BODY,
        headers: Mapping[str, str] | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        http2: bool = False,
        max_connections: int = 256,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
        proxies: ProxyPool | None = None,
        identity: Identity | None = None,
    ) -> None:
        if http2 and importlib.util.find_spec("h2") is None:
            raise errors.ConfigError("http2=True needs the h2 package: pip install 'spire[http2]'")
        if proxies is not None and transport is not None:
            raise errors.ConfigError("give HttpBackend a proxy pool or a transport, not both")
        if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 0:
            raise errors.ConfigError(
                f"max_body_size is a number of bytes, 0 or more (default {DEFAULT_MAX_BODY}), not {max_body_size!r}"
            )
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise errors.ConfigError(f"max_connections must be 1 or more, not {max_connections!r}")
        #: The proxies requests go through (``None``: direct).
        self.proxies = proxies
        self._proxy_transports: dict[str, httpx.AsyncHTTPTransport] = {}
        self._busy = 0
        self._own_timeouts = timeout is not None
        self.timeouts = Timeouts() if timeout is None else Timeouts.of(timeout)
        self.max_body_size = max_body_size
        #: The browser identity whose headers (in its order) every request carries, if any.
        self.identity = identity
        base = identity.headers() if identity is not None else [("User-Agent", user_agent), ("Accept", "*/*")]
        self._headers = httpx.Headers(base if identity is not None else [*base, ("Accept-Encoding", OFFERED)])
        for name, value in (headers or {}).items():
            if name.lower() in CREDENTIAL_HEADERS:
                raise errors.ConfigError(
                    f"HttpBackend(headers=) would send {name} to every host: give it to the origin it belongs to "
                    f"with Crawler(credentials={{'https://site.example': {{'{name}': ...}}}})"
                )
            self._headers[name] = value
        self._http2 = http2
        self._max_connections = max_connections
        self._verify = verify
        self._given_transport = transport
        self._session: aiohttp.ClientSession | None = None
        self._made_timeout: tuple[Timeouts, aiohttp.ClientTimeout] | None = None
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

    @property
    def _via_httpx(self) -> bool:
        return self._http2 or self._given_transport is not None

    async def fetch(self, seed: Seed) -> Response:
        """Send ``seed`` as written and read its body, up to the cap, within the body timeout.

        Through a proxy pool, the pool picks the proxy and sees what happened: an error, or the
        response (where a block page is a strike).
        """
        proxy = (
            self.proxies.choose(seed.origin, attempt=seed.attempt, key=seed.unique_key)
            if self.proxies is not None
            else None
        )
        started = time.perf_counter()
        self._busy += 1
        failure: _Failure | None = None
        try:
            with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                sink = _Collect(self.max_body_size)
                if self._via_httpx:
                    status, headers, version = await self._fetch_httpx(seed, proxy, sink)
                else:
                    status, headers, version = await self._fetch_aiohttp(seed, proxy, sink)
            if proxy is not None and status == 407:
                raise errors.ProxyError("the proxy refused the request (407 Proxy Authentication Required)")
        except errors.SpireError as exc:
            raise self._failed(seed, proxy, exc) from exc.__cause__
        except (httpx.HTTPError, httpx.InvalidURL, aiohttp.ClientError, OSError, TimeoutError) as exc:
            failure = _Failure(self._failed(seed, proxy, translate(exc, seed.url)), exc)
        finally:
            self._busy -= 1
        if failure is not None:
            failure.raise_()
        body = sink.body()
        response = Response(
            url=seed.url,
            status=status,
            headers=headers,
            body=body,
            seed=seed,
            elapsed=time.perf_counter() - started,
            http_version=version,
        )
        response.wire_body = sink.wire_body() if headers.get("content-encoding") else body
        if self.identity is not None:
            response.identity = self.identity.name
        if proxy is not None and self.proxies is not None:
            response.proxy = proxy.redacted
            self.proxies.observe(seed.origin, proxy, response, key=seed.unique_key)
        return response

    def pool_stats(self) -> PoolStats:
        """Requests holding a connection (from send to the end of the body) and the pool's cap."""
        return PoolStats(busy=self._busy, max_connections=self._max_connections)

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

    # -- aiohttp ----------------------------------------------------------------------------------

    def _aiohttp_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self.check_event_loop()
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                ssl=self._ssl_context(),
                resolver=GuardedResolver(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # in order and with their own case, as a browser identity sends them
                headers={name.decode(): value.decode() for name, value in self._headers.raw},
                auto_decompress=False,  # spire's ContentDecoder inflates with bounded output
                # unsafe: keep cookies from hosts that are IP addresses too (a crawl of 127.0.0.1 has them)
                cookie_jar=aiohttp.CookieJar(unsafe=True),
                timeout=self._client_timeout(),
            )
        return self._session

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
        proxy = (
            self.proxies.choose(seed.origin, attempt=seed.attempt, key=seed.unique_key)
            if self.proxies is not None
            else None
        )
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

    async def _fetch_aiohttp(self, seed: Seed, proxy: ProxyAddress | None, sink: _Collect) -> tuple[int, Headers, str]:
        session = self._aiohttp_session()
        url, headers = self._target(seed)
        async with session.request(
            seed.method,
            url,
            headers=headers,
            data=seed.body,
            allow_redirects=False,
            proxy=proxy.url if proxy is not None else None,
            timeout=self._client_timeout(),
        ) as response:
            headers = Headers(response.raw_headers)
            await sink.begin(response.status, headers, seed.url)
            content = response.content
            if content.is_eof():  # the whole body came with the headers (most pages): no wait, no deadline
                await self._take(content.read_nowait(), headers, seed.url, sink)
            else:
                await self._read(content.iter_chunked(_CHUNK), headers, seed.url, sink)
            version = f"HTTP/{response.version.major}.{response.version.minor}" if response.version else "HTTP/1.1"
            return response.status, headers, version

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

    async def _read(self, raw: AsyncIterator[bytes], headers: Headers, url: str, sink: _Collect) -> None:
        """The body from its raw chunks into ``sink``, decoded piece by piece, within its cap and the body deadline."""
        decoder = ContentDecoder(headers.get("content-encoding"), url=url)
        with deadline(self.timeouts.seconds("body"), url=url, what="body"):
            async for chunk in raw:
                await _fill(sink, decoder, chunk, url)

    async def _take(self, raw: bytes, headers: Headers, url: str, sink: _Collect) -> None:
        """A body already received whole into ``sink``, decoded piece by piece within its cap."""
        await _fill(sink, ContentDecoder(headers.get("content-encoding"), url=url), raw, url)

    # -- httpx ------------------------------------------------------------------------------------

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The httpx transport of the httpx path, created on first use inside the running event loop."""
        if self._transport is None:
            self._transport = self._given_transport or httpx.AsyncHTTPTransport(
                http2=True,
                limits=httpx.Limits(max_connections=self._max_connections),
                verify=self._ssl_context(),
            )
        return self._transport

    def _request(self, seed: Seed) -> httpx.Request:
        url, extra = self._target(seed)
        headers = self._headers
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
        if self.cookies.jar:
            self.cookies.set_cookie_header(request)
        return request

    def _proxy_transport(self, proxy: ProxyAddress) -> httpx.AsyncHTTPTransport:
        found = self._proxy_transports.get(proxy.url)
        if found is None:
            found = self._proxy_transports[proxy.url] = httpx.AsyncHTTPTransport(
                http2=self._http2,
                limits=httpx.Limits(max_connections=self._max_connections),
                verify=self._ssl_context(),
                proxy=proxy.url,
            )
        return found

    async def _fetch_httpx(self, seed: Seed, proxy: ProxyAddress | None, sink: _Collect) -> tuple[int, Headers, str]:
        request = self._request(seed)
        transport = self._proxy_transport(proxy) if proxy is not None else self.transport
        response = await transport.handle_async_request(request)
        response.request = request  # httpx's own transport leaves it unset; the cookie jar reads it
        try:
            if "content-length" in response.headers and "transfer-encoding" in response.headers:
                # h11 lets chunked win; aiohttp refuses, as RFC 9112 allows: the mix is how responses are smuggled
                raise errors.ProtocolError("malformed response: Transfer-Encoding with Content-Length", url=seed.url)
            if "set-cookie" in response.headers:
                self.cookies.extract_cookies(response)
            await sink.begin(response.status_code, response.headers, seed.url)
            await self._read(response.aiter_raw(), response.headers, seed.url, sink)
        finally:
            await response.aclose()
        version = response.extensions.get("http_version", b"HTTP/1.1").decode("ascii", "replace")
        return response.status_code, response.headers, version

    async def aclose(self) -> None:
        """Close the connection pool; the next request opens a new one."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        transport, self._transport = self._transport, None
        if transport is not None and transport is not self._given_transport:
            await transport.aclose()
        proxied, self._proxy_transports = self._proxy_transports, {}
        for each in proxied.values():
            await each.aclose()


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

    def raise_(self) -> None:
        kept = None if isinstance(self.original, _CARRIES_REQUEST) else self.original
        raise self.error from kept


#: The third-party exceptions that may hold a request's headers or a proxy's credentials.
_CARRIES_REQUEST = (aiohttp.ClientError, httpx.HTTPError, httpx.InvalidURL)


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

    async def begin(self, status: int, headers: Headers, url: str) -> None:
        """Refuse at once a body whose declared, uncompressed length is over the cap."""
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.cap and "content-encoding" not in headers:
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

    async def begin(self, status: int, headers: Headers, url: str) -> None:
        if status >= 400:
            raise errors.HttpStatusError(status, url=url)
        await super().begin(status, headers, url)
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
