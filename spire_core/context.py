"""``Context``: one seed being handled: its lazy, once-only fetch, and its staged side effects.

Links and items a handler produces are staged here and committed together only when the handler
succeeds, so a failed or retried handler leaves nothing half-written behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
from pydantic import BaseModel

from spire_core.dataset.base import Dataset
from spire_core.outcome import Outcome
from spire_core.response import Response
from spire_core.seed import Seed

if TYPE_CHECKING:
    from spire_core.crawler import Crawler

__all__ = ["Context", "Worker"]

T = TypeVar("T", bound=BaseModel)


class Worker(Protocol):
    """What a crawler runs for each seed; spire's ``Router`` is one."""

    async def handle(self, ctx: Context) -> Outcome | None:
        """Handle one seed; ``None`` means done, an exception means failed (or retried if transient)."""
        ...

    async def handle_failed(self, ctx: Context, error: BaseException) -> None:
        """Called once for a seed that failed for good."""
        ...

    def check_tag(self, tag: str | None) -> None:
        """Raise ``ConfigError`` when no handler takes seeds tagged ``tag``: the crawl stops at once."""
        ...

    def describe(self, seed: Seed) -> str:
        """The name of what handles ``seed`` (a handler's name), for log messages."""
        ...


class Context:
    """The seed in hand, its fetch (run at most once, on first need), and its staged writes."""

    def __init__(self, seed: Seed, crawler: Crawler, fetch: Callable[[], Awaitable[Response]]) -> None:
        self.seed = seed
        self.crawler = crawler
        self._fetch = fetch
        self._response: Response | None = None
        self._error: BaseException | None = None
        self._fetching: anyio.Event | None = None
        self._links: list[tuple[list[Seed], bool]] = []
        self._items: list[tuple[Dataset[Any], list[Any]]] = []
        #: Per-request cache of extractor results, keyed by extractor.
        self.cache: dict[Hashable, Any] = {}

    @property
    def fetched_response(self) -> Response | None:
        """The response if it has been fetched, without fetching it."""
        return self._response

    @property
    def fetched(self) -> bool:
        """Whether the response has been fetched (or its fetch failed)."""
        return self._response is not None or self._error is not None

    async def response(self) -> Response:
        """The response, fetched on the first call; every later call, concurrent ones too, shares it."""
        if self._response is not None:
            return self._response
        if self._fetching is not None:  # another extractor is fetching: share its result
            await self._fetching.wait()
        if self._response is not None:
            return self._response
        if self._error is not None:
            raise self._error
        self._fetching = anyio.Event()
        try:
            self._response = await self._fetch()
        except BaseException as exc:
            self._error = exc
            raise
        finally:
            self._fetching.set()
        return self._response

    def enqueue(self, seeds: Iterable[Seed], *, forefront: bool = False) -> None:
        """Stage seeds to push to the frontier when the handler succeeds."""
        batch = list(seeds)
        if batch:
            self._links.append((batch, forefront))
            self.crawler.admitted += len(batch)

    def dataset(self, model: type[T]) -> Dataset[T]:
        """The crawl's dataset for ``model``."""
        return self.crawler.dataset(model)

    def stage(self, dataset: Dataset[Any], items: list[Any]) -> None:
        """Stage validated items to append to ``dataset`` when the handler succeeds."""
        if items:
            self._items.append((dataset, items))

    @property
    def staged_links(self) -> list[tuple[list[Seed], bool]]:
        return self._links

    @property
    def staged_items(self) -> list[tuple[Dataset[Any], list[Any]]]:
        return self._items

    def discard(self) -> None:
        """Drop every staged write (the handler failed)."""
        self.crawler.admitted -= sum(len(batch) for batch, _ in self._links)
        self._links.clear()
        self._items.clear()
