"""Credentials per origin: the headers that carry them go to their own origin only.

    with_credentials(seed, {"https://api.example": {"Authorization": "Bearer ..."}})

A crawl's ``credentials=`` map an origin to its headers; every request to that origin carries them
(the seed's own headers win), and no other request does: a redirect hop that leaves the origin
leaves them behind, and a backend refuses them as headers for every host.
"""

from __future__ import annotations

from collections.abc import Mapping

from spire_core.seed import Seed

__all__ = ["CREDENTIAL_HEADERS", "with_credentials"]

#: Headers that carry credentials: they go to the seed's own origin only, never across a redirect.
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


def with_credentials(seed: Seed, credentials: Mapping[str, Mapping[str, str]]) -> Seed:
    """``seed`` with its origin's credentials added (its own headers win)."""
    return seed.with_headers(credentials.get(seed.origin) or {})
