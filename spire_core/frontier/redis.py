"""``RedisFrontier``: one crawl shared by many workers on many machines, kept in Redis.

    frontier = RedisFrontier("redis://queue.internal:6379/0", name="shop").dedup().retry(3)
    await Crawler(router, frontier=frontier).arun(["https://shop.example/"])

Every change of state is one Lua script that Redis runs atomically, on the server's clock, so workers
whose own clocks disagree still share one view of time. The keys of a crawl, under ``{name}:``:

    origins     ZSET   origin -> when it may next be leased (+inf while at its in-flight cap)
    q:<origin>  ZSET   order key + record, scored -priority; equal scores sort by the order key
    seen        SET    unique keys pushed with ``unique=True``  (or, with a Bloom seen set:)
    bloom:<n>   STRING bitmaps of the Bloom filter, ``config`` field ``bloom`` holding its size
    delayed     ZSET   order key + record, scored by when the retry is due
    leases      ZSET   token -> expiry;  leased HASH token -> record
    inflight    HASH   origin -> leases out;  next HASH origin -> earliest next lease (spacing)
    config      HASH   cap, interval: the per-origin limits every worker honours
    limits      HASH   origin -> "cap TAB interval" from the workers' ``HostLimits`` (its overrides too)
    workers     ZSET   worker id -> when its heartbeat lapses;  done  counter of pages acked done
    failed      LIST   JSON ``[record, error text]``
    dead        LIST   JSON ``[record, why]``: records no worker could read, moved aside when leased
    items:<place>  STREAM  a dataset's items (field ``item``: JSON), added by the ack of their page
    order, front, token, queued    counters

A record is ``priority TAB origin TAB JSON``: the scripts read only the priority and the origin; the
compact JSON of the other ``Seed`` fields is read only in Python. A record that cannot be read back
as a seed (bad JSON, a missing URL, a priority that is no number, written by hand or by another
program) is a ``BadRecord``: the worker that leased it moves it to ``dead``, logs it once on
``spire.frontier`` and goes on; it never crashes the worker, nor comes back to crash the next. An
``origins`` member whose queue is gone does not keep the crawl alive: once nothing else is queued,
delayed or leased, such members are dropped and the crawl is done.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import itertools
import json
import logging
import math
import os
import re
import socket
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel

from spire_core import checks
from spire_core.dataset.base import Dataset
from spire_core.errors import ConfigError, ConnectError, FetchTimeout, HttpStatusError, SpireError
from spire_core.frontier.base import FrontierOps, Lease, PushResult, Ready, Wait, always_ready
from spire_core.frontier.bloom import Bloom
from spire_core.frontier.items import StagedItems, documents, place_in
from spire_core.ledger import LedgerMode, LedgerSink, LedgerView
from spire_core.ledger_redis import RedisLedger, RedisLedgerView
from spire_core.ledger_stores import LightLedger
from spire_core.limits import HostLimits
from spire_core.outcome import Fail, Outcome, Retry, seconds
from spire_core.seed import Seed

logger = logging.getLogger("spire.frontier")
logger.addHandler(logging.NullHandler())
_FIRST_RECONNECT_PAUSE = 0.05
_MAX_RECONNECT_PAUSE = 1.0

try:
    import redis.asyncio as aioredis
    import redis.exceptions as redis_errors
    from redis.commands.core import AsyncScript
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("RedisFrontier needs the redis package: pip install 'spire-crawl[redis]'") from exc

__all__ = ["BadRecord", "FleetStatus", "HostWait", "RedisFrontier"]

T = TypeVar("T", bound=BaseModel)

_WORKER_NUMBERS = itertools.count(1)

#: Origins a lease examines per round trip, and how many rounds it pages through when the calling
#: process is busy with all of them.
_CANDIDATES = 16
_PAGES = 4
#: How often a lease re-examines the crawl after another worker won the race for its origins.
_RACES = 8
#: Seeds per push script: big pushes are split so that no script blocks Redis for long.
_PUSH_BATCH = 500

_PRELUDE = """
local P = ARGV[1]
local ORIGINS, INFLIGHT, NEXT, CONFIG = P .. 'origins', P .. 'inflight', P .. 'next', P .. 'config'
local LEASES, LEASED, DELAYED = P .. 'leases', P .. 'leased', P .. 'delayed'

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- The priority and origin at the head of a record.
local function header(record)
  local priority, origin = string.match(record, '^([^\\t]*)\\t([^\\t]*)\\t')
  return tonumber(priority), origin
end

-- An order key: fixed width, so queue members of equal priority sort by it, forefront (negative) first.
local function order_key(n)
  return string.format('%016d', n + 1125899906842624)
end

local function next_order()
  return order_key(redis.call('INCR', P .. 'order'))
end

local function front_order()
  return order_key(-redis.call('INCR', P .. 'front'))
end

local function setting(name)
  return tonumber(redis.call('HGET', CONFIG, name) or '0') or 0
end

