"""``spire crawl URL --state FILE --recrawl -o changes.jsonl``: the change feed, whole after a kill -9, and
written again from the state (``spire why --changes``); what ``spire why`` says of a recrawl's pages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

import spire
from spire import Crawler
from spire.cli import main
from spire.cli.interrupt import STOPPING
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.limits import HostLimits
from spire_core.recrawl import Recrawl
from tests.sites.changing import ChangingSite
from tests.sites.server import Reply, Request, Site, killed_when_held
from tests.spire_core.test_recrawl import EXPECTED, PAGES, build, edit_the_site, site_router

REPO = Path(__file__).parents[3]


def command(changing: ChangingSite, state: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "spire", "crawl", changing.url("/"), "--state", str(state),
        "--max-in-flight", "2", "--per-second", "0", "--progress", "none", *extra,
    ]  # fmt: skip


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)


def feed_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def path_of(url: object) -> str:
    return str(url).split("/", 3)[3] or "/"


def spire_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``spire ARGS`` in this process: its exit status, standard output and standard error."""
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def fast(changing: ChangingSite, state: Path, *extra: str) -> list[str]:
    """``spire crawl`` of ``changing`` on ``state``, as fast as the site answers."""
    return command(changing, state, *extra)[3:]


def test_a_recrawl_killed_with_sigkill_resumes_and_its_feed_has_each_page_once(site: Site, tmp_path: Path) -> None:
    changing = build(site, validators=True)
    state, changes = tmp_path / "state.db", tmp_path / "changes.jsonl"
    first = run(command(changing, state, "-o", str(tmp_path / "pages.jsonl")))
    assert first.returncode == 0, first.stderr
    edit_the_site(changing)
    reached, released = threading.Event(), threading.Event()
    changing.hold_from(8, reached, released)

    recrawl = command(changing, state, "--recrawl", "-o", str(changes))
    killed = killed_when_held(recrawl, reached=reached, released=released, cwd=REPO)
    assert killed.returncode == -9
    assert not changes.exists()  # the feed is written whole, once the recrawl is done
    # The state says what the killed recrawl found so far, and that it has not finished.
    partial = tmp_path / "partial.jsonl"
    said = run([sys.executable, "-m", "spire", "why", "--state", str(state), "--changes", str(partial)])
    assert said.returncode == 0, said.stderr
    assert f"crawl 2 in {state} has not finished: the feed holds the pages it settled so far" in said.stderr
    settled = [path_of(line["url"]) for line in feed_of(partial)]
    assert 0 < len(settled) < len(EXPECTED)
    assert len(set(settled)) == len(settled)
    changing.hold_from(10**9, threading.Event(), threading.Event())
    resumed = run(recrawl)

    assert resumed.returncode == 0, resumed.stderr
    lines = feed_of(changes)
    paths = [str(line["url"]).split("/", 3)[3] or "/" for line in lines]
    assert sorted(paths) == sorted(EXPECTED)  # each page once
    assert {path: line["change"] for path, line in zip(paths, lines, strict=True)} == EXPECTED
    gone = next(line for line in lines if line["change"] == "gone")
    assert (gone["status"], gone["reason"], gone["hash"]) == (404, "HTTP 404", None)
    changed = next(line for line in lines if str(line["url"]).endswith("/p3"))
    assert changed["hash"] != changed["previous_hash"]
    assert str(changed["changed_at"]).endswith("Z")
    assert "changes: new=1 changed=3 unchanged=16 gone=1 failed=0; 21 lines to" in resumed.stderr

    # The next recrawl finds nothing changed, and -o adds its feed after the last one.
    again = run(recrawl)
    assert again.returncode == 0, again.stderr
    later = feed_of(changes)[len(lines) :]
    assert len(later) == 20
    assert {line["change"] for line in later} == {"unchanged"}


