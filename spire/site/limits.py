"""The numbers the site crawl works within, and its default politeness (``polite_limits``)."""

from __future__ import annotations

from datetime import timedelta

from spire_core.limits import HostLimits

__all__ = [
    "MAX_DEPTH",
    "MAX_REDIRECTS",
    "MAX_ROBOTS_REDIRECTS",
    "MAX_URL_BYTES",
    "MIN_WORDS_FOR_DUPLICATE",
    "PAGE_ATTEMPTS",
    "PAUSE_ON",
    "ROBOTS_REFRESH_AFTER",
    "ROBOTS_RETRY_DELAYS",
    "polite_limits",
]

#: A longer URL is dropped without a count.
MAX_URL_BYTES = 2048
#: A URL more links than this from the seed is dropped without a count.
MAX_DEPTH = 64
#: A longer redirect chain is skipped (``SkipReason.REDIRECTS``).
MAX_REDIRECTS = 5
#: robots.txt redirects followed before the file counts as missing (everything allowed).
MAX_ROBOTS_REDIRECTS = 5
#: Tries of a page or a sitemap that fails in a way worth retrying (a transient error, 429, 5xx).
PAGE_ATTEMPTS = 3
#: A page with fewer words is never dropped as a near-duplicate.
MIN_WORDS_FOR_DUPLICATE = 20
#: How long robots.txt rules are trusted before the file is read again.
ROBOTS_REFRESH_AFTER = timedelta(hours=24)
#: Waits before each new try of a robots.txt that answers 5xx or 429 or cannot be reached.
ROBOTS_RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)

#: Statuses that always pause a host, whatever the limits say: the crawl's own politeness.
PAUSE_ON = frozenset({429, 503})


def polite_limits() -> HostLimits:
    """The site crawl's defaults: one request at a time per host, one a second, 16 overall, pause on 429/503."""
    return HostLimits(max_in_flight=1, per_second=1.0, max_total_in_flight=16, pause_on=PAUSE_ON)
