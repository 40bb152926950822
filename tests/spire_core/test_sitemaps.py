"""Sitemaps: the bounded, entity-safe parse of one file, and the reader that follows them."""

from __future__ import annotations

import gzip
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from spire_core.backend.http import HttpBackend
from spire_core.sitemaps import MAX_SITEMAP_URLS, SitemapReader, discover, parse_sitemap
from tests.sites.server import Site

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str, extra: str = "") -> bytes:
    entries = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}{extra}>{entries}</urlset>'.encode()


def index(*locs: str) -> bytes:
    entries = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {NS}>{entries}</sitemapindex>'.encode()


# -- one file -------------------------------------------------------------------------------------


def test_a_urlset_gives_its_page_urls_with_entities_decoded() -> None:
    sitemap = parse_sitemap(urlset("https://a.example/1", " https://a.example/2?x=1&amp;y=2 "))
    assert sitemap.urls == ("https://a.example/1", "https://a.example/2?x=1&y=2")
    assert sitemap.sitemaps == ()
    assert sitemap.problems == 0


def test_a_sitemap_index_gives_its_child_sitemaps() -> None:
    sitemap = parse_sitemap(index("https://a.example/s1.xml", "https://a.example/s2.xml.gz"))
    assert sitemap.sitemaps == ("https://a.example/s1.xml", "https://a.example/s2.xml.gz")
    assert sitemap.urls == ()


def test_gzip_is_recognised_by_its_magic_bytes() -> None:
    assert parse_sitemap(gzip.compress(urlset("https://a.example/1"))).urls == ("https://a.example/1",)
    assert parse_sitemap(gzip.compress(b"https://a.example/t\n")).urls == ("https://a.example/t",)


def test_a_plain_text_sitemap_has_one_url_a_line() -> None:
    body = b"\xef\xbb\xbfhttps://a.example/1\r\n\nhttps://a.example/2\n/relative\nnot a url\nhttps://a.example/3"
    sitemap = parse_sitemap(body)
    assert sitemap.urls == ("https://a.example/1", "https://a.example/2", "https://a.example/3")
    assert sitemap.problems == 2


def test_image_video_and_news_locs_are_not_pages() -> None:
    body = f"""<?xml version="1.0" encoding="UTF-8"?>
<urlset {NS}
    xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
    xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"
    xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">
  <url>
    <loc>https://a.example/page</loc>
    <image:image><image:loc>https://a.example/photo.jpg</image:loc></image:image>
    <image:image><loc>https://a.example/unprefixed-in-image.jpg</loc></image:image>
    <video:video>
      <video:content_loc>https://a.example/clip.mp4</video:content_loc>
      <video:loc>https://a.example/video-loc</video:loc>
    </video:video>
    <news:news><news:loc>https://a.example/news-loc</news:loc></news:news>
  </url>
</urlset>""".encode()
    sitemap = parse_sitemap(body)
    assert sitemap.urls == ("https://a.example/page",)
    assert sitemap.problems == 0


def test_a_billion_laughs_document_does_not_expand_or_hang() -> None:
    entities = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)]
    body = (
        '<?xml version="1.0"?>\n<!DOCTYPE urlset [\n' + "\n".join(entities) + "\n]>\n"
        f"<urlset {NS}><url><loc>https://a.example/&lol9;</loc></url>"
        "<url><loc>https://a.example/plain</loc></url></urlset>"
    ).encode()
    started = time.perf_counter()
    sitemap = parse_sitemap(body)
    assert time.perf_counter() - started < 2.0
    assert not any("lol" in url for url in sitemap.urls)
    assert sitemap.problems >= 1


def test_an_external_entity_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    body = (
        f'<?xml version="1.0"?>\n<!DOCTYPE urlset [<!ENTITY ext SYSTEM "{secret.as_uri()}">]>\n'
        f"<urlset {NS}><url><loc>https://a.example/&ext;</loc></url>"
        "<url><loc>https://a.example/after</loc></url></urlset>"
    ).encode()
    sitemap = parse_sitemap(body)
    assert sitemap.urls == ("https://a.example/after",)
    assert sitemap.problems == 1
    assert "TOPSECRET" not in repr(sitemap)


