"""Which URLs belong to a site crawl: the seeds' hosts and ports, registrable domains, or path prefixes.

``SiteScope`` is a ``Scope`` strategy of the engine's admission: ``Links`` asks it about each link,
the crawler about each redirect hop (a start seed moved to another host of the same site widens it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from spire_core import url as urls
from spire_core.errors import SpireError
from spire_core.seed import Seed

__all__ = ["Scope", "SiteScope", "same_authority"]

Scope = Literal["host", "domain", "prefix"]


def _authority(url: str) -> str:
    """host[:port] of ``url``: http and https on their default ports give the same authority."""
    return urls.origin(url).partition("//")[2]


def same_authority(url: str, other: str) -> bool:
    """Whether two URLs name the same host and port (http and https on their default ports alike)."""
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


class SiteScope:
    """Which URLs belong to the crawl: the seeds' hosts and ports, registrable domains, or path prefixes."""

    def __init__(self, seed_urls: Iterable[str], kind: Scope) -> None:
        self.kind = kind
        self._authorities: set[str] = set()
        self._sites: set[tuple[str, str]] = set()
        self._prefixes: list[str] = []
        for url in seed_urls:
            self.add(url)

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

    def admits(self, url: str) -> bool:
        """Whether ``url`` (an http(s) URL) is inside the scope as it stands."""
        try:
            if not self.covers_host(url):
                return False
            if self.kind == "prefix":
                rest = urls.canonicalize(url).partition("//")[2]
                return any(rest.startswith(prefix) for prefix in self._prefixes)
        except SpireError:
            return False
        return True

    def redirected(self, seed: Seed, target: str) -> bool:
        """Whether ``seed`` follows its redirect to ``target``; a start seed may widen the scope.

        A sitemap follows redirects on its own site only. A start seed redirected out of scope widens
        it to the target's host (and path prefix) when that is on the same site; to another site it
        still follows, and the handler keeps just that page. Any other seed stays in scope.
        """
        if seed.tag is not None:
            return self.same_site(target)
        if self.admits(target):
            return True
        if seed.depth == 0 and (seed.user_data or {}).get("seed"):
            if self.same_site(target):
                self.add(target)
            return True
        return False
