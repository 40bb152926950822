"""What a page costs and carries in the browser: real statuses, credentials kept on their origin,
per-tag waits, resource blocking. Real headless Chromium against local sites."""

import time
from pathlib import Path
from typing import Annotated

import anyio
import pytest

import spire
from spire import BrowserBackend, Crawler, Html, Response, Router, Screenshot, Seed
from spire_core.backend.browser import Blocking, PageWait
from spire_core.errors import ConfigError, FetchTimeout
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, page, urls_of
from tests.spire_core.backend.local_chrome import LocalChrome

#: A page whose ``.price`` appears only after a script has waited ``delay`` ms.
LATE_PRICE = """<html><head><title>{title}</title></head><body><h1>{title}</h1>
<script>setTimeout(() => {{ const p = document.createElement("p"); p.className = "price";
p.textContent = "{price}"; document.body.appendChild(p); }}, 150);</script></body></html>"""


async def fetch(backend: BrowserBackend, seed: Seed) -> Response:
    return await backend.fetch(seed)


def test_an_error_status_with_an_empty_body_keeps_its_status_and_its_empty_body(
    site: Site, browser: BrowserBackend
) -> None:
    """Chromium reports it as ERR_HTTP_RESPONSE_CODE_FAILURE and shows its own page; the status is the truth."""
    site.route("/gone", lambda request: (404, {"Content-Type": "text/plain", "X-Why": "gone"}, b""))
    site.route("/down", lambda request: (503, {"Content-Type": "text/html"}, b""))
    gone = anyio.run(fetch, browser, Seed(site.url("/gone")))
    down = anyio.run(fetch, browser, Seed(site.url("/down")))
    assert (gone.status, gone.body, gone.url, gone.headers["x-why"]) == (404, b"", site.url("/gone"), "gone")
    assert (down.status, down.body) == (503, b"")


def test_a_site_whose_robots_txt_is_an_empty_404_is_crawled_not_skipped(site: Site, browser: BrowserBackend) -> None:
    site.route("/robots.txt", lambda request: (404, {"Content-Type": "text/plain"}, b""))
    site.page("/", page("home", "/a"))
    site.page("/a", page("a"))

    async def main() -> set[str]:
        async with spire.crawl(site.url("/"), backend=browser, host_limits=FAST) as pages:
            return urls_of([item async for item in pages if isinstance(item, spire.CrawlPage)])

    assert anyio.run(main) == {site.url("/"), site.url("/a")}
    assert site.hits(robots=True)["/robots.txt"] == 1


def test_credentials_go_to_the_pages_own_origin_only(site: Site, other_site: Site, browser: BrowserBackend) -> None:
    """A third-party script, image and fetch() never see the seed's Authorization or Cookie."""
    other_site.page("/lib.js", "window.lib = 1;", content_type="application/javascript")
    other_site.page("/pixel.png", "", content_type="image/png")
    other_site.page("/api", "{}", content_type="application/json", headers={"Access-Control-Allow-Origin": site.origin})
    site.page("/own.js", "window.own = 1;", content_type="application/javascript")
    site.page(
        "/account",
        f"""<html><body><script src="/own.js"></script><script src="{other_site.url("/lib.js")}"></script>
        <img src="{other_site.url("/pixel.png")}">
        <script>fetch("{other_site.url("/api")}").then(() => document.body.dataset.done = "yes");</script>
        </body></html>""",
    )
    credentials = {"Authorization": "Bearer s3cret", "Cookie": "sid=42"}
    seed = Seed(site.url("/account"), headers=credentials, user_data={"browser.wait": "done"})
    backend = browser
    response = anyio.run(fetch, backend, seed)
    assert response.status == 200
    own = {request.path: request.headers for request in site.requests}
    assert {path: (own[path].get("authorization"), own[path].get("cookie")) for path in ("/account", "/own.js")} == {
        "/account": ("Bearer s3cret", "sid=42"),
        "/own.js": ("Bearer s3cret", "sid=42"),
    }
    third_party = sorted(request.path for request in other_site.requests)
    assert third_party == ["/api", "/lib.js", "/pixel.png"]
    leaked = [(r.path, r.headers.get("authorization"), r.headers.get("cookie")) for r in other_site.requests]
    assert all(auth is None and cookie is None for _, auth, cookie in leaked), leaked
    # A redirect to another origin does not take them along.
    site.route("/go", lambda request: (302, {"Location": other_site.url("/landing")}, b""))
    other_site.page("/landing", "<p>landed</p>")
    landed: list[str] = []
    router = Router()

    @router.default
    async def landing_page(response: Response) -> None:
        landed.append(response.url)

    Crawler(router, backend=backend, robots=False).run([Seed(site.url("/go"), headers=credentials)])
    assert landed == [other_site.url("/landing")]
    assert site.requests[-1].headers.get("authorization") == "Bearer s3cret"
    landing = other_site.requests[-1]
    assert (landing.path, landing.headers.get("authorization"), landing.headers.get("cookie")) == (
        "/landing",
        None,
        None,
    )
    # The next seed without credentials sends none, to its own origin either.
    anyio.run(fetch, backend, Seed(site.url("/own.js")))
    assert site.requests[-1].headers.get("authorization") is None


