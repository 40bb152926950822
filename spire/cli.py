"""The ``spire`` command.

    spire crawl URL -o pages.jsonl [--scope host|domain|prefix] [--limit N] [--respect ai-training]
                                   [--ignore-robots] [--agent NAME] [--max-in-flight N] [--per-second R]
                                   [--markdown]
    spire run script.py [--seed URL ...] [--concurrency N] [--frontier crawl.sqlite] [--cache DIR]
    spire worker --redis URL script.py [--name CRAWL] [--seed URL ...] [--concurrency N]

``crawl`` writes one JSON line per kept page and shows live progress (a display on a terminal,
plain periodic lines otherwise), then the stats line. Ctrl-C stops cleanly: what is in flight
fails as shut down, every line written stays complete, and the stats line is printed; a second
Ctrl-C stops at once. ``run`` loads a script that defines ``router`` (and optionally ``seeds``)
and crawls with it. ``worker`` loads the same kind of script and crawls with a deduplicating
``RedisFrontier`` that other workers share; it ends when the shared crawl is done, and on SIGINT
or SIGTERM hands its leases back before it exits.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import runpy
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc

from spire.router import Router
from spire.site import CrawlPage, SiteCrawl, polite_limits
from spire_core.crawler import Crawler
from spire_core.errors import SpireError
from spire_core.limits import HostLimits

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
    site.add_argument("--max-in-flight", type=int, default=None, help="requests at once per host (default 1)")
    site.add_argument(
        "--per-second", type=float, default=None, help="requests a second per host (default 1; 0: no limit)"
    )
    site.add_argument("--progress", choices=["auto", "live", "plain", "none"], default="auto")
    site.add_argument("--markdown", action="store_true", help="add each page's main content as Markdown")
    site.add_argument("--progress-every", type=float, default=5.0, help="seconds between plain progress lines")

    run = commands.add_parser("run", help="run a script that defines `router` (and optionally `seeds`)")
    run.add_argument("script", type=Path)
    run.add_argument("--seed", action="append", default=[], help="a start URL (repeatable)")
    run.add_argument("--concurrency", type=int, default=16)
    run.add_argument("--frontier", type=Path, default=None, help="a SQLite file: the crawl resumes from it")
    run.add_argument("--max-requests", type=int, default=None)
    run.add_argument("--cache", type=Path, default=None, help="a folder: responses are kept there and replayed")
    run.add_argument("--cache-policy", choices=["dev", "http"], default="dev", help="dev: never ask again (default)")

    worker = commands.add_parser("worker", help="crawl a script's router as one of many workers sharing Redis")
    worker.add_argument("script", type=Path)
    worker.add_argument("--redis", required=True, help="the Redis server's URL: redis://host:6379/0")
    worker.add_argument("--name", default="spire", help="the crawl's name: workers with the same one share it")
    worker.add_argument("--seed", action="append", default=[], help="a start URL (repeatable; queued once)")
    worker.add_argument("--concurrency", type=int, default=16)
    return parser


class _Progress:
    """Live progress of a crawl: a display on a terminal, else a plain line every few seconds."""

    def __init__(self, crawl: SiteCrawl, mode: str, stream: IO[str], every: float) -> None:
        if mode == "auto":
            mode = "live" if stream.isatty() else "plain"
        self.mode = mode
        self.crawl = crawl
        self.stream = stream
        self.every = every
        self.errors = 0

    async def line(self) -> str:
        stats = self.crawl.stats  # read live: a run starts with fresh stats
        return (
            f"pages={stats.pages} queue={await self.crawl.pending()} errors={self.errors} "
            f"requests={stats.requests} rate={stats.rate:.1f}/s elapsed={stats.elapsed:.0f}s"
        )

    async def run(self) -> None:
        if self.mode == "none":
            return
        if self.mode == "plain":
            while True:
                await anyio.sleep(self.every)
                print("progress", await self.line(), file=self.stream, flush=True)
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        console = Console(file=self.stream)
        title = Text.assemble(("spire crawl ", "bold"), (" ".join(self.crawl.seed_urls), "cyan"))
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while True:
                live.update(Text.assemble(title, "\n", await self.line()))
                await anyio.sleep(0.25)


def _host_limits(args: argparse.Namespace) -> HostLimits | None:
    if args.max_in_flight is None and args.per_second is None:
        return None
    limits = polite_limits()
    if args.max_in_flight is not None:
        if args.max_in_flight < 1:
            raise SpireError("--max-in-flight must be at least 1")
        limits = dataclasses.replace(limits, max_in_flight=args.max_in_flight)
    if args.per_second is not None:
        if args.per_second < 0:
            raise SpireError("--per-second must be 0 (no limit) or more")
        limits = dataclasses.replace(limits, per_second=args.per_second or None)
    return limits


async def _on_interrupt(
    first: Callable[[], None], second: Callable[[], None], received: list[int] | None = None
) -> None:
    """Call ``first`` on the first Ctrl-C (or SIGTERM) and ``second`` on the next; note each in ``received``."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        handlers = [first, second]
        async for signum in signals:
            if received is not None:
                received.append(signum)
            handlers.pop(0)()
            if not handlers:
                return


