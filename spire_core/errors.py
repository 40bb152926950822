"""Every error spire raises, in one tree.

    SpireError                      category: what kind of failure, for grouping and retry decisions
    ├── ConfigError                 a mistake in how spire was set up (raised early, never mid-crawl)
    ├── InvalidUrl                  a URL that cannot be crawled (unparsable, not http(s), too long)
    ├── FetchError                  the request did not produce a usable response
    │   ├── FetchTimeout            connect, read, body or request deadline  category "timeout"
    │   ├── ConnectError            refused, reset (mid-body too), DNS       category "connect"
    │   ├── TlsError                certificate or handshake                 category "tls"
    │   ├── ProxyError              the proxy failed                         category "proxy"
    │   │   └── ProxyTargetError    the proxy works but could not reach the site  "proxy_target"
    │   ├── ProtocolError           the response broke HTTP framing           category "protocol"
    │   │   └── IncompleteBody      the server closed before the end of the body  "incomplete_body"
    │   ├── BodyLimitError          the body passed its size cap             category "body_limit"
    │   ├── DecodeError             a content coding not offered or corrupt  category "decode"
    │   ├── TooManyRedirects        more hops than allowed                   category "redirect"
    │   ├── HttpStatusError         a status the crawl treats as failure     category "status"
    │   ├── RetryWaitTooLong        the server asked to wait past max_wait   category "retry_wait"
    │   ├── PrivateAddress          a private address the crawl did not start on  "private_address"
    │   └── NotArchived             a WARC replay holds no record of the URL  category "not_archived"
    ├── Blocked                     a block page (captcha, challenge)        category "blocked"
    ├── RobotsDisallowed            robots.txt keeps the URL out (a download)  category "robots"
    ├── ContentLimitError           a page passed a bound on the work done on it (Markdown)  "content_limit"
    ├── DatasetError                a dataset's file or table is unusable    category "dataset"
    ├── LocalFileError              a local file cannot be written (full disk, a folder)  "local_file"
    ├── InvalidItem                 an item failed its model's validation    category "invalid_item"
    ├── WorkerCrashed               a worker process died with the seed      category "worker"
    ├── CacheError                  the response cache's file is unusable    category "cache"
    ├── WarcError                   a WARC file cannot be written or read    category "warc"
    ├── BadRecord                   a Redis queue record that is no seed     category "bad_record"
    └── ShutDown                    the crawl was shut down                  category "shut_down"

The errors of one part live beside it: ``PrivateAddress`` in ``session/addresses.py``, ``NotArchived``
and ``WarcError`` in ``backend/warc.py``, ``CacheError`` in ``backend/cache.py``, ``BadRecord`` in
``frontier/redis/records.py``.

Third-party exceptions (httpx, selenium, redis) are translated where they arise; code using
spire catches only these types. Every error carries ``url``, ``attempts`` (how many tries were
made before it was final) and ``proxy`` (the proxy that carried the last try, credentials redacted).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "Blocked",
    "BodyLimitError",
    "ConfigError",
    "ConnectError",
    "ContentLimitError",
    "DatasetError",
    "DecodeError",
    "FetchError",
    "HttpStatusError",
    "InvalidItem",
    "InvalidUrl",
    "LocalFileError",
    "ProtocolError",
    "IncompleteBody",
    "ProxyError",
    "ProxyTargetError",
    "RetryWaitTooLong",
    "ShutDown",
    "SpireError",
    "FetchTimeout",
    "TlsError",
    "TooManyRedirects",
    "WorkerCrashed",
]

#: The error categories ``RetryPolicy.transient()`` retries: worth trying again later.
TRANSIENT_CATEGORIES = frozenset({"timeout", "connect", "tls", "proxy", "proxy_target", "incomplete_body"})
#: The statuses ``RetryPolicy.transient()`` retries.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class SpireError(Exception):
    """The root of every error spire raises."""

    category: ClassVar[str] = "error"

    def __init__(self, message: str, *, url: str | None = None, proxy: str | None = None) -> None:
        super().__init__(message)
        self.url = url
        #: How many tries were made when this error became final (the retry policy sets it).
        self.attempts = 1
        #: The proxy that carried the request, credentials redacted; ``None`` when sent direct.
        self.proxy = proxy

    @property
    def transient(self) -> bool:
        """Whether ``RetryPolicy.transient()`` tries this error again (a timeout, a reset, a 503...)."""
        return self.category in TRANSIENT_CATEGORIES

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message} ({self.url})" if self.url and self.url not in message else message

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its message and attributes, whatever the subclass's ``__init__`` takes: an error
        crosses from a worker process to the crawl's (``processes=N``) as it was raised."""
        return (_rebuilt, (type(self), self.args), self.__dict__)


def _rebuilt(kind: type[SpireError], args: tuple[Any, ...]) -> SpireError:
    """An error of type ``kind`` with ``args``, its own ``__init__`` skipped (its state follows)."""
    error = kind.__new__(kind)
    Exception.__init__(error, *args)
    return error


