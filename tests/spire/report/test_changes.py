"""A recrawl's changes in the report's data and on the dashboard's server: each change counted, a few
pages of each sampled as the change feed says them, the URL table filtered to one change; nothing for
a crawl that is no recrawl."""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from spire.report import Dashboard, report_data
from spire.site import SiteCrawl
from spire_core.ledger import LedgerView
from spire_core.ledger_sqlite import SqliteLedgerView
from spire_core.recrawl import change_line
from tests.sites.server import Site
from tests.spire.report.conftest import RECRAWLED, Recrawled, path_of


async def _data(recrawled: Recrawled, **options: Any) -> dict[str, Any]:
    async with SqliteLedgerView(recrawled.state) as view:
        return await report_data(view, settings={}, **options)


def _said(change: str) -> list[str]:
    return sorted(path for path, said in RECRAWLED.items() if said == change)


def test_a_recrawls_data_count_each_change_and_sample_its_pages_as_the_feed_says_them(recrawled: Recrawled) -> None:
    data = anyio.run(_data, recrawled)

    changes = {group["change"]: group for group in data["changes"]}
    assert [group["change"] for group in data["changes"]] == ["new", "changed", "unchanged", "gone", "failed"]
    assert {change: group["count"] for change, group in changes.items()} == {
        "new": 1,
        "changed": 3,
        "unchanged": 15,
        "gone": 1,
        "failed": 1,
    }
    for change in ("new", "changed", "gone", "failed"):
        assert sorted(path_of(sample["url"]) for sample in changes[change]["samples"]) == _said(change), change
    assert changes["unchanged"]["samples"] == []  # the rule, not news

    async def feed() -> dict[str, dict[str, Any]]:
        async with SqliteLedgerView(recrawled.state) as view:
            return {entry.url: change_line(entry) for entry in await view.entries(changed=True, limit=100)}

    lines = anyio.run(feed)
    for change in ("new", "changed", "gone", "failed"):
        for sample in changes[change]["samples"]:
            assert sample == lines[sample["url"]]  # a line of the change feed
    changed = changes["changed"]["samples"][0]
    assert changed["hash"] != changed["previous_hash"]
    assert changed["previous_hash"] is not None
    (gone,) = changes["gone"]["samples"]
    assert (gone["reason"], gone["status"]) == ("HTTP 404", 404)
    (failed,) = changes["failed"]["samples"]
    assert "500" in failed["reason"]


def test_the_samples_are_the_first_of_each_change_in_the_order_met(recrawled: Recrawled) -> None:
    data = anyio.run(lambda: _data(recrawled, samples=2))
    changes = {group["change"]: group for group in data["changes"]}
    assert changes["changed"]["count"] == 3
    assert [path_of(sample["url"]) for sample in changes["changed"]["samples"]] == ["/", "p3"]


def test_the_url_table_has_each_pages_change_and_a_first_page_of_each_change(recrawled: Recrawled) -> None:
    data = anyio.run(_data, recrawled)
    first = data["entries"]["first"]
    pages = {path_of(row["url"]): row["change"] for row in first["all"] if row["change"] is not None}
    assert pages == RECRAWLED
    for change in ("new", "changed", "unchanged", "gone", "failed"):
        rows = first[f"change:{change}"]
        assert sorted(path_of(row["url"]) for row in rows) == _said(change), change
        assert {row["change"] for row in rows} == {change}
    (gone,) = first["change:gone"]
    assert (gone["fate"], gone["reason"]) == ("skipped", "status")
    # The skip and failure samples say the change too: a page an earlier crawl kept has no referrer.
    (skip,) = next(group for group in data["skips"] if group["reason"] == "status")["samples"]
    assert (path_of(skip["url"]), skip["referrer"], skip["change"]) == ("p5", None, "gone")
    (failure,) = data["failures"][0]["samples"]
    assert (path_of(failure["url"]), failure["change"]) == ("p4", "failed")


def test_a_first_crawl_and_a_crawl_without_page_states_have_no_changes(
    recrawled: Recrawled, crawled: tuple[Site, LedgerView, SiteCrawl]
) -> None:
    # The first crawl kept page states, every page new: nothing to compare yet.
    assert recrawled.first["totals"]["kept"] == 20
    assert recrawled.first["changes"] == []
    assert not [view for view in recrawled.first["entries"]["first"] if view.startswith("change:")]
    _, ledger, _ = crawled
    assert anyio.run(lambda: report_data(ledger, settings={}))["changes"] == []


def test_the_dashboard_pages_the_url_table_by_change(recrawled: Recrawled) -> None:
    async def main() -> None:
        async with (
            SqliteLedgerView(recrawled.state) as view,
            Dashboard(view, settings={}) as dashboard,
            httpx.AsyncClient() as client,
        ):
            data = (await client.get(dashboard.url + "data.json")).json()
            assert [group["count"] for group in data["changes"]] == [1, 3, 15, 1, 1]
            assert list(data["entries"]["first"]) == ["all"]  # a live page asks for the others
            unchanged = (await client.get(dashboard.url + "entries.json", params={"change": "unchanged"})).json()
            assert sorted(path_of(row["url"]) for row in unchanged) == _said("unchanged")
            later = await client.get(dashboard.url + "entries.json", params={"change": "unchanged", "offset": 14})
            assert [row["url"] for row in later.json()] == [unchanged[14]["url"]]
            both = await client.get(dashboard.url + "entries.json", params={"change": "gone", "fate": "skipped"})
            assert [path_of(row["url"]) for row in both.json()] == ["p5"]
            bad = await client.get(dashboard.url + "entries.json", params={"change": "moved"})
            assert bad.status_code == 400
            assert "change new, changed, unchanged, gone or failed" in bad.text

    anyio.run(main)
