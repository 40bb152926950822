"""The ledger kept in memory: ``MemoryLedger`` (every URL) and ``LightLedger`` (counts and samples).

    frontier = MemoryFrontier()
    Crawler(router, frontier=frontier, ledger="full")   # "light" for a huge crawl, False for none
    entry = await frontier.ledger.entry("http://127.0.0.1:8000/a")

``MemoryLedger`` lives in a ``MemoryFrontier``, which calls ``pushed`` and ``settled`` as it queues
and settles seeds. ``LightLedger`` keeps no line per URL: counts by fate, reason and origin, with a
few sample URLs each, for crawls too large to remember every URL; any store can hold it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from spire_core import url as urls
from spire_core.errors import ConfigError, SpireError
from spire_core.frontier.base import Frontier
from spire_core.frontier.items import store_of
from spire_core.ledger import (
    Attempt,
    Entry,
    Fate,
    LedgerMode,
    LedgerSink,
    LedgerSummary,
    LedgerView,
    settled_fate,
)
from spire_core.ledger_tally import Tally
from spire_core.outcome import Outcome, Retry
from spire_core.recrawl import Recrawl, settle_page
from spire_core.revisit import Change, How, PageChange, PageNote, PageState

if TYPE_CHECKING:
    from spire_core.frontier.base import PushResult
    from spire_core.seed import Seed
    from spire_core.session.record import RequestRecord
    from spire_core.skips import SkipReason

#: A duplicate link gets no line of its own: its key has one already.
DUPLICATE = "duplicate"
#: Refused candidate URLs remembered, so a menu on every page is not parsed again each time.
_REFUSALS_REMEMBERED = 50_000

__all__ = [
    "DUPLICATE",
    "KeepsAbout",
    "KeepsLedger",
    "LightLedger",
    "MemoryLedger",
    "Notes",
    "describe",
    "key_of",
    "page_seed",
    "ledger_of",
    "open_ledger",
    "origin_of",
]


@runtime_checkable
class KeepsLedger(Protocol):
    """A frontier store that keeps the crawl's ledger beside its seeds (the ``ledger`` ability)."""

    #: The ledger it keeps, once opened; ``None`` before.
    ledger: LedgerView | None

    def open_ledger(self, mode: LedgerMode) -> LedgerSink:
        """Keep a ledger of ``mode`` from now on, and return its write side."""
        ...


@runtime_checkable
class KeepsAbout(Protocol):
    """A frontier store that keeps, beside its ledger, what its crawl is: a title and its settings, so
    a report read from the store later (``spire report --state``) shows them as the crawl's own did."""

    async def describe(self, title: str, settings: Mapping[str, str]) -> None:
        """Keep ``title`` and ``settings``, the latest run's."""
        ...


async def describe(frontier: Frontier, title: str, settings: Mapping[str, str]) -> None:
    """Keep ``title`` and ``settings`` in ``frontier``'s store (through its facades) where it keeps them."""
    store = store_of(frontier)
    if isinstance(store, KeepsAbout):
        await store.describe(title, settings)


def open_ledger(frontier: Frontier, mode: LedgerMode | bool) -> LedgerSink | None:
    """The write side of ``frontier``'s ledger in ``mode`` (``True`` is ``"full"``), or ``None`` for
    ``False`` or a store that keeps none. What ``Crawler(ledger=...)`` calls with its frontier."""
    if mode not in (True, False, "full", "light"):
        raise ConfigError(f"ledger must be 'full', 'light' or False, not {mode!r}")
    if mode is False:
        return None
    store = store_of(frontier)
    if not isinstance(store, KeepsLedger):
        return None
    return store.open_ledger("full" if mode is True else mode)


def ledger_of(frontier: Frontier) -> LedgerView | None:
    """The ledger ``frontier``'s store keeps (through its facades), or ``None``."""
    store = store_of(frontier)
    return store.ledger if isinstance(store, KeepsLedger) else None


def key_of(url: str) -> str:
    """The unique key a link candidate would have: its canonical URL (the URL itself if it has none)."""
    try:
        return urls.canonicalize(url)
    except SpireError:
        return url