def test_a_tag_wait_with_an_optional_selector_costs_no_failure_on_pages_that_lack_it(
    site: Site, chrome: LocalChrome
) -> None:
    """A 7-page site: the listing has no wait; of six products, three never get a price."""
    products = [f"/p{number}" for number in range(6)]
    site.page("/", page("listing", *products))
    for number, path in enumerate(products):
        if number % 2 == 0:
            site.page(path, LATE_PRICE.format(title=path, price=f"{number}.00"))
        else:
            site.page(path, page(path, body="sold out"))
    prices: dict[str, str | None] = {}
    elapsed: dict[str, float] = {}
    router = Router()

    @router.handler("listing")
    async def listing(html: Html, links: spire.Links) -> None:
        await links.same_origin(tag="product")

    @router.handler("product")
    async def product(html: Html, response: Response) -> None:
        prices[response.url] = html.css(".price::text").get()
        elapsed[response.url] = response.elapsed

    backend = BrowserBackend(
        drivers=2,
        waits={"product": PageWait.css(".price", timeout=8, optional=True)},
        **chrome,
    )
    started = time.monotonic()
    stats = Crawler(router, backend=backend, concurrency=2).run([Seed(site.url("/"), tag="listing")])
    took = time.monotonic() - started
    assert (stats.failed, stats.retries, stats.finished) == (0, 0, 7)
    assert prices == {site.url(path): (f"{n}.00" if n % 2 == 0 else None) for n, path in enumerate(products)}
    # A page without the price is given up on once it settles, well before the 8 s timeout.
    assert max(elapsed[site.url(path)] for path in products[1::2]) < 3.0
    assert took < 20.0


def test_a_required_wait_that_runs_out_is_a_transient_timeout(site: Site, browser: BrowserBackend) -> None:
    site.page("/plain", page("plain"))
    with pytest.raises(FetchTimeout, match=r"waited 0\.3 s for '#never'") as caught:
        anyio.run(fetch, browser, Seed(site.url("/plain"), user_data={"browser.wait": "strict"}))
    assert caught.value.transient


def test_network_quiet_waits_for_the_scripts_requests(site: Site, chrome: LocalChrome) -> None:
    site.page("/data", '{"items": ["a", "b", "c"]}', content_type="application/json", delay=0.3)
    site.page(
        "/app",
        """<html><body><ul></ul><script>fetch("/data").then(r => r.json()).then(d => {
        for (const i of d.items) { const li = document.createElement("li"); li.textContent = i;
        document.querySelector("ul").appendChild(li); } });</script></body></html>""",
    )
    backend = BrowserBackend(drivers=1, wait=PageWait.quiet(0.2, timeout=5), **chrome)

    async def main() -> Response:
        try:
            return await backend.fetch(Seed(site.url("/app")))
        finally:
            await backend.aclose()

    response = anyio.run(main)
    assert response.text.count("<li>") == 3


def test_wait_configuration_mistakes_are_config_errors(site: Site, browser: BrowserBackend) -> None:
    with pytest.raises(ConfigError, match="not a CSS selector"):
        PageWait.css("ul >> li[")
    with pytest.raises(ConfigError, match="must not be negative"):
        PageWait.quiet(-1)
    with pytest.raises(ConfigError, match="has waits for"):
        anyio.run(fetch, browser, Seed(site.url("/"), user_data={"browser.wait": "nope"}))
    assert site.requests == []


