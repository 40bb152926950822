"""``Response``: what a fetch produced, with its text decoded once, on first use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from spire_core.blocks import BlockRules, BlockSignal
from spire_core.encoding import decode, sniff_encoding
from spire_core.errors import ConfigError
from spire_core.seed import Seed

__all__ = ["Headers", "HeadersLike", "Response", "as_headers", "decode_body"]

if TYPE_CHECKING:
    import httpx

    #: Case-insensitive, multi-valued HTTP headers.
    Headers = httpx.Headers
    #: What ``Response(headers=...)`` takes: ``Headers``, a mapping, or (name, value) pairs.
    HeadersLike = Headers | Mapping[str, str] | Iterable[tuple[str, str]]
else:

    def __getattr__(name: str) -> Any:
        """``Headers`` (httpx's) and ``HeadersLike``, on first use: ``import spire`` leaves httpx alone
        (the first response imports it)."""
        if name not in ("Headers", "HeadersLike"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import httpx

        if name == "Headers":
            return httpx.Headers
        return httpx.Headers | Mapping[str, str] | Iterable[tuple[str, str]]


def as_headers(headers: HeadersLike | None) -> Headers:
    """``headers`` as ``Headers``; ``ConfigError`` at once for anything that cannot be read as headers."""
    import httpx  # once loaded, a lookup in sys.modules

    if headers is None:
        return httpx.Headers()
    if isinstance(headers, httpx.Headers):
        return headers
    if isinstance(headers, str | bytes):
        raise ConfigError(f"Response headers are a mapping or (name, value) pairs, not a string: {headers!r}")
    try:
        return httpx.Headers(headers if isinstance(headers, Mapping) else list(headers))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"Response headers are a mapping or (name, value) pairs of strings: {exc}") from None


def decode_body(body: bytes, content_type: str | None = None) -> str:
    """Decode a body as a browser would: BOM, Content-Type charset, meta prescan, then detection."""
    encoding, skip = sniff_encoding(body, content_type)
    return decode(body[skip:], encoding)


class Response:
    """A fetched response: final URL, status, headers, body bytes and their decoded text.

    ``text`` is decoded once, on first use, and cached.
    """

    __slots__ = (
        "__dict__",
        "body",
        "elapsed",
        "headers",
        "http_version",
        "identity",
        "proxy",
        "redirects",
        "seed",
        "status",
        "url",
    )

    #: Whether a cache served this response (``CachingBackend``, a WARC replay) rather than the site.
    from_cache: bool = False
    #: Whether the site confirmed the cached response with a 304 to a conditional request.
    revalidated: bool = False
    #: How an adaptive backend fetched it (``"http"``, ``"rendered"``, ``"browser-only"``...); ``None`` otherwise.
    rendering: str | None = None
    #: The response fetched for the same seed before this one, which it replaced (an adaptive backend's
    #: HTTP fetch of a page it then rendered): one more request, counted and logged on the request path.
    fetched_before: Response | None = None
    #: The body as it came over the wire, its content coding not undone (``body`` when it had none), for
    #: the WARC recorder; ``None`` when the backend had no such bytes (a browser, a test seam).
    wire_body: bytes | None = None

    def __init__(
        self,
        *,
        url: str,
        status: int,
        headers: HeadersLike | None = None,
        body: bytes = b"",
        seed: Seed | None = None,
        elapsed: float = 0.0,
        redirects: tuple[str, ...] = (),
        http_version: str | None = None,
    ) -> None:
        self.url = url
        self.status = status
        self.headers = as_headers(headers)
        self.body = body
        self.seed = seed
        self.elapsed = elapsed
        #: The URLs that redirected here, first request first.
        self.redirects = redirects
        #: The protocol the response came over (``"HTTP/1.1"``, ``"HTTP/2"``), when the backend knows it.
        self.http_version = http_version
        #: The proxy that carried it, credentials redacted; ``None`` when it came direct.
        self.proxy: str | None = None
        #: The name of the browser identity that asked for it, if any.
        self.identity: str | None = None

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.url}>"

    @property
    def content_type(self) -> str | None:
        """The media type from Content-Type, lower case, without parameters."""
        value = self.headers.get("content-type")
        return value.split(";", 1)[0].strip().lower() if value else None

    @property
    def ok(self) -> bool:
        """Whether the status is below 400."""
        return self.status < 400

    @property
    def is_redirect(self) -> bool:
        return self.status in (301, 302, 303, 307, 308) and "location" in self.headers

    def block(self, rules: BlockRules | None = None) -> BlockSignal | None:
        """Whether this is a block page: the signal of the first of ``rules`` (the built-in vendor rules
        by default) that matches, or ``None``. A bare 403 or 429 is not a block unless ``rules`` say so."""
        return (rules if rules is not None else BlockRules.builtin()).check(self)

    @cached_property
    def _decoding(self) -> tuple[str, int]:
        return sniff_encoding(self.body, self.headers.get("content-type"))

    @property
    def encoding(self) -> str:
        """The WHATWG name of the body's encoding ("utf-8", "windows-1252", "shift_jis"...): by its BOM,
        the Content-Type charset, a ``<meta>`` in its first 1024 bytes, then detection (see
        ``spire_core.encoding``)."""
        return self._decoding[0]

    @cached_property
    def text(self) -> str:
        """The body decoded to text (once, on first use)."""
        encoding, skip = self._decoding
        return decode(self.body[skip:], encoding)
