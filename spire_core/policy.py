"""``CrawlPolicy``: crawl-wide rules for which discovered links are admitted."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["CrawlPolicy", "Strategy"]

#: Which discovered links a handler's link queue keeps, relative to the page they were found on.
Strategy = Literal["all", "same_domain", "same_hostname", "same_origin"]


@dataclasses.dataclass(frozen=True, slots=True)
class CrawlPolicy:
    """Crawl-wide defaults for the link queue.

    ``strategy`` is the default relationship filter (a call may override it); ``max_crawl_depth``
    and ``max_requests_per_crawl`` are admission limits across the whole crawl; ``on_skipped`` is
    called with each skipped candidate URL and its reason.
    """

    strategy: Strategy = "same_hostname"
    max_crawl_depth: int | None = None
    max_requests_per_crawl: int | None = None
    on_skipped: Callable[[str, str], Any] | None = None
