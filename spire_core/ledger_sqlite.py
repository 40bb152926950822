"""The ledger in a ``SqliteFrontier``'s file: tables written in the transactions of the frontier.

    async with SqliteFrontier("crawl.db") as frontier:
        await Crawler(router, frontier=frontier).arun([start])
    entry = await SqliteLedgerView("crawl.db").entry(url)     # a finished or a running crawl

``SqliteLedger`` is the write side: what the engine tells it is staged in memory and written by the
frontier's next transaction (``flush``), and the lines of seeds queued or settled go in the very
transaction that queues or settles them, so a ``kill -9`` leaves ledger and queue agreeing. What a
crash can lose is only what no transaction committed yet: the attempts and refusals since the last
push or report (their seeds are queued again, and tried again, on resume). A seed in flight at the
crash gets an attempt ``interrupted`` when the file is opened again, unless its try's request is
recorded already: the server may have had that request.

``SqliteLedgerView`` reads the file over a connection of its own (read-only, WAL), so ``spire why``
works while the crawl runs; ``summary`` is computed in SQL.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from spire_core.errors import ConfigError, SpireError
from spire_core.ledger import LATENCY_BOUNDS, Attempt, Entry, Fate, HostRow, LedgerSummary, Sample, timeline_step
from spire_core.ledger_stores import Notes, key_of, origin_of, page_seed
from spire_core.outcome import Outcome, Retry
from spire_core.recrawl import Generation, Recrawl
from spire_core.revisit import PageChange, PageNote, PageState
from spire_core.seed import Seed

if TYPE_CHECKING:
    from spire_core.frontier.base import PushResult
    from spire_core.session.record import RequestRecord
    from spire_core.skips import SkipReason

__all__ = ["INTERRUPTED", "LEDGER_TABLES", "REVISIT_COLUMNS", "SqliteLedger", "SqliteLedgerView"]

T = TypeVar("T")

#: The outcome of an attempt in flight when its crawl was killed: the server may have had the request.
INTERRUPTED = "interrupted"
#: The tables the ledger keeps in a frontier file (no dataset may take their names).
LEDGER_TABLES = frozenset(
    {"ledger", "ledger_attempts", "ledger_hops", "ledger_pages", "ledger_hosts", "ledger_runs", "ledger_about"}
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    url TEXT NOT NULL,
    origin TEXT NOT NULL,
    fate TEXT NOT NULL,
    reason TEXT,
    detail TEXT,
    status INTEGER,
    referrer TEXT,
    depth INTEGER NOT NULL,
    tag TEXT,
    tries INTEGER NOT NULL DEFAULT 0,
    settled_at REAL,
    change TEXT,
    how TEXT,
    hash TEXT,
    previous_hash TEXT,
    changed_at REAL
);
CREATE TABLE IF NOT EXISTS ledger_attempts (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    origin TEXT NOT NULL,
    at REAL NOT NULL,
    url TEXT NOT NULL,
    status INTEGER,
    elapsed_ms INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    proxy TEXT,
    identity TEXT,
    outcome TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_attempts_key ON ledger_attempts (key);
CREATE TABLE IF NOT EXISTS ledger_hops (url TEXT PRIMARY KEY, key TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_pages (
    key TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    origin TEXT NOT NULL,
    tag TEXT,
    method TEXT NOT NULL,
    depth INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    user_data TEXT,
    headers TEXT,
    body BLOB,
    strategy TEXT,
    etag TEXT,
    last_modified TEXT,
    hash TEXT,
    lastmod TEXT,
    changed_at REAL NOT NULL,
    checked_at REAL NOT NULL,
    streak INTEGER NOT NULL,
    due INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_hosts (
    origin TEXT PRIMARY KEY, lastmod_right INTEGER NOT NULL, lastmod_wrong INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_runs (
    id INTEGER PRIMARY KEY CHECK (id = 0), generation INTEGER NOT NULL, finished INTEGER NOT NULL
);
INSERT OR IGNORE INTO ledger_runs (id, generation, finished) VALUES (0, 1, 0);
CREATE TABLE IF NOT EXISTS ledger_about (
    id INTEGER PRIMARY KEY CHECK (id = 0), title TEXT NOT NULL, settings TEXT NOT NULL
);
"""
#: Columns a ledger table written by an older spire lacks, added when a crawl opens its file.
_ADDED_COLUMNS = {"change": "TEXT", "how": "TEXT", "hash": "TEXT", "previous_hash": "TEXT", "changed_at": "REAL"}
_INSERT = (
    "INSERT OR IGNORE INTO ledger (key, url, origin, fate, reason, detail, referrer, depth, tag)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_ATTEMPT = (
    "INSERT INTO ledger_attempts (key, origin, at, url, status, elapsed_ms, bytes, proxy, identity, outcome)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SETTLE = (
    "UPDATE ledger SET fate = ?, reason = ?, detail = ?, status = coalesce(?, status), tries = ?, settled_at = ?"
    " WHERE key = ?"
)
_ENTRY_COLUMNS = "url, key, fate, reason, detail, status, referrer, depth, tag, tries"
_CHANGE_COLUMNS = "change, how, hash, previous_hash, changed_at"
_ROW_COLUMNS = f"{_ENTRY_COLUMNS}, {_CHANGE_COLUMNS}"
#: A page settled kept, then dropped (for its canonical page, once that was kept): a skip from now on.
_OVERRULE = "UPDATE ledger SET fate = 'skipped', reason = ?, detail = ? WHERE key = ? AND fate = 'kept'"
_CHANGE = "UPDATE ledger SET change = ?, how = ?, hash = ?, previous_hash = ?, changed_at = ? WHERE key = ?"
_PAGE_COLUMNS = (
    "key, url, origin, tag, method, depth, priority, user_data, headers, body, strategy,"
    " etag, last_modified, hash, lastmod, changed_at, checked_at, streak, due"
)
_PAGE = f"INSERT OR REPLACE INTO ledger_pages ({_PAGE_COLUMNS}) VALUES ({', '.join('?' * 19)})"
_HOST = (
    "INSERT INTO ledger_hosts (origin, lastmod_right, lastmod_wrong) VALUES (?, ?, ?)"
    " ON CONFLICT (origin) DO UPDATE SET lastmod_right = lastmod_right + excluded.lastmod_right,"
    " lastmod_wrong = max(lastmod_wrong, excluded.lastmod_wrong)"
)


