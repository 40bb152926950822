"""Scope predicates: registrable domain by the Public Suffix List, same host name, same origin."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spire_core.url import absolute, registrable_domain, same_domain, same_hostname, same_origin


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("a.example.co.uk", "example.co.uk"),
        ("example.co.uk", "example.co.uk"),
        ("deep.a.example.com", "example.com"),
        ("x.github.io", "x.github.io"),  # github.io is in the list's private section
        ("a.x.github.io", "x.github.io"),
        ("github.io", "github.io"),  # a public suffix is its own domain
        ("co.uk", "co.uk"),
        ("WWW.Example.COM.", "example.com"),
        ("a.b.c.kawasaki.jp", "b.c.kawasaki.jp"),  # wildcard rule *.kawasaki.jp
        ("city.kawasaki.jp", "city.kawasaki.jp"),  # exception rule !city.kawasaki.jp
        ("xn--85x722f.xn--55qx5d.cn", "xn--85x722f.xn--55qx5d.cn"),  # 公司.cn is a suffix, in punycode
        ("foo.bar.internal", "bar.internal"),  # an unknown top-level label counts as a suffix
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "[::1]"),
    ],
)
def test_registrable_domain_follows_the_public_suffix_list(host: str, domain: str) -> None:
    assert registrable_domain(host) == domain


def test_subdomains_of_one_registrable_domain_are_the_same_domain() -> None:
    assert same_domain("http://a.example.co.uk/x", "https://b.example.co.uk:8443/y")
    assert same_domain("http://example.co.uk/", "http://shop.example.co.uk/")


def test_sites_under_a_private_suffix_are_different_domains() -> None:
    assert not same_domain("https://x.github.io/", "https://y.github.io/")
    assert same_domain("https://x.github.io/", "https://docs.x.github.io/")


def test_different_registrants_under_one_public_suffix_are_different_domains() -> None:
    assert not same_domain("http://example.co.uk/", "http://other.co.uk/")
    assert not same_domain("http://127.0.0.1:1/", "http://127.0.0.2:1/")


def test_same_hostname_ignores_scheme_port_case_and_trailing_dot() -> None:
    assert same_hostname("http://Example.com/", "https://example.com.:8443/a")
    assert not same_hostname("http://example.com/", "http://www.example.com/")


def test_same_origin_compares_scheme_host_and_port_with_default_ports_dropped() -> None:
    assert same_origin("http://example.com/a", "http://EXAMPLE.com:80/b")
    assert not same_origin("http://example.com/", "https://example.com/")
    assert not same_origin("http://127.0.0.1:8000/", "http://127.0.0.1:8001/")


@pytest.mark.parametrize("predicate", [same_domain, same_hostname, same_origin])
def test_a_scope_predicate_is_false_for_a_url_it_cannot_parse(predicate: Callable[[str, str], bool]) -> None:
    assert predicate("http://example.com/", "mailto:someone@example.com") is False
    assert predicate("not a url", "not a url") is False


def test_absolute_accepts_only_absolute_urls_and_drops_the_fragment() -> None:
    assert absolute(" http://Example.com/a#top ") == "http://example.com/a"
    assert absolute("/relative/path") is None
    assert absolute("http://[::1") is None
