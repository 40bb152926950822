"""Helpers for the site-crawl tests: collecting a crawl, page markup, and virtual hosts without DNS."""

from __future__ import annotations

import http.client
import itertools
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx

from spire.site import CrawlError, CrawlPage, SiteCrawl
from spire_core.backend.http import HttpBackend
from spire_core.limits import HostLimits
from tests.sites.server import Request, Site

#: Limits that keep tests fast: four requests at a time per host, no rate spacing.
FAST = HostLimits(max_in_flight=4)
#: robots.txt retry waits short enough for tests.
QUICK_RETRIES = (0.01, 0.01, 0.01, 0.01)


def page(title: str = "", *links: str, body: str = "", head: str = "") -> str:
    """An HTML page with a title, extra head markup, some body text and links."""
    anchors = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
    return f"<html><head><title>{title}</title>{head}</head><body><p>{body}</p>{anchors}</body></html>"


def text(body: str, status: int = 200, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """A plain-text reply (robots.txt and text sitemaps)."""
    return status, {"Content-Type": "text/plain", **headers}, body.encode()


def redirect(location: str, status: int = 301) -> tuple[int, dict[str, str], bytes]:
    return status, {"Location": location, "Content-Type": "text/html"}, b""


def robots(site: Site, body: str) -> None:
    site.route("/robots.txt", lambda request: text(body))


def paths(site: Site) -> list[str]:
    """Paths requested, in order, robots.txt and sitemaps included."""
    return [request.path for request in site.requests]


def page_paths(site: Site) -> list[str]:
    """Paths requested other than robots.txt and sitemaps."""
    return [path for path in paths(site) if path != "/robots.txt" and "sitemap" not in path]


def header(request: Request, name: str) -> str | None:
    """A request header as the server received it, by name without case."""
    return next((value for key, value in request.headers.items() if key.lower() == name.lower()), None)


def urls_of(pages: Iterable[CrawlPage]) -> set[str]:
    return {item.url for item in pages}


async def collect(crawl: SiteCrawl, *, within: float = 20.0) -> tuple[list[CrawlPage], list[CrawlError]]:
    """Run ``crawl`` to its end and return what it yielded, pages and errors apart."""
    pages: list[CrawlPage] = []
    errors: list[CrawlError] = []
    with anyio.fail_after(within):
        async with crawl:
            async for item in crawl:
                if isinstance(item, CrawlPage):
                    pages.append(item)
                else:
                    errors.append(item)
    return pages, errors


def gaps(requests: list[Request]) -> list[float]:
    """Seconds between consecutive requests, as the server saw them."""
    times = sorted(request.at for request in requests)
    return [later - earlier for earlier, later in itertools.pairwise(times)]


class VirtualHosts:
    """An HTTP proxy on 127.0.0.1 that answers for made-up host names from local ``Site``s.

    A crawl given ``backend()`` reaches ``http://www.shop.test/`` through it, so tests can cover
    several hosts of one registrable domain without DNS. Each request goes to the ``Site`` named for
    its host, with the ``Host`` header as the crawler sent it.
    """

    def __init__(self, hosts: Mapping[str, Site]) -> None:
        self.hosts = dict(hosts)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                target = urllib.parse.urlsplit(self.path)
                site = proxy.hosts.get(target.hostname or "")
                if site is None:
                    self.send_error(502, "unknown virtual host")
                    return
                path = target.path + (f"?{target.query}" if target.query else "")
                headers = {name: value for name, value in self.headers.items() if name.lower() != "proxy-connection"}
                upstream = http.client.HTTPConnection("127.0.0.1", site.port, timeout=10)
                try:
                    upstream.request("GET", path or "/", headers=headers)
                    reply = upstream.getresponse()
                    body = reply.read()
                finally:
                    upstream.close()
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def backend(self, **options: Any) -> HttpBackend:
        """An ``HttpBackend`` whose requests all go through this proxy."""
        return HttpBackend(transport=httpx.AsyncHTTPTransport(proxy=self.url), **options)

    def __enter__(self) -> VirtualHosts:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
