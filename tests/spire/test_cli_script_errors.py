"""A mistake in a ``spire run`` script is named in one sentence with the script's file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from spire.cli import main
from tests.sites.server import Site

SCRIPT = """
from spire import Html, Links, Router, Seed

router = Router()


@router.handler("listing")
async def listing(page: Html, links: Links) -> None:
    await links.follow(page.css("a::attr(href)").getall(), tag="bok")


@router.handler("book")
async def book(page: Html) -> None:
    pass


seeds = [Seed({start!r}, tag="listing")]
"""


def test_a_tag_typo_names_the_line_of_the_follow_call(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", "<a href='/a'>a</a>")
    script = tmp_path / "crawl.py"
    script.write_text(textwrap.dedent(SCRIPT.format(start=site.url("/"))), encoding="utf-8")
    line = next(n for n, text in enumerate(script.read_text().splitlines(), 1) if 'tag="bok"' in text)
    assert main(["run", str(script), "--progress", "none"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        "spire: no handler for tag 'bok': did you mean 'book'? the router knows 'book', 'listing' "
        f"(at {script}:{line}, in listing)"
    )
