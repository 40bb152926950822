"""Pages a real server sends that once broke the extractors or lost text silently: a lone BOM, markup
nested past libxml2's depth limit."""

from __future__ import annotations

import logging

import pytest

from spire import Crawler, Directives, Html, Markdown, Router, Seed, Text
from spire_core import html as spire_html
from tests.sites.server import Site


def recording_router(seen: dict[str, object]) -> Router:
    router = Router()

    @router.default
    async def page(page: Html, text: Text, directives: Directives) -> None:
        seen["text"] = text
        seen["links"] = page.css("a::attr(href)").getall()
        seen["directives"] = directives

    return router


def test_a_page_that_is_only_a_utf8_bom_is_an_empty_page(site: Site) -> None:
    site.page("/", b"\xef\xbb\xbf")
    seen: dict[str, object] = {}
    stats = Crawler(recording_router(seen), robots=False).run([Seed(site.url("/"))])
    assert (stats.finished, stats.failed) == (1, 0)
    assert seen["text"] == ""
    assert seen["links"] == []
    assert seen["directives"] == spire_html.Directives()


@pytest.mark.parametrize("body", [b"\xef\xbb\xbf \r\n\t", b"\xef\xbb\xbf"], ids=["bom-and-blanks", "bom-only"])
def test_a_bom_with_or_without_blanks_parses_under_a_single_byte_label(site: Site, body: bytes) -> None:
    site.page("/", body, content_type="text/html; charset=windows-1252")
    seen: dict[str, object] = {}
    stats = Crawler(recording_router(seen), robots=False).run([Seed(site.url("/"))])
    assert (stats.finished, stats.failed) == (1, 0)
    assert seen["text"] == ""


def test_text_nested_past_the_parsers_limit_is_counted_and_named_not_lost_silently(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    depth = 3000
    site.page("/deep", "<p>top</p>" + "<div>" * depth + "buried" + "</div>" * depth + "<p>after</p>")
    site.page("/shallow", "<p>top</p>" + "<div>" * 100 + "kept" + "</div>" * 100)
    seen: dict[str, object] = {}
    with caplog.at_level(logging.WARNING, logger="spire"):
        stats = Crawler(recording_router(seen), robots=False).run([Seed(site.url("/deep")), Seed(site.url("/shallow"))])
    assert (stats.finished, stats.failed) == (2, 0)
    assert stats.skipped("deep_nesting") == 1  # the deep page only
    warnings = [record.getMessage() for record in caplog.records if "nested" in record.getMessage()]
    assert len(warnings) == 1
    assert site.url("/deep") in warnings[0]


def test_a_page_nested_past_the_parsers_limit_gives_its_handler_its_whole_text(site: Site) -> None:
    levels = 3000
    words = [f"w{level}" for level in range(levels)]
    site.page("/deep", "<p>top</p>" + "".join(f"<div>{word}" for word in words) + "</div>" * levels + "<p>after</p>")
    router = Router()
    seen: dict[str, list[str]] = {}

    @router.default
    async def page(text: Text, markdown: Markdown) -> None:
        seen["text"], seen["markdown"] = text.split(), markdown.split()

    stats = Crawler(router, robots=False).run([Seed(site.url("/deep"))])
    assert (stats.finished, stats.skipped("deep_nesting")) == (1, 1)
    assert seen == {"text": ["top", *words, "after"], "markdown": ["top", *words, "after"]}  # before: 2,046 words
