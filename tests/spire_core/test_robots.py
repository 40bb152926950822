"""robots.txt: group choice, matching (through protego), AI-use lines, and the fetching cache."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import anyio
import pytest

from spire_core.backend.http import HttpBackend
from spire_core.clock import FakeClock
from spire_core.errors import InvalidUrl
from spire_core.robots import MAX_ROBOTS_BYTES, Purpose, Robots, RobotsCache, robots
from tests.sites.server import Site

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # HttpBackend's default transport is aiohttp, which runs on asyncio


@pytest.fixture
async def backend() -> AsyncIterator[HttpBackend]:
    client = HttpBackend(timeout=5)
    yield client
    await client.aclose()


def text_file(body: str | bytes, status: int = 200) -> tuple[int, dict[str, str], bytes]:
    payload = body.encode() if isinstance(body, str) else body
    return status, {"Content-Type": "text/plain"}, payload


# -- choosing the group ---------------------------------------------------------------------------


def test_groups_naming_the_agent_are_merged_without_case() -> None:
    rules = Robots.parse(
        "User-agent: *\nDisallow: /star\n\n"
        "User-agent: ExampleBot\nDisallow: /one\n\n"
        "User-agent: other\nDisallow: /other\n\n"
        "User-agent: EXAMPLEBOT\nDisallow: /two\n",
        "examplebot",
    )
    assert not rules.allows("https://a.example/one")
    assert not rules.allows("https://a.example/two")
    assert rules.allows("https://a.example/star")  # the * group does not apply once one names the agent
    assert rules.allows("https://a.example/other")


def test_star_groups_apply_when_no_group_names_the_agent() -> None:
    text = "User-agent: *\nDisallow: /a\n\nUser-agent: otherbot\nDisallow: /b\n\nUser-agent: *\nDisallow: /c\n"
    for agent in ("*", "examplebot"):
        rules = Robots.parse(text, agent)
        assert not rules.allows("/a")
        assert not rules.allows("/c")
        assert rules.allows("/b")


def test_consecutive_user_agent_lines_share_a_group() -> None:
    rules = Robots.parse("User-agent: otherbot\nUser-agent: examplebot\nDisallow: /shared\n", "examplebot")
    assert not rules.allows("/shared")


def test_a_group_must_name_the_exact_product_token() -> None:
    text = "User-agent: example\nDisallow: /short\n\nUser-agent: examplebot-news\nDisallow: /long\n"
    rules = Robots.parse(text, "examplebot")
    assert rules.allows("/short")
    assert rules.allows("/long")
    # A version after the token, on either side, does not matter.
    assert not Robots.parse("User-agent: ExampleBot/2.1\nDisallow: /x\n", "examplebot/1.0").allows("/x")


# -- matching -------------------------------------------------------------------------------------


def test_the_longest_rule_wins_and_allow_wins_a_tie() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /shop\nAllow: /shop/public\nDisallow: /page\nAllow: /page\n")
    assert not rules.allows("/shop/cart")
    assert rules.allows("/shop/public/item")
    assert rules.allows("/page")


def test_star_matches_any_run_and_dollar_ends_a_pattern() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /*.pdf$\nDisallow: /tmp*/cache\n")
    assert not rules.allows("/files/report.pdf")
    assert rules.allows("/files/report.pdf?download=1")
    assert rules.allows("/files/report.pdfx")
    assert not rules.allows("/tmp-2024/x/cache/a")
    assert rules.allows("/tmp/nothing")


def test_percent_encoding_is_normalised_on_both_sides() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /%7Ejoe\nDisallow: /caf%C3%A9\nDisallow: /~ann\n")
    assert not rules.allows("https://a.example/~joe/page")
    assert not rules.allows("https://a.example/café")
    assert not rules.allows("https://a.example/%7eann")
    # An encoded slash is not a path separator: protego keeps it apart from "/".
    assert Robots.parse("User-agent: *\nDisallow: /a%2Fb\n").allows("/a/b")


def test_robots_txt_itself_is_always_allowed() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /\n")
    assert not rules.allows("https://a.example/page")
    assert rules.allows("https://a.example/robots.txt")


def test_crawl_delay_comes_from_the_group_and_is_capped_at_30_seconds() -> None:
    text = (
        "User-agent: *\nCrawl-delay: 2.5\n\n"
        "User-agent: slowbot\nCrawl-delay: 3600\n\n"
        "User-agent: badbot\nCrawl-delay: soon\n"
    )
    assert Robots.parse(text).crawl_delay() == 2.5
    assert Robots.parse(text, "slowbot").crawl_delay() == 30.0
    assert Robots.parse(text, "badbot").crawl_delay() is None


def test_sitemaps_lists_every_sitemap_line_wherever_it_sits() -> None:
    rules = Robots.parse(
        "Sitemap: https://a.example/one.xml\nUser-agent: otherbot\nDisallow: /\n"
        "Sitemap: https://a.example/two.xml\nsitemap https://a.example/three.xml\n"
    )
    assert rules.sitemaps() == [
        "https://a.example/one.xml",
        "https://a.example/two.xml",
        "https://a.example/three.xml",
    ]


def test_malformed_lines_are_ignored_and_never_fail_the_parse() -> None:
    text = (
        b"Disallow: /before-any-agent\n"
        b"\x00\xff\xfe garbage line\n"
        b"User-agent *\n"  # no colon: still read
        b"Disallow /no-colon\n"
        b"Nonsense: value\n"
        b"Disallow:\n"
        b"Crawl-delay: -4\n"
        b": empty field\n"
    )
    rules = Robots.parse(text)
    assert rules.allows("/before-any-agent")
    assert not rules.allows("/no-colon")
    assert rules.crawl_delay() is None


def test_only_the_first_512_kib_are_parsed_and_a_cut_line_is_dropped() -> None:
    head = "User-agent: *\nDisallow: /early\n"
    padding = "# " + "x" * 1000 + "\n"
    body = head + padding * ((MAX_ROBOTS_BYTES - len(head)) // len(padding))
    # This line straddles the limit: read cut short it would be "Disallow: /", blocking everything.
    straddling = "Disallow: /" + "p" * 100 + "\n"
    cut = MAX_ROBOTS_BYTES - len(body.encode()) - 1 - len("Disallow: /")
    body = body + "#" * cut + "\n" + straddling + "Disallow: /late\n"
    rules = Robots.parse(body)
    assert not rules.allows("/early")
    assert rules.allows("/late")
    assert rules.allows("/other")


# -- AI-use preferences ---------------------------------------------------------------------------


def test_content_signal_maps_its_labels_to_purposes() -> None:
    rules = Robots.parse("User-agent: *\nContent-Signal: search=yes, ai-input=no, ai-train=no\nAllow: /\n")
    assert rules.allows_use("https://a.example/", Purpose.SEARCH)
    assert not rules.allows_use("https://a.example/", Purpose.AI_INPUT)
    assert not rules.allows_use("https://a.example/", "ai-train")


def test_content_usage_maps_ai_use_and_train_ai() -> None:
    rules = Robots.parse("User-agent: *\nContent-Usage: search=y, ai-use=n, train-ai=n\n")
    assert rules.allows_use("/", Purpose.SEARCH)
    assert not rules.allows_use("/", Purpose.AI_INPUT)
    assert not rules.allows_use("/", Purpose.AI_TRAIN)


def test_a_purpose_no_line_names_is_allowed_and_unknown_labels_are_ignored() -> None:
    rules = Robots.parse(
        "User-agent: *\nContent-Signal: ai-train=no, use=reference, ai-use=no\n"
        "Content-Usage: train-genai=n, ai-input=n, search=no\n"
    )
    assert not rules.allows_use("/", Purpose.AI_TRAIN)
    # ai-use belongs to Content-Usage, ai-input to Content-Signal, and "no" is not a Content-Usage value.
    assert rules.allows_use("/", Purpose.AI_INPUT)
    assert rules.allows_use("/", Purpose.SEARCH)
    assert Robots.parse("User-agent: *\nDisallow: /x\n").allows_use("/", Purpose.AI_TRAIN)


def test_content_usage_path_pattern_limits_the_line() -> None:
    rules = Robots.parse("User-agent: *\nContent-Usage: /articles/ train-ai=n\n")
    assert not rules.allows_use("https://a.example/articles/1", Purpose.AI_TRAIN)
    assert rules.allows_use("https://a.example/about", Purpose.AI_TRAIN)
    tabbed = Robots.parse("User-agent: *\nContent-Usage: /articles/\ttrain-ai=n\n")
    assert not tabbed.allows_use("https://a.example/articles/1", Purpose.AI_TRAIN)


def test_the_longest_matching_pattern_decides_ai_use() -> None:
    rules = Robots.parse(
        "User-agent: *\n"
        "Content-Usage: train-ai=n\n"
        "Content-Usage: /docs/ train-ai=y\n"
        "Content-Usage: /docs/private* train-ai=n\n"
        "Content-Usage: /*.pdf$ train-ai=n\n"
    )
    assert not rules.allows_use("/blog/post", Purpose.AI_TRAIN)
    assert rules.allows_use("/docs/guide", Purpose.AI_TRAIN)
    assert not rules.allows_use("/docs/private-notes", Purpose.AI_TRAIN)
    # "/*.pdf$" is seven octets, one more than "/docs/": it decides.
    assert not rules.allows_use("/docs/x.pdf", Purpose.AI_TRAIN)
    assert not rules.allows_use("/x.pdf", Purpose.AI_TRAIN)


def test_no_wins_a_tie_between_lines_of_equal_length() -> None:
    for order in (("y", "n"), ("n", "y")):
        text = f"User-agent: *\nContent-Usage: /a train-ai={order[0]}\nContent-Usage: /a train-ai={order[1]}\n"
        assert not Robots.parse(text).allows_use("/a/page", Purpose.AI_TRAIN)
    both = "User-agent: *\nContent-Signal: ai-train=yes\nContent-Usage: train-ai=n\n"
    assert not Robots.parse(both).allows_use("/", Purpose.AI_TRAIN)


def test_ai_lines_belong_to_the_group_they_sit_in() -> None:
    text = "User-agent: *\nContent-Signal: ai-train=no\n\nUser-agent: examplebot\nContent-Signal: ai-train=yes\n"
    assert not Robots.parse(text).allows_use("/", Purpose.AI_TRAIN)
    assert Robots.parse(text, "ExampleBot").allows_use("/", Purpose.AI_TRAIN)
    assert not Robots.parse(text, "otherbot").allows_use("/", Purpose.AI_TRAIN)


# -- the cache, against a local site --------------------------------------------------------------


async def test_a_404_robots_txt_allows_everything(site: Site, backend: HttpBackend) -> None:
    rules = await RobotsCache(backend, clock=FakeClock()).get(site.url("/private"))
    assert rules.reachable
    assert rules.allows(site.url("/private"))
    assert site.hits(robots=True)["/robots.txt"] == 1


async def test_a_robots_txt_failing_five_times_leaves_the_origin_unreachable(site: Site, backend: HttpBackend) -> None:
    site.page("/robots.txt", "busy", status=503)
    rules = await RobotsCache(backend, clock=FakeClock()).get(site.url("/"))
    assert not rules.reachable
    assert not rules.allows(site.url("/page"))
    assert site.hits(robots=True)["/robots.txt"] == 5  # one try and four retries


async def test_a_503_then_a_200_gives_the_rules(site: Site, backend: HttpBackend) -> None:
    site.sequence("/robots.txt", [text_file("busy", 503), text_file("User-agent: *\nDisallow: /private\n")])
    rules = await RobotsCache(backend, clock=FakeClock()).get(site.url("/"))
    assert rules.reachable
    assert not rules.allows(site.url("/private"))
    assert site.hits(robots=True)["/robots.txt"] == 2


async def test_retries_wait_the_given_delays_in_turn(site: Site, backend: HttpBackend) -> None:
    site.page("/robots.txt", "busy", status=500)
    clock = FakeClock()
    delays = (5.0, 10.0, 15.0, 20.0)
    rules = await RobotsCache(backend, retry_delays=delays, clock=clock).get(site.url("/"))
    assert clock.slept == list(delays)  # one wait before each new try, in turn, on the cache's clock
    assert site.hits(robots=True)["/robots.txt"] == 5
    assert not rules.reachable


async def test_an_unreachable_server_is_retried_then_unreachable(backend: HttpBackend) -> None:
    with Site() as closed:
        url = closed.url("/")
    rules = await RobotsCache(backend, clock=FakeClock()).get(url)
    assert not rules.reachable


async def test_five_redirects_are_followed_and_the_rules_apply_to_the_origin_asked(
    site: Site, other_site: Site, backend: HttpBackend
) -> None:
    chain = ["/robots.txt", "/r1", "/r2", "/r3", "/r4"]
    for here, there in zip(chain, [*chain[1:], None], strict=True):
        target = site.url(there) if there else other_site.url("/robots.txt")
        site.page(here, "", status=301, headers={"Location": target})
    other_site.page("/robots.txt", "User-agent: *\nDisallow: /secret\n", content_type="text/plain")
    cache = RobotsCache(backend, clock=FakeClock())
    rules = await cache.get(site.url("/"))
    assert not rules.allows(site.url("/secret"))
    # The rules are the first origin's: asking again does not fetch, and the other origin has none of its own.
    await cache.get(site.url("/again"))
    assert site.hits(robots=True)["/robots.txt"] == 1
    assert other_site.hits(robots=True)["/robots.txt"] == 1


async def test_a_sixth_redirect_is_not_followed_and_allows_everything(site: Site, backend: HttpBackend) -> None:
    chain = ["/robots.txt", "/r1", "/r2", "/r3", "/r4", "/r5", "/r6"]
    for here, there in itertools.pairwise(chain):
        site.page(here, "", status=302, headers={"Location": there})
    site.page("/r6", "User-agent: *\nDisallow: /\n", content_type="text/plain")
    rules = await RobotsCache(backend, clock=FakeClock()).get(site.url("/"))
    assert rules.reachable
    assert rules.allows(site.url("/page"))
    assert site.hits(robots=True)["/r5"] == 1
    assert site.hits(robots=True)["/r6"] == 0


async def test_only_512_kib_of_a_fetched_file_are_read(site: Site, backend: HttpBackend) -> None:
    head = "User-agent: *\nDisallow: /early\n"
    body = head + "#" * MAX_ROBOTS_BYTES + "\nDisallow: /late\n"
    site.page("/robots.txt", body, content_type="text/plain")
    rules = await RobotsCache(backend, clock=FakeClock()).get(site.url("/"))
    assert not rules.allows(site.url("/early"))
    assert rules.allows(site.url("/late"))


async def test_the_file_is_read_again_only_after_refresh_after(site: Site, backend: HttpBackend) -> None:
    site.sequence(
        "/robots.txt",
        [text_file("User-agent: *\nDisallow: /old\n"), text_file("User-agent: *\nDisallow: /new\n")],
    )
    clock = FakeClock()
    cache = RobotsCache(backend, refresh_after=3600, clock=clock)
    await cache.get(site.url("/"))
    clock.advance(3599)
    rules = await cache.get(site.url("/"))
    assert not rules.allows(site.url("/old"))
    assert cache.known(site.origin) is not None
    assert site.hits(robots=True)["/robots.txt"] == 1

    clock.advance(1)
    assert cache.known(site.origin) is None  # stale: the gate would have it read again
    rules = await cache.get(site.url("/"))
    assert site.hits(robots=True)["/robots.txt"] == 2
    assert rules.allows(site.url("/old"))
    assert not rules.allows(site.url("/new"))


async def test_a_refresh_that_finds_the_site_unreachable_keeps_the_rules(site: Site, backend: HttpBackend) -> None:
    site.sequence("/robots.txt", [text_file("User-agent: *\nDisallow: /private\n"), text_file("down", 503)])
    clock = FakeClock()
    cache = RobotsCache(backend, refresh_after=60, clock=clock)
    await cache.get(site.url("/"))
    clock.advance(60)
    rules = await cache.get(site.url("/"))
    assert site.hits(robots=True)["/robots.txt"] == 6
    assert clock.slept == [1.0, 2.0, 4.0, 8.0]  # the default retry waits, passed on the fake clock
    assert rules.reachable
    assert not rules.allows(site.url("/private"))


async def test_concurrent_callers_for_one_origin_share_one_fetch(site: Site, backend: HttpBackend) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain", delay=0.2)
    cache = RobotsCache(backend, clock=FakeClock())
    results: list[Robots] = []

    async def ask(agent: str) -> None:
        results.append(await cache.get(site.url("/page"), agent))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for index in range(10):
                tg.start_soon(ask, f"bot{index % 3}")
    assert site.hits(robots=True)["/robots.txt"] == 1
    assert len(results) == 10
    assert not any(rules.allows(site.url("/private")) for rules in results)


async def test_one_fetch_serves_every_agent(site: Site, backend: HttpBackend) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /a\n\nUser-agent: examplebot\nDisallow: /b\n")
    cache = RobotsCache(backend, clock=FakeClock(), agent="examplebot")
    named = await cache.get(site.url("/"))
    star = await cache.get(site.url("/"), "*")
    assert (named.allows("/a"), named.allows("/b")) == (True, False)
    assert (star.allows("/a"), star.allows("/b")) == (False, True)
    assert site.hits(robots=True)["/robots.txt"] == 1


async def test_robots_fetches_the_rules_for_an_agent(site: Site) -> None:
    site.page("/robots.txt", "User-agent: ExampleBot\nDisallow: /private\nCrawl-delay: 2\n")
    rules = await robots(site.url("/some/page"), "examplebot")  # through an HttpBackend of its own
    assert not rules.allows(site.url("/private/report.html"))
    assert rules.crawl_delay() == 2.0


async def test_only_an_invalid_url_raises(backend: HttpBackend) -> None:
    for url in ("ftp://a.example/", "not a url", "http://"):
        with pytest.raises(InvalidUrl):
            await robots(url, backend=backend)


def test_a_relative_sitemap_line_is_resolved_against_the_robots_txt_url() -> None:
    text = "Sitemap: /sitemap-relative.xml\nSitemap: maps/b.xml\nSitemap: HTTP://a.example/upper.xml\n"
    assert Robots.parse(text, url="https://a.example/robots.txt").sitemaps() == [
        "https://a.example/sitemap-relative.xml",
        "https://a.example/maps/b.xml",
        "http://a.example/upper.xml",
    ]
    # Without the file's address a relative line names nothing.
    assert Robots.parse(text).sitemaps() == ["http://a.example/upper.xml"]


async def test_the_cache_resolves_relative_sitemap_lines_against_the_file(site: Site, backend: HttpBackend) -> None:
    site.page("/robots.txt", "User-agent: *\nSitemap: /sitemap_index.xml\n", content_type="text/plain")
    rules = await RobotsCache(backend, clock=FakeClock()).get(site.url("/"))
    assert rules.sitemaps() == [site.url("/sitemap_index.xml")]


@pytest.mark.parametrize("mark", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"])
def test_a_whole_or_partial_utf8_bom_keeps_the_first_group(mark: bytes) -> None:
    rules = Robots.parse(mark + b"User-agent: FooBot\nDisallow: /private\n", "FooBot")
    assert not rules.allows("https://a.example/private")
    assert rules.allows("https://a.example/public")


def test_a_bom_in_the_middle_of_the_file_is_not_skipped() -> None:
    rules = Robots.parse(b"User-agent: FooBot\n\xef\xbb\xbfDisallow: /private\n", "FooBot")
    assert rules.allows("https://a.example/private")


def test_a_url_too_broken_to_split_is_invalid_url_not_a_value_error() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /x\nContent-Usage: /x train-ai=n\n")
    with pytest.raises(InvalidUrl):
        rules.allows("http://example.com[")
    with pytest.raises(InvalidUrl):
        rules.allows_use("http://example.com[", Purpose.AI_TRAIN)
