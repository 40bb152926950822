"""Sitemaps: finding them, and reading XML, gzipped and plain-text sitemaps, indexes and feeds.

``parse_sitemap(data)`` reads one file's bytes: gzip is recognised by its magic bytes, an XML
``<urlset>`` gives page URLs, a ``<sitemapindex>`` gives child sitemaps, an RSS 2.0 or Atom (0.3,
1.0) feed gives the page URL of each item or entry (its ``<link>``; an Atom entry's first alternate
link), and anything else is read as a plain-text sitemap (one URL a line). Whitespace before the
XML declaration is ignored. The parse is streaming and bounded: at most 50 MiB of
decompressed data and 50,000 URLs a file (the sitemap protocol's limits). What cannot be read (bad
XML, a relative URL, a corrupt gzip stream) is counted in ``problems``, never raised.

    sitemap = parse_sitemap(body)
    sitemap.urls, sitemap.sitemaps, sitemap.problems

XML is parsed by lxml with entity expansion off, no DTD loading and no network: an entity
declared in the document is never substituted (a ``<loc>`` that uses one is a problem), and libxml2's
own amplification guard stops a "billion laughs" document as malformed. ``<loc>`` elements of the
image, video and news extensions (any namespace that is not the sitemap's) are not pages: skipped.

``SitemapReader`` fetches sitemaps through a ``Backend``, follows an index only to sitemaps on the
same host, opens at most 50 files, and opens no new file once a URL budget is spent:

    reader = SitemapReader(backend)
    async for url in reader.read(discover(site_url, rules.sitemaps()), budget=500):
        ...
"""

from __future__ import annotations

import dataclasses
import functools
import re
import zlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any

import ada_url
import anyio
from lxml import etree

from spire_core import errors
from spire_core import url as urls
from spire_core.backend.base import Backend
from spire_core.backend.fetcher import Fetcher
from spire_core.response import Response

__all__ = [
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_FILES",
    "MAX_SITEMAP_URLS",
    "Sitemap",
    "SitemapReader",
    "SitemapStats",
    "discover",
    "parse_sitemap",
    "read_sitemap",
]

#: The most decompressed data read from one sitemap file.
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
#: The most URLs (or child sitemaps) taken from one sitemap file.
MAX_SITEMAP_URLS = 50_000
#: The most sitemap files one reader opens.
MAX_SITEMAP_FILES = 50

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1024 * 1024
_WHITESPACE = b" \t\r\n"
_LINE = re.compile(rb"[^\r\n]+")
_BREAK = re.compile(rb"[\r\n]")
_MAX_LINE = 64 * 1024  # a plain-text line longer than this is not a URL
_NOTES = 10  # problems described in words; the rest are only counted
_THREAD_ABOVE = 1024 * 1024  # bodies this large are parsed off the event loop
# Namespaces a sitemap's own <url>, <sitemap> and <loc> may use; extensions use others.
_SITEMAP_NAMESPACES = frozenset(
    {
        "",
        "http://www.sitemaps.org/schemas/sitemap/0.9",
        "https://www.sitemaps.org/schemas/sitemap/0.9",
        "http://www.google.com/schemas/sitemap/0.84",
        "http://www.google.com/schemas/sitemap/0.9",
    }
)

# RSS 2.0 (no namespace), Atom 1.0 and Atom 0.3: feeds that sitemaps.org and Google accept as sitemaps.
_FEED_NAMESPACES = frozenset({"", "http://www.w3.org/2005/Atom", "http://purl.org/atom/ns#"})
_TAGS = ("{*}loc", "{*}url", "{*}sitemap", "{*}link", "{*}guid", "{*}item", "{*}entry")


