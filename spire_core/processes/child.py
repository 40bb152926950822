"""A worker process of ``processes=N``: fetches and handles the seeds the crawl's process hands it.

It is forked from the crawl's process, so it has the crawl's router, backend settings and policy.
For each seed it runs the handler as the crawl's process would, against the crawl's host gate,
redirect admission and seen set over its channel (its handlers' downloads too: admitted by the
crawl's process, sent on the worker's request path), and sends back the outcome, the links and items
the handler staged, and its counts since its last message (which its ``Tally`` keeps too, so that
a worker killed mid-seed still counts what it sent). It stores nothing itself. Ctrl-C is the crawl's process's to
handle; a worker whose crawl process is gone exits.
"""

from __future__ import annotations

import contextvars
import dataclasses
import gc
import os
import pickle
import signal
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from spire_core import url as urls
from spire_core.admission import Admission
from spire_core.context import Context, handle_here
from spire_core.dataset.base import Dataset
from spire_core.dataset.memory import MemoryDataset
from spire_core.errors import ConfigError, SpireError
from spire_core.frontier.base import PushResult
from spire_core.ledger import DeferredLedger
from spire_core.loop import run as run_loop
from spire_core.outcome import Fail, Outcome, Retry
from spire_core.processes.channel import Channel, portable
from spire_core.processes.messages import (
    AdmitDownload,
    AdmitHop,
    AdmitMove,
    Answered,
    Cancel,
    Claim,
    Counts,
    CountsDelta,
    Finished,
    Handled,
    Hello,
    Mistake,
    Pace,
    Release,
    Sending,
    Stop,
    Take,
    Work,
    WorkerSpec,
)
from spire_core.processes.tally import Tally
from spire_core.response import Response
from spire_core.robots import Robots
from spire_core.seed import Seed
from spire_core.skips import LeftOut
from spire_core.stats import CrawlStats

__all__ = ["run_child"]

#: How often a worker checks that the crawl's process is still there.
ORPHAN_CHECK = 1.0
#: Keys a worker remembers as seen before it starts its memory afresh.
SEEN_CACHE = 200_000
#: How often a worker with seeds in hand sends its counts (requests, pages, skips...) to the crawl's
#: process, in seconds; a finished seed brings them too.
STATS_EVERY = 0.25


def tally_path(socket_path: str, pid: int) -> Path:
    """Where the worker ``pid`` of the pool listening at ``socket_path`` keeps its ``Tally``."""
    return Path(socket_path).parent / f"{pid}.tally"


def run_child(spec: WorkerSpec, path: str) -> None:
    """The worker process's body: connect to the crawl's process at ``path`` and serve it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the crawl's process stops its workers itself
    # What it inherited lives as long as it does: the collector need not walk it again (half a worker's
    # collection time), and leaving it unwalked keeps more of its pages shared with the crawl's process.
    gc.freeze()
    # Forked from inside the crawl's event loop: a fresh context, or anyio sees that loop's marks.
    contextvars.Context().run(run_loop, _serve, spec, path)


async def _serve(spec: WorkerSpec, path: str) -> None:
    tally = Tally.create(tally_path(path, os.getpid()))
    stream = await anyio.connect_unix(path)
    await _Child(spec, stream, tally).run()


class _SeenSet:
    """What this worker knows of the crawl's seen set; links are pushed by the crawl's process.

    ``seen`` answers from the keys this worker staged itself (up to ``SEEN_CACHE`` of them), without
    asking: a key once seen stays seen, and most links of a page are to pages seen before. A key
    another worker queued first looks unseen here; the crawl's frontier drops it when the link
    arrives, counted as a duplicate. ``claim`` asks the crawl's process.
    """

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._known: set[str] = set()

    async def push(self, seeds: Sequence[Seed], *, forefront: bool = False) -> PushResult:
        raise SpireError("a worker process stages links; the crawl's process pushes them")

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        known = self._known
        return [key in known for key in keys]

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        claimed: list[bool] = await self._channel.call(Claim(list(keys)))
        return claimed

    def staged(self, keys: Iterable[str]) -> None:
        """Links a handler staged go to the crawl's frontier with its page: seen from now on."""
        if len(self._known) > SEEN_CACHE:
            self._known.clear()
        self._known.update(keys)


