"""``RedisFrontier``: one crawl shared by many workers on many machines, kept in Redis.

    frontier = RedisFrontier("redis://queue.internal:6379/0", name="shop").dedup().retry(3)
    await Crawler(router, frontier=frontier).arun(["https://shop.example/"])

Every change of state is one Lua script that Redis runs atomically, on the server's clock, so workers
whose own clocks disagree still share one view of time. The keys of a crawl, under ``{name}:``:

    origins     ZSET   origin -> when it may next be leased (+inf while at its in-flight cap)
    q:<origin>  ZSET   order key + record, scored -priority; equal scores sort by the order key
    seen        SET    unique keys pushed with ``unique=True``
    delayed     ZSET   order key + record, scored by when the retry is due
    leases      ZSET   token -> expiry;  leased HASH token -> record
    inflight    HASH   origin -> leases out;  next HASH origin -> earliest next lease (spacing)
    config      HASH   cap, interval: the per-origin limits every worker honours
    failed      LIST   JSON ``[record, error text]``
    order, front, token, queued    counters

A record is ``priority TAB origin TAB JSON``: the scripts read only the priority and the origin; the
compact JSON of the other ``Seed`` fields is read only in Python.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import anyio

from spire_core.errors import ConfigError, ConnectError, SpireError, TimeoutError_
from spire_core.frontier.base import FrontierOps, Lease, PushResult, Ready, Wait, always_ready
from spire_core.outcome import Fail, Outcome, Retry, seconds
from spire_core.seed import Seed

try:
    import redis.asyncio as aioredis
    import redis.exceptions as redis_errors
    from redis.commands.core import AsyncScript
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("RedisFrontier needs the redis package: pip install 'spire[redis]'") from exc

__all__ = ["RedisFrontier"]

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

local function enqueue(record, order)
  local priority, origin = header(record)
  redis.call('ZADD', P .. 'q:' .. origin, -priority, order .. record)
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
  local cap = setting('cap')
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

# ARGV: prefix, forefront, unique, then (unique key, record) pairs. Returns 1 (added) or 0 per seed.
_PUSH = """
local now = clock()
local unique = ARGV[3] == '1'
local order = next_order
if ARGV[2] == '1' then order = front_order end
local added, touched = {}, {}
for i = 4, #ARGV, 2 do
  if unique and redis.call('SADD', P .. 'seen', ARGV[i]) == 0 then
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
# ready (in line, under its cap); returns {token, record}, or nil when another worker won them all.
_TAKE = """
local now = clock()
local cap, interval = setting('cap'), setting('interval')
for i = 3, #ARGV do
  local origin = ARGV[i]
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
      return {token, record}
    end
  end
end
return false
"""

