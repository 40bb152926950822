"""``Markdown`` on hostile pages: its work is bounded, and a page past a bound fails as ``content_limit``."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated

import anyio
import pytest

from spire import Crawler, Error, Markdown, Router, SeedInfo, Url
from spire.markdown import MarkdownLimits, MarkdownOf, to_markdown
from spire_core.errors import ContentLimitError
from tests.sites.server import Site

#: Markdown that waits as long as a page takes: only the crawl's time budget can stop it.
PATIENT = MarkdownOf(limits=MarkdownLimits(max_seconds=600))


def crawl(site: Site, path: str, body: str, *, seconds: float) -> tuple[dict[str, str], dict[str, str]]:
    """Crawl one page with a ``Markdown`` handler, within ``seconds``: (Markdown by URL, error category by URL)."""
    site.page(path, body)
    written: dict[str, str] = {}
    failed: dict[str, str] = {}
    router = Router()

    @router.default
    async def page(text: Markdown, url: Url) -> None:
        written[url] = text

    @router.failed
    async def on_failed(seed: SeedInfo, error: Error) -> None:
        failed[seed.url] = getattr(error, "category", repr(error))

    async def main() -> None:
        with anyio.fail_after(seconds):
            await Crawler(router).arun([site.url(path)])

    anyio.run(main)
    return written, failed


def test_a_small_table_of_huge_colspans_and_rowspans_stays_small_and_quick(site: Site) -> None:
    row = "<tr>" + '<td colspan="100000" rowspan="100000">x</td>' * 4 + "</tr>"
    body = "<html><body><table>" + row * 100 + "</table></body></html>"
    assert len(body) < 20_000
    written, failed = crawl(site, "/spans", body, seconds=10)
    markdown = written[site.url("/spans")]
    assert failed == {}
    width = MarkdownLimits().max_columns
    assert markdown.splitlines()[1] == "|" + "---|" * width  # the spans stop at max_columns
    assert len(markdown) < 1_000_000


def test_a_table_of_two_thousand_rows_with_wide_cells_is_converted_quickly(site: Site) -> None:
    rows = "".join(f'<tr><td>row {n}</td><td colspan="1000">{n * 7}</td><td>cell</td></tr>' for n in range(2000))
    body = f"<html><body><h1>Rows</h1><table><tr><th>name</th><th>value</th></tr>{rows}</table></body></html>"
    assert len(body) < 150_000
    written, failed = crawl(site, "/rows", body, seconds=10)
    markdown = written[site.url("/rows")]
    assert failed == {}
    assert markdown.count("\n| row ") == 2000
    assert "| row 1999 | 13993 |" in markdown
    assert len(markdown) < 2_000_000


def test_a_page_past_max_input_fails_as_content_limit_at_once(site: Site) -> None:
    body = "<html><body><article>" + "<p>words and more words</p>" * 400_000 + "</article></body></html>"
    assert len(body) > MarkdownLimits().max_input
    written, failed = crawl(site, "/huge", body, seconds=20)
    assert written == {}
    assert failed == {site.url("/huge"): "content_limit"}


def test_markdown_past_max_output_fails_with_a_message_naming_the_limit() -> None:
    body = "<p>" + "word " * 10_000 + "</p>"
    with pytest.raises(ContentLimitError, match="max_output=1,000") as caught:
        to_markdown(body, url="http://127.0.0.1:1/long", limits=MarkdownLimits(max_output=1000))
    assert caught.value.url == "http://127.0.0.1:1/long"
    assert caught.value.category == "content_limit"


def test_a_conversion_past_max_seconds_stops_and_fails() -> None:
    body = "<div>" + "<p>a <b>b</b> <i>c</i> <a href='x'>d</a></p>" * 50_000 + "</div>"
    with pytest.raises(ContentLimitError, match=r"max_seconds=0\.001"):
        to_markdown(body, url="http://127.0.0.1:1/slow", limits=MarkdownLimits(max_seconds=0.001))


def test_a_deep_page_is_converted_without_running_out_of_stack() -> None:
    body = "<div>" * 1500 + "<p>deep text</p>" + "</div>" * 1500
    assert to_markdown(body) == "deep text"


def test_markdown_needs_no_package_outside_spires_own_dependencies() -> None:
    """The ``markdown`` extra once needed trafilatura, whose ``lxml[html_clean]`` pip 23 did not resolve."""
    script = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('trafilatura', 'lxml_html_clean', 'justext', 'markdownify', 'bs4'):\n"
        "            raise ImportError(f'{name} is not installed')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from spire import to_markdown\n"
        "print(to_markdown('<main><h1>Hi</h1><pre>x = 1</pre></main>'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "# Hi\n\n```\nx = 1\n```\n"


def test_markdown_just_under_max_output_is_kept() -> None:
    body = "<main><p>" + "word " * 180 + "</p></main>"
    markdown = to_markdown(body, limits=MarkdownLimits(max_output=1000))
    assert 800 < len(markdown) <= 1000  # counted once: 899 characters, not their double


def test_a_time_budget_ends_a_crawl_whose_page_is_still_being_converted(site: Site) -> None:
    body = "<div>" + "<p>a <b>b</b> <i>c</i> <a href='x'>d</a></p>" * 200_000 + "</div>"  # seconds of work
    site.page("/big", body)
    router = Router()

    @router.default
    async def page(text: Annotated[str, PATIENT]) -> None: ...

    async def main() -> None:
        with anyio.fail_after(5):
            await Crawler(router, time_budget=0.5).arun([site.url("/big")])

    anyio.run(main)
