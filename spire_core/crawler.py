"""``Crawler``: the crawl's description, and ``run`` / ``arun`` / ``shutdown`` on it.

    stats = Crawler(router, concurrency=16).run([Seed("http://127.0.0.1:8000/", tag="listing")])

The constructor settles every setting once (the frontier with its facades, the backend with the
crawl's timeouts, the host limits, robots.txt, the retry policy) into a ``RunSpec``; each run gets
its own ``Run`` (``spire_core.run``), which schedules, counts and owns the run's state. Politeness
and admission hold for every crawl: robots.txt, redirects admitted hop by hop like links (dedup, the
strategy, robots), block pages kept from handlers, one dedup for the frontier.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from spire_core import checks
from spire_core import url as urls
from spire_core.admission import Admission, CrawlPolicy
from spire_core.backend.abilities import DEFAULT_USER_AGENT, PoolStats, Timed, pool_stats_of, user_agent_of
from spire_core.backend.base import Backend
from spire_core.blocks import BlockRules
from spire_core.clock import MONOTONIC, Clock
from spire_core.context import Worker
from spire_core.dataset.base import Dataset, Sink
from spire_core.dataset.memory import MemoryDataset
from spire_core.errors import ConfigError, InvalidUrl
from spire_core.frontier.base import Frontier, PushResult
from spire_core.frontier.facades import Dedup, DepthLimit, Retrying, TagControl, find_facade
from spire_core.frontier.items import ItemStore, store_of
from spire_core.frontier.memory import MemoryFrontier
from spire_core.ledger import Entry, LedgerMode, LedgerView
from spire_core.ledger_stores import ledger_of, open_ledger
from spire_core.limits import HostGate, HostLimits, HostStats, SharedSlots
from spire_core.log import FailureLog, console
from spire_core.loop import run as run_loop
from spire_core.outcome import seconds
from spire_core.processes import process_count
from spire_core.recrawl import Recrawl, Recrawlable, changes
from spire_core.robots import RobotsPolicy, product_token
from spire_core.run import ENDED, LIVE, CrawlState, FetchRules, Run, RunSpec
from spire_core.seed import Seed
from spire_core.session.addresses import AddressPolicy
from spire_core.session.metrics import Metrics
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts
from spire_core.session.trace import Trace
from spire_core.stats import CrawlStats

__all__ = ["CrawlState", "Crawler"]

T = TypeVar("T", bound=BaseModel)
DatasetFactory = Callable[[type[BaseModel]], Dataset[Any]]


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
    ``allow_private=True`` sends it. ``clock=`` is what every policy reads time from and the
    scheduler waits on (a ``spire_core.clock.FakeClock`` makes pauses and waits pass at once, for tests).

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
        sinks: Mapping[type[BaseModel], Sink[Any]] | None = None,
        max_requests: int | None = None,
        max_seeds: int | None = None,
        time_budget: float | timedelta | None = None,
        max_redirects: int = 5,
        follow_redirects: bool = True,
        raise_for_status: bool = True,
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
        clock: Clock = MONOTONIC,
        ledger: LedgerMode | bool = "full",
        recrawl: Recrawl | bool = False,
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
        if dedup and find_facade(frontier, Dedup) is None:
            frontier = Dedup(frontier)
        tags = find_facade(frontier, TagControl)
        if tags is None:
            frontier = tags = TagControl(frontier, clock=clock)
        # session: the retry policy lives on the Retrying facade, which asks it about every failure
        retrying = find_facade(frontier, Retrying)
        if retrying is None:
            frontier = retrying = Retrying(frontier, retry if retry is not None else RetryPolicy.transient())
        elif retry is not None:
            retrying.policy = retry
        self.retry = retrying.policy
        given_timeouts = None if timeouts is None else Timeouts.of(timeouts)
        #: One record per request, for the ``spire.trace`` log and ``metrics``; free when both are off.
        # ledger: every URL's fate, kept by the frontier's store (``None`` for a store that keeps none)
        self._ledger_sink = open_ledger(frontier, ledger)
        self.trace = Trace(metrics, ledger=self._ledger_sink)
        #: How the crawl keeps page states and revisits them (``recrawl=``); ``None``: it keeps none.
        self.recrawl = Recrawl.of(recrawl)
        self._pages = _page_store(
            frontier, self.recrawl, full_ledger=self._ledger_sink is not None and ledger != "light"
        )
        # end session
        self.frontier: Frontier = frontier
        self._tags = tags
        store = store_of(frontier)
        #: The store that commits items with reports (exactly once), when it can.
        self._item_store = store if isinstance(store, ItemStore) else None
        #: Host slots the store shares with other workers (``RedisFrontier``), taken by robots.txt reads too.
        self.shared_slots = store if isinstance(store, SharedSlots) else None
        if backend is None:
            from spire_core.backend.http import HttpBackend  # aiohttp: imported by the crawl that uses it

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
        #: Where items of these models go when a page commits, instead of a dataset (a consumer in this process).
        self.sinks = dict(sinks or {})
        self.max_requests = max_requests
        self.max_seeds = max_seeds
        self.time_budget = budget
        self.max_redirects = max_redirects
        self.follow_redirects = follow_redirects
        self.raise_for_status = raise_for_status
        policy = policy if policy is not None else CrawlPolicy()
        depth = find_facade(frontier, DepthLimit)
        if depth is not None and (policy.max_crawl_depth is None or depth.limit < policy.max_crawl_depth):
            # One depth limit: a DepthLimit facade's is the crawl's, decided (and counted) by admission.
            policy = dataclasses.replace(policy, max_crawl_depth=depth.limit)
        self.policy = policy
        self.block_rules = block_rules if block_rules is not None else BlockRules.builtin()
        #: Headers (Authorization, Cookie...) sent to one origin only, by origin: ``{"https://a.example": {...}}``.
        self.credentials = {urls.origin(origin): dict(headers) for origin, headers in (credentials or {}).items()}
        #: The crawl's live host limits: in flight, waits and pauses per origin, kept across runs.
        self.gate = HostGate(self.host_limits, clock=clock)
        #: What the host limits, tag pauses, robots.txt refresh and the scheduler's waits read time from.
        self.clock = clock
        #: Worker processes that fetch and handle seeds (1: this process does it all).
        self.processes = process_count(processes)
        if self.processes > 1 and metrics is not None:
            raise ConfigError("metrics= counts the requests of one process; leave it out with processes > 1")
        self._addresses = AddressPolicy(allow_private=allow_private)
        self._robots = _robots_policy(robots)
        #: The product token whose robots.txt groups apply: configuration, which wrapping a backend cannot change.
        self.robots_agent = _robots_agent(self._robots, self.backend)
        #: The run in progress, the next to start, or the last one (its stats and failures stay readable).
        self._run: Run | None = None

    def _spec(self) -> RunSpec:
        """The settings a new run takes: this crawler's, as they are now."""
        return RunSpec(
            worker=self.worker,
            frontier=self.frontier,
            tags=self._tags,
            backend=self.backend,
            gate=self.gate,
            host_limits=self.host_limits,
            concurrency=self.concurrency,
            policy=self.policy,
            retry=self.retry,
            timeouts=self.timeouts,
            credentials=self.credentials,
            addresses=self._addresses,
            trace=self.trace,
            fetch=FetchRules(
                block_rules=self.block_rules,
                max_redirects=self.max_redirects,
                follow_redirects=self.follow_redirects,
                raise_for_status=self.raise_for_status,
            ),
            robots=self._robots,
            robots_agent=self.robots_agent,
            datasets=self.dataset,
            sinks=self.sinks,
            open_datasets=lambda: self._datasets,
            item_store=self._item_store,
            shared_slots=self.shared_slots,
            max_requests=self.max_requests,
            max_seeds=self.max_seeds,
            time_budget=self.time_budget,
            processes=self.processes,
            clock=self.clock,
            ledger=self._ledger_sink,
            recrawl=self.recrawl,
            pages=self._pages,
        )

    # -- the current run --------------------------------------------------------------------------

    def _current(self) -> Run:
        """The run in progress or the next to start: a new one once the last has ended."""
        if self._run is None or self._run.state in ENDED:
            self._run = Run(self._spec())
        return self._run

    @property
    def _latest(self) -> Run:
        """The run in progress, or the last one (a new one when none ran)."""
        if self._run is None:
            self._run = Run(self._spec())
        return self._run

    @property
    def stats(self) -> CrawlStats:
        """The counts of the current run, or of the last one once it ended."""
        return self._latest.stats

    @property
    def failures(self) -> FailureLog:
        """The failure log of the current run, or of the last one."""
        return self._latest.failures

    @property
    def admission(self) -> Admission:
        """What may enter the frontier in the current run (links a handler queues pass it)."""
        return self._latest.admission

    @property
    def state(self) -> CrawlState:
        """Where the crawl is in its life: one value, set by ``arun``, ``stop`` and ``shutdown``."""
        return self._latest.state

    @property
    def is_shut_down(self) -> bool:
        """Whether ``shutdown()`` (or the time budget) ended, or is ending, the crawl: what was in flight
        went back to the frontier (counted in ``errors_by_category["shut_down"]``) rather than finished."""
        return self.state in (CrawlState.SHUTTING_DOWN, CrawlState.SHUT_DOWN)

    async def download(self, url: str | Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        """Stream ``url`` to ``path`` on the crawl's request path: robots.txt obeyed (read first if the
        origin's is not known), a slot of its origin held until the body ends, credentials, the
        crawl's timeouts, counted and logged as any request. Redirects are not followed.

        ``RobotsDisallowed`` when robots.txt keeps the URL out; the decoded body goes to a temporary
        file renamed to ``path`` only when complete; ``limit`` caps its size (session).
        """
        seed = url if isinstance(url, Seed) else Seed(url)
        run = self._current()
        if run.state not in (CrawlState.RUNNING, CrawlState.STOPPING):
            self._started_from([seed])  # outside a run, the caller chose this URL as a start seed is chosen
        return await run.download(seed, path, limit=limit)

    @property
    def robots_policy(self) -> RobotsPolicy | None:
        """How the crawl reads robots.txt; ``None`` when it does not obey it (``robots=False``)."""
        return self._robots

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

    async def changes(self) -> AsyncIterator[Entry]:
        """The change feed of the last run of a crawl with ``recrawl=``: each page's ledger entry with
        its ``change`` (``new``, ``changed``, ``unchanged``, ``gone``, ``failed``), in the order met."""
        found = self.ledger
        if found is None or self.recrawl is None:
            raise ConfigError("only a crawl with recrawl= keeps page states: Crawler(..., recrawl=True)")
        async for entry in changes(found):
            yield entry

    def host_stats(self) -> list[HostStats]:
        """Each origin the host limits track: in flight, waiting, paused until, next allowed (session)."""
        return self.gate.stats()

    def pool_stats(self) -> PoolStats | None:
        """The HTTP backend's connection pool (busy requests, the cap), or ``None`` for another backend (session)."""
        return pool_stats_of(self.backend)

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

        Starts its own event loop: asyncio, on uvloop when it is installed (``spire_core.loop``).
        Installs spire's console log handler unless logging is configured (see ``spire_core.log``).
        """
        import asyncio  # the loop the crawl runs on: imported when it runs, not by ``import spire``

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
        return run_loop(self.arun, seeds)

    async def arun(self, seeds: Iterable[Seed | str] | Seed | str = ()) -> CrawlStats:
        """Crawl from ``seeds`` until done, in the running event loop; return the stats.

        A programmer error (a tag no handler takes, a handler returning something that is not an
        outcome) stops the crawl at once and raises its ``ConfigError`` here.
        """
        batch = self._seeds(seeds)
        run = self._current()
        if run.state in LIVE - {CrawlState.SHUTTING_DOWN}:
            raise ConfigError("this crawler is running already: push() more seeds to it, or make another Crawler")
        self._started_from(batch)
        return await run.execute(batch)

    def stop(self) -> None:
        """End the crawl as a handler's ``Stop`` does: what is in flight finishes, nothing new starts."""
        self._latest.stop()

    def shutdown(self) -> None:
        """Stop the crawl: requests in flight fail with ``ShutDown``, their leases go back, nothing new starts.

        Safe to call from a handler, another task, another thread or a signal handler. Called before
        ``run``, the next run ends at once, its seeds still queued.
        """
        self._current().shutdown()

    async def push(self, seeds: Iterable[Seed | str] | Seed | str, *, forefront: bool = False) -> PushResult:
        """Add seeds to a running (or not yet started) crawl."""
        batch = self._seeds(seeds)
        self._started_from(batch)
        return await self._current().push(batch, forefront=forefront)

    def _started_from(self, seeds: list[Seed]) -> None:
        """Seeds the user gave: their hosts (and addresses of their kinds) are the crawl's to reach."""
        self._addresses.started(seeds)

    def _seeds(self, seeds: Iterable[Seed | str] | Seed | str) -> list[Seed]:
        """``seeds`` as seeds, each tag checked against the worker: a tag typo stops here, at the call."""
        batch = _as_seeds(seeds)
        for tag in {seed.tag for seed in batch}:
            self.worker.check_tag(tag)
        return batch


def _page_store(frontier: Frontier, policy: Recrawl | None, *, full_ledger: bool) -> Recrawlable | None:
    """The store that keeps the crawl's generations in its full ledger (and, with ``recrawl=``, told to
    keep page states), or ``None``. A crawl without ``recrawl=`` still marks its crawl finished, so a
    later run with ``recrawl=`` on the same file starts a recrawl rather than resuming."""
    store = store_of(frontier)
    if policy is None:
        return store if full_ledger and isinstance(store, Recrawlable) else None
    if not isinstance(store, Recrawlable):
        raise ConfigError(
            f"recrawl= keeps page states beside the frontier, which {type(store).__name__} cannot: "
            "use a MemoryFrontier or a SqliteFrontier (a file that survives between runs)"
        )
    if not full_ledger:
        raise ConfigError("recrawl= keeps page states in the crawl's full ledger: leave Crawler(ledger=) at 'full'")
    store.keep_pages(policy)
    return store


def _robots_policy(robots: bool | str | RobotsPolicy) -> RobotsPolicy | None:
    """``Crawler(robots=)`` as a policy: ``None`` when robots.txt is not obeyed."""
    if robots is False:
        return None
    if isinstance(robots, str):
        return RobotsPolicy(agent=robots)
    return robots if isinstance(robots, RobotsPolicy) else RobotsPolicy()


def _robots_agent(policy: RobotsPolicy | None, backend: Backend) -> str:
    """The product token whose robots.txt groups apply: the policy's, else the backend's user agent's."""
    if policy is not None and policy.agent is not None:
        return policy.agent
    return product_token(user_agent_of(backend) or DEFAULT_USER_AGENT) or "*"
