"""``spire`` exit statuses, output files and signals: what a shell script relies on."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import spire
from spire.cli import _parser, main
from tests.sites.server import Site
from tests.spire.site.helpers import page, robots
from tests.spire.test_cli import read_lines, wait_for

FAST = ["--max-in-flight", "4", "--per-second", "0", "--progress", "none", "--robots-retry-delays", "0,0"]


def spire_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "spire", *args]


def last_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


# -- spire crawl: did it do its job? ------------------------------------------------------------


def test_a_dead_seed_host_exits_1_saying_it_cannot_be_reached(
    dead_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{dead_port}/"
    assert main(["crawl", url, "-o", str(tmp_path / "out.jsonl"), *FAST]) == 1
    assert last_line(capsys).startswith(f"spire: cannot reach {url}: ")


def test_a_dead_host_shows_its_errors_as_they_happen_and_a_true_summary(
    dead_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, out = f"http://127.0.0.1:{dead_port}/", tmp_path / "out.jsonl"
    # robots.txt is tried three times over a second; a progress line every 50 ms meanwhile.
    shown = ["--progress", "plain", "--progress-every", "0.05", "--robots-retry-delays", "0.5,0.5"]
    assert main(["crawl", url, "-o", str(out), "--per-second", "0", *shown]) == 1
    lines = capsys.readouterr().err.splitlines()
    progress = [line for line in lines if line.startswith("progress ")]
    counted = {int(line.split(" errors=")[1].split()[0]) for line in progress}
    assert counted & {1, 2, 3}  # each refused connection as it happened, while robots.txt was tried again
    assert f"wrote no records: {out} was not created" in lines
    assert not out.exists()
    summary = next(line for line in lines if line.startswith("requests="))
    assert " pages=0 finished=0 failed=0 " in summary  # no seed was handled: the site was skipped
    assert "skipped.robots_unreachable=1" in summary


@pytest.mark.parametrize(
    ("status", "reason"), [(500, "answered HTTP 500"), (404, "answered HTTP 404"), (410, "answered HTTP 410")]
)
def test_a_seed_answering_an_error_status_exits_1(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int, reason: str
) -> None:
    site.page("/", "gone", status=status)
    assert main(["crawl", site.url("/"), "-o", str(tmp_path / "out.jsonl"), *FAST]) == 1
    assert last_line(capsys) == f"spire: the start page {site.url('/')} {reason}"


def test_an_unreachable_robots_txt_exits_1(site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Retry-After: 0, or each 503 would pause the origin the polite 5 s before robots.txt is tried again
    site.page("/robots.txt", "down", status=503, headers={"Retry-After": "0"})
    site.page("/", page("home"))
    assert main(["crawl", site.url("/"), "-o", str(tmp_path / "out.jsonl"), *FAST]) == 1
    line = last_line(capsys)
    assert line.startswith(f"spire: robots.txt of {site.url('/')} stayed unreachable")


def test_nothing_crawled_exits_1_with_the_skips(site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site.page("/", "%PDF-1.4", content_type="application/pdf")
    assert main(["crawl", site.url("/"), "-o", str(tmp_path / "out.jsonl"), *FAST]) == 1
    assert last_line(capsys) == f"spire: nothing was crawled from {site.url('/')} (skipped: content_type=1)"


def test_a_crawl_that_kept_pages_exits_0(site: Site, tmp_path: Path) -> None:
    robots(site, "User-agent: *\nAllow: /\n")
    site.page("/", page("home", "/missing"))
    assert main(["crawl", site.url("/"), "-o", str(tmp_path / "out.jsonl"), *FAST]) == 0


def test_a_start_url_without_a_scheme_suggests_http(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crawl", "example.com/docs", "-o", str(tmp_path / "out.jsonl"), *FAST]) == 2
    assert last_line(capsys) == "spire: the start URL needs a scheme: did you mean 'http://example.com/docs'?"


# -- -o adds, -O replaces; the format follows the extension -------------------------------------


def test_o_adds_to_an_existing_output_and_capital_o_replaces_it(site: Site, tmp_path: Path) -> None:
    site.page("/", page("home"))
    out = tmp_path / "pages.jsonl"
    out.write_text('{"url": "earlier"}\n', encoding="utf-8")
    assert main(["crawl", site.url("/"), "-o", str(out), *FAST]) == 0
    assert [line["url"] for line in read_lines(out)] == ["earlier", site.url("/")]
    assert main(["crawl", site.url("/"), "-O", str(out), *FAST]) == 0
    assert [line["url"] for line in read_lines(out)] == [site.url("/")]


def test_capital_o_replaces_a_json_array_and_o_refuses_to_append_to_one(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("home"))
    out = tmp_path / "pages.json"
    out.write_text("[]\n", encoding="utf-8")
    assert main(["crawl", site.url("/"), "-o", str(out), *FAST]) == 2
    assert f"cannot be appended to: overwrite it, or write JSON Lines (.jsonl) instead (-O {out} replaces it)" in (
        last_line(capsys)
    )
    assert site.hits() == {}  # refused before any request
    assert main(["crawl", site.url("/"), "-O", str(out), *FAST]) == 0
    assert [record["url"] for record in json.loads(out.read_text(encoding="utf-8"))] == [site.url("/")]


@pytest.mark.parametrize("mistake", ["port in use", "--max-in-flight 0", "--robots-retry-delays soon"])
def test_capital_o_leaves_the_file_as_it_was_when_the_command_is_refused(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str], mistake: str
) -> None:
    site.page("/", page("home"))
    out = tmp_path / "pages.jsonl"
    out.write_text('{"url": "earlier"}\n', encoding="utf-8")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        extra = {
            "port in use": ["--dashboard", port],
            "--max-in-flight 0": ["--max-in-flight", "0"],
            "--robots-retry-delays soon": ["--robots-retry-delays", "soon"],
        }[mistake]
        assert main(["crawl", site.url("/"), "-O", str(out), *FAST, *extra]) == 2
    said = last_line(capsys)
    assert {"port in use": port, "--max-in-flight 0": "--max-in-flight", "--robots-retry-delays soon": "'soon'"}[
        mistake
    ] in said
    assert out.read_text(encoding="utf-8") == '{"url": "earlier"}\n'  # not emptied by the refused command
    assert site.hits() == {}


def test_o_and_capital_o_are_one_or_the_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["crawl", "http://127.0.0.1:9/", "-o", str(tmp_path / "a.jsonl"), "-O", str(tmp_path / "b.jsonl")])
    assert exit.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_missing_parent_folders_are_created(site: Site, tmp_path: Path) -> None:
    site.page("/", page("home"))
    out = tmp_path / "a" / "b" / "pages.jsonl"
    assert main(["crawl", site.url("/"), "-o", str(out), *FAST]) == 0
    assert len(read_lines(out)) == 1


def test_the_format_follows_the_extension(site: Site, tmp_path: Path) -> None:
    site.page("/", page("Home", "/a"))
    site.page("/a", page("Page A"))
    for name in ("pages.csv", "pages.json", "pages.sqlite"):
        assert main(["crawl", site.url("/"), "-o", str(tmp_path / name), *FAST]) == 0
    csv_lines = (tmp_path / "pages.csv").read_text(encoding="utf-8").splitlines()
    assert csv_lines[0] == "url,depth,status,title,text,meta"
    assert len(csv_lines) == 3
    records = json.loads((tmp_path / "pages.json").read_text(encoding="utf-8"))
    assert sorted(record["title"] for record in records) == ["Home", "Page A"]
    with sqlite3.connect(tmp_path / "pages.sqlite") as db:
        assert sorted(row[0] for row in db.execute("select json_extract(item, '$.title') from page_record")) == [
            "Home",
            "Page A",
        ]


def test_an_unknown_extension_is_an_error(site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crawl", site.url("/"), "-o", str(tmp_path / "pages.txt"), *FAST]) == 2
    assert ".jsonl, .csv, .sqlite, .json" in last_line(capsys)
    assert not (tmp_path / "pages.txt").exists()


def test_output_to_a_closed_pipe_exits_quietly(site: Site) -> None:
    site.page("/", page("home", *(f"/p{n}" for n in range(40))))
    for n in range(40):
        site.page(f"/p{n}", page(f"p{n}", body="x" * 2000))
    command = spire_command("crawl", site.url("/"), "-o", "-", *FAST)
    crawl = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert crawl.stdout is not None
    head = subprocess.run(["head", "-n", "1"], stdin=crawl.stdout, capture_output=True, timeout=30, check=True)
    crawl.stdout.close()
    _, stderr = crawl.communicate(timeout=30)
    assert json.loads(head.stdout)["url"] == site.url("/")
    assert crawl.returncode == 0
    assert b"Traceback" not in stderr
    assert b"BrokenPipe" not in stderr


# -- spire run ---------------------------------------------------------------------------------

SCRIPT = """
from pydantic import BaseModel
from spire import Dataset, Html, Links, Router, Url

