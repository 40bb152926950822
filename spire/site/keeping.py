"""Which fetched pages come out: kept, held until their canonical page is settled, or dropped.

A page that names another in-scope page as canonical waits for it: kept pages drop it, skipped or
failed ones release it. Pages with the same text as a kept page are dropped, and ``limit`` counts
kept and held pages together. The ``Keeper`` is a sink: it is handed pages and verdicts, counts in
the crawl's stats and hands what it keeps to ``emit``; it knows nothing else of the crawl.

A page is finished (its seed reported done) only once the crawl's reader is done with it
(``handoff.py``): ``KeeperSink.push`` returns, and so lets the page's report go on, only when the pages
its verdicts kept are finished. A kill never finds a page settled as kept that its reader did not have.

A page handler does not call the keeper: it stages a ``Verdict`` on ``KeeperSink``, the crawl's
dataset of verdicts, as any handler stages items. The verdict is applied when the handler's writes
are committed, in the crawl's own process, whichever process handled the page (``processes=N``).
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict

from spire.site.handoff import Handed
from spire.site.limits import MIN_WORDS_FOR_DUPLICATE
from spire.site.page import CrawlError, CrawlPage
from spire_core import url as urls
from spire_core.admission import SkipReason
from spire_core.errors import SpireError
from spire_core.outcome import Outcome, Stop

__all__ = ["Keeper", "KeeperSink", "Verdict"]

#: How a page the keeper drops is counted (and noted in the ledger): its URL, its key and why.
Skip = Callable[[str, str, SkipReason], None]
#: Where kept pages and failed URLs go (the crawl's stream to its reader).
Emit = Callable[[Handed], Awaitable[None]]


def _words_digest(text: str) -> bytes | None:
    """A digest of the text's words, for a page long enough to be compared; else ``None``."""
    words = text.split()
    if len(words) < MIN_WORDS_FOR_DUPLICATE:
        return None
    return hashlib.blake2b("\n".join(words).encode(), digest_size=16).digest()


class Keeper:
    """Keeps, holds or drops the site crawl's fetched pages, and ends the crawl at its ``limit``."""

    def __init__(self, *, limit: int | None, skip: Skip, emit: Emit) -> None:
        self.limit = limit
        self._skip = skip
        self._emit = emit
        self._out: collections.deque[Handed] = collections.deque()  # decided, not yet emitted
        self._decided: list[Handed] = []  # decided since the last ``take_decided``
        self._flushing = anyio.Lock()
        self._kept_digests: set[bytes] = set()
        self._kept: set[str] = set()  # canonical URLs of kept pages, and of pages dropped for them
        self._given_up: set[str] = set()  # canonical URLs skipped or failed
        self._held: dict[str, list[CrawlPage]] = {}  # canonical page key -> pages waiting for it
        self._holding: dict[str, str] = {}  # held page key -> the canonical key it waits for
        #: Pages kept so far: the site crawl's ``stats.pages``.
        self.kept = 0

    async def flush(self) -> None:
        """Hand what was kept (and the failures) to ``emit``, in order. Decisions never wait for the
        reader: a ``Stop`` takes effect before anything is handed on."""
        async with self._flushing:  # one flush at a time: each item goes out once, in order
            out = self._out
            while out:
                await self._emit(out[0])  # cancelled before it was handed on, it stays for the next flush
                out.popleft()

    def take_decided(self) -> list[Handed]:
        """The pages (and failures) decided since the last call, to wait until their reader has finished them."""
        decided, self._decided = self._decided, []
        return decided

    def _hand_out(self, item: CrawlPage | CrawlError) -> None:
        handed = Handed(item)
        self._out.append(handed)
        self._decided.append(handed)

    def keep_or_hold(self, page: CrawlPage, canonical: str | None, asked: str | None = None) -> Outcome | None:
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
            return self._keep(page)
        if canonical in self._kept:
            self._drop_for_canonical(key, page.url)
            return None
        # A canonical page that waits (directly or not) for this one: a cycle, broken by keeping this one.
        waits_for = canonical
        while waits_for in self._holding:
            waits_for = self._holding[waits_for]
            if waits_for == key:
                return self._keep(page)
        self._held.setdefault(canonical, []).append(page)
        self._holding[key] = canonical
        return self._settle_limit()

    def _settle_limit(self) -> Outcome | None:
        """Held pages count toward the limit: once kept and held pages fill it, no canonical page can
        be fetched any more, so the held pages are kept (and the crawl stops)."""
        limit = self.limit
        if limit is None:
            return None
        if self._holding and limit - self.kept - len(self._holding) <= 0:
            self.keep_all_held()
        return Stop() if self.kept >= limit else None

    def keep_all_held(self) -> None:
        """Keep every page still held for its canonical page (the crawl ended, or the limit is reached)."""
        while self._held:
            _, pages = self._held.popitem()
            for page in pages:
                self._keep(page, settle=False)

    def _keep(self, page: CrawlPage, *, settle: bool = True) -> Outcome | None:
        key = urls.canonicalize(page.url)
        self._holding.pop(key, None)
        limit = self.limit
        if limit is not None and self.kept >= limit:
            return Stop()
        digest = _words_digest(page.text)
        if digest is not None and digest in self._kept_digests:
            self._skip(page.url, key, SkipReason.NEAR_DUPLICATE)
            return self.give_up(page.url)
        if digest is not None:
            self._kept_digests.add(digest)
        self._kept.add(key)
        self.kept += 1
        self._hand_out(page)
        for held in self._held.pop(key, ()):
            self._drop_for_canonical(urls.canonicalize(held.url), held.url)
        return self._settle_limit() if settle else None

    def _drop_for_canonical(self, key: str, url: str) -> None:
        """A page is dropped for its kept canonical page: pages waiting for it are dropped too."""
        self._skip(url, key, SkipReason.CANONICAL)
        self._holding.pop(key, None)
        self._kept.add(key)
        for held in self._held.pop(key, ()):
            self._drop_for_canonical(urls.canonicalize(held.url), held.url)

    def give_up(self, url: str) -> Outcome | None:
        """``url`` was skipped or failed: pages held for it as their canonical page are kept."""
        try:
            key = urls.canonicalize(url)
        except SpireError:
            return None
        self._given_up.add(key)
        outcome: Outcome | None = None
        for held in self._held.pop(key, ()):
            outcome = self._keep(held) or outcome
        return outcome

    def failed(self, url: str, error: BaseException) -> Outcome | None:
        self._hand_out(CrawlError(url, error))
        return self.give_up(url)


