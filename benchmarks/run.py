"""Run the benchmarks and print one table: spire against Scrapy, Crawlee and a bare loop, in one run.

    .venv/bin/python benchmarks/run.py                       # everything, 3 repeats (~15 minutes)
    .venv/bin/python benchmarks/run.py --scenarios sites --sites postgresql --repeats 5
    .venv/bin/python benchmarks/run.py --scenarios polite,memory --memory-urls 200000

Run ``benchmarks/setup.sh`` once first. Every crawler runs as its own process; CPU seconds and peak
RSS come from ``os.wait4`` (the child's own rusage). Pages/s divides the ground-truth page count by
the crawl time the crawler prints (``BENCH crawl_seconds=``: from building the crawler to its
output written, interpreter start-up and imports left out); whole pages/s divides it by the child's
whole wall time (start-up, imports, crawl and exit). A run whose pages differ from the
ground truth, that fetched a page twice, or whose link counts disagree with the files, is reported
as WRONG and not timed. See ``benchmarks/README.md`` for what each column means.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import serve  # noqa: E402
import truth as ground  # noqa: E402

REPO = HERE.parent
SPIRE_PY = REPO / ".venv" / "bin" / "python"
COMPARE_PY = HERE / ".venv-compare" / "bin" / "python"
OUT = serve.WORK / "out"
LOGS = serve.WORK / "logs"

#: Each crawler: its python, its script, and options of the script that make it this crawler.
CRAWLERS: dict[str, tuple[Path, str, tuple[str, ...]]] = {
    "spire": (SPIRE_PY, "crawl_spire.py", ()),
    "spire-plain": (SPIRE_PY, "crawl_spire.py", ("--plain",)),
    "scrapy": (COMPARE_PY, "crawl_scrapy.py", ()),
    "crawlee": (COMPARE_PY, "crawl_crawlee.py", ()),
    "bare": (SPIRE_PY, "crawl_bare.py", ()),
}
LABELS = {
    "spire": "spire",
    "spire-plain": "spire, plain handler (links.follow)",
    "scrapy": "Scrapy",
    "crawlee": "Crawlee (parsel)",
    "bare": "bare httpx-aiohttp loop",
    "spire live": "spire, live",
    "spire record": "spire, live + CachingBackend storing",
    "spire replay": "spire, replay from CachingBackend",
    "scrapy live": "Scrapy, live",
    "scrapy record": "Scrapy, live + HTTPCACHE storing",
    "scrapy replay": "Scrapy, replay from HTTPCACHE",
}
POLITE_PER_SECOND = 4.0


@dataclass
class Run:
    """One child process: what it cost, what it printed, and whether its answer was right."""

    seconds: float | None = None  # the crawl time the child reported
    cpu: float = 0.0
    rss_mb: float = 0.0
    wall: float = 0.0
    problems: list[str] = field(default_factory=list)
    bench: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Row:
    scenario: str
    crawler: str
    pages: int | None
    rate: float | None  # pages/s (or URLs/s pushed, for the memory rows)
    cpu: float | None
    rss_mb: float | None
    ratio: str = ""
    note: str = ""
    wrong: bool = False
    #: Pages over the child's whole wall time (start-up, imports, crawl, exit), median over the repeats.
    whole: float | None = None


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_child(argv: list[str], name: str, timeout: float) -> Run:
    """Run ``argv``; measure its CPU and peak RSS with ``wait4``; parse its ``BENCH`` line."""
    LOGS.mkdir(parents=True, exist_ok=True)
    run = Run()
    stdout_path, stderr_path = LOGS / f"{name}.out", LOGS / f"{name}.err"
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, cwd=REPO)
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        run.wall = time.perf_counter() - started
    run.cpu = usage.ru_utime + usage.ru_stime
    run.rss_mb = usage.ru_maxrss / 1024
    if child.returncode != 0:
        tail = stderr_path.read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
        killed = " (killed at the timeout)" if run.wall >= timeout else ""
        run.problems.append(f"exit {child.returncode}{killed}: {tail[0][:120]}")
    for line in stdout_path.read_text(errors="replace").splitlines():
        if line.startswith("BENCH "):
            run.bench = dict(item.split("=", 1) for item in line.split()[1:])
    if "crawl_seconds" in run.bench:
        run.seconds = float(run.bench["crawl_seconds"])
    if not run.bench and not run.problems:
        run.problems.append("printed no BENCH line")
    return run


# -- checks ---------------------------------------------------------------------------------------


def log_offset() -> int:
    return serve.ACCESS_LOG.stat().st_size if serve.ACCESS_LOG.exists() else 0


def log_since(offset: int) -> list[tuple[float, str, int, str]]:
    """``(start time, addr:port, status, uri)`` of the requests nginx logged after ``offset``."""
    time.sleep(0.1)  # nginx logs a request just after its response leaves
    with open(serve.ACCESS_LOG, "rb") as file:
        file.seek(offset)
        lines = file.read().decode(errors="replace").splitlines()
    entries = []
    for line in lines:
        parts = line.split(" ", 4)
        if len(parts) == 5:
            # nginx logs when a request ends; less its duration is when its first byte came in.
            entries.append((float(parts[0]) - float(parts[1]), parts[2], int(parts[3]), parts[4]))
    return entries


def check_output(path: Path, expected: ground.Truth, problems: list[str]) -> int:
    """Compare a crawler's JSON Lines with the ground truth; return the pages it wrote."""
    if not path.exists():
        problems.append("wrote no output")
        return 0
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            rows.append(json.loads(line))
    got = Counter(ground.key(row["url"]) for row in rows)
    want = {ground.key(url): url for url in expected.pages}
    twice = [url for url, count in got.items() if count > 1]
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    if twice:
        problems.append(f"{len(twice)} pages written twice, e.g. {twice[0]}")
    if extra:
        problems.append(f"{len(extra)} pages not in the ground truth, e.g. {extra[0]}")
    if missing:
        problems.append(f"{len(missing)} pages missed, e.g. {missing[0]}")
    wrong_links = [
        row["url"]
        for row in rows
        if ground.key(row["url"]) in want and row.get("links") != expected.links[want[ground.key(row["url"])]]
    ]
    if wrong_links:
        problems.append(f"{len(wrong_links)} pages with a wrong link count, e.g. {wrong_links[0]}")
    return len(rows)


