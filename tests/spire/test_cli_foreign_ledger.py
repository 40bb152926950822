"""``spire why`` and ``spire report`` on ledger rows spire did not write: one sentence and exit 2, no traceback."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sites.server import Site

REPO = Path(__file__).parents[2]

#: An edit of the ledger's tables that no spire makes, by what it leaves there.
EDITS = {
    "an unknown fate": "UPDATE ledger SET fate = 'lost'",
    "a text attempt time": "UPDATE ledger_attempts SET at = 'yesterday'",
    # Copied without its NOT NULL, as a hand-made or foreign table might be.
    "an attempt with no URL": "CREATE TABLE loose AS SELECT * FROM ledger_attempts; DROP TABLE ledger_attempts;"
    " ALTER TABLE loose RENAME TO ledger_attempts; UPDATE ledger_attempts SET url = NULL",
}


@pytest.fixture(scope="module")
def crawled_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, Path]]:
    """A two-page site crawled into a state file once for the module."""
    folder = tmp_path_factory.mktemp("foreign")
    with Site() as site:
        site.page("/", "<title>home</title><a href='/a'>a</a>")
        site.page("/a", "<title>a</title>")
        state = folder / "crawl.sqlite"
        command = [
            sys.executable, "-m", "spire", "crawl", site.url("/"), "-o", str(folder / "pages.jsonl"),
            "--state", str(state), "--per-second", "0", "--progress", "none",
        ]  # fmt: skip
        crawl = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert crawl.returncode == 0, crawl.stderr
        yield site, state


#: The report counts attempts by origin and never reads their URLs, so a NULL one is no fault of its.
CASES = [(command, edit) for command in ("why", "report") for edit in EDITS]
CASES.remove(("report", "an attempt with no URL"))


@pytest.mark.parametrize(("command", "edit"), CASES)
def test_a_row_spire_did_not_write_is_one_sentence_and_exit_2(
    crawled_state: tuple[Site, Path], tmp_path: Path, edit: str, command: str
) -> None:
    site, crawled = crawled_state
    state = tmp_path / "crawl.sqlite"
    shutil.copy(crawled, state)
    with sqlite3.connect(state) as db:
        db.executescript(EDITS[edit])
    db.close()
    args = [site.url("/")] if command == "why" else ["-o", str(tmp_path / "report.html")]
    ran = subprocess.run(
        [sys.executable, "-m", "spire", command, *args, "--state", str(state)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in ran.stderr, ran.stderr
    assert ran.returncode == 2, ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert ran.stderr.startswith(f"spire: the ledger in {str(state)!r}"), ran.stderr