#: A page's revisit seed as the frontier's queue rows hold a seed (``url, tag, method, depth, priority,
#: attempt, user_data, headers, body, unique_key, strategy, revisit``): its state as the revisit's JSON.
REVISIT_COLUMNS = (
    "url, tag, method, depth, priority, 0, user_data, headers, body, key, strategy,"
    " json_object('etag', etag, 'last_modified', last_modified, 'hash', hash, 'lastmod', lastmod,"
    " 'changed_at', changed_at, 'streak', streak)"
)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(dict(value), separators=(",", ":"))


def _page_row(seed: Seed, state: PageState) -> tuple[Any, ...]:
    seed = page_seed(seed)
    return (
        seed.unique_key,
        seed.url,
        seed.origin,
        seed.tag,
        seed.method,
        seed.depth,
        seed.priority,
        _json(seed.user_data),
        _json(seed.headers),
        seed.body,
        seed.strategy,
        state.etag,
        state.last_modified,
        state.hash,
        state.lastmod,
        state.changed_at,
        state.checked_at,
        state.streak,
        state.due,
    )


class SqliteLedger:
    """The write side of a frontier file's ledger: staged here, written by the frontier's transactions."""

    def __init__(self) -> None:
        self._notes = Notes()
        self._rows: list[tuple[Any, ...]] = []
        self._attempts: list[tuple[Any, ...]] = []
        self._hops: list[tuple[str, str]] = []
        self._settles: list[tuple[Any, ...]] = []
        self._overrules: list[tuple[str, str | None, str]] = []
        self._tries: list[tuple[int, str]] = []
        self._changes: list[tuple[Any, ...]] = []
        self._pages: list[tuple[Any, ...]] = []
        self._dropped: list[tuple[str]] = []
        self._hosts: list[tuple[str, int, int]] = []
        #: Whether the file's current generation ran to its end; per origin, its sitemap lastmod's
        #: evidence as of the generation's start (``read_state``).
        self.finished = False
        self.hosts: dict[str, tuple[int, bool]] = {}

    @staticmethod
    def create(db: sqlite3.Connection) -> None:
        """Create the ledger's tables where missing, and a table of an older spire's the columns it
        lacks (inside the caller's transaction)."""
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        present = {row[1] for row in db.execute("PRAGMA table_info(ledger)")}
        for column, kind in _ADDED_COLUMNS.items():
            if column not in present:
                db.execute(f"ALTER TABLE ledger ADD COLUMN {column} {kind}")

    @staticmethod
    def interrupted(db: sqlite3.Connection, leased: str) -> None:
        """The seeds a dead crawl left leased (queue rows where ``leased``, an SQL condition) were in flight
        when it died: the request of a try whose first attempt is not recorded (an attempt is written by
        the transaction after its answer) may have reached the server. An attempt ``interrupted`` says so,
        at the dead crawl's last recorded request (inside the caller's transaction, before they are queued
        again)."""
        (last,) = db.execute("SELECT max(at) FROM ledger_attempts").fetchone()
        db.execute(
            "INSERT INTO ledger_attempts (key, origin, at, url, status, elapsed_ms, bytes, outcome)"
            f" SELECT unique_key, origin, ?, url, NULL, 0, 0, '{INTERRUPTED}' FROM queue"
            f" WHERE {leased} AND attempt >= (SELECT count(*) FROM ledger_attempts"
            " WHERE ledger_attempts.key = queue.unique_key AND ledger_attempts.url = queue.url)",
            (time.time() if last is None else last,),
        )

    @staticmethod
    def describe(db: sqlite3.Connection, title: str, settings: Mapping[str, str]) -> None:
        """Keep what the crawl is, its ``title`` and ``settings`` (the latest run's), for a report read
        from the file later (inside the caller's transaction)."""
        db.execute(
            "INSERT OR REPLACE INTO ledger_about (id, title, settings) VALUES (0, ?, ?)",
            (title, json.dumps(dict(settings))),
        )

    # -- page states (a crawl with ``recrawl=``) ----------------------------------------------------

    def keep_pages(self, policy: Recrawl) -> None:
        """Keep a page state for every page kept from now on, and revisit them under ``policy``."""
        self._notes.recrawl = policy

    @property
    def generation(self) -> int:
        return self._notes.generation

    def read_state(self, db: sqlite3.Connection) -> None:
        """Read the file's generation, whether it finished, and its hosts' lastmod evidence."""
        generation, finished = db.execute("SELECT generation, finished FROM ledger_runs").fetchone()
        self._notes.generation, self.finished = generation, bool(finished)
        self.hosts = {
            origin: (right, bool(wrong))
            for origin, right, wrong in db.execute("SELECT origin, lastmod_right, lastmod_wrong FROM ledger_hosts")
        }

    def begin(self, db: sqlite3.Connection) -> list[tuple[Any, ...]]:
        """Start the next generation inside the caller's transaction: every line cleared, a line for each
        seed still queued and for each page not due (skipped ``not_due``); return the rows of the
        revisits due that are not queued already, as the queue holds seeds (``REVISIT_COLUMNS``)."""
        self.flush(db)
        generation = self._notes.generation + 1
        db.execute("UPDATE ledger_runs SET generation = ?, finished = 0", (generation,))
        # A seed carried into this generation (still queued, or queued again afresh) was found where it was.
        db.execute("DROP TABLE IF EXISTS temp.carried")
        db.execute(
            "CREATE TEMP TABLE carried AS SELECT key, referrer FROM ledger"
            " WHERE referrer IS NOT NULL AND key IN (SELECT unique_key FROM queue)"
        )
        db.execute("CREATE UNIQUE INDEX temp.carried_key ON carried (key)")
        for table in ("ledger", "ledger_attempts", "ledger_hops"):
            db.execute(f"DELETE FROM {table}")
        db.execute(
            "INSERT OR IGNORE INTO ledger (key, url, origin, fate, depth, tag, referrer)"
            " SELECT unique_key, url, origin, 'queued', depth, tag,"
            " (SELECT referrer FROM temp.carried WHERE key = unique_key) FROM queue ORDER BY id"
        )
        db.execute("DROP TABLE temp.carried")
        db.execute(
            f"INSERT OR IGNORE INTO ledger (key, url, origin, fate, reason, depth, tag, {_CHANGE_COLUMNS})"
            " SELECT key, url, origin, 'skipped', 'not_due', depth, tag, 'unchanged', 'not-due', hash, hash,"
            " changed_at FROM ledger_pages WHERE due > ? ORDER BY key",
            (generation,),
        )
        return db.execute(
            f"SELECT {REVISIT_COLUMNS} FROM ledger_pages WHERE due <= ? AND key NOT IN (SELECT unique_key FROM queue)",
            (generation,),
        ).fetchall()

    def begun(self, db: sqlite3.Connection) -> None:
        """The transaction of ``begin`` committed: the notes of the new generation, its state read."""
        self._notes = self._notes.next_generation()
        self.read_state(db)

    def finish(self, db: sqlite3.Connection) -> None:
        """The current generation ran to its end (inside the caller's transaction)."""
        self.flush(db)
        db.execute("UPDATE ledger_runs SET finished = 1")
        self.finished = True

    def page(self, seed: Seed, note: PageNote) -> None:
        self._notes.pages[seed.unique_key] = note

    def found(self, seeds: Sequence[Seed], referrer: str | None) -> None:
        self._notes.found(seeds, referrer)

    def pushed(self, added: Sequence[Seed]) -> None:
        referrer = self._notes.referrer
        self._rows.extend(
            (
                seed.unique_key,
                seed.url,
                seed.origin,
                "queued",
                None,
                None,
                referrer(seed.unique_key),
                seed.depth,
                seed.tag,
            )
            for seed in added
        )

    def rejected(self, result: PushResult) -> None:
        self._rows.extend(
            (seed.unique_key, seed.url, seed.origin, "skipped", reason, None, referrer, seed.depth, seed.tag)
            for seed, reason, referrer in self._notes.forget(result)
        )

    def refused(self, skips: Iterable[tuple[str, SkipReason]], *, referrer: str | None, depth: int) -> None:
        self._rows.extend(
            (key_of(url), url, origin_of(url), "skipped", reason, None, referrer, depth, None)
            for url, reason in self._notes.new_refusals(skips)
        )

    def left_out(self, seed: Seed, reason: SkipReason, detail: str | None = None) -> None:
        self._notes.left_out[seed.unique_key] = (str(reason), detail)
        # Settled kept already (a page held for its canonical page): written after the settles of its flush.
        self._overrules.append((str(reason), detail, seed.unique_key))

    def read(self, seed: Seed, kind: str, detail: str | None = None) -> None:
        self._notes.read[seed.unique_key] = (kind, detail)

    def attempt(self, seed: Seed, record: RequestRecord, at: float) -> None:
        key = seed.unique_key
        self._attempts.append(
            (
                key,
                seed.origin,
                at,
                record.url,
                record.status,
                record.elapsed_ms,
                record.bytes,
                record.proxy,
                record.identity,
                record.outcome,
            )
        )
        if record.redirects:
            self._hops.append((record.url, key))
        self._notes.status[key] = record.status

    def settled(self, seed: Seed, outcome: Outcome) -> None:
        fate, reason, detail, status, change = self._notes.settled(seed, outcome)
        if isinstance(outcome, Retry):
            self._tries.append((seed.attempt + 1, seed.unique_key))
            return
        self._settles.append((fate.value, reason, detail, status, seed.attempt + 1, time.time(), seed.unique_key))
        if fate is Fate.READ:
            self._hops.append((seed.url, seed.unique_key))  # asked for by its URL, its line answers
        if change is not None:
            self._changed(seed, change)

    def _changed(self, seed: Seed, change: PageChange) -> None:
        key = seed.unique_key
        how = None if change.how is None else change.how.value
        self._changes.append((change.change.value, how, change.hash, change.previous_hash, change.changed_at, key))
        if change.drop:
            self._dropped.append((key,))
        elif change.state is not None:
            self._pages.append(_page_row(seed, change.state))
        if change.lastmod_right is not None:
            self._hosts.append((seed.origin, int(change.lastmod_right), int(not change.lastmod_right)))

    @property
    def pending(self) -> int:
        """How many rows ``flush`` would write now."""
        staged = (self._rows, self._attempts, self._hops, self._settles, self._tries, self._changes, self._pages)
        return sum(map(len, staged)) + len(self._dropped) + len(self._hosts) + len(self._overrules)

    def flush(self, db: sqlite3.Connection) -> None:
        """Write what is staged, inside the caller's transaction (the frontier's push or report)."""
        rows, self._rows = self._rows, []
        attempts, self._attempts = self._attempts, []
        hops, self._hops = self._hops, []
        settles, self._settles = self._settles, []
        overrules, self._overrules = self._overrules, []
        tries, self._tries = self._tries, []
        changes, self._changes = self._changes, []
        pages, self._pages = self._pages, []
        dropped, self._dropped = self._dropped, []
        hosts, self._hosts = self._hosts, []
        if rows:
            db.executemany(_INSERT, rows)
        if attempts:
            db.executemany(_ATTEMPT, attempts)
        if hops:
            db.executemany("INSERT OR IGNORE INTO ledger_hops (url, key) VALUES (?, ?)", hops)
        if tries:
            db.executemany("UPDATE ledger SET tries = ? WHERE key = ?", tries)
        if settles:
            db.executemany(_SETTLE, settles)
        if overrules:
            db.executemany(_OVERRULE, overrules)
        if changes:
            db.executemany(_CHANGE, changes)
        if pages:
            db.executemany(_PAGE, pages)
        if dropped:
            db.executemany("DELETE FROM ledger_pages WHERE key = ?", dropped)
        if hosts:
            db.executemany(_HOST, hosts)


