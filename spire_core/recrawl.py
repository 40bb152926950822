"""Incremental recrawl: each page's state kept from one crawl to the next, and what changed.

    crawler = Crawler(router, frontier=SqliteFrontier("state.db"), recrawl=True)
    crawler.run(seeds)   # the first run crawls and keeps each page's validators and fingerprint
    crawler.run(seeds)   # a later run, once that one finished, revisits and says what changed

A crawl with ``recrawl=`` keeps, in its ledger, a **page state** for every page it kept: its
``ETag`` and ``Last-Modified``, a fingerprint of its main text, its sitemap ``lastmod``, when it last
changed and how many revisits in a row found it unchanged. A run on a frontier whose last crawl
finished starts a new **generation**: every page kept before is queued again as a revisit, carrying
its state (``Seed.revisit``); the request path sends it as ``If-None-Match`` / ``If-Modified-Since``.

A revisit that answers 304, or whose fingerprint is the one kept, is **unchanged**: its handler does
not run (its items and links stand from before). Otherwise the handler runs as on a first crawl,
and the page is **changed**; a page the crawl had not kept before is **new**; a revisit that answers
404 or 410, or that the crawl no longer keeps by the page's own answer (robots.txt, ``noindex``...),
is **gone**; one whose fetch failed, or that was skipped because its host could not be heard (robots.txt
unreachable), showed a block page, or whose redirect the request budget left unsent (``UNHEARD``), is
**failed** and stays in the index, to be tried next time.

The fingerprint (``fingerprint``) hashes the words of the page's title and main content, its frame
left out (``html.main_text``: navigation, page header and footer, sidebars, scripts, forms), so a
date in the footer or a session token in a script is not a change; a body that is not HTML is
hashed whole.

Two rules skip a revisit altogether, both saying ``unchanged``: the **revisit policy** (``Recrawl``)
puts off pages unchanged for several recrawls in a row, and a host whose sitemap ``lastmod`` has
proved reliable lets the crawl trust an unmoved ``lastmod`` (``lastmod_trusted``).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import shutil
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread

from spire_core import checks, html
from spire_core import url as urls
from spire_core.errors import ConfigError, HttpStatusError, SpireError
from spire_core.ledger import Fate, every_entry
from spire_core.outcome import Done, Fail, Outcome, Retry
from spire_core.redirects import RedirectRefused
from spire_core.revisit import Change, How, PageChange, PageNote, PageState
from spire_core.skips import LeftOut, SkipReason
from spire_core.sniff import is_html

if TYPE_CHECKING:
    from spire_core.ledger import Entry, LedgerSink, LedgerView
    from spire_core.response import Response
    from spire_core.seed import Seed

__all__ = [
    "GONE_STATUSES",
    "UNHEARD",
    "Generation",
    "PageContext",
    "Recrawl",
    "Recrawlable",
    "Revisits",
    "change_line",
    "changes",
    "counted",
    "export_changes",
    "fingerprint",
    "lastmod_trusted",
    "observe",
    "presumed",
    "revisit",
    "settle_page",
    "spot_check",
]

#: The statuses that say a page is gone (a revisit answering one is ``gone``).
GONE_STATUSES = frozenset({404, 410})

#: The skips of a revisit that say nothing of the page itself (its host could not be heard, showed a
#: block page instead, or the crawl's request budget ran out before its redirect's hop): the revisit is
#: ``failed``, its state kept, not ``gone``.
UNHEARD = frozenset({SkipReason.ROBOTS_UNREACHABLE, SkipReason.BLOCKED, SkipReason.REQUEST_BUDGET})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Recrawl:
    """How a crawl keeps page states and revisits them: ``Crawler(recrawl=Recrawl(...))`` (``True``: these defaults).

    - ``adaptive``: a page unchanged for ``slow_after`` recrawls in a row is revisited every 2nd
      recrawl, then every 4th, 8th... up to every ``max_interval``-th; a change brings it back to
      every recrawl (StormCrawler's adaptive schedule, counted in recrawls rather than hours).
      ``adaptive=False`` revisits every page every time.
    - ``trust_lastmod_after``: a host's sitemap ``lastmod`` is trusted (a page whose ``lastmod`` did
      not move is not fetched) once this many revisits found its unmoved ``lastmod`` right, and as
      long as no page's content changed under an unmoved ``lastmod``; ``None`` never trusts it. One
      trusted page in ``spot_checks`` is fetched all the same, so the host keeps earning the trust.
    - ``start``: whether a run on a finished crawl starts a recrawl (``False`` keeps page states for
      a later one, and a finished crawl stays finished: what ``spire crawl --state`` does without
      ``--recrawl``).
    """

    adaptive: bool = True
    slow_after: int = 3
    max_interval: int = 8
    trust_lastmod_after: int | None = 10
    spot_checks: int = 10
    start: bool = True

    def __post_init__(self) -> None:
        checks.count("slow_after", self.slow_after)
        checks.count("max_interval", self.max_interval)
        checks.count("spot_checks", self.spot_checks)
        if self.trust_lastmod_after is not None:
            checks.count("trust_lastmod_after", self.trust_lastmod_after)

    @classmethod
    def of(cls, value: Recrawl | bool) -> Recrawl | None:
        """``Crawler(recrawl=)`` as a policy: ``None`` for ``False``, the defaults for ``True``."""
        if value is True:
            return cls()
        if value is False:
            return None
        if not isinstance(value, Recrawl):
            raise ConfigError(f"recrawl= takes True, False or a Recrawl(...), not {value!r}")
        return value

    def interval(self, streak: int) -> int:
        """Recrawls until a page unchanged ``streak`` times in a row is due again."""
        if not self.adaptive or streak < self.slow_after:
            return 1
        return min(self.max_interval, 1 << min(streak - self.slow_after + 1, 32))


@dataclasses.dataclass(frozen=True, slots=True)
class Generation:
    """Where a store's crawls are: the number of the current one (1 for the first) and whether it finished."""

    number: int = 1
    finished: bool = False


