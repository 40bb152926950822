"""Serve a shop whose category pages build their product links with JavaScript, on 127.0.0.1.

with JsShopServer(categories=5, products=6) as server:
    server.url("/")                 # "http://127.0.0.1:53117/"
    server.product_urls             # what a crawl should find
    server.browser_hits()           # requests per path made by a headless Chromium

- ``/``: static HTML linking every category (``a.category``).
- ``/c/<n>``: a category; its products (``a.product``) are written by an inline script, so an HTTP
  client sees none of them.
- ``/p/<n>-<m>``: a product, static HTML (``h1``, ``p.price``).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["JsShopServer"]

_PAGE = (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>'
    "<body>{body}</body></html>"
)
_CATEGORY_SCRIPT = """<ul id="products"></ul>
<script>
  const products = {products};
  const list = document.getElementById("products");
  for (const [href, name] of products) {{
    const item = document.createElement("li");
    item.innerHTML = '<a class="product" href="' + href + '">' + name + "</a>";
    list.appendChild(item);
  }}
</script>"""


class JsShopServer:
    """The shop on ``http://127.0.0.1:<port>``, served by a ``ThreadingHTTPServer`` in a daemon thread."""

    def __init__(self, *, categories: int = 5, products: int = 6, port: int = 0) -> None:
        self.categories = categories
        self.products = products
        self._lock = threading.Lock()
        self._hits: Counter[tuple[str, bool]] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                by_browser = "HeadlessChrome" in self.headers.get("User-Agent", "")
                with server._lock:
                    server._hits[(self.path, by_browser)] += 1
                status, body = server.render(self.path)
                payload = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def url(self, path: str = "/") -> str:
        return self.origin + path

    @property
    def product_urls(self) -> set[str]:
        return {self.url(f"/p/{c}-{p}") for c in range(self.categories) for p in range(self.products)}

    @property
    def page_count(self) -> int:
        return 1 + self.categories + self.categories * self.products

    def render(self, path: str) -> tuple[int, str]:
        """The status and HTML of ``path``."""
        if path == "/":
            links = "".join(
                f'<li><a class="category" href="/c/{c}">Category {c}</a></li>' for c in range(self.categories)
            )
            return 200, _PAGE.format(title="JS Shop", body=f"<h1>JS Shop</h1><ul>{links}</ul>")
        if path.startswith("/c/") and path[3:].isdigit() and int(path[3:]) < self.categories:
            c = int(path[3:])
            products = json.dumps([[f"/p/{c}-{p}", f"Product {c}-{p}"] for p in range(self.products)])
            script = _CATEGORY_SCRIPT.format(products=products)
            return 200, _PAGE.format(title=f"Category {c}", body=f"<h1>Category {c}</h1>{script}")
        if path.startswith("/p/"):
            c, _, p = path[3:].partition("-")
            if c.isdigit() and p.isdigit() and int(c) < self.categories and int(p) < self.products:
                price = f"{(int(c) * self.products + int(p)) % 40 + 5}.99"
                body = f'<h1>Product {c}-{p}</h1><p class="price">{price}</p><a href="/c/{c}">back</a>'
                return 200, _PAGE.format(title=f"Product {c}-{p}", body=body)
        return 404, _PAGE.format(title="Not found", body="<h1>Not found</h1>")

    def hits(self) -> Counter[str]:
        """Requests per path so far, from any client."""
        with self._lock:
            total: Counter[str] = Counter()
            for (path, _), count in self._hits.items():
                total[path] += count
            return total

    def browser_hits(self) -> Counter[str]:
        """Requests per page made by a headless Chromium: the pages that were rendered (robots.txt, which
        a crawl reads first through its backend, is no page)."""
        with self._lock:
            return Counter(
                {path: n for (path, by_browser), n in self._hits.items() if by_browser and path != "/robots.txt"}
            )

    def __enter__(self) -> JsShopServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
