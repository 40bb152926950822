"""``spire why``: what became of a URL, read from a crawl's ledger (a finished crawl's or a running one's).

spire why https://example.com/about --state crawl.sqlite     its fate, where it was found, each attempt
spire why --reason robots --state crawl.sqlite               the URLs skipped (or failed) for a reason
spire why --export ledger.jsonl --state crawl.sqlite         the whole ledger as JSON Lines
spire why --changes changes.jsonl --state crawl.sqlite       the change feed of the state's last crawl
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from spire.cli.verdict import FAILED, OK, UNWRITABLE, Verdict
from spire_core.errors import ConfigError
from spire_core.ledger import Attempt, Entry, Fate, LedgerView, export_jsonl, fate_line
from spire_core.ledger_sqlite import INTERRUPTED, SqliteLedgerView
from spire_core.recrawl import change_line, export_changes
from spire_core.revisit import Change, How

__all__ = ["add_parser", "describe", "why"]

EXAMPLES = """examples:
  spire why https://example.com/about --state crawl.sqlite
  spire why --reason robots --state crawl.sqlite
  spire why --export ledger.jsonl --state crawl.sqlite
  spire why --changes changes.jsonl --state crawl.sqlite
  spire why https://example.com/about --redis redis://127.0.0.1:6379/0 --name shop
"""

#: URLs read from the ledger per query when listing a reason.
_PAGE = 1000

#: How a recrawl knew a page's change, as ``spire why`` says it.
_HOW: dict[str, str] = {
    How.FETCHED: "fetched, its fingerprint compared",
    How.NOT_MODIFIED: "the server answered 304 Not Modified",
    How.LASTMOD: "not fetched: its sitemap lastmod had not moved",
    How.NOT_DUE: "not fetched: not due this recrawl",
}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    why_parser = commands.add_parser(
        "why",
        parents=[common],
        help="say what became of a URL of a crawl (kept, skipped and why, failed, queued)",
        description="Read the ledger of a crawl's state file (`spire crawl --state FILE`, a SqliteFrontier): "
        "a URL's fate first, then the page it was found on and each request made for it. Works while the "
        "crawl runs. Exits 1 with one sentence for a URL the crawl never met.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    why_parser.add_argument("url", nargs="?", help="the URL to explain")
    source = why_parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--state", type=Path, metavar="FILE", help="the crawl's state file")
    source.add_argument("--redis", metavar="URL", help="a fleet's Redis server instead: redis://host:6379/0")
    why_parser.add_argument("--name", default="spire", help="with --redis, the crawl's name (default spire)")
    chosen = why_parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--reason", default=None, help="list the URLs skipped or failed for this reason (robots, strategy, timeout...)"
    )
    chosen.add_argument("--export", type=Path, default=None, metavar="FILE", help="write the ledger as JSON Lines")
    chosen.add_argument(
        "--changes",
        default=None,
        metavar="FILE",
        help="write the change feed of the state's last crawl, as `spire crawl --recrawl -o` does (replacing "
        "FILE; - for standard output): one JSON line a page, new, changed, unchanged, gone or failed",
    )
    why_parser.set_defaults(command_fn=why)


def why(args: argparse.Namespace) -> int | Verdict:
    given = sum(value is not None for value in (args.url, args.reason, args.export, args.changes))
    if given != 1:
        raise ConfigError("spire why takes one of: a URL, --reason REASON, --export FILE, --changes FILE")
    if args.changes is not None and args.state is None:
        raise ConfigError("a fleet on Redis keeps no page states, so it has no change feed: --changes reads --state")
    return anyio.run(_why, args)


async def _why(args: argparse.Namespace) -> int | Verdict:
    if args.state is not None:
        async with SqliteLedgerView(args.state) as view:
            if args.changes is not None:
                return await _write_changes(view, args.changes, str(args.state))
            recrawl = (await view.generation()).number > 1
            return await _answer(view, args, str(args.state), recrawl=recrawl)
    from spire_core.frontier.redis import RedisFrontier

    frontier = RedisFrontier(args.redis, name=args.name)
    try:
        frontier.open_ledger("full")
        assert frontier.ledger is not None  # a full ledger has a view
        return await _answer(frontier.ledger, args, f"{args.name!r} at {args.redis}", recrawl=False)
    finally:
        await frontier.aclose()


async def _answer(view: LedgerView, args: argparse.Namespace, where: str, *, recrawl: bool) -> int | Verdict:
    """Answer for a URL, a reason or the whole ledger; ``recrawl``: the ledger holds a recrawl's lines."""
    if args.export is not None:
        try:
            count = await export_jsonl(view, str(args.export))
        except OSError as exc:
            return _unwritable(args.export, exc)
        print(f"wrote {count} ledger entries to {args.export}")
        return OK
    if args.reason is not None:
        return await _list_reason(view, args.reason, where)
    entry = await view.entry(args.url)
    if entry is None:
        return Verdict(FAILED, f"the crawl in {where} never met {args.url}: it was not found on any page")
    print(describe(entry, recrawl=recrawl))
    return OK


