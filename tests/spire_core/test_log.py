"""What a person sees: handler failures on stderr with tracebacks, counted after a few, summarised at the end."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spire import Crawler, MemoryFrontier, Response, Router, Seed
from spire_core.log import FailureLog, console
from tests.sites.server import Site


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=root, check=False
    )


FAILING = """
    import sys
    {setup}
    from spire import Crawler, Router, Url

    router = Router()

    @router.default
    async def page(url: Url) -> None:
        raise ValueError("selector matched nothing on " + url)

    stats = Crawler(router).run([{seeds}])
    print(stats, file=sys.stderr)
"""


def test_a_plain_script_shows_a_handler_error_with_its_traceback_then_a_summary(site: Site, tmp_path: Path) -> None:
    seeds = ", ".join(repr(site.url(f"/{i}")) for i in range(6))
    result = run_script(tmp_path, FAILING.format(setup="", seeds=seeds))
    err = result.stderr
    assert err.count("Traceback (most recent call last)") == 3  # the first three in full
    assert 'raise ValueError("selector matched nothing on " + url)' in err
    assert f"failure {site.url('/')}" in err or "failure http://127.0.0.1" in err
    assert "handler page, attempt 1" in err
    assert err.count("more failures like this (ValueError in page) are counted, not logged") == 1
    assert "6 seeds failed:" in err
    assert "6 x ValueError in page, e.g. http://127.0.0.1" in err
    assert "failed=6" in err


def test_basic_config_wins_over_the_console_handler(site: Site, tmp_path: Path) -> None:
    setup = "import logging; logging.basicConfig(format='APP %(name)s %(levelname)s %(message)s')"
    result = run_script(tmp_path, FAILING.format(setup=setup, seeds=repr(site.url("/"))))
    lines = [line for line in result.stderr.splitlines() if "selector matched nothing" in line]
    assert lines
    assert all(line.startswith("APP spire.crawler ERROR") for line in lines if "failure" in line)
    assert "spire ERROR:" not in result.stderr  # our handler stepped aside


def test_the_console_handler_is_installed_only_when_nothing_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    root, spire = logging.getLogger(), logging.getLogger("spire")
    monkeypatch.setattr(root, "handlers", [logging.StreamHandler()])
    monkeypatch.setattr(spire, "handlers", [logging.NullHandler()])
    assert console() is None
    monkeypatch.setattr(root, "handlers", [])
    installed = console()
    assert installed is not None
    assert console() is None  # once is enough


def test_a_retry_is_logged_at_info_and_a_failure_for_good_at_error(
    dead_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"http://127.0.0.1:{dead_port}/"  # every attempt is a refused connection
    caplog.set_level(logging.INFO, logger="spire")
    router = Router()

    @router.default
    async def fetched(response: Response) -> None: ...

    # robots=False: the handler's own failures are the subject, not the unreachable robots.txt before them.
    crawler = Crawler(router, frontier=MemoryFrontier().dedup().retry(2, backoff=0.0), robots=False)
    stats = crawler.run([Seed(dead)])
    levels = [(record.levelname, record.getMessage()) for record in caplog.records if record.name == "spire.crawler"]
    assert [level for level, _ in levels[:2]] == ["INFO", "ERROR"]
    assert levels[0][1].startswith(f"retry {dead} (no tag, handler fetched, attempt 1): ConnectError")
    assert levels[1][1].startswith(f"failure {dead} (no tag, handler fetched, attempt 2): ConnectError")
    assert not any(record.exc_info for record in caplog.records)  # a refused connect needs no traceback
    # Two attempts, logged; a refused connect puts no request on the wire, so none is counted.
    assert (stats.retries, stats.failed, stats.requests) == (1, 1, 0)


def test_the_summary_names_the_top_kinds_with_a_sample_each() -> None:
    failures = FailureLog(log=logging.getLogger("test.silent"))
    for i in range(3):
        failures.failed(Seed(f"http://a.test/{i}"), KeyError("price"), handler="book")
    failures.failed(Seed("http://a.test/x"), ValueError("bad"), handler="listing")
    assert failures.summary() == (
        "4 seeds failed:\n"
        "  3 x KeyError in book, e.g. http://a.test/0: 'price'\n"
        "  1 x ValueError in listing, e.g. http://a.test/x: bad"
    )
    assert FailureLog().summary() is None
