"""A recrawl of an unchanged site against its first crawl: pages a second, requests and body bytes.

    .venv/bin/python benchmarks/recrawl.py [--sites postgresql,scipy] [--repeats 3]

For each site served by nginx (``benchmarks/setup.sh``; nginx sends ``ETag`` and ``Last-Modified``
for its files and answers conditional requests with 304), in a fresh state file:

1. ``crawl_spire.py --state FILE --recrawl``: the first crawl, keeping page states;
2. the same command again: the recrawl, each page asked for with its validators;
3. ``crawl_spire.py --state FILE`` on another file: the same first crawl keeping no page states,
   which is what keeping them costs.

Each row is the median over ``--repeats`` (the runs take turns); CPU is the child's user + system
time from ``os.wait4``; requests, body bytes and changes are read from the state file's ledger.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import anyio

from spire_core.ledger import Fate
from spire_core.ledger_sqlite import SqliteLedgerView

HERE = Path(__file__).resolve().parent
SITES = {
    "postgresql": "http://127.0.0.1:8631/postgresql/index.html",
    "scipy": "http://127.0.0.1:8632/scipy/index.html",
}


class Run(NamedTuple):
    seconds: float
    cpu: float
    pages: int
    requests: int
    bytes: int
    changes: str


def crawl(start: str, state: Path, *, recrawl: bool) -> tuple[float, float]:
    """Crawl seconds (as the script prints them) and the child's CPU seconds."""
    out = state.with_suffix(".jsonl")
    command = [sys.executable, str(HERE / "crawl_spire.py"), "--start", start, "--out", str(out), "--state", str(state)]
    child = subprocess.Popen([*command, *(["--recrawl"] if recrawl else [])], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{output}")
    seconds = next(float(line.split("=", 1)[1]) for line in output.splitlines() if line.startswith("BENCH "))
    return seconds, usage.ru_utime + usage.ru_stime


async def ledger_of(state: Path) -> tuple[int, int, int, str]:
    """Pages kept or unchanged, requests and body bytes of the state's last crawl, and its changes."""
    async with SqliteLedgerView(state) as view:
        summary = await view.summary(samples=0)
    changes = " ".join(f"{change}={n}" for change, n in sorted(summary.changes.items()))
    pages = sum(summary.changes.values()) or summary.fates.get(Fate.KEPT, 0)
    return pages, summary.requests, summary.bytes, changes


def measure(start: str, folder: Path, round_: int) -> dict[str, Run]:
    runs: dict[str, Run] = {}
    state = folder / f"state-{round_}.db"
    for name, recrawl in (("first crawl", True), ("recrawl, unchanged", True)):
        seconds, cpu = crawl(start, state, recrawl=recrawl)
        runs[name] = Run(seconds, cpu, *anyio.run(ledger_of, state))
    plain = folder / f"plain-{round_}.db"
    seconds, cpu = crawl(start, plain, recrawl=False)
    runs["first crawl, no page states"] = Run(seconds, cpu, *anyio.run(ledger_of, plain))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", default="postgresql", help="comma-separated: postgresql, scipy")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load:.1f}, {args.repeats} repeats\n")
    print("| site | crawl | pages | seconds | pages/s | CPU s | requests | body bytes | vs first crawl | changes |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---|")
    for site in args.sites.split(","):
        with tempfile.TemporaryDirectory() as folder:
            rounds = [measure(SITES[site], Path(folder), n) for n in range(args.repeats)]
        first = statistics.median(r["first crawl"].seconds for r in rounds)
        first_bytes = statistics.median(r["first crawl"].bytes for r in rounds)
        for name in ("first crawl, no page states", "first crawl", "recrawl, unchanged"):
            runs = [r[name] for r in rounds]
            seconds = statistics.median(run.seconds for run in runs)
            cpu = statistics.median(run.cpu for run in runs)
            body = statistics.median(run.bytes for run in runs)
            pages = runs[0].pages
            versus = f"{first / seconds:.1f}x as fast, {body / first_bytes:.1%} of the bytes" if first_bytes else "-"
            print(
                f"| {site} | {name} | {pages:,} | {seconds:.2f} | {pages / seconds:,.0f} | {cpu:.2f} "
                f"| {runs[0].requests:,} | {int(body):,} | {versus} | {runs[0].changes or '-'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