-- An origin's in-flight cap and lease spacing (0: none): the tighter of the crawl's and its own
-- (written from the workers' HostLimits).
local function limits_of(origin)
  local cap, interval = setting('cap'), setting('interval')
  local own = redis.call('HGET', P .. 'limits', origin)
  if own then
    local own_cap, own_interval = string.match(own, '^([^\t]*)\t(.*)$')
    own_cap, own_interval = tonumber(own_cap) or 0, tonumber(own_interval) or 0
    if own_cap > 0 and (cap == 0 or own_cap < cap) then
      cap = own_cap
    end
    interval = math.max(interval, own_interval)
  end
  return cap, interval
end

-- Queue a record; one whose header names no origin goes to the dead-letter list instead (returning
-- the empty origin, which nothing is queued under), and one with no number for a priority is queued
-- at 0, for the worker that leases it to move aside: bad data never fails the script for everyone.
local function enqueue(record, order)
  local priority, origin = header(record)
  if not origin then
    redis.call('RPUSH', P .. 'dead', cjson.encode({record, 'a record with no "priority TAB origin TAB" header'}))
    return ''
  end
  redis.call('ZADD', P .. 'q:' .. origin, -(priority or 0), order .. record)
  redis.call('INCR', P .. 'queued')
  return origin
end

local function free_slot(origin)
  if redis.call('HINCRBY', INFLIGHT, origin, -1) <= 0 then
    redis.call('HDEL', INFLIGHT, origin)
  end
end

-- Put an origin where it belongs in the ready index: out when its queue is empty, at +inf while
-- at its in-flight cap, else in line at its ready time (an origin already in line keeps its place).
local function place(origin, now)
  if redis.call('EXISTS', P .. 'q:' .. origin) == 0 then
    redis.call('ZREM', ORIGINS, origin)
    return
  end
  local cap = limits_of(origin)
  if cap > 0 and tonumber(redis.call('HGET', INFLIGHT, origin) or '0') >= cap then
    redis.call('ZADD', ORIGINS, '+inf', origin)
    return
  end
  local score = redis.call('ZSCORE', ORIGINS, origin)
  if score and tonumber(score) < math.huge then
    return
  end
  local spaced = tonumber(redis.call('HGET', NEXT, origin) or '0')
  redis.call('ZADD', ORIGINS, math.max(now, spaced), origin)
end
"""

# ARGV: prefix, forefront, unique (0: no, 1: the exact set, 2: the Bloom filter), then (unique key or
# Bloom bits "part offset offset...", record) pairs. Returns 1 (added) or 0 per seed.
_PUSH = """
local now = clock()
local unique, bloom = ARGV[3] ~= '0', ARGV[3] == '2'
local order = next_order
if ARGV[2] == '1' then order = front_order end
-- Whether a key is new to the seen set, recording it: one SADD, or setting its Bloom bits
-- (new when any of them was still clear).
local function first_time(key)
  if not bloom then
    return redis.call('SADD', P .. 'seen', key) == 1
  end
  local bitmap, new = nil, false
  for n in string.gmatch(key, '%d+') do
    if not bitmap then
      bitmap = P .. 'bloom:' .. n
    elseif redis.call('SETBIT', bitmap, tonumber(n), 1) == 0 then
      new = true
    end
  end
  return new
end
local added, touched = {}, {}
for i = 4, #ARGV, 2 do
  if unique and not first_time(ARGV[i]) then
    added[#added + 1] = 0
  else
    touched[enqueue(ARGV[i + 1], order())] = true
    added[#added + 1] = 1
  end
end
for origin in pairs(touched) do
  place(origin, now)
end
return added
"""

# ARGV: prefix, offset, count. Reclaims expired leases, queues due retries, then returns
# {ready origins as "head score TAB head order key TAB origin", seconds until the next origin is ready,
#  until the next retry is due, until the next lease expires, #origins, #delayed, #leases}.
_SCAN = """
local now = clock()
for _, token in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now, 'LIMIT', 0, 100)) do
  local record = redis.call('HGET', LEASED, token)
  redis.call('ZREM', LEASES, token)
  redis.call('HDEL', LEASED, token)
  if record then
    local origin = enqueue(record, front_order())
    free_slot(origin)
    place(origin, now)
  end
end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, 100)) do
  redis.call('ZREM', DELAYED, member)
  place(enqueue(string.sub(member, 17), string.sub(member, 1, 16)), now)