class _Slot:
    """A slot of the crawl's host gate, held for one seed over the channel.

    Only what changes the gate crosses: the moment of sending for an origin with a rate spacing,
    and an answer whose status pauses the origin, at once. A slot given back before the seed
    finishes (a redirect to another origin) goes with the next message, at most ``channel.LATER``
    seconds later; the slot the seed ends with is given back by its ``Finished``, with no message
    of its own. Each request is counted in the worker's ``tally`` as it goes out (``Sender.counted``).
    """

    def __init__(
        self,
        channel: Channel,
        lease_id: int,
        origin: str | None,
        *,
        spaced: bool,
        pause_on: frozenset[int],
    ) -> None:
        self._channel = channel
        self._lease_id = lease_id
        self._spaced = spaced
        self._pause_on = pause_on
        self.origin = origin

    async def take(self, origin: str) -> None:
        self._spaced = await self._channel.call(Take(self._lease_id, origin))
        self.origin = origin

    def sending(self) -> None:
        self.sent_later()

    def sent_later(self) -> None:
        if self._spaced:
            self._channel.send(Sending(self._lease_id))

    async def another(self) -> None:
        if self._spaced:
            await self._channel.call(Pace(self._lease_id))

    def answered(self, status: int, headers: Mapping[str, str]) -> None:
        if status in self._pause_on:
            self._channel.send(Answered(self._lease_id, status, headers.get("retry-after")))

    def release(self) -> None:
        if self.origin is not None:
            self.origin = None
            self._channel.send_later(Release(self._lease_id))

    def finish(self) -> None:
        """The seed is done: its ``Finished`` gives the slot back."""
        self.origin = None

    def end(self) -> None:
        """A download is over: its slot goes back, held or still being taken (its ``Release`` ends it)."""
        self.origin = None
        self._channel.send_later(Release(self._lease_id))


class _Redirects:
    """The crawl's redirect admission (scope, robots.txt, the seen set), asked over the channel."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    async def next_hop(self, seed: Seed, current: Seed, response: Response, chain: Sequence[str]) -> Seed:
        target: Seed = await self._channel.call(AdmitHop(seed, current, response, tuple(chain)))
        return target

    async def navigation(self, seed: Seed, page: str, target: str) -> bool:
        admitted: bool = await self._channel.call(AdmitMove(seed, page, target))
        return admitted


class _Rules:
    """The robots.txt rules the crawl's process sent, by origin (``ctx.robots``)."""

    def __init__(self) -> None:
        self._by_origin: dict[str, Robots] = {}

    def add(self, origin: str, rules: Robots) -> None:
        self._by_origin[origin] = rules

    def rules(self, url: str) -> Robots | None:
        try:
            return self._by_origin.get(urls.origin(url))
        except SpireError:
            return None


