"""``write_report``: the report page written to a file."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import anyio

from spire.report.page import render_report
from spire_core.crawler import Crawler
from spire_core.errors import ConfigError, DatasetError
from spire_core.ledger import LedgerView

__all__ = ["write_report"]


async def write_report(
    source: Crawler | LedgerView,
    path: str | os.PathLike[str],
    *,
    settings: Mapping[str, str] | None = None,
    title: str = "spire crawl",
    in_flight: Sequence[tuple[int, int]] = (),
    pauses: Mapping[str, str] | None = None,
) -> None:
    """Write the report of ``source`` (a crawler that ran, or a ledger) to ``path`` as one offline HTML file.

        crawler.run(seeds)
        anyio.run(write_report, crawler, "report.html")

    ``DatasetError`` naming the file when it cannot be written.
    """
    view = source.ledger if isinstance(source, Crawler) else source
    if view is None:
        raise ConfigError("this crawl keeps no ledger, so it has no report: leave Crawler(ledger=...) at its default")
    text = await render_report(view, settings=settings or {}, title=title, in_flight=in_flight, pauses=pauses)
    try:
        await anyio.Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise DatasetError(
            f"cannot write the report to {os.fspath(path)}: {exc.strerror or exc} (choose another file with --report)",
            path=os.fspath(path),
        ) from None
