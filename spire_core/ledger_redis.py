"""The ledger of a Redis fleet: every worker writes it beside the ``RedisFrontier``, any of them reads it.

    frontier = RedisFrontier("redis://127.0.0.1:6379/0", name="shop")
    Crawler(router, frontier=frontier)                 # the ledger is on by default
    entry = await frontier.ledger.entry(url)

Each URL is one field of the hash ``NAME:ledger`` (a JSON object, its attempts inside), in the order
met in the list ``NAME:ledger:order``; redirect targets name their seed in ``NAME:ledger:hops``.
What a worker stages is written by one script right after the frontier's own script for the same
push or report: not in it, so a worker killed between the two leaves that push's lines or that
report's fate unwritten (the seed itself is safe in the frontier; a seed queued without its line
gets one, referrer unknown, when it is next settled). ``summary`` reads the whole hash: fine for a
report of a crawl, not for a dashboard of millions of URLs on every refresh.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from spire_core.ledger import Attempt, Entry, Fate, LedgerSummary
from spire_core.ledger_stores import Notes, key_of, origin_of
from spire_core.ledger_tally import Tally
from spire_core.outcome import Outcome, Retry

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from spire_core.frontier.base import PushResult
    from spire_core.revisit import PageNote
    from spire_core.seed import Seed
    from spire_core.session.record import RequestRecord
    from spire_core.skips import SkipReason

__all__ = ["RedisLedger", "RedisLedgerView"]

#: Runs one command against the server, translating its errors (``RedisFrontier._call``'s seam).
Call = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]

# One script writes a batch of staged operations, each ``[kind, key, value...]``.
_WRITE = """
local prefix = ARGV[1]
local ops = cjson.decode(ARGV[2])
local entries, order = prefix .. 'ledger', prefix .. 'ledger:order'
for _, op in ipairs(ops) do
  local kind, key = op[1], op[2]
  if kind == 'new' then
    if redis.call('HSETNX', entries, key, op[3]) == 1 then
      redis.call('RPUSH', order, key)
    end
  elseif kind == 'hop' then
    redis.call('HSETNX', prefix .. 'ledger:hops', key, op[3])
  else
    local found = redis.call('HGET', entries, key)
    if not found and kind == 'settle' then
      -- queued in the frontier but its line was lost with a worker: settled now, referrer unknown
      found = op[4]
      redis.call('RPUSH', order, key)
    end
    if not found then
      if kind == 'attempt' then
        redis.call('RPUSH', prefix .. 'ledger:loose', cjson.encode(op[3]))
      end
    else
      local entry = cjson.decode(found)
      if kind == 'attempt' then
        if type(entry.a) ~= 'table' or next(entry.a) == nil then entry.a = {} end
        table.insert(entry.a, op[3])
      elseif kind == 'tries' then
        entry.n = op[3]
      elseif kind == 'settle' then
        local fate = op[3]
        entry.f, entry.r, entry.d, entry.n, entry.at = fate.f, fate.r, fate.d, fate.n, fate.at
        if fate.s ~= cjson.null then entry.s = fate.s end
      elseif kind == 'overrule' and entry.f == 'kept' then
        entry.f, entry.r, entry.d = 'skipped', op[3].r, op[3].d
      end
      redis.call('HSET', entries, key, cjson.encode(entry))
    end
  end
end
return #ops
"""


def _line(
    seed_url: str, origin: str, fate: str, reason: str | None, referrer: str | None, depth: int, tag: str | None
) -> str:
    return json.dumps(
        {
            "u": seed_url,
            "o": origin,
            "f": fate,
            "r": reason,
            "d": None,
            "s": None,
            "p": referrer,
            "h": depth,
            "t": tag,
            "n": 0,
            "at": None,
            "a": [],
        },
        separators=(",", ":"),
    )


class RedisLedger:
    """The write side: staged here, written by one script after the frontier's push or report."""

    def __init__(self, client: Redis, prefix: str, call: Call) -> None:
        self._notes = Notes()
        self._ops: list[list[Any]] = []
        self._prefix = prefix
        self._call = call
        self._write = client.register_script(_WRITE)

    def found(self, seeds: Sequence[Seed], referrer: str | None) -> None:
        self._notes.found(seeds, referrer)

    def pushed(self, added: Sequence[Seed]) -> None:
        referrer = self._notes.referrer
        self._ops.extend(
            [
                "new",
                seed.unique_key,
                _line(seed.url, seed.origin, "queued", None, referrer(seed.unique_key), seed.depth, seed.tag),
            ]
            for seed in added
        )

    def rejected(self, result: PushResult) -> None:
        self._ops.extend(
            ["new", seed.unique_key, _line(seed.url, seed.origin, "skipped", reason, referrer, seed.depth, seed.tag)]
            for seed, reason, referrer in self._notes.forget(result)
        )

    def refused(self, skips: Iterable[tuple[str, SkipReason]], *, referrer: str | None, depth: int) -> None:
        self._ops.extend(
            ["new", key_of(url), _line(url, origin_of(url), "skipped", reason, referrer, depth, None)]
            for url, reason in self._notes.new_refusals(skips)
        )

    def left_out(self, seed: Seed, reason: SkipReason, detail: str | None = None) -> None:
        self._notes.left_out[seed.unique_key] = (str(reason), detail)
        # Settled kept already (a page held for its canonical page): the script makes it a skip.
        self._ops.append(["overrule", seed.unique_key, {"r": str(reason), "d": detail}])

    def read(self, seed: Seed, kind: str, detail: str | None = None) -> None:
        self._notes.read[seed.unique_key] = (kind, detail)

    def attempt(self, seed: Seed, record: RequestRecord, at: float) -> None:
        key = seed.unique_key
        attempt = [
            at,
            record.url,
            record.status,
            record.elapsed_ms,
            record.bytes,
            record.proxy,
            record.identity,
            record.outcome,
        ]
        self._ops.append(["attempt", key, attempt])
        if record.redirects:
            self._ops.append(["hop", record.url, key])
        self._notes.status[key] = record.status

    def page(self, seed: Seed, note: PageNote) -> None:
        """A fleet keeps no page states (a recrawl needs a memory or SQLite frontier): nothing to note."""

    def settled(self, seed: Seed, outcome: Outcome) -> None:
        fate, reason, detail, status, _ = self._notes.settled(seed, outcome)
        if isinstance(outcome, Retry):
            self._ops.append(["tries", seed.unique_key, seed.attempt + 1])
            return
        change = {"f": fate.value, "r": reason, "d": detail, "s": status, "n": seed.attempt + 1, "at": time.time()}
        lost = _line(seed.url, seed.origin, "queued", None, None, seed.depth, seed.tag)
        self._ops.append(["settle", seed.unique_key, change, lost])
        if fate is Fate.READ:
            self._ops.append(["hop", seed.url, seed.unique_key])  # asked for by its URL, its line answers

    async def flush(self) -> None:
        """Write what is staged (one script); called by the frontier after its own."""
        ops, self._ops = self._ops, []
        if ops:
            encoded = json.dumps(ops, separators=(",", ":"))
            await self._call(lambda: self._write(args=[self._prefix, encoded]))


