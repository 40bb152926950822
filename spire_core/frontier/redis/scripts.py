"""The Lua scripts behind ``RedisFrontier``: every change of a crawl's state is one of them, run atomically.

Redis runs each script on its own clock, so workers whose clocks disagree still share one view of
time. The keys of a crawl, under ``{name}:``:

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

Every script's first argument is the crawl's key prefix (``{name}:``); the prelude, shared by all of
them, reads it into ``P``.
"""

from __future__ import annotations

from spire_core.frontier.redis.connection import AsyncScript, Client

__all__ = ["Scripts"]

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


class Scripts:
    """Every script of a crawl, registered with ``client`` (each is sent once, then run by its digest)."""

    def __init__(self, client: Client) -> None:
        register = client.register_script
        self.push: AsyncScript = register(_PRELUDE + _PUSH)
        self.scan: AsyncScript = register(_PRELUDE + _SCAN)
        self.take: AsyncScript = register(_PRELUDE + _TAKE)
        self.settle: AsyncScript = register(_PRELUDE + _SETTLE)
        self.renew: AsyncScript = register(_PRELUDE + _RENEW)
        self.pending: AsyncScript = register(_PRELUDE + _PENDING)
        self.bloom_seen: AsyncScript = register(_PRELUDE + _BLOOM_SEEN)
        self.bloom_claim: AsyncScript = register(_PRELUDE + _BLOOM_CLAIM)
        self.hold: AsyncScript = register(_PRELUDE + _HOLD)
        self.unhold: AsyncScript = register(_PRELUDE + _UNHOLD)
        self.bury: AsyncScript = register(_PRELUDE + _BURY)
        self.prune: AsyncScript = register(_PRELUDE + _PRUNE)
