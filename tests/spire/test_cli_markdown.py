"""``spire crawl --markdown``: a page past the converter's bounds keeps its record, without Markdown."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from spire.cli import main
from tests.sites.server import Site
from tests.spire.site.helpers import page

FAST = ["--max-in-flight", "2", "--per-second", "0", "--progress", "none", "--ignore-robots"]


def test_a_page_past_the_markdown_bounds_is_kept_without_markdown(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site.page("/", page("home", "/huge", "/small"))
    site.page("/huge", page("huge", body="<p>" + "word " * 2_200_000 + "</p>"))  # 11 MB: past max_input
    site.page("/small", page("small", body="<p>a small page</p>"))
    out = tmp_path / "pages.jsonl"
    caplog.set_level(logging.WARNING, logger="spire.cli")
    assert main(["crawl", site.url("/"), "-o", str(out), "--markdown", *FAST]) == 0
    records = {record["url"]: record for record in map(json.loads, out.read_text().splitlines())}
    assert records[site.url("/huge")]["markdown"] is None
    assert "a small page" in records[site.url("/small")]["markdown"]
    assert any(site.url("/huge") in record.getMessage() for record in caplog.records)
