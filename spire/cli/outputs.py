"""``-o FILE`` and ``-O FILE``: where a command writes its records, as Scrapy has them.

``-o`` adds to a file that exists (as ``JsonlDataset(...)`` does), ``-O`` replaces it (as
``JsonlDataset(..., mode="overwrite")`` does). A resumed crawl (``--state``, ``--frontier``) always
adds: what its first run wrote belongs to the same crawl.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spire_core.dataset._files import WriteMode, check_writable
from spire_core.dataset.output import check_output
from spire_core.errors import ConfigError, DatasetError

__all__ = ["add_output_arguments", "chosen_output", "write_failure"]

FORMATS = "the format follows the extension: .jsonl, .csv, .json or .sqlite ('-' for JSON Lines on stdout)"


def add_output_arguments(parser: argparse.ArgumentParser, *, what: str, required: bool) -> None:
    """Add ``-o``/``--output`` and ``-O``/``--overwrite-output`` (one or the other) for ``what``."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help=f"the file for {what}, added to when it exists; {FORMATS}; missing folders are made",
    )
    group.add_argument(
        "-O",
        "--overwrite-output",
        metavar="FILE",
        default=None,
        help="like -o, but a file that exists is replaced (a resumed crawl still adds to it)",
    )


def chosen_output(args: argparse.Namespace, *, resuming: bool) -> tuple[str | None, WriteMode]:
    """The ``-o``/``-O`` path and how to open it, checked before the crawl starts (not at its first item)."""
    path: str | None = args.output if args.output is not None else args.overwrite_output
    mode: WriteMode = "overwrite" if args.overwrite_output is not None and not resuming else "append"
    if path is None or path == "-":
        return path, mode
    try:
        check_output(path, mode=mode)
    except ConfigError as exc:
        if mode == "append" and path.lower().endswith(".json"):
            raise ConfigError(f"{exc} (-O {path} replaces it)") from None
        raise
    check_writable(Path(path))
    return path, mode


def write_failure(path: str, error: BaseException) -> str:
    """The one sentence for a write to ``path`` that failed mid-crawl (a dataset's error names the file already)."""
    if isinstance(error, DatasetError):
        return f"{error}; the crawl stopped, and the records written before are whole"
    cause = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return f"cannot write {path}: {cause}; the crawl stopped, and the records written before are whole"