end
local ready = {}
local origins = redis.call('ZRANGEBYSCORE', ORIGINS, '-inf', now, 'LIMIT', tonumber(ARGV[2]), tonumber(ARGV[3]))
for _, origin in ipairs(origins) do
  local head = redis.call('ZRANGE', P .. 'q:' .. origin, 0, 0, 'WITHSCORES')
  if head[1] then
    ready[#ready + 1] = head[2] .. '\t' .. string.sub(head[1], 1, 16) .. '\t' .. origin
  end
end
local function until_first(zset, min)
  local first = redis.call('ZRANGEBYSCORE', zset, min, '+inf', 'LIMIT', 0, 1, 'WITHSCORES')
  if not first[2] or tonumber(first[2]) == math.huge then
    return ''
  end
  return string.format('%.6f', math.max(0, tonumber(first[2]) - now))
end
return {
  ready,
  until_first(ORIGINS, '(' .. string.format('%.6f', now)),
  until_first(DELAYED, '-inf'),
  until_first(LEASES, '-inf'),
  redis.call('ZCARD', ORIGINS),
  redis.call('ZCARD', DELAYED),
  redis.call('ZCARD', LEASES),
}
"""

# ARGV: prefix, ttl, origins in order of preference. Leases the head of the first origin still
# ready (in line, under its cap); returns {token, record, origin}, or nil when another worker won them all.
_TAKE = """
local now = clock()
for i = 3, #ARGV do
  local origin = ARGV[i]
  local cap, interval = limits_of(origin)
  local score = redis.call('ZSCORE', ORIGINS, origin)
  if score and tonumber(score) <= now and cap > 0
      and tonumber(redis.call('HGET', INFLIGHT, origin) or '0') >= cap then
    place(origin, now)  -- a worker lowered the cap since this origin was placed: out of line now
  elseif score and tonumber(score) <= now then
    local head = redis.call('ZPOPMIN', P .. 'q:' .. origin)
    if head[1] then
      local record = string.sub(head[1], 17)
      local token = tostring(redis.call('INCR', P .. 'token'))
      redis.call('ZADD', LEASES, now + tonumber(ARGV[2]), token)
      redis.call('HSET', LEASED, token, record)
      redis.call('HINCRBY', INFLIGHT, origin, 1)
      redis.call('DECR', P .. 'queued')
      if interval > 0 then
        redis.call('HSET', NEXT, origin, now + interval)
      end
      redis.call('ZREM', ORIGINS, origin)
      place(origin, now)
      return {token, record, origin}
    end
  end
end
return false
"""

# ARGV: prefix, token, kind (done, retry, fail, release), delay, record or failure, then for done
# the page's items as (place, JSON) pairs, added to their streams in the same step as the ack, and
# for retry and fail the seconds its origin is paused for every worker (0: none).
# Returns 0 when the lease is no longer held (it expired and went back to the queue): nothing is written.
_SETTLE = """
local now = clock()
local token, kind = ARGV[2], ARGV[3]
local record = redis.call('HGET', LEASED, token)
if not record then
  return 0
end
redis.call('HDEL', LEASED, token)
redis.call('ZREM', LEASES, token)
local _, origin = header(record)
free_slot(origin)
if kind == 'retry' then
  redis.call('ZADD', DELAYED, now + tonumber(ARGV[4]), next_order() .. ARGV[5])
elseif kind == 'release' then
  enqueue(record, front_order())
elseif kind == 'fail' then
  redis.call('RPUSH', P .. 'failed', ARGV[5])
elseif kind == 'done' then
  redis.call('INCR', P .. 'done')
  for i = 6, #ARGV, 2 do
    redis.call('XADD', P .. 'items:' .. ARGV[i], '*', 'item', ARGV[i + 1])
  end
end
-- A pause of the origin (its server said 429 or 503): no worker leases from it before it ends.
local pause_end = now + ((kind == 'retry' or kind == 'fail') and tonumber(ARGV[6]) or 0)
if pause_end > now then
  if tonumber(redis.call('HGET', NEXT, origin) or '0') < pause_end then
    redis.call('HSET', NEXT, origin, pause_end)
  end
  local score = redis.call('ZSCORE', ORIGINS, origin)
  if score and tonumber(score) < pause_end then
    redis.call('ZADD', ORIGINS, pause_end, origin)
  end
end
place(origin, now)
return 1
"""

# ARGV: prefix, origin. Takes a slot of the origin outside any lease (its robots.txt is read), under
# its cap and spacing; returns "0" when taken, else the seconds to wait (a string: Lua numbers would
# come back as integers).
_HOLD = """
local now = clock()
local origin = ARGV[2]
local cap, interval = limits_of(origin)
if cap > 0 and tonumber(redis.call('HGET', INFLIGHT, origin) or '0') >= cap then
  return '0.05'
end
local spaced = tonumber(redis.call('HGET', NEXT, origin) or '0')
if spaced > now then
  return tostring(spaced - now)
end
redis.call('HINCRBY', INFLIGHT, origin, 1)
if interval > 0 then
  redis.call('HSET', NEXT, origin, now + interval)
end
redis.call('ZREM', ORIGINS, origin)
place(origin, now)
return '0'
"""

# ARGV: prefix, origin. Gives back a slot taken by the hold script.
_UNHOLD = """
free_slot(ARGV[2])
place(ARGV[2], clock())
return 1
"""

# ARGV: prefix, ttl, worker id, tokens. Pushes each held lease's expiry to now + ttl and the worker's
# heartbeat with them; returns the tokens lost.
_RENEW = """
local now = clock()
local expiry = now + tonumber(ARGV[2])
redis.call('ZADD', P .. 'workers', expiry, ARGV[3])
redis.call('ZREMRANGEBYSCORE', P .. 'workers', '-inf', now)
local lost = {}
for i = 4, #ARGV do
  if redis.call('HEXISTS', LEASED, ARGV[i]) == 1 then
    redis.call('ZADD', LEASES, 'XX', expiry, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"""

# ARGV: prefix, then Bloom bits "part offset offset..." per key. Returns 1 (all set: seen) or 0 per key.
_BLOOM_SEEN = """
local found = {}
for i = 2, #ARGV do
  local bitmap, seen = nil, 1
  for n in string.gmatch(ARGV[i], '%d+') do
    if not bitmap then
      bitmap = P .. 'bloom:' .. n
    elseif redis.call('GETBIT', bitmap, tonumber(n)) == 0 then
      seen = 0
      break
    end
  end
  found[#found + 1] = seen
end
return found
"""

# ARGV: prefix, then per key its Bloom bits "part offset offset...": sets them. Returns 1 (new: a bit
# was clear) or 0 per key. ``claim`` on a Bloom seen set.
_BLOOM_CLAIM = """
local new = {}
for i = 2, #ARGV do
  local bitmap, fresh = nil, 0
  for n in string.gmatch(ARGV[i], '%d+') do
    if not bitmap then
      bitmap = P .. 'bloom:' .. n
    elseif redis.call('SETBIT', bitmap, tonumber(n), 1) == 0 then
      fresh = 1
    end
  end
  new[#new + 1] = fresh
end
return new
"""

# ARGV: prefix, token, JSON [record, why], the origin whose queue it was leased from. Moves a leased
# record no worker can read to the dead-letter list and frees its origin's slot. Returns 0 when the
# lease is not held.
_BURY = """
local record = redis.call('HGET', LEASED, ARGV[2])
if not record then
  return 0
end
redis.call('HDEL', LEASED, ARGV[2])
redis.call('ZREM', LEASES, ARGV[2])
redis.call('RPUSH', P .. 'dead', ARGV[3])
free_slot(ARGV[4])
place(ARGV[4], clock())
return 1
"""

# ARGV: prefix. Drops the members of the ready index whose queue is gone (a stale origin would keep
# every worker polling); returns how many origins still have a queue.
_PRUNE = """
local live = 0
for _, origin in ipairs(redis.call('ZRANGE', ORIGINS, 0, -1)) do
  if redis.call('EXISTS', P .. 'q:' .. origin) == 0 then
    redis.call('ZREM', ORIGINS, origin)
  else
    live = live + 1
  end
end
return live
"""

_PENDING = """
return tonumber(redis.call('GET', P .. 'queued') or '0') + redis.call('ZCARD', DELAYED) + redis.call('ZCARD', LEASES)
"""


def _encode(seed: Seed) -> str:
    """A seed as a record: ``priority TAB origin TAB JSON``, the JSON holding only non-default fields."""
    fields: dict[str, Any] = {"u": seed.url}
    if seed.tag is not None:
        fields["t"] = seed.tag
    if seed.method != "GET":
        fields["m"] = seed.method
    if seed.depth:
        fields["d"] = seed.depth
    if seed.attempt:
        fields["a"] = seed.attempt
    if seed.user_data is not None:
        fields["x"] = dict(seed.user_data)
    if seed.headers is not None:
        fields["h"] = dict(seed.headers)
    if seed.body is not None:
        fields["b"] = base64.b64encode(seed.body).decode("ascii")
    if seed.unique_key != seed.url:
        fields["k"] = seed.unique_key
    if seed.strategy is not None:
        fields["s"] = seed.strategy
    try:
        document = json.dumps(fields, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"a seed in a RedisFrontier needs JSON user_data: {exc}", url=seed.url) from exc
    return f"{seed.priority}\t{seed.origin}\t{document}"


class BadRecord(SpireError):
    """A record in Redis that cannot be read back as a seed; moved to the crawl's ``dead`` list."""

    category = "bad_record"


def _decode(record: str) -> Seed:
    """The seed of ``record``; ``BadRecord``, naming the record, when it is not one."""
    try:
        priority, _, document = record.split("\t", 2)
        fields = json.loads(document)
        if not isinstance(fields, dict):
            raise TypeError(f"its JSON is a {type(fields).__name__}, not an object")
        body = fields.get("b")
        return Seed(
            fields["u"],
            tag=fields.get("t"),
            method=fields.get("m", "GET"),
            depth=fields.get("d", 0),
            priority=int(priority),
            attempt=fields.get("a", 0),
            user_data=fields.get("x"),
            headers=fields.get("h"),
            body=None if body is None else base64.b64decode(body, validate=True),
            unique_key=fields["k"] if "k" in fields else fields["u"],
            strategy=fields.get("s"),
        )
    except (ValueError, KeyError, TypeError, AttributeError, SpireError) as exc:
        shown = record if len(record) <= 200 else record[:200] + "..."
        reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, KeyError) else f"no field {exc}"
        raise BadRecord(f"a queue record that is no seed ({reason}): {shown!r}") from None


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


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _redacted(url: str) -> str:
    """``url`` with its password hidden, fit for messages and logs; ``ConfigError`` if it is no URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except (TypeError, ValueError, AttributeError) as exc:
        # Too broken to split: hide whatever sits between "//" and "@", then say so.
        shown = re.sub(r"//[^/@]*@", "//***@", url) if isinstance(url, str) else repr(url)
        raise ConfigError(f"not a Redis URL: {shown!r} ({exc})") from None
    if password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _glob_escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


def _seconds_or_none(text: str) -> float | None:
    return float(text) if text else None


class RedisFrontier(FrontierOps):
    """Seeds in Redis, shared by every worker that opens the same ``url`` and ``name``.

    Same semantics as ``MemoryFrontier``: per-origin queues by priority (forefront first), the seen
    set for ``unique`` pushes, delayed retries, and leases. What it adds for many workers:

    - ``per_origin_in_flight`` and ``per_origin_interval`` are stored in Redis and honoured by every
      worker together: one host gets at most that many leases out at once across the whole crawl,
      and its leases start at least ``interval`` seconds apart. Given here, they replace the stored
      values; left out, the stored ones (or none) apply. Each worker's own ``HostLimits`` still apply too.
    - ``host_limits`` (a crawl's ``HostLimits``, overrides included) are written per origin as its
      seeds are pushed, and held the same way across workers; where several limits apply, the
      tightest wins. A page retried after a ``pause_on`` status pauses its origin for every worker.
      ``spire worker`` passes its script's.
    - A lease expires ``lease_ttl`` seconds after it was taken or last renewed; any worker then hands
      its seed out again, first in its origin's queue. A worker renews its leases whenever it talks to
      the frontier a third of the TTL after the last renewal, and ``keep_alive()`` renews them on a
      timer for handlers that can run longer than the TTL.
    - ``lease`` says ``Wait(None)`` only when nothing is queued, delayed or leased by any worker;
      otherwise it waits at most ``poll`` seconds, so a worker notices seeds other workers push.
    - A lost connection (Redis restarting, a network blip) is tried again for up to
      ``reconnect_for`` seconds, logged on the ``spire.frontier`` logger, before a command fails
      with ``ConnectError``; nothing is lost meanwhile.
    - ``dataset(Model)`` keeps items in a stream of the crawl, added by their page's ack (exactly
      once); ``status()`` reports the crawl across its workers; ``.dedup(bloom=n)`` keeps the seen
      set as Bloom bitmaps.

    ``fresh=True`` deletes the crawl's keys when the frontier is first used (``clear()`` does it any
    time). Seeds' ``user_data`` must be JSON (tuples come back as lists). Needs an asyncio event
    loop (redis-py's client) and Redis 6.2 or later.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        name: str = "spire",
        lease_ttl: float | timedelta = 60.0,
        per_origin_in_flight: int | None = None,
        per_origin_interval: float | timedelta | None = None,
        poll: float | timedelta = 0.5,
        fresh: bool = False,
        connect_timeout: float | timedelta = 5.0,
        reconnect_for: float | timedelta = 10.0,
        host_limits: HostLimits | None = None,
    ) -> None:
        #: The server's URL, its password hidden: what messages and ``repr`` show.
        self.url = _redacted(url)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a RedisFrontier needs a non-empty name, not {name!r}")
        self.name = name
        self.lease_ttl = checks.duration("lease_ttl", lease_ttl, positive=True)
        if per_origin_in_flight is not None:
            checks.count("per_origin_in_flight", per_origin_in_flight)
        self.per_origin_in_flight = per_origin_in_flight
        self.per_origin_interval = (
            None if per_origin_interval is None else checks.duration("per_origin_interval", per_origin_interval)
        )
        self.poll = checks.duration("poll", poll, positive=True)
        timeout = checks.duration("connect_timeout", connect_timeout, positive=True)
        #: How long a lost connection is tried again before a command fails (``ConnectError``).
        self.reconnect_for = checks.duration("reconnect_for", reconnect_for)
        self.host_limits = host_limits
        try:
            self._client = aioredis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=timeout)
        except ValueError as exc:
            raise ConfigError(f"not a Redis URL: {self.url} ({exc})") from exc
        self._prefix = name + ":"
        self._fresh = fresh
        self._opened = False
        self._closed = False
        self._open_lock: anyio.Lock | None = None
        register = self._client.register_script
        self._push = register(_PRELUDE + _PUSH)
        self._scan = register(_PRELUDE + _SCAN)
        self._take = register(_PRELUDE + _TAKE)
        self._settle = register(_PRELUDE + _SETTLE)
        self._renew = register(_PRELUDE + _RENEW)
        self._pending = register(_PRELUDE + _PENDING)
        #: The crawl's ledger (``open_ledger``): this worker's lines, written after each push and report.
        self.ledger: LedgerView | None = None
        self._sink: LedgerSink | None = None
        self._ledger_writes: RedisLedger | None = None
        self._bloom_seen = register(_PRELUDE + _BLOOM_SEEN)
        self._bloom_claim = register(_PRELUDE + _BLOOM_CLAIM)
        self._hold = register(_PRELUDE + _HOLD)
        self._unhold = register(_PRELUDE + _UNHOLD)
        self._bury = register(_PRELUDE + _BURY)
        self._prune = register(_PRELUDE + _PRUNE)
        #: Records this object moved to the dead-letter list because no seed could be read from them.
        self.bad_records = 0
        self._bloom: Bloom | None = None
        self._bloom_checked = False
        self._seen_used = False
        #: Tokens of the leases this object handed out and has not settled: the ones it renews.
        self._held: set[str] = set()
        self._renewed_at = 0.0
        self._lost_at: float | None = None  # when the connection was lost, while it is
        #: Items staged per lease token, written by the script that acks it.
        self._staged: dict[str, list[tuple[str, str]]] = {}
        #: Origins whose ``host_limits`` this object has written to Redis.
        self._limited: set[str] = set()
        #: This object's name in the crawl's list of live workers.
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{next(_WORKER_NUMBERS)}"

    def __repr__(self) -> str:
        return f"RedisFrontier({self.url!r}, name={self.name!r})"

    # -- connection -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, store the per-origin limits, and clear the crawl when ``fresh``; once.

        Every other method opens on first use; call it to fail early on a wrong URL.
        """
        if self._closed:
            raise SpireError(f"the frontier {self!r} is closed")
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = anyio.Lock()
        async with self._open_lock:
            if self._opened:
                return
            try:
                await self._client.ping()
                await self._store_limits()
                if not self._fresh:  # else clear() records it, once the old crawl is gone
                    await self._check_bloom()
            except redis_errors.RedisError as exc:
                raise ConfigError(f"cannot use the Redis frontier at {self.url}: {exc}") from exc
            self._opened = True
            if self._fresh:
                await self.clear()

    async def __aenter__(self) -> RedisFrontier:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Hand back the leases this object still holds, then disconnect."""
        if self._closed:
            return
        with contextlib.suppress(SpireError):
            for token in list(self._held):
                await self._run(self._settle, token, "release", 0, "")
            if self._opened:
                await self._write_ledger()  # the attempts of leases handed back, the last refusals
                with self._translated():
                    await self._client.zrem(self._prefix + "workers", self.worker_id)  # no longer live
        self._held.clear()
        self._staged.clear()
        self._closed = True
        with contextlib.suppress(redis_errors.RedisError):
            await self._client.aclose()

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Turn redis-py's exceptions into spire's, naming the server (never its password)."""
        try:
            yield
        except redis_errors.TimeoutError as exc:
            raise FetchTimeout(f"the Redis frontier at {self.url} timed out: {exc}") from exc
        except redis_errors.ConnectionError as exc:
            raise ConnectError(f"lost the Redis frontier at {self.url}: {exc}") from exc
        except redis_errors.RedisError as exc:
            raise SpireError(f"the Redis frontier at {self.url} failed: {exc}") from exc

    async def _run(self, script: AsyncScript, *args: str | float) -> Any:
        return await self._call(lambda: script(args=[self._prefix, *args]))

    async def _call(self, command: Callable[[], Awaitable[Any]]) -> Any:
        """Run one command, riding out a lost connection for up to ``reconnect_for`` seconds.

        A worker loses its connection when Redis restarts or the network blips: the command is tried
        again with a growing pause, and only an outage longer than ``reconnect_for`` is an error. The
        bound is per outage, shared by every command: once it has passed, each command (handing
        leases back on close, say) fails after a single try. The loss and the return are logged once
        on ``spire.frontier``. A command that reached the server before the connection dropped may
        run twice: every script is safe to repeat, except that a lease taken twice leaves a copy
        nobody holds, which is handed out again when it expires.
        """
        await self.open()
        pause = _FIRST_RECONNECT_PAUSE
        while True:
            try:
                with self._translated():
                    result = await command()
            except (ConnectError, FetchTimeout) as exc:
                now = time.monotonic()
                if self._lost_at is None:
                    self._lost_at = now
                    logger.warning("%s; trying again for up to %g s", exc, self.reconnect_for)
                if now >= self._lost_at + self.reconnect_for:
                    raise ConnectError(
                        f"lost the Redis frontier at {self.url} and could not reach it again "
                        f"within {self.reconnect_for:g} s: {exc}"
                    ) from exc
                await anyio.sleep(min(pause, self._lost_at + self.reconnect_for - now))
                pause = min(pause * 2, _MAX_RECONNECT_PAUSE)
                continue
            if self._lost_at is not None:
                self._lost_at = None
                logger.warning("reached the Redis frontier at %s again", self.url)
            return result

    async def clear(self) -> None:
        """Delete every key of this crawl: its queues, seen set, leases, failures and limits."""
        await self.open()
        with self._translated():
            batch: list[str] = []
            async for key in self._client.scan_iter(match=_glob_escape(self._prefix) + "*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    await self._client.unlink(*batch)
                    batch.clear()
            if batch:
                await self._client.unlink(*batch)
            await self._store_limits()
            await self._check_bloom()
        self._held.clear()

    async def _store_limits(self) -> None:
        """Write the per-origin limits given to this object, for every worker's scripts to read."""
        for field, value in (("cap", self.per_origin_in_flight), ("interval", self.per_origin_interval)):
            if value is not None:
                await self._client.hset(self._prefix + "config", field, value)

    async def _store_origin_limits(self, seeds: Sequence[Seed]) -> None:
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
            await self.open()
            with self._translated():
                await self._client.hset(self._prefix + "limits", mapping=limits)  # type: ignore[arg-type]
            self._limited.update(limits)

    # -- the Frontier protocol --------------------------------------------------------------------

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        result = PushResult()
        batch = list(seeds)
        for start in range(0, len(batch), _PUSH_BATCH):
            chunk = batch[start : start + _PUSH_BATCH]
            await self._store_origin_limits(chunk)
            if unique:
                await self._seen_set_ready()
            mode = ("2" if self._bloom else "1") if unique else "0"
            args: list[str | float] = ["1" if forefront else "0", mode]
            for seed in chunk:
                args += (self._seen_key(seed.unique_key) if unique else "", _encode(seed))
            flags = await self._run(self._push, *args)
            for seed, added in zip(chunk, flags, strict=True):
                (result.added if added else result.duplicates).append(seed)
        if self._sink is not None:
            self._sink.pushed(result.added)
            await self._write_ledger()
        return result

    def open_ledger(self, mode: LedgerMode) -> LedgerSink:
        """Keep the crawl's ledger (``KeepsLedger``): ``full`` in Redis beside the queue, shared by
        every worker (see ``spire_core.ledger_redis`` for when a line is written); ``light`` in memory."""
        if self._sink is None:
            if mode == "light":
                light = LightLedger()
                self._sink, self.ledger = light, light
            else:
                self._ledger_writes = RedisLedger(self._client, self._prefix, self._call)
                self._sink = self._ledger_writes
                self.ledger = RedisLedgerView(self._client, self._prefix, self._call)
        return self._sink

    async def _write_ledger(self) -> None:
        if self._ledger_writes is not None:
            await self._ledger_writes.flush()

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        if not keys:
            return []
        await self._seen_set_ready()
        if self._bloom is not None:
            found = await self._run(self._bloom_seen, *map(self._seen_key, keys))
            return [bool(flag) for flag in found]
        found = await self._call(lambda: self._client.smismember(self._prefix + "seen", list(keys)))
        return [bool(flag) for flag in found]

    async def hold(self, origin: str) -> float:
        """Take a slot of ``origin`` shared with every worker, outside a lease (to read its robots.txt):
        0 once taken, else the seconds to wait before asking again (``unhold`` gives it back)."""
        return float(await self._run(self._hold, origin))

    async def unhold(self, origin: str) -> None:
        """Give back a slot ``hold`` took."""
        await self._run(self._unhold, origin)

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        if not keys:
            return []
        await self._seen_set_ready()
        if self._bloom is not None:
            fresh = await self._run(self._bloom_claim, *map(self._seen_key, keys))
            return [bool(flag) for flag in fresh]

        async def add() -> list[int]:
            async with self._client.pipeline(transaction=True) as pipe:
                for key in keys:
                    pipe.sadd(self._prefix + "seen", key)
                added: list[int] = await pipe.execute()
            return added

        return [bool(flag) for flag in await self._call(add)]

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait:
        await self._renew_if_due()
        for _ in range(_RACES):
            admitted: list[tuple[float, str, str]] = []
            local_wait = math.inf
            offset = 0
            while True:
                view = await self._run(self._scan, offset, _CANDIDATES)
                listed = view[0]
                for entry in listed:
                    score, order, origin = entry.split("\t", 2)
                    until = ready(origin)
                    if until <= 0:
                        admitted.append((float(score), order, origin))
                    else:
                        local_wait = min(local_wait, until)
                if admitted or len(listed) < _CANDIDATES or offset >= _CANDIDATES * (_PAGES - 1):
                    break
                offset += _CANDIDATES  # every origin listed is busy here: look further down the line
            if not admitted:
                return await self._wait(view, local_wait)
            admitted.sort()  # best priority first, then the oldest (or forefront) seed
            # Shielded: a lease taken in Redis but cancelled on its way back would be held by no one
            # until it expired; recorded in ``_held``, ``aclose`` hands it back. Past the TTL there
            # is nothing left to protect, so a hung server cannot hold a shutdown for longer.
            taken = None
            with anyio.move_on_after(self.lease_ttl, shield=True):
                taken = await self._run(self._take, self.lease_ttl, *(origin for _, _, origin in admitted))
                if taken is not None:
                    if not self._held:
                        self._renewed_at = time.monotonic()
                    self._held.add(taken[0])
            if taken is not None:
                token, record, origin = taken
                try:
                    return Lease(_decode(record), token)
                except BadRecord as exc:
                    await self._set_aside(token, record, origin, exc)
        return Wait(0.0)  # other workers won every race (or their seeds were bad): look again at once

    async def _set_aside(self, token: str, record: str, origin: str, error: BadRecord) -> None:
        """Move a leased record that is no seed to the dead-letter list, and say so."""
        self._held.discard(token)
        await self._run(self._bury, token, json.dumps([record, str(error)], separators=(",", ":")), origin)
        self.bad_records += 1
        logger.warning("the Redis frontier at %s: %s; moved to %sdead", self.url, error, self._prefix)

    async def dead_letters(self) -> list[tuple[str, str]]:
        """The records moved aside because no seed could be read from them, each with why."""
        entries = await self._call(lambda: self._client.lrange(self._prefix + "dead", 0, -1))
        return [(str(record), str(why)) for record, why in map(json.loads, entries)]

    async def _wait(self, view: list[Any], local_wait: float) -> Wait:
        queued, delayed, leased = int(view[4]), int(view[5]), int(view[6])
        if queued and not (delayed or leased or view[0]) and math.isinf(local_wait):
            queued = int(await self._run(self._prune))  # the origins in line may be stale: without a queue
        if not (queued or delayed or leased):
            return Wait(None)
        waits = [self.poll, local_wait]
        waits += [w for w in map(_seconds_or_none, view[1:4]) if w is not None]
        # Capped by ``poll``: a seed another worker pushes, or a lease it settles, is seen soon.
        return Wait(max(0.0, min(waits)))

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        token = str(lease.token)
        self._held.discard(token)
        staged = self._staged.pop(token, [])
        if isinstance(outcome, Retry):
            retried = _encode(lease.seed.retried())
            await self._run(self._settle, token, "retry", outcome.delay or 0.0, retried, self._pause_after(outcome))
        elif isinstance(outcome, Fail):
            failure = json.dumps([_encode(lease.seed), _error_text(outcome.error)], separators=(",", ":"))
            await self._run(self._settle, token, "fail", 0, failure, self._pause_after(outcome))
        else:
            await self._run(self._settle, token, "done", 0, "", *(part for pair in staged for part in pair))
        if self._sink is not None:
            self._sink.settled(lease.seed, outcome)
            await self._write_ledger()
        await self._renew_if_due()
        return outcome

    def _pause_after(self, outcome: Retry | Fail) -> float:
        """Seconds ``host_limits`` pause an origin whose response caused ``outcome`` (0: none), as
        each worker's own gate does: the pause then holds for every worker."""
        limits, error = self.host_limits, outcome.error
        if limits is None or not isinstance(error, HttpStatusError) or error.status not in limits.pause_on:
            return 0.0
        wait = error.retry_after if error.retry_after is not None else seconds(limits.default_pause) or 0.0
        return min(wait, seconds(limits.max_pause) or math.inf)

    async def release(self, lease: Lease) -> None:
        token = str(lease.token)
        self._held.discard(token)
        self._staged.pop(token, None)
        await self._run(self._settle, token, "release", 0, "")

    async def pending(self) -> int:
        return int(await self._run(self._pending))

    # -- the Bloom seen set -----------------------------------------------------------------------

    def use_bloom(self, bloom: Bloom) -> None:
        if self._bloom is not None and self._bloom != bloom:
            raise ConfigError(f"this RedisFrontier already keeps a Bloom seen set of another size: {self._bloom}")
        if self._seen_used and self._bloom is None:
            raise ConfigError("choose a RedisFrontier's Bloom seen set before its first push or seen()")
        self._bloom = bloom
        self._bloom_checked = False

    def _seen_key(self, key: str) -> str:
        """What the push script checks for ``key``: the key itself, or its Bloom bits."""
        if self._bloom is None:
            return key
        part, offsets = self._bloom.offsets(key)
        return " ".join(map(str, (part, *offsets)))

    async def _seen_set_ready(self) -> None:
        """Before the first use of the seen set: check it is the kind (exact, or that Bloom filter)
        the crawl keeps, whichever worker started it."""
        if self._bloom_checked:
            return
        await self.open()
        with self._translated():
            if self._bloom is not None:
                await self._check_bloom()
            elif await self._client.hexists(self._prefix + "config", "bloom"):
                raise ConfigError(
                    f"the crawl {self.name!r} keeps a Bloom seen set: use .dedup(bloom=...) as its workers do"
                )
        self._seen_used = self._bloom_checked = True

    async def _check_bloom(self) -> None:
        """Record the filter's size for the crawl, or check it is the one every worker uses."""
        if self._bloom is None:
            return
        size = f"{self._bloom.capacity} {self._bloom.error_rate!r}"
        config = self._prefix + "config"
        if await self._client.exists(self._prefix + "seen"):
            raise ConfigError(f"the crawl {self.name!r} keeps an exact seen set: use .dedup() as its workers do")
        await self._client.hsetnx(config, "bloom", size)
        stored = str(await self._client.hget(config, "bloom"))
        if stored != size:
            raise ConfigError(
                f"the crawl {self.name!r} keeps a Bloom seen set of capacity and error rate {stored}, not {size}: "
                "every worker must use the same filter"
            )
        self._bloom_checked = True

    # -- items committed with their page's ack ----------------------------------------------------

    def dataset(self, model: type[T], *, stream: str | None = None) -> Dataset[T]:
        """A ``RedisDataset`` of ``model`` in this crawl, whose items are added with their page's ack.

        Fits ``Crawler(datasets=frontier.dataset)``: every model then gets its stream here.
        """
        from spire_core.dataset.redis import RedisDataset

        return RedisDataset(model, self, stream=stream)

    def holds(self, dataset: Dataset[Any]) -> bool:
        return place_in(self, dataset) is not None

    def stage(self, lease: Lease, items: StagedItems) -> None:
        self._staged[str(lease.token)] = documents(self, items)

    def check_place(self, place: str) -> None:
        if not place:
            raise ConfigError("a RedisDataset needs a non-empty stream name")

    async def append_rows(self, place: str, documents: list[str]) -> None:
        await self.open()
        key = self._prefix + "items:" + place
        with self._translated():
            async with self._client.pipeline(transaction=True) as pipe:
                for document in documents:
                    pipe.xadd(key, {"item": document})
                await pipe.execute()

    async def read_rows(self, place: str, after: str | None, count: int) -> list[tuple[str, str]]:
        await self.open()
        with self._translated():
            entries = await self._client.xrange(
                self._prefix + "items:" + place, "-" if after is None else "(" + after, "+", count=count
            )
        return [(str(position), str(fields["item"])) for position, fields in entries or () if fields]

    # -- beyond the protocol ----------------------------------------------------------------------

    async def status(self, *, hosts: int = 10) -> FleetStatus:
        """A snapshot of the crawl as every worker shares it, with the ``hosts`` origins next in line."""
        await self.open()
        p = self._prefix
        with self._translated():
            async with self._client.pipeline(transaction=True) as pipe:
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
                async with self._client.pipeline(transaction=False) as pipe:
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

    async def failures(self) -> list[tuple[Seed, str]]:
        """Seeds settled as failed for good, with their error as text (``"ValueError: boom"``)."""
        entries = await self._call(lambda: self._client.lrange(self._prefix + "failed", 0, -1))
        found: list[tuple[Seed, str]] = []
        for entry in entries:
            try:
                record, error = json.loads(entry)
                found.append((_decode(record), error))
            except (BadRecord, ValueError, TypeError) as exc:
                logger.warning("the Redis frontier at %s: a failed entry that cannot be read: %s", self.url, exc)
        return found

    async def renew(self) -> int:
        """Extend every lease this object holds to ``lease_ttl`` from now; return how many it still holds.

        A lease that expired before it was renewed is lost: another worker may be handling its seed.
        """
        self._renewed_at = time.monotonic()
        lost = await self._run(self._renew, self.lease_ttl, self.worker_id, *self._held)
        self._held.difference_update(lost)
        return len(self._held)

    async def _renew_if_due(self) -> None:
        if self._held and time.monotonic() - self._renewed_at >= self.lease_ttl / 3:
            await self.renew()

    @contextlib.asynccontextmanager
    async def keep_alive(self) -> AsyncIterator[RedisFrontier]:
        """Renew this object's leases every third of ``lease_ttl`` while the block runs.

        For handlers that may run longer than the TTL (a slow browser page), where no call to the
        frontier renews the leases in between:

            async with frontier.keep_alive():
                await crawler.arun(seeds)
        """

        async def renew_forever() -> None:
            while True:
                await self.renew()  # at once too: the heartbeat shows this worker live from the start
                await anyio.sleep(self.lease_ttl / 3)

        async with anyio.create_task_group() as tg:
            tg.start_soon(renew_forever)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()
