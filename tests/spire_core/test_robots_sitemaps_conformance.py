"""Scrapy's robots.txt sitemap case, read by spire's robots parser.

The case is ``test_sitemap_urls_from_robots`` of Scrapy's ``tests/test_utils_sitemap.py`` (commit
099b6e47e01374f37da896c6522ef6647662ec54), copied here whole: its file and the sitemaps it expects.
"""

from __future__ import annotations

from spire_core.robots import Robots

SCRAPY_ROBOTS = """User-agent: *
Disallow: /aff/
Disallow: /wl/

# Search and shopping refining
Disallow: /s*/*facet
Disallow: /s*/*tags

# Sitemap files
Sitemap: http://example.com/sitemap.xml
Sitemap: http://example.com/sitemap-product-index.xml
Sitemap: HTTP://example.com/sitemap-uppercase.xml
Sitemap: /sitemap-relative-url.xml

# Forums
Disallow: /forum/search/
Disallow: /forum/active/
"""


def test_scrapys_sitemap_lines_from_robots_resolve_against_the_robots_txt_url() -> None:
    assert Robots.parse(SCRAPY_ROBOTS, url="http://example.com/robots.txt").sitemaps() == [
        "http://example.com/sitemap.xml",
        "http://example.com/sitemap-product-index.xml",
        "http://example.com/sitemap-uppercase.xml",
        "http://example.com/sitemap-relative-url.xml",
    ]
