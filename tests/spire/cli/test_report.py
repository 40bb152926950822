"""``spire report``, and ``--report`` / ``--dashboard`` on ``spire crawl`` and ``spire run``, on a real local site."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from spire.cli import main
from tests.sites.server import Site, held_tree
from tests.spire.report.conftest import fates_site

FAST = ["--max-in-flight", "4", "--per-second", "0", "--timeout", "0.5"]
REPO = Path(__file__).resolve().parents[3]


def report_data(path: Path) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', path.read_text(), re.S)
    assert found is not None, f"{path} holds no report data"
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def host(data: dict[str, Any], origin: str) -> dict[str, Any]:
    return next(row for row in data["hosts"] if row["origin"] == origin)


def test_crawl_writes_its_report_and_says_its_politeness_first(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = fates_site(site)
    report = tmp_path / "report.html"
    state = tmp_path / "crawl.sqlite"
    command = ["crawl", url, "-o", str(tmp_path / "pages.jsonl"), "--state", str(state), "--report", str(report)]
    assert main([*command, *FAST, "--progress", "plain"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "polite: 4 in flight per host, 16 in flight overall; robots.txt obeyed "
        "(--per-second, --max-in-flight to change)"
    )
    assert f"wrote the report to {report}" in err
    data = report_data(report)
    assert host(data, site.origin)["requests"] == sum(site.hits(robots=True).values())
    assert host(data, site.origin)["errors"] == {"timeout": 1}
    assert data["settings"]["start"] == url
    assert data["settings"]["politeness"] == "4 in flight per host, 16 in flight overall; robots.txt obeyed"
    assert data["in_flight"]  # sampled while it ran

    # The state file's ledger gives the same report afterwards (its aggregates computed in SQL).
    again = tmp_path / "again.html"
    assert main(["report", "--state", str(state), "-o", str(again)]) == 0
    later = report_data(again)
    assert later["hosts"] == data["hosts"]
    assert later["skips"] == data["skips"]
    assert later["totals"] == data["totals"]
    # and the crawl's own title and settings, kept in the state file.
    assert later["title"] == data["title"] == f"spire crawl {url}"
    assert later["settings"] == {**data["settings"], "state file": str(state)}


def test_report_from_the_state_of_a_crawl_run_without_report_shows_its_settings(site: Site, tmp_path: Path) -> None:
    url = fates_site(site)
    state, pages = tmp_path / "crawl.sqlite", tmp_path / "pages.jsonl"
    assert main(["crawl", url, "-o", str(pages), "--state", str(state), *FAST, "--progress", "none"]) == 0
    report = tmp_path / "report.html"
    assert main(["report", "--state", str(state), "-o", str(report)]) == 0
    data = report_data(report)
    assert data["title"] == f"spire crawl {url}"
    settings = data["settings"]
    assert (settings["start"], settings["scope"], settings["output"]) == (url, "host", str(pages))
    assert settings["politeness"] == "4 in flight per host, 16 in flight overall; robots.txt obeyed"
    assert settings["state file"] == str(state)


def test_run_writes_the_report_of_a_scripts_crawl_and_says_its_politeness_first(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", "<a href='/a'>a</a><a href='/gone'>gone</a>")
    site.page("/a", "<title>A</title>")
    script = tmp_path / "crawl.py"
    script.write_text(
        "from spire import Router, Links\n"
        "router = Router()\n"
        "@router.default\n"
        "async def page(links: Links) -> None:\n"
        "    await links.enqueue()\n"
    )
    report = tmp_path / "report.html"
    status = main(["run", str(script), "--seed", site.url("/"), "--report", str(report), "--progress", "plain"])
    assert status == 1  # /gone failed for good: a 404
    first = capsys.readouterr().err.splitlines()[0]
    assert first == "polite: 4 in flight per host; robots.txt obeyed (host_limits = HostLimits(...) to change)"
    data = report_data(report)
    assert host(data, site.origin)["requests"] == sum(site.hits(robots=True).values())
    assert host(data, site.origin)["statuses"]["404"] == 2  # /gone and the robots.txt the site lacks
    assert data["failures"][0]["samples"][0]["url"] == site.url("/gone")
    assert data["settings"]["script"] == str(script)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "spire report takes -o FILE (write the report) or --dashboard [PORT] (serve it)"),
        (["-o", "r.html", "--dashboard"], "spire report takes -o FILE"),
    ],
)
def test_report_takes_one_of_a_file_or_the_dashboard(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "crawl.sqlite"
    state.touch()
    assert main(["report", "--state", str(state), *args]) == 2
    assert message in capsys.readouterr().err


def test_report_names_a_missing_state_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.sqlite"
    assert main(["report", "--state", str(missing), "-o", str(tmp_path / "r.html")]) == 2
    assert f"{missing} is not a crawl's state file" in capsys.readouterr().err


def test_the_dashboard_host_goes_with_the_dashboard(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", "<title>home</title>")
    command = ["crawl", site.url("/"), "-o", str(tmp_path / "p.jsonl"), "--report", str(tmp_path / "r.html")]
    assert main([*command, "--dashboard-host", "0.0.0.0", *FAST, "--progress", "none"]) == 2
    assert "--dashboard-host goes with --dashboard" in capsys.readouterr().err


def test_crawl_serves_the_dashboard_on_loopback_while_it_runs(site: Site, tmp_path: Path) -> None:
    reached, released = threading.Event(), threading.Event()
    root = held_tree(site, 20, hold_from=5, reached=reached, released=released)
    command = [sys.executable, "-m", "spire", "crawl", root, "-o", str(tmp_path / "p.jsonl"), "--dashboard", "0"]
    crawl = subprocess.Popen([*command, *FAST, "--progress", "none"], cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        assert crawl.stderr is not None
        line = crawl.stderr.readline()
        assert line.startswith("dashboard: http://127.0.0.1:"), line
        url = line.split()[1]
        assert reached.wait(30)
        held = httpx.get(url + "data.json", timeout=10).json()
        assert urlsplit(url).hostname == "127.0.0.1"
        assert 0 < held["totals"]["requests"] < 21
        assert held["live"] is True
        page = httpx.get(url, timeout=10)
        assert page.headers["content-type"].startswith("text/html")
        assert "report-data" in page.text
        kept = httpx.get(url + "entries.json", params={"fate": "kept"}, timeout=10).json()
        assert {row["fate"] for row in kept} == {"kept"}
        assert httpx.get(url + "entries.json", params={"fate": "lost"}, timeout=10).status_code == 400
        released.set()
        assert crawl.wait(60) == 0
    finally:
        released.set()
        if crawl.poll() is None:
            crawl.kill()
            crawl.wait()


def test_an_unwritable_report_file_is_exit_3_naming_it(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", "<title>home</title>")
    state = tmp_path / "crawl.sqlite"
    assert main(["crawl", site.url("/"), "-o", str(tmp_path / "p.jsonl"), "--state", str(state), *FAST]) == 0
    capsys.readouterr()
    target = tmp_path / "no-such-folder" / "report.html"
    assert main(["report", "--state", str(state), "-o", str(target)]) == 3
    assert f"cannot write the report to {target}: No such file or directory" in capsys.readouterr().err


FLEET_SCRIPT = """\
from spire import Links, Router

