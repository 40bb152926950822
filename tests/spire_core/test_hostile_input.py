"""Property tests: the parsers a crawler feeds with hostile input raise only spire's errors, never hang,
and never read a local file.

Bounded (few examples, a deadline each) so the whole module runs in a few seconds; ``derandomize``
keeps a CI run reproducible.
"""

from __future__ import annotations

import contextlib
import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spire import Crawler, Html, Links, Response, Router, Seed
from spire_core import FunctionBackend, html, url
from spire_core.encoding import decode, sniff_encoding
from spire_core.errors import InvalidUrl, SpireError
from spire_core.response import Headers, decode_body
from spire_core.robots import Robots
from spire_core.sitemaps import parse_sitemap

BOUNDED = settings(
    max_examples=150,
    deadline=2000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Pieces that make parsers work: markup, escapes, separators, odd bytes and characters.
_URL_PIECES = [
    "a", "Z", "0", "9", "-", ".", "_", "~", "%", "%2e", "%2E", "%41", "%7e", "%25", "%00", "%ff", "%%", "/", "//",
    "?", "#", "&", "=", ";", ":", "@", "[", "]", "\\", " ", "\t", "\n", "..", "é", "\u3000", "\ufffd", "xn--",
    "[::1]", ":80", ":0", ":99999", "0x7f", "1", "%C3%A9", "\x00", "\ud800",
]  # fmt: skip
url_text = st.lists(st.sampled_from(_URL_PIECES) | st.text(max_size=3), max_size=25).map("".join)
hosts = st.sampled_from(
    ["example.com", "EXAMPLE.com.", "a..", "127.0.0.1", "[::1]", "bücher.de", "0x7f.1..", "%41.com", "u:p@h", "h:8080"]
)
urls = st.builds(
    lambda scheme, host, rest: scheme + host + rest,
    st.sampled_from(["http://", "https://", "HTTP://", "", "ftp://", "http:"]),
    hosts,
    url_text,
)

_MARKUP = [
    "<", ">", "</", "<!--", "-->", "<meta", " charset=", "http-equiv=content-type", " content=", "'", '"', "=",
    "<a href=", "<link rel=canonical href=", "<meta name=robots content=", "noindex", "nofollow", "none",
    "<base href=", "<title>", "</title>", "<p>", "<pre>", "<br>", "<script>", "<svg>", "&amp;", "&#x0;", "&#99999999;",
    "utf-16", "x-user-defined", "hex", "base64", "rot13", "iso-2022-kr", "utf-7", "latin1", "\x00", "\xff", "é",
]  # fmt: skip
markup = st.lists(st.sampled_from(_MARKUP) | st.text(max_size=4), max_size=40).map("".join)
raw_bytes = st.binary(max_size=300) | markup.map(lambda text: text.encode("utf-8", "surrogatepass"))


# -- robots.txt -----------------------------------------------------------------------------------

_ROBOTS_LINES = [
    "User-agent: *", "User-agent: FooBot", "useragent foobot", "Disallow: /", "Disallow: /a*b$", "Allow: /a",
    "Disallow:", "Crawl-delay: 5", "Crawl-delay: -1", "Crawl-delay: 1e400", "Crawl-delay: nan", "Sitemap: /s.xml",
    "Sitemap: http://[::1", "Content-Signal: ai-train=no", "Content-Usage: /x train-ai=n", "# comment", "",
    "\ufeff", "\xef\xbb", "Disallow: /%", "Allow: /%E3%83%84", "Disallow: *", "Disallow: $",
]  # fmt: skip
robots_text = st.lists(st.sampled_from(_ROBOTS_LINES) | st.text(max_size=12), max_size=20).map("\n".join)


@BOUNDED
@given(robots_text | st.binary(max_size=300), st.text(max_size=12), urls | url_text)
def test_robots_parsing_and_matching_never_fail(text: str | bytes, agent: str, target: str) -> None:
    rules = Robots.parse(text, agent, url="https://a.example/robots.txt")
    with contextlib.suppress(SpireError):
        rules.allows(target)
    with contextlib.suppress(SpireError):
        rules.allows_use(target, "ai-train")
    delay = rules.crawl_delay()
    assert delay is None or 0 <= delay <= 30
    for sitemap in rules.sitemaps():
        assert isinstance(sitemap, str)


# -- sitemaps -------------------------------------------------------------------------------------

_SITEMAP_PIECES = [
    '<?xml version="1.0"?>', "\n", "  ", '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
    "</urlset>", "<sitemapindex>", "</sitemapindex>", "<url>", "</url>", "<sitemap>", "</sitemap>", "<loc>",
    "</loc>", "http://a.example/1", "https://a.example/x?a=1&amp;b=2", "/relative", "&bogus;", "<![CDATA[x]]>",
    '<rss version="2.0"><channel>', "</channel></rss>", "<item>", "</item>", "<link>", "</link>", "<guid>",
    '<feed xmlns="http://www.w3.org/2005/Atom">', "</feed>", "<entry>", "</entry>", '<link href="http://a.example/e"/>',
    '<link rel="self" href="x"/>', "<!DOCTYPE x [<!ENTITY e 'boom'>]>", "\x00", "\ufeff", "<", ">",
]  # fmt: skip
sitemap_body = st.lists(st.sampled_from(_SITEMAP_PIECES) | st.text(max_size=5), max_size=30).map(
    lambda parts: "".join(parts).encode("utf-8", "surrogatepass")
)


@BOUNDED
@given(sitemap_body | st.binary(max_size=300), st.booleans())
def test_sitemap_parsing_never_fails(body: bytes, gzipped: bool) -> None:
    data = gzip.compress(body) if gzipped else body
    for candidate in (data, data[: len(data) // 2]):  # a cut file (a gzip stream ending early) too
        sitemap = parse_sitemap(candidate, max_urls=50)
        assert len(sitemap.urls) <= 50
        assert all(found.lower().startswith(("http://", "https://")) for found in (*sitemap.urls, *sitemap.sitemaps))


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("xxe") / "secret.txt"
    path.write_text("http://a.example/TOP-SECRET-CONTENT")
    return path


@BOUNDED
@given(st.sampled_from(["loc", "link", "guid"]), st.sampled_from(["SYSTEM", "PUBLIC 'x'"]), st.booleans())
def test_no_sitemap_reads_a_local_file(secret_file: Path, element: str, kind: str, gzipped: bool) -> None:
    body = (
        f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe {kind} "{secret_file.as_uri()}">'
        f'<!ENTITY % p {kind} "{secret_file.as_uri()}"> %p;]>'
        f"<urlset><url><{element}>&xxe;</{element}></url></urlset>"
        f'<rss version="2.0"><channel><item><{element}>&xxe;</{element}></item></channel></rss>'
    ).encode()
    sitemap = parse_sitemap(gzip.compress(body) if gzipped else body)
    assert "TOP-SECRET" not in repr(sitemap)


# -- URLs and seeds -------------------------------------------------------------------------------


@BOUNDED
@given(urls)
def test_canonical_keys_are_idempotent_and_seeds_fail_only_with_invalid_url(given_url: str) -> None:
    try:
        key = url.canonicalize(given_url)
    except InvalidUrl:
        with pytest.raises(InvalidUrl):
            Seed(given_url)
        return
    assert url.canonicalize(key) == key
    seed = Seed(given_url)
    assert seed.unique_key == key
    assert Seed(key).unique_key == key
    assert url.origin(given_url) == seed.origin


@BOUNDED
@given(urls, url_text)
def test_joining_garbage_hrefs_gives_none_or_a_url(base: str, href: str) -> None:
    joined = url.join(base, href)
    assert joined is None or "#" not in joined
    url.absolute(href)


# -- response decoding ----------------------------------------------------------------------------

_CHARSETS = [
    "utf-8", "latin1", "utf-16", "utf-32", "hex", "base64", "zlib", "rot13", "uu", "bz2", "undefined", "idna",
    "x-user-defined", "iso-2022-kr", "utf-7", "punycode", "unicode_escape", "", '"', "\x00",
]  # fmt: skip


@BOUNDED
@given(raw_bytes, st.sampled_from(_CHARSETS) | st.text(max_size=10), st.booleans())
def test_decoding_any_body_with_any_charset_never_fails(body: bytes, charset: str, as_meta: bool) -> None:
    if as_meta:
        body = f'<meta charset="{charset}">'.encode("utf-8", "surrogatepass") + body
        content_type = "text/html"
    else:
        content_type = f"text/html; charset={charset}"
    # Raw header bytes, as a server sends them (httpx decodes them as ASCII, UTF-8 or Latin-1).
    headers = Headers([(b"content-type", content_type.encode("utf-8", "surrogatepass"))])
    content_type = headers["content-type"]
    response = Response(url="http://a.example/", status=200, headers=headers, body=body)
    assert isinstance(response.text, str)
    assert isinstance(decode_body(body, content_type), str)
    encoding, skip = sniff_encoding(body, content_type)
    assert isinstance(decode(body[skip:], encoding), str)


# -- directives, canonical links, text ------------------------------------------------------------


@BOUNDED
@given(markup | raw_bytes, st.lists(st.tuples(st.sampled_from(["x-robots-tag", "X-Robots-Tag"]), markup), max_size=3))
def test_reading_a_page_never_fails(document: str | bytes, headers: list[tuple[str, str]]) -> None:
    rules = html.Directives.read(document, headers, "ExampleBot")
    assert isinstance(rules.index, bool)
    tree = html.parse(document)
    html.canonical(tree)
    html.title(tree)
    html.metas(tree)
    assert isinstance(html.text(tree), str)
    page = html.selector(
        document if isinstance(document, bytes) else document.encode("utf-8", "surrogatepass"),
        "utf-8",
        "http://a.example/",
    )
    assert isinstance(html.text(page), str)


# -- Links on garbage hrefs -----------------------------------------------------------------------


@settings(BOUNDED, max_examples=25)
@given(st.lists(url_text | urls, min_size=1, max_size=8), st.sampled_from(["", '<base href="', '<base href="//']))
def test_links_on_garbage_hrefs_are_followed_or_counted_never_a_crash(hrefs: list[str], base: str) -> None:
    from html import escape

    anchors = "".join(f'<a href="{escape(href, quote=True)}">x</a>' for href in hrefs)
    head = f'{base}{escape(hrefs[0], quote=True)}">' if base else ""
    page = f"<html><head>{head}</head><body>{anchors}</body></html>".encode("utf-8", "surrogatepass")

    async def fetch(seed: Seed) -> Response:
        if seed.url.endswith("/robots.txt"):
            return Response(url=seed.url, status=404)
        body = page if seed.depth == 0 else b"<p>leaf</p>"
        return Response(url=seed.url, status=200, headers=Headers({"content-type": "text/html"}), body=body)

    router = Router()

    @router.default
    async def handle(document: Html, links: Links) -> None:
        await links.all()

    stats = Crawler(router, backend=FunctionBackend(fetch), max_requests=20).run(["http://a.example/"])
    assert stats.failed == 0
