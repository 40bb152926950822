"""The report page: one offline file whose data are the ledger's, for a real crawl of a local site."""

from __future__ import annotations

import json
import re

import anyio

from spire.report import render_report, report_data
from spire.report.page import page_html
from spire.site import SiteCrawl
from spire_core.ledger import LedgerView
from tests.sites.server import Site
from tests.spire.report.conftest import crawl, ledger_of

SETTINGS = {"start": "http://127.0.0.1/", "scope": "host"}


def _data(html: str) -> dict:  # type: ignore[type-arg]
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def test_the_page_inlines_everything_it_needs(crawled: tuple[Site, LedgerView, SiteCrawl]) -> None:
    _, ledger, _ = crawled
    html = anyio.run(lambda: render_report(ledger, settings=SETTINGS))
    # No element that loads anything: no src=, no stylesheet link, only the empty data: favicon.
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=", html)
    assert re.findall(r"<link[^>]*>", html) == ['<link rel="icon" href="data:,">']
    assert "uPlot" in html
    assert "leeoniya" in html
    assert "@import" not in html
    assert "url(http" not in html


def test_the_data_are_the_crawls_per_host_counts(crawled: tuple[Site, LedgerView, SiteCrawl]) -> None:
    site, ledger, site_crawl = crawled
    data = _data(anyio.run(lambda: render_report(ledger, settings=SETTINGS)))
    hosts = {row["origin"]: row for row in data["hosts"]}
    host = hosts[site.origin]
    # The off-site link's host: met, refused by the scope, never asked: folded into one row of such hosts.
    folded = hosts["not crawled: 1 host met as links only"]
    off_site = f"http://localhost:{site.port}"
    assert (folded["hosts"], folded["requests"], folded["skips"]) == ([off_site], 0, {"scope": 1})
    assert off_site not in hosts
    assert "" not in hosts  # the mailto: link is no host
    assert len(data["hosts"]) == 2
    # Every request the site answered, robots.txt and each try of /slow included, is in the table.
    assert host["requests"] == sum(site.hits(robots=True).values()) == site_crawl.stats.requests
    hits = site.hits(robots=True)
    assert host["statuses"]["404"] == hits["/missing"] + hits["/sitemap.xml"] == 2
    assert host["statuses"]["301"] == 1
    assert host["errors"] == {"timeout": 1}
    assert data["totals"]["requests"] == host["requests"]
    assert sum(count for _, count in data["latency"]) == host["requests"]
    assert sum(point[1] for point in data["timeline"]) == host["requests"]
    assert data["settings"] == SETTINGS
    assert data["failures"][0]["kind"] == "timeout"
    assert data["failures"][0]["samples"][0]["url"] == site.url("/slow")
    assert data["failures"][0]["samples"][0]["referrer"] == site.url("/")
    skips = {group["reason"]: group for group in data["skips"]}
    assert skips["robots"]["samples"] == [
        {"url": site.url("/private/x"), "referrer": site.url("/"), "detail": "Disallow: /private/", "change": None}
    ]
    assert skips["extension"]["samples"][0]["url"] == site.url("/report.pdf")
    assert skips["status"]["samples"][0]["url"] == site.url("/missing")
    assert data["totals"]["failed"] == 1


def test_only_the_first_page_of_urls_is_inlined() -> None:
    with Site() as site:
        links = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(150))
        site.page("/", f"<html><body>{links}</body></html>")
        for i in range(150):
            site.page(f"/p/{i}", f"<html><body>page {i} {'word ' * 25}</body></html>")
        ledger = ledger_of(anyio.run(crawl, site.url("/")))
    data = anyio.run(lambda: report_data(ledger, settings={}))
    assert data["entries"]["total"] == 153  # robots.txt, sitemap.xml, the start page, 150 pages
    assert len(data["entries"]["first"]["all"]) == 100


def test_a_crawled_url_cannot_end_the_data_script_early() -> None:
    data = {"title": "t</script><script>alert(1)</script>", "hosts": [{"origin": "</script><!--"}]}
    html = page_html(data)
    assert html.count("</script>") == 3  # the data's, uPlot's and the page's own
    assert "<title>t&lt;/script&gt;" in html
    assert _data(html) == data
