"""The crawl report: one offline HTML file (``render_report``, ``write_report``) and the live ``Dashboard``.

    from spire.report import write_report
    await write_report(ledger, "report.html", settings={"start": "https://example.com/"})

Both draw from the crawl's ledger (``spire_core.ledger.LedgerView``) with one page: the file
inlines its data, the dashboard serves it and the page polls. Charts are drawn by uPlot (MIT,
vendored in ``static/``), so the file needs no network.
"""

from __future__ import annotations

from spire.report.dashboard import LOOPBACK, Dashboard
from spire.report.data import PAGE_SIZE, report_data
from spire.report.page import render_report
from spire.report.sampler import Sampler
from spire.report.writer import write_report

__all__ = ["Dashboard", "LOOPBACK", "PAGE_SIZE", "Sampler", "render_report", "report_data", "write_report"]
