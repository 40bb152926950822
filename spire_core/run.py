"""``Run``: one run of a ``Crawler``, from its first lease to its last report.

A ``Crawler`` is the crawl's description; each ``run``/``arun`` gets one ``Run``, which owns what
that run changes: its ``CrawlStats``, failure log, request budget and admission counters, its
lifecycle state, the task group its seeds are handled in, and its request path (a ``Sender`` that
counts into its stats). It hands each part only what that part needs: the scheduler a wake-up,
the robots.txt reads a slot factory and a budget, the per-seed handling a commit target.

One scheduler task leases seeds whose origin is ready (its robots.txt rules known, an in-flight
slot free, not paused, past its rate spacing and crawl-delay) and starts a task for each, up to
``concurrency``. A busy origin holds no crawl slot: the frontier hands out another origin's seed.
An origin whose robots.txt is not known yet keeps its seeds queued while the file is read, under the
same host limits as every other request.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel

from spire_core.admission import Admission, CrawlPolicy, RequestBudget, SkipReason
from spire_core.backend.abilities import check_event_loop
from spire_core.backend.base import Backend
from spire_core.blocks import BlockRules
from spire_core.clock import MONOTONIC, Clock, wait_on
from spire_core.context import Worker
from spire_core.dataset.base import Checked, Dataset, Sink
from spire_core.download import DownloadPath
from spire_core.errors import ConfigError, FetchError, RetryWaitTooLong, RobotsDisallowed
from spire_core.frontier.base import Frontier, Lease, PushResult
from spire_core.frontier.facades import TagControl
from spire_core.frontier.items import ItemStore
from spire_core.handling import Handling
from spire_core.ledger import LedgerSink
from spire_core.limits import HostGate, HostLimits, SharedSlots
from spire_core.log import FailureLog, logger
from spire_core.recrawl import Recrawl, Recrawlable, Revisits
from spire_core.redirects import Redirects
from spire_core.response import Response
from spire_core.robots import RobotsCache, RobotsGate, RobotsPolicy
from spire_core.robots.answer import robots_answer
from spire_core.seed import Seed
from spire_core.seed_fetcher import SeedFetcher
from spire_core.send import GateSlot, Sender, fleet_slot
from spire_core.session.addresses import AddressPolicy
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts
from spire_core.session.trace import Trace
from spire_core.stats import CrawlStats

if TYPE_CHECKING:
    from spire_core.processes.messages import WorkerSpec
    from spire_core.processes.pool import ProcessPool

__all__ = ["CrawlState", "Run", "RunSpec"]

log = logger("crawler")

#: The name of each seed's task: what anyio would work out from ``Run._work`` again for every one.
_WORK_TASK = f"{__name__}.Run._work"


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


#: The states of a run that has begun and not ended.
LIVE = frozenset({CrawlState.RUNNING, CrawlState.STOPPING, CrawlState.SHUTTING_DOWN})
#: The states of a run that has ended.
ENDED = frozenset({CrawlState.FINISHED, CrawlState.SHUT_DOWN})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FetchRules:
    """How a page is fetched: redirects, the block rules, what a failing status does."""

    block_rules: BlockRules
    max_redirects: int = 5
    follow_redirects: bool = True
    raise_for_status: bool = True


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """What every run of one ``Crawler`` shares: its description, settled once by the ``Crawler``."""

    worker: Worker
    frontier: Frontier
    tags: TagControl
    backend: Backend
    gate: HostGate
    host_limits: HostLimits
    concurrency: int
    policy: CrawlPolicy
    retry: RetryPolicy
    timeouts: Timeouts
    credentials: Mapping[str, Mapping[str, str]]
    addresses: AddressPolicy
    trace: Trace
    fetch: FetchRules
    #: robots.txt as the crawl reads it (``None``: not obeyed) and the agent whose groups apply.
    robots: RobotsPolicy | None
    robots_agent: str
    datasets: Callable[[type[BaseModel]], Dataset[Any]]
    #: Where items of these models go when a page commits, instead of a dataset.
    sinks: Mapping[type[BaseModel], Sink[Any]]
    #: The datasets made so far, by model: checked at a run's start, closed at its end.
    open_datasets: Callable[[], Mapping[type[BaseModel], Dataset[Any]]]
    #: The store that commits items with reports (exactly once), when it can.
    item_store: ItemStore | None
    #: Host slots the store shares with other workers (``RedisFrontier``), taken by robots.txt reads too.
    shared_slots: SharedSlots | None
    max_requests: int | None
    max_seeds: int | None
    time_budget: float | None
    processes: int
    #: What the robots.txt cache and the scheduler's waits read time from (host limits and tag pauses have it too).
    clock: Clock = MONOTONIC
    #: Where every decision about a URL is recorded (``Crawler(ledger=)``); ``None``: nowhere.
    ledger: LedgerSink | None = None
    #: A crawl that keeps page states (``Crawler(recrawl=)``): its policy, and the store that keeps them.
    recrawl: Recrawl | None = None
    pages: Recrawlable | None = None


class _RobotsRequests:
    """How the robots.txt cache's reads go out: on the run's one request path, as any other request.

    Each read takes a slot of its origin's host limits and, with a frontier whose host slots are
    shared by many workers (``RedisFrontier``), one of those too, so the fleet's cap holds for
    robots.txt as for pages; each spends one request of the run's budget.
    """

    def __init__(self, run: Run) -> None:
        self._run = run

    async def fetch(self, seed: Seed) -> Response:
        run = self._run
        run.refuse(seed)
        run.spend_budget(seed)
        slot = run.slot()
        try:
            await slot.take(seed.origin)
            async with fleet_slot(run.spec.shared_slots, seed.origin):
                # A 429 asking for a day ends the read now: RFC 9309's tries would each wait out the pause.
                response = await run.sender.send(seed, slot, check=lambda _: run.refuse(seed))
        except FetchError as exc:
            if not isinstance(exc, RetryWaitTooLong):  # that one is not tried again: its pages fail at once
                # Tried again (RFC 9309) before its pages are given up: the progress display says why meanwhile.
                run.failures.note(seed.url, f"{type(exc).__name__}: {exc} (robots.txt, tried again)")
            raise
        finally:
            slot.release()
        if robots_answer(response).retry:  # a 5xx or 429: tried again too
            run.failures.note(seed.url, f"HTTP status {response.status} (robots.txt, tried again)")
        return response

    async def aclose(self) -> None:
        """The crawl's backend is the crawler's to close."""


class Run:
    """One run of a crawl: its counts, its failure log, its budget, its state and its scheduler."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.stats = CrawlStats()
        #: Handler failures of this run: logged a few of each kind in full, summarised at the end.
        self.failures = FailureLog()
        #: The requests left to send (``max_requests``), spent by every request of the crawl's process.
        self.budget = RequestBudget(spec.max_requests) if spec.max_requests is not None else None
        #: Where the run is in its life: one value, set by ``execute``, ``stop`` and ``shutdown``.
        self.state = CrawlState.IDLE
        #: The one request path: every request of the run goes out through it, counted in its stats.
        self.sender = Sender(
            backend=spec.backend,
            trace=spec.trace,
            stats=self.stats,
            timeouts=spec.timeouts,
            credentials=spec.credentials,
            addresses=spec.addresses,
            budget=self.budget,
        )
        self.admission = Admission(spec.frontier, spec.policy, self.stats)
        self.admission.ledger = spec.ledger
        self.robots = self._robots_gate(spec.robots)
        rules = spec.fetch
        self.redirects = Redirects(
            max_redirects=rules.max_redirects,
            admission=self.admission,
            robots=self.robots,
            budget=self.budget,
            addresses=spec.addresses,
        )
        #: How the run fetches a seed, hop by hop (a worker process of ``processes=N`` has a copy).
        self.fetcher = SeedFetcher(
            sender=self.sender,
            redirects=self.redirects,
            block_rules=rules.block_rules,
            max_pause=spec.host_limits.max_pause,
            follow_redirects=rules.follow_redirects,
            raise_for_status=rules.raise_for_status,
        )
        self._active = 0
        self._reading = 0
        #: Seeds handed out and not put back (``max_seeds``): settled, or in hand now.
        self._started = 0
        self._wake: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._wake_loop: Callable[[Callable[[], object]], object] | None = None
        self._thread: int | None = None
        #: The run's recrawl state, once it started (a crawl with ``recrawl=``).
        self.revisits: Revisits | None = None
        #: How ``download`` sends: here, or on a worker process's request path (``route_downloads``).
        self._downloads: DownloadPath = self._download_here

    # -- the parts' narrow handles ----------------------------------------------------------------

    def slot(self, origin: str | None = None) -> GateSlot:
        """A slot of the crawl's host gate (held for ``origin`` when given), that wakes the scheduler when freed."""
        return GateSlot(self.spec.gate, origin, self.notify)

    def refusal(self, seed: Seed) -> RetryWaitTooLong | None:
        """Why a request to ``seed``'s origin is not sent at all: the origin asked (a ``pause_on`` status's
        ``Retry-After``) for a wait longer than the retry policy's ``max_wait``, still running."""
        return self.spec.retry.too_long(self.spec.gate.asked(seed.origin), url=seed.url)

    def refuse(self, seed: Seed) -> None:
        """Raise ``refusal(seed)``, if there is one."""
        refusal = self.refusal(seed)
        if refusal is not None:
            raise refusal

    def spend_budget(self, seed: Seed) -> None:
        """Take one request of the budget for ``seed`` (a robots.txt read, a download); ``FetchError`` if spent."""
        if self.budget is not None and not self.budget.spend():
            raise FetchError("the crawl's request budget (max_requests) is spent", url=seed.url)

    def notify(self) -> None:
        """Wake the scheduler: a slot freed, seeds arrived, or an origin's robots.txt was read."""
        if self._wake is not None:
            self._wake.set()
            self._wake = None

    # -- what the crawler asks of its run ---------------------------------------------------------

    async def push(self, seeds: Sequence[Seed], *, forefront: bool = False) -> PushResult:
        """Add seeds to this run (running or not started yet)."""
        result = await self.admission.push(seeds, forefront=forefront)
        self.notify()
        return result

    async def download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None) -> int:
        """``Crawler.download`` on this process's request path (robots.txt, a slot, the budget)."""
        return await self._downloads(seed, path, limit=limit)

    def route_downloads(self, downloads: DownloadPath) -> None:
        """Send ``download`` on ``downloads``: a worker process of ``processes=N`` (which holds a copy of
        this run) sends its handlers' downloads on its own request path, asking the crawl's process."""
        self._downloads = downloads

    async def download_slot(self, seed: Seed) -> GateSlot:
        """Admit a download of ``seed``: robots.txt (read first if its origin's is not known), the origin's
        refusal, one request of the budget; the slot of the host gate it is to take (none held yet).

        ``RobotsDisallowed`` when robots.txt keeps it out, ``FetchError`` when the budget is spent.
        """
        if self.robots is not None:
            if self.robots.rules(seed.url) is None:
                await self.robots.read(seed.origin)
            reason = self.robots.verdict(seed.url)
            if reason is not None:
                raise RobotsDisallowed(f"robots.txt keeps {seed.url} out ({reason})", url=seed.url)
        self.refuse(seed)
        self.spend_budget(seed)
        return self.slot()

    async def _download_here(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None) -> int:
        slot = await self.download_slot(seed)
        try:
            return await self.sender.download(seed, path, slot, limit=limit)
        finally:
            slot.release()

    def stop(self) -> None:
        """End the run as a handler's ``Stop`` does: what is in flight finishes, nothing new starts."""
        if self.state is CrawlState.RUNNING:
            self.state = CrawlState.STOPPING
        self.notify()

    def shutdown(self) -> None:
        """Stop the run: requests in flight fail with ``ShutDown``, their leases go back, nothing new starts.

        Safe to call from a handler, another task, another thread or a signal handler.
        """
        running = self.state in (CrawlState.RUNNING, CrawlState.STOPPING)
        self.state = CrawlState.SHUTTING_DOWN
        if not running:
            return  # a run not started yet ends at once, its seeds still queued
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

    async def execute(self, seeds: Sequence[Seed]) -> CrawlStats:
        """Crawl from ``seeds`` until done, in the running event loop; return the stats.

        A programmer error (a tag no handler takes, a handler returning something that is not an
        outcome) stops the run at once and raises its ``ConfigError`` here.
        """
        spec = self.spec
        check_event_loop(spec.backend)  # a wrong event loop is one clear error, not a failed seed each
        spec.tags.on_skip = self._skipped_by_tag
        # A shutdown asked for before the run started ends it at once (its seeds are still queued).
        if self.state is not CrawlState.SHUTTING_DOWN:
            self.state = CrawlState.RUNNING
        self.stats.started_at = time.monotonic()
        self._token = anyio.lowlevel.current_token()
        self._wake_loop = _loop_waker()
        self._thread = threading.get_ident()
        try:
            for dataset in spec.open_datasets().values():
                if isinstance(dataset, Checked):
                    await dataset.check()  # a path no item can reach stops the crawl now, in one line
            if spec.recrawl is not None and spec.pages is not None and spec.ledger is not None:
                self.revisits = await self._generation(spec.recrawl, spec.pages, spec.ledger)
            if seeds:
                await self.admission.push(seeds)
            try:
                await self._crawl()
            except* ConfigError as group:
                raise _first(group) from None  # one clear message, not a task group's
            if self.state is not CrawlState.SHUTTING_DOWN and spec.pages is not None:
                with anyio.CancelScope(shield=True):
                    await spec.pages.finish_generation()  # ran to its end: the next run is a recrawl
        finally:
            shut = self.state is CrawlState.SHUTTING_DOWN
            self.state = CrawlState.SHUT_DOWN if shut else CrawlState.FINISHED
            self.stats.ended_at = time.monotonic()
            with anyio.CancelScope(shield=True):
                await spec.backend.aclose()
                for dataset in spec.open_datasets().values():
                    await dataset.aclose()
            summary = self.failures.summary()
            if summary is not None:
                log.warning("%s", summary)
        return self.stats

    async def _generation(self, policy: Recrawl, pages: Recrawlable, ledger: LedgerSink) -> Revisits:
        """The generation this run crawls: a new one (every page kept before queued as a revisit) when
        the last crawl finished and ``policy`` starts recrawls, else the one a crawl left unfinished."""
        generation = await pages.generation()
        if generation.finished and policy.start:
            revisits = await pages.begin_recrawl()
            generation = await pages.generation()
            log.info("recrawl %d: %d pages queued for a revisit", generation.number - 1, revisits)
        self.notify()
        return Revisits(policy, generation.number, pages.lastmod_trust(), ledger)

    async def _crawl(self) -> None:
        # The pool's own tasks (its workers' channels, the forker's news) live outside the cancel scope
        # a shutdown or the time budget cancels: the pool then stops its workers itself, their last
        # counts kept, and no worker is taken for dead and replaced on the way out.
        pool: ProcessPool | None = None
        async with anyio.create_task_group() as pool_tasks:
            if self.spec.processes > 1:
                # The pool and its messages are imported by a crawl that forks, not by every crawl.
                from spire_core.processes.pool import ProcessPool, Services

                services = Services(self.admission, self.redirects, self.robots, self.stats, self.download_slot)
                pool = await ProcessPool.start(pool_tasks, self._worker_spec(), self.spec.processes, services=services)
            try:
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    with anyio.move_on_after(self.spec.time_budget) as budget:
                        async with anyio.create_task_group() as tg:
                            await self._schedule(tg, self._handling(pool))
                    if budget.cancelled_caught:
                        self.state = CrawlState.SHUTTING_DOWN  # the time budget shuts the crawl down
            finally:
                self._scope = None
                if pool is not None:
                    with anyio.CancelScope(shield=True):
                        await pool.aclose()

    def _robots_gate(self, policy: RobotsPolicy | None) -> RobotsGate | None:
        if policy is None:
            return None
        agent = self.spec.robots_agent
        cache = RobotsCache(
            _RobotsRequests(self),
            refresh_after=policy.refresh_after,
            retry_delays=policy.retry_delays,
            agent=agent,
            clock=self.spec.clock,
        )
        return RobotsGate(cache, agent)

    def _worker_spec(self) -> WorkerSpec:
        """What a worker process needs to handle seeds as this process would."""
        from spire_core.processes.messages import WorkerSpec

        spec = self.spec
        return WorkerSpec(
            worker=spec.worker,
            fetcher=self.fetcher,
            policy=spec.policy,
            retry=spec.retry,
            datasets=dict(spec.open_datasets()),
            pause_on=frozenset(spec.host_limits.pause_on),
            pages=spec.recrawl is not None,
            route_downloads=self.route_downloads,
        )

    def _skipped_by_tag(self, seed: Seed) -> None:
        self.stats.skip(SkipReason.TAG)

    # -- scheduling -------------------------------------------------------------------------------

    async def _sleep_until_woken(self, at_most: float | None) -> None:
        if self._wake is None:
            self._wake = anyio.Event()
        await wait_on(self.spec.clock, self._wake, at_most)

    def _budget_spent(self) -> bool:
        if self.budget is not None and self.budget.left <= 0:
            return True
        return self.spec.max_seeds is not None and self._started >= self.spec.max_seeds

    def _ready_in(self, origin: str) -> float:
        """Seconds until ``origin`` may take a request; ``inf`` while its robots.txt is not known.

        An origin that asked for a wait past ``max_wait`` is ready now: its seeds fail at once, unsent.
        """
        if self.spec.retry.too_long(self.spec.gate.asked(origin)) is not None:
            return 0.0
        if self.robots is not None and not self.robots.ready(origin):
            return math.inf
        return self.spec.gate.ready_in(origin)

    def _handling(self, pool: ProcessPool | None) -> Handling:
        """How this run handles each seed, with its stats and failure log."""
        spec = self.spec
        return Handling(
            worker=spec.worker,
            retry=spec.retry,
            frontier=spec.frontier,
            admission=self.admission,
            robots=self.robots,
            fetcher=self.fetcher,
            backend=spec.backend,
            datasets=spec.datasets,
            sinks=spec.sinks,
            item_store=spec.item_store,
            stats=self.stats,
            failures=self.failures,
            slot=self.slot,
            refusal=self.refusal,
            stop=self.stop,
            pool=pool,
            revisits=self.revisits,
        )

    async def _schedule(self, tg: anyio.abc.TaskGroup, handling: Handling) -> None:
        frontier, gate = self.spec.frontier, self.spec.gate
        while True:
            if self.state is not CrawlState.RUNNING or self._budget_spent():
                if self._active == 0:
                    return
                await self._sleep_until_woken(None)
                continue
            if self._active >= self.spec.concurrency or self._total_full():
                await self._sleep_until_woken(None)
                continue
            result = await frontier.lease(self._ready_in)
            self._read_wanted_robots(tg)
            if isinstance(result, Lease):
                if self.budget is not None:
                    self.budget.spend()  # the seed's first request; its redirect hops spend theirs
                origin = result.origin
                admitted = gate.ready_in(origin) <= 0
                if admitted:
                    gate.acquire(origin)
                self._active += 1
                self._started += 1
                tg.start_soon(self._work, handling, result, admitted, name=_WORK_TASK)  # named once, not per task
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
            told_to_wait = isinstance(failure, RetryWaitTooLong)  # its pages fail as retry_wait, not skipped
            if not rules.reachable and failure is not None and not told_to_wait and not self._budget_spent():
                self.failures.host_unreachable(origin, failure)  # its pages are skipped, not failed
            delay = rules.crawl_delay()
            if delay:
                self.spec.gate.space(origin, delay)
                self.spec.gate.pause(origin, delay)  # spaces the first page from the robots.txt request too
        finally:
            self._reading -= 1
            self.notify()

    def _total_full(self) -> bool:
        limit = self.spec.host_limits.max_total_in_flight
        return limit is not None and self.spec.gate.in_flight() >= limit

    async def _work(self, handling: Handling, lease: Lease, admitted: bool) -> None:
        settled = False
        try:
            settled = await handling.work(lease, admitted)
        finally:
            if not settled:
                self._started -= 1  # back to be tried again: its next try is the same seed, not a new one
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
    import asyncio  # loaded by then under asyncio: a lookup in sys.modules

    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:
        return None