def test_malformed_xml_is_counted_and_keeps_the_urls_before_it() -> None:
    body = f"<urlset {NS}><url><loc>https://a.example/1</loc></url><url><loc>https://a.example/2?a=1&b=2</loc>".encode()
    sitemap = parse_sitemap(body)
    assert sitemap.urls == ("https://a.example/1",)
    assert sitemap.problems == 1
    assert "malformed XML" in sitemap.notes[0]


def test_a_document_that_is_not_a_sitemap_is_a_problem() -> None:
    sitemap = parse_sitemap(b"<html><body><p>Not found</p></body></html>")
    assert sitemap.urls == ()
    assert sitemap.problems == 1


def test_a_corrupt_gzip_stream_is_a_problem() -> None:
    data = bytearray(gzip.compress(urlset(*(f"https://a.example/{n}" for n in range(200)))))
    data[40:60] = b"\x00" * 20
    sitemap = parse_sitemap(bytes(data))
    assert sitemap.problems >= 1


def test_at_most_50000_urls_are_taken_from_a_file() -> None:
    body = urlset(*(f"https://a.example/{n}" for n in range(MAX_SITEMAP_URLS + 5)))
    sitemap = parse_sitemap(body)
    assert len(sitemap.urls) == MAX_SITEMAP_URLS
    assert sitemap.truncated
    assert sitemap.problems == 1
    assert len(parse_sitemap(body, max_urls=3).urls) == 3