class Verdict(BaseModel):
    """What a page handler decided about its page: keep ``page`` (``canonical`` and ``asked`` as for
    ``Keeper.keep_or_hold``), or, without a page, give ``url`` up (skipped: pages held for it go free)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    url: str
    page: CrawlPage | None = None
    canonical: str | None = None
    asked: str | None = None
    #: The error status a start page answered, when it is given up for it (the CLI says it).
    start_status: int | None = None
    #: The links the page queued (the crawl's count of URLs queued, which ends reading sitemaps at a limit).
    queued: int = 0

    @classmethod
    def keep(cls, page: CrawlPage, canonical: str | None, asked: str | None, *, queued: int = 0) -> Verdict:
        return cls.model_construct(url=page.url, page=page, canonical=canonical, asked=asked, queued=queued)

    @classmethod
    def give_up(cls, url: str, *, start_status: int | None = None, queued: int = 0) -> Verdict:
        return cls.model_construct(
            url=url, page=None, canonical=None, asked=None, start_status=start_status, queued=queued
        )


class KeeperSink:
    """The keeper as the crawl's sink of ``Verdict``s (``Crawler(sinks=)``): each page's verdict is applied
    in the crawl's process when the page commits; ``on_stop`` ends the crawl at the keeper's limit."""

    model = Verdict

    def __init__(self, keeper: Keeper, on_stop: Callable[[], None]) -> None:
        self.keeper = keeper
        self._on_stop = on_stop
        #: The error status each start page that was given up answered, by URL.
        self.start_statuses: dict[str, int] = {}
        #: URLs queued so far, by pages and sitemaps, counted in the crawl's process (exact with processes=N).
        self.pages_queued = 0

    def validate(self, items: Verdict | dict[str, Any] | Iterable[Verdict | dict[str, Any]]) -> list[Verdict]:
        batch = [items] if isinstance(items, Verdict | dict) else list(items)
        return [item if isinstance(item, Verdict) else Verdict.model_validate(item) for item in batch]

    async def push(self, items: Verdict | dict[str, Any] | Iterable[Verdict | dict[str, Any]]) -> int:
        """Apply each verdict; none is stored as an item (0). Returns once the reader has finished the
        pages they kept: the page's report (its seed done) comes after."""
        for verdict in self.validate(items):
            self.pages_queued += verdict.queued
            if verdict.page is not None:
                outcome = self.keeper.keep_or_hold(verdict.page, verdict.canonical, asked=verdict.asked)
            else:
                if verdict.start_status is not None:
                    self.start_statuses[verdict.url] = verdict.start_status
                outcome = self.keeper.give_up(verdict.url)
            if isinstance(outcome, Stop):
                self._on_stop()
        decided = self.keeper.take_decided()  # this push's own: no await since its verdicts were applied
        await self.keeper.flush()
        for handed in decided:
            await handed.finished.wait()
        return 0

    async def failed(self, url: str, error: BaseException) -> None:
        """``url`` failed for good: say so on the crawl's stream; pages held for it go free."""
        if isinstance(self.keeper.failed(url, error), Stop):
            self._on_stop()
        self.keeper.take_decided()  # reported already: nothing waits for the reader
        await self.keeper.flush()