@dataclasses.dataclass(frozen=True, slots=True)
class Sitemap:
    """What one sitemap file holds: page URLs, or the child sitemaps of an index, and its problems."""

    urls: tuple[str, ...] = ()
    sitemaps: tuple[str, ...] = ()
    #: How many things could not be read: malformed XML, a bad URL, a corrupt gzip stream, a cap hit.
    problems: int = 0
    #: The first few problems, described.
    notes: tuple[str, ...] = ()
    #: Whether the file was cut short by the size or URL cap.
    truncated: bool = False
    #: The ``<lastmod>`` of each page URL that has one, as the sitemap wrote it (a recrawl compares them).
    lastmods: dict[str, str] = dataclasses.field(default_factory=dict)


def _split(tag: Any) -> tuple[str, str]:
    """(namespace, local name) of an lxml tag; ("", "") for comments and processing instructions."""
    if not isinstance(tag, str):
        return "", ""
    if tag.startswith("{"):
        namespace, _, local = tag[1:].partition("}")
        return namespace, local
    return "", tag


class _Parser:
    """Reads decompressed sitemap bytes fed in chunks: XML or plain text, decided by the first byte."""

    def __init__(self, max_urls: int) -> None:
        self.max_urls = max_urls
        self.urls: list[str] = []
        self.sitemaps: list[str] = []
        self.problems = 0
        self.notes: list[str] = []
        self.truncated = False
        self.stopped = False
        self.lastmods: dict[str, str] = {}
        self._url_loc: str | None = None  # the page URL of the <url> being read
        self._format: str | None = None  # "xml" or "text", once the first byte is seen
        self._xml: Any = None
        self._rest = b""
        self._skip_line = False
        self._entry: str | None = None  # the page URL of the feed item or entry being read
        self._entry_from_link = False  # whether it came from an RSS <link> (a <guid> gives way to one)

    def problem(self, note: str) -> None:
        self.problems += 1
        if len(self.notes) < _NOTES:
            self.notes.append(note)

    def feed(self, chunk: bytes) -> None:
        """Read the next piece of the (decompressed) file."""
        if self.stopped:
            return
        if self._format is None:
            chunk = (self._rest + chunk).removeprefix(b"\xef\xbb\xbf")
            head = chunk.lstrip(_WHITESPACE)
            if not head:
                self._rest = chunk
                return
            self._rest = b""
            self._format = "xml" if head.startswith(b"<") else "text"
            if self._format == "xml":
                # Whitespace before "<?xml" (common in generated files) is not XML: leave it out.
                chunk = head
                self._xml = etree.XMLPullParser(
                    events=("end",),
                    tag=_TAGS,  # the rest needs no Python work
                    resolve_entities=False,
                    load_dtd=False,
                    no_network=True,
                    huge_tree=False,
                    remove_comments=True,
                    remove_pis=True,
                )
        if self._format == "xml":
            self._feed_xml(chunk)
        else:
            self._feed_text(chunk)

    def close(self) -> None:
        if self._format == "text" and not self.stopped and not self._skip_line:
            self._line(self._rest)
        elif self._format == "xml" and not self.stopped:
            try:
                root = self._xml.close()
            except etree.XMLSyntaxError as exc:
                self.problem(f"malformed XML: {exc}")
            else:
                self._drain()
                if _split(root.tag)[1] not in ("urlset", "sitemapindex", "rss", "feed"):
                    self.problem(f"not a sitemap: the root element is <{_split(root.tag)[1]}>")
        self.stopped = True

    # -- plain text --

    def _feed_text(self, chunk: bytes) -> None:
        if self._skip_line:
            # The rest of a line too long to be a URL.
            line_break = _BREAK.search(chunk)
            if line_break is None:
                return
            chunk = chunk[line_break.start() :]
            self._skip_line = False
        data = self._rest + chunk
        # The piece after the last line break may continue in the next chunk.
        end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        self._rest = data[end:]
        # Only non-empty lines are visited, so a file of blank lines costs no Python work per line.
        for line in _LINE.finditer(data, 0, end):
            self._line(line.group())
            if self.stopped:
                return
        if len(self._rest) > _MAX_LINE:
            self.problem(f"a line longer than {_MAX_LINE} bytes")
            self._rest = b""
            self._skip_line = True

    def _line(self, line: bytes) -> None:
        value = line.decode("utf-8", "replace").strip()
        if value:
            self._add(self.urls, value)

    # -- XML --

    def _feed_xml(self, chunk: bytes) -> None:
        try:
            self._xml.feed(chunk)
        except etree.XMLSyntaxError as exc:
            self._drain()  # what was read before the error still counts
            self.problem(f"malformed XML: {exc}")
            self.stopped = True
            return
        self._drain()

    def _drain(self) -> None:
        for _, element in self._xml.read_events():
            if self.stopped:
                return
            namespace, local = _split(element.tag)
            if local == "loc":
                self._loc(element, namespace)
            elif local in ("link", "guid"):
                self._feed_link(element, namespace, local)
            elif local in ("item", "entry") and namespace in _FEED_NAMESPACES:
                if self._entry:
                    self._add(self.urls, self._entry)
                self._entry, self._entry_from_link = None, False
                self._forget(element)
            elif local in ("url", "sitemap"):
                if local == "url" and self._url_loc is not None:
                    self._lastmod(element, namespace)
                self._forget(element)

    def _lastmod(self, element: Any, namespace: str) -> None:
        """Keep the ``<lastmod>`` of the ``<url>`` just read, for the page URL its ``<loc>`` gave."""
        url, self._url_loc = self._url_loc, None
        found = element.find(f"{{{namespace}}}lastmod" if namespace else "lastmod")
        value = (found.text or "").strip() if found is not None and not len(found) else ""
        if url is not None and value:
            self.lastmods[url] = value[:64]

    def _forget(self, element: Any) -> None:
        """Done with this entry: drop it and those before it, so memory stays flat."""
        element.clear()
        parent = element.getparent()
        while parent is not None and element.getprevious() is not None:
            del parent[0]

    def _feed_link(self, element: Any, namespace: str, local: str) -> None:
        """An RSS item's ``<link>`` (or, without one, its permalink ``<guid>``), or an Atom entry's
        first alternate link."""
        parent = element.getparent()
        parent_namespace, parent_local = _split(parent.tag) if parent is not None else ("", "")
        if namespace != parent_namespace or namespace not in _FEED_NAMESPACES:
            return
        if parent_local == "item" and namespace == "":
            value = (element.text or "").strip() or None
            if local == "link" and not self._entry_from_link:
                self._entry, self._entry_from_link = value, value is not None
            elif local == "guid" and self._entry is None and (element.get("isPermaLink") or "true").lower() == "true":
                self._entry = value
        elif parent_local == "entry" and local == "link" and self._entry is None and _alternate(element):
            self._entry = (element.get("href") or "").strip() or None

    def _loc(self, element: Any, namespace: str) -> None:
        parent = element.getparent()
        parent_namespace, parent_local = _split(parent.tag) if parent is not None else ("", "")
        if namespace not in _SITEMAP_NAMESPACES or parent_namespace not in _SITEMAP_NAMESPACES:
            return  # an image, video or news <loc>: not a page
        if parent_local == "url":
            found = self.urls
        elif parent_local == "sitemap":
            found = self.sitemaps
        else:
            return
        if len(element):
            # Children of a <loc> are entity references left unexpanded: the URL cannot be read.
            self.problem("a <loc> uses an entity reference")
            return
        value = (element.text or "").strip()
        if self._add(found, value) and found is self.urls:
            self._url_loc = value

    def _add(self, found: list[str], value: str) -> bool:
        """Add ``value`` to ``found`` if it is an absolute http(s) URL under the cap; whether it was."""
        if len(found) >= self.max_urls:
            self.problem(f"more than {self.max_urls} URLs: the rest are ignored")
            self.truncated = self.stopped = True
            return False
        # ada's validity check alone: the crawl checks each URL again as a link, so this only sorts
        # out what cannot be a page, at a fifth of the cost of a full parse.
        if value[:8].lower().startswith(("http://", "https://")) and ada_url.check_url(value):
            found.append(value)
            return True
        self.problem(f"not an absolute http(s) URL: {value[:200]!r}")
        return False


