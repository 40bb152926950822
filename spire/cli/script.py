"""``spire run script.py`` and ``spire worker --redis URL script.py``: crawl with a script's router."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel

from spire.cli.interrupt import Interrupt
from spire.cli.outputs import add_output_arguments, chosen_output
from spire.cli.progress import Progress, pace, politeness
from spire.cli.protocols import add_protocol_arguments, http_backend
from spire.cli.report import add_report_arguments, publish, reporting
from spire.cli.verdict import FAILED, OK, Verdict, judge_run
from spire.report import Sampler
from spire.router import Router
from spire_core.backend.base import Backend
from spire_core.backend.http import HttpBackend
from spire_core.context import DatasetSource
from spire_core.crawler import Crawler
from spire_core.dataset._files import WriteMode, start_file
from spire_core.dataset.base import Dataset, Storage, StoredDataset
from spire_core.dataset.memory import MemoryDataset
from spire_core.dataset.output import OUTPUT_FORMATS, output_dataset
from spire_core.dataset.sqlite import table_name
from spire_core.errors import ConfigError
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.limits import HostLimits
from spire_core.loop import run as run_loop
from spire_core.recrawl import counted
from spire_core.seed import Seed

__all__ = ["ScriptOutput", "add_parsers", "load_script"]

RUN_EXAMPLES = """examples:
  spire run crawl.py                                   # the script's `seeds`
  spire run crawl.py --seed https://example.com/ -o items.jsonl   # adds to items.jsonl
  spire run crawl.py --seed https://example.com/ -O items.jsonl   # replaces it
  spire run crawl.py --output-dir out/ --format csv    # one file per item type
  spire run crawl.py --frontier crawl.sqlite           # resumable: run it again after a stop
  spire run crawl.py --frontier crawl.sqlite --recrawl # later runs: items of new and changed pages only
  spire run crawl.py --report report.html              # what was crawled, skipped, failed, and why
  spire run crawl.py --dashboard                       # the same, live on http://127.0.0.1:8765/
"""

WORKER_EXAMPLES = """examples:
  spire worker --redis redis://127.0.0.1:6379/0 crawl.py --seed https://example.com/
  spire worker --redis redis://queue.lan:6379/0 crawl.py --name shop    # on every machine
