"""URLs: validation, joining, the canonical form used for deduplication, and origins.

The canonical form drops the fragment, sorts the query parameters, normalises percent-encoding
(upper-case hex, unreserved characters decoded), lower-cases the scheme and host, drops a trailing
dot from the host and the default port. Requests still go out as written; the canonical form is
only a key.

Parsing and joining go through ada-url, a compiled WHATWG URL parser: joining a link costs about
2 µs against about 6 µs for ``urljoin`` plus ``urldefrag``, and it runs once per link on the hot path.
"""

from __future__ import annotations

import re
from functools import lru_cache

import ada_url

from spire_core.errors import InvalidUrl

__all__ = ["canonicalize", "check", "host_of", "join", "origin", "strip_fragment"]

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
