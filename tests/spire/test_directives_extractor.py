"""The ``Directives`` extractor: a page's meta robots and X-Robots-Tag rules, for ``*`` or a named agent."""

from typing import Annotated, Any

from spire import Crawler, Directives, DirectivesFor, Html, Response, Router, Url
from spire_core import html
from tests.sites.server import Site


def directives_of(site: Site, *paths: str, agent: str | None = None) -> dict[str, html.Directives]:
    """Crawl ``paths`` of ``site`` with a handler that asks for ``Directives`` (for ``agent`` when given)."""
    found: dict[str, html.Directives] = {}
    router = Router()
    if agent is None:

        @router.default
        async def page(url: Url, rules: Directives) -> None:
            found[url] = rules

    else:

        @router.default
        async def page_for(url: Url, rules: Annotated[Directives, DirectivesFor(agent)]) -> None:
            found[url] = rules

    stats = Crawler(router).run([site.url(path) for path in paths])
    assert stats.failed == 0
    return {url.removeprefix(site.origin): rules for url, rules in found.items()}


def meta_page(*metas: tuple[str, str]) -> str:
    tags = "".join(f'<meta name="{name}" content="{content}">' for name, content in metas)
    return f"<html><head>{tags}</head><body>hello</body></html>"


def test_a_page_without_rules_may_be_indexed_and_followed(site: Site) -> None:
    site.page("/plain", meta_page())
    assert directives_of(site, "/plain") == {"/plain": html.Directives()}


def test_noindex_and_nofollow_come_from_the_meta_robots_tag(site: Site) -> None:
    site.page("/noindex", meta_page(("robots", "noindex")))
    site.page("/nofollow", meta_page(("ROBOTS", "NoFollow, noarchive")))
    site.page("/none", meta_page(("robots", "none")))
    found = directives_of(site, "/noindex", "/nofollow", "/none")
    assert found["/noindex"] == html.Directives(index=False, follow=True)
    assert found["/nofollow"] == html.Directives(index=True, follow=False)
    assert found["/none"] == html.Directives(index=False, follow=False)


def test_noindex_and_nofollow_come_from_an_x_robots_tag_header(site: Site) -> None:
    site.page("/header", meta_page(), headers={"X-Robots-Tag": "noindex, nofollow"})
    site.page("/noai", meta_page(), headers={"X-Robots-Tag": "noai"})
    found = directives_of(site, "/header", "/noai")
    assert found["/header"] == html.Directives(index=False, follow=False)
    assert found["/noai"] == html.Directives(ai=False, image_ai=False)


def test_a_body_that_is_not_html_is_judged_by_its_headers_alone(site: Site) -> None:
    site.page("/doc.txt", meta_page(("robots", "noindex")), content_type="text/plain")  # markup in plain text
    site.page("/doc.pdf", b"%PDF-1.7 ...", content_type="application/pdf", headers={"X-Robots-Tag": "noindex"})
    found = directives_of(site, "/doc.txt", "/doc.pdf")
    assert found["/doc.txt"] == html.Directives()
    assert found["/doc.pdf"] == html.Directives(index=False)


def test_an_agent_specific_x_robots_tag_applies_to_that_agent_only(site: Site) -> None:
    site.page("/page", meta_page(), headers={"X-Robots-Tag": "mybot: noindex, nofollow"})
    assert directives_of(site, "/page", agent="MyBot/2.0") == {"/page": html.Directives(index=False, follow=False)}
    assert directives_of(site, "/page", agent="otherbot") == {"/page": html.Directives()}
    assert directives_of(site, "/page") == {"/page": html.Directives()}  # "*" is not mybot


def test_a_meta_tag_named_for_the_agent_applies_to_that_agent_only(site: Site) -> None:
    site.page("/page", meta_page(("mybot", "nofollow"), ("robots", "noai")))
    assert directives_of(site, "/page", agent="mybot") == {
        "/page": html.Directives(follow=False, ai=False, image_ai=False)
    }
    assert directives_of(site, "/page") == {"/page": html.Directives(ai=False, image_ai=False)}


def test_directives_share_the_one_fetch_and_parse_with_html_and_response(site: Site) -> None:
    site.page("/page", meta_page(("robots", "noindex")), headers={"X-Robots-Tag": "otherbot: nofollow"})
    seen: dict[str, Any] = {}
    router = Router()

    @router.default
    async def page(
        response: Response,
        rules: Directives,
        page: Html,
        also: Annotated[Directives, DirectivesFor("*")],
        other: Annotated[Directives, DirectivesFor("otherbot")],
    ) -> None:
        seen.update(rules=rules, also=also, other=other, status=response.status, title=page.css("body::text").get())

    assert Crawler(router).run([site.url("/page")]).failed == 0
    assert site.hits()["/page"] == 1
    assert seen["rules"] is seen["also"]  # one extractor run for equal agents, from the request's cache
    assert seen["rules"] == html.Directives(index=False)
    assert seen["other"] == html.Directives(index=False, follow=False)
    assert (seen["status"], seen["title"]) == (200, "hello")


def test_the_bare_directives_class_works_as_an_annotation(site: Site) -> None:
    site.page("/page", meta_page(("robots", "nofollow")))
    found: list[html.Directives] = []
    router = Router()

    @router.default
    async def page(rules: html.Directives) -> None:
        found.append(rules)

    Crawler(router).run([site.url("/page")])
    assert found == [html.Directives(follow=False)]
