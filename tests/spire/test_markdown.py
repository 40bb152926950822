"""The ``Markdown`` extractor: a fixture page's main content matches its expected Markdown."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated

import anyio
import pytest
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


# -- the PostgreSQL manual: real documentation pages -------------------------------------------

MANUAL = Path("/usr/share/doc/postgresql-doc-15/html")


def manual_page(name: str) -> str:
    """A page of the PostgreSQL manual as Debian installs it (CI installs it too)."""
    path = MANUAL / name
    if not path.is_file():
        message = f"the PostgreSQL manual is not installed at {MANUAL} (apt-get install postgresql-doc-15)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path.read_text(encoding="utf-8")


def crawl_markdown(site: Site, pages: dict[str, str]) -> dict[str, str]:
    """Serve ``pages`` and crawl them with a handler taking ``Markdown``: each URL's Markdown."""
    for path, body in pages.items():
        site.page(path, body)
    got: dict[str, str] = {}
    router = Router()

    @router.default
    async def page(text: Markdown, url: Url) -> None:
        got[url] = text

    Crawler(router).run([site.url(path) for path in pages])
    return got


def test_the_manuals_links_resolve_against_the_page_not_the_site_root(site: Site) -> None:
    got = crawl_markdown(site, {"/pg/tutorial-select.html": manual_page("tutorial-select.html")})
    markdown = got[site.url("/pg/tutorial-select.html")]
    links = re.findall(r"\]\((http://[^)\s]+)\)", markdown)
    assert links
    assert all(link.startswith(site.url("/pg/")) for link in links), links
    assert f"]({site.url('/pg/tutorial-select.html#ftn.id-1.4.4.6.2.10')})" in markdown  # a fragment is kept


def test_the_manuals_code_listings_are_fenced_code_blocks_not_escaped_prose(site: Site) -> None:
    got = crawl_markdown(site, {"/pg/tutorial-select.html": manual_page("tutorial-select.html")})
    markdown = got[site.url("/pg/tutorial-select.html")]
    assert "```\nSELECT * FROM weather;\n```" in markdown
    assert "```\nSELECT city, (temp_hi+temp_lo)/2 AS temp_avg, date FROM weather;\n```" in markdown
    assert "\\*" not in markdown
    assert "temp\\_" not in markdown


def test_the_manuals_headings_and_tables_are_kept(site: Site) -> None:
    pages = {"/pg/tutorial-select.html": manual_page("tutorial-select.html")}
    pages["/pg/datatype-numeric.html"] = manual_page("datatype-numeric.html")
    got = crawl_markdown(site, pages)
    assert got[site.url("/pg/tutorial-select.html")].startswith("## 2.5. Querying a Table\n\nTo retrieve data")
    numeric = got[site.url("/pg/datatype-numeric.html")]
    assert numeric.startswith("## 8.1. Numeric Types\n")
    assert "| Name | Storage Size | Description | Range |\n|---|---|---|---|\n" in numeric
    assert "| `smallint` | 2 bytes | small-range integer | -32768 to +32767 |" in numeric
    # The frame is gone: the navigation header and footer of every manual page.
    assert "Prev" not in numeric
    assert "Home" not in numeric


def test_every_page_of_the_manual_keeps_a_heading_and_its_links_under_its_folder() -> None:
    manual_page("index.html")
    base = "http://127.0.0.1:8000/pg/"
    headless = []
    for path in sorted(MANUAL.glob("*.html")):
        markdown = to_markdown(path.read_text(encoding="utf-8"), url=base + path.name)
        if not any(line.startswith("#") for line in markdown.splitlines()):
            headless.append(path.name)
        lost = [
            link for link in re.findall(r"\]\((http://127\.0\.0\.1:8000[^)\s]*)", markdown) if not link.startswith(base)
        ]
        assert lost == [], path.name
    assert headless == ["legalnotice.html"]  # the one page of the manual with no heading element
