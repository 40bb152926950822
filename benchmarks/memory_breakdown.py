"""Where spire's memory goes in the benchmark crawl: a table of the peak, by kind.

    .venv/bin/python benchmarks/memory_breakdown.py                 # the SciPy site
    .venv/bin/python benchmarks/memory_breakdown.py --site postgresql --top 15

Two crawls of the site in this process's children, as ``crawl_spire.py`` runs it:

1. without tracing: the resident set after the imports, its peak (``ru_maxrss``) and at the end;
2. with ``tracemalloc``: a snapshot each 100 pages, the largest kept, grouped by the file that
   allocated each block into kinds (imports and code, URL caches, the frontier and its seen set,
   response bodies in flight, the HTTP client, the dataset, stats and logging...).

Memory that is not Python objects (lxml's trees, which libxml2 allocates itself; thread stacks;
what malloc keeps after a free) is the rest: the peak resident set less the traced peak and less
what the imports hold. The frontier's bytes per URL are measured on their own, by pushing URLs
into ``Dedup(MemoryFrontier())``. Nothing is asserted; the numbers are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import serve  # noqa: E402

#: Kinds of memory by the file that allocated it (the first pattern found in the path wins).
KINDS = (
    ("<frozen importlib", "imports and code"),
    ("<frozen abc>", "imports and code"),
    ("typing.py", "imports and code"),
    ("dataclasses.py", "imports and code"),
    ("spire_core/url.py", "URL joins and canonical keys (caches)"),
    ("spire/links.py", "link candidates and targets (caches)"),
    ("ada_url/", "URL joins and canonical keys (caches)"),
    ("spire_core/frontier/", "frontier and seen set"),
    ("spire_core/seed.py", "frontier and seen set"),
    ("spire_core/admission.py", "frontier and seen set"),
    ("aiohttp/", "HTTP client and bodies in flight"),
    ("spire_core/backend/", "HTTP client and bodies in flight"),
    ("httpx/", "HTTP client and bodies in flight"),
    ("yarl/", "HTTP client and bodies in flight"),
    ("parsel/", "parsed pages (Python side)"),
    ("lxml/", "parsed pages (Python side)"),
    ("spire_core/html.py", "parsed pages (Python side)"),
    ("spire_core/dataset/", "dataset"),
    ("pydantic", "dataset"),
    ("spire_core/stats.py", "stats and latency"),
    ("logging/", "logging"),
    ("spire_core/log.py", "logging"),
    ("asyncio/", "event loop and tasks"),
    ("anyio/", "event loop and tasks"),
)


def kind_of(filename: str) -> str:
    for pattern, kind in KINDS:
        if pattern in filename:
            return kind
    return "other"


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


def crawl(start: str, traced: bool) -> dict[str, object]:
    """One crawl in this process; returns what was measured (run in a child, one crawl a process)."""
    import crawl_spire

    from spire import Crawler, HostLimits
    from spire_core.crawler import Crawler as Engine
    from spire_core.dataset.jsonl import JsonlDataset

    after_imports = rss_mb()
    traced_imports = 0
    if traced:
        tracemalloc.start(1)
        traced_imports = tracemalloc.get_traced_memory()[0]
    out = serve.WORK / "out" / "memory-breakdown.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    best: list[object] = [0, None]
    settled = Engine._settled
    done = [0]

    async def counting(self: Engine, ctx: object, outcome: object) -> None:
        await settled(self, ctx, outcome)  # type: ignore[arg-type]
        done[0] += 1
        if traced and done[0] % 100 == 0:
            current = tracemalloc.get_traced_memory()[0]
            if current > best[0]:  # type: ignore[operator]
                best[:] = [current, tracemalloc.take_snapshot()]

    Engine._settled = counting  # type: ignore[method-assign]
    prefixes = (start.rsplit("/", 1)[0] + "/",)
    crawler = Crawler(
        crawl_spire.make_router(prefixes),
        concurrency=16,
        host_limits=HostLimits(max_in_flight=16),
        datasets={crawl_spire.Page: JsonlDataset(crawl_spire.Page, out)},
        robots=False,
    )
    stats = crawler.run([start])
    result: dict[str, object] = {
        "pages": stats.pages,
        "after_imports": after_imports,
        "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "end": rss_mb(),
    }
    if traced and best[1] is not None:
        snapshot = best[1].filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])  # type: ignore[attr-defined]
        kinds: Counter[str] = Counter()
        lines: list[tuple[float, int, str]] = []
        for stat in snapshot.statistics("lineno"):
            frame = stat.traceback[0]
            kinds[kind_of(frame.filename)] += stat.size
            lines.append((stat.size, stat.count, f"{short(frame.filename)}:{frame.lineno}"))
        result.update(
            traced_peak=best[0],
            traced_imports=traced_imports,
            kinds=dict(kinds),
            lines=sorted(lines, reverse=True)[:40],
        )
    return result


def short(path: str) -> str:
    for cut in ("site-packages/", "lib/python3.11/", str(HERE.parent) + "/"):
        if cut in path:
            return path.split(cut, 1)[1]
    return path


def frontier_bytes_per_url(count: int = 50_000) -> float:
    """Traced bytes a queued URL costs in ``Dedup(MemoryFrontier())``, its seen key included."""
    from spire_core.frontier.facades import Dedup
    from spire_core.frontier.memory import MemoryFrontier
    from spire_core.seed import Seed

    seeds = [Seed(f"http://127.0.0.1:8632/scipy/reference/generated/scipy.page{n}.html") for n in range(count)]
    tracemalloc.start(1)
    before = tracemalloc.get_traced_memory()[0]
    frontier = Dedup(MemoryFrontier())
    asyncio.run(frontier.push(seeds))
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # The seeds themselves were made before: add what one costs (its object and URL strings).
    seed_bytes = sum(sys.getsizeof(x) for x in (seeds[0], seeds[0].url)) + (
        sys.getsizeof(seeds[0].unique_key) if seeds[0].unique_key is not seeds[0].url else 0
    )
    return grown / count + seed_bytes


def child(site: str, traced: bool) -> dict[str, object]:
    argv = [sys.executable, __file__, "--child", site] + (["--traced"] if traced else [])
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--site", default="scipy", choices=[site.name for site in serve.SITES])
    parser.add_argument("--top", type=int, default=12, help="lines of the traced peak to list")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        start = next(site.start for site in serve.SITES if site.name == args.child)
        print(json.dumps(crawl(start, args.traced)))
        return
    started = time.perf_counter()
    plain = child(args.site, traced=False)
    traced = child(args.site, traced=True)
    per_url = frontier_bytes_per_url()
    mb = 2**20
    peak, imports = float(plain["peak"]), float(plain["after_imports"])  # type: ignore[arg-type]
    traced_peak = (int(traced["traced_peak"]) - int(traced["traced_imports"])) / mb  # type: ignore[call-overload]
    pages = int(plain["pages"])  # type: ignore[call-overload]
    print(f"spire's crawl of {args.site}: {pages} pages, measured in {time.perf_counter() - started:.0f} s\n")
    print("| what | MB | notes |")
    print("|---|---|---|")
    print(f"| peak resident set (ru_maxrss) | {peak:.0f} | at the end of the crawl {float(plain['end']):.0f} MB |")  # type: ignore[arg-type]
    print(f"| interpreter and imports | {imports:.0f} | resident set before the crawl starts |")
    kinds: dict[str, int] = traced["kinds"]  # type: ignore[assignment]
    import_kind = kinds.pop("imports and code", 0) / mb
    print(
        f"| Python objects of the crawl, at their peak | {traced_peak:.1f} | tracemalloc (started after the "
        "imports), the largest of the snapshots taken each 100 pages; by kind below |"
    )
    for kind, size in sorted(kinds.items(), key=lambda item: -item[1]):
        print(f"| - {kind} | {size / mb:.1f} | |")
    print(f"| - (code compiled during the crawl) | {import_kind:.1f} | lazy imports |")
    rest = peak - imports - traced_peak
    print(
        f"| not Python objects | {rest:.0f} | lxml trees of the pages in flight (16), thread stacks, "
        "what malloc keeps after a free |"
    )
    print(
        f"| frontier, per queued URL | {per_url:.0f} B | Dedup(MemoryFrontier()), its seen key and the Seed "
        f"included: {per_url * pages / mb:.1f} MB for {pages} URLs |"
    )
    print(f"\ntop {args.top} lines of the traced peak")
    for size, count, where in traced["lines"][: args.top]:  # type: ignore[index]
        print(f"{size / mb:8.2f} MB {count:8d} blocks  {where}")


if __name__ == "__main__":
    main()