def _alternate(link: Any) -> bool:
    """Whether an Atom ``<link>`` points at the entry's page (``rel`` "alternate", the default)."""
    return str(link.get("rel") or "alternate").strip().lower() == "alternate"


def _decompressed(data: bytes, limit: int, parser: _Parser) -> Iterator[bytes]:
    """The file's bytes, gunzipped when they start with gzip's magic bytes, up to ``limit``."""
    total = 0
    if not data.startswith(_GZIP_MAGIC):
        for start in range(0, min(len(data), limit), _CHUNK):
            yield data[start : min(start + _CHUNK, limit)]
        if len(data) > limit:
            parser.problem(f"larger than {limit} bytes: the rest is ignored")
            parser.truncated = True
        return
    pending = data
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    while True:
        try:
            # Bounded output per step, so a gzip bomb never inflates past the limit in memory.
            chunk = inflater.decompress(pending, _CHUNK)
        except zlib.error as exc:
            parser.problem(f"corrupt gzip data: {exc}")
            return
        pending = inflater.unconsumed_tail
        if total + len(chunk) > limit:
            yield chunk[: limit - total]
            parser.problem(f"larger than {limit} bytes decompressed: the rest is ignored")
            parser.truncated = True
            return
        total += len(chunk)
        if chunk:
            yield chunk
        if inflater.eof:
            # A gzip file may hold several members one after another.
            pending = inflater.unused_data
            if not pending.startswith(_GZIP_MAGIC):
                return
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif not pending and len(chunk) < _CHUNK:
            # All input read and no output held back: the stream stops before its end.
            parser.problem("gzip data ends early")
            return


