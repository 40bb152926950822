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
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import anyio

from spire.report import LOOPBACK, Dashboard, Sampler, write_report
from spire_core.errors import ConfigError
from spire_core.ledger import LedgerView
from spire_core.limits import HostStats

__all__ = ["add_report_arguments", "reporting"]

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
    view: LedgerView,
    host_stats: Callable[[], Sequence[HostStats]],
    *,
    settings: Mapping[str, str],
    title: str,
) -> AsyncIterator[Sampler | None]:
    """Around a crawl: the dashboard while it runs (``--dashboard``), its report when it ends (``--report``).

    It yields the ``Sampler`` the crawl's task group runs beside the crawl (``None`` without either
    option): what was in flight, and the host pauses, for the report's timeline and host table.
    """
    if args.report is None and args.dashboard is None:
        yield None
        return
    if args.dashboard is None and args.dashboard_host != LOOPBACK:
        raise ConfigError("--dashboard-host goes with --dashboard")
    sampler = Sampler(host_stats)
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