def check_fetches(entries: list[tuple[float, str, int, str]], expected: ground.Truth, problems: list[str]) -> str:
    """Every page and every missing link fetched exactly once; return a note on the 404s."""
    uris = Counter(f"http://{addr}{uri}" for _, addr, _, uri in entries)
    twice = [uri for uri, count in uris.items() if count > 1]
    if twice:
        problems.append(f"{len(twice)} URLs fetched more than once, e.g. {twice[0]} x{uris[twice[0]]}")
    not_found = sum(1 for _, _, status, _ in entries if status == 404)
    if not_found != len(expected.missing):
        problems.append(f"{not_found} 404s fetched, expected {len(expected.missing)}")
    return f"{len(entries)} requests, {not_found} of them 404"


# -- scenarios ------------------------------------------------------------------------------------


def crawler_argv(crawler: str, starts: list[str], out: Path, *extra: str) -> list[str]:
    python, script, options = CRAWLERS[crawler]
    argv = [str(python), str(HERE / script), *options, "--out", str(out), *extra]
    for start in starts:
        argv += ["--start", start]
    return argv


#: A crawler run a certain way: its label in the table, its name in ``CRAWLERS``, extra arguments.
Variant = tuple[str, str, tuple[str, ...]]


def sites_scenario(
    args: argparse.Namespace, rows: list[Row], variants: list[Variant] | None = None, *, suffix: str = ""
) -> None:
    """Both documentation sites, once per crawler, or once per variant; scenarios named site + ``suffix``."""
    if variants is None:
        variants = [(crawler, crawler, ()) for crawler in args.crawlers if available(crawler)]
    for site in serve.SITES:
        if site.name not in args.sites:
            continue
        log(f"ground truth for {site.name} ...")
        expected = ground.compute(site.prefix, site.root)
        log(f"  {len(expected.pages)} pages, {len(expected.missing)} missing links")
        runs: dict[str, list[Run]] = defaultdict(list)
        for repeat in range(args.repeats):
            for label, crawler, extra in variants:  # interleaved, so drift spreads over every crawler
                name = f"{site.name}-{label.replace(' ', '-')}-{repeat}"
                out = OUT / f"{name}.jsonl"
                out.unlink(missing_ok=True)
                offset = log_offset()
                argv = crawler_argv(crawler, [site.start], out, "--concurrency", str(args.concurrency), *extra)
                run = run_child(argv, name, args.timeout)
                # Only this site's folder: anything else on the port is not this crawler's doing.
                fetched = [entry for entry in log_since(offset) if entry[3].startswith(site.folder)]
                check_output(out, expected, run.problems)
                run.notes.append(check_fetches(fetched, expected, run.problems))
                runs[label].append(run)
                rate = len(expected.pages) / run.seconds if run.seconds else 0.0
                state = "WRONG: " + "; ".join(run.problems) if run.problems else f"{rate:.0f} pages/s"
                log(f"  {site.name} {label} #{repeat + 1}: {state} (cpu {run.cpu:.1f}s, rss {run.rss_mb:.0f} MB)")
        labels = [label for label, _, _ in variants]
        rows.extend(summarise(site.name + suffix, len(expected.pages), labels, runs))