def parse_sitemap(data: bytes, *, max_bytes: int = MAX_SITEMAP_BYTES, max_urls: int = MAX_SITEMAP_URLS) -> Sitemap:
    """Read one sitemap file (XML, gzipped or plain text); never raises for bad content."""
    parser = _Parser(max_urls)
    for chunk in _decompressed(data, max_bytes, parser):
        parser.feed(chunk)
        if parser.stopped:
            break
    if parser.truncated and not parser.stopped:
        # Cut short by the size cap: what was read counts, the unfinished document is not a new problem.
        parser.stopped = True
    parser.close()
    return Sitemap(
        urls=tuple(parser.urls),
        sitemaps=tuple(parser.sitemaps),
        problems=parser.problems,
        notes=tuple(parser.notes),
        truncated=parser.truncated,
        lastmods=parser.lastmods,
    )


async def read_sitemap(data: bytes, *, max_bytes: int = MAX_SITEMAP_BYTES, max_urls: int = MAX_SITEMAP_URLS) -> Sitemap:
    """``parse_sitemap``, in a worker thread when the file is large enough to hold up the event loop."""
    if len(data) <= _THREAD_ABOVE:
        return parse_sitemap(data, max_bytes=max_bytes, max_urls=max_urls)
    return await anyio.to_thread.run_sync(
        functools.partial(parse_sitemap, data, max_bytes=max_bytes, max_urls=max_urls)
    )


def _authority(url: str) -> str:
    """Host and port of ``url`` (no port for the scheme's default): "same host" compares these."""
    return urls.origin(url).split("//", 1)[1]


def _same_host(url: str, other: str) -> bool:
    try:
        return _authority(url) == _authority(other)
    except errors.InvalidUrl:
        return False


def discover(url: str, listed: Iterable[str], *, keep: Callable[[str], bool] | None = None) -> list[str]:
    """The sitemaps to read for the site of ``url``: those ``listed`` (robots.txt's Sitemap lines)
    that ``keep`` accepts (by default: on the same host), else ``/sitemap.xml`` at its origin.
    """
    accept = keep if keep is not None else (lambda sitemap: _same_host(sitemap, url))
    found = list(dict.fromkeys(sitemap for sitemap in listed if accept(sitemap)))
    return found or [urls.origin(url) + "/sitemap.xml"]


