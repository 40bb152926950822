"""``spire crawl URL -o FILE``: the polite crawl of one site, one record per kept page."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from pathlib import Path

import anyio
from pydantic import BaseModel

from spire.cli.interrupt import Interrupt
from spire.cli.outputs import add_output_arguments, chosen_output, write_failure
from spire.cli.progress import Progress, pace, politeness
from spire.cli.protocols import add_protocol_arguments, http_backend
from spire.cli.report import add_report_arguments, reporting
from spire.cli.script import processes_option
from spire.cli.verdict import OK, UNWRITABLE, Verdict, is_complete, judge_site
from spire.site import CrawlPage, SiteCrawl, polite_limits
from spire.site.limits import ROBOTS_RETRY_DELAYS
from spire_core.dataset._files import WriteMode
from spire_core.dataset.base import StoredDataset
from spire_core.dataset.output import output_dataset
from spire_core.errors import ConfigError, ContentLimitError, DatasetError
from spire_core.frontier.base import Frontier
from spire_core.limits import HostLimits
from spire_core.log import logger
from spire_core.loop import run as run_loop
from spire_core.recrawl import counted, export_changes
from spire_core.session.timeouts import Timeouts

__all__ = ["MarkdownPageRecord", "PageRecord", "add_parser", "crawl"]

EXAMPLES = """examples:
  spire crawl https://example.com/ -o pages.jsonl
  spire crawl https://example.com/docs/ --scope prefix --limit 500 -o out/docs.csv
  spire crawl https://example.com/ -o - | head -3              # JSON Lines on stdout
  spire crawl https://example.com/ -O pages.jsonl             # replace the file an earlier crawl wrote
  spire crawl https://example.com/ -o pages.jsonl --state crawl.sqlite   # run again to resume
  spire crawl https://example.com/ --state crawl.sqlite --recrawl -o changes.jsonl   # later: what changed
  spire crawl https://example.com/ -o pages.jsonl --markdown   # each page's main content as Markdown
  spire crawl https://example.com/ -o pages.jsonl --timeout 5  # give up on a page after 5 s a part
  spire crawl https://example.com/ -o pages.jsonl --report report.html   # what was crawled, skipped, failed, why
  spire crawl https://example.com/ -o pages.jsonl --dashboard  # the same, live on http://127.0.0.1:8765/