def test_blocked_types_and_url_patterns_are_never_requested(site: Site, chrome: LocalChrome) -> None:
    site.page("/pic.png", "", content_type="image/png")
    site.page("/font.woff2", "", content_type="font/woff2")
    site.page("/tracker.js", "", content_type="application/javascript")
    site.page("/app.js", "document.body.dataset.ran = 'yes';", content_type="application/javascript")
    site.page(
        "/",
        """<html><head><style>@font-face { font-family: F; src: url(/font.woff2); } body { font-family: F; }</style>
        </head><body><p>text</p><img src="/pic.png"><script src="/tracker.js"></script><script src="/app.js"></script>
        </body></html>""",
    )
    backend = BrowserBackend(
        drivers=1,
        blocking=Blocking.assets(urls=["*/tracker.js"]),
        wait=PageWait.ready(),
        **chrome,
    )

    async def main() -> Response:
        try:
            return await backend.fetch(Seed(site.url("/")))
        finally:
            await backend.aclose()

    response = anyio.run(main)
    assert 'data-ran="yes"' in response.text
    assert set(site.hits()) == {"/", "/app.js"}
    with pytest.raises(ConfigError, match="unknown resource types"):
        Blocking(types=["images"])


def test_screenshot_saves_a_png_of_the_rendered_tab(site: Site, browser: BrowserBackend, tmp_path: Path) -> None:
    site.page("/shown", "<html><body style='background: #c00'><h1>shown</h1></body></html>")
    saved: list[Path] = []
    router = Router()

    @router.default
    async def page(shot: Annotated[Path, Screenshot(tmp_path / "shots", full_page=True)]) -> None:
        saved.append(shot)

    stats = Crawler(router, backend=browser).run([site.url("/shown")])
    assert stats.failed == 0
    (shot,) = saved
    assert shot.parent == tmp_path / "shots"
    assert shot.name.startswith("127.0.0.1_")
    assert shot.suffix == ".png"
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert site.hits()["/shown"] == 1


def test_robots_rules_and_host_limits_apply_to_the_browser_as_to_http(site: Site, browser: BrowserBackend) -> None:
    site.route("/robots.txt", lambda request: (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /no\n"))
    site.page("/", page("home", "/a", "/b", "/no"), delay=0.1)
    site.page("/a", page("a"), delay=0.1)
    site.page("/b", page("b"), delay=0.1)

    async def main() -> set[str]:
        limits = spire.HostLimits(max_in_flight=1)
        async with spire.crawl(site.url("/"), backend=browser, host_limits=limits) as pages:
            return urls_of([item async for item in pages if isinstance(item, spire.CrawlPage)])

    assert anyio.run(main) == {site.url("/"), site.url("/a"), site.url("/b")}
    assert "/no" not in site.hits()
    assert site.peak == 1  # two drivers, but one request at a time to the host


def test_the_site_crawls_credentials_reach_no_other_origin_through_the_browser(
    site: Site, other_site: Site, browser: BrowserBackend
) -> None:
    """Issue 12: the site crawl on the browser leaked its headers to every subresource."""
    other_site.page("/lib.js", "window.lib = 1;", content_type="application/javascript")
    other_site.page("/pixel.png", "", content_type="image/png")
    site.page(
        "/",
        f"""<html><body><a href="/next">next</a><script src="{other_site.url("/lib.js")}"></script>
        <img src="{other_site.url("/pixel.png")}"></body></html>""",
    )
    site.page("/next", page("next"))

    async def main() -> set[str]:
        headers = {"Authorization": "Bearer s3cret", "Cookie": "sid=42"}
        async with spire.crawl(site.url("/"), headers=headers, backend=browser, host_limits=FAST) as pages:
            return urls_of([item async for item in pages if isinstance(item, spire.CrawlPage)])

    assert anyio.run(main) == {site.url("/"), site.url("/next")}
    assert {r.path: r.headers.get("authorization") for r in site.requests if r.path in ("/", "/next")} == {
        "/": "Bearer s3cret",
        "/next": "Bearer s3cret",
    }
    assert sorted(r.path for r in other_site.requests) == ["/lib.js", "/pixel.png"]
    assert all(r.headers.get("authorization") is None and r.headers.get("cookie") is None for r in other_site.requests)
