"""``Context``: one seed being handled: its lazy, once-only fetch, and its staged side effects.

A context is the per-request interface a handler's extractors see: the seed, its fetch, the links
and items it stages, the crawl's ``Admission`` (depth, the request cap, the seen check), the backend
that fetched it and the error a failed seed ended with. It never holds the ``Crawler``.

Links and items a handler produces are staged here and committed together only when the handler
succeeds, so a failed or retried handler leaves nothing half-written behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, Protocol, TypeVar

import anyio
from pydantic import BaseModel

from spire_core import html
from spire_core.admission import Admission
from spire_core.backend.base import Backend, request_scope
from spire_core.dataset.base import Dataset, Sink
from spire_core.errors import ConfigError, SpireError
from spire_core.frontier.base import Lease
from spire_core.frontier.items import ItemStore
from spire_core.log import logger
from spire_core.outcome import Done, Fail, Outcome, Retry
from spire_core.recrawl import Revisits, observe, revisit
from spire_core.redirects import RedirectRefused
from spire_core.response import Response
from spire_core.revisit import PageNote
from spire_core.robots import KnownRobots
from spire_core.seed import Seed
from spire_core.session.addresses import PrivateAddress
from spire_core.session.retry import RetryPolicy
from spire_core.skips import LeftOut, SkipReason

__all__ = ["Context", "DatasetSource", "Worker", "handle_here", "run_worker"]

T = TypeVar("T", bound=BaseModel)

log = logger("extract")

#: The crawl's dataset for a model, made on first use.
DatasetSource = Callable[[type[Any]], Dataset[Any]]


class Worker(Protocol):
    """What a crawler runs for each seed; spire's ``Router`` is one."""

    async def handle(self, ctx: Context) -> Outcome | None:
        """Handle one seed; ``None`` means done, an exception means failed (or retried if transient)."""
        ...

    async def handle_failed(self, ctx: Context) -> None:
        """Called once for a seed that failed for good; ``ctx.error`` is why."""
        ...

    def check_tag(self, tag: str | None) -> None:
        """Raise ``ConfigError`` when no handler takes seeds tagged ``tag``: the crawl stops at once."""
        ...

    def describe(self, seed: Seed) -> str:
        """The name of what handles ``seed`` (a handler's name), for log messages."""
        ...

    def runs_here(self, seed: Seed) -> bool:
        """Whether ``seed`` is handled in the crawl's own process with ``processes=N`` too (a handler
        that keeps crawl-wide state); ``False`` lets a worker process take it."""
        ...

    def is_page(self, seed: Seed) -> bool:
        """Whether ``seed`` fetches a page a crawl with ``recrawl=`` keeps and revisits (a sitemap or
        a feed, read afresh each time, is not one)."""
        ...


