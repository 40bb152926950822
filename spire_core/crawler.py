"""``Crawler``: the scheduling loop that moves seeds from a frontier, through a backend, to a worker.

    stats = Crawler(router, concurrency=16).run([Seed("http://127.0.0.1:8000/", tag="listing")])

One scheduler task leases seeds whose origin is ready (an in-flight slot free, not paused, past its
rate spacing) and starts a worker task for each, up to ``concurrency``. A busy origin holds no
crawl slot: the frontier hands out another origin's seed instead.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel

from spire_core import url as urls
from spire_core.backend.base import Backend, request_scope
from spire_core.backend.http import HttpBackend
from spire_core.context import Context, Worker
from spire_core.dataset.base import Dataset
from spire_core.dataset.memory import MemoryDataset
from spire_core.errors import ConfigError, FetchError, HttpStatusError, ShutDown, SpireError, TooManyRedirects
from spire_core.frontier.base import Frontier, Lease, PushResult
from spire_core.frontier.facade import Facade
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.retry import Retrying
from spire_core.frontier.tags import TagControl
from spire_core.limits import HostGate, HostLimits, HostStats, parse_retry_after
from spire_core.outcome import Done, Fail, Outcome, PauseTag, Retry, SkipTag, Stop, seconds
from spire_core.policy import CrawlPolicy
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.download import Downloader, download
from spire_core.session.metrics import Metrics
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts, deadline
from spire_core.session.trace import Trace
from spire_core.stats import CrawlStats

__all__ = ["Crawler"]

T = TypeVar("T", bound=BaseModel)
DatasetFactory = Callable[[type[BaseModel]], Dataset[Any]]


F = TypeVar("F", bound=Facade)


def _find_facade(frontier: Frontier, kind: type[F]) -> F | None:
    while isinstance(frontier, Facade):
        if isinstance(frontier, kind):
            return frontier
        frontier = frontier.inner
    return None


def _as_seeds(seeds: Iterable[Seed | str]) -> list[Seed]:
    """Seeds as given, URL strings made into seeds (an invalid one raises ``InvalidUrl`` here)."""
    return [seed if isinstance(seed, Seed) else Seed(seed) for seed in seeds]


def _redirected(seed: Seed, target: str, status: int) -> Seed:
    """The next hop of a redirect: 303 (and 301/302 after a POST) turn into a bodiless GET."""
    if status == 303 or (status in (301, 302) and seed.method == "POST"):
        return dataclasses.replace(seed, url=target, method="GET", body=None, unique_key=seed.unique_key)
    return dataclasses.replace(seed, url=target, unique_key=seed.unique_key)


class _Slot:
    """The origin whose in-flight slot a worker holds, if any."""

    __slots__ = ("origin",)

    def __init__(self, origin: str | None) -> None:
        self.origin = origin


class Crawler:
    """Runs a crawl: leases seeds, admits them under host limits, fetches lazily, reports outcomes.

    Defaults: ``concurrency=16``; ``host_limits=HostLimits.polite()`` (4 in flight per origin,
    pause on 429 and 503); ``frontier=MemoryFrontier().dedup()``; ``backend=HttpBackend()``;
    datasets in memory. Every frontier gets a ``TagControl`` and a ``Retrying`` facade on top unless
    it already has them; ``retry=`` (default ``RetryPolicy.transient()``, three tries) is its policy.
    ``timeouts=`` bounds each request, its wait for a host slot included (``Timeouts``).

    A crawl ends when the frontier is empty and nothing is in flight, when a handler returns
    ``Stop``, when ``max_requests`` seeds have been handled (exactly), when ``time_budget`` runs
    out, or on ``shutdown()``. Shutdown and the time budget fail what is in flight with a
    ``ShutDown`` error and hand its leases back to the frontier, so nothing is lost.
    """

    def __init__(
        self,
        worker: Worker,
        *,
        concurrency: int = 16,
        host_limits: HostLimits | None = None,
        frontier: Frontier | None = None,
        backend: Backend | None = None,
        datasets: Mapping[type[BaseModel], Dataset[Any]] | DatasetFactory | None = None,
        max_requests: int | None = None,
        time_budget: float | timedelta | None = None,
        max_redirects: int = 5,
        follow_redirects: bool = True,
        raise_for_status: bool = True,
        policy: CrawlPolicy | None = None,
        retry: RetryPolicy | None = None,
        timeouts: float | timedelta | Timeouts | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, not {concurrency}")
        if max_requests is not None and max_requests < 0:
            raise ConfigError(f"max_requests must be 0 or more, not {max_requests}")
        self.worker = worker
        self.concurrency = concurrency
        self.host_limits = host_limits if host_limits is not None else HostLimits.polite()
        frontier = frontier if frontier is not None else MemoryFrontier().dedup()
        tags = _find_facade(frontier, TagControl)
        if tags is None:
            frontier = tags = TagControl(frontier)
        tags.on_skip = self._skipped_by_tag
        # session: the retry policy lives on the Retrying facade, which asks it about every failure
        retrying = _find_facade(frontier, Retrying)
        if retrying is None:
            frontier = retrying = Retrying(frontier, retry if retry is not None else RetryPolicy.transient())
        elif retry is not None:
            retrying.policy = retry
        self.retry = retrying.policy
        self.timeouts = Timeouts() if timeouts is None else Timeouts.of(timeouts)
        #: One record per request, for the ``spire.trace`` log and ``metrics``; free when both are off.
        self.trace = Trace(metrics)
        # end session
        self.frontier: Frontier = frontier
        self.backend: Backend = backend if backend is not None else HttpBackend(timeout=self.timeouts)
        self._datasets: dict[type[BaseModel], Dataset[Any]] = {}
        self._dataset_factory: DatasetFactory = MemoryDataset
        if callable(datasets) and not isinstance(datasets, Mapping):
            self._dataset_factory = datasets
        elif datasets is not None:
            self._datasets.update(datasets)
        self.max_requests = max_requests
        self.time_budget = seconds(time_budget)
        self.max_redirects = max_redirects
        self.follow_redirects = follow_redirects
        self.raise_for_status = raise_for_status
        #: Whether every response below 400 counts in ``stats.pages`` (a site crawl counts kept pages itself).
        self.counts_pages = True
        self.policy = policy if policy is not None else CrawlPolicy()
        self.stats = CrawlStats()
        self.gate = HostGate(self.host_limits)
        self._active = 0
        self._started = 0
        #: Seeds the frontier added in this run plus links staged by running handlers: what
        #: ``policy.max_requests_per_crawl`` bounds (``Links`` checks it, contexts keep it current).
        self.admitted = 0
        self._stopping = False
        self._wake: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._thread: int | None = None
        self._shutdown_before_start = False
        self._running = False

    async def download(self, url: str | Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        """Stream ``url`` to ``path`` through the crawl's backend, holding a slot of its origin (session)."""
        if not isinstance(self.backend, Downloader):
            raise ConfigError(f"{type(self.backend).__name__} cannot stream a download; HttpBackend can")
        return await download(url, path, limit=limit, backend=self.backend, gate=self.gate)

    def host_stats(self) -> list[HostStats]:
        """Each origin the host limits track: in flight, waiting, paused until, next allowed (session)."""
        return self.gate.stats()

    def _skipped_by_tag(self, seed: Seed) -> None:
        self.stats.skip("tag")

    # -- datasets ---------------------------------------------------------------------------------

    def dataset(self, model: type[T]) -> Dataset[T]:
        """The crawl's dataset for ``model``, made by the dataset factory on first use."""
        found = self._datasets.get(model)
        if found is None:
            found = self._datasets[model] = self._dataset_factory(model)
        return found

    # -- running ----------------------------------------------------------------------------------

    def run(self, seeds: Iterable[Seed | str] = ()) -> CrawlStats:
        """Crawl from ``seeds`` until done; block, and return the stats."""
        return anyio.run(self.arun, seeds)

    async def arun(self, seeds: Iterable[Seed | str] = ()) -> CrawlStats:
        """Crawl from ``seeds`` until done, in the running event loop; return the stats."""
        batch = _as_seeds(seeds)
        self.stats = CrawlStats()
        # A shutdown asked for before the run started ends it at once (its seeds are still queued).
        self._stopping = self._shutdown_before_start
        self._shutdown_before_start = False
        self._running = True
        self._started = self.admitted = 0
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()
        try:
            if batch:
                self._count_push(await self.frontier.push(batch))
            with anyio.CancelScope() as scope:
                self._scope = scope
                with anyio.move_on_after(self.time_budget):
                    async with anyio.create_task_group() as tg:
                        await self._schedule(tg)
        finally:
            self._scope = None
            self._running = False
            self.stats.ended_at = time.monotonic()
            with anyio.CancelScope(shield=True):
                await self.backend.aclose()
                for dataset in self._datasets.values():
                    await dataset.aclose()
        return self.stats

    def shutdown(self) -> None:
        """Stop the crawl: requests in flight fail with ``ShutDown``, their leases go back, nothing new starts.

        Safe to call from a handler, another task, another thread or a signal handler.
        """
        self._stopping = True
        if not self._running:
            self._shutdown_before_start = True
            return
        if self._scope is None:
            return  # the run is starting: it sees ``_stopping`` before it leases anything
        if self._thread == threading.get_ident():
            self._scope.cancel()
        elif self._token is not None:
            scope = self._scope
            anyio.from_thread.run_sync(scope.cancel, token=self._token)

    async def push(self, seeds: Iterable[Seed | str], *, forefront: bool = False) -> PushResult:
        """Add seeds to a running (or not yet started) crawl."""
        result = await self.frontier.push(_as_seeds(seeds), forefront=forefront)
        self._count_push(result)
        self._notify()
        return result

    # -- scheduling -------------------------------------------------------------------------------

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()
            self._wake = None

    async def _sleep_until_woken(self, at_most: float | None) -> None:
        if self._wake is None:
            self._wake = anyio.Event()
        wake = self._wake
        if at_most is None:
            await wake.wait()
            return
        with anyio.move_on_after(at_most):
            await wake.wait()

    def _budget_spent(self) -> bool:
        return self.max_requests is not None and self._started >= self.max_requests

    async def _schedule(self, tg: anyio.abc.TaskGroup) -> None:
        while True:
            if self._stopping or self._budget_spent():
                if self._active == 0:
                    return
                await self._sleep_until_woken(None)
                continue
            if self._active >= self.concurrency or self._total_full():
                await self._sleep_until_woken(None)
                continue
            result = await self.frontier.lease(self.gate.ready_in)
            if isinstance(result, Lease):
                origin = result.origin
                admitted = self.gate.ready_in(origin) <= 0
                if admitted:
                    self.gate.acquire(origin)
                self._active += 1
                self._started += 1
                tg.start_soon(self._work, result, admitted)
            elif result.seconds is None and self._active == 0:
                return
            else:
                await self._sleep_until_woken(result.seconds)

    def _total_full(self) -> bool:
        limit = self.host_limits.max_total_in_flight
        return limit is not None and self.gate.in_flight() >= limit

    # -- one seed ---------------------------------------------------------------------------------

    async def _work(self, lease: Lease, admitted: bool) -> None:
        seed = lease.seed
        slot = _Slot(seed.origin if admitted else None)

        async def fetch() -> Response:
            # session: one deadline from the wait for a host slot to the last byte of the last hop
            started = time.perf_counter()
            try:
                with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                    response = await self._fetch(seed, slot)
            except Exception as exc:
                self.trace.request(seed, response=None, error=exc, elapsed=time.perf_counter() - started)
                raise
            finally:
                self._release(slot)
            self.trace.request(seed, response=response, error=None, elapsed=time.perf_counter() - started)
            return response

        ctx = Context(seed, self, fetch)
        cancelled = anyio.get_cancelled_exc_class()
        try:
            # What a fetch leaves open for the handler (a browser tab) closes when the handler ends.
            async with request_scope():
                outcome = await self._handle(ctx)
            self._release(slot)
            applied = await self.frontier.report(lease, outcome)
            await self._settled(ctx, applied)
        except cancelled:
            with anyio.CancelScope(shield=True):
                self._release(slot)
                await self.frontier.release(lease)
                self.stats.errors_by_category[ShutDown.category] += 1
            raise
        finally:
            self._active -= 1
            self._notify()

    def _release(self, slot: _Slot) -> None:
        if slot.origin is not None:
            self.gate.release(slot.origin)
            slot.origin = None
            self._notify()

    async def _handle(self, ctx: Context) -> Outcome:
        """Run the worker and turn what it returns or raises into an outcome; commit on success."""
        try:
            outcome = await self.worker.handle(ctx) or Done()
        except SpireError as exc:
            ctx.discard()
            if self.retry.retries(exc):  # session: the policy decides; Retrying works out the wait
                return Retry(error=exc)
            return Fail(exc)
        except Exception as exc:
            ctx.discard()
            return Fail(exc)
        if isinstance(outcome, Retry | Fail):
            ctx.discard()
        else:
            await self._commit(ctx)
        return outcome

    async def _commit(self, ctx: Context) -> None:
        """Push the staged links, then append the staged items: links first, so a crash in between
        re-runs the seed with its links already deduplicated and its items written once."""
        for seeds, forefront in ctx.staged_links:
            self._count_push(await self.frontier.push(seeds, forefront=forefront))
            self.admitted -= len(seeds)  # counted when staged; _count_push counted those the frontier added
        for dataset, items in ctx.staged_items:
            pushed = await dataset.push(items)  # not `items += await ...`: that reads the count before the await
            self.stats.items += pushed

    def _count_push(self, result: PushResult) -> None:
        self.admitted += len(result.added)
        if result.duplicates:
            self.stats.skip("duplicate", len(result.duplicates))
        for _, reason in result.rejected:
            self.stats.skip(reason)

    async def _settled(self, ctx: Context, outcome: Outcome) -> None:
        stats = self.stats
        if isinstance(outcome, Retry):
            stats.retries += 1
        elif isinstance(outcome, Fail):
            stats.failed += 1
            category = outcome.error.category if isinstance(outcome.error, SpireError) else "handler"
            stats.errors_by_category[category] += 1
            await self.worker.handle_failed(ctx, outcome.error)
        elif isinstance(outcome, SkipTag) and ctx.seed.tag == outcome.tag:
            stats.skip("tag")
        elif isinstance(outcome, PauseTag) and ctx.seed.tag == outcome.tag:
            pass  # held by TagControl; it runs again when the pause ends
        else:
            stats.finished += 1
            if isinstance(outcome, Stop):
                self._stopping = True

    # -- fetching ---------------------------------------------------------------------------------

    async def _fetch(self, seed: Seed, slot: _Slot) -> Response:
        """Fetch ``seed``, following redirects hop by hop, each admitted against its own origin."""
        current = seed
        hops: list[str] = []
        while True:
            if slot.origin is None:
                await self.gate.admit(current.origin)
                slot.origin = current.origin
            self.gate.sending(slot.origin)
            response = await self.backend.fetch(current)
            self.stats.requests += 1
            self.stats.latency.record(response.elapsed)
            retry_after = response.headers.get("retry-after")
            self.gate.pause_for_status(slot.origin, response.status, retry_after)
            if self.follow_redirects and response.is_redirect:
                target = urls.join(current.url, response.headers["location"])
                if target is None or not target.startswith(("http://", "https://")):
                    raise FetchError(f"redirect to an invalid URL: {response.headers['location']!r}", url=current.url)
                hops.append(current.url)
                if len(hops) > self.max_redirects:
                    raise TooManyRedirects(f"more than {self.max_redirects} redirects", url=seed.url)
                if urls.origin(target) != slot.origin:
                    self._release(slot)
                current = _redirected(current, target, response.status)
                continue
            response.seed = seed
            response.redirects = (*hops, *response.redirects)
            if response.status >= 400 and self.raise_for_status:
                error = HttpStatusError(response.status, url=response.url, retry_after=parse_retry_after(retry_after))
                error.response = response
                raise error
            if response.status < 400 and self.counts_pages:
                self.stats.pages += 1
            return response
