"""``RedisFrontier``: one crawl shared by many workers on many machines, kept in Redis.

    frontier = RedisFrontier("redis://queue.internal:6379/0", name="shop").dedup().retry(3)
    await Crawler(router, frontier=frontier).arun(["https://shop.example/"])

One role a module: the Lua scripts and the keys they keep (``scripts``), the queue and its leases
(``frontier``), the seen set (``seen``), the host slots every worker shares (``slots``), the item
streams (``items``), the fleet's status (``status``), the record a seed is kept as (``records``),
and the connection that translates redis-py's errors and rides out an outage (``connection``).
Importing it needs the redis package (``pip install 'spire-crawl[redis]'``).
"""

from spire_core.frontier.redis.frontier import RedisFrontier
from spire_core.frontier.redis.records import BadRecord
from spire_core.frontier.redis.status import FleetStatus, HostWait

__all__ = ["BadRecord", "FleetStatus", "HostWait", "RedisFrontier"]