"""


def _script_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", type=Path, help="a Python file that defines `router = Router()` (and maybe `seeds`)")
    parser.add_argument("--seed", action="append", default=[], help="a start URL (repeatable; replaces `seeds`)")
    parser.add_argument("--concurrency", type=int, default=16, help="seeds handled at once (default 16)")


def processes_option(text: str) -> int | Literal["auto"]:
    """``--processes``: a count of 1 or more, or ``auto``."""
    if text == "auto":
        return "auto"
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of processes or 'auto', not {text!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"at least 1 process, not {count}")
    return count


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    run = commands.add_parser(
        "run",
        parents=[common],
        help="run a script that defines `router` (and optionally `seeds`)",
        description="Crawl with the router a script defines. Items its handlers push go to -o FILE "
        "(one item type) or --output-dir (one file per type); without either they are counted only. "
        "Exits 0 when seeds were handled and none failed for good.",
        epilog=RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _script_arguments(run)
    run.add_argument("--frontier", type=Path, default=None, help="a SQLite file: the crawl resumes from it")
    run.add_argument(
        "--recrawl",
        action="store_true",
        help="keep each page's state in --frontier; once its crawl has finished, crawl it again: each page asked "
        "for with its validators, handlers run for new and changed pages only (see docs/recrawl.md)",
    )
    run.add_argument(
        "--max-requests",
        type=int,
        default=None,
        help="stop after this many requests were sent (robots.txt and redirect hops count)",
    )
    run.add_argument(
        "--processes",
        type=processes_option,
        default=1,
        help="worker processes that fetch and handle seeds, sharing one frontier and one set of host limits; "
        "'auto' for one a core (default 1)",
    )
    run.add_argument("--cache", type=Path, default=None, help="a folder: responses are kept there and replayed")
    run.add_argument(
        "--cache-policy", choices=["dev", "http"], default="dev", help="dev: never ask the site again (default)"
    )
    add_protocol_arguments(run)
    add_output_arguments(run, what="the script's items (one item type)", required=False)
    run.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="a folder for one file per item type (book.jsonl), each added to when it exists",
    )
    run.add_argument(
        "--format", choices=[suffix[1:] for suffix in OUTPUT_FORMATS], default="jsonl", help="with --output-dir"
    )
    run.add_argument(
        "--progress",
        choices=["auto", "live", "plain", "none"],
        default="auto",
        help="auto: a live display on a terminal, plain lines otherwise (default); none: no progress",
    )
    run.add_argument("--progress-every", type=float, default=5.0, help="seconds between plain progress lines")
    add_report_arguments(run)
    run.set_defaults(command_fn=run_script)

    worker = commands.add_parser(
        "worker",
        parents=[common],
        help="crawl a script's router as one of many workers sharing Redis",
        description="Crawl with a script's router and a deduplicating RedisFrontier that other workers share. "
        "Ends when the shared crawl is done; on SIGINT or SIGTERM hands its leases back first.",
        epilog=WORKER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _script_arguments(worker)
    worker.add_argument("--redis", required=True, help="the Redis server's URL: redis://host:6379/0")
    worker.add_argument("--name", default="spire", help="the crawl's name: workers with the same one share it")
    worker.add_argument(
        "--lease-ttl",
        type=float,
        default=60.0,
        help="seconds before a silent (killed) worker's pages go to the others; leases of pages being "
        "worked on are renewed, so a short TTL is safe for slow pages (default 60)",
    )
    worker.set_defaults(command_fn=run_worker)

    status = commands.add_parser(
        "status",
        parents=[common],
        help="show a Redis crawl's progress across its workers",
        description="Queued, delayed, in flight, done and failed seeds, the hosts next in line with their "
        "waits, and the live workers of a crawl on Redis.",
        epilog="examples:\n  spire status --redis redis://127.0.0.1:6379/0 --name docs\n"
        "  spire status --redis redis://127.0.0.1:6379/0 --name docs --dashboard   # the fleet's report, live\n"
        "  spire status --redis redis://127.0.0.1:6379/0 --name docs --report fleet.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("--redis", required=True, help="the Redis server's URL: redis://host:6379/0")
    status.add_argument("--name", default="spire", help="the crawl's name")
    status.add_argument("--hosts", type=int, default=10, help="how many hosts next in line to show (default 10)")
    add_report_arguments(status)
    status.set_defaults(command_fn=run_status)


def load_script(path: Path) -> dict[str, Any]:
    """Run the script as the module ``spire_script`` and return its globals.

    The module is registered in ``sys.modules``, so what it defines (an item model, an error) can
    be pickled by name: items cross from worker processes (``--processes``) that way.
    """
    if not path.is_file():
        raise ConfigError(f"no such script: {path}")
    spec = importlib.util.spec_from_file_location(SCRIPT_MODULE, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path} cannot be loaded as a Python script")
    module = importlib.util.module_from_spec(spec)
    sys.modules[SCRIPT_MODULE] = module
    spec.loader.exec_module(module)
    return vars(module)


#: The module name a script runs under.
SCRIPT_MODULE = "spire_script"


def _router_and_seeds(args: argparse.Namespace) -> tuple[Router, list[Any], HostLimits | None]:
    """The script's ``router``, its start seeds (``--seed`` first, else the script's ``seeds``) and
    its ``host_limits`` if it sets them."""
    namespace = load_script(args.script)
    router = namespace.get("router")
    if not isinstance(router, Router):
        raise ConfigError(f"{args.script} defines no `router = Router()`")
    limits = namespace.get("host_limits")
    if limits is not None and not isinstance(limits, HostLimits):
        raise ConfigError(f"{args.script}: host_limits must be a HostLimits, not {type(limits).__name__}")
    seeds = args.seed or namespace.get("seeds", [])
    return router, [seeds] if isinstance(seeds, str) else list(seeds), limits


class ScriptOutput:
    """The dataset factory for ``spire run``: ``-o FILE`` for one item type, ``--output-dir`` for many.

    With ``-o``, the file belongs to the first item type that pushes an item; a second type pushing
    stops the crawl with a message naming ``--output-dir``. ``start()`` begins the file as the crawl starts.
    """

    def __init__(self, output: str | None, output_dir: Path | None, format: str, *, mode: WriteMode) -> None:
        if output is not None and output_dir is not None:
            raise ConfigError("give -o FILE (or -O FILE) or --output-dir DIR, not both")
        self.output = output
        self.output_dir = output_dir
        self.format = format
        self.mode = mode
        self.owner: type[BaseModel] | None = None

    def start(self) -> None:
        """The crawl starts: ``-O`` empties the file now, so a crawl that keeps nothing leaves no old rows
        (and a command refused before, a port in use say, leaves the file as it was)."""
        if self.output is not None and self.output != "-":
            start_file(self.output, self.mode)

    def __call__(self, model: type[BaseModel]) -> Dataset[Any]:
        if self.output is not None:
            return StoredDataset(model, _OutputFile(self, self.output, model))
        if self.output_dir is not None:
            return output_dataset(model, self.output_dir / f"{table_name(model)}.{self.format}")
        return MemoryDataset(model)

    def claim(self, path: str, model: type[BaseModel]) -> Storage:
        """The storage of the ``-o`` file ``path`` for ``model``, if no other item type has it."""
        if self.owner is not None and self.owner is not model:
            raise ConfigError(
                f"the script pushes {self.owner.__name__} and {model.__name__} items: "
                "-o holds one item type; use --output-dir DIR for one file per type"
            )
        self.owner = model
        return output_dataset(model, path, mode=self.mode).storage


class _OutputFile:
    """The ``-o`` file, opened for the item type that first appends to it."""

    def __init__(self, output: ScriptOutput, path: str, model: type[BaseModel]) -> None:
        self._output = output
        self._path = path
        self._model = model
        self._storage: Storage | None = None

    async def append(self, rows: list[dict[str, Any]]) -> None:
        if self._storage is None:
            self._storage = self._output.claim(self._path, self._model)
        await self._storage.append(rows)

    async def rows(self) -> AsyncIterator[dict[str, Any]]:
        if self._storage is not None:
            async for row in self._storage.rows():
                yield row

    async def aclose(self) -> None:
        if self._storage is not None:
            await self._storage.aclose()


def run_script(args: argparse.Namespace) -> int | Verdict:
    if args.recrawl and args.frontier is None:
        raise ConfigError("--recrawl keeps page states in the crawl's frontier file: give --frontier FILE")
    router, seeds, limits = _router_and_seeds(args)
    store: SqliteFrontier | None = None
    resuming = args.frontier is not None and args.frontier.exists()
    output, mode = chosen_output(args, resuming=resuming)
    script_output = ScriptOutput(output, args.output_dir, args.format, mode=mode)
    datasets: ScriptOutput | DatasetSource = script_output
    if args.frontier is not None:
        store = SqliteFrontier(args.frontier)
        if output is None and args.output_dir is None:
            # Items go to tables of the same file, in the transaction of their page's report: exactly once.
            datasets = store.dataset
    backend: Backend | None = http_backend(args)
    if args.cache is not None:
        # Imported here for start-up time: only a run with --cache needs the cache (and sqlite3).
        from spire_core.backend.cache import CachingBackend

        backend = CachingBackend(backend or HttpBackend(), args.cache, policy=args.cache_policy)
    crawler = Crawler(
        router,
        concurrency=args.concurrency,
        max_requests=args.max_requests,
        host_limits=limits,
        frontier=store,
        datasets=datasets,
        backend=backend,
        processes=args.processes,
        recrawl=args.recrawl,
    )
    progress = Progress(
        f"spire run {args.script}",
        stats=lambda: crawler.stats,
        pending=crawler.frontier.pending,
        failures=lambda: crawler.failures,
        mode=args.progress,
        stream=sys.stderr,
        every=args.progress_every,
        limits=politeness(
            crawler.host_limits,
            robots=crawler.robots_policy is not None,
            change="host_limits = HostLimits(...) to change",
        ),
    )

    async def run() -> int | Verdict:
        async with contextlib.AsyncExitStack() as stack:
            if store is not None:
                await stack.enter_async_context(store)  # closed (its lock released) when the crawl ends
            settings = {
                "script": str(args.script),
                "seeds": ", ".join(seed.url if isinstance(seed, Seed) else str(seed) for seed in seeds[:5]),
                "concurrency": str(args.concurrency),
                "politeness": pace(crawler.host_limits, robots=crawler.robots_policy is not None),
                "frontier": str(args.frontier) if args.frontier is not None else "memory (not resumable)",
            }
            async with reporting(args, crawler, settings=settings, title=progress.title) as sampler:
                script_output.start()
                verdict = await _crawl(crawler, seeds, progress, True, sampler)
            if args.recrawl and crawler.ledger is not None:
                summary = await crawler.ledger.summary(samples=0)
                print(f"changes: {counted(summary.changes)}", file=sys.stderr, flush=True)
            return verdict

    return run_loop(run)


def run_worker(args: argparse.Namespace) -> int | Verdict:
    router, seeds, limits = _router_and_seeds(args)
    limits = limits if limits is not None else HostLimits.polite()
    if args.lease_ttl <= 0:
        raise ConfigError(f"--lease-ttl must be positive, not {args.lease_ttl}")
    try:  # here, not at the top: redis is an optional extra (spire-crawl[redis])
        from spire_core.frontier.redis import RedisFrontier
    except ImportError as exc:
        raise ConfigError(str(exc)) from None

    async def work() -> int | Verdict:
        # Opened, crawled and closed in one event loop: the Redis client belongs to the loop it
        # connected in. Closing hands back any lease still held. The host limits go to Redis too:
        # each process's own gate alone would let N workers send N times a host's cap.
        frontier = RedisFrontier(args.redis, name=args.name, lease_ttl=args.lease_ttl, host_limits=limits)
        async with frontier, frontier.keep_alive():
            crawler = Crawler(
                router, concurrency=args.concurrency, frontier=frontier, host_limits=limits, datasets=frontier.dataset
            )
            return await _crawl(crawler, seeds, None, False)

    return run_loop(work)  # asyncio (uvloop's too): redis-py's client runs on nothing else


def run_status(args: argparse.Namespace) -> int:
    try:  # here, not at the top: redis is an optional extra (spire-crawl[redis])
        from spire_core.frontier.redis import RedisFrontier
    except ImportError as exc:
        raise ConfigError(str(exc)) from None

    async def show() -> int:
        async with RedisFrontier(args.redis, name=args.name) as frontier:
            if args.report is not None or args.dashboard is not None:
                if args.report is not None and args.dashboard is not None:
                    raise ConfigError("spire status takes --report FILE or --dashboard [PORT], not both")
                frontier.open_ledger("full")  # read the fleet's: every worker writes it
                assert frontier.ledger is not None  # a full ledger has a view
                return await publish(
                    frontier.ledger,
                    output=args.report,
                    port=args.dashboard,
                    host=args.dashboard_host,
                    settings={"redis": args.redis, "crawl name": args.name},
                    title=f"spire fleet {args.name!r}",
                )
            status = await frontier.status(hosts=args.hosts)
        print("\n".join(status.lines()))
        return OK

    return anyio.run(show)


async def _crawl(
    crawler: Crawler, seeds: list[Any], progress: Progress | None, alone: bool, sampler: Sampler | None = None
) -> int | Verdict:
    """Crawl, watching for signals; ``alone``: this process is the whole crawl (not one of many workers);
    ``sampler`` watches it for its report."""
    interrupt = Interrupt()
    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(interrupt.watch, crawler.shutdown, tg.cancel_scope.cancel)
        if progress is not None:
            tg.start_soon(progress.run)
        if sampler is not None:
            tg.start_soon(sampler.run)
        await crawler.arun(seeds)
        tg.cancel_scope.cancel()
    stats = crawler.stats  # a second Ctrl-C cancels ``arun``: read what it counted so far
    print(stats, f"wall={time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    if interrupt.exit_status is not None:
        return interrupt.exit_status
    if alone:
        return judge_run(stats, crawler.failures)
    return Verdict(FAILED, f"{stats.failed} seeds failed for good (summary above)") if stats.failed else OK