@runtime_checkable
class Recrawlable(Protocol):
    """A frontier store that keeps page states for recrawls (the memory and SQLite stores do)."""

    def keep_pages(self, policy: Recrawl) -> None:
        """Keep a page state for every page kept from now on (in the store's full ledger), revisited
        under ``policy``; ``ConfigError`` when its ledger is not the full one."""
        ...

    async def generation(self) -> Generation:
        """The current crawl's number and whether it finished."""
        ...

    async def begin_recrawl(self) -> int:
        """Start the next generation, in one step: the seen set emptied, what was still queued or failed
        queued again, every page due queued as a revisit, the others noted ``not-due``; return how many
        revisits were queued."""
        ...

    async def finish_generation(self) -> None:
        """The current crawl ran to its end: the next run on this store is a recrawl."""
        ...

    def lastmod_trust(self) -> Mapping[str, tuple[int, bool]]:
        """Per origin, ``(revisits whose unmoved lastmod proved right, whether one proved wrong)``, as
        of the generation's start."""
        ...


def lastmod_trusted(evidence: tuple[int, bool] | None, policy: Recrawl) -> bool:
    """Whether a host's sitemap ``lastmod`` is trusted: ``trust_lastmod_after`` revisits proved an unmoved
    ``lastmod`` right, and none proved it wrong (then it is never trusted again)."""
    if evidence is None or policy.trust_lastmod_after is None:
        return False
    right, wrong = evidence
    return not wrong and right >= policy.trust_lastmod_after


