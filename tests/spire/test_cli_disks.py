"""``spire crawl -o`` onto a read-only folder or a full disk: one sentence naming the file, exit status 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from spire.cli import main
from spire.cli.verdict import UNWRITABLE
from tests.disks import fill, read_only, small_disk
from tests.sites.server import Site
from tests.spire.site.helpers import page

FAST = ["--max-in-flight", "1", "--per-second", "0", "--progress", "none", "--robots-retry-delays", "0,0"]


def last_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_read_only_folder_is_refused_before_any_request(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("home"))
    with read_only(tmp_path / "ro") as folder:
        out = folder / "pages.jsonl"
        assert main(["crawl", site.url("/"), "-o", str(out), *FAST]) == UNWRITABLE
    assert (
        last_line(capsys) == f"spire: {out}: no item can be written there ({folder} is a read-only file system); "
        "give the dataset a writable path"
    )
    assert site.hits() == {}


def test_a_full_disk_mid_crawl_ends_with_one_sentence_and_whole_lines(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = 30
    site.page("/", page("home", *(f"/p{n}" for n in range(pages))))
    for n in range(pages):
        site.page(f"/p{n}", page(f"p{n}", body="x" * 3000))
    with small_disk(tmp_path / "disk") as disk:
        fill(disk, leave=12_000)
        out = disk / "pages.jsonl"
        status = main(["crawl", site.url("/"), "-o", str(out), *FAST])
        text = out.read_bytes()
    err = capsys.readouterr().err
    assert status == UNWRITABLE
    assert "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"spire: {out}: cannot write items (No space left on device); free some space")
    )
    assert text.count(b"\n") < pages + 1  # it did stop short
