"""``report_data``: what the report shows, as JSON-ready data, read from a ``LedgerView``.

The HTML report inlines it; the live dashboard serves it at ``/data.json`` and the page polls it.
Both pages draw from this one shape, so the report and the dashboard cannot disagree.

    {"title": ..., "settings": {...}, "totals": {"kept": 10, ..., "requests": 12, "bytes": 5120},
     "statuses": [[200, 10], [404, 2]], "hosts": [{"origin": ..., "requests": ...}, {"origin": "not crawled: ...",
     "hosts": [origins met as links only], ...}],
     "skips": [{"reason": "robots", "count": 3, "samples": [{"url": ..., "referrer": ...}]}],
     "failures": [...], "latency": [[10, 4], [50, 8], [null, 0]], "timeline": [[0, 3, 2], ...],
     "timeline_step": 1, "in_flight": [[0, 1], ...],
     "changes": [{"change": "new", "count": 1, "samples": [{"url": ..., "hash": ..., ...}]}, ...],
     "entries": {"total": 25, "first": {"all": [...], "kept": [...], "change:gone": [...]}}}

``changes`` is empty unless the ledger holds a recrawl's changes (some page was kept by the crawl
before): then it has the five changes in order, with up to ``samples`` pages each of ``new``,
``changed``, ``gone`` and ``failed``, each sample a line of the change feed (``change_line``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from spire_core.ledger import Entry, Fate, HostRow, LedgerView, Sample
from spire_core.recrawl import change_line
from spire_core.revisit import Change

__all__ = ["CHANGE_VIEW", "PAGE_SIZE", "entries_page", "report_data"]

#: URLs a table page shows: the report inlines the first page only, so it opens fast at 100k URLs.
PAGE_SIZE = 100
#: The key of a change's first page of URLs in ``entries.first``: ``change:gone``.
CHANGE_VIEW = "change:"
#: The changes whose pages the report samples (an unchanged page is the rule, not news).
_SAMPLED = (Change.NEW, Change.CHANGED, Change.GONE, Change.FAILED)


def _sample(sample: Sample) -> dict[str, Any]:
    return {"url": sample.url, "referrer": sample.referrer, "detail": sample.detail, "change": sample.change}


def _groups(groups: Mapping[str, tuple[int, Sequence[Sample]]], key: str) -> list[dict[str, Any]]:
    ordered = sorted(groups.items(), key=lambda item: (-item[1][0], item[0]))
    return [{key: name, "count": count, "samples": [_sample(s) for s in samples]} for name, (count, samples) in ordered]


def _host(row: HostRow, pause: str | None) -> dict[str, Any]:
    return {
        "origin": row.origin,
        "requests": row.requests,
        "pages": row.pages,
        "statuses": {str(code): n for code, n in sorted(row.statuses.items())},
        "errors": dict(sorted(row.errors.items())),
        "skips": dict(sorted(row.skips.items())),
        "p50_ms": row.p50_ms,
        "p95_ms": row.p95_ms,
        "bytes": row.bytes,
        "pause": pause,
    }


def _hosts(rows: Sequence[HostRow], pauses: Mapping[str, str]) -> list[dict[str, Any]]:
    """The host table: each origin the crawl sent requests to, then one row for every host met only
    as a link (an off-site host, refused by the scope), so a page linking 80 sites stays readable. A
    URL with no origin (``mailto:``, one too broken to parse) is no host: its skip is counted by reason."""
    found = [_host(row, pauses.get(row.origin)) for row in rows if row.origin and row.requests]
    idle = [row for row in rows if row.origin and not row.requests]
    if idle:
        skips: dict[str, int] = {}
        errors: dict[str, int] = {}
        for row in idle:
            for reason, count in row.skips.items():
                skips[reason] = skips.get(reason, 0) + count
            for kind, count in row.errors.items():
                errors[kind] = errors.get(kind, 0) + count
        name = f"not crawled: {len(idle)} host{'s' if len(idle) != 1 else ''} met as links only"
        folded = HostRow(name, 0, sum(row.pages for row in idle), {}, errors, skips, None, None, 0)
        found.append({**_host(folded, None), "hosts": [row.origin for row in idle]})
    return found


def _row(entry: Entry) -> dict[str, Any]:
    return {
        "url": entry.url,
        "fate": entry.fate.value,
        "reason": entry.reason,
        "detail": entry.detail,
        "status": entry.status,
        "referrer": entry.referrer,
        "depth": entry.depth,
        "attempts": entry.tries or len(entry.attempts),
        "change": entry.change,
    }


async def entries_page(
    view: LedgerView,
    *,
    fate: Fate | None = None,
    reason: str | None = None,
    origin: str | None = None,
    change: str | None = None,
    offset: int = 0,
    limit: int = PAGE_SIZE,
) -> list[dict[str, Any]]:
    """One page of the URL table: the entries matching the filters, from ``offset``."""
    entries = await view.entries(fate=fate, reason=reason, origin=origin, change=change, limit=limit, offset=offset)
    return [_row(entry) for entry in entries]


async def _changes(view: LedgerView, counts: Mapping[str, int], samples: int) -> list[dict[str, Any]]:
    """The changes section: every change counted, a few pages of each sampled; empty unless the ledger
    holds a recrawl's (a first crawl's pages are all new: the section would only repeat the kept count)."""
    if not any(count for change, count in counts.items() if change != Change.NEW):
        return []
    found: list[dict[str, Any]] = []
    for change in Change:
        count = counts.get(change, 0)
        sampled = await view.entries(change=change, limit=samples) if count and change in _SAMPLED else ()
        found.append({"change": change.value, "count": count, "samples": [change_line(entry) for entry in sampled]})
    return found


async def report_data(
    view: LedgerView,
    *,
    settings: Mapping[str, str],
    title: str = "spire crawl",
    in_flight: Sequence[tuple[int, int]] = (),
    pauses: Mapping[str, str] | None = None,
    samples: int = 5,
    live: bool = False,
) -> dict[str, Any]:
    """The report's data: ``settings`` as given, the ledger's summary, the first page of URLs.

    ``in_flight`` is ``(second, requests in flight)`` samples taken while the crawl ran (the ledger
    records requests, not what was in flight); ``pauses`` says why an origin is paused, by origin.
    """
    summary = await view.summary(samples=samples)
    fates = {fate.value: summary.fates.get(fate, 0) for fate in Fate}
    changes = await _changes(view, summary.changes, samples)
    pauses = pauses or {}
    return {
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "live": live,
        "settings": dict(settings),
        "totals": {**fates, "urls": sum(fates.values()), "requests": summary.requests, "bytes": summary.bytes},
        "statuses": [[code, n] for code, n in sorted(summary.statuses.items())],
        "hosts": _hosts(summary.hosts, pauses),
        "skips": _groups(summary.skips, "reason"),
        "failures": _groups(summary.failures, "kind"),
        "latency": [[None if math.isinf(bound) else bound, n] for bound, n in summary.latency_histogram],
        "timeline": [list(point) for point in summary.timeline],
        "timeline_step": summary.timeline_step,
        "in_flight": [list(point) for point in in_flight],
        "changes": changes,
        # The first page of each table view (every URL, each fate, each change): a file filters them
        # without a server. A live page asks the server for any other (entries.json), so its polls
        # carry the first only.
        "entries": {
            "total": sum(fates.values()),
            "first": {
                "all": await entries_page(view),
                **{fate.value: await entries_page(view, fate=fate) for fate in Fate if fates[fate.value] and not live},
                **{
                    CHANGE_VIEW + group["change"]: await entries_page(view, change=group["change"])
                    for group in changes
                    if group["count"] and not live
                },
            },
        },
    }
