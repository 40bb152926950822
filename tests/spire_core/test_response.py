"""Decoding a response's text: header charset, BOM, meta charset, then detection."""

from __future__ import annotations

import codecs

import pytest

from spire import Crawler, Html, Router, Seed, Text
from spire.testing import FunctionBackend
from spire_core.errors import ConfigError
from spire_core.response import Headers, Response


def response(body: bytes, content_type: str | None = "text/html") -> Response:
    headers = Headers({"content-type": content_type} if content_type else {})
    return Response(url="http://example.com/", status=200, headers=headers, body=body)


def test_the_header_charset_comes_first() -> None:
    assert response("café".encode("latin-1"), "text/html; charset=ISO-8859-1").text == "café"


def test_a_bom_wins_over_the_header() -> None:
    body = codecs.BOM_UTF8 + "naïve".encode()
    assert response(body, "text/html; charset=latin-1").text == "naïve"


def test_a_meta_charset_is_read_when_the_header_has_none() -> None:
    body = b'<html><head><meta charset="windows-1251"></head><body>' + "Привет".encode("cp1251") + b"</body>"
    assert "Привет" in response(body).text


def test_utf8_is_used_when_it_decodes_and_detection_otherwise() -> None:
    assert response("ünïcode".encode()).text == "ünïcode"
    latin = ("Les élèves étudient à l'école française. " * 20).encode("cp1252")
    assert "élèves" in response(latin, None).text


def test_an_unknown_charset_falls_back_without_crashing() -> None:
    assert response(b"plain", "text/html; charset=x-nonsense").text == "plain"


def test_headers_given_as_a_dict_or_pairs_are_read_as_headers() -> None:
    for given in ({"Content-Type": "text/html; charset=utf-8"}, [("Content-Type", "text/html; charset=utf-8")]):
        response = Response(url="http://a.example/", status=200, headers=given, body=b"<p>x</p>")
        assert isinstance(response.headers, Headers)
        assert response.content_type == "text/html"
        assert response.headers.get_list("content-type") == ["text/html; charset=utf-8"]


@pytest.mark.parametrize("given", ["Content-Type: text/html", 5, {"Content-Length": 5}])
def test_headers_that_are_not_headers_are_refused_at_once(given: object) -> None:
    with pytest.raises(ConfigError, match="Response headers"):
        Response(url="http://a.example/", status=200, headers=given)  # type: ignore[arg-type]


def test_a_crawl_through_the_test_seam_reads_a_response_made_with_dict_headers() -> None:
    async def fake(seed: Seed) -> Response:
        headers = {"Content-Type": "text/html; charset=utf-8", "X-Robots-Tag": "noindex"}
        return Response(url=seed.url, status=200, headers=headers, body=b"<h1>Dune</h1>")

    router = Router()
    seen: list[str] = []

    @router.default
    async def page(html: Html, text: Text) -> None:
        seen.append(text)

    stats = Crawler(router, backend=FunctionBackend(fake), robots=False).run([Seed("http://127.0.0.1:9/book")])
    assert (stats.finished, stats.failed) == (1, 0)
    assert seen == ["Dune"]
