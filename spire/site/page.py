"""What the site crawl hands out and counts: ``CrawlPage``, ``CrawlError`` and ``SkipReason``."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from spire_core.errors import SpireError
from spire_core.response import Headers

__all__ = ["CrawlError", "CrawlPage", "SkipReason"]


class SkipReason(enum.StrEnum):
    """Why the site crawl left a URL or a page out. ``stats.skipped(reason)`` counts each."""

    SCHEME = "scheme"  #: not an http or https URL
    SCOPE = "scope"  #: outside the crawl's scope (a redirect out of scope too)
    DUPLICATE = "duplicate"  #: queued before (canonical URL comparison)
    ROBOTS = "robots"  #: robots.txt disallows it
    ROBOTS_UNREACHABLE = "robots_unreachable"  #: its site's robots.txt could not be read after retries
    AI = "ai"  #: the site or page refuses AI training (with respect="ai-training")
    REDIRECTS = "redirects"  #: a redirect chain longer than five hops
    BLOCKED = "blocked"  #: a block page (challenge, captcha, block)
    STATUS = "status"  #: an error status
    CONTENT_TYPE = "content_type"  #: not HTML
    NOINDEX = "noindex"  #: the page asks not to be indexed
    NOFOLLOW = "nofollow"  #: a link marked rel="nofollow"
    CANONICAL = "canonical"  #: the page's canonical page was kept instead
    NEAR_DUPLICATE = "near_duplicate"  #: the same text, word for word, as a kept page


@dataclasses.dataclass(frozen=True, slots=True)
class CrawlPage:
    """A kept page: its URL after redirects, depth, status, HTML and readable text."""

    url: str
    depth: int
    status: int
    html: str
    text: str
    headers: Headers
    metas: Mapping[str, str]
    title: str | None

    def meta(self, name: str) -> str | None:
        """The content of ``<meta name=…>`` (or ``property=``), compared without case."""
        return self.metas.get(name.strip().lower())

    def to_json(self) -> dict[str, Any]:
        """The JSON line ``spire crawl`` writes for this page."""
        return {
            "url": self.url,
            "depth": self.depth,
            "status": self.status,
            "title": self.title,
            "text": self.text,
            "meta": dict(self.metas),
        }


@dataclasses.dataclass(frozen=True, slots=True)
class CrawlError:
    """A URL that failed for good (or was in flight at shutdown); the crawl goes on."""

    url: str
    error: BaseException

    @property
    def category(self) -> str:
        """The error's category (``"timeout"``, ``"status"``, ``"shut_down"``…); ``"error"`` for others."""
        return self.error.category if isinstance(self.error, SpireError) else "error"