class SqliteLedgerView:
    """The ledger of a frontier file, read over a read-only connection of its own (``LedgerView``).

    It reads what the crawl committed: a finished crawl's file, or a running one's (WAL lets a
    reader in beside the writer).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._db: sqlite3.Connection | None = None
        self._limiter = anyio.CapacityLimiter(1)

    async def __aenter__(self) -> SqliteLedgerView:
        await self._run(lambda db: None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await anyio.to_thread.run_sync(db.close, limiter=self._limiter)

    async def entry(self, url: str) -> Entry | None:
        return await self._run(_entry, url)

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
        return await self._run(_entries, fate, reason, origin, limit, offset, attempts, changed, change)

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        return await self._run(_summary, samples)

    async def about(self) -> tuple[str, dict[str, str]] | None:
        """The title and settings its crawl kept (``SqliteLedger.describe``); ``None`` when it kept none
        (a crawl of an older spire, or one still starting)."""
        return await self._run(_about)

    async def generation(self) -> Generation:
        """The file's current crawl (1 for the first, then one more a recrawl) and whether it ran to its end:
        the crawl whose lines the ledger holds."""
        return await self._run(_generation)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        def call() -> T:
            if self._db is None:
                self._db = self._open()
            return fn(self._db, *args)

        try:
            return await anyio.to_thread.run_sync(call, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise SpireError(f"the ledger in {self.path!r}: {exc}") from exc
        except (ValueError, TypeError) as exc:
            # A row no spire wrote (a fate spire has not, a text time): the same one sentence as a missing column.
            raise SpireError(f"the ledger in {self.path!r} holds a row spire did not write ({exc})") from exc

    def _open(self) -> sqlite3.Connection:
        if not os.path.exists(self.path):
            raise ConfigError(f"no crawl state at {self.path!r}: give the file of `spire crawl --state FILE`")
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            found = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path!r} is not a spire crawl state ({exc})") from None
        if found is None:
            db.close()
            raise ConfigError(
                f"{self.path!r} holds no ledger: the crawl that wrote it kept none (ledger=False, or an older spire)"
            )
        present = {row[1] for row in db.execute("PRAGMA table_info(ledger)")}
        missing = [column for column in _ADDED_COLUMNS if column not in present]
        if missing:
            # Written by an older spire, not opened by a crawl since: read its lines with empty new columns
            # (a temporary view of the same name comes first for this connection, the file stays as it is).
            empty = ", ".join(f"NULL AS {column}" for column in missing)
            db.execute(f"CREATE TEMP VIEW ledger AS SELECT *, {empty} FROM main.ledger")
        return db


def _entry_of(db: sqlite3.Connection, row: Sequence[Any], attempts: bool) -> Entry:
    url, key, fate, reason, detail, status, referrer, depth, tag, tries, *change = row
    found: tuple[Attempt, ...] = ()
    if attempts:
        # robots.txt's requests are the crawl's, made for no seed: a file read's line shows them.
        keys = (key, key_of(url) if fate == Fate.READ else key)
        found = tuple(
            _attempt(*attempt)
            for attempt in db.execute(
                "SELECT at, url, status, elapsed_ms, bytes, proxy, identity, outcome FROM ledger_attempts"
                " WHERE key IN (?, ?) ORDER BY id",
                keys,
            )
        )
    return Entry(url, key, Fate(fate), reason, detail, status, referrer, depth, tag, found, tries, *change)


def _attempt(at: Any, url: Any, *rest: Any) -> Attempt:
    """An attempt row as spire writes it: a time in seconds and a URL, else ``ValueError`` naming them."""
    if not isinstance(at, int | float) or not isinstance(url, str):
        raise ValueError(f"an attempt at {at!r} of {url!r}")
    return Attempt(at, url, *rest)


def _about(db: sqlite3.Connection) -> tuple[str, dict[str, str]] | None:
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger_about'").fetchone() is None:
        return None  # written by a spire that kept no settings
    row = db.execute("SELECT title, settings FROM ledger_about").fetchone()
    if row is None:
        return None
    title, settings = row
    return str(title), {str(name): str(value) for name, value in json.loads(settings).items()}


def _generation(db: sqlite3.Connection) -> Generation:
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger_runs'").fetchone() is None:
        return Generation()  # written by a spire that kept no generations: its one crawl
    generation, finished = db.execute("SELECT generation, finished FROM ledger_runs").fetchone()
    return Generation(generation, bool(finished))


def _entry(db: sqlite3.Connection, url: str) -> Entry | None:
    key = key_of(url)
    row = db.execute(f"SELECT {_ROW_COLUMNS} FROM ledger WHERE key IN (?, ?) LIMIT 1", (key, url)).fetchone()
    if row is None:
        hop = db.execute("SELECT key FROM ledger_hops WHERE url IN (?, ?)", (url, key)).fetchone()
        if hop is not None:
            row = db.execute(f"SELECT {_ROW_COLUMNS} FROM ledger WHERE key = ?", hop).fetchone()
    return None if row is None else _entry_of(db, row, attempts=True)


def _entries(
    db: sqlite3.Connection,
    fate: Fate | None,
    reason: str | None,
    origin: str | None,
    limit: int,
    offset: int,
    attempts: bool,
    changed: bool,
    change: str | None,
) -> list[Entry]:
    where, args = _where(fate, reason, origin, changed, change)
    rows = db.execute(
        f"SELECT {_ROW_COLUMNS} FROM ledger{where} ORDER BY id LIMIT ? OFFSET ?", (*args, limit, offset)
    ).fetchall()
    return [_entry_of(db, row, attempts=attempts) for row in rows]


def _where(
    fate: Fate | None, reason: str | None, origin: str | None, changed: bool, change: str | None
) -> tuple[str, list[Any]]:
    clauses: list[str] = ["change IS NOT NULL"] if changed else []
    args: list[Any] = []
    filters = (
        ("fate", None if fate is None else Fate(fate).value),
        ("reason", reason),
        ("origin", origin),
        ("change", None if change is None else str(change)),
    )
    for column, value in filters:
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def _bucket_sql() -> str:
    cases = " ".join(f"WHEN elapsed_ms <= {bound:g} THEN {index}" for index, bound in enumerate(LATENCY_BOUNDS[:-1]))
    return f"CASE {cases} ELSE {len(LATENCY_BOUNDS) - 1} END"


def _samples(db: sqlite3.Connection, fate: str, samples: int) -> dict[str, tuple[int, Sequence[Sample]]]:
    groups: dict[str, tuple[int, Sequence[Sample]]] = {}
    counts = db.execute("SELECT reason, count(*) FROM ledger WHERE fate = ? GROUP BY reason", (fate,)).fetchall()
    for reason, count in counts:
        found = db.execute(
            "SELECT url, referrer, detail, change FROM ledger WHERE fate = ? AND reason IS ? ORDER BY id LIMIT ?",
            (fate, reason, samples),
        ).fetchall()
        groups[reason or "unknown"] = (count, tuple(Sample(*row) for row in found))
    return groups


def _summary(db: sqlite3.Connection, samples: int) -> LedgerSummary:
    fates = {Fate(fate): count for fate, count in db.execute("SELECT fate, count(*) FROM ledger GROUP BY fate")}
    statuses = dict(
        db.execute(
            "SELECT status, count(*) FROM ledger_attempts WHERE status IS NOT NULL GROUP BY status ORDER BY status"
        ).fetchall()
    )
    requests, size, first, last = db.execute(
        "SELECT count(*), coalesce(sum(bytes), 0), min(at), max(at) FROM ledger_attempts"
    ).fetchone()
    hosts: dict[str, dict[str, Any]] = {}

    def host(origin: str) -> dict[str, Any]:
        return hosts.setdefault(
            origin,
            {
                "requests": 0,
                "pages": 0,
                "bytes": 0,
                "statuses": {},
                "errors": {},
                "skips": {},
                "p50": None,
                "p95": None,
            },
        )

    for origin, count, total in db.execute(
        "SELECT origin, count(*), coalesce(sum(bytes), 0) FROM ledger_attempts GROUP BY origin"
    ):
        found = host(origin)
        found["requests"], found["bytes"] = count, total
    for origin, status, count in db.execute(
        "SELECT origin, status, count(*) FROM ledger_attempts WHERE status IS NOT NULL GROUP BY origin, status"
    ):
        host(origin)["statuses"][status] = count
    for origin, fate, reason, count in db.execute(
        "SELECT origin, fate, reason, count(*) FROM ledger WHERE fate IN ('kept', 'failed', 'skipped')"
        " GROUP BY origin, fate, reason"
    ):
        found = host(origin)
        if fate == "kept":
            found["pages"] += count
        else:
            found["errors" if fate == "failed" else "skips"][reason or "unknown"] = count
    # Nearest-rank percentiles: the value at rank ceil(p * n) of each origin's sorted latencies.
    for origin, p50, p95 in db.execute(
        "SELECT origin,"
        " max(CASE WHEN rank = (total + 1) / 2 THEN elapsed_ms END),"
        " max(CASE WHEN rank = (95 * total + 99) / 100 THEN elapsed_ms END)"
        " FROM (SELECT origin, elapsed_ms,"
        " row_number() OVER (PARTITION BY origin ORDER BY elapsed_ms) AS rank,"
        " count(*) OVER (PARTITION BY origin) AS total FROM ledger_attempts)"
        " GROUP BY origin"
    ):
        found = host(origin)
        found["p50"], found["p95"] = p50, p95
    buckets = dict(db.execute(f"SELECT {_bucket_sql()} AS bucket, count(*) FROM ledger_attempts GROUP BY bucket"))
    timeline: list[tuple[int, int, int]] = []
    step = 1
    if first is not None:
        start = int(first // 1)
        (settled,) = db.execute(
            "SELECT max(settled_at) FROM ledger WHERE fate = 'kept' AND settled_at IS NOT NULL"
        ).fetchone()
        step = timeline_step(max(last, settled if settled is not None else last) - start)
        bins: dict[int, list[int]] = {}
        # Binned by the crawl's range, in SQL: a clock that once said 1970 makes few bins, not 1.7e9 points.
        for index, count in db.execute(
            "SELECT (CAST(at AS INTEGER) - ?) / ? AS bin, count(*) FROM ledger_attempts GROUP BY bin", (start, step)
        ):
            bins.setdefault(index, [0, 0])[0] = count
        for index, count in db.execute(
            "SELECT (CAST(settled_at AS INTEGER) - ?) / ? AS bin, count(*) FROM ledger"
            " WHERE fate = 'kept' AND settled_at IS NOT NULL GROUP BY bin",
            (start, step),
        ):
            bins.setdefault(index, [0, 0])[1] = count
        timeline = [(index * step, counts[0], counts[1]) for index, counts in sorted(bins.items())]
    rows = [
        HostRow(
            origin=origin,
            requests=found["requests"],
            pages=found["pages"],
            statuses=found["statuses"],
            errors=found["errors"],
            skips=found["skips"],
            p50_ms=found["p50"],
            p95_ms=found["p95"],
            bytes=found["bytes"],
        )
        for origin, found in sorted(hosts.items(), key=lambda item: (-item[1]["requests"], item[0]))
    ]
    changes = dict(db.execute("SELECT change, count(*) FROM ledger WHERE change IS NOT NULL GROUP BY change"))
    return LedgerSummary(
        changes=changes,
        fates=fates,
        statuses=statuses,
        skips=_samples(db, "skipped", samples),
        failures=_samples(db, "failed", samples),
        hosts=rows,
        latency_histogram=[(bound, buckets.get(index, 0)) for index, bound in enumerate(LATENCY_BOUNDS)],
        timeline=timeline,
        timeline_step=step,
        requests=requests,
        bytes=size,
    )