def summarise(scenario: str, pages: int, crawlers: list[str], runs: dict[str, list[Run]]) -> list[Row]:
    out: list[Row] = []
    rates: dict[str, float] = {}
    for crawler in crawlers:
        done = runs[crawler]
        bad = [run for run in done if run.problems]
        if bad:
            out.append(
                Row(scenario, crawler, None, None, None, None, note="WRONG: " + "; ".join(bad[0].problems), wrong=True)
            )
            continue
        seconds = [run.seconds for run in done if run.seconds]
        rate = statistics.median(pages / s for s in seconds)
        rates[crawler] = rate
        walls = [run.wall for run in done]
        note = (
            f"median of {len(done)}, {min(seconds):.2f}-{max(seconds):.2f} s "
            f"(whole process {min(walls):.2f}-{max(walls):.2f} s); {done[0].notes[0]}"
        )
        out.append(
            Row(
                scenario,
                crawler,
                pages,
                rate,
                statistics.median(run.cpu for run in done),
                statistics.median(run.rss_mb for run in done),
                note=note,
                whole=statistics.median(pages / wall for wall in walls),
            )
        )
    for row in out:
        if row.rate is not None and "scrapy" in rates:
            row.ratio = f"{row.rate / rates['scrapy']:.2f}x"
    return out


def cache_scenario(args: argparse.Namespace, rows: list[Row]) -> None:
    """A live crawl, the same crawl storing every response in a cache, then replaying from that cache.

    spire's ``CachingBackend`` (policy "dev", SQLite) against Scrapy's HTTP cache (DummyPolicy,
    filesystem storage). A replay must send nginx no request at all; every run is checked like the
    sites scenario. The cache is emptied before each recording run, so each repeat records afresh.
    """
    import shutil

    crawlers = [c for c in ("spire", "scrapy") if c in args.cache_crawlers and available(c)]
    for site in serve.SITES:
        if site.name not in args.sites:
            continue
        expected = ground.compute(site.prefix, site.root)
        runs: dict[str, list[Run]] = defaultdict(list)
        for repeat in range(args.repeats):
            for crawler in crawlers:
                cache = serve.WORK / "cache" / f"{site.name}-{crawler}"
                shutil.rmtree(cache, ignore_errors=True)
                for phase in ("live", "record", "replay"):
                    extra = ["--concurrency", str(args.concurrency)]
                    if phase != "live":
                        extra += ["--cache", str(cache)]
                    out = OUT / f"cache-{site.name}-{crawler}-{phase}-{repeat}.jsonl"
                    out.unlink(missing_ok=True)
                    offset = log_offset()
                    run = run_child(crawler_argv(crawler, [site.start], out, *extra), out.stem, args.timeout)
                    fetched = [entry for entry in log_since(offset) if entry[3].startswith(site.folder)]
                    check_output(out, expected, run.problems)
                    if phase == "replay":
                        if fetched:
                            run.problems.append(f"the replay sent {len(fetched)} requests")
                        run.notes.append("0 requests (nginx log)")
                    else:
                        run.notes.append(check_fetches(fetched, expected, run.problems))
                    runs[f"{crawler} {phase}"].append(run)
                    rate = len(expected.pages) / run.seconds if run.seconds else 0.0
                    state = "WRONG: " + "; ".join(run.problems) if run.problems else f"{rate:.0f} pages/s"
                    log(f"  cache {site.name} {crawler} {phase} #{repeat + 1}: {state} (cpu {run.cpu:.1f}s)")
        names = [f"{crawler} {phase}" for crawler in crawlers for phase in ("live", "record", "replay")]
        made = summarise(f"cache {site.name}", len(expected.pages), names, runs)
        rates = {row.crawler: row.rate for row in made if row.rate}
        for row in made:
            crawler = row.crawler.split()[0]
            live = rates.get(f"{crawler} live")
            if row.rate and live:
                row.note = f"{row.rate / live:.2f}x its live crawl; " + row.note
            if row.rate and rates.get("scrapy replay"):
                row.ratio = f"{row.rate / rates['scrapy replay']:.2f}x"
        rows.extend(made)