class ConfigError(SpireError, ValueError):
    """A mistake in configuration: a bad option, an unknown handler annotation, a duplicate tag."""

    category = "config"


class InvalidUrl(SpireError, ValueError):
    """A URL that cannot be crawled."""

    category = "invalid_url"


class FetchError(SpireError):
    """The request did not produce a usable response."""

    category = "fetch"


class FetchTimeout(FetchError):
    """A connect, read or whole-body timeout."""

    category = "timeout"


#: The name ``FetchTimeout`` had before: kept so code written against it still runs.
TimeoutError_ = FetchTimeout


class ConnectError(FetchError):
    """The connection was refused, reset or could not be resolved."""

    category = "connect"


class TlsError(FetchError):
    """A TLS handshake or certificate failure."""

    category = "tls"


class ProxyError(FetchError):
    """The proxy failed to carry the request."""

    category = "proxy"


class ProxyTargetError(ProxyError):
    """The proxy answered, but it could not reach the site (a 502 or 504 to CONNECT)."""

    category = "proxy_target"


class ProtocolError(FetchError):
    """The response broke HTTP's framing: malformed chunked encoding, an unparsable status line or header."""

    category = "protocol"


class IncompleteBody(ProtocolError):
    """The server closed before the end of the body (short of its ``Content-Length``, or without its
    last chunk; a connection reset mid-body is a ``ConnectError``). Tried again by
    ``RetryPolicy.transient()``: a server cut short usually answers in full the next time."""

    category = "incomplete_body"


class BodyLimitError(FetchError):
    """The decoded body passed its size cap."""

    category = "body_limit"


class DecodeError(FetchError):
    """The body's content coding was not one spire offered, or it could not be decoded."""

    category = "decode"


class TooManyRedirects(FetchError):
    """A redirect chain longer than allowed."""

    category = "redirect"


class HttpStatusError(FetchError):
    """A response whose status the crawl treats as a failure."""

    category = "status"

    def __init__(self, status: int, *, url: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP status {status}", url=url)
        self.status = status
        self.retry_after = retry_after
        #: The response that carried the status, when there was one.
        self.response: Any = None

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT_STATUSES


class RetryWaitTooLong(FetchError):
    """The server asked for a wait (``Retry-After``) longer than the retry policy's ``max_wait``."""

    category = "retry_wait"

    def __init__(self, wait: float, max_wait: float, *, url: str | None = None) -> None:
        shown = "for ever" if wait == float("inf") else f"{wait:g} s"
        super().__init__(f"the server asked to wait {shown}, more than max_wait ({max_wait:g} s)", url=url)
        self.wait = wait
        self.max_wait = max_wait


class Blocked(SpireError):
    """A block page: a challenge, captcha or block from an anti-bot vendor."""

    category = "blocked"

    def __init__(self, vendor: str, kind: str, *, url: str | None = None, response: Any = None) -> None:
        super().__init__(f"blocked by {vendor} ({kind})", url=url)
        self.vendor = vendor
        self.kind = kind
        #: The block page itself, when there was one.
        self.response: Any = response


class RobotsDisallowed(SpireError):
    """robots.txt keeps this URL out: a download a handler asked for is not sent (``reason`` says why:
    ``robots``, or ``robots_unreachable`` when the site's robots.txt could not be read)."""

    category = "robots"


class ContentLimitError(SpireError):
    """A page passed a bound on the work spire does with it: too large to convert to Markdown, or its
    Markdown too long or too slow to write. The page fails; the crawl goes on."""

    category = "content_limit"


class DatasetError(SpireError):
    """A dataset's file or table is unusable: a corrupt line, a foreign header, a value it cannot hold."""

    category = "dataset"

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        #: The 1-based line (JSON Lines, CSV) or row id (SQLite) at fault, when there is one.
        self.line = line


class LocalFileError(SpireError):
    """A file on this machine could not be written (a download's target: a full disk, a folder, no
    permission). Not a network failure: it is not retried, the same disk would fail the same way."""

    category = "local_file"

    def __init__(self, message: str, *, url: str | None = None, path: str | None = None) -> None:
        super().__init__(message, url=url)
        #: The file that could not be written.
        self.path = path


class InvalidItem(SpireError, ValueError):
    """An item pushed to a dataset failed its model's validation; the message keeps every field's problem."""

    category = "invalid_item"

    def __init__(self, message: str, *, model: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.model = model
        #: pydantic's error details, one dict per field problem (``loc``, ``msg``, ``type``, ``input``).
        self.errors = errors or []


class WorkerCrashed(SpireError):
    """A worker process of ``processes=N`` died (killed, out of memory, a crash in native code)
    while it held the seed; ``deaths`` counts the workers the seed was in when they died."""

    category = "worker"

    def __init__(self, message: str, *, url: str | None = None, deaths: int = 1) -> None:
        super().__init__(message, url=url)
        self.deaths = deaths


class ShutDown(SpireError):
    """The crawl was shut down while the request was in flight."""

    category = "shut_down"

    def __init__(self, message: str = "crawl shut down", *, url: str | None = None) -> None:
        super().__init__(message, url=url)
