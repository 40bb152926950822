"""``SqliteFrontier``: the memory frontier's semantics in one SQLite file that survives ``kill -9``.

    async with SqliteFrontier("crawl.db") as frontier:
        await Crawler(router, frontier=frontier.dedup()).arun([Seed(start)])

Opening a file that holds a frontier resumes it: the leases a dead crawl left are queued again at
once, retry delays keep their wall-clock due time, and the seen set still answers. ``fresh=True``
starts over. Every push, report and release is committed before it returns.
"""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from pydantic import BaseModel

from spire_core.dataset.base import Dataset, StoredDataset
from spire_core.dataset.sqlite import table_name
from spire_core.dataset.store import StoreStorage
from spire_core.errors import ConfigError, SpireError
from spire_core.frontier.base import Lease, PushResult, Ready, Wait, always_ready
from spire_core.frontier.bloom import Bloom, stable_hash
from spire_core.frontier.facades import FrontierOps
from spire_core.frontier.items import StagedItems, documents, place_in
from spire_core.ledger import LedgerMode, LedgerSink, LedgerView
from spire_core.ledger_sqlite import LEDGER_TABLES, SqliteLedger, SqliteLedgerView
from spire_core.ledger_stores import LightLedger
from spire_core.outcome import Fail, Outcome, Retry
from spire_core.recrawl import Generation, Recrawl
from spire_core.revisit import Revisit
from spire_core.seed import Seed
from spire_core.skips import SkipReason

