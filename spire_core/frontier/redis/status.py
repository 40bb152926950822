"""A crawl's state across its whole fleet of workers, as ``RedisFrontier.status()`` and ``spire status`` show it."""

from __future__ import annotations

import dataclasses
import math

from spire_core.frontier.redis.connection import Connection

__all__ = ["FleetStatus", "HostWait", "read_status"]


@dataclasses.dataclass(frozen=True, slots=True)
class HostWait:
    """One origin in a crawl's line: seeds queued, leases out, and seconds until it may be leased
    (``inf`` while at its in-flight cap)."""

    origin: str
    queued: int
    in_flight: int
    ready_in: float


@dataclasses.dataclass(frozen=True, slots=True)
class FleetStatus:
    """What ``RedisFrontier.status()`` reports: the crawl's progress across every worker."""

    queued: int
    delayed: int
    in_flight: int
    done: int
    failed: int
    hosts: tuple[HostWait, ...]
    workers: tuple[str, ...]

    def lines(self) -> list[str]:
        """The status as lines of text, as ``spire status`` prints it."""
        out = [
            f"queued={self.queued} delayed={self.delayed} in_flight={self.in_flight} done={self.done} "
            f"failed={self.failed} workers={len(self.workers)}"
        ]
        for host in self.hosts:
            wait = "at its cap" if math.isinf(host.ready_in) else f"ready in {host.ready_in:.1f}s"
            out.append(f"  {host.origin}  queued={host.queued} in_flight={host.in_flight}  {wait}")
        out.extend(f"  worker {worker}" for worker in self.workers)
        return out


async def read_status(connection: Connection, *, hosts: int) -> FleetStatus:
    """A snapshot of the crawl on ``connection`` as every worker shares it, with the ``hosts`` origins next in line."""
    client, p = connection.client, connection.prefix

    async def read() -> FleetStatus:
        async with client.pipeline(transaction=True) as pipe:
            pipe.time()
            pipe.get(p + "queued")
            pipe.zcard(p + "delayed")
            pipe.zcard(p + "leases")
            pipe.get(p + "done")
            pipe.llen(p + "failed")
            pipe.zrange(p + "origins", 0, hosts - 1, withscores=True)
            pipe.zrangebyscore(p + "workers", "-inf", "+inf", withscores=True)
            clock, queued, delayed, leased, done, failed, origins, workers = await pipe.execute()
        now = clock[0] + clock[1] / 1_000_000
        waits: list[HostWait] = []
        for origin, score in origins:
            async with client.pipeline(transaction=False) as pipe:
                pipe.zcard(p + "q:" + origin)
                pipe.hget(p + "inflight", origin)
                waiting, in_flight = await pipe.execute()
            waits.append(HostWait(origin, int(waiting), int(in_flight or 0), max(0.0, score - now)))
        return FleetStatus(
            queued=int(queued or 0),
            delayed=int(delayed),
            in_flight=int(leased),
            done=int(done or 0),
            failed=int(failed),
            hosts=tuple(waits),
            workers=tuple(worker for worker, lapses in workers if lapses > now),
        )

    await connection.open()
    with connection.translated():
        return await read()
