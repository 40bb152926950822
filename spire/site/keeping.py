"""Which fetched pages come out: kept, held until their canonical page is settled, or dropped.

A page that names another in-scope page as canonical waits for it: kept pages drop it, skipped or
failed ones release it. Pages with the same text as a kept page are dropped, and ``limit`` counts
kept and held pages together. The ``Keeper`` is a sink: it is handed pages and verdicts, counts in
the crawl's stats and hands what it keeps to ``emit``; it knows nothing else of the crawl.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from spire.site.limits import MIN_WORDS_FOR_DUPLICATE
from spire.site.page import CrawlError, CrawlPage
from spire_core import url as urls
from spire_core.admission import SkipReason
from spire_core.errors import SpireError
from spire_core.outcome import Outcome, Stop
from spire_core.stats import CrawlStats

__all__ = ["Keeper"]

#: Where kept pages and failed URLs go (the crawl's stream to its reader).
Emit = Callable[[CrawlPage | CrawlError], Awaitable[None]]


def _words_digest(text: str) -> bytes | None:
    """A digest of the text's words, for a page long enough to be compared; else ``None``."""
    words = text.split()
    if len(words) < MIN_WORDS_FOR_DUPLICATE:
        return None
    return hashlib.blake2b("\n".join(words).encode(), digest_size=16).digest()


class Keeper:
    """Keeps, holds or drops the site crawl's fetched pages, and ends the crawl at its ``limit``."""

    def __init__(self, *, limit: int | None, stats: Callable[[], CrawlStats], emit: Emit) -> None:
        self.limit = limit
        self._stats = stats
        self._emit = emit
        self._kept_digests: set[bytes] = set()
        self._kept: set[str] = set()  # canonical URLs of kept pages, and of pages dropped for them
        self._given_up: set[str] = set()  # canonical URLs skipped or failed
        self._held: dict[str, list[CrawlPage]] = {}  # canonical page key -> pages waiting for it
        self._holding: dict[str, str] = {}  # held page key -> the canonical key it waits for

    async def keep_or_hold(self, page: CrawlPage, canonical: str | None, asked: str | None = None) -> Outcome | None:
        """Keep ``page``, drop it for its kept canonical page, or hold it until that page is settled.

        ``asked`` is the key the page was requested under, when a redirect brought it elsewhere: pages
        held for that key wait for this page's own.
        """
        key = urls.canonicalize(page.url)
        if asked is not None and asked != key:
            for held in self._held.pop(asked, ()):
                self._held.setdefault(key, []).append(held)
                self._holding[urls.canonicalize(held.url)] = key
        if canonical is None or canonical == key or canonical in self._given_up:
            return await self._keep(page)
        if canonical in self._kept:
            self._drop_for_canonical(key)
            return None
        # A canonical page that waits (directly or not) for this one: a cycle, broken by keeping this one.
        waits_for = canonical
        while waits_for in self._holding:
            waits_for = self._holding[waits_for]
            if waits_for == key:
                return await self._keep(page)
        self._held.setdefault(canonical, []).append(page)
        self._holding[key] = canonical
        return await self._settle_limit()

    async def _settle_limit(self) -> Outcome | None:
        """Held pages count toward the limit: once kept and held pages fill it, no canonical page can
        be fetched any more, so the held pages are kept (and the crawl stops)."""
        limit, stats = self.limit, self._stats()
        if limit is None:
            return None
        if self._holding and limit - stats.pages - len(self._holding) <= 0:
            await self.keep_all_held()
        return Stop() if stats.pages >= limit else None

    async def keep_all_held(self) -> None:
        """Keep every page still held for its canonical page (the crawl ended, or the limit is reached)."""
        while self._held:
            _, pages = self._held.popitem()
            for page in pages:
                await self._keep(page, settle=False)

    async def _keep(self, page: CrawlPage, *, settle: bool = True) -> Outcome | None:
        key = urls.canonicalize(page.url)
        self._holding.pop(key, None)
        limit, stats = self.limit, self._stats()
        if limit is not None and stats.pages >= limit:
            return Stop()
        digest = _words_digest(page.text)
        if digest is not None and digest in self._kept_digests:
            stats.skip(SkipReason.NEAR_DUPLICATE)
            return await self.give_up(page.url)
        if digest is not None:
            self._kept_digests.add(digest)
        self._kept.add(key)
        stats.pages += 1
        await self._emit(page)
        for held in self._held.pop(key, ()):
            self._drop_for_canonical(urls.canonicalize(held.url))
        return await self._settle_limit() if settle else None

    def _drop_for_canonical(self, key: str) -> None:
        """A page is dropped for its kept canonical page: pages waiting for it are dropped too."""
        self._stats().skip(SkipReason.CANONICAL)
        self._holding.pop(key, None)
        self._kept.add(key)
        for held in self._held.pop(key, ()):
            self._drop_for_canonical(urls.canonicalize(held.url))

    async def give_up(self, url: str) -> Outcome | None:
        """``url`` was skipped or failed: pages held for it as their canonical page are kept."""
        try:
            key = urls.canonicalize(url)
        except SpireError:
            return None
        self._given_up.add(key)
        outcome: Outcome | None = None
        for held in self._held.pop(key, ()):
            outcome = await self._keep(held) or outcome
        return outcome

    async def failed(self, url: str, error: BaseException) -> None:
        await self._emit(CrawlError(url, error))
        await self.give_up(url)