"""

log = logger("cli")


class PageRecord(BaseModel):
    """One kept page as ``spire crawl`` writes it."""

    url: str
    depth: int
    status: int
    title: str | None
    text: str
    meta: dict[str, str]


class MarkdownPageRecord(PageRecord):
    """A kept page with its main content as Markdown (``spire crawl --markdown``)."""

    #: ``None`` for a page past the Markdown converter's bounds (a warning names it).
    markdown: str | None


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    site = commands.add_parser(
        "crawl",
        parents=[common],
        help="crawl a whole site politely and write its pages",
        description="Crawl one site politely (robots.txt, sitemaps, canonical pages, near-duplicates) "
        "and write one record per kept page. Exits 0 when at least one page was kept; otherwise 1 with "
        "the reason (host down, an error status, robots.txt unreachable, nothing crawled).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    site.add_argument("url", help="the start page; the scope is taken from it")
    add_output_arguments(site, what="the pages, one record each", required=True)
    site.add_argument(
        "--scope",
        choices=["host", "domain", "prefix"],
        default="host",
        help="which links to follow: the start page's host (default), its registrable domain, or its path prefix",
    )
    site.add_argument("--limit", type=int, default=None, help="stop after this many kept pages")
    site.add_argument(
        "--respect",
        choices=["robots", "ai-training"],
        default="robots",
        help="robots: obey robots.txt and page robots rules (default); ai-training: also obey AI-use opt-outs",
    )
    site.add_argument("--ignore-robots", action="store_true", help="ignore robots.txt and page robots rules")
    site.add_argument("--agent", default="*", help="the robots.txt product token whose rules apply (default '*')")
    site.add_argument("--max-in-flight", type=int, default=None, help="requests at once per host (default 1)")
    site.add_argument(
        "--per-second", type=float, default=None, help="requests a second per host (default 1; 0: no limit)"
    )
    site.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="bound connecting, each read and each body (the whole request gets twice it; default 10 s to "
        "connect, 30 a read, 60 a body, 120 a request)",
    )
    site.add_argument(
        "--body-timeout", type=float, default=None, metavar="SECONDS", help="bound a whole body from its first byte"
    )
    site.add_argument(
        "--request-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="bound a whole request, from the wait for its host's slot to its last byte",
    )
    site.add_argument(
        "--robots-retry-delays",
        default=None,
        metavar="SECONDS,...",
        help="waits between tries of an unreachable robots.txt (default 1,2,4,8)",
    )
    site.add_argument(
        "--progress",
        choices=["auto", "live", "plain", "none"],
        default="auto",
        help="auto: a live display on a terminal, plain lines otherwise (default); none: no progress",
    )
    site.add_argument(
        "--progress-every", type=float, default=5.0, help="seconds between plain progress lines (default 5)"
    )
    site.add_argument(
        "--state",
        type=Path,
        default=None,
        metavar="FILE",
        help="a SQLite file for the crawl's queue, seen set and robots.txt waits: the same command run again "
        "after Ctrl-C or kill -9 resumes there and appends to -o, writing no page twice",
    )
    site.add_argument(
        "--recrawl",
        action="store_true",
        help="crawl again what the finished crawl in --state kept, each page with its validators (a 304 costs "
        "no body), and write the change feed to -o instead of pages: one JSON line a page, new, changed, "
        "unchanged, gone or failed (see docs/recrawl.md); run again after Ctrl-C or kill -9 to resume",
    )
    site.add_argument("--markdown", action="store_true", help="add each page's main content as Markdown")
    add_protocol_arguments(site)
    add_report_arguments(site)
    site.add_argument(
        "--processes",
        type=processes_option,
        default=1,
        help="worker processes that fetch and read pages; robots.txt, the limits and the kept pages stay "
        "exact; 'auto' for one a core (default 1)",
    )
    site.set_defaults(command_fn=crawl)


def _host_limits(args: argparse.Namespace) -> HostLimits | None:
    if args.max_in_flight is None and args.per_second is None:
        return None
    limits = polite_limits()
    if args.max_in_flight is not None:
        if args.max_in_flight < 1:
            raise ConfigError("--max-in-flight must be at least 1")
        limits = dataclasses.replace(limits, max_in_flight=args.max_in_flight)
    if args.per_second is not None:
        if args.per_second < 0:
            raise ConfigError("--per-second must be 0 (no limit) or more")
        limits = dataclasses.replace(limits, per_second=args.per_second or None)
    return limits


def _timeouts(args: argparse.Namespace) -> Timeouts | None:
    """The timeout options as the crawl's ``Timeouts`` (``None``: its defaults)."""
    if args.timeout is None and args.body_timeout is None and args.request_timeout is None:
        return None
    timeouts = Timeouts.of(args.timeout) if args.timeout is not None else Timeouts()
    if args.body_timeout is not None:
        timeouts = dataclasses.replace(timeouts, body=args.body_timeout)
    if args.request_timeout is not None:
        timeouts = dataclasses.replace(timeouts, request=args.request_timeout)
    return timeouts


def _delays(text: str | None) -> tuple[float, ...]:
    if text is None:
        return ROBOTS_RETRY_DELAYS
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"--robots-retry-delays takes seconds separated by commas, not {text!r}") from None


def crawl(args: argparse.Namespace) -> int | Verdict:
    return run_loop(_crawl, args)


async def _crawl(args: argparse.Namespace) -> int | Verdict:
    if "://" not in args.url:
        raise ConfigError(f"the start URL needs a scheme: did you mean 'http://{args.url}'?")
    if args.recrawl:
        _check_recrawl(args)
    resuming = args.state is not None and args.state.exists() and not args.recrawl
    path, mode = chosen_output(args, resuming=resuming)  # a resumed crawl adds to what its first run wrote
    assert path is not None  # argparse requires -o or -O
    if args.recrawl:
        return await _recrawl(args, path, append=mode == "append")
    model: type[PageRecord] = MarkdownPageRecord if args.markdown else PageRecord
    async with contextlib.AsyncExitStack() as stack:
        frontier = None
        if args.state is not None:
            # Imported here for start-up time: only a crawl with --state needs sqlite3.
            from spire_core.frontier.sqlite import SqliteFrontier

            frontier = await stack.enter_async_context(SqliteFrontier(args.state))
        # -O empties the file only once every option proved good (the dashboard's port too): see _run_site.
        output = _Output(model, path, mode, resuming=resuming)
        return await _run_site(args, _site(args, frontier), output, resuming=resuming)


