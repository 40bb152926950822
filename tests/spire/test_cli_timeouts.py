"""``spire crawl --timeout`` (and its body and request parts): a slow page is bounded from the command line."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from spire.cli import _parser, main
from spire.cli.crawl import _timeouts
from spire_core.session.timeouts import Timeouts
from tests.sites.server import Site
from tests.spire.site.helpers import page
from tests.spire.test_cli import read_lines

FAST = ["--max-in-flight", "4", "--per-second", "0", "--progress", "none", "--robots-retry-delays", "0,0"]


def parsed(*options: str) -> argparse.Namespace:
    return _parser().parse_args(["crawl", "http://127.0.0.1:9/", "-o", "x.jsonl", *options])


def test_the_options_become_the_crawls_timeouts() -> None:
    assert _timeouts(parsed()) is None
    assert _timeouts(parsed("--timeout", "5")) == Timeouts(connect=5, read=5, body=5, request=10)
    assert _timeouts(parsed("--timeout", "5", "--request-timeout", "7")) == Timeouts(
        connect=5, read=5, body=5, request=7
    )
    assert _timeouts(parsed("--body-timeout", "3")) == Timeouts(body=3)


def test_a_page_slower_than_the_timeout_fails_as_a_timeout(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("home", "/slow"))
    site.page("/slow", page("slow"), delay=20)
    out = tmp_path / "pages.jsonl"
    started = time.monotonic()
    assert main(["crawl", site.url("/"), "-o", str(out), "--timeout", "0.3", *FAST]) == 0
    assert time.monotonic() - started < 15  # three tries of 0.3 s and their backoff, not 20 s each
    assert [line["url"] for line in read_lines(out)] == [site.url("/")]
    stats = capsys.readouterr().err
    assert " failed=1 " in stats
    assert "timeout" in stats


def test_a_bad_timeout_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crawl", "http://127.0.0.1:9/", "-o", str(tmp_path / "x.jsonl"), "--timeout", "0", *FAST]) == 2
    assert "timeout connect must be positive" in capsys.readouterr().err
