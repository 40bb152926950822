"""Admission: what may enter the frontier, and the one vocabulary of why something did not.

    Crawler(router, policy=CrawlPolicy(strategy="same_domain", max_crawl_depth=3, max_requests_per_crawl=500))

``CrawlPolicy`` holds the crawl-wide rules: the default link strategy, one depth limit and one request
cap. ``Admission`` applies them for a running crawl, with the frontier's seen set: a handler's link
queue (``spire.Links``), redirect hops and the crawler's own pushes all go through it, reserving places
under the cap while a handler runs and committing or releasing them when it ends. ``SkipReason`` is the
one typed reason for every skip anywhere in spire, counted in ``stats.skipped(reason)``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, cast, get_args, runtime_checkable

from spire_core.errors import ConfigError
from spire_core.skips import SkipReason

if TYPE_CHECKING:
    from spire_core.frontier.base import PushResult
    from spire_core.ledger import LedgerSink
    from spire_core.seed import Seed
    from spire_core.stats import CrawlStats

__all__ = [
    "IGNORED_EXTENSIONS",
    "STRATEGIES",
    "Admission",
    "CrawlPolicy",
    "OnSkipped",
    "RequestBudget",
    "Scope",
    "SeenQueue",
    "SkipReason",
    "Strategy",
    "check_strategy",
]

#: Path extensions of files that are not pages (as Scrapy's ``IGNORED_EXTENSIONS``): images, audio, video,
#: archives, office documents, fonts and binaries.
IGNORED_EXTENSIONS: Final[frozenset[str]] = frozenset(
    {
        ".mng",
        ".pct",
        ".bmp",
        ".gif",
        ".jpg",
        ".jpeg",
        ".png",
        ".pst",
        ".psp",
        ".tif",
        ".tiff",
        ".ai",
        ".drw",
        ".dxf",
        ".eps",
        ".ps",
        ".svg",
        ".cdr",
        ".ico",
        ".webp",
        ".avif",
        ".heic",
        ".mp3",
        ".wma",
        ".ogg",
        ".wav",
        ".ra",
        ".aac",
        ".mid",
        ".au",
        ".aiff",
        ".flac",
        ".m4a",
        ".opus",
        ".3gp",
        ".asf",
        ".asx",
        ".avi",
        ".mov",
        ".mp4",
        ".mpg",
        ".qt",
        ".rm",
        ".swf",
        ".wmv",
        ".m4v",
        ".mkv",
        ".webm",
        ".flv",
        ".css",
        ".pdf",
        ".exe",
        ".bin",
        ".rss",
        ".dmg",
        ".iso",
        ".apk",
        ".msi",
        ".deb",
        ".rpm",
        ".xls",
        ".xlsx",
        ".ppt",
        ".pptx",
        ".pps",
        ".doc",
        ".docx",
        ".odt",
        ".ods",
        ".odg",
        ".odp",
        ".zip",
        ".rar",
        ".tar",
        ".gz",
        ".tgz",
        ".bz2",
        ".xz",
        ".7z",
        ".z",
        ".jar",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
        ".eot",
    }
)

#: Which discovered links a handler's link queue keeps, relative to the page they were found on:
#: ``all`` (any http(s) URL), ``same_domain`` (the same registrable domain by the Public Suffix
#: List), ``same_hostname`` (the same host name, any port) or ``same_origin`` (scheme, host and port).
Strategy = Literal["all", "same_domain", "same_hostname", "same_origin"]
STRATEGIES: Final[frozenset[str]] = frozenset(get_args(Strategy))


@runtime_checkable
class Scope(Protocol):
    """A strategy of your own: which URLs belong to the crawl, and which redirects it follows.

    Give one as ``CrawlPolicy(strategy=...)`` or ``links.enqueue(strategy=...)``; a URL it turns
    away is skipped as ``scope``. ``redirected`` may widen the scope (a start seed moved to another
    host of the same site) and says whether the redirect is followed.
    """

    def admits(self, url: str) -> bool: ...

    def redirected(self, seed: Seed, target: str) -> bool: ...


#: Called with a skipped candidate's URL and the reason; it may be a plain or an async function.
OnSkipped = Callable[[str, SkipReason], Any]


def check_strategy(strategy: str | Scope) -> Strategy | Scope:
    """``strategy`` when it names one (or is a ``Scope``), else ``ConfigError``."""
    if not isinstance(strategy, str):
        if isinstance(strategy, Scope):
            return strategy
        raise ConfigError(f"strategy must be one of {', '.join(sorted(STRATEGIES))} or a Scope; not {strategy!r}")
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

    strategy: Strategy | Scope = "same_hostname"
    max_crawl_depth: int | None = None
    max_requests_per_crawl: int | None = None
    on_skipped: OnSkipped | None = None
    #: Links whose URL path ends in one of these extensions (``".jpg"``...) are skipped as ``extension``.
    ignored_extensions: frozenset[str] = frozenset()
    #: Longer links are dropped without a count (servers and browsers refuse such URLs anyway).
    max_url_bytes: int | None = None

    def __post_init__(self) -> None:
        check_strategy(self.strategy)
        if self.max_crawl_depth is not None and self.max_crawl_depth < 0:
            raise ConfigError(f"max_crawl_depth must be 0 or more, not {self.max_crawl_depth}")
        if self.max_requests_per_crawl is not None and self.max_requests_per_crawl < 0:
            raise ConfigError(f"max_requests_per_crawl must be 0 or more, not {self.max_requests_per_crawl}")


class RequestBudget:
    """The crawl's request budget (``max_requests``): every request it sends, robots.txt and redirect
    hops included, spends one; nothing is sent once it is spent. It lives in the crawl's own process."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    @property
    def left(self) -> int:
        return self.limit - self.spent

    def spend(self) -> bool:
        """Take one request from the budget; ``False`` (and nothing taken) when none is left."""
        if self.spent >= self.limit:
            return False
        self.spent += 1
        return True

    def settle(self, writes: int) -> None:
        """The request one ``spend`` was for went out ``writes`` times: 0 gives it back (never sent), 2
        takes one more (its client library sent it again on a new connection; the server saw both)."""
        self.spent += writes - 1


