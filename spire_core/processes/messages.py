"""What crosses between the crawl's process and its worker processes (``processes=N``).

``WorkerSpec`` is what a worker inherits when it is forked: the crawl's worker (its router), how it
fetches, its policy and retry policy. ``Handled`` is what a worker sends back for each seed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from spire_core.admission import CrawlPolicy
from spire_core.context import Context, Worker
from spire_core.dataset.base import Dataset
from spire_core.errors import SpireError
from spire_core.outcome import Outcome
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.seed_fetcher import SeedFetcher
from spire_core.session.retry import RetryPolicy
from spire_core.skips import LeftOut

__all__ = ["Handled", "WorkerSpec"]


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker process needs to handle seeds as the crawl's process would (it inherits it)."""

    worker: Worker
    fetcher: SeedFetcher
    policy: CrawlPolicy
    retry: RetryPolicy
    #: The crawl's datasets, for validation only: items are stored by the crawl's process.
    datasets: Mapping[type[BaseModel], Dataset[Any]]
    #: The statuses that pause an origin (``HostLimits.pause_on``): the only answers the gate hears of.
    pause_on: frozenset[int]


@dataclasses.dataclass(slots=True)
class Handled:
    """What a worker process sends back for a seed: the outcome and its staged writes."""

    outcome: Outcome | LeftOut
    links: list[tuple[list[Seed], bool]]
    items: list[tuple[type[BaseModel], list[Any]]]
    #: The response, when the seed failed or is retried (the failed hook may read it).
    response: Response | None
    #: Links the handler found that were not queued because it failed.
    dropped_links: int = 0

    async def fetched(self, ctx: Context) -> Response:
        """The response the worker fetched, for a hook that asks for it here."""
        if self.response is None:
            raise SpireError("the page was handled in a worker process and is not kept", url=ctx.seed.url)
        return self.response