class Context:
    """The seed in hand, its fetch (run at most once, on first need), and its staged writes."""

    def __init__(
        self,
        seed: Seed,
        fetch: Callable[[Context], Awaitable[Response]],
        *,
        admission: Admission,
        datasets: DatasetSource,
        backend: Backend,
        robots: KnownRobots | None = None,
        check_tag: Callable[[str | None], None] | None = None,
        revisits: Revisits | None = None,
    ) -> None:
        self.seed = seed
        self.admission = admission
        self.backend = backend
        #: The crawl's robots.txt gate (``None`` with ``robots=False``): the known rules of an origin.
        self.robots = robots
        #: A recrawl's state, to a handler in the crawl's process (``local=True``) of a crawl with
        #: ``recrawl=``: tell it each URL's sitemap ``lastmod``. ``None`` elsewhere.
        self.revisits = revisits
        self._check_tag = check_tag
        self._fetch = fetch
        self._datasets = datasets
        self._response: Response | None = None
        self._fetch_error: BaseException | None = None
        self._fetching = False
        #: Set when the fetch ends; made only when a second extractor waits for it (most never do).
        self._fetched: anyio.Event | None = None
        self._links: list[tuple[list[Seed], bool]] = []
        self._items: list[tuple[Sink[Any], list[Any]]] = []
        #: Whether the handler takes block pages as pages (an extractor asked for them); set by the worker.
        self.accepts_blocks = False
        #: Why the seed failed for good, for ``@router.failed`` hooks; ``None`` while it has not.
        self.error: BaseException | None = None
        #: Per-request cache of extractor results, keyed by extractor.
        self.cache: dict[Hashable, Any] = {}
        #: Links the handler found but that were not queued because it failed.
        self.dropped_links = 0
        #: What handling found of the page, for a crawl that keeps page states (``recrawl=``).
        self.page: PageNote | None = None
        #: The page's fingerprint, once a recrawl's revisit check computed it.
        self.fingerprint: str | None = None
        self._document: Any = None

    def check_tag(self, tag: str | None) -> None:
        """``ConfigError`` when no handler takes ``tag`` (the worker's check; any tag without one)."""
        if self._check_tag is not None:
            self._check_tag(tag)

    @property
    def fetched_response(self) -> Response | None:
        """The response if it has been fetched, without fetching it."""
        return self._response

    @property
    def fetch_error(self) -> BaseException | None:
        """Why the fetch failed, if it did (without fetching)."""
        return self._fetch_error

    @property
    def parsed_document(self) -> Any:
        """The page parsed as HTML if ``document()`` parsed it already, else ``None`` (parses nothing)."""
        return self._document

    async def document(self) -> Any:
        """The response parsed as HTML (a parsel ``Selector``), once per request: the ``Html`` extractor
        and a recrawl's fingerprint share it. Markup nested past the parser's depth is counted
        (``deep_nesting``) and named in a warning: it is flattened below it, its text kept."""
        if self._document is not None:
            return self._document
        response = await self.response()
        page, deep = html.read_page(response.body, response.encoding, response.url)
        if deep:
            self.admission.skip(SkipReason.DEEP_NESTING)
            log.warning(
                "%s: markup nested %d levels deep or more, the parser's limit: flattened below it, so its "
                "text is whole but its structure there is not",
                response.url,
                html.MAX_DEPTH,
            )
        self._document = page
        return page

    def clear(self) -> None:
        """Drop what handling the seed built (extractor results, the parsed page): they point back at
        the context, so the page is freed now rather than when the cyclic collector runs."""
        self.cache.clear()
        self._document = None

    @property
    def fetched(self) -> bool:
        """Whether the response has been fetched (or its fetch failed)."""
        return self._response is not None or self._fetch_error is not None

    async def response(self) -> Response:
        """The response, fetched on the first call; every later call, concurrent ones too, shares it."""
        if self._response is not None:
            return self._response
        if self._fetching:  # another extractor is fetching: share its result
            if self._fetched is None:
                self._fetched = anyio.Event()
            await self._fetched.wait()
        if self._response is not None:
            return self._response
        if self._fetch_error is not None:
            raise self._fetch_error
        self._fetching = True
        try:
            self._response = await self._fetch(self)
        except BaseException as exc:
            self._fetch_error = exc
            raise
        finally:
            self._fetching = False
            if self._fetched is not None:
                self._fetched.set()
        return self._response

    def enqueue(self, seeds: Iterable[Seed], *, forefront: bool = False) -> None:
        """Stage seeds to push to the frontier when the handler succeeds (their places are reserved now)."""
        batch = list(seeds)
        if batch:
            self._links.append((batch, forefront))
            self.admission.reserve(len(batch))

    def dataset(self, model: type[T]) -> Dataset[T]:
        """The crawl's dataset for ``model``."""
        return self._datasets(model)

    def stage(self, dataset: Sink[Any], items: list[Any]) -> None:
        """Stage validated items to push to ``dataset`` (or another sink) when the handler succeeds."""
        if items:
            self._items.append((dataset, items))

    @property
    def staged_links(self) -> list[tuple[list[Seed], bool]]:
        return self._links

    @property
    def staged_items(self) -> list[tuple[Sink[Any], list[Any]]]:
        return self._items

    def discard(self, *, failed: bool = True) -> None:
        """Drop every staged write (the handler failed) and give back their places.

        The links a failed handler found are counted in ``dropped_links`` (``failed=False``: they were
        only handed on, as a worker process does).
        """
        dropped = sum(len(batch) for batch, _ in self._links)
        self.admission.release(dropped)
        if failed:
            self.dropped_links += dropped
        self._links.clear()
        self._items.clear()

    async def commit(self, lease: Lease | None = None, store: ItemStore | None = None) -> int:
        """Push the staged links, then append the staged items; return how many items were stored.

        Links go first, so a crash in between re-runs the seed with its links already deduplicated.
        Items of a dataset ``store`` holds are staged on ``lease`` instead, for the store to write with
        the lease's report (exactly once); the others are written now (at least once).
        """
        admission = self.admission
        for seeds, forefront in self._links:
            await admission.push(seeds, forefront=forefront, referrer=self.seed.url)
            admission.release(len(seeds))  # reserved when staged; push counted those the frontier added
        self._links.clear()
        stored = 0
        joined: list[tuple[Dataset[Any], list[Any]]] = []
        for dataset, items in self._items:
            if store is not None and isinstance(dataset, Dataset) and store.holds(dataset):
                joined.append((dataset, items))
            else:
                pushed = await dataset.push(items)
                stored += pushed
        if store is not None and lease is not None and joined:
            store.stage(lease, joined)  # written by the report of this lease, or dropped with it
            stored += sum(len(items) for _, items in joined)
        self._items.clear()
        return stored


