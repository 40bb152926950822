"""What the site crawl hands out: ``CrawlPage`` and ``CrawlError`` (skips are the engine's ``SkipReason``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from spire_core.errors import SpireError
from spire_core.response import Headers

__all__ = ["CrawlError", "CrawlPage"]


@dataclasses.dataclass(frozen=True, slots=True)
class CrawlPage:
    """A kept page: its URL after redirects, depth, status, HTML and readable text.

    ``change`` is ``"new"`` on a first crawl and for a page a recrawl had not kept before, and
    ``"changed"`` for a page a recrawl found changed (an unchanged page is not handed out again).
    """

    url: str
    depth: int
    status: int
    html: str
    text: str
    headers: Headers
    metas: Mapping[str, str]
    title: str | None
    change: str = "new"

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
