"""The ``spire`` command.

    spire crawl URL -o pages.jsonl [--scope host|domain|prefix] [--limit N] [--respect ai-training]
                                   [--ignore-robots] [--agent NAME]
    spire run script.py [--seed URL ...] [--concurrency N] [--frontier crawl.sqlite]

``crawl`` writes one JSON line per kept page and shows live progress (a display on a terminal,
plain periodic lines otherwise); Ctrl-C stops cleanly and keeps what was written. ``run`` loads a
script that defines ``router`` (and optionally ``seeds``) and crawls with it.
"""

from __future__ import annotations

import argparse
import json
import runpy
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import anyio

from spire.site import CrawlError, CrawlPage, SiteCrawl
from spire_core.crawler import Crawler
from spire_core.errors import SpireError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spire", description="A polite, fast, resumable web crawler.")
    commands = parser.add_subparsers(dest="command", required=True)

    site = commands.add_parser("crawl", help="crawl a whole site politely and write its pages as JSON Lines")
    site.add_argument("url")
    site.add_argument("-o", "--output", required=True, help="the JSON Lines file to write ('-' for stdout)")
    site.add_argument("--scope", choices=["host", "domain", "prefix"], default="host")
    site.add_argument("--limit", type=int, default=None, help="stop after this many kept pages")
    site.add_argument("--respect", choices=["robots", "ai-training"], default="robots")
    site.add_argument("--ignore-robots", action="store_true", help="ignore robots.txt and page robots rules")
    site.add_argument("--agent", default="*", help="the robots.txt product token whose rules apply")
    site.add_argument("--progress", choices=["auto", "live", "plain", "none"], default="auto")

    run = commands.add_parser("run", help="run a script that defines `router` (and optionally `seeds`)")
    run.add_argument("script", type=Path)
    run.add_argument("--seed", action="append", default=[], help="a start URL (repeatable)")
    run.add_argument("--concurrency", type=int, default=16)
    run.add_argument("--frontier", type=Path, default=None, help="a SQLite file: the crawl resumes from it")
    run.add_argument("--max-requests", type=int, default=None)
    return parser


class _Progress:
    """Live progress of a crawl: a rich display on a terminal, else a plain line every few seconds."""

    def __init__(self, crawl: SiteCrawl, mode: str, stream: IO[str]) -> None:
        if mode == "auto":
            mode = "live" if stream.isatty() else "plain"
        self.mode = mode
        self.crawl = crawl
        self.stream = stream
        self.errors = 0

    def line(self, queued: int) -> str:
        stats = self.crawl.stats  # read live: a run starts with fresh stats
        return (
            f"pages={stats.pages} requests={stats.requests} queue={queued} errors={self.errors} "
            f"skipped={stats.skipped()} rate={stats.rate:.1f}/s elapsed={stats.elapsed:.0f}s"
        )

    async def run(self, crawl: SiteCrawl) -> None:
        if self.mode == "none":
            return
        if self.mode == "plain":
            while True:
                await anyio.sleep(5)
                print(self.line(await crawl.crawler.frontier.pending()), file=self.stream, flush=True)
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream)
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while True:
                live.update(self.line(await crawl.crawler.frontier.pending()))
                await anyio.sleep(0.25)


async def _crawl(args: argparse.Namespace) -> int:
    crawl = SiteCrawl(
        args.url,
        scope=args.scope,
        limit=args.limit,
        respect=args.respect,
        ignore_robots=args.ignore_robots,
        agent=args.agent,
    )
    if args.output == "-":
        out = anyio.wrap_file(sys.stdout)
    else:
        out = await anyio.open_file(args.output, "w", encoding="utf-8")
    progress = _Progress(crawl, args.progress, sys.stderr)
    try:
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        print("stopping: finishing what is in flight…", file=sys.stderr, flush=True)
                        crawl.shutdown()
                        return

            tg.start_soon(on_signal)
            async with crawl:
                tg.start_soon(progress.run, crawl)
                async for item in crawl:
                    if isinstance(item, CrawlPage):
                        await out.write(json.dumps(item.to_json(), ensure_ascii=False) + "\n")
                        await out.flush()
                    elif isinstance(item, CrawlError):
                        progress.errors += 1
            tg.cancel_scope.cancel()
    finally:
        if args.output != "-":
            await out.aclose()
    print(crawl.stats, file=sys.stderr)
    return 0


def _load_script(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SpireError(f"no such script: {path}")
    return runpy.run_path(str(path), run_name="spire_script")


def _run(args: argparse.Namespace) -> int:
    from spire.router import Router

    namespace = _load_script(args.script)
    router = namespace.get("router")
    if not isinstance(router, Router):
        print(f"{args.script} defines no `router = Router()`", file=sys.stderr)
        return 2
    seeds: Sequence[Any] = args.seed or namespace.get("seeds", [])
    options: dict[str, Any] = {"concurrency": args.concurrency, "max_requests": args.max_requests}
    if args.frontier is not None:
        from spire_core.frontier.sqlite import SqliteFrontier

        options["frontier"] = SqliteFrontier(args.frontier).dedup()
    crawler = Crawler(router, **options)
    previous = signal.signal(signal.SIGINT, lambda *_: crawler.shutdown())
    try:
        started = time.monotonic()
        stats = crawler.run(seeds)
    finally:
        signal.signal(signal.SIGINT, previous)
    print(stats, f"wall={time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0 if stats.failed == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spire`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "crawl":
            return anyio.run(_crawl, args)
        return _run(args)
    except SpireError as exc:
        print(f"spire: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
