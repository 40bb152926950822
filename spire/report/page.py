"""``render_report``: the crawl report as one HTML file that works offline.

The page holds everything it needs: its CSS, the vendored uPlot charting library (MIT, its
licence in ``static/LICENSE.uPlot``), its script and the report's data as JSON. Opening it sends
no request to any host. The live dashboard serves the same page with ``live=True``: it then polls
``data.json`` beside it and draws again.
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from spire.report.data import report_data
from spire_core.ledger import LedgerView

__all__ = ["page_html", "render_report"]

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{title}</title>
<style>{uplot_css}</style>
<style>{css}</style>
</head>
<body data-refresh="{refresh}">
<h1>{title}</h1>
<div id="generated"></div>
<div id="totals"></div>
<section id="changes-section" hidden>
<h2>Changes since the crawl before</h2>
<div id="change-counts"></div>
<div id="changes"></div>
</section>
<div class="charts">
  <div><h2>Requests, pages and in flight over time</h2><div class="chart" id="timeline"></div></div>
  <div><h2>Latency</h2><div class="chart" id="latency"></div></div>
</div>
<h2>Hosts</h2>
<div id="hosts"></div>
<h2>Status codes</h2>
<div id="statuses"></div>
<h2>Skipped, by reason</h2>
<div id="skips"></div>
<h2>Failed, by kind</h2>
<div id="failures"></div>
<h2>URLs</h2>
<div class="pager">
  <select id="url-filter"><option value="all">every URL</option><optgroup label="by fate">
  <option value="kept">kept</option><option value="skipped">skipped</option><option value="failed">failed</option>
  <option value="queued">queued</option><option value="read">read (robots.txt, sitemaps)</option></optgroup></select>
  <button id="url-prev">previous</button><button id="url-next">next</button><span id="url-page"></span>
</div>
<div id="urls"></div>
<h2>Settings</h2>
<div id="settings"></div>
<script type="application/json" id="report-data">{data}</script>
<script>{uplot_js}</script>
<script>{js}</script>
</body>
</html>
"""


@functools.cache
def _static(name: str) -> str:
    return resources.files("spire.report").joinpath("static", name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """``text`` as it may sit inside a ``<script>`` element: no ``</script>`` or ``<!--`` can end it early."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page_html(data: Mapping[str, Any], *, refresh: float = 2.0) -> str:
    """The report page for ``data`` (``report_data``'s); a live page polls every ``refresh`` seconds."""
    return _PAGE.format(
        title=html.escape(str(data["title"])),
        refresh=round(refresh * 1000),
        uplot_css=_static("uPlot.min.css"),
        css=_static("report.css"),
        data=_script_safe(json.dumps(data, separators=(",", ":"))),
        uplot_js=_static("uPlot.iife.min.js"),
        js=_static("report.js"),
    )


async def render_report(
    view: LedgerView,
    *,
    settings: Mapping[str, str],
    title: str = "spire crawl",
    in_flight: Sequence[tuple[int, int]] = (),
    pauses: Mapping[str, str] | None = None,
    samples: int = 5,
) -> str:
    """The crawl report for ``view`` as one self-contained HTML page.

        html = await render_report(ledger, settings={"start": "https://example.com/", "scope": "host"})

    It shows ``settings`` and the totals, the per-host table, status codes, skips and failures
    with up to ``samples`` example URLs each (and the page each was found on), requests and pages
    a second with ``in_flight`` samples over time, a latency histogram, and the first page of URLs;
    for a recrawl, its pages by change, with up to ``samples`` new, changed, gone and failed pages.
    """
    data = await report_data(view, settings=settings, title=title, in_flight=in_flight, pauses=pauses, samples=samples)
    return page_html(data)
