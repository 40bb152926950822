"""``Handling``: one leased seed, from its robots.txt verdict to its report and the stats.

The seed's handler runs here (with its lazy fetch through the ``SeedFetcher``) or in a worker
process (``processes=N``); what it staged is committed here either way (links pushed, items stored,
exactly once where the store can), the frontier hears the outcome, and the outcome is counted and
logged. One ``Handling`` serves one ``Run``: it holds that run's stats and failure log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from spire_core.admission import Admission, SkipReason
from spire_core.backend.base import Backend
from spire_core.context import Context, DatasetSource, Worker, handle_here
from spire_core.dataset.base import Sink
from spire_core.errors import ConfigError, DatasetError, FetchError, ShutDown, SpireError, WorkerCrashed
from spire_core.frontier.base import Frontier, Lease
from spire_core.frontier.items import ItemStore
from spire_core.ledger import replay
from spire_core.log import FailureLog
from spire_core.outcome import Done, Fail, Outcome, PauseTag, Retry, SkipTag, Stop
from spire_core.processes import WORKER_DEATHS
from spire_core.recrawl import Revisits
from spire_core.response import Response
from spire_core.robots import RobotsGate
from spire_core.seed import Seed
from spire_core.seed_fetcher import SeedFetcher
from spire_core.send import GateSlot
from spire_core.session.retry import RetryPolicy
from spire_core.skips import LeftOut
from spire_core.stats import CrawlStats

if TYPE_CHECKING:
    from spire_core.processes.pool import ProcessPool

__all__ = ["Handling"]


@dataclasses.dataclass(slots=True, eq=False)
class Handling:
    """How a run handles each leased seed; ``slot(origin)`` is a slot of the crawl's host gate (held
    for ``origin``), ``stop`` ends the run (a ``Stop`` outcome, a mistake in the crawl's code)."""

    worker: Worker
    retry: RetryPolicy
    frontier: Frontier
    admission: Admission
    robots: RobotsGate | None
    fetcher: SeedFetcher
    backend: Backend
    datasets: DatasetSource
    #: Where items of these models go instead of a dataset (``Crawler(sinks=)``).
    sinks: Mapping[type[Any], Sink[Any]]
    item_store: ItemStore | None
    stats: CrawlStats
    failures: FailureLog
    slot: Callable[[str | None], GateSlot]
    #: Why a seed's request is not sent at all (its origin asked for a wait past ``max_wait``), if it is not.
    refusal: Callable[[Seed], FetchError | None]
    stop: Callable[[], None]
    #: The worker processes, with ``processes=N``; ``None`` handles every seed in this process.
    pool: ProcessPool | None = None
    #: A crawl that keeps page states (``recrawl=``): revisits presumed, each page's note recorded.
    revisits: Revisits | None = None

    def _context(self, seed: Seed, fetch: Callable[[Context], Awaitable[Response]]) -> Context:
        """The handler's view of ``seed``; ``fetch(ctx)`` is its lazy, once-only fetch."""
        return Context(
            seed,
            fetch,
            admission=self.admission,
            datasets=self.datasets,
            backend=self.backend,
            robots=self.robots,
            check_tag=self.worker.check_tag,
            revisits=self.revisits,
        )

    async def work(self, lease: Lease, admitted: bool) -> bool:
        """Handle ``lease`` (holding a slot of its origin when ``admitted``), report it, and settle its outcome;
        ``True`` when the seed is settled for good, ``False`` when it went back to be tried again.

        Once the handler has returned, its writes are committed and the lease reported as one step
        that a shutdown does not cut in two: links, items and report all happen, or (cancelled
        before) none and the lease goes back.
        """
        seed = lease.seed
        slot = self.slot(seed.origin if admitted else None)
        reported = False
        ctx: Context | None = None
        try:
            refusal = self.refusal(seed)
            if refusal is not None:
                slot.release()
                return await self._failed_unsent(lease, refusal)
            reason = self.robots.verdict(seed.url, origin=seed.origin) if self.robots is not None else None
            if reason is not None:
                slot.release()
                assert self.robots is not None  # it gave the reason
                await self._left_out(lease, LeftOut(reason, self.robots.explain(seed.url, reason)))
                return True
            presumed = self.revisits.presume(seed) if self.revisits is not None else None
            if presumed is not None:
                slot.release()
                assert self.revisits is not None  # it presumed
                self.revisits.noted(seed, presumed)  # not fetched: its sitemap lastmod has not moved
                await self._left_out(lease, LeftOut(SkipReason.LASTMOD, f"lastmod {presumed.lastmod}"))
                return True
            if self.pool is not None and not self.worker.runs_here(seed):
                ctx, outcome = await self._handled_elsewhere(self.pool, lease, slot)
            else:
                ctx = self._context(
                    seed, lambda ctx: self.fetcher.fetch(seed, slot, accepts_blocks=lambda: ctx.accepts_blocks)
                )
                outcome = await self._handled(ctx)
            slot.release()
            if self.revisits is not None and ctx.page is not None:
                self.revisits.noted(seed, ctx.page)  # settled with the seed's report
            with anyio.CancelScope(shield=True):
                if isinstance(outcome, LeftOut):
                    await self._left_out(lease, outcome)
                    return True
                if not isinstance(outcome, Retry | Fail):
                    outcome = await self._commit(ctx, lease, outcome)
                applied = await self.frontier.report(lease, outcome)
                reported = True
            return await self._settled(ctx, applied)
        except WorkerCrashed as crashed:
            slot.release()
            return await self._crashed(lease, crashed)
        except anyio.get_cancelled_exc_class():  # looked up only when something is raised
            if not reported:
                with anyio.CancelScope(shield=True):
                    slot.release()
                    await self.frontier.release(lease)
                    self.stats.errors_by_category[ShutDown.category] += 1
            raise
        finally:
            if ctx is not None:
                # Its extractors' results (Links, a staged dataset) point back at it: drop them, and the
                # parsed page with them, now rather than when the cyclic collector runs pages later.
                ctx.clear()

    async def _left_out(self, lease: Lease, left_out: LeftOut) -> None:
        self.admission.left_out(lease.seed, left_out.reason, left_out.detail)
        await self.frontier.report(lease, Done())  # settled: a skip is not tried again

    async def _handled(self, ctx: Context) -> Outcome | LeftOut:
        """Run the worker here, with the per-seed function every worker process runs too; what it
        staged stays on ``ctx``."""
        try:
            return await handle_here(self.worker, ctx, self.retry, pages=self.revisits is not None)
        except ConfigError:
            self.stop()
            raise  # a mistake in the crawl's code: it stops the crawl (arun raises it)

    async def _handled_elsewhere(
        self, pool: ProcessPool, lease: Lease, slot: GateSlot
    ) -> tuple[Context, Outcome | LeftOut]:
        """Run the worker in a worker process; stage here, on a context, what it staged there."""
        try:
            handled = await pool.handle(lease, slot)
        except ConfigError:
            self.stop()
            raise
        ctx = self._context(lease.seed, handled.fetched)
        ctx.dropped_links = handled.dropped_links
        ctx.page = handled.page
        if self.admission.ledger is not None:
            replay(handled.ledger, self.admission.ledger)  # before the seed's report, which settles its line
        outcome = handled.outcome
        if isinstance(outcome, LeftOut | Retry | Fail):
            return ctx, outcome
        room = self.admission.room()
        for seeds, forefront in handled.links:
            if room is not None:
                # The request cap is this process's: a worker process only estimates it.
                if len(seeds) > room:
                    self.admission.skip(SkipReason.REQUEST_LIMIT, len(seeds) - room)
                    seeds = seeds[:room]
                room -= len(seeds)
            ctx.enqueue(seeds, forefront=forefront)
        for model, items in handled.items:
            sink = self.sinks.get(model)
            ctx.stage(sink if sink is not None else self.datasets(model), items)
        return ctx, outcome

    async def _commit(self, ctx: Context, lease: Lease, outcome: Outcome) -> Outcome:
        """Push the links and store the items a successful handler staged."""
        try:
            # Items of a dataset the store holds ride on this lease's report (exactly once).
            stored = await ctx.commit(lease, self.item_store)  # not `items += await ...`: that reads the count first
        except BrokenPipeError:
            raise  # the reader of a piped output left (`| head`): the caller ends the crawl quietly
        except (OSError, DatasetError) as exc:
            # A dataset that cannot be written fails the page, not the crawl, whatever the store.
            path = exc.path if isinstance(exc, DatasetError) else exc.filename
            error = DatasetError(f"could not store the items of {ctx.seed.url}: {exc}", path=path)
            error.__cause__ = exc
            error.url = ctx.seed.url
            return Fail(error)
        self.stats.items += stored
        return outcome

    async def _crashed(self, lease: Lease, crashed: WorkerCrashed) -> bool:
        """A worker process died with ``lease`` in hand: back to the frontier, or failed when it keeps killing them."""
        if crashed.deaths < WORKER_DEATHS:
            await self.frontier.release(lease)
            return False
        return await self._failed_unsent(lease, crashed)

    async def _failed_unsent(self, lease: Lease, error: SpireError) -> bool:
        """Fail ``lease`` with ``error``, its page never fetched nor handled (``True``: it ended)."""
        applied = await self.frontier.report(lease, Fail(error))
        return await self._settled(self._context(lease.seed, _not_fetched), applied)

    async def _settled(self, ctx: Context, outcome: Outcome) -> bool:
        """Count ``outcome``; ``False`` when the seed goes on (a retry, a pause of its tag), ``True`` when it ends."""
        stats = self.stats
        if type(outcome) is Done:  # most seeds: no chain of isinstance to go through
            stats.finished += 1
        elif isinstance(outcome, Retry):
            stats.retries += 1
            self.failures.retried(ctx.seed, outcome.error, handler=self.worker.describe(ctx.seed))
            return False
        elif isinstance(outcome, Fail):
            stats.failed += 1
            self.failures.failed(ctx.seed, outcome.error, handler=self.worker.describe(ctx.seed))
            category = outcome.error.category if isinstance(outcome.error, SpireError) else "handler"
            stats.errors_by_category[category] += 1
            self.failures.dropped_links += ctx.dropped_links
            ctx.error = outcome.error
            await self.worker.handle_failed(ctx)
        elif isinstance(outcome, SkipTag) and ctx.seed.tag == outcome.tag:
            stats.skip(SkipReason.TAG)
        elif isinstance(outcome, PauseTag) and ctx.seed.tag == outcome.tag:
            return False  # held by TagControl; it runs again when the pause ends
        else:
            stats.finished += 1
            if isinstance(outcome, Stop):
                self.stop()
        return True


async def _not_fetched(ctx: Context) -> Response:
    raise SpireError("the page of a seed that failed before its request was never fetched", url=ctx.seed.url)
