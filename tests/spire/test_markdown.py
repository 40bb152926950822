"""The ``Markdown`` extractor: a fixture page's main content matches its expected Markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import anyio
from pydantic import BaseModel

from spire import Crawler, Dataset, Markdown, MarkdownOf, Router, Url, to_markdown
from spire.cli import main
from tests.sites.server import Site

FIXTURES = Path(__file__).parent / "fixtures"
HTML = (FIXTURES / "roses.html").read_text(encoding="utf-8")
EXPECTED = (FIXTURES / "roses.md").read_text(encoding="utf-8").strip()


class Doc(BaseModel):
    url: str
    markdown: str
    bare: str


def test_the_fixture_page_becomes_its_expected_markdown() -> None:
    got = to_markdown(HTML, url="http://shop.example/blog/roses")
    assert got == EXPECTED
    # Kept: headings, emphasis, lists, a link made absolute, a table.
    for kept in ("# Pruning roses", "## Steps", "**late winter**", "- Thick gloves", "1. Remove dead wood"):
        assert kept in got
    assert "[full guide](http://shop.example/guides/roses)" in got
    assert "| Hybrid tea | Late winter |" in got
    # Dropped: the navigation, the sidebar and the footer.
    for dropped in ("About us", "Popular posts", "Tulips", "All rights reserved", "Privacy"):
        assert dropped not in got


def test_the_markdown_extractor_gives_a_handler_the_page_as_markdown(site: Site) -> None:
    site.page("/blog/roses", HTML)
    site.page("/notes.txt", "plain notes", content_type="text/plain")
    router = Router()

    @router.default
    async def page(
        text: Markdown, bare: Annotated[str, MarkdownOf(links=False, tables=False)], url: Url, docs: Dataset[Doc]
    ) -> None:
        await docs.push(Doc(url=url, markdown=text, bare=bare))

    crawler = Crawler(router)
    crawler.run([site.url("/blog/roses"), site.url("/notes.txt")])

    async def read() -> dict[str, Doc]:
        return {doc.url: doc async for doc in crawler.dataset(Doc)}

    docs = anyio.run(read)
    roses = docs[site.url("/blog/roses")]
    assert roses.markdown == EXPECTED.replace("http://shop.example", site.origin)
    assert "full guide" in roses.bare
    assert "](" not in roses.bare
    assert "| Rambler" not in roses.bare
    assert docs[site.url("/notes.txt")].markdown == "plain notes"  # not HTML: the text as it is


def test_spire_crawl_markdown_adds_a_markdown_field(site: Site, tmp_path: Path) -> None:
    site.page("/", HTML)
    out = tmp_path / "pages.jsonl"
    fast = ["--max-in-flight", "4", "--per-second", "0", "--progress", "none"]
    assert main(["crawl", site.url("/"), "-o", str(out), "--limit", "1", "--markdown", *fast]) == 0
    (line,) = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    assert line["markdown"].startswith("# Pruning roses\n")
    assert line["markdown"] == to_markdown(HTML, url=site.url("/"))
