"""``Crawler``: the scheduling loop that moves seeds from a frontier, through a backend, to a worker.

    stats = Crawler(router, concurrency=16).run([Seed("http://127.0.0.1:8000/", tag="listing")])

One scheduler task leases seeds whose origin is ready (its robots.txt rules known, an in-flight slot
free, not paused, past its rate spacing and crawl-delay) and starts a worker task for each, up to
``concurrency``. A busy origin holds no crawl slot: the frontier hands out another origin's seed. An
origin whose robots.txt is not known yet keeps its seeds queued while the file is read, under the
same host limits as every other request.

Politeness and admission live here for every crawl: robots.txt, redirects admitted hop by hop like
links (dedup, the strategy, robots), block pages kept from handlers, one dedup for the frontier.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel

from spire_core import checks
from spire_core import url as urls
from spire_core.admission import Admission, CrawlPolicy, SkipReason
from spire_core.backend.base import Backend, request_scope
from spire_core.backend.http import DEFAULT_USER_AGENT, HttpBackend, PoolStats
from spire_core.blocks import BlockRules
from spire_core.context import Context, Worker
from spire_core.dataset.base import Dataset
from spire_core.dataset.memory import MemoryDataset
from spire_core.errors import Blocked, ConfigError, DatasetError, HttpStatusError, InvalidUrl, ShutDown, SpireError
from spire_core.frontier.base import Frontier, Lease, PushResult
from spire_core.frontier.dedup import Dedup
from spire_core.frontier.facade import Facade
from spire_core.frontier.items import ItemStore, store_of
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.retry import Retrying
from spire_core.frontier.tags import TagControl
from spire_core.limits import HostGate, HostLimits, HostStats, parse_retry_after
from spire_core.log import FailureLog, console, logger
from spire_core.outcome import Done, Fail, Outcome, PauseTag, Retry, SkipTag, Stop, seconds
from spire_core.redirects import RedirectRefused, Redirects
from spire_core.response import Response
from spire_core.robots import RobotsCache, RobotsGate, RobotsPolicy, product_token
from spire_core.seed import Seed
from spire_core.session.download import Downloader, download
from spire_core.session.metrics import Metrics
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts, deadline
from spire_core.session.trace import Trace
from spire_core.stats import CrawlStats

__all__ = ["Crawler"]

T = TypeVar("T", bound=BaseModel)
F = TypeVar("F", bound=Facade)
DatasetFactory = Callable[[type[BaseModel]], Dataset[Any]]


def _find_facade(frontier: Frontier, kind: type[F]) -> F | None:
    while isinstance(frontier, Facade):
        if isinstance(frontier, kind):
            return frontier
        frontier = frontier.inner
    return None


log = logger("crawler")


def _as_seeds(seeds: Iterable[Seed | str] | Seed | str) -> list[Seed]:
    """Seeds as given, URL strings made into seeds (an invalid one raises ``InvalidUrl`` here).

    One string or one ``Seed`` is one seed, not an iterable of characters; a URL without a scheme
    gets a suggestion.
    """
    if isinstance(seeds, str | Seed):
        seeds = [seeds]
    return [seed if isinstance(seed, Seed) else _seed_of(seed) for seed in seeds]


def _seed_of(url: str) -> Seed:
    try:
        return Seed(url)
    except InvalidUrl:
        if "://" not in url:
            raise InvalidUrl(f"a seed URL needs a scheme: did you mean 'http://{url}'?", url=url) from None
        raise


class _Slot:
    """The origin whose in-flight slot a worker holds, if any, and whether a request went out on it."""

    __slots__ = ("origin", "sent")

    def __init__(self, origin: str | None) -> None:
        self.origin = origin
        self.sent = False


@dataclasses.dataclass(frozen=True, slots=True)
class _Skip:
    """The seed was left out (robots.txt, a redirect that failed admission): counted, settled, not handled."""

    reason: SkipReason


class _GatedBackend:
    """The crawl's backend behind its host limits: how robots.txt is read, as any other request."""

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler

    async def fetch(self, seed: Seed) -> Response:
        crawler = self._crawler
        origin = seed.origin
        await crawler.gate.admit(origin)
        try:
            crawler.gate.sending(origin)
            crawler.stats.requests += 1
            response = await crawler.backend.fetch(crawler.with_credentials(seed))
            crawler.count_cached(response)
            return response
        finally:
            crawler.gate.release(origin)
            crawler.notify()

    async def aclose(self) -> None:
        """The crawl's backend is the crawler's to close."""


