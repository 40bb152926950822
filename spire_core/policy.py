"""``CrawlPolicy``: crawl-wide rules for which discovered links are admitted.

    Crawler(router, policy=CrawlPolicy(strategy="same_domain", max_crawl_depth=3, max_requests_per_crawl=500))

A handler's link queue (``spire.Links``) reads the crawler's policy on every call: the strategy is
the default relationship filter, the two limits are admission controls across the whole crawl, and
``on_skipped`` hears about every candidate a call turned away, with a ``SkipReason``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any, Final, Literal, cast, get_args

from spire_core.errors import ConfigError

__all__ = ["STRATEGIES", "CrawlPolicy", "OnSkipped", "SkipReason", "Strategy", "check_strategy"]

#: Which discovered links a handler's link queue keeps, relative to the page they were found on:
#: ``all`` (any http(s) URL), ``same_domain`` (the same registrable domain by the Public Suffix
#: List), ``same_hostname`` (the same host name, any port) or ``same_origin`` (scheme, host and port).
Strategy = Literal["all", "same_domain", "same_hostname", "same_origin"]
STRATEGIES: Final[frozenset[str]] = frozenset(get_args(Strategy))


class SkipReason(enum.StrEnum):
    """Why a link candidate was not queued. Members are strings: ``reason == "duplicate"`` holds."""

    #: Not a URL, or a relative one where an absolute one was required.
    INVALID_URL = "invalid_url"
    #: A URL whose scheme is not http or https (``mailto:``, ``javascript:``...), under any strategy.
    SCHEME = "scheme"
    #: Outside the strategy's relationship to the page.
    STRATEGY = "strategy"
    #: Matched an exclude pattern, or none of the include patterns.
    PATTERN = "pattern"
    #: Deeper than the policy's ``max_crawl_depth``.
    DEPTH = "depth"
    #: Over the policy's ``max_requests_per_crawl``.
    REQUEST_LIMIT = "request_limit"
    #: The transform returned ``None``.
    TRANSFORM = "transform"
    #: Its unique key was queued before, or staged earlier by the same request.
    DUPLICATE = "duplicate"


#: Called with a skipped candidate's URL and the reason; it may be a plain or an async function.
OnSkipped = Callable[[str, SkipReason], Any]


def check_strategy(strategy: str) -> Strategy:
    """``strategy`` when it names one, else ``ConfigError``."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(sorted(STRATEGIES))}; not {strategy!r}")
    return cast(Strategy, strategy)


@dataclasses.dataclass(frozen=True, slots=True)
class CrawlPolicy:
    """Crawl-wide defaults for the link queue.

    ``strategy`` is the default relationship filter (a call may override it). ``max_crawl_depth``
    admits links at most that many links from a start seed (depth 0). ``max_requests_per_crawl``
    bounds the seeds admitted over the whole crawl, the start seeds included: never more are
    queued. ``on_skipped`` is called with each skipped candidate URL and its ``SkipReason``.
    """

    strategy: Strategy = "same_hostname"
    max_crawl_depth: int | None = None
    max_requests_per_crawl: int | None = None
    on_skipped: OnSkipped | None = None

    def __post_init__(self) -> None:
        check_strategy(self.strategy)
        if self.max_crawl_depth is not None and self.max_crawl_depth < 0:
            raise ConfigError(f"max_crawl_depth must be 0 or more, not {self.max_crawl_depth}")
        if self.max_requests_per_crawl is not None and self.max_requests_per_crawl < 0:
            raise ConfigError(f"max_requests_per_crawl must be 0 or more, not {self.max_requests_per_crawl}")
