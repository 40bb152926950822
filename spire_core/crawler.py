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
import enum
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel

from spire_core import checks
from spire_core import url as urls
from spire_core.admission import Admission, CrawlPolicy, RequestBudget, SkipReason
from spire_core.backend.abilities import PoolStats, Timed, check_event_loop, pool_stats_of, user_agent_of
from spire_core.backend.base import Backend
from spire_core.backend.http import DEFAULT_USER_AGENT, HttpBackend
from spire_core.blocks import BlockRules
from spire_core.context import Worker
from spire_core.dataset.base import Checked, Dataset
from spire_core.dataset.memory import MemoryDataset
from spire_core.errors import ConfigError, FetchError, InvalidUrl, RobotsDisallowed
from spire_core.frontier.base import Frontier, Lease, PushResult
from spire_core.frontier.dedup import Dedup
from spire_core.frontier.facade import Facade
from spire_core.frontier.items import ItemStore, store_of
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.retry import Retrying
from spire_core.frontier.tags import TagControl
from spire_core.handling import Handling
from spire_core.ledger import Entry, LedgerMode, LedgerView
from spire_core.ledger_stores import ledger_of, open_ledger
from spire_core.limits import HostGate, HostLimits, HostStats, SharedSlots
from spire_core.log import FailureLog, console, logger
from spire_core.outcome import seconds
from spire_core.processes.messages import WorkerSpec
from spire_core.processes.pool import ProcessPool, Services, process_count
from spire_core.redirects import Redirects
from spire_core.response import Response
from spire_core.robots import RobotsCache, RobotsGate, RobotsPolicy, product_token
from spire_core.seed import Seed
from spire_core.seed_fetcher import SeedFetcher
from spire_core.send import GateSlot, Sender, fleet_slot
from spire_core.session.addresses import AddressPolicy
from spire_core.session.metrics import Metrics
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts
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


class CrawlState(enum.StrEnum):
    """Where a crawl is in its life (``Crawler.state``)."""

    #: Not run yet, or between runs.
    IDLE = "idle"
    RUNNING = "running"
    #: ``stop()`` or a ``Stop`` outcome: what is in flight finishes, nothing new starts.
    STOPPING = "stopping"
    #: ``shutdown()`` or the time budget: what is in flight is cancelled and goes back to the frontier.
    SHUTTING_DOWN = "shutting_down"
    FINISHED = "finished"
    SHUT_DOWN = "shut_down"


