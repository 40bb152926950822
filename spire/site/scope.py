"""Which URLs belong to a site crawl: the seed's host and port, its registrable domain, or a path prefix."""

from __future__ import annotations

from typing import Literal

from spire_core import url as urls
from spire_core.errors import SpireError

__all__ = ["Scope"]

Scope = Literal["host", "domain", "prefix"]


def _authority(url: str) -> str:
    """host[:port] of ``url``: http and https on their default ports give the same authority."""
    return urls.origin(url).partition("//")[2]


def _same_authority(url: str, other: str) -> bool:
    try:
        return _authority(url) == _authority(other)
    except SpireError:
        return False


def _site_key(url: str) -> tuple[str, str]:
    """(registrable domain, port): a site is a registrable domain on one port."""
    host = urls.host_of(url)
    authority = _authority(url)
    port = authority[len(host) :] if authority.startswith(host) else ""
    return urls.registrable_domain(host), port


def _path_prefix(url: str) -> str:
    """host[:port] and the directory of ``url``'s path: what scope ``prefix`` keeps."""
    canonical = urls.canonicalize(url).partition("?")[0]
    rest = canonical.partition("//")[2]
    return rest[: rest.rindex("/") + 1]


class _Scope:
    """Which URLs belong to the crawl: the seed's host and port, its registrable domain, or a path prefix."""

    def __init__(self, seed_url: str, kind: Scope) -> None:
        self.kind = kind
        self._authorities: set[str] = set()
        self._sites: set[tuple[str, str]] = set()
        self._prefixes: list[str] = []
        self.add(seed_url)

    def add(self, url: str) -> None:
        """Widen the scope by ``url``'s host (a seed redirected to another host of the same site)."""
        self._authorities.add(_authority(url))
        self._sites.add(_site_key(url))
        if self.kind == "prefix":
            self._prefixes.append(_path_prefix(url))

    def same_site(self, url: str) -> bool:
        """Whether ``url`` is on this site: the same registrable domain, on the same port."""
        try:
            return _site_key(url) in self._sites
        except SpireError:
            return False

    def covers_host(self, url: str) -> bool:
        """Whether some URLs of ``url``'s host are in scope (its sitemaps are worth reading)."""
        if self.kind == "domain":
            return self.same_site(url)
        try:
            return _authority(url) in self._authorities
        except SpireError:
            return False

    def __contains__(self, url: str) -> bool:
        if not self.covers_host(url):
            return False
        if self.kind == "prefix":
            rest = urls.canonicalize(url).partition("//")[2]
            return any(rest.startswith(prefix) for prefix in self._prefixes)
        return True