class Crawler:
    """Runs a crawl: leases seeds, admits them under host limits and robots.txt, fetches lazily, reports.

    Defaults: ``concurrency=16``; ``host_limits=HostLimits.polite()`` (4 in flight per origin,
    pause on 429 and 503); ``frontier=MemoryFrontier()``; ``backend=HttpBackend()``; datasets in
    memory; ``robots=True`` (robots.txt obeyed, for the product token of the backend's user agent;
    a string names the agent; ``False`` turns it off); ``block_rules=BlockRules.builtin()``.
    Every frontier is deduplicated by ``unique_key`` (``dedup=False`` turns that off) and gets a
    ``TagControl`` and a ``Retrying`` facade unless it already has them; ``retry=`` (default
    ``RetryPolicy.transient()``, three tries) is its policy. ``timeouts=`` bounds each request, its
    wait for a host slot included (``Timeouts``); ``metrics=`` counts every request.

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
        count_pages: bool = True,
        policy: CrawlPolicy | None = None,
        robots: bool | str | RobotsPolicy = True,
        credentials: Mapping[str, Mapping[str, str]] | None = None,
        block_rules: BlockRules | None = None,
        dedup: bool = True,
        retry: RetryPolicy | None = None,
        timeouts: float | timedelta | Timeouts | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        checks.count("concurrency", concurrency)
        checks.count("max_redirects", max_redirects, minimum=0)
        if max_requests is not None:
            checks.count("max_requests", max_requests, minimum=0)
        budget = seconds(time_budget)
        if budget is not None:
            checks.duration("time_budget", budget)
        self.worker = worker
        self.concurrency = concurrency
        self.host_limits = host_limits if host_limits is not None else HostLimits.polite()
        frontier = frontier if frontier is not None else MemoryFrontier()
        if dedup and _find_facade(frontier, Dedup) is None:
            frontier = Dedup(frontier)
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
        store = store_of(frontier)
        #: The store that commits items with reports (exactly once), when it can.
        self._item_store = store if isinstance(store, ItemStore) else None
        self.backend: Backend = backend if backend is not None else HttpBackend(timeout=self.timeouts)
        self._datasets: dict[type[BaseModel], Dataset[Any]] = {}
        self._dataset_factory: DatasetFactory = MemoryDataset
        if callable(datasets) and not isinstance(datasets, Mapping):
            self._dataset_factory = datasets
        elif datasets is not None:
            self._datasets.update(datasets)
        self.max_requests = max_requests
        self.time_budget = budget
        self.max_redirects = max_redirects
        self.follow_redirects = follow_redirects
        self.raise_for_status = raise_for_status
        #: Whether every response below 400 counts in ``stats.pages`` (a site crawl counts kept pages itself).
        self.count_pages = count_pages
        self.policy = policy if policy is not None else CrawlPolicy()
        self.block_rules = block_rules if block_rules is not None else BlockRules.builtin()
        #: Headers (Authorization, Cookie...) sent to one origin only, by origin: ``{"https://a.example": {...}}``.
        self.credentials = {urls.origin(origin): dict(headers) for origin, headers in (credentials or {}).items()}
        self.stats = CrawlStats()
        self.admission = Admission(self.frontier, self.policy, self.stats)
        #: Handler failures of the current run: logged a few of each kind in full, summarised at the end.
        self.failures = FailureLog()
        self.gate = HostGate(self.host_limits)
        self.robots = self._robots_gate(robots)
        self.redirects = Redirects(max_redirects=max_redirects, admission=self.admission, robots=self.robots)
        self._active = 0
        self._reading = 0
        self._started = 0
        self._stopping = False
        self._wake: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._wake_loop: Callable[[Callable[[], object]], object] | None = None
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

    def pool_stats(self) -> PoolStats | None:
        """The HTTP backend's connection pool (busy requests, the cap), or ``None`` for another backend (session)."""
        return self.backend.pool_stats() if isinstance(self.backend, HttpBackend) else None

    def _robots_gate(self, robots: bool | str | RobotsPolicy) -> RobotsGate | None:
        if robots is False:
            return None
        policy = RobotsPolicy(agent=robots) if isinstance(robots, str) else robots
        policy = policy if isinstance(policy, RobotsPolicy) else RobotsPolicy()
        agent = policy.agent
        if agent is None:
            user_agent = self.backend.user_agent if isinstance(self.backend, HttpBackend) else DEFAULT_USER_AGENT
            agent = product_token(user_agent) or "*"
        cache = RobotsCache(
            _GatedBackend(self), refresh_after=policy.refresh_after, retry_delays=policy.retry_delays, agent=agent
        )
        return RobotsGate(cache, agent)

    def _skipped_by_tag(self, seed: Seed) -> None:
        self.stats.skip(SkipReason.TAG)

    # -- datasets ---------------------------------------------------------------------------------

    def dataset(self, model: type[T]) -> Dataset[T]:
        """The crawl's dataset for ``model``, made by the dataset factory on first use."""
        found = self._datasets.get(model)
        if found is None:
            found = self._datasets[model] = self._dataset_factory(model)
        return found

    # -- running ----------------------------------------------------------------------------------

    def run(self, seeds: Iterable[Seed | str] | Seed | str = ()) -> CrawlStats:
        """Crawl from ``seeds`` until done; block, and return the stats.

        Installs spire's console log handler unless logging is configured (see ``spire_core.log``).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ConfigError(
                "Crawler.run() cannot start inside a running event loop (Jupyter, an async function): "
                "use `await crawler.arun(...)` there"
            )
        console()
        return anyio.run(self.arun, seeds)

    async def arun(self, seeds: Iterable[Seed | str] | Seed | str = ()) -> CrawlStats:
        """Crawl from ``seeds`` until done, in the running event loop; return the stats.

        A programmer error (a tag no handler takes, a handler returning something that is not an
        outcome) stops the crawl at once and raises its ``ConfigError`` here.
        """
        batch = self._seeds(seeds)
        if isinstance(self.backend, HttpBackend):
            self.backend.check_event_loop()  # a wrong event loop is one clear error, not a failed seed each
        self.stats = self.admission.stats = CrawlStats()
        self.failures = FailureLog()
        # A shutdown asked for before the run started ends it at once (its seeds are still queued).
        self._stopping = self._shutdown_before_start
        self._shutdown_before_start = False
        self._running = True
        self._started = self.admission.admitted = 0
        self._token = anyio.lowlevel.current_token()
        self._wake_loop = _loop_waker()
        self._thread = threading.get_ident()
        try:
            if batch:
                await self.admission.push(batch)
            with anyio.CancelScope() as scope:
                self._scope = scope
                with anyio.move_on_after(self.time_budget):
                    try:
                        async with anyio.create_task_group() as tg:
                            await self._schedule(tg)
                    except* ConfigError as group:
                        raise group.exceptions[0] from None  # one clear message, not a task group's
        finally:
            self._scope = None
            self._running = False
            self.stats.ended_at = time.monotonic()
            with anyio.CancelScope(shield=True):
                await self.backend.aclose()
                for dataset in self._datasets.values():
                    await dataset.aclose()
            summary = self.failures.summary()
            if summary is not None:
                log.warning("%s", summary)
        return self.stats

    def shutdown(self) -> None:
        """Stop the crawl: requests in flight fail with ``ShutDown``, their leases go back, nothing new starts.

        Safe to call from a handler, another task, another thread or a signal handler.
        """
        self._stopping = True
        if not self._running:
            self._shutdown_before_start = True
            return
        scope = self._scope
        if scope is None:
            return  # the run is starting: it sees ``_stopping`` before it leases anything
        if self._thread == threading.get_ident():
            scope.cancel()
            if self._wake_loop is not None:
                # From a signal handler the loop may sit blocked waiting for I/O: wake it to see the cancel.
                self._wake_loop(_nothing)
        elif self._token is not None:
            anyio.from_thread.run_sync(scope.cancel, token=self._token)

    async def push(self, seeds: Iterable[Seed | str] | Seed | str, *, forefront: bool = False) -> PushResult:
        """Add seeds to a running (or not yet started) crawl."""
        result = await self.admission.push(self._seeds(seeds), forefront=forefront)
        self.notify()
        return result

    def _seeds(self, seeds: Iterable[Seed | str] | Seed | str) -> list[Seed]:
        """``seeds`` as seeds, each tag checked against the worker: a tag typo stops here, at the call."""
        batch = _as_seeds(seeds)
        for tag in {seed.tag for seed in batch}:
            self.worker.check_tag(tag)
        return batch

    # -- scheduling -------------------------------------------------------------------------------

    def notify(self) -> None:
        """Wake the scheduler: a slot freed, seeds arrived, or an origin's robots.txt was read."""
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

    def _ready_in(self, origin: str) -> float:
        """Seconds until ``origin`` may take a request; ``inf`` while its robots.txt is not known."""
        if self.robots is not None and not self.robots.ready(origin):
            return math.inf
        return self.gate.ready_in(origin)

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
            result = await self.frontier.lease(self._ready_in)
            self._read_wanted_robots(tg)
            if isinstance(result, Lease):
                origin = result.origin
                admitted = self.gate.ready_in(origin) <= 0
                if admitted:
                    self.gate.acquire(origin)
                self._active += 1
                self._started += 1
                tg.start_soon(self._work, result, admitted)
            elif result.seconds is None and self._active == 0 and self._reading == 0:
                return
            else:
                await self._sleep_until_woken(result.seconds)

    def _read_wanted_robots(self, tg: anyio.abc.TaskGroup) -> None:
        if self.robots is None:
            return
        for origin in self.robots.wanted():
            self._reading += 1
            tg.start_soon(self._read_robots, origin)

    async def _read_robots(self, origin: str) -> None:
        assert self.robots is not None  # only started with a robots gate
        try:
            rules = await self.robots.read(origin)
            failure = self.robots.cache.errors.get(origin)
            if not rules.reachable and failure is not None:
                # Its pages are skipped as robots_unreachable: say why, as for any failure (a dead host).
                self.failures.failed(Seed(origin + "/robots.txt"), failure, handler="robots.txt")
            delay = rules.crawl_delay()
            if delay:
                self.gate.space(origin, delay)
                self.gate.pause(origin, delay)  # spaces the first page from the robots.txt request too
        finally:
            self._reading -= 1
            self.notify()

    def _total_full(self) -> bool:
        limit = self.host_limits.max_total_in_flight
        return limit is not None and self.gate.in_flight() >= limit

    # -- one seed ---------------------------------------------------------------------------------

    async def _work(self, lease: Lease, admitted: bool) -> None:
        seed = lease.seed
        slot = _Slot(seed.origin if admitted else None)
        # The fetch reaches its context through a weak reference: a strong one would be a reference
        # cycle (the context holds the fetch), which keeps the response until the cyclic collector runs.
        context: weakref.ref[Context]

        async def fetch() -> Response:
            # session: one deadline from the wait for a host slot to the last byte of the last hop
            started = time.perf_counter()
            ctx = context()
            assert ctx is not None  # the request's own task holds it while its handler runs
            try:
                with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                    response = await self._fetch(seed, slot, ctx)
            except Exception as exc:
                self.trace.request(seed, response=None, error=exc, elapsed=time.perf_counter() - started)
                raise
            finally:
                self._release(slot)
            self.trace.request(seed, response=response, error=None, elapsed=time.perf_counter() - started)
            return response

        ctx = Context(
            seed,
            fetch,
            admission=self.admission,
            datasets=self.dataset,
            backend=self.backend,
            robots=self.robots,
            check_tag=self.worker.check_tag,
        )
        context = weakref.ref(ctx)
        cancelled = anyio.get_cancelled_exc_class()
        try:
            reason = self.robots.verdict(seed.url) if self.robots is not None else None
            if reason is None:
                # What a fetch leaves open for the handler (a browser tab) closes when the handler ends.
                async with request_scope():
                    outcome = await self._handle(ctx, lease)
            else:
                outcome = _Skip(reason)
            self._release(slot)
            if isinstance(outcome, _Skip):
                self.admission.skip(outcome.reason)
                await self.frontier.report(lease, Done())  # settled: a skip is not tried again
                return
            applied = await self.frontier.report(lease, outcome)
            await self._settled(ctx, applied)
        except cancelled:
            with anyio.CancelScope(shield=True):
                self._release(slot)
                await self.frontier.release(lease)
                self.stats.errors_by_category[ShutDown.category] += 1
            raise
        finally:
            # The context is in reference cycles (its extractors' results point back at it): drop the
            # parsed page now rather than when the cyclic collector runs, some hundred pages later.
            ctx.cache.clear()
            self._active -= 1
            self.notify()

    def _release(self, slot: _Slot) -> None:
        if slot.origin is not None:
            self.gate.release(slot.origin, sent=slot.sent)
            slot.origin = None
            slot.sent = False
            self.notify()

    async def _handle(self, ctx: Context, lease: Lease) -> Outcome | _Skip:
        """Run the worker and turn what it returns or raises into an outcome; commit on success."""
        try:
            outcome = await self.worker.handle(ctx) or Done()
        except RedirectRefused as skipped:
            ctx.discard()
            return _Skip(skipped.reason)
        except ConfigError:
            ctx.discard()
            self._stopping = True
            raise  # a mistake in the crawl's code: it stops the crawl (arun raises it)
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
            return outcome
        try:
            # Items of a dataset the store holds ride on this lease's report (exactly once).
            stored = await ctx.commit(lease, self._item_store)  # not `items += await ...`: that reads the count first
        except BrokenPipeError:
            raise  # the reader of a piped output left (`| head`): the caller ends the crawl quietly
        except OSError as exc:
            # A dataset that cannot be written fails the page, not the crawl.
            error = DatasetError(f"could not store the items of {ctx.seed.url}: {exc}", path=exc.filename)
            error.url = ctx.seed.url
            return Fail(error)
        self.stats.items += stored
        return outcome

    async def _settled(self, ctx: Context, outcome: Outcome) -> None:
        stats = self.stats
        if isinstance(outcome, Retry):
            stats.retries += 1
            self.failures.retried(ctx.seed, outcome.error, handler=self.worker.describe(ctx.seed))
        elif isinstance(outcome, Fail):
            stats.failed += 1
            self.failures.failed(ctx.seed, outcome.error, handler=self.worker.describe(ctx.seed))
            category = outcome.error.category if isinstance(outcome.error, SpireError) else "handler"
            stats.errors_by_category[category] += 1
            ctx.error = outcome.error
            await self.worker.handle_failed(ctx)
        elif isinstance(outcome, SkipTag) and ctx.seed.tag == outcome.tag:
            stats.skip(SkipReason.TAG)
        elif isinstance(outcome, PauseTag) and ctx.seed.tag == outcome.tag:
            pass  # held by TagControl; it runs again when the pause ends
        else:
            stats.finished += 1
            if isinstance(outcome, Stop):
                self._stopping = True

    # -- fetching ---------------------------------------------------------------------------------

    async def _fetch(self, seed: Seed, slot: _Slot, ctx: Context) -> Response:
        """Fetch ``seed``, following redirects hop by hop, each admitted like a link and against its own origin."""
        current = seed
        hops: list[str] = []
        while True:
            if slot.origin is None:
                await self.gate.admit(current.origin)
                slot.origin = current.origin
            self.gate.sending(slot.origin)
            slot.sent = True
            self.stats.requests += 1  # every attempt, a failed connect included
            response = await self.backend.fetch(self.with_credentials(current))
            self.count_cached(response)
            self.stats.latency.record(response.elapsed)
            retry_after = response.headers.get("retry-after")
            self.gate.pause_for_status(slot.origin, response.status, retry_after)
            if self.follow_redirects and response.is_redirect:
                hops.append(current.url)
                current = await self.redirects.next_hop(seed, current, response, len(hops))
                if current.origin != slot.origin:
                    self._release(slot)
                continue
            response.seed = seed
            response.redirects = (*hops, *response.redirects)
            signal = self.block_rules.check(response)
            if signal is not None:
                if not ctx.accepts_blocks:
                    raise Blocked(signal.vendor, signal.kind, url=response.url, response=response)
                return response  # the handler asked for block pages: it gets this one, whatever its status
            if response.status >= 400 and self.raise_for_status:
                error = HttpStatusError(
                    response.status,
                    url=response.url,
                    retry_after=parse_retry_after(retry_after, max_wait=self.gate.limits.max_pause),
                )
                error.response = response
                raise error
            if response.status < 400 and self.count_pages:
                self.stats.pages += 1
            return response

    def count_cached(self, response: Response) -> None:
        """Count what a wrapping backend says of a response: a cache served it (``CachingBackend``, a
        WARC replay), or an adaptive backend chose how to fetch it."""
        if response.from_cache:
            self.stats.cached += 1
            self.stats.revalidated += response.revalidated
        if response.rendering is not None:
            self.stats.rendering[response.rendering] += 1

    def with_credentials(self, seed: Seed) -> Seed:
        """``seed`` with its origin's credentials added (its own headers win)."""
        found = self.credentials.get(seed.origin)
        if not found:
            return seed
        return dataclasses.replace(seed, headers={**found, **(seed.headers or {})}, unique_key=seed.unique_key)


def _nothing() -> None:
    """A callback that only wakes the loop."""


def _loop_waker() -> Callable[[Callable[[], object]], object] | None:
    """A thread-safe, signal-safe way to run a callback on the running asyncio loop; ``None`` under trio."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:
        return None
