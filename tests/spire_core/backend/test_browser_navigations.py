"""A page's own navigation (a meta refresh, a script's ``location=``, a submitted form) is admitted as a
redirect hop is: robots.txt, the strategy and the address guard refuse it before Chromium sends it.
After the load, while a handler holds the tab, each move of it (a timer's, a click's) is judged as a
link of the page the tab holds, before it is sent.

Each test runs a real headless Chromium on a local site whose linked pages navigate away by
themselves, and checks that the refused target got no request and no handler saw it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterator

import anyio
import anyio.to_thread
import pytest
from selenium.webdriver.chrome.options import Options

from spire import BrowserBackend, Crawler, CrawlPolicy, Driver, HostLimits, Links, Response, Router
from spire.testing.site import Request
from spire_core.admission import Strategy
from spire_core.session.retry import RetryPolicy
from tests.sites.server import Reply, Site
from tests.spire_core.backend.local_chrome import LOCAL_HOSTS, LocalChrome
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


# -- after the load: the tab a handler holds moves on only where the crawl would go ------------------

#: A name the test's Chromium resolves to 127.0.0.1 by itself: the crawl cannot tell its address, so a
#: crawl started there is a public one, whose tab may not reach loopback.
PUBLIC_NAME = "public.test"

#: What a handler does with its tab.
Drive = Callable[[Driver], Awaitable[None]]


@pytest.fixture(scope="module")
def public_browser(chrome: LocalChrome) -> Iterator[BrowserBackend]:
    """A backend of one browser that resolves ``PUBLIC_NAME`` to 127.0.0.1 (and nothing but local names)."""
    options = Options()
    kept = ", ".join(f"EXCLUDE {host}" for host in sorted(LOCAL_HOSTS))
    options.add_argument(f"--host-resolver-rules=MAP {PUBLIC_NAME} 127.0.0.1, MAP * ~NOTFOUND, {kept}")
    backend = BrowserBackend(drivers=1, page_load_timeout=10, options=options, **chrome)  # the user's switch wins
    yield backend
    anyio.run(backend.aclose)


class Decided(logging.Handler):
    """Notes each move the crawl logs as refused; ``event`` is set then, or when ``hit`` sees a request."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.event = threading.Event()
        self.refused: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "was refused" in record.getMessage():
            self.refused.append(record.getMessage())
            self.event.set()

    async def wait(self) -> None:
        """Until the tab's move was decided (it is judged in another thread), for at most 10 s."""
        await anyio.to_thread.run_sync(self.event.wait, 10.0)


@pytest.fixture
def decided() -> Iterator[Decided]:
    crawler_log = logging.getLogger("spire.crawler")
    handler, level = Decided(), crawler_log.level
    crawler_log.addHandler(handler)
    crawler_log.setLevel(logging.INFO)
    yield handler
    crawler_log.removeHandler(handler)
    crawler_log.setLevel(level)


def held_crawl(
    start: str, backend: BrowserBackend, drive: Drive, *, strategy: Strategy = "same_hostname"
) -> tuple[Crawler, list[tuple[str, str]]]:
    """Crawl ``start`` alone with a handler that runs ``drive`` on its tab, then notes the tab's URL and DOM."""
    seen: list[tuple[str, str]] = []
    router = Router()

    @router.default
    async def page(driver: Driver) -> None:
        await drive(driver)
        seen.append((await driver.url(), await driver.html()))

    crawler = Crawler(router, backend=backend, policy=CrawlPolicy(strategy=strategy), retry=RetryPolicy.never())
    crawler.run([start])
    return crawler, seen


def hit(site: Site, path: str, decided: Decided) -> Callable[[], bool]:
    """Whether ``site`` was asked for ``path`` (a small page), which also ends ``decided``'s wait."""
    asked = threading.Event()

    def answer(request: Request) -> Reply:
        asked.set()
        decided.event.set()
        return 200, {"Content-Type": "text/html"}, f"<p>{path}</p>".encode()

    site.route(path, answer)
    return asked.is_set


def test_a_timed_move_to_loopback_after_the_load_is_refused_unsent_and_the_tab_keeps_its_page(
    site: Site, other_site: Site, public_browser: BrowserBackend, decided: Decided
) -> None:
    secret = hit(other_site, "/secret", decided)
    later = f'function later() {{ setTimeout(() => {{ location = "{other_site.url("/secret")}"; }}, 100); }}'
    site.page("/", f"<p>the start page</p><script>{later}</script>")
    start = f"http://{PUBLIC_NAME}:{site.port}/"

    async def drive(driver: Driver) -> None:
        await driver.execute("later()")  # the page's own timer fires while the handler holds the tab
        await decided.wait()

    crawler, seen = held_crawl(start, public_browser, drive, strategy="all")
    assert not secret()
    assert other_site.hits(robots=True) == {}
    [(url, dom)] = seen
    assert url == start
    assert "the start page" in dom
    assert crawler.stats.skipped("private_address") == 1
    assert len(decided.refused) == 1
    assert (crawler.stats.finished, crawler.stats.failed) == (1, 0)


@pytest.mark.parametrize("where", ["robots", "strategy"])
def test_a_handlers_click_to_a_page_the_crawl_would_not_fetch_is_not_sent(
    site: Site, other_site: Site, browser: BrowserBackend, decided: Decided, where: str
) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    target, asked = (
        ("/private", hit(site, "/private", decided))
        if where == "robots"
        else (f"http://localhost:{other_site.port}/off", hit(other_site, "/off", decided))
    )
    site.page("/", f'<p>the start page</p><a id="go" href="{target}">go</a>')

    async def drive(driver: Driver) -> None:
        await driver.click("#go")
        await decided.wait()

    crawler, seen = held_crawl(site.url("/"), browser, drive)
    assert not asked()
    [(url, dom)] = seen
    assert url == site.url("/")
    assert "the start page" in dom
    assert crawler.stats.skipped(where) == 1


def test_a_handlers_click_to_an_allowed_page_loads_it_and_moves_on_from_there_are_judged(
    site: Site, browser: BrowserBackend, decided: Decided
) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/", '<a id="go" href="/next">next</a>')
    site.page("/next", '<p>the next page</p><a id="go" href="/private">private</a>')
    private = hit(site, "/private", decided)

    async def drive(driver: Driver) -> None:
        await driver.click("#go")
        await driver.wait_for(lambda webdriver: "the next page" in webdriver.page_source)
        await driver.click("#go")  # from the page the tab moved to, judged again
        await decided.wait()

    crawler, seen = held_crawl(site.url("/"), browser, drive)
    [(url, dom)] = seen
    assert (url, "the next page" in dom) == (site.url("/next"), True)
    assert site.hits()["/next"] == 1
    assert not private()
    assert crawler.stats.skipped("robots") == 1
