"""``spire report --state FILE -o report.html``, and the ``--report`` / ``--dashboard`` options of a crawl.

    spire report --state crawl.sqlite -o report.html        a finished (or running) crawl's report
    spire crawl https://example.com/ -o pages.jsonl --report report.html
    spire crawl https://example.com/ -o pages.jsonl --dashboard 8765   # http://127.0.0.1:8765/ while it runs

The dashboard listens on 127.0.0.1 only unless ``--dashboard-host`` names another address: it
shows every URL the crawl met.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Protocol

import anyio

from spire.cli.verdict import OK, Verdict
from spire.report import LOOPBACK, Dashboard, Sampler, write_report
from spire_core.errors import ConfigError
from spire_core.frontier.base import Frontier
from spire_core.ledger import LedgerView
from spire_core.ledger_stores import describe
from spire_core.limits import HostStats

__all__ = ["ReportedCrawl", "add_parser", "add_report_arguments", "publish", "report", "reporting"]

EXAMPLES = """examples:
  spire report --state crawl.sqlite -o report.html
  spire report --state crawl.sqlite --dashboard          # browse it on http://127.0.0.1:8765/ (Ctrl-C to stop)
"""


class ReportedCrawl(Protocol):
    """What the report needs of a crawl (a ``Crawler``): its ledger, its frontier (which may keep the
    report's title and settings for ``spire report --state``), and its host limits' live state."""

    @property
    def ledger(self) -> LedgerView | None: ...

    @property
    def frontier(self) -> Frontier: ...

    def host_stats(self) -> list[HostStats]: ...


#: ``--dashboard`` given with no port.
DEFAULT_PORT = 8765


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port number (0 for any free one), not {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {port}")
    return port


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """``--report FILE``, ``--dashboard [PORT]`` and ``--dashboard-host``: the same for every crawl command."""
    group = parser.add_argument_group("report")
    group.add_argument(
        "--report", type=Path, default=None, metavar="FILE", help="write the crawl's report (one offline HTML file)"
    )
    group.add_argument(
        "--dashboard",
        type=_port,
        nargs="?",
        const=DEFAULT_PORT,
        default=None,
        metavar="PORT",
        help=f"serve the report live on http://127.0.0.1:PORT/ while the crawl runs (default port {DEFAULT_PORT})",
    )
    group.add_argument(
        "--dashboard-host",
        default=LOOPBACK,
        metavar="ADDRESS",
        help="the address the dashboard listens on (default 127.0.0.1: this machine only; 0.0.0.0 shows "
        "every URL of the crawl to the network)",
    )


@contextlib.asynccontextmanager
async def reporting(
    args: argparse.Namespace,
    crawl: ReportedCrawl,
    *,
    settings: Mapping[str, str],
    title: str,
) -> AsyncIterator[Sampler | None]:
    """Around a crawl: the dashboard while it runs (``--dashboard``), its report when it ends (``--report``).

    It yields the ``Sampler`` the crawl's task group runs beside the crawl (``None`` without either
    option): what was in flight, and the host pauses, for the report's timeline and host table. A
    crawl whose state is a file keeps ``title`` and ``settings`` in it, either way, for ``spire report``.
    """
    await describe(crawl.frontier, title, settings)
    if args.report is None and args.dashboard is None:
        yield None
        return
    if args.dashboard is None and args.dashboard_host != LOOPBACK:
        raise ConfigError("--dashboard-host goes with --dashboard")
    view = crawl.ledger
    if view is None:
        raise ConfigError("--report and --dashboard read the crawl's ledger, and this crawl keeps none")
    sampler = Sampler(crawl.host_stats)
    async with contextlib.AsyncExitStack() as stack:
        if args.dashboard is not None:
            dashboard = Dashboard(
                view, settings=settings, title=title, host=args.dashboard_host, port=args.dashboard, sampler=sampler
            )
            await stack.enter_async_context(dashboard)
            print(f"dashboard: {dashboard.url}", file=sys.stderr, flush=True)
        try:
            yield sampler
        finally:
            if args.report is not None:
                with anyio.CancelScope(shield=True):  # a crawl stopped by Ctrl-C still gets its report
                    await write_report(
                        view,
                        args.report,
                        settings=settings,
                        title=title,
                        in_flight=sampler.in_flight,
                        pauses=sampler.pause_texts(),
                    )
                print(f"wrote the report to {args.report}", file=sys.stderr, flush=True)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "report",
        parents=[common],
        help="write a crawl's report (one offline HTML file) from its state file",
        description="Write the report of the crawl whose state file is --state (`spire crawl --state FILE`, "
        "`spire run --frontier FILE`): settings and totals, hosts, statuses, skips and failures with sample URLs "
        "and the pages they were found on, a timeline and a latency histogram. Works while the crawl runs.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--state", type=Path, required=True, metavar="FILE", help="the crawl's state file")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="FILE", help="the HTML file to write")
    parser.add_argument(
        "--dashboard",
        type=_port,
        nargs="?",
        const=DEFAULT_PORT,
        default=None,
        metavar="PORT",
        help=f"serve the report on http://127.0.0.1:PORT/ until Ctrl-C instead (default port {DEFAULT_PORT})",
    )
    parser.add_argument("--dashboard-host", default=LOOPBACK, metavar="ADDRESS", help="with --dashboard")
    parser.set_defaults(command_fn=report)


def report(args: argparse.Namespace) -> int | Verdict:
    if (args.output is None) == (args.dashboard is None):
        raise ConfigError("spire report takes -o FILE (write the report) or --dashboard [PORT] (serve it)")
    if not args.state.is_file():
        raise ConfigError(f"{args.state} is not a crawl's state file: give the file of `spire crawl --state FILE`")
    return anyio.run(_report, args)


async def _report(args: argparse.Namespace) -> int | Verdict:
    from spire_core.ledger_sqlite import SqliteLedgerView

    async with SqliteLedgerView(args.state) as view:
        # The crawl's own title and settings, as its --report showed them, where its file kept them.
        about = await view.about()
        title, settings = about if about is not None else (f"spire crawl ({args.state.name})", {})
        return await publish(
            view,
            output=args.output,
            port=args.dashboard,
            host=args.dashboard_host,
            settings={**settings, "state file": str(args.state)},
            title=title,
        )


async def publish(
    view: LedgerView,
    *,
    output: Path | None,
    port: int | None,
    host: str,
    settings: Mapping[str, str],
    title: str,
) -> int:
    """Write ``view``'s report to ``output``, or serve it on ``host:port`` until Ctrl-C (report, status)."""
    if output is not None:
        await write_report(view, output, settings=settings, title=title)
        print(f"wrote the report to {output}", file=sys.stderr, flush=True)
        return OK
    assert port is not None  # the callers take one of the two
    async with Dashboard(view, settings=settings, title=title, host=host, port=port) as dashboard:
        print(f"dashboard: {dashboard.url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
        await anyio.sleep_forever()
    return OK