class SeenQueue(Protocol):
    """The frontier as admission uses it: its queue and its seen set (a worker process of
    ``processes=N`` reaches the crawl's over its pipe)."""

    async def push(self, seeds: Sequence[Seed], *, forefront: bool = False) -> PushResult: ...

    async def seen(self, keys: Sequence[str]) -> list[bool]: ...

    async def claim(self, keys: Sequence[str]) -> list[bool]: ...


class Admission:
    """The running crawl's admission: one depth limit, one request cap and one seen check.

    ``admitted`` counts the seeds admitted in this run: those the frontier added, plus those staged
    by handlers still running (``reserve``), given back when a handler fails (``release``). It is what
    ``policy.max_requests_per_crawl`` bounds, and it lives here alone.
    """

    def __init__(self, frontier: SeenQueue, policy: CrawlPolicy, stats: CrawlStats) -> None:
        self.frontier = frontier
        self.policy = policy
        self.stats = stats
        self.admitted = 0
        #: Where every decision about a URL is recorded (``Crawler(ledger=...)``); ``None``: nowhere.
        self.ledger: LedgerSink | None = None

    def too_deep(self, depth: int) -> bool:
        """Whether a seed ``depth`` links from the start is past the depth limit."""
        limit = self.policy.max_crawl_depth
        return limit is not None and depth > limit

    def room(self) -> int | None:
        """Places left under the request cap (``None``: no cap). No await between this and ``reserve``."""
        cap = self.policy.max_requests_per_crawl
        return None if cap is None else max(0, cap - self.admitted)

    def reserve(self, count: int) -> None:
        """Hold ``count`` places for seeds a handler staged."""
        self.admitted += count

    def release(self, count: int) -> None:
        """Give back ``count`` held places (the handler failed, or the frontier counts them now)."""
        self.admitted -= count

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        """Which unique keys were queued (or claimed) before."""
        return await self.frontier.seen(keys)

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        """Mark unique keys seen without queueing them (a redirect target); ``True`` where a key was new."""
        return await self.frontier.claim(keys)

    async def push(self, seeds: Sequence[Seed], *, forefront: bool = False, referrer: str | None = None) -> PushResult:
        """Queue ``seeds`` (found on the page ``referrer``; ``None``: start seeds) and count what the
        frontier added, found duplicate or rejected."""
        ledger = self.ledger
        if ledger is not None:
            ledger.found(seeds, referrer)
        result = await self.frontier.push(seeds, forefront=forefront)
        self.counted(result)
        if ledger is not None:
            ledger.rejected(result)
        return result

    def counted(self, result: PushResult) -> None:
        self.admitted += len(result.added)
        if result.duplicates:
            self.stats.skip(SkipReason.DUPLICATE, len(result.duplicates))
        for _, reason in result.rejected:
            self.stats.skip(reason)

    def skip(self, reason: SkipReason, count: int = 1) -> None:
        """Count ``count`` skips for ``reason``."""
        self.stats.skip(reason, count)

    def left_out(self, seed: Seed, reason: SkipReason, detail: str | None = None) -> None:
        """Count a skip of ``seed`` itself, settled by its next report (robots.txt, a refused redirect,
        a page a site crawl does not keep); ``detail`` says more (the robots.txt rule, the status)."""
        self.stats.skip(reason)
        if self.ledger is not None:
            self.ledger.left_out(seed, reason, detail)

    def read(self, seed: Seed, kind: str, detail: str | None = None) -> None:
        """Note that ``seed`` is no page but a file read for what it lists (``kind``: ``robots.txt``,
        ``sitemap``): the ledger tells it apart from the pages kept, settled by its next report."""
        if self.ledger is not None:
            self.ledger.read(seed, kind, detail)

    async def skipped(
        self, skips: Sequence[tuple[str, SkipReason]], *, referrer: str | None = None, depth: int = 0
    ) -> None:
        """Count each ``(url, reason)``, record it (found on ``referrer``, ``depth`` links from the
        start) and tell the policy's ``on_skipped``."""
        if self.ledger is not None:
            self.ledger.refused(skips, referrer=referrer, depth=depth)
        on_skipped = self.policy.on_skipped
        if on_skipped is None:  # the common case: counts only, one per reason
            counts: dict[SkipReason, int] = {}
            for _, reason in skips:
                counts[reason] = counts.get(reason, 0) + 1
            for reason, count in counts.items():
                self.stats.skip(reason, count)
            return
        for url, reason in skips:
            self.stats.skip(reason)
            returned = on_skipped(url, reason)
            if inspect.isawaitable(returned):
                await returned