def spot_check(key: str, generation: int, policy: Recrawl) -> bool:
    """Whether a page a trusted ``lastmod`` would skip is fetched anyway this generation (one in
    ``spot_checks``, a different one each time), so a host that stops keeping ``lastmod`` is caught."""
    digest = hashlib.blake2b(f"{generation} {key}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % policy.spot_checks == 0


class Revisits:
    """A recrawl's state in the crawl's process: the generation, the hosts whose sitemap ``lastmod`` is
    trusted, the ``lastmod`` each sitemap gave, and the ledger each page's note goes to.

    A handler in the crawl's process (``local=True``, as the site crawl's sitemap handler is) tells it
    the ``lastmod`` of each URL a sitemap lists (``ctx.revisits.lastmod(url, value)``).
    """

    def __init__(
        self, policy: Recrawl, generation: int, trust: Mapping[str, tuple[int, bool]], ledger: LedgerSink
    ) -> None:
        self.policy = policy
        self.generation = generation
        self._trusted = {origin for origin, evidence in trust.items() if lastmod_trusted(evidence, policy)}
        self._lastmods: dict[str, str] = {}
        self._ledger = ledger

    def lastmod(self, url: str, lastmod: str) -> None:
        """A sitemap says ``url`` was last modified at ``lastmod`` (compared as written, spaces trimmed)."""
        try:
            key = urls.canonicalize(url)
        except SpireError:
            return
        self._lastmods[key] = lastmod.strip()

    def presume(self, seed: Seed) -> PageNote | None:
        """The note of a revisit not worth fetching: its sitemap ``lastmod`` has not moved, on a host
        whose ``lastmod`` is trusted, and it is not this generation's spot check; else ``None``."""
        previous = seed.revisit
        if previous is None or previous.lastmod is None or seed.origin not in self._trusted:
            return None
        if self._lastmods.get(seed.unique_key) != previous.lastmod:
            return None
        if spot_check(seed.unique_key, self.generation, self.policy):
            return None
        return PageNote(None, how=How.LASTMOD, unchanged=True, lastmod=previous.lastmod)

    def noted(self, seed: Seed, note: PageNote) -> None:
        """What handling ``seed`` found of its page, with its sitemap ``lastmod``, to the ledger."""
        lastmod = self._lastmods.get(seed.unique_key)
        if lastmod is not None and note.lastmod is None:
            note = dataclasses.replace(note, lastmod=lastmod)
        self._ledger.page(seed, note)


# -- fingerprints and the revisit check (in whichever process handles the seed) --------------------


def fingerprint(response: Response, document: Any | None = None) -> str:
    """A hex digest of the page as a recrawl compares it: for HTML, the words of its title and main
    content (``html.main_text``) and the set of pages it links to (every ``<a href>``, as written);
    ``document`` is its parse, when one was made. Any other body is hashed whole.

    So a date in the footer, a script's token, whitespace or markup are no change; an edited sentence,
    price or heading is, and so is a link added or removed (a recrawl then reads the page, and finds
    what it links to, as a first crawl would).
    """
    if not _is_html(response):
        return hashlib.blake2b(response.body, digest_size=16).hexdigest()
    page = document if document is not None else html.parse(response.body)
    links = "\n".join(sorted(set(html.hrefs(page))))
    data = f"{html.main_text(page)}\x00{links}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _is_html(response: Response) -> bool:
    return is_html(response.content_type, response.body)


def _validators(response: Response) -> tuple[str | None, str | None]:
    headers = response.headers
    return headers.get("etag"), headers.get("last-modified")


class PageContext(Protocol):
    """What the revisit check reads and leaves on a seed being handled (``Context`` is one)."""

    seed: Seed
    #: What handling found of the page, once known.
    page: PageNote | None
    #: The page's fingerprint, once the revisit check computed it.
    fingerprint: str | None

    async def response(self) -> Response: ...

    async def document(self) -> Any: ...

    @property
    def fetched_response(self) -> Response | None: ...

    @property
    def fetch_error(self) -> BaseException | None: ...

    @property
    def parsed_document(self) -> Any: ...


async def revisit(ctx: PageContext) -> Done | LeftOut | None:
    """For a revisit seed, fetch its page first: unchanged (304, or the same fingerprint), it is done
    without its handler; gone (404, 410), it is left out; either way ``ctx.page`` says what was found.
    ``None`` when the handler should run: the page changed, or its fetch failed (the handler meets the
    same error from the shared fetch, as on a first crawl)."""
    previous = ctx.seed.revisit
    if previous is None:
        return None
    try:
        response = await ctx.response()
    except RedirectRefused as refused:  # control flow, not an Exception: its redirect's hop was not admitted
        return LeftOut(refused.reason)
    except HttpStatusError as error:
        if error.status not in GONE_STATUSES:
            return None
        ctx.page = PageNote(error.status)
        return LeftOut(SkipReason.STATUS, f"HTTP {error.status}")
    except Exception:
        return None
    if response.status == 304:
        etag, modified = _validators(response)
        etag, modified = etag or previous.etag, modified or previous.last_modified
        ctx.page = PageNote(304, etag, modified, previous.hash, How.NOT_MODIFIED, unchanged=True)
        return Done()
    if not 200 <= response.status < 300:
        return None
    digest = fingerprint(response, await ctx.document() if _is_html(response) else None)
    if digest != previous.hash:
        ctx.fingerprint = digest  # computed once: ``observe`` takes it
        return None
    etag, modified = _validators(response)
    ctx.page = PageNote(response.status, etag, modified, digest, How.FETCHED, unchanged=True)
    return Done()


def observe(ctx: PageContext, outcome: Outcome) -> PageNote | None:
    """What the handling of ``ctx``'s seed found of its page, once its handler has run: its status (an
    error status too), validators and fingerprint; ``None`` when nothing was fetched."""
    if isinstance(outcome, Retry):
        return None
    response = ctx.fetched_response
    if response is None:
        error = ctx.fetch_error
        if isinstance(error, HttpStatusError) and error.status is not None:
            return PageNote(error.status)
        return None
    if isinstance(outcome, Fail) or not 200 <= response.status < 300:
        return PageNote(response.status)
    digest = ctx.fingerprint
    if digest is None:
        document = ctx.parsed_document if _is_html(response) else None
        digest = fingerprint(response, document)
    etag, modified = _validators(response)
    return PageNote(response.status, etag, modified, digest)


# -- settling (where the ledger records an outcome) ------------------------------------------------


def settle_page(
    seed: Seed,
    fate: Fate,
    note: PageNote | None,
    *,
    generation: int,
    policy: Recrawl,
    now: float,
    reason: str | None = None,
) -> PageChange | None:
    """What settling ``seed`` with ``fate`` does to its page (``None``: it is no page of the index,
    before or after); ``note`` is what its handling found of the page, ``reason`` why it was skipped."""
    previous = seed.revisit
    if fate is Fate.QUEUED:
        return None  # tried again later: settled then
    if previous is not None and note is not None and note.how in (How.LASTMOD, How.NOT_DUE):
        return presumed(seed, note.how, generation=generation, policy=policy, now=now)
    if previous is None:
        if fate is not Fate.KEPT or note is None or note.hash is None:
            return None
        state = PageState(note.etag, note.last_modified, note.hash, note.lastmod, now, now, 0, generation + 1)
        return PageChange(Change.NEW, How.FETCHED, note.hash, None, now, state)
    if (note is not None and note.status in GONE_STATUSES) or (fate is Fate.SKIPPED and reason not in UNHEARD):
        return PageChange(Change.GONE, None, None, previous.hash, now, drop=True)
    if fate is not Fate.KEPT or note is None or note.hash is None:
        return PageChange(Change.FAILED, None, previous.hash, previous.hash, previous.changed_at)
    unchanged = note.unchanged or note.hash == previous.hash
    # Evidence on the host's sitemap lastmod: it did not move; did the content stay too?
    right = unchanged if previous.lastmod is not None and note.lastmod == previous.lastmod else None
    if not unchanged:
        state = PageState(note.etag, note.last_modified, note.hash, note.lastmod, now, now, 0, generation + 1)
        return PageChange(Change.CHANGED, How.FETCHED, note.hash, previous.hash, now, state, lastmod_right=right)
    streak = previous.streak + 1
    changed_at = previous.changed_at if previous.changed_at is not None else now
    lastmod = note.lastmod if note.lastmod is not None else previous.lastmod
    due = generation + policy.interval(streak)
    state = PageState(note.etag, note.last_modified, note.hash, lastmod, changed_at, now, streak, due)
    return PageChange(Change.UNCHANGED, note.how, note.hash, previous.hash, changed_at, state, lastmod_right=right)


def presumed(seed: Seed, how: How, *, generation: int, policy: Recrawl, now: float) -> PageChange:
    """A revisit not fetched, presumed unchanged (``How.LASTMOD``: its state moves on as if a fetch had
    confirmed it; ``How.NOT_DUE``: it stays as it was)."""
    previous = seed.revisit
    assert previous is not None  # only revisits are presumed
    if how is How.NOT_DUE:
        return PageChange(Change.UNCHANGED, how, previous.hash, previous.hash, previous.changed_at)
    streak = previous.streak + 1
    changed_at = previous.changed_at if previous.changed_at is not None else now
    state = PageState(
        previous.etag,
        previous.last_modified,
        previous.hash,
        previous.lastmod,
        changed_at,
        now,
        streak,
        generation + policy.interval(streak),
    )
    return PageChange(Change.UNCHANGED, how, previous.hash, previous.hash, changed_at, state)


# -- the change feed ------------------------------------------------------------------------------


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def counted(changes: Mapping[str, int]) -> str:
    """Pages by change as one line: ``new=1 changed=3 unchanged=16 gone=1 failed=0``."""
    return " ".join(f"{change}={changes.get(change, 0)}" for change in Change)


def change_line(entry: Entry) -> dict[str, Any]:
    """One line of the change feed for a ledger entry that has a change."""
    line: dict[str, Any] = {
        "url": entry.url,
        "change": entry.change,
        "status": entry.status,
        "hash": entry.hash,
        "previous_hash": entry.previous_hash,
        "changed_at": _iso(entry.changed_at),
        "how": entry.how,
    }
    if entry.change in (Change.GONE, Change.FAILED):
        line["reason"] = entry.detail or entry.reason
    return line


def changes(view: LedgerView) -> AsyncIterator[Entry]:
    """Every entry of ``view`` with a change, in the order the crawl met them: the change feed."""
    return every_entry(view, changed=True)


async def export_changes(view: LedgerView, path: str | os.PathLike[str], *, append: bool = False) -> int:
    """Write the change feed of ``view`` to ``path`` as JSON Lines, after what the file holds when
    ``append``; return how many lines. The file is replaced whole (a temporary file renamed into
    place), so a kill leaves it as it was or with the whole feed. ``"-"`` writes to standard output."""
    target = os.fspath(path)
    count = 0
    if target == "-":
        async for entry in changes(view):
            print(json.dumps(change_line(entry), separators=(",", ":")), flush=True)
            count += 1
        return count
    partial = f"{target}.partial"
    if append and await anyio.Path(target).exists():
        await anyio.to_thread.run_sync(shutil.copyfile, target, partial)
    else:
        append = False
    async with await anyio.open_file(partial, "a" if append else "w", encoding="utf-8") as out:
        async for entry in changes(view):
            await out.write(json.dumps(change_line(entry), separators=(",", ":")) + "\n")
            count += 1
    await anyio.to_thread.run_sync(os.replace, partial, target)
    return count
