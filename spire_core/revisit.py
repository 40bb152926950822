"""What a recrawl keeps of a page between crawls, and what it finds of it: plain values.

``Revisit`` is a page's state from the crawl before, carried by its revisit seed (``Seed.revisit``):
its validators, whose ``conditions`` the request path sends (``If-None-Match``, ``If-Modified-Since``),
and its fingerprint. ``PageNote`` is what handling a seed found of its page, ``PageState`` a page's
line in the index a recrawl starts from, ``PageChange`` what settling a seed did to its page (a
``Change``, and ``How`` it was known). The rules that make them are in ``spire_core.recrawl``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

__all__ = ["Change", "How", "PageChange", "PageNote", "PageState", "Revisit", "conditions"]


class Change(enum.StrEnum):
    """What a recrawl found of a page."""

    #: Kept this time, not the time before.
    NEW = "new"
    #: Kept both times; its fingerprint differs.
    CHANGED = "changed"
    #: Kept both times with the same fingerprint, confirmed by a 304, or presumed (``How``).
    UNCHANGED = "unchanged"
    #: Kept the time before; now 404 or 410, or no longer kept (robots.txt, ``noindex``...).
    GONE = "gone"
    #: Kept the time before; its revisit failed (a timeout, a 5xx after every try, robots.txt unreachable,
    #: a block page). Tried again next time.
    FAILED = "failed"


class How(enum.StrEnum):
    """How a page's change was known."""

    #: Fetched whole, and its fingerprint compared (or, for a new page, taken).
    FETCHED = "fetched"
    #: The server answered the conditional request with 304 Not Modified: no body was sent.
    NOT_MODIFIED = "not-modified"
    #: Not fetched: its sitemap ``lastmod`` has not moved, on a host whose ``lastmod`` proved reliable.
    LASTMOD = "sitemap-lastmod"
    #: Not fetched: the revisit policy put it off (unchanged for several recrawls in a row).
    NOT_DUE = "not-due"


@dataclasses.dataclass(frozen=True, slots=True)
class Revisit:
    """A page's state from the crawl before, carried by its revisit seed (``Seed.revisit``)."""

    etag: str | None = None
    last_modified: str | None = None
    #: Its fingerprint then (``spire_core.recrawl.fingerprint``).
    hash: str | None = None
    #: Its sitemap ``lastmod`` then, as the sitemap wrote it.
    lastmod: str | None = None
    #: When it last changed (seconds since the epoch).
    changed_at: float | None = None
    #: Revisits in a row that found it unchanged.
    streak: int = 0

    def as_json(self) -> dict[str, Any]:
        return {name: value for name, value in dataclasses.asdict(self).items() if value is not None}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Revisit:
        return cls(**{field.name: value[field.name] for field in dataclasses.fields(cls) if field.name in value})


def conditions(revisit: Revisit) -> dict[str, str]:
    """The conditional request headers of a revisit (RFC 9110 13.1): ``If-None-Match`` from the ETag,
    ``If-Modified-Since`` from ``Last-Modified``."""
    found: dict[str, str] = {}
    if revisit.etag:
        found["If-None-Match"] = revisit.etag
    if revisit.last_modified:
        found["If-Modified-Since"] = revisit.last_modified
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class PageNote:
    """What handling a seed found of its page: the page's status, validators and fingerprint.

    ``how`` is ``FETCHED`` or ``NOT_MODIFIED``, or ``LASTMOD`` for a revisit not fetched (no status);
    ``unchanged`` says a revisit found it unchanged (its handler did not run). ``lastmod`` is its
    sitemap ``lastmod`` as the crawl knew it then.
    """

    status: int | None
    etag: str | None = None
    last_modified: str | None = None
    hash: str | None = None
    how: How = How.FETCHED
    unchanged: bool = False
    lastmod: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PageState:
    """A page's state in the index a recrawl starts from (one per page kept)."""

    etag: str | None
    last_modified: str | None
    hash: str | None
    lastmod: str | None
    changed_at: float
    checked_at: float
    #: Revisits in a row that found it unchanged.
    streak: int
    #: The generation from which it is due for a revisit.
    due: int

    def revisit(self) -> Revisit:
        return Revisit(self.etag, self.last_modified, self.hash, self.lastmod, self.changed_at, self.streak)


@dataclasses.dataclass(frozen=True, slots=True)
class PageChange:
    """What a seed's settling did to its page: the change to report, and the page's new state
    (``None``: leave the index as it is; ``drop``: the page is gone from it)."""

    change: Change
    how: How | None
    hash: str | None
    previous_hash: str | None
    changed_at: float | None
    state: PageState | None = None
    drop: bool = False
    #: For a host's sitemap ``lastmod``: ``True`` it proved right (unmoved, content unchanged),
    #: ``False`` wrong (unmoved, content changed), ``None`` no evidence.
    lastmod_right: bool | None = None