class RedisLedgerView:
    """The read side (``LedgerView``) of a fleet's ledger, from any process that reaches the server."""

    def __init__(self, client: Redis, prefix: str, call: Call) -> None:
        self._client = client
        self._prefix = prefix
        self._call = call

    async def entry(self, url: str) -> Entry | None:
        key = key_of(url)
        entries = self._prefix + "ledger"
        found = await self._call(lambda: self._client.hmget(entries, [key, url]))
        line = found[0] or found[1]
        if line is None:
            seed = await self._call(lambda: self._client.hmget(self._prefix + "ledger:hops", [url, key]))
            owner = seed[0] or seed[1]
            if owner is not None:
                line = await self._call(lambda: self._client.hget(entries, owner))
                key = owner
        return None if line is None else _entry(key, line, attempts=True)

    async def entries(
        self,
        *,
        fate: Fate | None = None,
        reason: str | None = None,
        origin: str | None = None,
        limit: int = 100,
        offset: int = 0,
        attempts: bool = False,
        changed: bool = False,
        change: str | None = None,
    ) -> Sequence[Entry]:
        found: list[Entry] = []
        if changed or change is not None:
            return found  # a fleet keeps no page states, so no line has a change
        skipped, start = 0, 0
        while len(found) < limit:
            keys = await self._call(partial(self._client.lrange, self._prefix + "ledger:order", start, start + 999))
            if not keys:
                break
            start += len(keys)
            lines = await self._call(partial(self._client.hmget, self._prefix + "ledger", keys))
            for key, line in zip(keys, lines, strict=True):
                if line is None:
                    continue
                entry = _entry(key, line, attempts=attempts)
                if (fate is not None and entry.fate is not fate) or (reason is not None and entry.reason != reason):
                    continue
                if origin is not None and json.loads(line)["o"] != origin:
                    continue
                if skipped < offset:
                    skipped += 1
                    continue
                found.append(entry)
                if len(found) >= limit:
                    break
        return found

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        tally = Tally(samples)
        cursor = 0
        while True:
            cursor, page = await self._call(partial(self._client.hscan, self._prefix + "ledger", cursor, count=1000))
            for key, line in page.items():
                data = json.loads(line)
                entry = _entry(key, line, attempts=True)
                tally.url(entry.url, data["o"], entry.fate, entry.reason, entry.referrer, entry.detail)
                if entry.fate is Fate.KEPT and data.get("at") is not None:
                    tally.kept_at(float(data["at"]))
                for attempt in entry.attempts:
                    tally.request(origin_of(attempt.url), attempt)
            if cursor == 0:
                break
        loose = await self._call(lambda: self._client.lrange(self._prefix + "ledger:loose", 0, -1))
        for line in loose:
            attempt = _attempt(json.loads(line))
            tally.request(origin_of(attempt.url), attempt)
        return tally.summary()


def _attempt(values: Sequence[Any]) -> Attempt:
    at, url, status, elapsed_ms, size, proxy, identity, outcome = values
    return Attempt(
        float(at), url, None if status is None else int(status), int(elapsed_ms), int(size), proxy, identity, outcome
    )


def _entry(key: str, line: str, *, attempts: bool) -> Entry:
    data = json.loads(line)
    found = data.get("a") or []
    status = data.get("s")
    return Entry(
        url=data["u"],
        unique_key=key,
        fate=Fate(data["f"]),
        reason=data.get("r"),
        detail=data.get("d"),
        status=None if status is None else int(status),
        referrer=data.get("p"),
        depth=int(data.get("h") or 0),
        tag=data.get("t"),
        attempts=tuple(_attempt(values) for values in found) if attempts and isinstance(found, list) else (),
        tries=int(data.get("n") or 0),
    )