def test_a_recrawl_stopped_by_ctrl_c_writes_no_feed_and_the_resumed_one_has_each_page_once(
    site: Site, tmp_path: Path
) -> None:
    changing = build(site, validators=True)
    state, changes = tmp_path / "state.db", tmp_path / "changes.jsonl"
    first = run(command(changing, state, "-o", str(tmp_path / "pages.jsonl")))
    assert first.returncode == 0, first.stderr
    edit_the_site(changing)
    reached, released = threading.Event(), threading.Event()
    changing.hold_from(8, reached, released)
    recrawl = command(changing, state, "--recrawl", "-o", str(changes))
    stopped = subprocess.Popen(recrawl, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert reached.wait(timeout=60), "the recrawl never reached the held pages"
        stopped.send_signal(signal.SIGINT)
        assert stopped.stderr is not None
        said = [stopped.stderr.readline()]
        while STOPPING not in said[-1] and said[-1]:
            said.append(stopped.stderr.readline())
        released.set()  # stopping: the pages in flight may answer now, and no other starts
        # Not communicate(): it reads the pipe itself and would miss what readline() already buffered.
        stopped.wait(timeout=60)
        rest = stopped.stderr.read()
        stderr = "".join(said) + rest
    finally:
        released.set()
        if stopped.poll() is None:
            stopped.kill()
            stopped.wait()
    assert stopped.returncode == 130, stderr
    assert not changes.exists(), changes.read_text(encoding="utf-8")  # the feed waits for the recrawl's end
    assert "the same command resumes it" in stderr
    changing.hold_from(10**9, threading.Event(), threading.Event())

    resumed = run(recrawl)
    assert resumed.returncode == 0, resumed.stderr
    paths = [path_of(line["url"]) for line in feed_of(changes)]
    assert sorted(paths) == sorted(EXPECTED)  # each page once


def test_recrawl_needs_a_state_and_a_json_lines_feed(site: Site, tmp_path: Path) -> None:
    changing = build(site, validators=True)
    without = [sys.executable, "-m", "spire", "crawl", changing.url("/"), "--recrawl", "-o", str(tmp_path / "c.jsonl")]
    found = subprocess.run(without, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert found.returncode == 2
    assert "--recrawl crawls again what a crawl kept in its state: give --state FILE" in found.stderr
    csv = command(changing, tmp_path / "state.db", "--recrawl", "-o", str(tmp_path / "changes.csv"))
    found = subprocess.run(csv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert found.returncode == 2
    assert "give -o FILE.jsonl" in found.stderr
    assert site.requests == []  # refused before anything was sent


SCRIPT = """
from pydantic import BaseModel
from spire import Dataset, Html, Links, Router, Url

class Page(BaseModel):
    url: str
    title: str

router = Router()

@router.default
async def page(html: Html, links: Links, url: Url, pages: Dataset[Page]) -> None:
    await links.follow(html.css("a::attr(href)").getall())
    await pages.push(Page(url=url, title=html.css("title::text").get()))
"""


def test_spire_run_recrawl_writes_items_of_new_and_changed_pages_only(site: Site, tmp_path: Path) -> None:
    changing = build(site, validators=True)
    script = tmp_path / "crawl.py"
    script.write_text(SCRIPT, encoding="utf-8")
    items = tmp_path / "pages.jsonl"
    recrawl = [
        sys.executable, "-m", "spire", "run", str(script), "--seed", changing.url("/"), "--frontier",
        str(tmp_path / "crawl.sqlite"), "--recrawl", "-o", str(items), "--progress", "none",
    ]  # fmt: skip
    first = run(recrawl)
    assert first.returncode == 0, first.stderr
    assert len(feed_of(items)) == 20
    edit_the_site(changing)

    again = run(recrawl)

    assert again.returncode == 0, again.stderr
    later = sorted(str(line["url"]).rsplit("/", 1)[1] for line in feed_of(items)[20:])
    assert later == ["", "p20", "p3", "p7"]
    assert "changes: new=1 changed=3 unchanged=16 gone=1 failed=0" in again.stderr
    without = run(recrawl[: recrawl.index("--frontier")] + recrawl[recrawl.index("--recrawl") :])
    assert without.returncode == 2
    assert "--recrawl keeps page states in the crawl's frontier file: give --frontier FILE" in without.stderr


def test_a_feed_the_recrawl_could_not_write_is_written_from_its_state(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changing = build(site, validators=True)
    state, changes = tmp_path / "state.db", tmp_path / "changes.jsonl"
    assert main(fast(changing, state, "-o", str(tmp_path / "pages.jsonl"))) == 0
    edit_the_site(changing)
    (tmp_path / "changes.jsonl.partial").mkdir()  # the feed cannot be written: the process dies before its rename
    capsys.readouterr()

    status, _, err = spire_main(capsys, *fast(changing, state, "--recrawl", "-o", str(changes)))

    assert status == 3
    assert f"the recrawl is done and its state keeps the feed: `spire why --state {state} --changes FILE`" in err
    assert not changes.exists()
    recovered = tmp_path / "recovered.jsonl"
    status, _, err = spire_main(capsys, "why", "--state", str(state), "--changes", str(recovered))
    assert status == 0
    assert f"wrote 21 lines of the change feed of crawl 2 in {state} to {recovered}" in err
    assert "has not finished" not in err
    assert {path_of(line["url"]): line["change"] for line in feed_of(recovered)} == EXPECTED
    status, out, _ = spire_main(capsys, "why", "--state", str(state), "--changes", "-")
    assert status == 0
    assert out.splitlines() == recovered.read_text(encoding="utf-8").splitlines()  # - is standard output
    nowhere = tmp_path / "missing" / "changes.jsonl"
    for option in ("--changes", "--export"):
        status, _, err = spire_main(capsys, "why", "--state", str(state), option, str(nowhere))
        assert status == 3
        assert err == f"spire: cannot write {nowhere}: No such file or directory\n"


def test_changes_needs_a_state_that_kept_page_states(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changing = build(site, validators=True)
    state = tmp_path / "state.db"

    async def crawl_without_page_states() -> None:
        async with SqliteFrontier(state) as frontier:
            await Crawler(site_router(), frontier=frontier).arun([changing.url("/")])

    anyio.run(crawl_without_page_states)
    out = tmp_path / "changes.jsonl"
    status, _, err = spire_main(capsys, "why", "--state", str(state), "--changes", str(out))
    assert status == 1
    assert f"the crawl in {state} has no change feed: it kept no page states" in err
    assert not out.exists()
    status, _, err = spire_main(capsys, "why", "--redis", "redis://127.0.0.1:1/0", "--changes", str(out))
    assert status == 2
    assert "a fleet on Redis keeps no page states, so it has no change feed" in err


def test_spire_why_says_what_a_recrawl_found_of_a_page(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changing = build(site, validators=True)
    state, changes = tmp_path / "state.db", tmp_path / "changes.jsonl"
    assert main(fast(changing, state, "-o", str(tmp_path / "pages.jsonl"))) == 0
    edit_the_site(changing)
    assert main(fast(changing, state, "--recrawl", "-o", str(changes))) == 0
    capsys.readouterr()
    lines = {path_of(line["url"]): line for line in feed_of(changes)}

    def why(path: str) -> list[str]:
        status, out, _ = spire_main(capsys, "why", changing.url(path), "--state", str(state))
        assert status == 0
        return out.splitlines()

    p3 = lines["p3"]
    assert why("/p3")[2:4] == [
        "  found: kept by an earlier crawl (depth 1)",
        f"  change: changed (fetched, its fingerprint compared); hash {p3['previous_hash']} -> {p3['hash']}; "
        f"last changed {p3['changed_at']}",
    ]
    p1 = lines["p1"]
    assert why("/p1")[0] == "kept (304)"
    assert why("/p1")[3] == (
        f"  change: unchanged (the server answered 304 Not Modified); hash {p1['hash']} -> {p1['hash']}; "
        f"last changed {p1['changed_at']}"
    )
    assert (
        why("/p5")[3]
        == f"  change: gone; hash {lines['p5']['previous_hash']} -> none; last changed {lines['p5']['changed_at']}"
    )
    assert why("/p20")[2:4] == [
        f"  found on: {changing.url('/')} (depth 1)",
        f"  change: new (fetched); hash none -> {lines['p20']['hash']}; last changed {lines['p20']['changed_at']}",
    ]
    assert str(p3["changed_at"]).endswith("Z")


def test_spire_why_lists_the_pages_a_recrawl_did_not_fetch_by_reason(
    changing: ChangingSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_due, lastmod = tmp_path / "not_due.db", tmp_path / "lastmod.db"

    async def crawls() -> None:
        for _ in range(3):  # unchanged once, then put off (slow_after=1): not due on the third run
            async with SqliteFrontier(not_due) as frontier:
                policy = Recrawl(slow_after=1)
                await Crawler(site_router(), frontier=frontier, recrawl=policy).arun([changing.url("/")])
        for _ in range(3):  # lastmod proved right once (trust_lastmod_after=1), then trusted
            async with SqliteFrontier(lastmod) as frontier:
                crawl = spire.crawl(
                    changing.url("/"),
                    frontier=frontier,
                    recrawl=Recrawl(trust_lastmod_after=1),
                    host_limits=HostLimits(max_in_flight=1),  # the sitemap is read before the pages are revisited
                )
                async with crawl:
                    async for _ in crawl:
                        pass

    anyio.run(crawls)

    status, out, _ = spire_main(capsys, "why", "--reason", "not_due", "--state", str(not_due))
    assert status == 0
    assert sorted(out.splitlines()) == sorted(
        f"{changing.url(path)}  (kept by an earlier crawl)" for path in ["/", *(f"/p{i}" for i in range(1, PAGES))]
    )
    status, out, _ = spire_main(capsys, "why", "--reason", "lastmod", "--state", str(lastmod))
    assert status == 0
    listed = out.splitlines()
    assert len(listed) > PAGES // 2  # most pages: a few are spot checks, or revisited before the sitemap was read
    assert all(line.startswith(changing.url("/p")) for line in listed)
    said = "(kept by an earlier crawl)  [lastmod 2023-11-14T22:13:20+00:00]"  # ChangingSite's clock, untouched
    assert all(line.endswith(said) for line in listed)


@pytest.fixture
def changing(site: Site) -> ChangingSite:
    return build(site, validators=True)


def test_a_change_feed_to_a_closed_pipe_ends_quietly(site: Site, tmp_path: Path) -> None:
    """``spire why --changes - | head``: a reader that stops early is no error of spire's."""
    changing = build(site, validators=True)
    state = tmp_path / "state.db"
    assert run(command(changing, state, "-o", str(tmp_path / "pages.jsonl"))).returncode == 0
    edit_the_site(changing)
    assert run(command(changing, state, "--recrawl", "-o", str(tmp_path / "changes.jsonl"))).returncode == 0
    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone before the first line: every write meets a broken pipe
    try:
        said = subprocess.run(
            [sys.executable, "-m", "spire", "why", "--state", str(state), "--changes", "-"],
            cwd=REPO, stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(writer)
    assert (said.returncode, said.stderr) == (0, "")


def test_a_recrawl_that_meets_block_pages_keeps_every_page_failed_and_the_next_one_finds_them_unchanged(
    site: Site, tmp_path: Path
) -> None:
    changing = build(site, validators=True)
    state, changes = tmp_path / "state.db", tmp_path / "changes.jsonl"
    first = run(command(changing, state, "-o", str(tmp_path / "pages.jsonl")))
    assert first.returncode == 0, first.stderr
    paths = ["/", *(f"/p{i}" for i in range(1, PAGES))]

    def blocked(request: Request) -> Reply:
        return 403, {"Server": "cloudflare", "Content-Type": "text/html"}, b"<p>Sorry, you have been blocked</p>"

    for path in paths:
        site.route(path, blocked)
    recrawl = command(changing, state, "--recrawl", "-o", str(changes))
    run(recrawl)
    # A block page is no evidence that a page is gone: each is failed, its state kept for next time.
    lines = feed_of(changes)
    assert {path_of(line["url"]): line["change"] for line in lines} == {
        path.lstrip("/") or "/": "failed" for path in paths
    }

    build(site, validators=True)  # the same pages again, answering as they did the first time
    again = run(recrawl)
    assert again.returncode == 0, again.stderr
    later = feed_of(changes)[len(lines) :]
    assert {path_of(line["url"]): line["change"] for line in later} == {
        path.lstrip("/") or "/": "unchanged" for path in paths
    }
