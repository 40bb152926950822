"""``SkipReason``: the one typed reason for every skip anywhere in spire, counted in ``stats.skipped``.

The frontier's (``duplicate``, ``depth``, ``trap``, ``tag``), the link queue's, the engine's
(``robots``, ``redirects``, ``blocked``) and the site crawl's reasons are members of one enum; its
members are strings, so ``stats.skipped("robots")`` works too. ``spire_core.admission`` re-exports it.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["LeftOut", "SkipReason"]


class SkipReason(enum.StrEnum):
    """Why a URL, a link candidate or a seed was left out. Members are strings: ``reason == "duplicate"``."""

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
    #: The crawl's request budget (``max_requests``) was spent before this request could be sent.
    REQUEST_BUDGET = "request_budget"
    #: The transform returned ``None``.
    TRANSFORM = "transform"
    #: Its unique key was queued before, or staged earlier by the same request.
    DUPLICATE = "duplicate"
    #: Over a path prefix's cap (``AvoidTraps``).
    TRAP = "trap"
    #: Its tag was skipped (``SkipTag``).
    TAG = "tag"
    #: Its user data or headers cannot be stored (a store that serialises seeds).
    UNSERIALIZABLE = "unserializable"
    #: robots.txt disallows it.
    ROBOTS = "robots"
    #: Its origin's robots.txt could not be read after every retry: nothing there is fetched.
    ROBOTS_UNREACHABLE = "robots_unreachable"
    #: Its host is a private, loopback or link-local address the crawl did not start on (``allow_private``).
    PRIVATE_ADDRESS = "private_address"
    #: The site or the page refuses AI training (site crawl with ``respect="ai-training"``).
    AI = "ai"
    #: Outside the site crawl's scope (a redirect out of scope too).
    SCOPE = "scope"
    #: A redirect chain longer than the crawl allows (five hops by default).
    REDIRECTS = "redirects"
    #: A block page (challenge, captcha, block), not handed to the handler.
    BLOCKED = "blocked"
    #: An error status (site crawl).
    STATUS = "status"
    #: Not HTML (site crawl).
    CONTENT_TYPE = "content_type"
    #: The page asks not to be indexed (site crawl).
    NOINDEX = "noindex"
    #: A link marked ``rel="nofollow"``.
    NOFOLLOW = "nofollow"
    #: The page's canonical page was kept instead (site crawl).
    CANONICAL = "canonical"
    #: The same text, word for word, as a kept page (site crawl).
    NEAR_DUPLICATE = "near_duplicate"
    #: The path ends in a well-known extension that is not a page (images, archives...).
    EXTENSION = "extension"
    #: Markup nested past the HTML parser's depth limit (about 2,000 levels): the page is handled,
    #: flattened below that depth, its text whole but its structure there lost (one count a page,
    #: with a warning).
    DEEP_NESTING = "deep_nesting"
    #: A recrawl's revisit put off by its revisit policy (unchanged for several recrawls): presumed unchanged.
    NOT_DUE = "not_due"
    #: A recrawl's revisit whose sitemap ``lastmod`` has not moved, on a host whose ``lastmod`` proved
    #: reliable: presumed unchanged, not fetched.
    LASTMOD = "lastmod"


@dataclasses.dataclass(frozen=True, slots=True)
class LeftOut:
    """A seed left out before its handler (robots.txt, a redirect that failed admission): counted as
    ``reason``, settled, never handled."""

    reason: SkipReason
    #: More about it, for the ledger: the robots.txt rule that matched.
    detail: str | None = None