def test_the_size_cap_counts_decompressed_bytes() -> None:
    # A small gzip file that inflates to 60 MiB: only the first 50 MiB are read, never all of it.
    bomb = gzip.compress(b"https://a.example/first\n" + b"\n" * (60 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 200 * 1024
    sitemap = parse_sitemap(bomb)
    assert sitemap.urls == ("https://a.example/first",)
    assert sitemap.truncated
    assert sitemap.problems == 1
    small = parse_sitemap(urlset(*(f"https://a.example/{n}" for n in range(100))), max_bytes=500)
    assert 0 < len(small.urls) < 100
    assert small.truncated


# -- finding sitemaps -----------------------------------------------------------------------------


def test_discover_keeps_listed_sitemaps_on_the_same_host_else_sitemap_xml() -> None:
    listed = ["https://a.example/s.xml", "https://cdn.example/s.xml", "http://a.example/s2.xml"]
    assert discover("https://a.example/page", listed) == ["https://a.example/s.xml", "http://a.example/s2.xml"]
    assert discover("https://a.example/page", ["https://cdn.example/s.xml"]) == ["https://a.example/sitemap.xml"]
    assert discover("https://a.example:8443/", []) == ["https://a.example:8443/sitemap.xml"]
    assert discover("https://a.example/", listed, keep=lambda url: "cdn" in url) == ["https://cdn.example/s.xml"]


# -- the reader, against local sites --------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def backend() -> AsyncIterator[HttpBackend]:
    client = HttpBackend(timeout=5)
    yield client
    await client.aclose()


def xml(site: Site, path: str, body: bytes) -> None:
    site.page(path, body, content_type="application/xml")


async def read_all(reader: SitemapReader, sitemaps: list[str], budget: int | None = None) -> list[str]:
    return [url async for url in reader.read(sitemaps, budget=budget)]


@pytest.mark.anyio
async def test_an_index_is_followed_to_sitemaps_on_its_own_host_only(
    site: Site, other_site: Site, backend: HttpBackend
) -> None:
    xml(site, "/index.xml", index(site.url("/a.xml"), other_site.url("/b.xml")))
    xml(site, "/a.xml", urlset(site.url("/page-a")))
    xml(other_site, "/b.xml", urlset(other_site.url("/page-b")))
    reader = SitemapReader(backend)
    assert await read_all(reader, [site.url("/index.xml")]) == [site.url("/page-a")]
    assert other_site.hits()["/b.xml"] == 0
    assert (reader.stats.files, reader.stats.skipped, reader.stats.urls) == (2, 1, 1)


@pytest.mark.anyio
async def test_gzip_and_plain_xml_are_told_apart_by_content_not_name(site: Site, backend: HttpBackend) -> None:
    site.page("/sitemap.xml", gzip.compress(urlset(site.url("/zipped"))), content_type="application/octet-stream")
    xml(site, "/sitemap.xml.gz", urlset(site.url("/plain")))
    site.page("/urls.txt", site.url("/text") + "\n", content_type="text/plain")
    reader = SitemapReader(backend)
    found = await read_all(reader, [site.url("/sitemap.xml"), site.url("/sitemap.xml.gz"), site.url("/urls.txt")])
    assert found == [site.url("/zipped"), site.url("/plain"), site.url("/text")]
    assert reader.stats.problems == 0


@pytest.mark.anyio
async def test_at_most_50_sitemap_files_are_opened(site: Site, backend: HttpBackend) -> None:
    children = [site.url(f"/s{n}.xml") for n in range(60)]
    xml(site, "/index.xml", index(*children))
    for n in range(60):
        xml(site, f"/s{n}.xml", urlset(site.url(f"/page{n}")))
    reader = SitemapReader(backend)
    found = await read_all(reader, [site.url("/index.xml")])
    assert len(found) == 49  # the index is the first of the 50 files
    assert reader.stats.files == 50
    assert sum(site.hits().values()) == 50
    assert reader.stats.skipped == 11


@pytest.mark.anyio
async def test_no_new_file_is_opened_once_the_budget_is_reached(site: Site, backend: HttpBackend) -> None:
    for n in range(3):
        xml(site, f"/s{n}.xml", urlset(site.url(f"/{n}/a"), site.url(f"/{n}/b")))
    reader = SitemapReader(backend)
    found = await read_all(reader, [site.url(f"/s{n}.xml") for n in range(3)], budget=3)
    # The second file pushes past the budget; it is read to its end, the third is never opened.
    assert found == [site.url("/0/a"), site.url("/0/b"), site.url("/1/a"), site.url("/1/b")]
    assert site.hits()["/s2.xml"] == 0


@pytest.mark.anyio
async def test_stopping_the_iteration_opens_no_further_file(site: Site, backend: HttpBackend) -> None:
    xml(site, "/s0.xml", urlset(site.url("/a")))
    xml(site, "/s1.xml", urlset(site.url("/b")))
    reader = SitemapReader(backend)
    async for _ in reader.read([site.url("/s0.xml"), site.url("/s1.xml")]):
        break
    assert site.hits()["/s1.xml"] == 0


@pytest.mark.anyio
async def test_a_missing_sitemap_is_not_an_error_but_a_failing_one_is(site: Site, backend: HttpBackend) -> None:
    site.page("/broken.xml", "oops", status=500)
    reader = SitemapReader(backend)
    assert await read_all(reader, [site.url("/sitemap.xml"), site.url("/broken.xml")]) == []
    assert (reader.stats.missing, reader.stats.errors) == (1, 1)


@pytest.mark.anyio
async def test_malformed_sitemaps_are_counted_not_raised(site: Site, backend: HttpBackend) -> None:
    xml(site, "/bad.xml", b"<urlset><url><loc>" + site.url("/ok").encode() + b"</loc></url><url><loc>")
    reader = SitemapReader(backend)
    assert await read_all(reader, [site.url("/bad.xml")]) == [site.url("/ok")]
    assert reader.stats.problems == 1


@pytest.mark.anyio
async def test_a_redirect_is_followed_on_the_same_host_only(site: Site, other_site: Site, backend: HttpBackend) -> None:
    site.page("/old.xml", "", status=301, headers={"Location": "/new.xml"})
    xml(site, "/new.xml", urlset(site.url("/moved")))
    site.page("/away.xml", "", status=302, headers={"Location": other_site.url("/s.xml")})
    xml(other_site, "/s.xml", urlset(other_site.url("/elsewhere")))
    reader = SitemapReader(backend)
    assert await read_all(reader, [site.url("/old.xml"), site.url("/away.xml")]) == [site.url("/moved")]
    assert other_site.hits()["/s.xml"] == 0
    assert reader.stats.skipped == 1


@pytest.mark.anyio
async def test_allows_is_asked_before_each_file(site: Site, backend: HttpBackend) -> None:
    xml(site, "/index.xml", index(site.url("/open.xml"), site.url("/private/closed.xml")))
    xml(site, "/open.xml", urlset(site.url("/a")))
    xml(site, "/private/closed.xml", urlset(site.url("/b")))
    asked: list[str] = []

    async def allows(url: str) -> bool:
        asked.append(url)
        return "/private/" not in url

    reader = SitemapReader(backend, allows=allows)
    assert await read_all(reader, [site.url("/index.xml")]) == [site.url("/a")]
    assert asked == [site.url("/index.xml"), site.url("/open.xml"), site.url("/private/closed.xml")]
    assert site.hits()["/private/closed.xml"] == 0


@pytest.mark.anyio
async def test_a_large_sitemap_is_read_whole(site: Site, backend: HttpBackend) -> None:
    pages = [site.url(f"/page/{n:06d}") for n in range(40_000)]
    site.page("/big.txt", "\n".join(pages), content_type="text/plain")
    reader = SitemapReader(backend)
    assert await read_all(reader, [site.url("/big.txt")]) == pages


# -- leading whitespace and feeds -------------------------------------------------------------------


@pytest.mark.parametrize("lead", [b"\n", b"\r\n\r\n", b"   \t\n", b"\xef\xbb\xbf\n  "])
def test_whitespace_before_the_xml_declaration_is_ignored(lead: bytes) -> None:
    sitemap = parse_sitemap(lead + urlset("https://a.example/1"))
    assert (sitemap.urls, sitemap.problems) == (("https://a.example/1",), 0)
    assert parse_sitemap(gzip.compress(lead + urlset("https://a.example/1"))).urls == ("https://a.example/1",)


def test_an_rss_feed_gives_the_link_of_each_item() -> None:
    feed = b"""<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>
  <title>News</title><link>https://a.example/</link>
  <atom:link href="https://a.example/feed.xml" rel="self"/>
  <item><title>One</title><link>https://a.example/one</link><guid>https://a.example/guid-one</guid></item>
  <item><title>Two</title><guid isPermaLink="true">https://a.example/two</guid></item>
  <item><title>Three</title><guid isPermaLink="false">tag:a.example,3</guid></item>
  <item><guid>https://a.example/guid-four</guid><link>https://a.example/four</link></item>
</channel></rss>"""
    sitemap = parse_sitemap(feed)
    assert sitemap.urls == ("https://a.example/one", "https://a.example/two", "https://a.example/four")
    assert sitemap.problems == 0


@pytest.mark.parametrize("namespace", ["http://www.w3.org/2005/Atom", "http://purl.org/atom/ns#"])
def test_an_atom_feed_gives_the_first_alternate_link_of_each_entry(namespace: str) -> None:
    feed = f"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="{namespace}">
  <link href="https://a.example/" /><link rel="self" href="https://a.example/atom.xml" />
  <entry><link rel="edit" href="https://a.example/1?edit"/><link href="https://a.example/1"/>
    <link rel="alternate" href="https://a.example/1?alt"/><id>urn:1</id></entry>
  <entry><link rel="alternate" type="text/html" href="https://a.example/2"/></entry>
  <entry><link rel="enclosure" href="https://a.example/2.mp3"/></entry>
</feed>""".encode()
    sitemap = parse_sitemap(feed)
    assert sitemap.urls == ("https://a.example/1", "https://a.example/2")
    assert sitemap.problems == 0


def test_an_empty_feed_is_no_problem() -> None:
    assert parse_sitemap(
        b'<rss version="2.0"><channel><link>https://a.example/</link></channel></rss>'
    ) == parse_sitemap(b"")
    assert parse_sitemap(b'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title></feed>').problems == 0