class _Row:
    """A URL's line while the crawl runs: mutable, slotted (a ledger of millions of URLs is in memory)."""

    __slots__ = (
        "attempts",
        "change",
        "depth",
        "detail",
        "fate",
        "key",
        "origin",
        "page",
        "reason",
        "referrer",
        "status",
        "tag",
        "tries",
        "url",
    )

    def __init__(
        self, url: str, key: str, origin: str, fate: Fate, referrer: str | None, depth: int, tag: str | None
    ) -> None:
        self.url = url
        self.key = key
        self.origin = origin
        self.fate = fate
        self.reason: str | None = None
        self.detail: str | None = None
        self.status: int | None = None
        self.referrer = referrer
        self.depth = depth
        self.tag = tag
        self.tries = 0
        self.attempts: list[Attempt] | None = None
        #: What a crawl that keeps page states found of the page, once settled.
        self.change: PageChange | None = None

    def entry(self, attempts: bool = True) -> Entry:
        change = self.change
        return Entry(
            url=self.url,
            unique_key=self.key,
            fate=self.fate,
            reason=self.reason,
            detail=self.detail,
            status=self.status,
            referrer=self.referrer,
            depth=self.depth,
            tag=self.tag,
            attempts=tuple(self.attempts or ()) if attempts else (),
            tries=self.tries,
            change=None if change is None else change.change.value,
            how=None if change is None or change.how is None else change.how.value,
            hash=None if change is None else change.hash,
            previous_hash=None if change is None else change.previous_hash,
            changed_at=None if change is None else change.changed_at,
        )


def _attempt(record: RequestRecord, at: float) -> Attempt:
    return Attempt(
        at=at,
        url=record.url,
        status=record.status,
        elapsed_ms=record.elapsed_ms,
        bytes=record.bytes,
        proxy=record.proxy,
        identity=record.identity,
        outcome=record.outcome,
    )


def page_seed(seed: Seed) -> Seed:
    """The seed a page's revisits are made from: as it was queued, on its first attempt, no revisit."""
    if seed.attempt == 0 and seed.revisit is None:
        return seed
    return dataclasses.replace(seed, attempt=0, revisit=None)


class Notes:
    """What the engine tells a ledger ahead of the store's write: referrers, skips, last statuses, and
    (a crawl that keeps page states) what handling found of each page."""

    def __init__(self, recrawl: Recrawl | None = None, generation: int = 1) -> None:
        self.referrers: dict[str, str | None] = {}
        self.left_out: dict[str, tuple[str, str | None]] = {}
        #: Seeds that are files read for what they list, not pages: ``(kind, detail)`` by key.
        self.read: dict[str, tuple[str, str | None]] = {}
        self.status: dict[str, int | None] = {}
        self.pages: dict[str, PageNote] = {}
        #: The revisit policy, when the crawl keeps page states; the crawl's generation (1: the first).
        self.recrawl = recrawl
        self.generation = generation
        self._refused: set[str] = set()

    def next_generation(self) -> Notes:
        """Notes for the next generation of the crawl: nothing noted, the same policy."""
        return Notes(self.recrawl, self.generation + 1)

    def new_refusals(self, skips: Iterable[tuple[str, SkipReason]]) -> list[tuple[str, str]]:
        """``(url, reason)`` of the candidates worth a line: not duplicates, and not refused lately.

        Every page of a site links its menu: remembering the last URLs refused saves parsing each
        one again for a line it has already (the store keeps the first line of a key either way).
        """
        refused = self._refused
        if len(refused) > _REFUSALS_REMEMBERED:
            refused.clear()
        found: list[tuple[str, str]] = []
        for url, reason in skips:
            if reason != DUPLICATE and url not in refused:
                refused.add(url)
                found.append((url, str(reason)))
        return found

    def found(self, seeds: Sequence[Seed], referrer: str | None) -> None:
        referrers = self.referrers
        for seed in seeds:
            referrers.setdefault(seed.unique_key, referrer)

    def referrer(self, key: str) -> str | None:
        return self.referrers.pop(key, None)

    def forget(self, result: PushResult) -> list[tuple[Seed, str, str | None]]:
        """``(seed, reason, referrer)`` of each rejected seed, the notes of those and of duplicates dropped.

        A duplicate gets no line: its key was met before, and that line says what became of it.
        """
        referrers = self.referrers
        for seed in result.duplicates:
            referrers.pop(seed.unique_key, None)
        return [(seed, str(reason), referrers.pop(seed.unique_key, None)) for seed, reason in result.rejected]

    def settled(
        self, seed: Seed, outcome: Outcome
    ) -> tuple[Fate, str | None, str | None, int | None, PageChange | None]:
        """``(fate, reason, detail, last status, what it did to the page)`` of ``seed`` settled with ``outcome``."""
        key = seed.unique_key
        fate, reason, detail = settled_fate(outcome, seed.tag, self.left_out.pop(key, None), self.read.pop(key, None))
        note = self.pages.pop(key, None)
        change = None
        if self.recrawl is not None:
            change = settle_page(
                seed, fate, note, generation=self.generation, policy=self.recrawl, now=time.time(), reason=reason
            )
        return fate, reason, detail, self.status.pop(key, None), change