def polite_scenario(args: argparse.Namespace, rows: list[Row], variants: list[Variant] | None = None) -> None:
    """The polite hosts, once per crawler, or once per ``(label, crawler, extra arguments)`` variant."""
    if variants is None:
        variants = [(crawler, crawler, ()) for crawler in args.polite_crawlers if available(crawler)]
    hosts = args.polite_hosts
    starts = serve.polite_starts(hosts)
    pages_per_host = args.polite_pages + 1  # and the index
    allowed = hosts * POLITE_PER_SECOND
    expected = ground.Truth()
    for start in starts:
        host_truth = ground.compute(start.rsplit("/", 1)[0] + "/", serve.POLITE)
        expected.pages.update(host_truth.pages)
        expected.links.update(host_truth.links)
    assert len(expected.pages) == hosts * pages_per_host
    scenario = f"polite {hosts} hosts"
    results: dict[str, Run] = {}
    for label, crawler, extra in variants:
        out = OUT / f"polite-{label.replace(' ', '-')}.jsonl"
        out.unlink(missing_ok=True)
        offset = log_offset()
        argv = crawler_argv(crawler, starts, out, "--polite", "--concurrency", str(hosts), *extra)
        log(f"polite: {label} over {hosts} hosts x {pages_per_host} pages (at best {allowed:.0f} pages/s) ...")
        run = run_child(argv, f"polite-{label.replace(' ', '-')}", args.timeout)
        ours = {start.split("/")[2] for start in starts}
        fetched = [entry for entry in log_since(offset) if entry[1] in ours]
        check_output(out, expected, run.problems)
        check_fetches(fetched, expected, run.problems)
        by_host: dict[str, list[float]] = defaultdict(list)
        for when, addr, _, _ in fetched:
            by_host[addr].append(when)
        gaps = [b - a for times in by_host.values() for a, b in zip(sorted(times), sorted(times)[1:], strict=False)]
        results[label] = run
        if run.problems or not run.seconds:
            rows.append(
                Row(scenario, label, None, None, None, None, note="WRONG: " + "; ".join(run.problems), wrong=True)
            )
            log(f"  WRONG: {'; '.join(run.problems)}")
            continue
        rate = len(expected.pages) / run.seconds
        # The best a crawl can do: each host's first request at once, then one every 1/per_second.
        best = len(expected.pages) / ((pages_per_host - 1) / POLITE_PER_SECOND)
        # 10% slack for timer jitter on a loaded machine; shorter gaps broke the per-host rate.
        short = [gap for gap in gaps if gap < 0.9 / POLITE_PER_SECOND]
        spacing = f"{len(short)} gaps under {900 / POLITE_PER_SECOND:.0f} ms" if short else "no gap under the limit"
        note = (
            f"{rate / allowed:.1%} of the {allowed:.0f} pages/s the limits allow ({best:.1f} at best for "
            f"{pages_per_host} pages a host); {spacing}, smallest gap between two requests to one host "
            f"{min(gaps) * 1000:.0f} ms; {run.seconds:.1f} s"
        )
        rows.append(Row(scenario, label, len(expected.pages), rate, run.cpu, run.rss_mb, note=note))
        log(f"  {rate:.1f} pages/s; {note}")
    scrapy_rate = next((r.rate for r in rows if r.scenario == scenario and r.crawler == "scrapy" and r.rate), None)
    for row in rows:
        if row.scenario == scenario and row.rate and scrapy_rate:
            row.ratio = f"{row.rate / scrapy_rate:.2f}x"