__all__ = ["SCHEMA_VERSION", "SqliteFrontier"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

#: The frontier schema this module reads and writes, kept in ``PRAGMA user_version``.
SCHEMA_VERSION = 3
# "SPIR" in ``PRAGMA application_id``: tells a spire frontier from any other SQLite file.
_APPLICATION_ID = 0x53504952
# How long opening waits for another connection's lock before saying the file is in use.
_BUSY_TIMEOUT = 1.0
#: The most rows a call writes or reads on the event loop. A page's lease, its report (its items and
#: ledger lines) and the seen check of its links take 0.1 to 0.3 ms of SQL: less than handing them to
#: a worker thread costs (about 160 us of CPU for the hand-off alone, measured), and the crawl waits
#: for them either way. A larger call (a sitemap's pushes) goes to the worker thread.
_ON_LOOP_ROWS = 1000
#: Calls between two checkpoints of the write-ahead log, the file's one fsync, which the worker
#: thread runs (SQLite's own would run inside whichever commit crossed its size, on the loop). A
#: page's calls add about 15 KB to the log, so it stays near SQLite's own bound of 4 MB.
_CHECKPOINT_EVERY = 250
# Keys per ``IN (...)`` query: well under SQLite's host-parameter limit on every build.
_CHUNK = 500
# With a Bloom seen set, new keys are logged in each push's transaction and folded into the stored
# filter every this many keys (and on close): a push never rewrites the whole filter.
_BLOOM_CHECKPOINT = 100_000

# The files (device, inode) a frontier of this process holds: a second opener is refused before it
# touches the file (closing its descriptor would drop the first one's SQLite locks on it).
_HELD: set[tuple[int, int]] = set()

# Row states. A seed settled as done is deleted; its unique key stays in ``seen``.
_QUEUED, _DELAYED, _LEASED, _FAILED = 0, 1, 2, 3

# ``rank`` orders seeds of one priority: ascending pushes count up from 0, forefront pushes
# (and released leases) count down from -1, so the newest forefront seed goes first.
_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    state INTEGER NOT NULL,
    origin TEXT NOT NULL,
    rank INTEGER NOT NULL,
    not_before REAL,
    url TEXT NOT NULL,
    tag TEXT,
    method TEXT NOT NULL,
    depth INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    user_data TEXT,
    headers TEXT,
    body BLOB,
    unique_key TEXT NOT NULL,
    error TEXT,
    strategy TEXT,
    revisit TEXT
);
CREATE INDEX queue_next ON queue (origin, priority DESC, rank) WHERE state = {_QUEUED};
CREATE INDEX queue_due ON queue (not_before) WHERE state = {_DELAYED};
CREATE TABLE seen (key TEXT PRIMARY KEY) WITHOUT ROWID;
PRAGMA application_id = {_APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""
_SEED_COLUMNS = "url, tag, method, depth, priority, attempt, user_data, headers, body, unique_key, strategy, revisit"
_INSERT = (
    f"INSERT INTO queue (state, origin, rank, {_SEED_COLUMNS})"
    f" VALUES ({_QUEUED}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Each schema before this one, and what brings a file of it to the next.
_MIGRATIONS = {1: "ALTER TABLE queue ADD COLUMN strategy TEXT", 2: "ALTER TABLE queue ADD COLUMN revisit TEXT"}
# The best two queued seeds of an origin: the one to lease, and the head that stays behind.
_NEXT_TWO = (
    f"SELECT id, priority, rank, {_SEED_COLUMNS} FROM queue"
    f" WHERE origin = ? AND state = {_QUEUED} ORDER BY priority DESC, rank LIMIT 2"
)

# Where a URL's authority ends, for the special schemes (http, https): the origin depends on no later character.
_AUTHORITY_END = re.compile(r"[/?#\\]")
# Origins remembered per frontier, by the URL's text up to the end of its authority.
_ORIGIN_CACHE_SIZE = 4096

# An origin's best queued seed as (-priority, rank): lower sorts first, like memory.py's heap.
_Head = tuple[int, int]


def _origin(seed: Seed, cache: dict[str, str]) -> str:
    """``seed.origin``, parsed once per scheme and authority: parsing every URL costs more than the insert."""
    url = seed.url
    scheme_end = url.find("://")
    if scheme_end < 0:
        return seed.origin
    end = _AUTHORITY_END.search(url, scheme_end + 3)
    key = url if end is None else url[: end.start()]
    found = cache.get(key)
    if found is None:
        if len(cache) >= _ORIGIN_CACHE_SIZE:
            cache.clear()
        found = cache[key] = seed.origin
    return found


_JSON = json.JSONEncoder(separators=(",", ":"))


def _dump(value: Mapping[str, Any] | None) -> str | None:
    if value is None:
        return None
    return _JSON.encode(value if isinstance(value, dict) else dict(value))


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _seed_fields(seed: Seed) -> tuple[Any, ...]:
    """``seed``'s values for ``_SEED_COLUMNS``; ``TypeError`` or ``ValueError`` when its user data or
    headers are not JSON."""
    return (
        seed.url,
        seed.tag,
        seed.method,
        seed.depth,
        seed.priority,
        seed.attempt,
        _dump(seed.user_data),
        _dump(seed.headers),
        seed.body,
        seed.unique_key,
        seed.strategy,
        None if seed.revisit is None else _JSON.encode(seed.revisit.as_json()),
    )


def _seed_of(row: Sequence[Any]) -> Seed:
    url, tag, method, depth, priority, attempt, user_data, headers, body, key, strategy, revisit = row
    return Seed(
        url,
        tag=tag,
        method=method,
        depth=depth,
        priority=priority,
        attempt=attempt,
        user_data=_load(user_data),
        headers=_load(headers),
        body=body,
        unique_key=key,
        strategy=strategy,
        revisit=None if revisit is None else Revisit.from_json(json.loads(revisit)),
    )


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class SqliteFrontier(FrontierOps):
    """Seeds in one SQLite file, with the same semantics as ``MemoryFrontier``; resumable.

    The queue rows and the seen set of unique pushes share the file and are written in one
    transaction, so a key is never recorded as seen without its seed queued. In memory it keeps
    only an index of the origins that have queued seeds (with each one's best seed), so a lease
    reads one origin's queue, never the whole table. One crawl owns the file: it stays locked
    while open, and a second opener gets a ``ConfigError``.

    Seeds come back with every field as pushed. ``user_data`` and ``headers`` are stored as JSON
    (so a tuple comes back as a list), and a seed whose ``user_data`` is not JSON is rejected with
    the reason ``"unserializable"``. Retry delays are kept as wall-clock times, so they run on
    across a restart. ``failures()`` lists the seeds that failed for good.

        frontier = SqliteFrontier("crawl.db").dedup().retry(3)
    """

    def __init__(self, path: str | os.PathLike[str], *, fresh: bool = False) -> None:
        self.path = os.fspath(path)
        self.fresh = fresh
        # One connection, used one call at a time: small calls on the event loop, large ones (and
        # opening, closing, checkpoints) in a worker thread; the lock makes each operation's SQL and
        # its in-memory index change one step, and keeps the index still while ``lease`` reads it.
        self._limiter = anyio.CapacityLimiter(1)
        self._since_checkpoint = 0  # calls run through ``_sql`` since the last checkpoint
        self._lock = anyio.Lock()
        self._db: sqlite3.Connection | None = None
        self._closed = False
        self._heads: dict[str, _Head] = {}
        # ``(head, origin)`` of every origin in ``_heads``, best first, so a lease asks ``ready`` about
        # origins in order instead of scanning them all. An entry that no longer matches ``_heads`` is
        # stale, and dropped when it comes to the top.
        self._heap: list[tuple[_Head, str]] = []
        self._leased: set[int] = set()
        self._queued = 0
        self._delayed = 0
        self._due: float | None = None  # wall-clock time the first delayed seed is due
        self._order = 0
        self._front = -1
        self._origins: dict[str, str] = {}
        #: Items staged per leased seed id, inserted in the transaction that reports it done.
        self._staged: dict[int, list[tuple[str, str]]] = {}
        self._tables: set[str] = set()
        self._bloom: Bloom | None = None
        self._filter: Any = None  # the rbloom filter of a Bloom seen set, loaded on open
        self._bloom_log = 0
        self._bloom_only = False
        #: The ledger it keeps (``open_ledger``): written in its transactions when it is ``full``.
        self.ledger: LedgerView | None = None
        self._sink: LedgerSink | None = None
        self._ledger_rows: SqliteLedger | None = None
        self._ledger_ready = False
        self._lock_fd: int | None = None

    def __repr__(self) -> str:
        return (
            f"SqliteFrontier({self.path!r}, queued={self._queued}, delayed={self._delayed}, leased={len(self._leased)})"
        )

    async def __aenter__(self) -> SqliteFrontier:
        async with self._lock:
            await self._opened()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- the protocol ---------------------------------------------------------------------------

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        batch = list(seeds)
        async with self._lock:
            await self._opened()
            if not batch:
                return PushResult()
            return await self._sql(len(batch), self._push, batch, forefront, unique)

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        async with self._lock:
            await self._opened()
            known = await self._sql(len(keys), self._known, list(keys))
        return [key in known for key in keys]

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        async with self._lock:
            await self._opened()
            return await self._sql(len(keys), self._claim, list(keys))

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait:
        async with self._lock:
            await self._opened()
            if self._due is not None and self._due <= time.time():
                await self._run(self._promote_due)
            while True:
                # ``ready`` is the crawler's and runs here, on the event loop, never in a worker.
                best_origin, wait = self._first_ready(ready)
                if best_origin is None:
                    break
                taken = await self._sql(1, self._take, best_origin)
                if taken is not None:
                    return Lease(taken[1], taken[0])
            if self._due is not None:
                wait = min(wait, max(0.0, self._due - time.time()))
            return Wait(None if math.isinf(wait) else wait)

    def _first_ready(self, ready: Ready) -> tuple[str | None, float]:
        """The best origin ``ready`` admits now, asking only the origins ahead of it; else how long to wait."""
        heap, heads = self._heap, self._heads
        refused: list[tuple[_Head, str]] = []  # back in the heap after this lease
        wait = math.inf
        found: str | None = None
        while heap:
            entry = heapq.heappop(heap)
            head, origin = entry
            if heads.get(origin) != head:
                continue  # stale: the origin has a newer entry, or no queued seed
            until = ready(origin)
            refused.append(entry)  # kept even when admitted: ``_take`` settles its head
            if until <= 0:
                found = origin
                break
            wait = min(wait, until)
        for entry in refused:
            heapq.heappush(heap, entry)
        return found, wait

    def _set_head(self, origin: str, head: _Head) -> None:
        self._heads[origin] = head
        heapq.heappush(self._heap, (head, origin))

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        async with self._lock:
            await self._opened()
            staged = self._staged.pop(lease.token, [])
            if lease.token in self._leased:
                await self._sql(1 + len(staged), self._settle, lease.token, lease.seed, outcome, staged)
        return outcome

    async def release(self, lease: Lease) -> None:
        async with self._lock:
            await self._opened()
            self._staged.pop(lease.token, None)
            if lease.token in self._leased:
                await self._sql(1, self._requeue, lease.token, lease.seed)

    async def pending(self) -> int:
        async with self._lock:
            await self._opened()
            return self._queued + self._delayed + len(self._leased)

    # -- the Bloom seen set -----------------------------------------------------------------------

    def use_bloom(self, bloom: Bloom) -> None:
        """Keep the seen set as a Bloom filter: in memory, stored in the file (see ``Dedup``)."""
        if self._bloom is not None and self._bloom != bloom:
            raise ConfigError(f"this SqliteFrontier already keeps a Bloom seen set of another size: {self._bloom}")
        self._bloom = bloom

    def _load_bloom(self, db: sqlite3.Connection) -> None:
        """Load the stored filter and the keys logged since it was stored; a file whose seen set was
        exact so far has its keys moved into a new filter."""
        if self._bloom is None:
            # Its seen keys went into the filter: unique pushes without it would take every URL for new.
            self._bloom_only = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'bloom'").fetchone() is not None
            return
        size = f"{self._bloom.capacity} {self._bloom.error_rate!r}"
        with _transaction(db):
            db.execute("CREATE TABLE IF NOT EXISTS bloom (id INTEGER PRIMARY KEY CHECK (id = 0), size TEXT, bits BLOB)")
            db.execute("CREATE TABLE IF NOT EXISTS bloom_log (key TEXT NOT NULL)")
            row = db.execute("SELECT size, bits FROM bloom").fetchone()
        if row is not None and row[0] != size:
            raise ConfigError(f"{self.path!r} keeps a Bloom seen set of capacity and error rate {row[0]}, not {size}")
        empty = self._bloom.in_memory(stable=True)
        self._filter = empty if row is None else type(empty).load_bytes(row[1], stable_hash)
        logged = db.execute("SELECT key FROM bloom_log").fetchall()
        exact = db.execute("SELECT key FROM seen").fetchall() if row is None else []
        for (key,) in (*logged, *exact):
            self._filter.add(key)
        self._bloom_log = len(logged) + len(exact)

    def _checkpoint_bloom(self) -> None:
        """Store the filter and empty the log, in one transaction."""
        db = self._conn()
        bloom = self._bloom
        if bloom is None or self._filter is None:
            return
        with _transaction(db):
            db.execute(
                "INSERT OR REPLACE INTO bloom (id, size, bits) VALUES (0, ?, ?)",
                (f"{bloom.capacity} {bloom.error_rate!r}", self._filter.save_bytes()),
            )
            db.execute("DELETE FROM bloom_log")
            db.execute("DELETE FROM seen")  # the filter holds them now
        self._bloom_log = 0

    # -- items committed with their page's report ------------------------------------------------

    def dataset(self, model: type[M], *, table: str | None = None) -> Dataset[M]:
        """A dataset of ``model`` in a table of this file, whose items are inserted in the same
        transaction that reports their page done (exactly once across a crash).

        Fits ``Crawler(datasets=frontier.dataset)``. The table (default: the model's name in snake
        case) has a ``SqliteDataset``'s layout, so once the crawl has closed the file,
        ``SqliteDataset(model, path)`` reads it too.
        """
        return StoredDataset(model, StoreStorage(self, table if table is not None else table_name(model)))

    def holds(self, dataset: Dataset[Any]) -> bool:
        return place_in(self, dataset) is not None

    def stage(self, lease: Lease, items: StagedItems) -> None:
        self._staged[lease.token] = documents(self, items)

    def check_place(self, place: str) -> None:
        taken = ("queue", "seen", "bloom", "bloom_log", *LEDGER_TABLES)
        if not place or place.lower().startswith("sqlite_") or place in taken:
            raise ConfigError(f"{place!r} cannot name a dataset table in a frontier file (empty, or taken)")

    async def append_rows(self, place: str, documents: list[str]) -> None:
        async with self._lock:
            await self._opened()
            await self._sql(len(documents), self._append, [(place, document) for document in documents])

    async def read_rows(self, place: str, after: str | None, count: int) -> list[tuple[str, str]]:
        async with self._lock:
            await self._opened()
            return await self._run(self._read, place, int(after or 0), count)

    async def failures(self) -> list[tuple[Seed, str]]:
        """The seeds settled as failed for good, in the order they failed, each with its error as text."""
        async with self._lock:
            await self._opened()
            return await self._run(self._failures)

    async def aclose(self) -> None:
        """Close the file. Leases still out stay recorded, and are queued again when it is reopened."""
        async with self._lock:
            self._closed = True
            if self._db is not None and self._bloom_log:
                with anyio.CancelScope(shield=True):
                    await self._run(self._checkpoint_bloom)
            if self._db is not None and self._ledger_rows is not None:
                with anyio.CancelScope(shield=True):
                    await self._run(self._write_ledger)
            if isinstance(self.ledger, SqliteLedgerView):
                with anyio.CancelScope(shield=True):
                    await self.ledger.aclose()
            db, self._db = self._db, None
            if db is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(db.close, limiter=self._limiter)
            self._unlock()

    # -- the ledger -------------------------------------------------------------------------------

    def open_ledger(self, mode: LedgerMode) -> LedgerSink:
        """Keep the crawl's ledger (``KeepsLedger``): ``full`` in tables of this file, written in the
        transactions that queue and settle the seeds they record; ``light`` in memory."""
        if self._sink is not None:
            return self._sink
        if mode == "light":
            light = LightLedger()
            self._sink, self.ledger = light, light
            return light
        self._ledger_rows = rows = SqliteLedger()
        self._sink, self.ledger = rows, SqliteLedgerView(self.path)
        return rows

    async def describe(self, title: str, settings: Mapping[str, str]) -> None:
        """Keep the crawl's ``title`` and ``settings`` beside its ledger (``KeepsAbout``), for
        ``spire report --state`` to show; a file with the light ledger, or none, keeps nothing."""
        if self._ledger_rows is None:
            return
        async with self._lock:
            db = await self._opened()

            def write() -> None:
                with _transaction(db):
                    SqliteLedger.describe(db, title, settings)

            await self._run(write)

    # -- page states for recrawls (``Recrawlable``) ---------------------------------------------------

    def _pages(self) -> SqliteLedger:
        if self._ledger_rows is None:
            raise ConfigError(
                "a crawl that keeps page states (recrawl=) needs the full ledger: leave Crawler(ledger=) at 'full'"
            )
        return self._ledger_rows

    def keep_pages(self, policy: Recrawl) -> None:
        self._pages().keep_pages(policy)

    async def generation(self) -> Generation:
        async with self._lock:
            await self._opened()
            ledger = self._pages()
            return Generation(ledger.generation, ledger.finished)

    async def begin_recrawl(self) -> int:
        async with self._lock:
            await self._opened()
            return await self._run(self._begin)

    async def finish_generation(self) -> None:
        async with self._lock:
            await self._opened()
            ledger = self._pages()
            db = self._conn()

            def finish() -> None:
                with _transaction(db):
                    ledger.finish(db)

            await self._run(finish)

    def lastmod_trust(self) -> Mapping[str, tuple[int, bool]]:
        return dict(self._pages().hosts)

    def _begin(self) -> int:
        """The next generation, in one transaction: what failed queued again afresh, the seen set started
        over (what is queued, and every page), each page due queued as a revisit."""
        db = self._conn()
        ledger = self._pages()
        with _transaction(db):
            failed = db.execute(f"SELECT id FROM queue WHERE state = {_FAILED} ORDER BY rank").fetchall()
            db.executemany(
                f"UPDATE queue SET state = {_QUEUED}, attempt = 0, error = NULL, rank = ? WHERE id = ?",
                [(self._next_order(), seed_id) for (seed_id,) in failed],
            )
            revisits = [_seed_of(row) for row in ledger.begin(db)]
            keys = [key for (key,) in db.execute("SELECT unique_key FROM queue UNION SELECT key FROM ledger_pages")]
            db.execute("DELETE FROM seen")
            if self._filter is not None:
                db.execute("DELETE FROM bloom")
                db.execute("DELETE FROM bloom_log")
            seen_table = "seen" if self._filter is None else "bloom_log"
            db.executemany(f"INSERT OR IGNORE INTO {seen_table} (key) VALUES (?)", [(key,) for key in keys])
            db.executemany(_INSERT, [(seed.origin, self._next_order(), *_seed_fields(seed)) for seed in revisits])
            ledger.pushed(revisits)
            self._flush_ledger(db)
        ledger.begun(db)
        if self._filter is not None and self._bloom is not None:
            self._filter = self._bloom.in_memory(stable=True)
            for key in keys:
                self._filter.add(key)
            self._bloom_log = len(keys)
        self._restore(db)
        return len(revisits)

    def _create_ledger(self, db: sqlite3.Connection) -> None:
        """Create the ledger's tables; a file whose queue had no ledger gets a line per queued seed."""
        with _transaction(db):
            new = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger'").fetchone() is None
            SqliteLedger.create(db)
            if new:
                db.execute(
                    "INSERT OR IGNORE INTO ledger (key, url, origin, fate, depth, tag)"
                    f" SELECT unique_key, url, origin, CASE state WHEN {_FAILED} THEN 'failed' ELSE 'queued' END,"
                    " depth, tag FROM queue ORDER BY id"
                )
            if self._ledger_rows is not None:
                self._ledger_rows.read_state(db)
        self._ledger_ready = True

    def _flush_ledger(self, db: sqlite3.Connection) -> None:
        if self._ledger_rows is not None:
            self._ledger_rows.flush(db)

    def _write_ledger(self) -> None:
        db = self._conn()
        with _transaction(db):
            self._flush_ledger(db)

    # -- running SQL ------------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn``'s SQL in the worker thread."""
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise SpireError(f"frontier file {self.path!r}: {exc}") from exc

    async def _sql(self, rows: int, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn``'s SQL, a call of about ``rows`` rows besides the ledger lines it may write: on the
        event loop when they are few (see ``_ON_LOOP_ROWS``), else in the worker thread; every
        ``_CHECKPOINT_EVERY`` calls, checkpoint the write-ahead log in the worker thread."""
        if self._ledger_rows is not None:
            rows += self._ledger_rows.pending
        if rows > _ON_LOOP_ROWS:
            result = await self._run(fn, *args)
        else:
            try:
                result = fn(*args)
            except sqlite3.Error as exc:
                raise SpireError(f"frontier file {self.path!r}: {exc}") from exc
        self._since_checkpoint += 1
        if self._since_checkpoint >= _CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            await self._run(self._checkpoint)
        return result

    def _checkpoint(self) -> None:
        self._conn().execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def _opened(self) -> sqlite3.Connection:
        if self._db is None:
            if self._closed:
                raise SpireError(f"the frontier {self.path!r} is closed")
            self._db = await anyio.to_thread.run_sync(self._open, limiter=self._limiter)
        elif self._bloom is not None and self._filter is None:
            await self._run(self._load_bloom, self._db)  # chosen after the file was opened
        if self._ledger_rows is not None and not self._ledger_ready:
            await self._run(self._create_ledger, self._db)
        return self._db

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise SpireError(f"the frontier {self.path!r} is closed")
        return self._db

    # -- opening (in a worker thread) -------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        self._lock_file()
        try:
            db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            self._unlock()
            raise ConfigError(f"cannot open the frontier file {self.path!r}: {exc}") from None
        try:
            self._prepare(db)
            self._restore(db)
            self._load_bloom(db)
        except sqlite3.OperationalError as exc:
            db.close()
            self._unlock()
            if exc.sqlite_errorname == "SQLITE_BUSY":
                raise ConfigError(f"the frontier file {self.path!r} is in use by another crawl") from None
            raise ConfigError(f"cannot use the frontier file {self.path!r}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            db.close()
            self._unlock()
            raise ConfigError(f"{self.path!r} is not a spire frontier ({exc})") from None
        except BaseException:
            db.close()
            self._unlock()
            raise
        return db

    def _lock_file(self) -> None:
        """Hold the file for this crawl: an advisory lock a second crawl's open fails on.

        Not SQLite's exclusive locking mode: that would keep out the readers WAL lets in beside the
        writer (``spire why`` on a running crawl).
        """
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"cannot open the frontier file {self.path!r}: {exc.strerror}") from None
        stat = os.fstat(fd)
        held = (stat.st_dev, stat.st_ino)
        if held in _HELD:
            os.close(fd)  # no SQLite connection of this crawl is on the file yet: nothing of it is dropped
            raise ConfigError(f"the frontier file {self.path!r} is in use by another crawl")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ConfigError(f"the frontier file {self.path!r} is in use by another crawl") from None
        _HELD.add(held)
        self._lock_fd = fd

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            stat = os.fstat(fd)
            _HELD.discard((stat.st_dev, stat.st_ino))
            os.close(fd)

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Check the file is a frontier this spire can read (or empty), then lock it and set it up."""
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        objects = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        ours = application_id == _APPLICATION_ID
        if not ours and (objects or version or application_id):
            raise ConfigError(f"{self.path!r} is an SQLite file that is not a spire frontier; choose another path")
        if ours and version > SCHEMA_VERSION and not self.fresh:
            raise ConfigError(
                f"{self.path!r} holds a frontier of schema {version}, written by a newer spire; "
                f"this one reads schema {SCHEMA_VERSION} (or pass fresh=True to start over)"
            )
        db.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode: a commit survives the process being killed, not a power cut.
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run off the loop: see ``_sql``
        if ours and self.fresh:
            with _transaction(db):
                tables = db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                ).fetchall()
                for (name,) in tables:
                    db.execute(f'DROP TABLE "{name}"')
                db.execute("PRAGMA user_version = 0")
            version = 0
        if version == 0:
            db.executescript(_SCHEMA)
        elif version < SCHEMA_VERSION:
            with _transaction(db):
                for step in range(version, SCHEMA_VERSION):
                    db.execute(_MIGRATIONS[step])
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _restore(self, db: sqlite3.Connection) -> None:
        """Rebuild the in-memory index; queue again, ahead, the leases a dead crawl left."""
        with _transaction(db):
            low, high = db.execute("SELECT min(rank), max(rank) FROM queue").fetchone()
            self._front = min(low or 0, 0) - 1
            self._order = max(high if high is not None else -1, -1) + 1
            leased = db.execute(f"SELECT id FROM queue WHERE state = {_LEASED} ORDER BY rank DESC").fetchall()
            if leased and db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger_attempts'").fetchone():
                SqliteLedger.interrupted(db, f"state = {_LEASED}")
            db.executemany(
                f"UPDATE queue SET state = {_QUEUED}, rank = ? WHERE id = ?",
                [(self._next_front(), seed_id) for (seed_id,) in leased],
            )
            counts = dict(db.execute("SELECT state, count(*) FROM queue GROUP BY state").fetchall())
            origins = db.execute(f"SELECT DISTINCT origin FROM queue WHERE state = {_QUEUED}").fetchall()
            heads = {origin: self._head_of(db, origin) for (origin,) in origins}
            self._due = db.execute(f"SELECT min(not_before) FROM queue WHERE state = {_DELAYED}").fetchone()[0]
        self._heads = {origin: head for origin, head in heads.items() if head is not None}
        self._heap = [(head, origin) for origin, head in self._heads.items()]
        heapq.heapify(self._heap)
        self._queued = counts.get(_QUEUED, 0)
        self._delayed = counts.get(_DELAYED, 0)
        self._leased = set()

    # -- operations (under the lock; on the loop or in the worker thread: see ``_sql``) -----------

    def _next_front(self) -> int:
        rank = self._front
        self._front -= 1
        return rank

    def _next_order(self) -> int:
        rank = self._order
        self._order += 1
        return rank

    @staticmethod
    def _head_of(db: sqlite3.Connection, origin: str) -> _Head | None:
        row = db.execute(
            f"SELECT priority, rank FROM queue WHERE origin = ? AND state = {_QUEUED}"
            " ORDER BY priority DESC, rank LIMIT 1",
            (origin,),
        ).fetchone()
        return None if row is None else (-row[0], row[1])

    def _raise_head(self, origin: str, head: _Head) -> None:
        current = self._heads.get(origin)
        if current is None or head < current:
            self._set_head(origin, head)

    def _known(self, keys: list[str]) -> set[str]:
        if self._filter is not None:
            return {key for key in keys if key in self._filter}
        db = self._conn()
        known: set[str] = set()
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            known.update(key for (key,) in db.execute(f"SELECT key FROM seen WHERE key IN ({marks})", chunk))
        return known

    def _claim(self, keys: list[str]) -> list[bool]:
        db = self._conn()
        with _transaction(db):
            known = self._known(keys)
            new = [key not in known for key in keys]
            fresh = list(dict.fromkeys(key for key, is_new in zip(keys, new, strict=True) if is_new))
            if self._filter is None:
                db.executemany("INSERT OR IGNORE INTO seen (key) VALUES (?)", [(key,) for key in fresh])
            else:
                db.executemany("INSERT INTO bloom_log (key) VALUES (?)", [(key,) for key in fresh])
        if self._filter is not None:
            for key in fresh:
                self._filter.add(key)  # once committed, as a push does
            self._bloom_log += len(fresh)
        return new

    def _push(self, batch: list[Seed], forefront: bool, unique: bool) -> PushResult:
        db = self._conn()
        if unique and self._filter is None and self._bloom_only:
            raise ConfigError(f"{self.path!r} keeps a Bloom seen set: open it with .dedup(bloom=...) as before")
        result = PushResult()
        rows: list[tuple[Any, ...]] = []
        new_keys: list[tuple[str]] = []
        heads: dict[str, _Head] = {}
        next_rank = self._next_front if forefront else self._next_order
        with _transaction(db):
            known = self._known([seed.unique_key for seed in batch]) if unique else set()
            for seed in batch:
                try:
                    fields = _seed_fields(seed)
                except (TypeError, ValueError):
                    result.rejected.append((seed, SkipReason.UNSERIALIZABLE))
                    continue
                if unique:
                    key = seed.unique_key
                    if key in known:
                        result.duplicates.append(seed)
                        continue
                    known.add(key)
                    new_keys.append((key,))
                origin, rank = _origin(seed, self._origins), next_rank()
                head, best = (-seed.priority, rank), heads.get(origin)
                if best is None or head < best:
                    heads[origin] = head
                rows.append((origin, rank, *fields))
                result.added.append(seed)
            seen_table = "seen" if self._filter is None else "bloom_log"
            db.executemany(f"INSERT INTO {seen_table} (key) VALUES (?)", new_keys)
            db.executemany(_INSERT, rows)
            if self._sink is not None:
                self._sink.pushed(result.added)
            self._flush_ledger(db)
        if self._filter is not None:
            for (key,) in new_keys:
                self._filter.add(key)  # once committed: a rolled-back push leaves no key behind
            self._bloom_log += len(new_keys)
            if self._bloom_log >= _BLOOM_CHECKPOINT:
                self._checkpoint_bloom()
        for origin, head in heads.items():
            self._raise_head(origin, head)
        self._queued += len(rows)
        return result

    def _take(self, origin: str) -> tuple[int, Seed] | None:
        """Lease the best queued seed of ``origin``; keep the index's head of it right."""
        db = self._conn()
        with _transaction(db):
            rows = db.execute(_NEXT_TWO, (origin,)).fetchall()
            if rows:
                db.execute(f"UPDATE queue SET state = {_LEASED} WHERE id = ?", (rows[0][0],))
        if len(rows) > 1:
            self._set_head(origin, (-rows[1][1], rows[1][2]))
        else:
            self._heads.pop(origin, None)
        if not rows:
            return None
        seed_id = rows[0][0]
        self._queued -= 1
        self._leased.add(seed_id)
        return seed_id, _seed_of(rows[0][3:])

    def _insert_items(self, db: sqlite3.Connection, staged: list[tuple[str, str]]) -> None:
        """Insert staged ``(table, JSON)`` rows, creating a table on its first use; inside a transaction."""
        for table in {table for table, _ in staged} - self._tables:
            db.execute(f"CREATE TABLE IF NOT EXISTS {_quote(table)} (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
        self._tables.update(table for table, _ in staged)
        for table, document in staged:
            db.execute(f"INSERT INTO {_quote(table)} (item) VALUES (?)", (document,))

    def _append(self, staged: list[tuple[str, str]]) -> None:
        with _transaction(self._conn()):
            self._insert_items(self._conn(), staged)

    def _read(self, table: str, after: int, count: int) -> list[tuple[str, str]]:
        db = self._conn()
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone():
            return []
        rows = db.execute(f"SELECT id, item FROM {_quote(table)} WHERE id > ? ORDER BY id LIMIT ?", (after, count))
        return [(str(row_id), item) for row_id, item in rows]

    def _settle(self, seed_id: int, seed: Seed, outcome: Outcome, staged: list[tuple[str, str]]) -> None:
        db = self._conn()
        due = time.time() + (outcome.delay or 0.0) if isinstance(outcome, Retry) else math.inf
        with _transaction(db):
            if self._sink is not None:
                self._sink.settled(seed, outcome)
            self._flush_ledger(db)
            if isinstance(outcome, Retry):
                db.execute(
                    f"UPDATE queue SET state = {_DELAYED}, attempt = attempt + 1, not_before = ?, rank = ?"
                    " WHERE id = ?",
                    (due, self._next_order(), seed_id),
                )
            elif isinstance(outcome, Fail):
                error = f"{type(outcome.error).__name__}: {outcome.error}"
                # Its rank now records when it failed, so ``failures`` lists them in that order.
                db.execute(
                    f"UPDATE queue SET state = {_FAILED}, error = ?, rank = ? WHERE id = ?",
                    (error, self._next_order(), seed_id),
                )
            else:
                db.execute("DELETE FROM queue WHERE id = ?", (seed_id,))
                self._insert_items(db, staged)
        self._leased.discard(seed_id)
        if isinstance(outcome, Retry):
            self._delayed += 1
            self._due = due if self._due is None else min(self._due, due)

    def _requeue(self, seed_id: int, seed: Seed) -> None:
        db = self._conn()
        rank = self._next_front()
        with _transaction(db):
            db.execute(f"UPDATE queue SET state = {_QUEUED}, rank = ? WHERE id = ?", (rank, seed_id))
            self._flush_ledger(db)
        self._leased.discard(seed_id)
        self._queued += 1
        self._raise_head(seed.origin, (-seed.priority, rank))

    def _promote_due(self) -> None:
        """Queue the delayed seeds whose time has come."""
        db = self._conn()
        with _transaction(db):
            due = db.execute(
                f"SELECT id, origin, priority, rank FROM queue WHERE state = {_DELAYED} AND not_before <= ?",
                (time.time(),),
            ).fetchall()
            db.executemany(f"UPDATE queue SET state = {_QUEUED} WHERE id = ?", [(row[0],) for row in due])
            next_due = db.execute(f"SELECT min(not_before) FROM queue WHERE state = {_DELAYED}").fetchone()[0]
        for _, origin, priority, rank in due:
            self._raise_head(origin, (-priority, rank))
        self._delayed -= len(due)
        self._queued += len(due)
        self._due = next_due

    def _failures(self) -> list[tuple[Seed, str]]:
        rows = self._conn().execute(f"SELECT {_SEED_COLUMNS}, error FROM queue WHERE state = {_FAILED} ORDER BY rank")
        return [(_seed_of(row[:-1]), row[-1]) for row in rows]