class _Child:
    def __init__(self, spec: WorkerSpec, stream: anyio.abc.ByteStream, tally: Tally) -> None:
        self._spec = spec
        self._channel = Channel(stream, on_message=self._message)
        self._tally = tally
        self._stats = CrawlStats()
        #: The pages counted in the counts sent so far (the tally holds those and the ones since).
        self._pages_sent = 0
        self._seen = _SeenSet(self._channel)
        self._admission = Admission(self._seen, spec.policy, self._stats)
        trace = spec.fetcher.sender.trace
        #: What its handlers and requests note for the crawl's ledger, sent with each outcome.
        self._ledger = DeferredLedger() if trace.ledger is not None else None
        self._admission.ledger = self._ledger
        # Its own request path: its own counts, and request ids no other process gives (the pid leads them).
        sender = dataclasses.replace(
            spec.fetcher.sender,
            stats=self._stats,
            trace=trace.fork(f"{os.getpid()}.", ledger=self._ledger),
            budget=None,  # the crawl's process keeps the budget
            counted=self._counted,
        )
        self._sender = sender
        self._fetcher = dataclasses.replace(spec.fetcher, sender=sender, redirects=_Redirects(self._channel))
        self._rules = _Rules()
        self._validators: dict[type[Any], Dataset[Any]] = dict(spec.datasets)
        self._scopes: dict[int, anyio.CancelScope] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        spec.route_downloads(self._download)  # the crawler its handlers hold sends them here

    def _counted(self) -> None:
        """A request was counted (as it went out): into the tally first, which outlives a SIGKILL."""
        self._tally.requests += 1

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._orphaned)
                tg.start_soon(self._send_counts)
                self._channel.send(Hello(os.getpid()))
                await self._channel.run()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._sender.backend.aclose()

    async def _orphaned(self) -> None:
        parent = os.getppid()
        while True:
            await anyio.sleep(ORPHAN_CHECK)  # no event says a parent died: look now and then
            if os.getppid() != parent:
                break
        assert self._tg is not None  # started from run()
        self._tg.cancel_scope.cancel()

    async def _send_counts(self) -> None:
        while True:
            await anyio.sleep(STATS_EVERY)
            if self._scopes:  # with no seed in hand, the last Finished brought every count
                self._channel.send_later(Counts(self._take_counts()))

    def _take_counts(self) -> CountsDelta:
        """The counts since the last ones taken; counting starts afresh."""
        counts = CountsDelta.of(self._stats)
        self._stats = self._admission.stats = self._sender.stats = CrawlStats()
        self._pages_sent += counts.pages
        return counts

    def _message(self, message: Any) -> None:
        assert self._tg is not None  # messages arrive once run() started
        match message:
            case Work():
                self._tg.start_soon(self._work, message)
            case Cancel(lease_id=lease_id):
                scope = self._scopes.get(lease_id)
                if scope is not None:
                    scope.cancel()
            case Stop():
                for scope in self._scopes.values():
                    scope.cancel()
                self._channel.send(Counts(self._take_counts()))
                self._channel.finish()  # the counts go out, then the channel closes and run() returns

    def _dataset(self, model: type[Any]) -> Dataset[Any]:
        found = self._validators.get(model)
        if found is None:
            found = self._validators[model] = MemoryDataset(model)
        return found

    async def _fetch(self, ctx: Context, slot: _Slot) -> Response:
        """The seed's fetch, its page (if it counts as one) in the tally as soon as it arrives."""
        response = await self._fetcher.fetch(ctx.seed, slot, accepts_blocks=lambda: ctx.accepts_blocks)
        self._tally.pages = self._pages_sent + self._stats.pages
        return response

    async def _download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None) -> int:
        """A handler's ``Crawler.download``: admitted by the crawl's process (robots.txt, the budget),
        sent on this worker's request path under a slot of the crawl's host gate."""
        download_id: int = await self._channel.call(AdmitDownload(seed))
        slot = _Slot(self._channel, download_id, None, spaced=False, pause_on=self._spec.pause_on)
        try:
            return await self._sender.download(seed, path, slot, limit=limit)
        finally:
            slot.end()

    async def _work(self, work: Work) -> None:
        lease_id, seed = work.lease_id, work.seed
        if work.rules is not None:
            self._rules.add(*work.rules)
        self._seen.staged([seed.unique_key, *work.seen])  # queued, so seen: a link back to it is no news
        origin = seed.origin if work.admitted else None
        slot = _Slot(self._channel, lease_id, origin, spaced=work.spaced, pause_on=self._spec.pause_on)
        ctx = Context(
            seed,
            lambda ctx: self._fetch(ctx, slot),
            admission=self._admission,
            datasets=self._dataset,
            backend=self._sender.backend,
            robots=self._rules,
            check_tag=self._spec.worker.check_tag,
        )
        with anyio.CancelScope() as scope:
            self._scopes[lease_id] = scope
            try:
                outcome = await handle_here(self._spec.worker, ctx, self._spec.retry, pages=self._spec.pages)
            except ConfigError as error:
                slot.release()
                self._channel.send(Mistake(lease_id, portable(error)))
                return
            finally:
                del self._scopes[lease_id]
            slot.finish()
            handled = self._handled(ctx, outcome)
            counts = self._take_counts()
            try:
                message = pickle.dumps(Finished(lease_id, handled, counts), protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                mistake = ConfigError(
                    f"what the handler of {seed.url} staged cannot cross to the crawl's process ({exc}): "
                    "with processes > 1, define item models (and user_data values) at module level",
                    url=seed.url,
                )
                self._channel.send(Counts(counts))
                self._channel.send(Mistake(lease_id, mistake))
                return
            self._channel.send_pickled_later(message)

    def _handled(self, ctx: Context, outcome: Outcome | LeftOut) -> Handled:
        failed = isinstance(outcome, Retry | Fail)
        handled = Handled(
            outcome=_portable(outcome),
            links=[(list(seeds), forefront) for seeds, forefront in ctx.staged_links],
            items=[(dataset.model, list(items)) for dataset, items in ctx.staged_items],
            response=ctx.fetched_response if failed else None,
            dropped_links=ctx.dropped_links,
            ledger=self._ledger.take() if self._ledger is not None else [],
            page=ctx.page,
        )
        ctx.discard(failed=False)  # gives back the places its links held under this worker's estimate of the cap
        self._seen.staged(seed.unique_key for seeds, _ in handled.links for seed in seeds)
        return handled


def _portable(outcome: Outcome | LeftOut) -> Outcome | LeftOut:
    """``outcome`` with its error able to cross to the crawl's process, its traceback kept as a note."""
    if not isinstance(outcome, Retry | Fail) or outcome.error is None:
        return outcome
    error = outcome.error
    if not isinstance(error, SpireError) and error.__traceback__ is not None:
        error.add_note(
            f"Traceback in worker process {os.getpid()}:\n" + "".join(traceback.format_tb(error.__traceback__))
        )
    return dataclasses.replace(outcome, error=portable(error))
