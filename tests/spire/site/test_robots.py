"""robots.txt in the site crawl: read first, re-read, retried, redirected, capped, Crawl-delay, agents, AI use."""

from __future__ import annotations

import pytest

import spire
from spire.site import SkipReason
from spire_core.robots import rules as robots_module
from tests.sites.server import Site
from tests.spire.site.helpers import (
    FAST,
    QUICK_RETRIES,
    collect,
    gaps,
    page,
    page_paths,
    paths,
    redirect,
    robots,
    text,
    urls_of,
)

pytestmark = pytest.mark.anyio


async def test_robots_txt_is_read_before_any_page_and_counts_as_a_request(site: Site) -> None:
    robots(site, "User-agent: *\nDisallow: /private\n")
    site.page("/", page("home", "/a", "/private"))
    site.page("/a", page("a"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert paths(site)[0] == "/robots.txt"
    assert paths(site).count("/robots.txt") == 1
    assert urls_of(pages) == {site.url("/"), site.url("/a")}
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 1
    assert crawl.stats.requests == len(site.requests)  # robots.txt and /sitemap.xml included


async def test_robots_txt_is_read_again_once_its_rules_are_older_than_refresh_after(site: Site) -> None:
    site.sequence("/robots.txt", [text("User-agent: *\nAllow: /\n"), text("User-agent: *\nDisallow: /p5\n")])
    for number in range(7):
        site.page(f"/p{number}", page(f"page {number}", f"/p{number + 1}"), delay=0.05)
    crawl = spire.crawl(site.url("/p0"), host_limits=FAST, robots_refresh_after=0.1)
    pages, _ = await collect(crawl)
    assert paths(site).count("/robots.txt") >= 2
    # The second file disallows /p5: the crawl obeys the rules it read again.
    assert site.url("/p5") not in urls_of(pages)
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 1


async def test_robots_txt_is_read_once_within_the_default_24_hours(site: Site) -> None:
    for number in range(7):
        site.page(f"/p{number}", page(f"page {number}", f"/p{number + 1}"), delay=0.02)
    await collect(spire.crawl(site.url("/p0"), host_limits=FAST))
    assert paths(site).count("/robots.txt") == 1


@pytest.mark.parametrize("status", [401, 403, 404, 410])
async def test_a_4xx_robots_txt_allows_everything(site: Site, status: int) -> None:
    site.route("/robots.txt", lambda request: text("User-agent: *\nDisallow: /\n", status))
    site.page("/", page("home", "/a"))
    site.page("/a", page("a"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/a")}


async def test_an_unreachable_robots_txt_is_tried_five_times_then_the_site_is_skipped(site: Site) -> None:
    site.route("/robots.txt", lambda request: text("oops", 500))
    site.page("/", page("home"))
    delays = (0.05, 0.1, 0.15, 0.2)
    crawl = spire.crawl(site.url("/"), host_limits=FAST, robots_retry_delays=delays)
    pages, errors = await collect(crawl)
    assert pages == []
    assert errors == []
    assert paths(site) == ["/robots.txt"] * 5
    assert crawl.stats.skipped(SkipReason.ROBOTS_UNREACHABLE) == 1
    for waited, delay in zip(gaps(site.requests), delays, strict=True):
        assert waited >= delay * 0.9


async def test_the_default_robots_retries_wait_one_two_four_and_eight_seconds() -> None:
    from spire.site import ROBOTS_RETRY_DELAYS

    assert ROBOTS_RETRY_DELAYS == (1.0, 2.0, 4.0, 8.0)


async def test_a_robots_txt_that_recovers_gives_its_rules(site: Site) -> None:
    site.sequence(
        "/robots.txt",
        [text("busy", 500), text("busy", 429, **{"Retry-After": "0"}), text("User-agent: *\nDisallow: /private\n")],
    )
    site.page("/", page("home", "/private", "/a"))
    site.page("/a", page("a"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST, robots_retry_delays=QUICK_RETRIES)
    pages, _ = await collect(crawl)
    assert paths(site)[:3] == ["/robots.txt"] * 3
    assert urls_of(pages) == {site.url("/"), site.url("/a")}
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 1


async def test_an_unreachable_server_skips_the_site_after_the_retries(dead_port: int) -> None:
    url = f"http://127.0.0.1:{dead_port}/"  # connections are refused
    crawl = spire.crawl(url, host_limits=FAST, robots_retry_delays=QUICK_RETRIES)
    pages, errors = await collect(crawl)
    assert pages == []
    assert errors == []
    assert crawl.stats.skipped(SkipReason.ROBOTS_UNREACHABLE) == 1


async def test_only_the_first_512_kib_of_robots_txt_are_parsed(site: Site) -> None:
    padding = ("# " + "x" * 98 + "\n") * (600 * 1024 // 100)
    robots(site, "User-agent: *\nDisallow: /early\n" + padding + "Disallow: /late\n")
    site.page("/", page("home", "/early", "/late"))
    site.page("/late", page("late"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/late")}
    assert "/early" not in page_paths(site)


async def test_robots_txt_redirects_are_followed_five_times(site: Site) -> None:
    site.route("/robots.txt", lambda request: redirect("/r1"))
    for hop in range(1, 5):
        site.route(f"/r{hop}", lambda request, hop=hop: redirect(f"/r{hop + 1}"))
    site.route("/r5", lambda request: text("User-agent: *\nDisallow: /private\n"))
    site.page("/", page("home", "/private"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    await collect(crawl)
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 1
    assert "/private" not in paths(site)


async def test_a_sixth_robots_redirect_is_not_followed_and_everything_is_allowed(site: Site) -> None:
    site.route("/robots.txt", lambda request: redirect("/r1"))
    for hop in range(1, 6):
        site.route(f"/r{hop}", lambda request, hop=hop: redirect(f"/r{hop + 1}"))
    site.route("/r6", lambda request: text("User-agent: *\nDisallow: /private\n"))
    site.page("/", page("home", "/private"))
    site.page("/private", page("private"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert "/r6" not in paths(site)
    assert site.url("/private") in urls_of(pages)


async def test_crawl_delay_spaces_every_request_to_the_site(site: Site) -> None:
    robots(site, "User-agent: *\nCrawl-delay: 0.3\n")
    site.page("/", page("home", "/a", "/b", "/c"))
    for name in "abc":
        site.page(f"/{name}", page(name))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert len(pages) == 4
    assert len(site.requests) == 6  # robots.txt, /sitemap.xml and four pages
    assert min(gaps(site.requests)) >= 0.3 * 0.9


async def test_a_crawl_delay_over_the_cap_is_cut_to_it(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cap is 30 s; a smaller one shows the crawl applies the capped delay, not the file's hour.
    monkeypatch.setattr(robots_module, "MAX_CRAWL_DELAY", 0.25)
    robots(site, "User-agent: *\nCrawl-delay: 3600\n")
    site.page("/", page("home", "/a"))
    site.page("/a", page("a"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST), within=10)
    assert len(pages) == 2
    assert min(gaps(site.requests)) >= 0.25 * 0.9


ROBOTS_BY_AGENT = """\
User-agent: spirebot
Disallow: /a

User-agent: *
Disallow: /b

User-agent: SPIREBOT
Disallow: /c
"""


async def test_the_star_group_applies_by_default(site: Site) -> None:
    robots(site, ROBOTS_BY_AGENT)
    site.page("/", page("home", "/a", "/b", "/c"))
    for name in "abc":
        site.page(f"/{name}", page(name))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url(p) for p in ("/", "/a", "/c")}


async def test_a_named_agent_merges_its_groups_without_case(site: Site) -> None:
    robots(site, ROBOTS_BY_AGENT)
    site.page("/", page("home", "/a", "/b", "/c"))
    for name in "abc":
        site.page(f"/{name}", page(name))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, agent="SpireBot"))
    assert urls_of(pages) == {site.url(p) for p in ("/", "/b")}


async def test_robots_txt_itself_is_always_allowed(site: Site) -> None:
    robots(site, "User-agent: *\nDisallow: /\nAllow: /$\n")
    site.page("/", page("home", "/robots.txt", "/other"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    await collect(crawl)
    # /robots.txt is asked for as a link too (and skipped as not HTML); /other and /sitemap.xml are disallowed.
    assert paths(site) == ["/robots.txt", "/", "/robots.txt"]
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 2
    assert crawl.stats.skipped(SkipReason.CONTENT_TYPE) == 1


async def test_ignore_robots_never_asks_for_robots_txt(site: Site) -> None:
    robots(site, "User-agent: *\nDisallow: /\n")
    site.page("/", page("home", "/a"))
    site.page("/a", page("a"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, ignore_robots=True))
    assert "/robots.txt" not in paths(site)
    assert urls_of(pages) == {site.url("/"), site.url("/a")}


# -- AI-use preferences -----------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["Content-Signal: search=yes, ai-train=no", "Content-Usage: train-ai=n"])
async def test_a_site_refusing_ai_training_is_skipped_with_respect_ai_training(site: Site, line: str) -> None:
    robots(site, f"User-agent: *\n{line}\n")
    site.page("/", page("home", "/a"))
    site.page("/a", page("a"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST, respect="ai-training")
    pages, _ = await collect(crawl)
    assert pages == []
    assert page_paths(site) == []
    assert crawl.stats.skipped(SkipReason.AI) == 1
    # The same site, crawled for robots alone, is crawled whole.
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert len(pages) == 2


async def test_a_content_usage_path_pattern_refuses_only_its_paths(site: Site) -> None:
    robots(site, "User-agent: *\nContent-Usage: /articles/ train-ai=n\n")
    site.page("/", page("home", "/articles/one", "/about"))
    site.page("/articles/one", page("one"))
    site.page("/about", page("about"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, respect="ai-training"))
    assert urls_of(pages) == {site.url("/"), site.url("/about")}


async def test_a_noai_page_and_a_refusing_content_usage_header_are_skipped(site: Site) -> None:
    site.page("/", page("home", "/noai", "/header", "/fine"))
    site.page("/noai", page("noai", head='<meta name="robots" content="noai">'))
    site.page("/header", page("header"), headers={"Content-Usage": "train-ai=n"})
    site.page("/fine", page("fine"), headers={"Content-Usage": "train-ai=y"})
    crawl = spire.crawl(site.url("/"), host_limits=FAST, respect="ai-training")
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/fine")}
    assert crawl.stats.skipped(SkipReason.AI) == 2
    # Without respect="ai-training" both are kept.
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert len(pages) == 4
