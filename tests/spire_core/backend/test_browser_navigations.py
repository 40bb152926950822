"""A page's own navigation (a meta refresh, a script's ``location=``, a submitted form) is admitted as a
redirect hop is: robots.txt, the strategy and the address guard refuse it before Chromium sends it.

Each test runs a real headless Chromium on a local site whose linked pages navigate away by
themselves, and checks that the refused target got no request and no handler saw it.
"""

from __future__ import annotations

import pytest

from spire import BrowserBackend, Crawler, CrawlPolicy, HostLimits, Links, Response, Router
from spire_core.session.retry import RetryPolicy
from tests.sites.server import Site
from tests.spire_core.backend.local_chrome import LocalChrome
from tests.spire_core.backend.recording_proxy import RecordingProxy

#: The ways a page navigates by itself, each to ``{target}``.
NAVIGATIONS = {
    "refresh": '<meta http-equiv="refresh" content="0; url={target}"><p>leaving</p>',
    "script": '<p>leaving</p><script>location = "{target}";</script>',
    "form": '<form id="f" action="{target}"></form><script>document.getElementById("f").submit();</script>',
}


def navigating_site(site: Site, target: str) -> None:
    """``/`` links to one page per kind of navigation, each of which goes to ``target`` by itself."""
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/", "".join(f'<a href="/{kind}">{kind}</a>' for kind in NAVIGATIONS))
    for kind, page in NAVIGATIONS.items():
        site.page(f"/{kind}", page.format(target=target))
    site.page("/private", "<p>the private page</p>")


def crawl(site: Site, backend: BrowserBackend, *, anywhere: bool = False) -> tuple[Crawler, dict[str, bytes]]:
    """Crawl ``site`` from ``/``, following its links with a same-hostname strategy (or a crawl whose
    strategy lets a hop go ``anywhere``); each handled page's URL and body."""
    handled: dict[str, bytes] = {}
    router = Router()

    @router.default
    async def page(response: Response, links: Links) -> None:
        handled[response.url] = response.body
        if response.url == site.url("/"):
            await (links.all() if anywhere else links.same_hostname())

    policy = CrawlPolicy(strategy="all" if anywhere else "same_hostname")
    crawler = Crawler(
        router, backend=backend, policy=policy, host_limits=HostLimits(max_in_flight=2), retry=RetryPolicy.never()
    )
    crawler.run([site.url("/")])
    return crawler, handled


def test_a_navigation_to_a_path_robots_txt_disallows_is_a_robots_skip(site: Site, browser: BrowserBackend) -> None:
    navigating_site(site, "/private")
    crawler, handled = crawl(site, browser)
    assert site.hits()["/private"] == 0
    assert list(handled) == [site.url("/")]
    assert crawler.stats.skipped("robots") == len(NAVIGATIONS)


def test_a_navigation_off_the_links_host_name_is_a_strategy_skip(
    site: Site, other_site: Site, browser: BrowserBackend
) -> None:
    other_site.page("/off", "<p>off</p>")
    navigating_site(site, f"http://localhost:{other_site.port}/off")
    crawler, handled = crawl(site, browser)
    assert other_site.hits(robots=True) == {}
    assert list(handled) == [site.url("/")]
    assert crawler.stats.skipped("strategy") == len(NAVIGATIONS)


def test_a_navigation_to_an_address_the_crawl_did_not_start_on_is_refused_unsent(
    site: Site, chrome: LocalChrome
) -> None:
    # Through a proxy that answers anything but 127.0.0.1 itself, nothing leaves the machine either way.
    with RecordingProxy() as proxy:
        navigating_site(site, "http://10.1.2.3/secret")
        backend = BrowserBackend(drivers=2, page_load_timeout=10, proxy=proxy.url, **chrome)
        crawler, handled = crawl(site, backend, anywhere=True)
        assert not any(host.startswith("10.1.2.3") for host in proxy.hosts())
    assert list(handled) == [site.url("/")]
    assert crawler.stats.skipped("private_address") == len(NAVIGATIONS)


@pytest.mark.parametrize("kind", ["script"])
def test_a_navigation_the_crawl_admits_is_loaded_as_a_page_of_its_own(
    site: Site, browser: BrowserBackend, kind: str
) -> None:
    site.page("/", f'<a href="/{kind}">{kind}</a>')
    site.page(f"/{kind}", NAVIGATIONS[kind].format(target="/landing"))
    site.page("/landing", "<p>landed</p>")
    _, handled = crawl(site, browser)
    assert list(handled) == [site.url("/"), site.url("/landing")]
    assert site.hits()["/landing"] == 1