def processes_scenario(args: argparse.Namespace, rows: list[Row]) -> None:
    """spire on 1, 2 and ``auto`` worker processes (``--processes``): both sites, then the polite hosts."""
    variants: list[Variant] = [(f"spire {count}p", "spire", ("--processes", count)) for count in args.process_counts]
    made: list[Row] = []
    sites_scenario(args, made, variants, suffix=" processes")
    for row in made:
        one = next(
            (r.rate for r in made if r.scenario == row.scenario and r.crawler == variants[0][0] and r.rate), None
        )
        row.ratio = f"{row.rate / one:.2f}x of {variants[0][0]}" if row.rate and one else ""
    rows.extend(made)
    polite_scenario(args, rows, variants)


def memory_scenario(args: argparse.Namespace, rows: list[Row]) -> None:
    kinds = ["spire-memory", "spire-sqlite", "scrapy"]
    scenario = f"frontier {args.memory_urls:,} URLs"
    per_url: dict[str, float] = {}
    made: list[Row] = []
    for kind in kinds:
        if kind == "spire-sqlite" and not sqlite_frontier_exists():
            made.append(Row(scenario, kind, None, None, None, None, note="spire_core.frontier.sqlite not there yet"))
            continue
        if kind == "scrapy" and not available("scrapy"):
            continue
        python = COMPARE_PY if kind == "scrapy" else SPIRE_PY
        log(f"frontier memory: {kind}, {args.memory_urls:,} URLs ...")
        argv = [str(python), str(HERE / "frontier_memory.py"), kind, "--urls", str(args.memory_urls)]
        run = run_child(argv, f"memory-{kind}", args.timeout)
        if run.problems or "bytes_per_url" not in run.bench:
            made.append(
                Row(scenario, kind, None, None, None, None, note="WRONG: " + "; ".join(run.problems), wrong=True)
            )
            log(f"  WRONG: {'; '.join(run.problems)}")
            continue
        per_url[kind] = float(run.bench["bytes_per_url"])
        urls, seconds = int(run.bench["urls"]), float(run.bench["seconds"])
        note = f"{per_url[kind]:.0f} bytes of RSS per queued URL (with its seen key); pushed in {seconds:.1f} s"
        if float(run.bench.get("disk_bytes_per_url", 0)):
            note += f"; {float(run.bench['disk_bytes_per_url']):.0f} bytes per URL on disk"
        made.append(Row(scenario, kind, urls, urls / seconds, run.cpu, run.rss_mb, note=note))
        log(f"  {note}")
    for row in made:
        if row.crawler in per_url and "scrapy" in per_url:
            row.ratio = f"{per_url[row.crawler] / per_url['scrapy']:.2f}x mem"
    rows.extend(made)


def sqlite_frontier_exists() -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('spire_core.frontier.sqlite') is None)"
    return subprocess.run([str(SPIRE_PY), "-c", probe], cwd=REPO).returncode == 0


def available(crawler: str) -> bool:
    python = CRAWLERS[crawler][0]
    if not python.exists():
        log(f"{python} is missing: run benchmarks/setup.sh; skipping {crawler}")
        return False
    return True


# -- the table ------------------------------------------------------------------------------------


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    python = platform.python_version()
    return f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB, Linux {platform.release()}, Python {python}"


def versions() -> str:
    found = []
    for python, names in (
        (SPIRE_PY, ["spire", "httpx", "httpx-aiohttp", "aiohttp"]),
        (COMPARE_PY, ["scrapy", "crawlee"]),
    ):
        if not python.exists():
            continue
        code = (
            "import importlib.metadata as m, sys\n"
            "for n in sys.argv[1:]:\n"
            "    try: print(n, m.version(n))\n"
            "    except m.PackageNotFoundError: pass\n"
        )
        listed = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True).stdout
        found += [" ".join(line.split()) for line in listed.splitlines()]
    return ", ".join(found)


