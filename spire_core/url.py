"""URLs: validation, joining, the canonical form used for deduplication, and origins.

The canonical form drops the fragment, sorts the query parameters, normalises percent-encoding
(upper-case hex, unreserved characters decoded), lower-cases the scheme and host, drops a trailing
dot from the host and the default port. Requests still go out as written; the canonical form is
only a key.

Parsing and joining go through ada-url, a compiled WHATWG URL parser: joining a link costs about
2 µs against about 6 µs for ``urljoin`` plus ``urldefrag``, and it runs once per link on the hot path.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from typing import Literal

import ada_url
from publicsuffixlist import PublicSuffixList

from spire_core.errors import InvalidUrl

__all__ = [
    "absolute",
    "canonicalize",
    "check",
    "host_of",
    "join",
    "origin",
    "registrable_domain",
    "same_domain",
    "same_hostname",
    "same_origin",
    "strip_fragment",
]

_HTTP_SCHEMES = frozenset({"http:", "https:"})
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _parse(url: str) -> ada_url.URL:
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        raise InvalidUrl(f"not a valid URL: {url!r}", url=url) from None
    if parsed.protocol not in _HTTP_SCHEMES:
        raise InvalidUrl(f"not an http(s) URL: {url!r}", url=url)
    if not parsed.hostname:
        raise InvalidUrl(f"URL has no host: {url!r}", url=url)
    return parsed


def check(url: str) -> str:
    """Return ``url`` unchanged when it is an absolute http(s) URL with a host; raise ``InvalidUrl``."""
    _parse(url)
    return url


def join(base: str, href: str) -> str | None:
    """Resolve ``href`` against ``base`` and drop its fragment; ``None`` when it is not a valid URL."""
    try:
        joined: str = ada_url.join_url(base, href.strip())
    except ValueError:
        return None
    hash_at = joined.find("#")
    return joined if hash_at < 0 else joined[:hash_at]


def strip_fragment(url: str) -> str:
    """``url`` without its ``#fragment``."""
    hash_at = url.find("#")
    return url if hash_at < 0 else url[:hash_at]


def _normalise_percent(part: str) -> str:
    if "%" not in part:
        return part

    def fix(match: re.Match[str]) -> str:
        byte = int(match.group(1), 16)
        return chr(byte) if byte in _UNRESERVED else "%" + match.group(1).upper()

    return _PERCENT.sub(fix, part)


def _host(parsed: ada_url.URL) -> str:
    host: str = parsed.hostname
    return host[:-1] if host.endswith(".") else host


def canonicalize(url: str) -> str:
    """The canonical form of an http(s) URL; raises ``InvalidUrl`` for anything else."""
    parsed = _parse(url)
    host = _host(parsed)
    port = f":{parsed.port}" if parsed.port else ""
    path = _normalise_percent(parsed.pathname) or "/"
    query = parsed.search
    if query:
        params = sorted(_normalise_percent(p) for p in query[1:].split("&") if p)
        query = "?" + "&".join(params) if params else ""
    return f"{parsed.protocol}//{host}{port}{path}{query}"


@lru_cache(maxsize=4096)
def _origin_of_authority(scheme: str, host: str, port: str) -> str:
    return f"{scheme}//{host}{':' + port if port else ''}"


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: the unit that host limits and robots rules apply to."""
    parsed = _parse(url)
    return _origin_of_authority(parsed.protocol, _host(parsed), parsed.port)


def host_of(url: str) -> str:
    """The lower-case host name of ``url``, without a trailing dot."""
    return _host(_parse(url))


# -- scope predicates ---------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _suffix_list() -> PublicSuffixList:
    # Parsing the shipped list takes a few milliseconds: do it once, on first need.
    return PublicSuffixList()


@lru_cache(maxsize=4096)
def registrable_domain(host: str) -> str:
    """The registrable domain of ``host`` by the Public Suffix List (the list the package ships).

    ``a.example.co.uk`` gives ``example.co.uk``; ``x.github.io`` gives ``x.github.io``, since
    ``github.io`` is a suffix anyone can register under. An IP address, a single label
    (``localhost``) or a public suffix itself is its own domain.
    """
    host = host.lower().removesuffix(".")
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return host
    domain: str | None = _suffix_list().privatesuffix(host)
    return domain if domain is not None else host


def _scope_key(url: str, part: Literal["hostname", "domain", "origin"]) -> str | None:
    try:
        parsed = _parse(url)
    except InvalidUrl:
        return None
    host = _host(parsed)
    if part == "hostname":
        return host
    if part == "domain":
        return registrable_domain(host)
    return _origin_of_authority(parsed.protocol, host, parsed.port)


def same_hostname(a: str, b: str) -> bool:
    """Whether two http(s) URLs have the same host name (any scheme or port); ``False`` if either is invalid."""
    key = _scope_key(a, "hostname")
    return key is not None and key == _scope_key(b, "hostname")


def same_domain(a: str, b: str) -> bool:
    """Whether two http(s) URLs share a registrable domain (see ``registrable_domain``)."""
    key = _scope_key(a, "domain")
    return key is not None and key == _scope_key(b, "domain")


def same_origin(a: str, b: str) -> bool:
    """Whether two http(s) URLs have the same scheme, host and port."""
    key = _scope_key(a, "origin")
    return key is not None and key == _scope_key(b, "origin")


def absolute(url: str) -> str | None:
    """``url`` parsed on its own (it must be absolute), without its fragment; ``None`` when it is not a URL."""
    try:
        href: str = ada_url.URL(url.strip()).href
    except ValueError:
        return None
    return strip_fragment(href)