async def run_worker(worker: Worker, ctx: Context, retry: RetryPolicy) -> Outcome | LeftOut:
    """Run ``worker`` on ``ctx`` and turn what it returns or raises into an outcome.

    A failure drops the staged writes; ``retry`` decides whether a spire error is tried again. A
    redirect that failed admission leaves the seed out. A ``ConfigError`` (a mistake in the crawl's
    code) is raised: it stops the crawl.
    """
    try:
        outcome = await worker.handle(ctx) or Done()
    except RedirectRefused as skipped:
        ctx.discard()
        return LeftOut(skipped.reason)
    except PrivateAddress:
        ctx.discard()
        return LeftOut(SkipReason.PRIVATE_ADDRESS)
    except ConfigError:
        ctx.discard()
        raise
    except SpireError as exc:
        ctx.discard()
        return Retry(error=exc) if retry.retries(exc) else Fail(exc)
    except Exception as exc:
        ctx.discard()
        return Fail(exc)
    if isinstance(outcome, Retry | Fail):
        ctx.discard()
    return outcome


async def handle_here(worker: Worker, ctx: Context, retry: RetryPolicy, *, pages: bool = False) -> Outcome | LeftOut:
    """Handle ``ctx``'s seed in this process, as every process of a crawl does: ``run_worker`` inside
    a request scope, then its extractors' results dropped. What the handler staged stays on ``ctx``.

    With ``pages`` (a crawl that keeps page states, ``recrawl=``), a recrawl's revisit is fetched
    first and, unchanged, settled without its handler; what handling found of the page is left on
    ``ctx.page``.

    The scope closes what a fetch left open for the handler (a browser tab) when the handler ends.
    The cache goes at once because its results (``Links``, a parsed page) point back at ``ctx``: the
    page is freed now, not when the cyclic collector runs pages later.
    """
    try:
        async with request_scope():
            if not pages or not worker.is_page(ctx.seed):
                return await run_worker(worker, ctx, retry)
            settled = await revisit(ctx)
            if settled is not None:
                return settled  # unchanged (what its handler wrote the time before stands), or gone
            outcome = await run_worker(worker, ctx, retry)
            if not isinstance(outcome, LeftOut):
                ctx.page = observe(ctx, outcome)
            return outcome
    finally:
        ctx.clear()
