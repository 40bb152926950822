"""``spire crawl URL --state FILE --recrawl -o changes.jsonl``: the change feed, whole after a kill -9."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from tests.sites.changing import ChangingSite
from tests.sites.server import Site, killed_when_held
from tests.spire_core.test_recrawl import EXPECTED, build, edit_the_site

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
