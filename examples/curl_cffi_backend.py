"""A custom Backend in a few lines: curl_cffi, impersonating Chrome's TLS and HTTP/2 fingerprint.

    pip install 'spire-crawl[impersonate]'
    python examples/curl_cffi_backend.py

A backend is one method, ``fetch(seed) -> Response`` (one hop: the crawler follows redirects), plus
``aclose()``. This one sends through curl_cffi, whose TLS ClientHello, HTTP/2 settings and header
order are Chrome's, and translates curl_cffi's exceptions into spire's errors at the boundary. It
crawls a local HTTPS site (a certificate from a throwaway CA, made with trustme) and exits 0 only if
every page came back and the server saw Chrome's User-Agent with Chrome's client hints.
"""

from __future__ import annotations

import ssl
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import trustme
from curl_cffi.requests import AsyncSession
from curl_cffi.requests.exceptions import CertificateVerifyError, ConnectionError, RequestException, SSLError, Timeout

from spire import Crawler, Html, Links, Router, Seed
from spire_core.errors import BodyLimitError, ConnectError, FetchError, FetchTimeout, TlsError
from spire_core.response import Headers, Response


class CurlCffiBackend:
    """Fetches through curl_cffi, impersonating a browser (``"chrome"`` by default)."""

    def __init__(self, *, impersonate: str = "chrome", verify: str | bool = True, max_body_size: int = 10 * 2**20):
        self._session = AsyncSession(impersonate=impersonate, verify=verify)  # type: ignore[arg-type]
        self._max_body_size = max_body_size

    async def fetch(self, seed: Seed) -> Response:
        started = time.perf_counter()
        try:
            answer = await self._session.request(
                seed.method,  # type: ignore[arg-type]
                seed.url,
                headers=dict(seed.headers or {}),
                data=seed.body,
                allow_redirects=False,
                timeout=30,
            )
        except Timeout as exc:
            raise FetchTimeout(str(exc), url=seed.url) from exc
        except (CertificateVerifyError, SSLError) as exc:
            raise TlsError(str(exc), url=seed.url) from exc
        except ConnectionError as exc:
            raise ConnectError(str(exc), url=seed.url) from exc
        except RequestException as exc:
            raise FetchError(str(exc), url=seed.url) from exc
        if len(answer.content) > self._max_body_size:
            raise BodyLimitError(f"body passed the {self._max_body_size}-byte cap", url=seed.url)
        version = {1: "HTTP/1.0", 2: "HTTP/1.1", 3: "HTTP/2"}.get(int(answer.http_version or 0))
        return Response(
            url=seed.url,
            status=answer.status_code,
            headers=Headers(list(answer.headers.multi_items())),
            body=answer.content,
            seed=seed,
            elapsed=time.perf_counter() - started,
            http_version=version,
        )

    async def aclose(self) -> None:
        await self._session.close()


# -- a local HTTPS site that reports the client it saw ------------------------------------------


class Site(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, str]]] = []  # (path, User-Agent, Sec-CH-UA)

    def do_GET(self) -> None:
        Site.seen.append((self.path, self.headers.get("User-Agent", ""), self.headers.get("Sec-CH-UA", "")))
        links = "".join(f'<a href="/page/{n}">{n}</a>' for n in range(1, 6)) if self.path == "/" else ""
        body = f"<html><title>{self.path}</title><body>{links}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_https(folder: Path) -> tuple[ThreadingHTTPServer, str]:
    ca = trustme.CA()
    ca_file = str(folder / "ca.pem")
    ca.cert_pem.write_to_path(ca_file)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, ca_file


router = Router()


@router.default
async def page(html: Html, links: Links) -> None:
    await links.follow(html.css("a::attr(href)").getall())


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        server, ca_file = serve_https(Path(folder))
        try:
            url = f"https://127.0.0.1:{server.server_address[1]}/"
            stats = Crawler(router, backend=CurlCffiBackend(verify=ca_file)).run([url])
        finally:
            server.shutdown()
            server.server_close()
    print(stats)
    agents = {agent for _, agent, _ in Site.seen}
    hints = {hint for _, _, hint in Site.seen}
    print(f"{len(Site.seen)} pages; the server saw User-Agent {sorted(agents)} and Sec-CH-UA {sorted(hints)}")
    chrome = all("Chrome/" in agent for agent in agents) and all("Chromium" in hint for hint in hints)
    if stats.pages == 6 and stats.failed == 0 and chrome:
        print("impersonated Chrome on every page: every check passed")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