class Title(BaseModel):
    url: str
    title: str

class Link(BaseModel):
    href: str

router = Router()

@router.default
async def page(html: Html, url: Url, links: Links, titles: Dataset[Title], found: Dataset[Link]) -> None:
    await titles.push(Title(url=url, title=html.css("title::text").get()))
    hrefs = html.css("a::attr(href)").getall()
    if {links_too}:
        await found.push([Link(href=href) for href in hrefs])
    await links.follow(hrefs)
"""


def write_script(tmp_path: Path, *, links_too: bool = False) -> Path:
    script = tmp_path / "crawl.py"
    script.write_text(textwrap.dedent(SCRIPT.format(links_too=links_too)), encoding="utf-8")
    return script


def test_run_writes_the_script_items_to_the_output(site: Site, tmp_path: Path) -> None:
    site.page("/", page("Home", "/a"))
    site.page("/a", page("Page A"))
    out = tmp_path / "out" / "titles.jsonl"
    args = ["run", str(write_script(tmp_path)), "--seed", site.url("/"), "-o", str(out), "--progress", "none"]
    assert main(args) == 0
    assert sorted(line["title"] for line in read_lines(out)) == ["Home", "Page A"]
    assert main(args) == 0  # -o adds: the second run's items follow the first's
    assert sorted(line["title"] for line in read_lines(out)) == ["Home", "Home", "Page A", "Page A"]
    replace = [*args[:4], "-O", str(out), "--progress", "none"]
    assert main(replace) == 0
    assert sorted(line["title"] for line in read_lines(out)) == ["Home", "Page A"]


def test_run_with_capital_o_leaves_no_old_rows_when_it_keeps_nothing(site: Site, tmp_path: Path) -> None:
    out = tmp_path / "titles.jsonl"
    out.write_text('{"url": "earlier", "title": "old"}\n', encoding="utf-8")
    site.page("/", page("gone"), status=404)
    args = ["run", str(write_script(tmp_path)), "--seed", site.url("/"), "-O", str(out), "--progress", "none"]
    main(args)
    assert out.read_text(encoding="utf-8") == ""


def test_run_with_capital_o_leaves_the_file_as_it_was_when_the_dashboard_port_is_taken(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("Home"))
    out = tmp_path / "titles.jsonl"
    out.write_text('{"url": "earlier", "title": "old"}\n', encoding="utf-8")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = ["run", str(write_script(tmp_path)), "--seed", site.url("/"), "-O", str(out), "--progress", "none"]
        assert main([*args, "--dashboard", port]) == 2
    assert port in last_line(capsys)
    assert out.read_text(encoding="utf-8") == '{"url": "earlier", "title": "old"}\n'
    assert site.hits() == {}


def test_run_with_two_item_types_needs_an_output_dir(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/", page("Home", "/a"))
    site.page("/a", page("Page A"))
    script = str(write_script(tmp_path, links_too=True))
    assert main(["run", script, "--seed", site.url("/"), "-o", str(tmp_path / "x.jsonl"), "--progress", "none"]) == 2
    assert "use --output-dir" in last_line(capsys)
    out = tmp_path / "items"
    assert main(["run", script, "--seed", site.url("/"), "--output-dir", str(out), "--format", "csv"]) == 0
    assert sorted(path.name for path in out.iterdir()) == ["link.csv", "title.csv"]


def test_run_with_nothing_to_crawl_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(write_script(tmp_path)), "--progress", "none"]) == 1
    assert last_line(capsys).startswith("spire: nothing was crawled")


def test_run_against_a_dead_host_exits_1_and_shows_the_failure(dead_port: int, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{dead_port}/"
    script = str(write_script(tmp_path))
    result = subprocess.run(
        spire_command("run", script, "--seed", url, "--progress", "none"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    # Every crawl reads robots.txt first: that is the request a dead host fails; the host is named, and
    # no handler is blamed (its pages are skipped, not failed).
    origin = url.rstrip("/")
    assert f"spire ERROR: cannot reach {origin}: its robots.txt failed (ConnectError: " in result.stderr
    assert "handler robots.txt" not in result.stderr
    assert "seed failed" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("spire: cannot reach the seed host: ")


def test_a_handler_error_in_run_shows_its_traceback(site: Site, tmp_path: Path) -> None:
    site.page("/", page("Home"))
    script = tmp_path / "broken.py"
    script.write_text(
        "from spire import Html, Router\n"
        "router = Router()\n"
        "@router.default\n"
        "async def page(html: Html) -> None:\n"
        "    price = float(html.css('.price::text').get())\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        spire_command("run", str(script), "--seed", site.url("/"), "--progress", "none"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "price = float(html.css('.price::text').get())" in result.stderr
    assert "TypeError" in result.stderr
    assert "1 seed failed:" in result.stderr


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_stops_on_a_signal_with_the_shell_status(site: Site, tmp_path: Path, signum: int, status: int) -> None:
    links = [f"/p{n}" for n in range(50)]
    site.page("/", page("home", *links))
    for link in links:
        site.page(link, page(link), delay=0.3)
    out = tmp_path / "titles.jsonl"
    command = spire_command("run", str(write_script(tmp_path)), "--seed", site.url("/"), "-o", str(out))
    process = subprocess.Popen([*command, "--concurrency", "2"], stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: out.exists() and out.read_text().count("\n") >= 2, within=20)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == status
    assert "spire: stopping (Ctrl-C again to stop at once)" in stderr
    assert "errors.shut_down=" in stderr or "requests=" in stderr


def test_a_tag_typo_in_a_script_stops_with_one_line(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "typo.py"
    script.write_text(
        "from spire import Router, Seed, Url\n"
        "router = Router()\n"
        "@router.handler('listing')\n"
        "async def listing(url: Url) -> None: ...\n"
        f"seeds = [Seed({site.url('/')!r}, tag='listnig')]\n",
        encoding="utf-8",
    )
    assert main(["run", str(script), "--progress", "none"]) == 2
    assert (
        last_line(capsys) == "spire: no handler for tag 'listnig': did you mean 'listing'? the router knows 'listing'"
    )


def test_run_output_to_a_closed_pipe_exits_quietly(site: Site, tmp_path: Path) -> None:
    site.page("/", page("home", *(f"/p{n}" for n in range(60))))
    for n in range(60):
        site.page(f"/p{n}", page(f"p{n}", body="x" * 2000))
    command = spire_command(
        "run", str(write_script(tmp_path)), "--seed", site.url("/"), "-o", "-", "--progress", "none"
    )
    crawl = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert crawl.stdout is not None
    head = subprocess.run(["head", "-n", "1"], stdin=crawl.stdout, capture_output=True, timeout=30, check=True)
    crawl.stdout.close()
    _, stderr = crawl.communicate(timeout=30)
    assert "title" in json.loads(head.stdout)
    assert crawl.returncode == 0, stderr
    assert b"Traceback" not in stderr


# -- the command itself ------------------------------------------------------------------------


def test_version_comes_from_the_package_metadata() -> None:
    from importlib.metadata import version

    assert spire.__version__ == version("spire-crawl")
    result = subprocess.run(spire_command("--version"), capture_output=True, text=True, timeout=30, check=True)
    assert result.stdout.strip() == f"spire-crawl {spire.__version__}"


def test_every_option_of_every_command_has_help_and_every_command_examples() -> None:
    parser = _parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert set(commands.choices) == {"crawl", "run", "worker", "status", "new", "shell", "why", "report"}
    for name, command in commands.choices.items():
        assert command.epilog is not None
        assert command.epilog.startswith("examples:"), name
        for action in command._actions:
            assert action.help, f"spire {name} {action.option_strings or action.dest} has no help"


def test_verbose_quiet_and_log_level_set_the_log_level(site: Site, tmp_path: Path) -> None:
    script = str(write_script(tmp_path))

    def run(*options: str) -> str:
        # a 503 to retry (logged at INFO); Retry-After: 0, or the origin would pause the polite 5 s first
        busy = (503, {"Retry-After": "0"}, b"busy")
        site.sequence("/", [busy, (200, {"Content-Type": "text/html"}, b"<title>ok</title>")])
        command = spire_command("run", script, "--seed", site.url("/"), "--progress", "none", *options)
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        return result.stderr

    assert "spire INFO: retry " in run("-v")
    assert "spire INFO" not in run("-q")
    assert "spire INFO" not in run()  # warnings and errors by default
    assert "spire INFO: retry " in run("--log-level", "info")
