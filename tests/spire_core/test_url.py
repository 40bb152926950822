"""Canonical URLs, joining and origins."""

from __future__ import annotations

import pytest

from spire_core import url
from spire_core.errors import InvalidUrl
from spire_core.seed import Seed


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("HTTP://Example.COM/a#frag", "http://example.com/a"),
        ("http://example.com./a", "http://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com/?b=2&a=1&a=0", "http://example.com/?a=0&a=1&b=2"),
        ("http://example.com/%7euser/%2f", "http://example.com/~user/%2F"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/a/../b/./c", "http://example.com/b/c"),
        ("http://example.com/?", "http://example.com/"),
    ],
)
def test_canonical_form(given: str, canonical: str) -> None:
    assert url.canonicalize(given) == canonical


@pytest.mark.parametrize("bad", ["not a url", "http://", "ftp://example.com/", "mailto:a@b.c", "http://[::1"])
def test_canonicalize_rejects_what_cannot_be_crawled(bad: str) -> None:
    with pytest.raises(InvalidUrl):
        url.canonicalize(bad)


def test_join_resolves_and_drops_the_fragment() -> None:
    assert url.join("http://a.example/x/y", "../z?q=1#top") == "http://a.example/z?q=1"
    assert url.join("http://a.example/x/", "  b  ") == "http://a.example/x/b"
    assert url.join("http://a.example/", "http://[broken") is None


def test_origin_is_scheme_host_and_port() -> None:
    assert url.origin("http://Shop.Example.:80/a?b") == "http://shop.example"
    assert url.origin("https://shop.example:8443/") == "https://shop.example:8443"
    assert url.host_of("http://Shop.Example./") == "shop.example"


@pytest.mark.parametrize(
    ("base", "href", "joined"),
    [
        ("http://a.example/x/y.html", "z.html", "http://a.example/x/z.html"),
        ("http://a.example/x/y.html?q=/p/q", "z.html", "http://a.example/x/z.html"),
        ("http://a.example/x/y.html", "../z", "http://a.example/z"),
        ("http://a.example/x/y.html", "?q", "http://a.example/x/y.html?q"),
        ("http://a.example/x/y.html", "#f", "http://a.example/x/y.html"),
        ("http://a.example/x/y.html", "//b.example/c", "http://b.example/c"),
        ("http://a.example", "z", "http://a.example/z"),
        ("http://a.example/x\\y.html", "z", "http://a.example/x/z"),
        ("http://a.example/x/./y.html", "z", "http://a.example/x/z"),
    ],
)
def test_joins_cached_by_directory_match_a_fresh_join(base: str, href: str, joined: str) -> None:
    # Twice: the second answer may come from the cache keyed by the base's directory.
    assert url.join(base, href) == joined
    assert url.join(base, href) == joined
    other_page = base.replace("y.html", "other.html")
    if href[0] not in "?#" and "y.html" in base:
        assert url.join(other_page, href) == joined


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("http://h.example/%%36%31", "http://h.example/%2561"),
        ("http://h.example/a%2", "http://h.example/a%252"),
        ("http://h.example/?q=%%41&a=%7e", "http://h.example/?a=~&q=%25A"),
        ("http://example.com../a", "http://example.com/a"),
        ("http://0x7f.1../", "http://127.0.0.1/"),
        ("https://user:secret@Example.COM./x", "https://example.com/x"),
    ],
)
def test_the_canonical_form_is_its_own_canonical_form(given: str, canonical: str) -> None:
    assert url.canonicalize(given) == canonical
    assert url.canonicalize(canonical) == canonical


def test_credentials_are_not_part_of_the_key() -> None:
    assert Seed("https://a:b@shop.example/p").unique_key == Seed("https://shop.example/p").unique_key
    assert "secret" not in Seed("https://user:secret@shop.example/p").unique_key


def test_origin_agrees_with_the_parse_on_control_characters() -> None:
    # ada-url strips trailing C0 controls: the cached prefix path must not read them as part of the host.
    assert url.origin("http://example.com\x1b") == url.split("http://example.com\x1b").origin == "http://example.com"