class _RobotsRequests:
    """How the robots.txt cache's reads go out: on the crawl's one request path, as any other request.

    Each read takes a slot of its origin's host limits and, with a frontier whose host slots are
    shared by many workers (``RedisFrontier``), one of those too, so the fleet's cap holds for
    robots.txt as for pages; each spends one request of the crawl's budget.
    """

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler

    async def fetch(self, seed: Seed) -> Response:
        crawler = self._crawler
        crawler.spend_budget(seed)
        slot = GateSlot(crawler.gate, None, crawler.notify)
        try:
            await slot.take(seed.origin)
            async with fleet_slot(crawler.shared_slots, seed.origin):
                return await crawler.sender.send(seed, slot)
        except FetchError as exc:
            # Tried again (RFC 9309) before its pages are given up: the progress display says why meanwhile.
            crawler.failures.last = (seed.url, f"{type(exc).__name__}: {exc} (robots.txt, tried again)")
            raise
        finally:
            slot.release()

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
    wait for a host slot included (``Timeouts``), whatever backend is given; ``metrics=`` counts every
    request. A request to a private, loopback or link-local address of a kind the start seeds are not
    on (a redirect to a cloud's metadata address) is not sent and counts as ``private_address``;
    ``allow_private=True`` sends it.

    A crawl ends when the frontier is empty and nothing is in flight, when a handler returns
    ``Stop``, when ``max_requests`` requests have been sent (robots.txt and redirect hops count, as a
    server sees them; never more), when ``max_seeds`` seeds have been handled (exactly), when ``time_budget`` runs
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
        max_seeds: int | None = None,
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
        processes: int | Literal["auto"] = 1,
        allow_private: bool = False,
        ledger: LedgerMode | bool = "full",
    ) -> None:
        checks.count("concurrency", concurrency)
        checks.count("max_redirects", max_redirects, minimum=0)
        if max_requests is not None:
            checks.count("max_requests", max_requests, minimum=0)
        if max_seeds is not None:
            checks.count("max_seeds", max_seeds, minimum=0)
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
        given_timeouts = None if timeouts is None else Timeouts.of(timeouts)
        #: One record per request, for the ``spire.trace`` log and ``metrics``; free when both are off.
        # ledger: every URL's fate, kept by the frontier's store (``None`` for a store that keeps none)
        ledger_sink = open_ledger(frontier, ledger)
        self.trace = Trace(metrics, ledger=ledger_sink)
        # end session
        self.frontier: Frontier = frontier
        store = store_of(frontier)
        #: The store that commits items with reports (exactly once), when it can.
        self._item_store = store if isinstance(store, ItemStore) else None
        #: Host slots the store shares with other workers (``RedisFrontier``), taken by robots.txt reads too.
        self.shared_slots = store if isinstance(store, SharedSlots) else None
        if backend is None:
            backend = HttpBackend(timeout=given_timeouts)
        self.backend: Backend = backend
        # One owner for the timeouts: the crawl's apply to whatever backend it sends through.
        if isinstance(backend, Timed):
            self.timeouts = backend.use_timeouts(given_timeouts)
        else:
            self.timeouts = given_timeouts if given_timeouts is not None else Timeouts()
        self._datasets: dict[type[BaseModel], Dataset[Any]] = {}
        self._dataset_factory: DatasetFactory = MemoryDataset
        if callable(datasets) and not isinstance(datasets, Mapping):
            self._dataset_factory = datasets
        elif datasets is not None:
            self._datasets.update(datasets)
        self.max_requests = max_requests
        self.max_seeds = max_seeds
        #: The requests left to send (``max_requests``), spent by every request of the crawl's process.
        self.budget: RequestBudget | None = None
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
        #: The one request path: every request of the crawl goes out through it.
        self.sender = Sender(
            backend=self.backend,
            trace=self.trace,
            stats=self.stats,
            timeouts=self.timeouts,
            credentials=self.credentials,
            addresses=AddressPolicy(allow_private=allow_private),
        )
        self.admission = Admission(self.frontier, self.policy, self.stats)
        self.admission.ledger = ledger_sink
        #: Handler failures of the current run: logged a few of each kind in full, summarised at the end.
        self.failures = FailureLog()
        self.gate = HostGate(self.host_limits)
        self.robots = self._robots_gate(robots)
        self.redirects = Redirects(max_redirects=max_redirects, admission=self.admission, robots=self.robots)
        #: How the crawl fetches a seed, hop by hop (a worker process of ``processes=N`` has a copy).
        self.fetcher = SeedFetcher(
            sender=self.sender,
            redirects=self.redirects,
            block_rules=self.block_rules,
            max_pause=self.host_limits.max_pause,
            follow_redirects=follow_redirects,
            raise_for_status=raise_for_status,
            count_pages=count_pages,
        )
        #: Worker processes that fetch and handle seeds (1: this process does it all).
        self.processes = process_count(processes)
        if self.processes > 1 and metrics is not None:
            raise ConfigError("metrics= counts the requests of one process; leave it out with processes > 1")
        self._pool: ProcessPool | None = None
        self._active = 0
        self._reading = 0
        self._started = 0
        #: Where the crawl is in its life: one value, set by ``arun``, ``stop`` and ``shutdown``.
        self.state = CrawlState.IDLE
        self._wake: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._wake_loop: Callable[[Callable[[], object]], object] | None = None
        self._thread: int | None = None

    async def download(self, url: str | Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        """Stream ``url`` to ``path`` on the crawl's request path: robots.txt obeyed (read first if the
        origin's is not known), a slot of its origin held until the body ends, credentials, the
        crawl's timeouts, counted and logged as any request. Redirects are not followed.

        ``RobotsDisallowed`` when robots.txt keeps the URL out; the decoded body goes to a temporary
        file renamed to ``path`` only when complete; ``limit`` caps its size (session).
        """
        seed = url if isinstance(url, Seed) else Seed(url)
        if self.state not in (CrawlState.RUNNING, CrawlState.STOPPING):
            await self._started_from([seed])  # outside a run, the caller chose this URL as a start seed is chosen
        if self.robots is not None:
            if self.robots.rules(seed.url) is None:
                await self.robots.read(seed.origin)
            reason = self.robots.verdict(seed.url)
            if reason is not None:
                raise RobotsDisallowed(f"robots.txt keeps {seed.url} out ({reason})", url=seed.url)
        self.spend_budget(seed)
        slot = GateSlot(self.gate, None, self.notify)
        try:
            return await self.sender.download(seed, path, slot, limit=limit)
        finally:
            slot.release()

    @property
    def ledger(self) -> LedgerView | None:
        """The crawl's ledger (every URL's fate), kept by its frontier; ``None`` with ``ledger=False``."""
        return ledger_of(self.frontier)

    async def why(self, url: str) -> Entry | None:
        """What became of ``url``: its ledger entry, or ``None`` when the crawl never met it."""
        found = self.ledger
        if found is None:
            raise ConfigError("this crawl keeps no ledger: leave ledger= at its default ('full')")
        return await found.entry(url)

    def spend_budget(self, seed: Seed) -> None:
        """Take one request of the budget for ``seed`` (a robots.txt read, a download); ``FetchError`` if spent."""
        if self.budget is not None and not self.budget.spend():
            raise FetchError("the crawl's request budget (max_requests) is spent", url=seed.url)

    def host_stats(self) -> list[HostStats]:
        """Each origin the host limits track: in flight, waiting, paused until, next allowed (session)."""
        return self.gate.stats()

    def pool_stats(self) -> PoolStats | None:
        """The HTTP backend's connection pool (busy requests, the cap), or ``None`` for another backend (session)."""
        return pool_stats_of(self.backend)

    def _robots_gate(self, robots: bool | str | RobotsPolicy) -> RobotsGate | None:
        if robots is False:
            return None
        policy = RobotsPolicy(agent=robots) if isinstance(robots, str) else robots
        policy = policy if isinstance(policy, RobotsPolicy) else RobotsPolicy()
        agent = policy.agent
        if agent is None:
            agent = product_token(user_agent_of(self.backend) or DEFAULT_USER_AGENT) or "*"
        cache = RobotsCache(
            _RobotsRequests(self), refresh_after=policy.refresh_after, retry_delays=policy.retry_delays, agent=agent
        )
        return RobotsGate(cache, agent)

    def _worker_spec(self) -> WorkerSpec:
        """What a worker process needs to handle seeds as this process would."""
        return WorkerSpec(
            worker=self.worker,
            fetcher=self.fetcher,
            policy=self.policy,
            retry=self.retry,
            datasets=dict(self._datasets),
            pause_on=frozenset(self.host_limits.pause_on),
        )

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
        check_event_loop(self.backend)  # a wrong event loop is one clear error, not a failed seed each
        self.stats = self.admission.stats = self.sender.stats = CrawlStats()
        self.budget = self.redirects.budget = (
            RequestBudget(self.max_requests) if self.max_requests is not None else None
        )
        self.failures = FailureLog()
        # A shutdown asked for before the run started ends it at once (its seeds are still queued).
        if self.state is not CrawlState.SHUTTING_DOWN:
            self.state = CrawlState.RUNNING
        self._started = self.admission.admitted = 0
        self._token = anyio.lowlevel.current_token()
        self._wake_loop = _loop_waker()
        self._thread = threading.get_ident()
        try:
            for dataset in self._datasets.values():
                if isinstance(dataset, Checked):
                    await dataset.check()  # a path no item can reach stops the crawl now, in one line
            if batch:
                await self._started_from(batch)
                await self.admission.push(batch)
            try:
                # The pool's own tasks (its workers' channels, the forker's news) live outside the cancel
                # scope a shutdown or the time budget cancels: the pool then stops its workers itself,
                # their last counts kept, and no worker is taken for dead and replaced on the way out.
                async with anyio.create_task_group() as pool_tasks:
                    if self.processes > 1:
                        services = Services(self.admission, self.redirects, self.robots, self.stats)
                        self._pool = await ProcessPool.start(
                            pool_tasks, self._worker_spec(), self.processes, services=services
                        )
                    try:
                        with anyio.CancelScope() as scope:
                            self._scope = scope
                            with anyio.move_on_after(self.time_budget) as budget:
                                async with anyio.create_task_group() as tg:
                                    await self._schedule(tg, self._handling(self._pool))
                            if budget.cancelled_caught:
                                self.state = CrawlState.SHUTTING_DOWN  # the time budget shuts the crawl down
                    finally:
                        self._scope = None
                        if self._pool is not None:
                            with anyio.CancelScope(shield=True):
                                await self._pool.aclose()
                            self._pool = None
            except* ConfigError as group:
                raise _first(group) from None  # one clear message, not a task group's
        finally:
            shut = self.state is CrawlState.SHUTTING_DOWN
            self.state = CrawlState.SHUT_DOWN if shut else CrawlState.FINISHED
            self.stats.ended_at = time.monotonic()
            with anyio.CancelScope(shield=True):
                await self.backend.aclose()
                for dataset in self._datasets.values():
                    await dataset.aclose()
            summary = self.failures.summary()
            if summary is not None:
                log.warning("%s", summary)
        return self.stats

    def stop(self) -> None:
        """End the crawl as a handler's ``Stop`` does: what is in flight finishes, nothing new starts."""
        if self.state is CrawlState.RUNNING:
            self.state = CrawlState.STOPPING
        self.notify()

    @property
    def is_shut_down(self) -> bool:
        """Whether ``shutdown()`` (or the time budget) ended, or is ending, the crawl: what was in flight
        went back to the frontier (counted in ``errors_by_category["shut_down"]``) rather than finished."""
        return self.state in (CrawlState.SHUTTING_DOWN, CrawlState.SHUT_DOWN)

    def shutdown(self) -> None:
        """Stop the crawl: requests in flight fail with ``ShutDown``, their leases go back, nothing new starts.

        Safe to call from a handler, another task, another thread or a signal handler.
        """
        running = self.state in (CrawlState.RUNNING, CrawlState.STOPPING)
        self.state = CrawlState.SHUTTING_DOWN
        if not running:
            return  # the next run ends at once, its seeds still queued
        scope = self._scope
        if scope is None:
            return  # the run is starting: it sees the state before it leases anything
        if self._thread == threading.get_ident():
            scope.cancel()
            if self._wake_loop is not None:
                # From a signal handler the loop may sit blocked waiting for I/O: wake it to see the cancel.
                self._wake_loop(_nothing)
        elif self._token is not None:
            anyio.from_thread.run_sync(scope.cancel, token=self._token)

    async def push(self, seeds: Iterable[Seed | str] | Seed | str, *, forefront: bool = False) -> PushResult:
        """Add seeds to a running (or not yet started) crawl."""
        batch = self._seeds(seeds)
        await self._started_from(batch)
        result = await self.admission.push(batch, forefront=forefront)
        self.notify()
        return result

    async def _started_from(self, seeds: list[Seed]) -> None:
        """Seeds the user gave: their hosts (and addresses of their kinds) are the crawl's to reach."""
        if self.sender.addresses is not None:
            self.sender.addresses.started(seeds)

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
        if self.budget is not None and self.budget.left <= 0:
            return True
        return self.max_seeds is not None and self._started >= self.max_seeds

    def _ready_in(self, origin: str) -> float:
        """Seconds until ``origin`` may take a request; ``inf`` while its robots.txt is not known."""
        if self.robots is not None and not self.robots.ready(origin):
            return math.inf
        return self.gate.ready_in(origin)

    def _handling(self, pool: ProcessPool | None) -> Handling:
        """How this run handles each seed, with its stats and failure log."""
        return Handling(
            worker=self.worker,
            retry=self.retry,
            frontier=self.frontier,
            admission=self.admission,
            robots=self.robots,
            gate=self.gate,
            fetcher=self.fetcher,
            backend=self.backend,
            datasets=self.dataset,
            item_store=self._item_store,
            stats=self.stats,
            failures=self.failures,
            notify=self.notify,
            stop=self.stop,
            pool=pool,
        )

    async def _schedule(self, tg: anyio.abc.TaskGroup, handling: Handling) -> None:
        while True:
            if self.state is not CrawlState.RUNNING or self._budget_spent():
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
                if self.budget is not None:
                    self.budget.spend()  # the seed's first request; its redirect hops spend theirs
                origin = result.origin
                admitted = self.gate.ready_in(origin) <= 0
                if admitted:
                    self.gate.acquire(origin)
                self._active += 1
                self._started += 1
                tg.start_soon(self._work, handling, result, admitted)
            elif result.seconds is None and self._active == 0 and self._reading == 0:
                return
            else:
                await self._sleep_until_woken(result.seconds)

    def _read_wanted_robots(self, tg: anyio.abc.TaskGroup) -> None:
        if self.robots is None or self._budget_spent():
            return
        for origin in self.robots.wanted():
            self._reading += 1
            tg.start_soon(self._read_robots, origin)

    async def _read_robots(self, origin: str) -> None:
        assert self.robots is not None  # only started with a robots gate
        try:
            rules = await self.robots.read(origin)
            failure = self.robots.cache.errors.get(origin)
            if not rules.reachable and failure is not None and not self._budget_spent():
                self.failures.host_unreachable(origin, failure)  # its pages are skipped, not failed
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

    async def _work(self, handling: Handling, lease: Lease, admitted: bool) -> None:
        try:
            await handling.work(lease, admitted)
        finally:
            self._active -= 1
            self.notify()


def _first(group: BaseExceptionGroup[ConfigError]) -> ConfigError:
    """The first ``ConfigError`` of ``group``, however deep the task groups nested it."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    assert isinstance(found, ConfigError)  # what except* ConfigError keeps
    return found


def _nothing() -> None:
    """A callback that only wakes the loop."""


def _loop_waker() -> Callable[[Callable[[], object]], object] | None:
    """A thread-safe, signal-safe way to run a callback on the running asyncio loop; ``None`` under trio."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:
        return None