def table(rows: list[Row]) -> str:
    header = ["scenario", "crawler", "pages", "pages/s", "whole pages/s", "CPU s", "peak RSS MB", "vs Scrapy", "notes"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        label = LABELS.get(row.crawler, row.crawler)
        if row.scenario.startswith("frontier"):
            label = {
                "spire-memory": "spire MemoryFrontier().dedup()",
                "spire-sqlite": "spire SqliteFrontier",
                "scrapy": "Scrapy scheduler (memory queue + RFPDupeFilter)",
            }.get(row.crawler, row.crawler)
        cells = [
            row.scenario,
            label,
            f"{row.pages:,}" if row.pages is not None else "-",
            f"{row.rate:,.0f}" if row.rate is not None and row.rate >= 100 else f"{row.rate:.1f}" if row.rate else "-",
            f"{row.whole:,.0f}" if row.whole is not None else "-",
            f"{row.cpu:.1f}" if row.cpu is not None else "-",
            f"{row.rss_mb:.0f}" if row.rss_mb is not None else "-",
            row.ratio or "-",
            row.note,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="spire against Scrapy, Crawlee and a bare loop; prints one table")
    parser.add_argument("--scenarios", default="sites,polite,memory", help="sites, polite, memory, cache, processes")
    parser.add_argument("--sites", default="postgresql,scipy", help="comma-separated: postgresql, scipy")
    parser.add_argument("--crawlers", default="spire,spire-plain,scrapy,crawlee,bare", help="for the sites scenario")
    parser.add_argument("--repeats", type=int, default=3, help="runs per crawler and site; the median is reported")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--polite-crawlers", default="spire,scrapy")
    parser.add_argument("--cache-crawlers", default="spire,scrapy", help="for the cache scenario")
    parser.add_argument(
        "--polite-hosts", type=int, default=40, choices=range(1, len(serve.POLITE_HOSTS) + 1), metavar="N"
    )
    parser.add_argument("--polite-pages", type=int, default=200, help="pages per polite host, besides its index")
    parser.add_argument("--memory-urls", type=int, default=1_000_000)
    parser.add_argument("--process-counts", default="1,2,auto", help="for the processes scenario")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a child is killed")
    parser.add_argument("--json", type=Path, default=serve.WORK / "results.json", help="also write the rows here")
    args = parser.parse_args()
    args.sites = args.sites.split(",")
    args.crawlers = args.crawlers.split(",")
    args.polite_crawlers = args.polite_crawlers.split(",")
    args.cache_crawlers = args.cache_crawlers.split(",")
    args.process_counts = args.process_counts.split(",")
    scenarios = args.scenarios.split(",")
    for name in args.crawlers + args.polite_crawlers:
        if name not in CRAWLERS:
            parser.error(f"unknown crawler {name!r}; one of {', '.join(CRAWLERS)}")

    # Warm means compiled: spire's own trees are an editable install, and a stale or missing .pyc
    # (PYTHONDONTWRITEBYTECODE, or a source newer than its cache) would be compiled in every timed run.
    subprocess.run([str(SPIRE_PY), "-m", "compileall", "-q", str(REPO / "spire"), str(REPO / "spire_core")], check=True)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    serve.start(args.polite_pages)
    OUT.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    if "sites" in scenarios:
        sites_scenario(args, rows)
    if "polite" in scenarios:
        polite_scenario(args, rows)
    if "memory" in scenarios:
        memory_scenario(args, rows)
    if "cache" in scenarios:
        cache_scenario(args, rows)
    if "processes" in scenarios:
        processes_scenario(args, rows)

    print(f"{datetime.date.today()}, {machine()}")
    print(versions())
    print(
        f"concurrency {args.concurrency}, {args.repeats} repeats, whole run {time.monotonic() - started:.0f} s, "
        f"1-minute load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after"
    )
    print()
    print(table(rows))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=1))
    sys.exit(1 if any(row.wrong for row in rows) else 0)


if __name__ == "__main__":
    main()
