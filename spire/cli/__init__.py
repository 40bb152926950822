"""The ``spire`` command.

    spire crawl URL -o pages.jsonl     the polite crawl of one site, one record per kept page
    spire run script.py -o items.jsonl crawl with the router a script defines, write its items
    spire worker --redis URL script.py one of many workers sharing a crawl through Redis
    spire new NAME                     write a small runnable project
    spire shell URL                    fetch a page and explore it in Python
    spire why URL --state FILE         what became of a URL of a crawl, and why
    spire report --state FILE -o F     a crawl's report: one offline HTML file

Every command exits 0 when it did its job, 1 with a one-line reason when the crawl did not (host
down, an error status, robots.txt unreachable, nothing crawled, seeds failed), 2 for a mistake in
how it was called, 3 when the output file cannot be written (a read-only folder, a full disk), and
130 on Ctrl-C (143 on SIGTERM). ``spire COMMAND --help`` shows each one's
options with examples.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import spire
from spire.cli import crawl, new, report, script, shell, why
from spire.cli.interrupt import STOPPING
from spire.cli.verdict import UNWRITABLE, Verdict
from spire_core.errors import DatasetError, SpireError
from spire_core.log import console

__all__ = ["main"]

EXAMPLES = """examples:
  spire crawl https://example.com/ -o pages.jsonl
  spire run crawl.py --seed https://example.com/ -o items.jsonl
  spire new shopcrawl && cd shopcrawl && python -m pytest
  spire shell https://example.com/
  spire why https://example.com/about --state crawl.sqlite
"""

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}

#: The exit status for a mistake in how a command was called (argparse uses it too).
USAGE = 2


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    logs = common.add_argument_group("logging")
    logs.add_argument("-v", "--verbose", action="count", default=0, help="log more: -v retries and info, -vv debug")
    logs.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    logs.add_argument(
        "--log-level",
        choices=list(LEVELS),
        default=None,
        help="the spire log level (default warning); wins over -v and -q",
    )
    parser = argparse.ArgumentParser(
        prog="spire",
        description="A polite, fast, resumable web crawler.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"spire-crawl {spire.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    crawl.add_parser(commands, common)
    script.add_parsers(commands, common)
    new.add_parser(commands, common)
    shell.add_parser(commands, common)
    why.add_parser(commands, common)
    report.add_parser(commands, common)
    return parser


def _log_level(args: argparse.Namespace) -> int:
    if args.log_level is not None:
        return LEVELS[args.log_level]
    if args.quiet:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _where_in_script(error: BaseException, args: argparse.Namespace) -> str:
    """`` (crawl.py:12, in listing)``: the script's line the error came through, when it came through one."""
    script = getattr(args, "script", None)
    if script is None:
        return ""
    path = Path(script).resolve()
    inside = [frame for frame in traceback.extract_tb(error.__traceback__) if Path(frame.filename) == path]
    if not inside:
        return ""
    frame = inside[-1]  # the innermost: the call in the handler, not the module's top level
    return f" (at {script}:{frame.lineno}, in {frame.name})"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spire`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    console(_log_level(args))
    try:
        try:
            result: int | Verdict = args.command_fn(args)
        except BaseExceptionGroup as group:
            # A crawl's task group wraps what stopped it: a spire error (Redis lost) gets its message.
            leaves = _leaves(group)
            if all(isinstance(leaf, BrokenPipeError) for leaf in leaves):
                raise leaves[0] from None
            errors = [leaf for leaf in leaves if isinstance(leaf, SpireError)]
            if not errors or len(errors) != len(leaves):
                raise
            raise errors[0] from group
    except DatasetError as exc:  # the output cannot be written (read-only, full) or read back
        print(f"spire: {exc}", file=sys.stderr)
        return UNWRITABLE
    except SpireError as exc:
        print(f"spire: {exc}{_where_in_script(exc, args)}", file=sys.stderr)
        return USAGE
    except BrokenPipeError:
        _silence_stdout()  # `| head` closed the pipe: it has what it wanted
        return 0
    except KeyboardInterrupt:
        print(STOPPING.split(" (")[0], file=sys.stderr)
        return 130
    if isinstance(result, Verdict):
        if result.reason is not None:
            print(f"spire: {result.reason}", file=sys.stderr)
        return result.status
    return result