class MemoryLedger:
    """Every URL the crawl met, with its attempts, in this process (a ``MemoryFrontier``'s ledger)."""

    def __init__(self) -> None:
        self._rows: dict[str, _Row] = {}
        #: Attempts of URLs with no line (robots.txt reads), by key: counted in the summary.
        self._loose: dict[str, list[Attempt]] = {}
        self._notes = Notes()
        #: The seed each redirect target was fetched for (a link to one is a duplicate of that seed).
        self._hops: dict[str, str] = {}
        #: When each kept URL was settled, for the timeline.
        self._kept_at: list[float] = []
        self._clock = time.time
        #: A crawl that keeps page states: each page kept, with the seed its revisits are made from.
        self._pages: dict[str, tuple[Seed, PageState]] = {}
        #: Per origin, ``(revisits whose unmoved sitemap lastmod proved right, whether one proved wrong)``.
        self.hosts: dict[str, tuple[int, bool]] = {}
        #: Whether the current generation ran to its end.
        self.finished = False

    # -- page states (a crawl with ``recrawl=``) ----------------------------------------------------

    def keep_pages(self, policy: Recrawl) -> None:
        """Keep a page state for every page kept from now on, and revisit them under ``policy``."""
        self._notes.recrawl = policy

    @property
    def generation(self) -> int:
        return self._notes.generation

    def begin(self) -> list[Seed]:
        """Start the next generation: every line cleared; return the revisits due, and give each page
        not due a line of its own (skipped ``not_due``, presumed unchanged)."""
        self._notes = self._notes.next_generation()
        for key, row in self._rows.items():
            if row.fate is Fate.QUEUED or row.fate is Fate.FAILED:
                # Carried into this generation (still queued, or queued again afresh): found where it was.
                self._notes.referrers[key] = row.referrer
        self._rows.clear()
        self._loose.clear()
        self._hops.clear()
        self._kept_at.clear()
        self.finished = False
        generation = self._notes.generation
        revisits: list[Seed] = []
        for key, (seed, state) in self._pages.items():
            if state.due <= generation:
                revisits.append(dataclasses.replace(seed, revisit=state.revisit()))
                continue
            row = self._rows[key] = _Row(seed.url, key, seed.origin, Fate.SKIPPED, None, seed.depth, seed.tag)
            row.reason = "not_due"
            row.change = PageChange(Change.UNCHANGED, How.NOT_DUE, state.hash, state.hash, state.changed_at)
        return revisits

    def not_due(self) -> list[str]:
        """The keys of the pages this generation does not revisit."""
        generation = self._notes.generation
        return [key for key, (_, state) in self._pages.items() if state.due > generation]

    def _keep_page(self, seed: Seed, change: PageChange) -> None:
        key = seed.unique_key
        if change.drop:
            self._pages.pop(key, None)
        elif change.state is not None:
            self._pages[key] = (page_seed(seed), change.state)
        if change.lastmod_right is not None:
            right, wrong = self.hosts.get(seed.origin, (0, False))
            self.hosts[seed.origin] = (right + change.lastmod_right, wrong or not change.lastmod_right)

    # -- the write side ----------------------------------------------------------------------------

    def found(self, seeds: Sequence[Seed], referrer: str | None) -> None:
        self._notes.found(seeds, referrer)

    def pushed(self, added: Sequence[Seed]) -> None:
        rows, notes = self._rows, self._notes
        for seed in added:
            key = seed.unique_key
            referrer = notes.referrer(key)
            if key not in rows:
                rows[key] = _Row(seed.url, key, seed.origin, Fate.QUEUED, referrer, seed.depth, seed.tag)

    def rejected(self, result: PushResult) -> None:
        for seed, reason, referrer in self._notes.forget(result):
            self._skip(seed.url, seed.unique_key, seed.origin, reason, referrer, seed.depth, seed.tag)

    def refused(self, skips: Iterable[tuple[str, SkipReason]], *, referrer: str | None, depth: int) -> None:
        rows = self._rows
        for url, reason in self._notes.new_refusals(skips):
            key = key_of(url)
            if key not in rows:
                self._skip(url, key, origin_of(url), reason, referrer, depth, None)

    def _skip(
        self, url: str, key: str, origin: str, reason: str, referrer: str | None, depth: int, tag: str | None
    ) -> None:
        if key in self._rows:
            return  # met before: its line says what became of it
        row = self._rows[key] = _Row(url, key, origin, Fate.SKIPPED, referrer, depth, tag)
        row.reason = reason

    def left_out(self, seed: Seed, reason: SkipReason, detail: str | None = None) -> None:
        row = self._rows.get(seed.unique_key)
        if row is not None and row.fate is Fate.KEPT:
            # Settled kept already (a page held for its canonical page, dropped once that was kept).
            row.fate, row.reason, row.detail = Fate.SKIPPED, str(reason), detail
            return
        self._notes.left_out[seed.unique_key] = (str(reason), detail)

    def read(self, seed: Seed, kind: str, detail: str | None = None) -> None:
        self._notes.read[seed.unique_key] = (kind, detail)

    def page(self, seed: Seed, note: PageNote) -> None:
        self._notes.pages[seed.unique_key] = note

    def attempt(self, seed: Seed, record: RequestRecord, at: float) -> None:
        key = seed.unique_key
        attempt = _attempt(record, at)
        row = self._rows.get(key)
        if row is None:
            self._loose.setdefault(key, []).append(attempt)
            return
        if record.redirects:
            self._hops.setdefault(record.url, key)
        if row.attempts is None:
            row.attempts = [attempt]
        else:
            row.attempts.append(attempt)
        self._notes.status[key] = record.status

    def settled(self, seed: Seed, outcome: Outcome) -> None:
        fate, reason, detail, status, change = self._notes.settled(seed, outcome)
        if change is not None:
            self._keep_page(seed, change)
        row = self._rows.get(seed.unique_key)
        if row is None:
            return
        row.tries = seed.attempt + 1
        if isinstance(outcome, Retry):
            return
        row.fate, row.reason, row.detail = fate, reason, detail
        row.change = change
        if status is not None:
            row.status = status
        if fate is Fate.KEPT:
            self._kept_at.append(self._clock())
        elif fate is Fate.READ:
            self._hops.setdefault(row.url, row.key)  # asked for by its URL, its line answers

    # -- the read side -----------------------------------------------------------------------------

    async def entry(self, url: str) -> Entry | None:
        key = key_of(url)
        row = self._rows.get(key) or self._rows.get(url) or self._rows.get(self._hops.get(url, key))
        if row is None:
            return None
        entry = row.entry()
        loose = self._loose.get(key_of(row.url), ()) if row.fate is Fate.READ else ()
        # robots.txt's requests are the crawl's, made for no seed: its line shows them.
        return dataclasses.replace(entry, attempts=(*loose, *entry.attempts)) if loose else entry

    async def entries(
        self,
        *,
        fate: Fate | None = None,
        reason: str | None = None,
        origin: str | None = None,
        limit: int = 100,
        offset: int = 0,
        attempts: bool = False,
        changed: bool = False,
        change: str | None = None,
    ) -> Sequence[Entry]:
        found: list[Entry] = []
        skipped = 0
        for row in self._rows.values():
            if fate is not None and row.fate is not fate:
                continue
            page = row.change
            if (changed or change is not None) and (page is None or (change is not None and page.change != change)):
                continue
            if reason is not None and row.reason != reason:
                continue
            if origin is not None and row.origin != origin:
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append(row.entry(attempts))
            if len(found) >= limit:
                break
        return found

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        tally = Tally(samples)
        for row in self._rows.values():
            change = None if row.change is None else row.change.change.value
            tally.url(row.url, row.origin, row.fate, row.reason, row.referrer, row.detail, change)
            if change is not None:
                tally.changes[change] += 1
            for attempt in row.attempts or ():
                tally.request(row.origin if attempt.url is row.url else origin_of(attempt.url), attempt)
        for attempts in self._loose.values():
            for attempt in attempts:
                tally.request(origin_of(attempt.url), attempt)
        for at in self._kept_at:
            tally.kept_at(at)
        return tally.summary()


