"""``ChangingSite``: a site whose pages a test edits between crawls, that answers conditional requests.

Each page has a strong ``ETag`` (a hash of its body) and a ``Last-Modified`` (when the test last
edited it), and answers ``If-None-Match`` / ``If-Modified-Since`` with 304 as RFC 9110 says (the
ETag decides when both are sent). ``validators=False`` sends neither header and never answers 304.
A page made with ``footer_clock=True`` writes the time of each request in its footer. The site
counts the body bytes it sent and keeps each request's conditional headers.
"""

from __future__ import annotations

import dataclasses
import datetime
import email.utils
import hashlib
import itertools
import threading

from tests.sites.server import Reply, Request, Site

__all__ = ["ChangingSite"]

_CLOCK = itertools.count(1)


def _w3c(at: float) -> str:
    """A sitemap's lastmod: W3C datetime, UTC."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat(timespec="seconds")


@dataclasses.dataclass(slots=True)
class _Page:
    title: str
    text: str
    links: list[str]
    modified: float
    footer_clock: bool = False
    lastmod: str | None = None


class ChangingSite:
    """Pages on a ``Site`` that a test adds, edits and removes; see the module docstring."""

    def __init__(self, site: Site, *, validators: bool = True, start: float = 1_700_000_000.0) -> None:
        self.site = site
        self.validators = validators
        self._pages: dict[str, _Page] = {}
        self._lock = threading.Lock()
        self._now = start
        self._since = 0
        #: Body bytes sent, pages only (not robots.txt or the sitemap).
        self.body_bytes = 0
        self._hold: tuple[int, threading.Event, threading.Event] | None = None
        self._answered = 0
        self._broken: dict[str, int] = {}
        #: ``(path, status)`` of each page request answered, in order.
        self.log: list[tuple[str, int]] = []
        self.site.route("/robots.txt", self._robots)
        self.site.route("/sitemap.xml", self._sitemap)

    def url(self, path: str = "/") -> str:
        return self.site.url(path)

    def tick(self, seconds: float = 3600.0) -> None:
        """Move the site's clock on (Last-Modified of the next edits is later than the last); ``answers``
        counts from here."""
        with self._lock:
            self._now += seconds
            self._since = len(self.log)

    def put(self, path: str, title: str, text: str, links: list[str], *, footer_clock: bool = False) -> None:
        """Add or edit the page at ``path``; its Last-Modified and sitemap lastmod become the site's time."""
        with self._lock:
            self._pages[path] = _Page(title, text, list(links), self._now, footer_clock)
        self.site.route(path, self._reply)

    def edit_quietly(self, path: str, text: str) -> None:
        """Change a page's text but not its Last-Modified nor its sitemap lastmod (a server that lies)."""
        with self._lock:
            page = self._pages[path]
            page.text = text

    def remove(self, path: str) -> None:
        with self._lock:
            del self._pages[path]

    def link(self, path: str, links: list[str]) -> None:
        """Replace the links of ``path`` (an edit: its Last-Modified moves)."""
        with self._lock:
            page = self._pages[path]
            page.links = list(links)
            page.modified = self._now

    def hold_from(self, count: int, reached: threading.Event, released: threading.Event) -> None:
        """From the ``count``-th page request on (counted from now), set ``reached`` and hold each answer
        until ``released`` is set: a crawl killed then dies with those requests in flight."""
        with self._lock:
            self._answered = 0
            self._hold = (count, reached, released)

    def break_page(self, path: str, status: int | None) -> None:
        """Make ``path`` answer ``status`` (a 500, say) until called again with ``None``."""
        with self._lock:
            if status is None:
                self._broken.pop(path, None)
            else:
                self._broken[path] = status

    def answers(self, status: int) -> set[str]:
        """The paths answered with ``status`` since the last ``tick``."""
        with self._lock:
            return {path for path, answered in self.log[self._since :] if answered == status}

    def conditional_requests(self) -> list[Request]:
        """The page requests that carried If-None-Match or If-Modified-Since."""
        return [
            request
            for request in self.site.page_requests()
            if "if-none-match" in request.headers or "if-modified-since" in request.headers
        ]

    def _body(self, page: _Page) -> bytes:
        links = "".join(f'<li><a href="{href}">{href}</a></li>' for href in page.links)
        footer = f"<footer>served at tick {next(_CLOCK)}</footer>" if page.footer_clock else "<footer>(c)</footer>"
        return (
            f"<html><head><title>{page.title}</title></head><body><nav><ul>{links}</ul></nav>"
            f"<main><h1>{page.title}</h1><p>{page.text}</p></main>{footer}</body></html>"
        ).encode()

    def _reply(self, request: Request) -> Reply:
        status, headers, body = self._answer(request)
        with self._lock:
            self.log.append((request.path.split("?", 1)[0], status))
        return status, headers, body

    def _answer(self, request: Request) -> Reply:
        path = request.path.split("?", 1)[0]
        with self._lock:
            self._answered += 1
            hold = self._hold if self._hold is not None and self._answered >= self._hold[0] else None
        if hold is not None:
            hold[1].set()
            hold[2].wait(timeout=30)  # held in flight: the crawl dies with this request unanswered
        with self._lock:
            page = self._pages.get(path)
            if path in self._broken:
                return self._broken[path], {"Content-Type": "text/plain"}, b"broken"
            if page is None:
                return 404, {"Content-Type": "text/plain"}, b"gone"
            body = self._body(page)
            modified = page.modified
        headers = {"Content-Type": "text/html; charset=utf-8"}
        if self.validators:
            # The ETag of a page whose footer changes follows the words that matter, as a CMS's would not:
            # it changes with every body, so only the fingerprint can tell the page is the same.
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            headers["ETag"] = etag
            headers["Last-Modified"] = email.utils.formatdate(modified, usegmt=True)
            match = request.headers.get("if-none-match")
            since = request.headers.get("if-modified-since")
            if match is not None:
                if etag in [tag.strip() for tag in match.split(",")]:
                    return 304, {"ETag": etag}, b""
            elif since is not None:
                stamp = email.utils.parsedate_to_datetime(since).timestamp()
                if modified <= stamp:
                    return 304, {"ETag": etag}, b""
        with self._lock:
            self.body_bytes += len(body)
        return 200, headers, body

    def _robots(self, request: Request) -> Reply:
        return 200, {"Content-Type": "text/plain"}, f"User-agent: *\nSitemap: {self.url('/sitemap.xml')}\n".encode()

    def _sitemap(self, request: Request) -> Reply:
        with self._lock:
            entries = "".join(
                f"<url><loc>{self.url(path)}</loc><lastmod>{_w3c(page.modified)}</lastmod></url>"
                for path, page in sorted(self._pages.items())
            )
        body = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        return 200, {"Content-Type": "application/xml"}, body.encode()
