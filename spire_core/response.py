"""``Response``: what a fetch produced, with its text decoded once, on first use."""

from __future__ import annotations

import codecs
import re
from functools import cached_property

import charset_normalizer
import httpx

from spire_core.blocks import BlockRules, BlockSignal
from spire_core.seed import Seed

__all__ = ["Headers", "Response", "decode_body"]

#: Case-insensitive, multi-valued HTTP headers.
Headers = httpx.Headers

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.IGNORECASE)
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)""",
    re.IGNORECASE,
)


def _known(encoding: str | None) -> str | None:
    if not encoding:
        return None
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return None


def _detect(sample: bytes) -> str:
    """Detect an encoding; among equally likely ones prefer windows-1252, the web's own default."""
    results = list(charset_normalizer.from_bytes(sample))
    if not results:
        return "cp1252"
    best = results[0]
    tied = {m.encoding for m in results if (m.chaos, m.coherence) == (best.chaos, best.coherence)}
    if "cp1252" in tied:
        return "cp1252"
    return _known(best.encoding) or "cp1252"


def _encoding(body: bytes, content_type: str | None) -> tuple[str, int]:
    """The body's encoding, and how many leading bytes (a BOM) to skip."""
    for bom, bom_encoding in _BOMS:
        if body.startswith(bom):
            return bom_encoding, len(bom)
    header = _HEADER_CHARSET.search(content_type) if content_type else None
    declared = _known(header.group(1)) if header else None
    if declared is None:
        meta = _META_CHARSET.search(body[:4096])
        declared = _known(meta.group(1).decode("ascii", "replace")) if meta else None
    if declared is not None:
        return declared, 0
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return _detect(body[:65536]), 0
    return "utf-8", 0


def decode_body(body: bytes, content_type: str | None = None) -> str:
    """Decode a body by its BOM, then the Content-Type charset, then a meta charset, then detection."""
    encoding, skip = _encoding(body, content_type)
    return body[skip:].decode(encoding, errors="replace")


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

    def __init__(
        self,
        *,
        url: str,
        status: int,
        headers: Headers | None = None,
        body: bytes = b"",
        seed: Seed | None = None,
        elapsed: float = 0.0,
        redirects: tuple[str, ...] = (),
        http_version: str | None = None,
    ) -> None:
        self.url = url
        self.status = status
        self.headers = headers if headers is not None else Headers()
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
        return _encoding(self.body, self.headers.get("content-type"))

    @property
    def encoding(self) -> str:
        """The body's encoding: BOM, Content-Type charset, meta charset, then detection."""
        return self._decoding[0]

    @cached_property
    def text(self) -> str:
        """The body decoded to text (once, on first use)."""
        encoding, skip = self._decoding
        return self.body[skip:].decode(encoding, errors="replace")
