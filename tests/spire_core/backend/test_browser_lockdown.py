"""A crawler's browser sends only what the crawl asks for, and keeps its redirects through a proxy.

Each test runs a real headless Chromium. Through ``RecordingProxy`` every request Chromium sends is
seen, its own background services' included, whatever name they are for.
"""

from __future__ import annotations

import ast
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from selenium.webdriver.chrome.options import Options

from spire import BrowserBackend, Crawler, Html, Links, Response, Router, Seed
from spire_core.backend.browser.chromium import Launch
from spire_core.backend.browser.switches import DISABLED_FEATURES
from spire_core.errors import ConfigError, SpireError
from tests.sites.server import Site, binary_tree
from tests.spire_core.backend.local_chrome import LocalChrome
from tests.spire_core.backend.recording_proxy import RecordingProxy

#: How long the browser stays open after its pages: Chromium's services start within seconds of
#: launch (network time, component and model updates, account checks, the search engine's page,
#: optimization hints by 12 s), so each has had its chance by then. A request of one ends it early.
BACKGROUND_WINDOW = 15.0


def test_chromium_sends_no_request_but_the_crawls(site: Site, chrome: LocalChrome) -> None:
    root = binary_tree(site, pages=7)
    site.page("/last", "<p>last</p>")
    with RecordingProxy() as proxy:
        router = Router()
        handled: list[str] = []

        @router.default
        async def page(response: Response, html: Html, links: Links) -> None:
            handled.append(response.url)
            await links.follow(html.css("a::attr(href)").getall())

        @router.handler("last")
        async def last(response: Response) -> None:
            handled.append(response.url)
            # Keep the browser (its session is still open) alive for its services to show up.
            await anyio.to_thread.run_sync(proxy.foreign.wait, BACKGROUND_WINDOW)

        # No host-resolver lockdown here: every name resolves, so only the switches keep Chromium quiet,
        # and the proxy (which loopback does not bypass) sees every request, answering foreign ones 502.
        binaries = {"chromium": chrome["chromium"], "chromedriver": chrome["chromedriver"]}
        backend = BrowserBackend(drivers=1, proxy=proxy.url, resolve_only=None, **binaries)
        stats = Crawler(router, backend=backend).run([root, Seed(site.url("/last"), tag="last")])
    assert (stats.finished, stats.failed, len(handled)) == (8, 0, 8)
    assert proxy.hosts() == {f"127.0.0.1:{site.port}"}, proxy.log


def test_a_redirect_through_a_proxy_ends_at_the_final_url_with_its_chain(site: Site, chrome: LocalChrome) -> None:
    site.route("/r", lambda request: (302, {"Location": "/hop"}, b""))
    site.route("/hop", lambda request: (301, {"Location": "/final"}, b""))
    site.page("/final", "<title>final</title><p>the final page</p>")
    with RecordingProxy() as proxy:
        seen: list[Response] = []
        router = Router()

        @router.default
        async def final(response: Response) -> None:
            seen.append(response)

        backend = BrowserBackend(drivers=1, proxy=proxy.url, **chrome)
        Crawler(router, backend=backend, robots=False).run([site.url("/r")])
    [response] = seen
    assert (response.status, response.url) == (200, site.url("/final"))
    assert response.redirects == (site.url("/r"), site.url("/hop"))
    assert "the final page" in response.text
    assert [target for _, target in proxy.log] == [site.url(path) for path in ("/r", "/hop", "/final")]


def test_resolve_only_keeps_the_browser_to_the_names_it_lists(site: Site, chrome: LocalChrome) -> None:
    site.page("/here", "<p>here</p>")
    backend = BrowserBackend(
        drivers=1, chromium=chrome["chromium"], chromedriver=chrome["chromedriver"], resolve_only={"127.0.0.1"}
    )
    by_name = f"http://localhost:{site.port}/here"

    async def main() -> tuple[Response, SpireError]:
        try:
            allowed = await backend.fetch(Seed(site.url("/here")))
            with pytest.raises(SpireError) as refused:
                await backend.fetch(Seed(by_name))
            return allowed, refused.value
        finally:
            await backend.aclose()

    allowed, refused = anyio.run(main)
    assert "here" in allowed.text
    assert "ERR_NAME_NOT_RESOLVED" in str(refused)
    assert site.hits()["/here"] == 1  # localhost, which resolves everywhere, was never asked


def test_resolve_only_is_checked(chrome: LocalChrome) -> None:
    binaries = {"chromium": chrome["chromium"], "chromedriver": chrome["chromedriver"]}
    with pytest.raises(ConfigError, match="collection of host names"):
        BrowserBackend(resolve_only="localhost", **binaries)
    with pytest.raises(ConfigError, match="bare host names"):
        BrowserBackend(resolve_only={"http://localhost"}, **binaries)


def test_the_users_own_disabled_features_join_spires(chrome: LocalChrome) -> None:
    given = Options()
    given.add_argument("--disable-features=Foo")
    given.add_experimental_option("prefs", {"intl.accept_languages": "fr"})
    launch = Launch(chromium=chrome["chromium"], chromedriver=chrome["chromedriver"], options=given)
    options = launch.chrome_options("/tmp/profile")
    features = [argument for argument in options.arguments if argument.startswith("--disable-features=")]
    assert features == ["--disable-features=" + ",".join((*DISABLED_FEATURES, "Foo"))]
    assert options.experimental_options["prefs"]["intl.accept_languages"] == "fr"
    assert options.experimental_options["prefs"]["session.startup_urls"] == ["about:blank"]
    assert given.arguments == ["--disable-features=Foo"]  # the user's options are left as they were


def test_every_backend_a_test_builds_resolves_local_names_only() -> None:
    """A test's ``BrowserBackend`` takes ``**chrome`` (which holds ``resolve_only``) or its own ``resolve_only``."""
    tests = Path(__file__).resolve().parents[2]
    bare = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "BrowserBackend":
                given = {keyword.arg for keyword in node.keywords}
                if None not in given and "resolve_only" not in given:
                    bare.append(f"{path.relative_to(tests)}:{node.lineno}")
    assert bare == []
