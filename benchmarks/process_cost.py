"""The CPU a page costs with ``processes=N``, summed over every process of the crawl.

    .venv/bin/python benchmarks/serve.py start
    .venv/bin/python benchmarks/process_cost.py [--site scipy|postgresql] [--counts 1,2,auto] [--repeats 5]

Each run is ``crawl_spire.py --plain --processes N`` as a child process, the counts taking turns
(1, 2, auto, 1, 2, auto...) so that a change in the machine's load falls on every count alike. The
CPU is the user + system time ``os.wait4`` reports for the crawl's process, which holds its reaped
descendants too: the forker and every worker process (each worker is reaped by the forker, the
forker by the crawl's process, before the crawl's process exits). Start-up is included, so the
per-page figure is the whole process tree's CPU over the pages written. Medians over the repeats;
"vs 1" divides by the medians of ``processes=1``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import serve

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / ".work" / "process_cost"


@dataclass
class Runs:
    """The repeats of one process count."""

    pages: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def run_once(site: serve.DocSite, count: str, concurrency: int) -> tuple[int, float, float]:
    """One crawl: (pages written, crawl seconds it printed, CPU seconds of its whole process tree)."""
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{site.name}-{count}.jsonl"
    argv = [sys.executable, str(HERE / "crawl_spire.py"), "--start", site.start, "--out", str(out)]
    argv += ["--plain", "--processes", count, "--concurrency", str(concurrency)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO, text=True)
    assert child.stdout is not None
    printed = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"crawl_spire.py --processes {count} failed (exit {os.waitstatus_to_exitcode(status)})")
    seconds = next(float(line.split("=", 1)[1]) for line in printed.splitlines() if line.startswith("BENCH "))
    with open(out, "rb") as file:
        pages = sum(1 for _ in file)
    return pages, seconds, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", choices=[site.name for site in serve.SITES], default="scipy")
    parser.add_argument("--counts", default="1,2,auto", help="process counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    site = next(site for site in serve.SITES if site.name == args.site)
    serve.wait_until_up()
    counts = args.counts.split(",")
    runs = {count: Runs() for count in counts}
    started = os.getloadavg()[0]
    for repeat in range(args.repeats):
        for count in counts:
            pages, seconds, cpu = run_once(site, count, args.concurrency)
            runs[count].pages.append(pages)
            runs[count].seconds.append(seconds)
            runs[count].cpu.append(cpu)
            print(f"# {count}p run {repeat + 1}: {pages} pages, {seconds:.2f} s, {cpu:.2f} CPU s", file=sys.stderr)
            time.sleep(0.5)  # nginx's log and the kernel's accounting settle
    ended = os.getloadavg()[0]
    base = runs[counts[0]]
    base_rate = statistics.median(p / s for p, s in zip(base.pages, base.seconds, strict=True))
    base_cpu = statistics.median(c / p for p, c in zip(base.pages, base.cpu, strict=True))
    print(f"{site.name}, concurrency {args.concurrency}, {args.repeats} repeats, load {started:.1f} -> {ended:.1f}")
    print()
    print("| processes | pages | pages/s | vs 1 | CPU ms/page (all processes) | vs 1 |")
    print("|---|---:|---:|---:|---:|---:|")
    for count in counts:
        found = runs[count]
        rate = statistics.median(p / s for p, s in zip(found.pages, found.seconds, strict=True))
        cpu = statistics.median(c / p for p, c in zip(found.pages, found.cpu, strict=True))
        pages = statistics.median(found.pages)
        ratios = f"{rate / base_rate:.2f}x | {cpu * 1000:.2f} | {cpu / base_cpu:.2f}x"
        print(f"| {count} | {pages:,.0f} | {rate:,.0f} | {ratios} |")


if __name__ == "__main__":
    main()