async def _crawl(args: argparse.Namespace) -> int:
    crawl = SiteCrawl(
        args.url,
        scope=args.scope,
        limit=args.limit,
        respect=args.respect,
        ignore_robots=args.ignore_robots,
        agent=args.agent,
        host_limits=_host_limits(args),
    )
    progress = _Progress(crawl, args.progress, sys.stderr, args.progress_every)
    interrupted = False
    out = (
        anyio.wrap_file(sys.stdout) if args.output == "-" else await anyio.open_file(args.output, "w", encoding="utf-8")
    )
    try:
        async with anyio.create_task_group() as tg:

            def stop() -> None:
                nonlocal interrupted
                interrupted = True
                print("spire: stopping (Ctrl-C again to stop at once)", file=sys.stderr, flush=True)
                crawl.shutdown()

            tg.start_soon(_on_interrupt, stop, tg.cancel_scope.cancel)
            tg.start_soon(progress.run)
            async with crawl:
                async for item in crawl:
                    if isinstance(item, CrawlPage):
                        row = item.to_json()
                        if args.markdown:
                            row["markdown"] = await _markdown(item)
                        # One write and a flush per page: an interrupted crawl leaves only whole lines.
                        await out.write(json.dumps(row, ensure_ascii=False) + "\n")
                        await out.flush()
                    else:
                        progress.errors += 1
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if args.output == "-":
                await out.flush()
            else:
                await out.aclose()
    print(crawl.stats, file=sys.stderr, flush=True)
    return 130 if interrupted else 0


async def _markdown(page: CrawlPage) -> str:
    """The page's main content as Markdown (the markdown extra), off the event loop."""
    from spire.markdown import to_markdown

    return await anyio.to_thread.run_sync(lambda: to_markdown(page.html, url=page.url))


def _load_script(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SpireError(f"no such script: {path}")
    return runpy.run_path(str(path), run_name="spire_script")


def _load_router(args: argparse.Namespace) -> tuple[Router, Sequence[Any]] | None:
    """The script's ``router`` and its start seeds (``--seed`` first, else the script's ``seeds``)."""
    namespace = _load_script(args.script)
    router = namespace.get("router")
    if not isinstance(router, Router):
        print(f"{args.script} defines no `router = Router()`", file=sys.stderr)
        return None
    return router, args.seed or namespace.get("seeds", [])


def _run(args: argparse.Namespace) -> int:
    loaded = _load_router(args)
    if loaded is None:
        return 2
    router, seeds = loaded
    options: dict[str, Any] = {"concurrency": args.concurrency, "max_requests": args.max_requests}
    if args.frontier is not None:
        from spire_core.frontier.sqlite import SqliteFrontier

        options["frontier"] = SqliteFrontier(args.frontier).dedup()
    if args.cache is not None:
        from spire_core.backend.cache import CachingBackend
        from spire_core.backend.http import HttpBackend

        options["backend"] = CachingBackend(HttpBackend(), args.cache, policy=args.cache_policy)
    crawler = Crawler(router, **options)

    async def crawl() -> int:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_on_interrupt, crawler.shutdown, tg.cancel_scope.cancel)
            started = time.monotonic()
            await crawler.arun(seeds)
            tg.cancel_scope.cancel()
        stats = crawler.stats  # a second Ctrl-C cancels ``arun``: read what it counted so far
        print(stats, f"wall={time.monotonic() - started:.1f}s", file=sys.stderr)
        return 0 if stats.failed == 0 else 1

    return anyio.run(crawl)


def _worker(args: argparse.Namespace) -> int:
    loaded = _load_router(args)
    if loaded is None:
        return 2
    router, seeds = loaded
    try:
        from spire_core.frontier.redis import RedisFrontier
    except ImportError as exc:
        raise SpireError(str(exc)) from None
    received: list[int] = []

    async def work() -> int:
        # Opened, crawled and closed in one event loop: the Redis client belongs to the loop it
        # connected in. Closing hands back any lease still held.
        async with RedisFrontier(args.redis, name=args.name) as frontier:
            crawler = Crawler(router, concurrency=args.concurrency, frontier=frontier.dedup())
            async with anyio.create_task_group() as tg:
                tg.start_soon(_on_interrupt, crawler.shutdown, tg.cancel_scope.cancel, received)
                started = time.monotonic()
                await crawler.arun(seeds)
                tg.cancel_scope.cancel()
        stats = crawler.stats
        print(stats, f"wall={time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
        if received:
            return 128 + received[0]  # the shell's convention for "ended by this signal"
        return 0 if stats.failed == 0 else 1

    return anyio.run(work)  # asyncio: redis-py's client runs on nothing else


def _spire_error(group: BaseExceptionGroup[Any]) -> SpireError | None:
    """The first error in a task group's ``group`` when all of them are ``SpireError``s, else ``None``."""
    found: list[BaseException] = []

    def leaves(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                leaves(inner)
        else:
            found.append(error)

    leaves(group)
    errors = [error for error in found if isinstance(error, SpireError)]
    return errors[0] if errors and len(errors) == len(found) else None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spire`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        try:
            if args.command == "crawl":
                return anyio.run(_crawl, args)
            if args.command == "worker":
                return _worker(args)
            return _run(args)
        except BaseExceptionGroup as group:
            # A crawl's task group wraps what stopped it; a spire error (Redis lost) gets its message.
            error = _spire_error(group)
            if error is None:
                raise
            raise error from group
    except SpireError as exc:
        print(f"spire: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
