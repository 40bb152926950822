"""The ``spire`` command: ``spire crawl`` end to end against local sites, Ctrl-C, progress; ``spire run``."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spire.cli import main
from tests.sites.server import Site
from tests.spire.site.helpers import page, paths, robots

FAST = ["--max-in-flight", "4", "--per-second", "0", "--progress", "none"]


def read_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def spire_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "spire.cli", *args]


def wait_for(condition: object, *, within: float) -> None:
    """Poll ``condition`` (a callable) until it holds, failing after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {within} s")
        time.sleep(0.02)


def test_crawl_writes_one_json_line_per_kept_page_then_the_stats_line(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("Home", "/a", "/missing"))
    site.page("/a", page("Page A", body="Hello from A", head='<meta name="description" content="about a">'))
    out = tmp_path / "pages.jsonl"
    assert main(["crawl", site.url("/"), "-o", str(out), *FAST]) == 0
    lines = {line["url"]: line for line in read_lines(out)}
    assert set(lines) == {site.url("/"), site.url("/a")}
    assert lines[site.url("/a")] == {
        "url": site.url("/a"),
        "depth": 1,
        "status": 200,
        "title": "Page A",
        "text": lines[site.url("/a")]["text"],
        "meta": {"description": "about a"},
    }
    assert lines[site.url("/a")]["text"] == "Hello from A"
    stats = capsys.readouterr().err.strip().splitlines()[-1]
    assert "pages=2" in stats
    assert "skipped.status=1" in stats
    assert "requests=" in stats


def test_output_dash_writes_the_lines_to_stdout(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    site.page("/", page("Home"))
    assert main(["crawl", site.url("/"), "-o", "-", *FAST]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["title"] for line in captured.out.splitlines()] == ["Home"]
    assert "pages=1" in captured.err


def test_scope_limit_and_ignore_robots_reach_the_crawl(site: Site, tmp_path: Path) -> None:
    robots(site, "User-agent: *\nDisallow: /docs/private\n")
    site.page("/docs/", page("docs", "a", "b", "private", "/blog/"))
    for name in ("a", "b", "private"):
        site.page(f"/docs/{name}", page(name, head='<meta name="robots" content="noindex">' if name == "b" else ""))
    site.page("/blog/", page("blog"))
    out = tmp_path / "pages.jsonl"
    assert main(["crawl", site.url("/docs/"), "-o", str(out), "--scope", "prefix", *FAST]) == 0
    assert {line["url"] for line in read_lines(out)} == {site.url("/docs/"), site.url("/docs/a")}
    assert main(["crawl", site.url("/docs/"), "-o", str(out), "--scope", "prefix", "--ignore-robots", *FAST]) == 0
    assert len(read_lines(out)) == 4  # /docs/b (noindex) and /docs/private too
    assert main(["crawl", site.url("/docs/"), "-o", str(out), "--limit", "2", *FAST]) == 0
    assert len(read_lines(out)) == 2


def test_agent_and_respect_reach_the_crawl(site: Site, tmp_path: Path) -> None:
    robots(site, "User-agent: spirebot\nDisallow: /a\n")
    site.page("/", page("home", "/a", "/b"))
    site.page("/a", page("a"))
    site.page("/b", page("b", head='<meta name="robots" content="noai">'))
    out = tmp_path / "pages.jsonl"
    assert main(["crawl", site.url("/"), "-o", str(out), "--agent", "SpireBot", *FAST]) == 0
    assert {line["url"] for line in read_lines(out)} == {site.url("/"), site.url("/b")}
    assert main(["crawl", site.url("/"), "-o", str(out), "--respect", "ai-training", *FAST]) == 0
    assert {line["url"] for line in read_lines(out)} == {site.url("/"), site.url("/a")}


def test_plain_progress_lines_when_not_on_a_terminal(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("home", "/a", "/b", "/c"))
    for name in "abc":
        site.page(f"/{name}", page(name), delay=0.15)
    args = ["--max-in-flight", "1", "--per-second", "0", "--progress-every", "0.1"]
    assert main(["crawl", site.url("/"), "-o", str(tmp_path / "out.jsonl"), *args]) == 0
    progress = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress ")]
    assert len(progress) >= 2
    assert all(all(f" {field}=" in f" {line}" for field in ("pages", "queue", "errors", "rate")) for line in progress)


def test_a_live_progress_display_on_a_terminal(site: Site, tmp_path: Path) -> None:
    site.page("/", page("home", *(f"/p{number}" for number in range(6))))
    for number in range(6):
        site.page(f"/p{number}", page(f"p{number}"), delay=0.2)
    parent, child = pty.openpty()
    command = spire_command("crawl", site.url("/"), "-o", str(tmp_path / "out.jsonl"), "--max-in-flight", "1")
    command += ["--per-second", "0"]
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    process = subprocess.Popen(command, stderr=child, stdout=subprocess.DEVNULL, env=env)
    os.close(child)
    screen = b""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([parent], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(parent, 65536)
                except OSError:
                    break  # the process closed the terminal
                if not chunk:
                    break
                screen += chunk
            elif process.poll() is not None:
                break
        assert process.wait(timeout=10) == 0
    finally:
        os.close(parent)
        if process.poll() is None:
            process.kill()
    shown = screen.decode("utf-8", "replace")
    assert "spire crawl" in shown
    assert "queue=" in shown
    assert "\x1b[" in shown  # terminal control sequences: not plain lines
    assert "progress pages=" not in shown
    assert "pages=7" in shown.splitlines()[-1]  # then the stats line


def test_ctrl_c_stops_promptly_keeps_whole_lines_and_prints_the_stats(site: Site, tmp_path: Path) -> None:
    links = [f"/p{number}" for number in range(60)]
    site.page("/", page("home", *links))
    for link in links:
        site.page(link, page(link, body=f"text of {link} " * 30), delay=0.3)
    out = tmp_path / "pages.jsonl"
    command = spire_command("crawl", site.url("/"), "-o", str(out), "--max-in-flight", "3", "--per-second", "0")
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        wait_for(lambda: out.exists() and out.read_text().count("\n") >= 4, within=20)
        interrupted_at = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=10)
        took = time.monotonic() - interrupted_at
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert took < 3.0
    lines = read_lines(out)  # every line is whole JSON
    assert 4 <= len(lines) < 61
    stats = stderr.strip().splitlines()[-1]
    assert f"pages={len(lines)}" in stats
    assert "requests=" in stats
    assert "errors.shut_down=" in stats
    assert len(paths(site)) < 40  # it stopped: most pages were never asked for


def test_a_bad_url_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crawl", "ftp://files.example/", "-o", str(tmp_path / "out.jsonl")]) == 2
    assert "spire:" in capsys.readouterr().err


def test_run_crawls_with_the_router_a_script_defines(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("home", "/a"))
    site.page("/a", page("a"))
    script = tmp_path / "crawl.py"
    script.write_text(
        "from spire import Html, Links, Router\n"
        "router = Router()\n"
        "@router.default\n"
        "async def page(html: Html, links: Links) -> None:\n"
        "    await links.follow(html.css('a::attr(href)').getall())\n"
        f"seeds = [{site.url('/')!r}]\n"
    )
    assert main(["run", str(script)]) == 0
    assert sorted(paths(site)) == ["/", "/a", "/robots.txt"]  # robots.txt is read in every crawl
    assert "finished=2" in capsys.readouterr().err


def test_run_refuses_a_script_without_a_router(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "empty.py"
    script.write_text("x = 1\n")
    assert main(["run", str(script)]) == 2
    assert "router" in capsys.readouterr().err