class LightLedger:
    """Counts by fate, reason and origin with a few samples each: no line per URL, for huge crawls.

    ``entry`` knows only the sample URLs; a refused URL is counted again when it is refused long
    after it was last (a line per unique key is what it saves). Latency percentiles are the upper
    bound of the histogram bucket they fall in.
    """

    def __init__(self, *, samples: int = 5) -> None:
        self._tally = Tally(samples)
        self._notes = Notes()
        self._samples: dict[str, Entry] = {}
        self._clock = time.time
        self._limit = samples

    def found(self, seeds: Sequence[Seed], referrer: str | None) -> None:
        self._notes.found(seeds, referrer)

    def pushed(self, added: Sequence[Seed]) -> None:
        for seed in added:
            self._notes.referrer(seed.unique_key)
            self._tally.fates[Fate.QUEUED] += 1

    def rejected(self, result: PushResult) -> None:
        for seed, reason, referrer in self._notes.forget(result):
            self._skipped(seed.url, seed.origin, reason, referrer)

    def refused(self, skips: Iterable[tuple[str, SkipReason]], *, referrer: str | None, depth: int) -> None:
        for url, reason in self._notes.new_refusals(skips):
            self._skipped(url, origin_of(url), reason, referrer)

    def _skipped(self, url: str, origin: str, reason: str, referrer: str | None, detail: str | None = None) -> None:
        tally = self._tally
        tally.url(url, origin, Fate.SKIPPED, reason, referrer, detail)
        count, _ = tally.skips.get(reason, (0, []))
        if count <= self._limit:
            self._samples.setdefault(url, _sample_entry(url, Fate.SKIPPED, reason, detail, referrer))

    def left_out(self, seed: Seed, reason: SkipReason, detail: str | None = None) -> None:
        self._notes.left_out[seed.unique_key] = (str(reason), detail)

    def read(self, seed: Seed, kind: str, detail: str | None = None) -> None:
        self._notes.read[seed.unique_key] = (kind, detail)

    def attempt(self, seed: Seed, record: RequestRecord, at: float) -> None:
        self._tally.request(seed.origin, _attempt(record, at), keep=False)
        self._notes.status[seed.unique_key] = record.status

    def page(self, seed: Seed, note: PageNote) -> None:
        """Kept by the full ledger only (a crawl with ``recrawl=`` keeps one)."""

    def settled(self, seed: Seed, outcome: Outcome) -> None:
        fate, reason, detail, status, _ = self._notes.settled(seed, outcome)
        if isinstance(outcome, Retry):
            return
        origin = seed.origin
        tally = self._tally
        tally.fates[Fate.QUEUED] -= 1
        tally.url(seed.url, origin, fate, reason, None, detail)
        if fate is Fate.KEPT:
            tally.kept_at(self._clock())
        if fate is not Fate.KEPT and len(self._samples) < 4 * self._limit * 8:
            self._samples.setdefault(seed.url, _sample_entry(seed.url, fate, reason, detail, None, status))

    async def entry(self, url: str) -> Entry | None:
        return self._samples.get(url)

    async def entries(
        self,
        *,
        fate: Fate | None = None,
        reason: str | None = None,
        origin: str | None = None,
        limit: int = 100,
        offset: int = 0,
        attempts: bool = False,
        changed: bool = False,
        change: str | None = None,
    ) -> Sequence[Entry]:
        found = [
            entry
            for entry in self._samples.values()
            if (fate is None or entry.fate is fate)
            and (not changed or entry.change is not None)
            and (change is None or entry.change == change)
            and (reason is None or entry.reason == reason)
            and (origin is None or origin_of(entry.url) == origin)
        ]
        return found[offset : offset + limit]

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        return self._tally.summary()


def _sample_entry(
    url: str, fate: Fate, reason: str | None, detail: str | None, referrer: str | None, status: int | None = None
) -> Entry:
    return Entry(url, url, fate, reason, detail, status, referrer, 0, None)


def origin_of(url: str) -> str:
    """``url``'s origin, ``""`` for a URL too broken to have one (a refused candidate can be)."""
    try:
        return urls.origin(url)
    except SpireError:
        return ""
