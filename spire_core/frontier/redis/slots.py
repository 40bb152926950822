"""Host slots shared by every worker of a crawl: the per-origin limits kept in Redis, and pauses.

``per_origin_in_flight`` and ``per_origin_interval`` hold for the whole crawl; a worker's
``HostLimits`` (its overrides too) are written per origin as its seeds are pushed; where several
limits apply the scripts take the tightest. A slot taken outside a lease (to read robots.txt) is a
``hold``; a ``pause_on`` status pauses its origin for every worker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from spire_core.errors import HttpStatusError
from spire_core.frontier.redis.connection import Connection
from spire_core.frontier.redis.scripts import Scripts
from spire_core.limits import HostLimits
from spire_core.outcome import Fail, Retry, seconds
from spire_core.seed import Seed

__all__ = ["SharedHostSlots"]


class SharedHostSlots:
    """The host limits of the crawl on ``connection`` that every worker's scripts hold each origin to."""

    def __init__(
        self,
        connection: Connection,
        scripts: Scripts,
        *,
        per_origin_in_flight: int | None,
        per_origin_interval: float | None,
        host_limits: HostLimits | None,
    ) -> None:
        self._connection = connection
        self._scripts = scripts
        self.per_origin_in_flight = per_origin_in_flight
        self.per_origin_interval = per_origin_interval
        self.host_limits = host_limits
        #: Origins whose ``host_limits`` this object has written to Redis.
        self._limited: set[str] = set()

    async def store_limits(self) -> None:
        """Write the crawl-wide per-origin limits given (if any), for every worker's scripts to read;
        redis-py's errors are the caller's to translate."""
        connection = self._connection
        for field, value in (("cap", self.per_origin_in_flight), ("interval", self.per_origin_interval)):
            if value is not None:
                await connection.client.hset(connection.prefix + "config", field, value)

    async def store_origin_limits(self, seeds: Sequence[Seed]) -> None:
        """Write ``host_limits`` for the origins of ``seeds`` new to this object, before their seeds
        are queued: every worker's scripts then hold each origin to them, across processes."""
        if self.host_limits is None:
            return
        limits: dict[str, str] = {}
        for seed in seeds:
            origin = seed.origin
            if origin not in self._limited and origin not in limits:
                cap, per_second = self.host_limits.for_origin(origin)
                limits[origin] = f"{cap or 0}\t{1.0 / per_second if per_second else 0.0}"
        if limits:
            connection = self._connection
            await connection.open()
            with connection.translated():
                await connection.client.hset(connection.prefix + "limits", mapping=limits)  # type: ignore[arg-type]
            self._limited.update(limits)

    def pause_after(self, outcome: Retry | Fail) -> float:
        """Seconds ``host_limits`` pause an origin whose response caused ``outcome`` (0: none), as
        each worker's own gate does: the pause then holds for every worker."""
        limits, error = self.host_limits, outcome.error
        if limits is None or not isinstance(error, HttpStatusError) or error.status not in limits.pause_on:
            return 0.0
        wait = error.retry_after if error.retry_after is not None else seconds(limits.default_pause) or 0.0
        return min(wait, seconds(limits.max_pause) or math.inf)

    async def hold(self, origin: str) -> float:
        """Take a slot of ``origin`` shared with every worker, outside a lease (to read its robots.txt):
        0 once taken, else the seconds to wait before asking again (``unhold`` gives it back)."""
        return float(await self._connection.run(self._scripts.hold, origin))

    async def unhold(self, origin: str) -> None:
        """Give back a slot ``hold`` took."""
        await self._connection.run(self._scripts.unhold, origin)