router = Router()


@router.default
async def page(links: Links) -> None:
    await links.enqueue()
"""


def test_status_writes_a_fleets_report_from_its_ledger_in_redis(site: Site, tmp_path: Path) -> None:
    pytest.importorskip("redis")
    from tests.redis_server import start_redis

    site.page("/", "<a href='/a'>a</a><a href='/b'>b</a><a href='/gone'>gone</a>")
    site.page("/a", "<title>A</title><a href='/b'>b</a>")
    site.page("/b", "<title>B</title>")
    script = tmp_path / "fleet.py"
    script.write_text(FLEET_SCRIPT)
    servers = start_redis()
    server = next(servers)
    try:
        fleet = ["--redis", server.url, "--name", "reported"]
        main(["worker", *fleet, str(script), "--seed", site.url("/")])
        report = tmp_path / "fleet.html"
        assert main(["status", *fleet, "--report", str(report)]) == 0
        data = report_data(report)
        assert host(data, site.origin)["requests"] == sum(site.hits(robots=True).values())
        (gone,) = data["failures"][0]["samples"]
        assert (gone["url"], gone["referrer"]) == (site.url("/gone"), site.url("/"))
        assert data["settings"] == {"redis": server.url, "crawl name": "reported"}
    finally:
        servers.close()
