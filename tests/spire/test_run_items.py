"""``spire run --frontier FILE``: the crawl's items are kept in the frontier file, once per page."""

from __future__ import annotations

from pathlib import Path

import anyio
from pydantic import BaseModel

from spire.cli import main
from spire_core.dataset.sqlite import SqliteDataset
from tests.sites.server import Site, binary_tree

SCRIPT = """\
from pydantic import BaseModel

from spire import Dataset, Html, Links, Router, Url

router = Router()


class Page(BaseModel):
    url: str


@router.default
async def page(html: Html, links: Links, url: Url, pages: Dataset[Page]) -> None:
    await links.follow(html.css("a::attr(href)").getall())
    await pages.push(Page(url=url))
"""


class Page(BaseModel):
    url: str


def test_run_with_a_frontier_file_keeps_each_pages_items_in_it_once_across_runs(site: Site, tmp_path: Path) -> None:
    root = binary_tree(site, 20)
    script = tmp_path / "crawl.py"
    script.write_text(SCRIPT)
    path = tmp_path / "crawl.db"
    for _ in range(2):  # the second run resumes a finished crawl: nothing new, nothing doubled
        assert main(["run", str(script), "--frontier", str(path), "--seed", root]) == 0

    async def items() -> list[str]:
        async with SqliteDataset(Page, path) as pages:
            return [page.url for page in await pages.items()]

    assert sorted(anyio.run(items)) == sorted(site.url(f"/page/{i}") for i in range(20))
