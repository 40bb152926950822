"""``spire run --processes N``: a script's crawl on worker processes, and Ctrl-C stopping all of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.sites.server import Site, binary_tree
from tests.spire.test_cli import wait_for

SCRIPT = """
    import os

    from pydantic import BaseModel

    from spire import Dataset, Html, Links, Router, Url

    class Visit(BaseModel):
        url: str
        pid: int

    router = Router()

    @router.default
    async def page(html: Html, links: Links, url: Url, visits: Dataset[Visit]) -> None:
        await visits.push(Visit(url=url, pid=os.getpid()))
        await links.enqueue()
"""


def run_command(tmp_path: Path, root: str, out: Path, *extra: str) -> list[str]:
    script = tmp_path / "crawl.py"
    script.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    return [sys.executable, "-m", "spire", "run", str(script), "--seed", root, "-o", str(out), *extra]


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}")]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_run_with_two_processes_writes_every_page_once(site: Site, tmp_path: Path) -> None:
    root = binary_tree(site, 300)
    out = tmp_path / "visits.jsonl"
    command = run_command(tmp_path, root, out, "--processes", "2", "--progress", "none")
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    visits = lines(out)
    assert sorted(str(visit["url"]) for visit in visits) == sorted(site.url(f"/page/{i}") for i in range(300))
    assert len({visit["pid"] for visit in visits}) == 2


def test_ctrl_c_stops_the_crawl_and_every_worker_process(site: Site, tmp_path: Path) -> None:
    root = binary_tree(site, 400, delay=0.2)
    out = tmp_path / "visits.jsonl"
    command = run_command(tmp_path, root, out, "--processes", "2", "--concurrency", "4", "--progress", "none")
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: out.exists() and len({visit["pid"] for visit in lines(out)}) == 2, within=30)
        workers = {int(str(visit["pid"])) for visit in lines(out)}
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert "errors.shut_down=" in stderr or "requests=" in stderr
    wait_for(lambda: all(gone(pid) for pid in workers), within=10)  # no worker outlives the crawl
    assert len(lines(out)) < 400  # it stopped early, with whole lines written