async def _write_changes(view: SqliteLedgerView, path: str, where: str) -> int | Verdict:
    """``--changes FILE``: the change feed of the state's last crawl, whether or not the crawl wrote it."""
    if not await view.entries(changed=True, limit=1):
        return Verdict(
            FAILED,
            f"the crawl in {where} has no change feed: it kept no page states (`spire crawl --state FILE` keeps "
            "them; a script's crawl needs Crawler(recrawl=True))",
        )
    generation = await view.generation()
    try:
        count = await export_changes(view, path)
    except OSError as exc:
        if path == "-" and isinstance(exc, BrokenPipeError):
            # The reader stopped early (`| head`): what it read is what it asked for. Standard output goes
            # nowhere from here, so the interpreter's last flush does not meet the broken pipe again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return OK
        return _unwritable(path, exc)
    target = "standard output" if path == "-" else path
    said = f"wrote {count} lines of the change feed of crawl {generation.number} in {where} to {target}"
    print(said, file=sys.stderr)
    if not generation.finished:
        print(
            f"crawl {generation.number} in {where} has not finished: the feed holds the pages it settled so far "
            "(run the crawl again to finish it)",
            file=sys.stderr,
        )
    return OK


def _unwritable(path: str | Path, error: OSError) -> Verdict:
    """The one sentence for a file ``spire why`` cannot write (a missing or read-only folder)."""
    return Verdict(UNWRITABLE, f"cannot write {path}: {error.strerror or error}")


def _kept_before(entry: Entry) -> bool:
    """Whether ``entry`` is a page an earlier crawl kept, met by a recrawl as such (revisited, or not due)
    rather than on a page of its own."""
    return entry.referrer is None and entry.change is not None and entry.change != Change.NEW


async def _list_reason(view: LedgerView, reason: str, where: str) -> int | Verdict:
    offset, listed = 0, 0
    while True:
        page = await view.entries(reason=reason, limit=_PAGE, offset=offset)
        for entry in page:
            if entry.referrer:
                found = f"  (found on {entry.referrer})"
            else:
                found = "  (kept by an earlier crawl)" if _kept_before(entry) else "  (a start URL)"
            detail = f"  [{entry.detail}]" if entry.detail else ""
            print(f"{entry.url}{found}{detail}")
        listed += len(page)
        if len(page) < _PAGE:
            break
        offset += len(page)
    if listed == 0:
        summary = await view.summary(samples=0)
        known = sorted({*summary.skips, *summary.failures})
        there = ", ".join(known) if known else "none"
        said = f"no URL of the crawl in {where} was skipped or failed for {reason!r}"
        return Verdict(FAILED, f"{said} (its reasons: {there})")
    return OK


def describe(entry: Entry, *, recrawl: bool = True) -> str:
    """What ``spire why`` prints for an entry: the fate, where it was found, on a recrawl (``recrawl``)
    what changed, each attempt."""
    lines = [fate_line(entry), f"  url: {entry.url}"]
    if entry.referrer is not None:
        lines.append(f"  found on: {entry.referrer} (depth {entry.depth})")
    elif _kept_before(entry):
        lines.append(f"  found: kept by an earlier crawl (depth {entry.depth})")
    elif entry.fate is Fate.READ:
        lines.append(f"  found: read by the crawl itself (depth {entry.depth})")
    else:
        lines.append(f"  found: a start URL (depth {entry.depth})")
    if entry.detail and entry.fate is Fate.FAILED:
        lines.append(f"  error: {entry.detail}")
    if entry.change is not None and recrawl:
        lines.append(_change(entry))
    lines.extend(_attempts(entry.attempts))
    return "\n".join(lines)


def _change(entry: Entry) -> str:
    """The change line: what the crawl found of the page, how it knew, its fingerprints, when it last changed
    (the values of its line in the change feed)."""
    line = change_line(entry)
    how = "fetched" if entry.change == Change.NEW else _HOW.get(entry.how or "")
    said = f"  change: {entry.change}" + (f" ({how})" if how else "")
    said += f"; hash {entry.previous_hash or 'none'} -> {entry.hash or 'none'}"
    if line["changed_at"] is not None:
        said += f"; last changed {line['changed_at']}"
    return said


def _attempts(attempts: Sequence[Attempt]) -> list[str]:
    if not attempts:
        return ["  attempts: none (no request was made)"]
    lines = [f"  attempts: {len(attempts)}"]
    for number, attempt in enumerate(attempts, 1):
        at = datetime.datetime.fromtimestamp(attempt.at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        status = "-" if attempt.status is None else attempt.status
        extra = "".join(
            f" {name}={value}" for name, value in (("proxy", attempt.proxy), ("identity", attempt.identity)) if value
        )
        if attempt.outcome == INTERRUPTED:
            lines.append(f"    {number}. {at}Z {attempt.url} interrupted: in flight when the crawl was killed")
            continue
        lines.append(
            f"    {number}. {at}Z {attempt.url} status={status} {attempt.elapsed_ms} ms "
            f"{attempt.bytes} bytes {attempt.outcome}{extra}"
        )
    return lines