@dataclasses.dataclass(frozen=True, slots=True)
class _Output:
    """Where a crawl writes its pages, opened (and with ``-O`` emptied) only when the crawl starts."""

    model: type[PageRecord]
    path: str
    mode: WriteMode
    resuming: bool

    async def open(self) -> tuple[StoredDataset[PageRecord], set[str]]:
        """The dataset, and the URLs a resumed crawl's file holds already."""
        out: StoredDataset[PageRecord] = output_dataset(self.model, self.path, mode=self.mode)
        written = {record.url async for record in out} if self.resuming and self.path != "-" else set()
        return out, written


def _check_recrawl(args: argparse.Namespace) -> None:
    """``--recrawl`` needs the state of a crawl to recrawl, and writes a feed of JSON lines."""
    if args.state is None:
        raise ConfigError("--recrawl crawls again what a crawl kept in its state: give --state FILE")
    path = args.output if args.output is not None else args.overwrite_output
    if path != "-" and not str(path).lower().endswith(".jsonl"):
        raise ConfigError(f"--recrawl writes the change feed as JSON Lines: give -o FILE.jsonl, not {path}")
    if args.markdown:
        raise ConfigError("--recrawl writes the change feed, which holds no page content: leave out --markdown")


async def _recrawl(args: argparse.Namespace, path: str, *, append: bool) -> int | Verdict:
    """``spire crawl URL --state FILE --recrawl -o changes.jsonl``: the recrawl, then its change feed."""
    from spire_core.frontier.sqlite import SqliteFrontier  # start-up time: only --state needs sqlite3

    async with SqliteFrontier(args.state) as frontier:
        site = _site(args, frontier, recrawl=True)
        verdict = await _run_site(args, site, None, resuming=False)
        if not (await frontier.generation()).finished:
            # Stopped before its end (Ctrl-C): the resumed run writes the whole feed, each page once.
            print(
                "changes: none written, the recrawl stopped before its end: the same command resumes it "
                "and writes its whole feed",
                file=sys.stderr,
                flush=True,
            )
            return verdict
        ledger = site.crawler.ledger
        assert ledger is not None  # a site crawl keeps its ledger
        summary = await ledger.summary(samples=0)
        try:
            written = await export_changes(ledger, path, append=append)
        except OSError as exc:
            return Verdict(
                UNWRITABLE,
                f"cannot write the change feed to {path}: {exc.strerror or exc}; the recrawl is done and its state "
                f"keeps the feed: `spire why --state {args.state} --changes FILE` writes it",
            )
    where = "standard output" if path == "-" else path
    print(f"changes: {counted(summary.changes)}; {written} lines to {where}", file=sys.stderr, flush=True)
    if isinstance(verdict, Verdict) and verdict.status != OK and written and summary.changes.get("failed", 0) < written:
        return OK  # every page was looked at again: a recrawl of pages that all answered 304 kept none anew
    return verdict


def _site(args: argparse.Namespace, frontier: Frontier | None, *, recrawl: bool = False) -> SiteCrawl:
    """The site crawl the options describe, on ``frontier``."""
    return SiteCrawl(
        args.url,
        scope=args.scope,
        limit=args.limit,
        respect=args.respect,
        ignore_robots=args.ignore_robots,
        agent=args.agent,
        host_limits=_host_limits(args),
        robots_retry_delays=_delays(args.robots_retry_delays),
        timeouts=_timeouts(args),
        backend=http_backend(args, timeout=_timeouts(args)),
        frontier=frontier,
        processes=args.processes,
        recrawl=recrawl,
    )


async def _markdown(page: CrawlPage) -> str | None:
    """The page's main content as Markdown, in a thread that stops when the crawl does; ``None`` (with a
    warning naming the page and the limit) for a page past the converter's bounds."""
    # Imported here for start-up time: the converter (trafilatura) is heavy, and only --markdown needs it.
    from spire.markdown import ato_markdown

    try:
        return await ato_markdown(page.html, url=page.url)
    except ContentLimitError as exc:
        log.warning("no Markdown for %s: %s", page.url, exc)
        return None