# ARGV: prefix, token, kind (done, retry, fail, release), delay, record or failure.
# Returns 0 when the lease is no longer held (it expired and went back to the queue).
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
end
place(origin, now)
return 1
"""

# ARGV: prefix, ttl, tokens. Pushes each held lease's expiry to now + ttl; returns the tokens lost.
_RENEW = """
local expiry = clock() + tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV do
  if redis.call('HEXISTS', LEASED, ARGV[i]) == 1 then
    redis.call('ZADD', LEASES, 'XX', expiry, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
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
    try:
        document = json.dumps(fields, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"a seed in a RedisFrontier needs JSON user_data: {exc}", url=seed.url) from exc
    return f"{seed.priority}\t{seed.origin}\t{document}"


def _decode(record: str) -> Seed:
    priority, _, document = record.split("\t", 2)
    fields = json.loads(document)
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
        body=None if body is None else base64.b64decode(body),
        unique_key=fields.get("k", fields["u"]),
    )


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _redacted(url: str) -> str:
    """``url`` with its password hidden, fit for messages and logs."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
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
    - A lease expires ``lease_ttl`` seconds after it was taken or last renewed; any worker then hands
      its seed out again, first in its origin's queue. A worker renews its leases whenever it talks to
      the frontier a third of the TTL after the last renewal, and ``keep_alive()`` renews them on a
      timer for handlers that can run longer than the TTL.
    - ``lease`` says ``Wait(None)`` only when nothing is queued, delayed or leased by any worker;
      otherwise it waits at most ``poll`` seconds, so a worker notices seeds other workers push.

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
    ) -> None:
        #: The server's URL, its password hidden: what messages and ``repr`` show.
        self.url = _redacted(url)
        self.name = name
        self.lease_ttl = seconds(lease_ttl) or 0.0
        self.per_origin_in_flight = per_origin_in_flight
        self.per_origin_interval = seconds(per_origin_interval)
        self.poll = seconds(poll) or 0.0
        if not name:
            raise ConfigError("a RedisFrontier needs a non-empty name")
        if self.lease_ttl <= 0:
            raise ConfigError(f"lease_ttl must be positive, not {self.lease_ttl}")
        if per_origin_in_flight is not None and per_origin_in_flight < 1:
            raise ConfigError(f"per_origin_in_flight must be at least 1, not {per_origin_in_flight}")
        if self.per_origin_interval is not None and self.per_origin_interval < 0:
            raise ConfigError(f"per_origin_interval must be 0 or more, not {self.per_origin_interval}")
        if self.poll <= 0:
            raise ConfigError(f"poll must be positive, not {self.poll}")
        timeout = seconds(connect_timeout)
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
        #: Tokens of the leases this object handed out and has not settled: the ones it renews.
        self._held: set[str] = set()
        self._renewed_at = 0.0

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
        self._held.clear()
        self._closed = True
        with contextlib.suppress(redis_errors.RedisError):
            await self._client.aclose()

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Turn redis-py's exceptions into spire's, naming the server (never its password)."""
        try:
            yield
        except redis_errors.TimeoutError as exc:
            raise TimeoutError_(f"the Redis frontier at {self.url} timed out: {exc}") from exc
        except redis_errors.ConnectionError as exc:
            raise ConnectError(f"lost the Redis frontier at {self.url}: {exc}") from exc
        except redis_errors.RedisError as exc:
            raise SpireError(f"the Redis frontier at {self.url} failed: {exc}") from exc

    async def _run(self, script: AsyncScript, *args: str | float) -> Any:
        await self.open()
        with self._translated():
            return await script(args=[self._prefix, *args])

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
        self._held.clear()

    async def _store_limits(self) -> None:
        """Write the per-origin limits given to this object, for every worker's scripts to read."""
        for field, value in (("cap", self.per_origin_in_flight), ("interval", self.per_origin_interval)):
            if value is not None:
                await self._client.hset(self._prefix + "config", field, value)

    # -- the Frontier protocol --------------------------------------------------------------------

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        result = PushResult()
        batch = list(seeds)
        for start in range(0, len(batch), _PUSH_BATCH):
            chunk = batch[start : start + _PUSH_BATCH]
            args: list[str | float] = ["1" if forefront else "0", "1" if unique else "0"]
            for seed in chunk:
                args += (seed.unique_key if unique else "", _encode(seed))
            flags = await self._run(self._push, *args)
            for seed, added in zip(chunk, flags, strict=True):
                (result.added if added else result.duplicates).append(seed)
        return result

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        if not keys:
            return []
        await self.open()
        with self._translated():
            found = await self._client.smismember(self._prefix + "seen", list(keys))
        return [bool(flag) for flag in found]

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        if not keys:
            return []
        await self.open()
        with self._translated():
            async with self._client.pipeline(transaction=True) as pipe:
                for key in keys:
                    pipe.sadd(self._prefix + "seen", key)
                added = await pipe.execute()
        return [bool(flag) for flag in added]

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
                return self._wait(view, local_wait)
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
                token, record = taken
                return Lease(_decode(record), token)
        return Wait(0.0)  # other workers won every race: look again at once

    def _wait(self, view: list[Any], local_wait: float) -> Wait:
        queued, delayed, leased = int(view[4]), int(view[5]), int(view[6])
        if not (queued or delayed or leased):
            return Wait(None)
        waits = [self.poll, local_wait]
        waits += [w for w in map(_seconds_or_none, view[1:4]) if w is not None]
        # Capped by ``poll``: a seed another worker pushes, or a lease it settles, is seen soon.
        return Wait(max(0.0, min(waits)))

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        token = str(lease.token)
        self._held.discard(token)
        if isinstance(outcome, Retry):
            await self._run(self._settle, token, "retry", outcome.delay or 0.0, _encode(lease.seed.retried()))
        elif isinstance(outcome, Fail):
            failure = json.dumps([_encode(lease.seed), _error_text(outcome.error)], separators=(",", ":"))
            await self._run(self._settle, token, "fail", 0, failure)
        else:
            await self._run(self._settle, token, "done", 0, "")
        await self._renew_if_due()
        return outcome

    async def release(self, lease: Lease) -> None:
        token = str(lease.token)
        self._held.discard(token)
        await self._run(self._settle, token, "release", 0, "")

    async def pending(self) -> int:
        return int(await self._run(self._pending))

    # -- beyond the protocol ----------------------------------------------------------------------

    async def failures(self) -> list[tuple[Seed, str]]:
        """Seeds settled as failed for good, with their error as text (``"ValueError: boom"``)."""
        await self.open()
        with self._translated():
            entries = await self._client.lrange(self._prefix + "failed", 0, -1)
        return [(_decode(record), error) for record, error in map(json.loads, entries)]

    async def renew(self) -> int:
        """Extend every lease this object holds to ``lease_ttl`` from now; return how many it still holds.

        A lease that expired before it was renewed is lost: another worker may be handling its seed.
        """
        self._renewed_at = time.monotonic()
        if not self._held:
            return 0
        lost = await self._run(self._renew, self.lease_ttl, *self._held)
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
                await anyio.sleep(self.lease_ttl / 3)
                await self.renew()

        async with anyio.create_task_group() as tg:
            tg.start_soon(renew_forever)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()