@dataclasses.dataclass
class SitemapStats:
    """What a ``SitemapReader`` did."""

    #: Requests for sitemap files (a redirect is one).
    files: int = 0
    #: Page URLs handed out.
    urls: int = 0
    #: Sitemaps that answered 404 or 410: not an error.
    missing: int = 0
    #: Sitemaps that failed: no response, an error status, an invalid URL, too many redirects.
    errors: int = 0
    #: Problems counted inside the files read (see ``Sitemap.problems``).
    problems: int = 0
    #: Sitemaps not opened: on another host, refused by ``allows``, or past the file cap or the budget.
    skipped: int = 0


class SitemapReader(Fetcher):
    """Reads sitemaps through a ``Backend`` and hands out the page URLs they list.

    An index is followed to the sitemaps it names on its own host; a redirect is followed (at most
    ``max_redirects`` in a row) to the same host. ``allows``, when given, is asked before each file
    is opened (say, robots.txt and the crawl's scope). At most ``max_files`` requests are made in
    all; see ``read`` for the budget. Without a ``backend``, an ``HttpBackend`` is made and closed by
    ``aclose``.
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        max_files: int = MAX_SITEMAP_FILES,
        max_bytes: int = MAX_SITEMAP_BYTES,
        max_urls_per_file: int = MAX_SITEMAP_URLS,
        max_redirects: int = 5,
        allows: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        super().__init__(backend)
        self._max_files = max_files
        self._max_bytes = max_bytes
        self._max_urls = max_urls_per_file
        self._max_redirects = max_redirects
        self._allows = allows
        self.stats = SitemapStats()

    async def read(self, sitemaps: Iterable[str], *, budget: int | None = None) -> AsyncIterator[str]:
        """The page URLs of ``sitemaps`` and the sitemaps they lead to, file after file.

        Once ``budget`` URLs have been handed out, no new file is opened (the rest of the file being
        read still comes out). Stopping the iteration early opens no further file either.
        """
        queue: deque[tuple[str, int]] = deque((sitemap, 0) for sitemap in sitemaps)
        seen: set[str] = set()
        handed_out = 0
        while queue:
            if (budget is not None and handed_out >= budget) or self.stats.files >= self._max_files:
                self.stats.skipped += len(queue)
                return
            url, hops = queue.popleft()
            try:
                key = urls.canonicalize(url)
            except errors.InvalidUrl:
                self.stats.errors += 1
                continue
            if key in seen:
                continue
            seen.add(key)
            if self._allows is not None and not await self._allows(url):
                self.stats.skipped += 1
                continue
            response = await self._fetch(url)
            if response is None:
                continue
            if response.is_redirect:
                self._redirect(queue, url, response, hops)
                continue
            sitemap = await self._parse(response.body)
            self.stats.problems += sitemap.problems
            for child in sitemap.sitemaps:
                if _same_host(child, url):
                    queue.append((child, 0))
                else:
                    self.stats.skipped += 1
            for page in sitemap.urls:
                handed_out += 1
                self.stats.urls += 1
                yield page

    async def _fetch(self, url: str) -> Response | None:
        """The response for a sitemap worth reading or following; ``None`` (and counted) otherwise."""
        self.stats.files += 1
        try:
            response = await self.fetch_one(url)
        except (errors.FetchError, errors.InvalidUrl):
            self.stats.errors += 1
            return None
        if response.status in (404, 410):
            self.stats.missing += 1
            return None
        if not (200 <= response.status < 300 or response.is_redirect):
            self.stats.errors += 1
            return None
        return response

    def _redirect(self, queue: deque[tuple[str, int]], url: str, response: Response, hops: int) -> None:
        target = urls.join(url, response.headers["location"])
        if target is None or hops >= self._max_redirects:
            self.stats.errors += 1
        elif not _same_host(target, url):
            self.stats.skipped += 1
        else:
            queue.appendleft((target, hops + 1))  # the same sitemap at its new address, next

    async def _parse(self, body: bytes) -> Sitemap:
        return await read_sitemap(body, max_bytes=self._max_bytes, max_urls=self._max_urls)