async def _run_site(
    args: argparse.Namespace,
    site: SiteCrawl,
    output: _Output | None,
    *,
    resuming: bool,
) -> int | Verdict:
    """Run ``site``, writing each kept page to ``output`` (``None``: a recrawl, whose feed is written after).

    ``output`` is opened once the dashboard listens, just before the crawl starts: a mistake found
    before (a port in use) leaves the file ``-O`` would replace as it was.
    """
    seed_url = site.seed_urls[0]
    progress = Progress(
        f"spire crawl {seed_url}",
        stats=lambda: site.stats,
        pending=site.pending,
        failures=lambda: site.crawler.failures,
        mode=args.progress,
        stream=sys.stderr,
        every=args.progress_every,
        limits=politeness(
            site.crawler.host_limits, robots=not args.ignore_robots, change="--per-second, --max-in-flight to change"
        ),
    )
    interrupt = Interrupt()
    seed_error: BaseException | None = None
    closed_pipe = False
    write_error: BaseException | None = None
    kept = written_now = 0
    out_path = args.output if args.output is not None else args.overwrite_output
    out: StoredDataset[PageRecord] | None = None
    written: set[str] = set()
    try:
        async with (
            reporting(args, site.crawler, settings=_settings(args, site), title=progress.title) as sampler,
            anyio.create_task_group() as tg,
        ):
            if output is not None:
                out, written = await output.open()
            tg.start_soon(interrupt.watch, site.shutdown, tg.cancel_scope.cancel)
            tg.start_soon(progress.run)
            if sampler is not None:
                tg.start_soon(sampler.run)
            async with site:
                async for item in site:
                    if isinstance(item, CrawlPage):
                        if out is None:
                            kept += 1  # a recrawl's new or changed page: the change feed says it, after
                            continue
                        if item.url in written:
                            kept += 1
                            continue  # written by the run this one resumes (it was in flight at the kill)
                        fields = item.to_json()
                        if args.markdown:
                            fields["markdown"] = await _markdown(item)
                        record = out.model.model_validate(fields)
                        try:
                            # One push per page: an interrupted crawl leaves only whole records.
                            await out.push(record)
                        except BrokenPipeError:
                            closed_pipe = True  # `| head` has what it wanted: stop quietly
                            _silence_stdout()
                            site.shutdown()
                            break
                        except (DatasetError, OSError) as exc:  # a full disk, a folder gone read-only
                            write_error = exc
                            site.shutdown()
                            break
                        kept += 1
                        written_now += 1
                    elif item.url == seed_url:
                        seed_error = item.error
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            try:
                if out is not None:
                    await out.aclose()
            except (DatasetError, OSError) as exc:
                write_error = write_error or exc
    if out_path != "-" and out is not None:
        # `items=` counts a handler's dataset pushes; the pages go to -o from here, so say how many.
        print(_wrote(written_now, str(out_path)), file=sys.stderr, flush=True)
    print(site.stats, file=sys.stderr, flush=True)
    if write_error is not None:
        return Verdict(UNWRITABLE, write_failure(str(out_path), write_error))
    if interrupt.exit_status is not None:
        return interrupt.exit_status
    if closed_pipe:
        return 0
    limit_reached = args.limit is not None and kept >= args.limit
    if resuming and is_complete(site.stats, site.crawler.failures):
        return Verdict(
            OK,
            f"the crawl in {args.state} is complete: nothing left to crawl (--recrawl crawls it again for what "
            "changed; delete it to start over)",
        )
    return judge_site(
        seed_url,
        site.stats,
        site.crawler.failures,
        seed_error,
        limit_reached=limit_reached,
        start_status=site.start_status(seed_url),
    )


def _wrote(count: int, path: str) -> str:
    """The line saying what went to ``-o``: a file no record reached was not made."""
    if count or os.path.exists(path):
        return f"wrote {count} record{'s' if count != 1 else ''} to {path}"
    return f"wrote no records: {path} was not created"


def _settings(args: argparse.Namespace, site: SiteCrawl) -> dict[str, str]:
    """The crawl's settings as its report shows them."""
    settings = {
        "start": site.seed_urls[0],
        "scope": args.scope,
        "limit": "none" if args.limit is None else str(args.limit),
        "politeness": pace(site.crawler.host_limits, robots=not args.ignore_robots),
        "robots": "ignored" if args.ignore_robots else f"obeyed ({args.respect}, agent {args.agent!r})",
        "state": str(args.state) if args.state is not None else "memory (not resumable)",
        "output": str(args.output if args.output is not None else args.overwrite_output),
    }
    if args.timeout is not None:
        settings["timeout"] = f"{args.timeout:g} s"
    return settings


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
