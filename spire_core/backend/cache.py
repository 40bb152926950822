"""``CachingBackend``: responses kept on disk and served again, for the edit-and-rerun loop.

    backend = CachingBackend(HttpBackend(), ".spire-cache")          # policy "dev": keep everything
    backend = CachingBackend(HttpBackend(), ".spire-cache", policy="http", expire=timedelta(days=1))

It wraps any backend. Responses go into one SQLite file in the cache folder, keyed by the seed's
method, its unique key and the credentials that went out with it: a hash (never the value) of its
``Authorization``, ``Cookie`` and ``Proxy-Authorization`` headers (every header of ``redact``) and of the
user name and password in its URL. One user's response is never served to another, nor to a
request without credentials. A response served from the cache has ``from_cache`` set (and
``revalidated`` when a conditional request confirmed it with a 304); the crawler counts both in its
stats. Its ``url`` is the URL of the request it answers, never the stored one.

Secrets are not written in clear: the headers named in ``redact`` (``REDACTED_HEADERS`` by default:
``Authorization``, ``Cookie``, ``Set-Cookie``, API keys...) are stored as ``[redacted]``, in the
request's headers and the response's, and a stored URL has no user name or password.
``keep_secrets=True`` stores everything as it was sent and received.

Two policies:

- ``"dev"`` keeps every response (but a 429 or a 5xx, which a retry should see afresh) and serves
  it again without asking the site, until ``expire`` (if given) has passed since it was stored, to a
  request that asks the same in every header its ``Vary`` names.
- ``"http"`` follows RFC 9111: only what the response allows to be stored (``no-store``, the status,
  explicit or heuristic freshness, a validator), served while fresh by ``Cache-Control: max-age`` /
  ``Expires`` less its ``Age`` and only to a request its ``Vary`` matches; once stale, revalidated
  with ``If-None-Match`` / ``If-Modified-Since``, and a 304 refreshes the stored response. A
  response marked ``Cache-Control: private`` is not stored: the cache file outlives the session it
  was fetched in (cookies the HTTP client's own jar sent are not seen here), so it is treated as
  shared.

A row the cache cannot read back (a bad type, JSON or UTF-8 in a column, or a damaged file around
it: flipped bytes, garbage pages, no database at all) is a counted miss (``stats.corrupt``), logged
once on ``spire.cache`` with its key, deleted when it can be and fetched again; a damaged file stores
nothing more. A file SQLite cannot use at all (a folder it may not write, a full disk) is a
``CacheError``.

SQLite runs in a worker thread, one call at a time (``anyio.to_thread.run_sync`` with a limiter).
"""

from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import json
import logging
import sqlite3
import struct
import time
import zlib
from collections.abc import Callable, Collection, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Literal, TypeVarTuple, Unpack

import anyio

from spire_core.backend.abilities import Forwarding
from spire_core.backend.base import Backend
from spire_core.errors import ConfigError, SpireError
from spire_core.outcome import seconds
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from spire_core.session.redact import REDACTED_HEADERS, redact_headers, userinfo, without_userinfo
from spire_core.threads import SerialThread

__all__ = ["CacheError", "CachePolicy", "CachingBackend", "CacheStats", "Freshness"]

CachePolicy = Literal["dev", "http"]
Ts = TypeVarTuple("Ts")

logger = logging.getLogger("spire.cache")
logger.addHandler(logging.NullHandler())

#: The file inside the cache folder that holds the responses.
DATABASE = "responses.sqlite"

#: Statuses a cache may store without explicit freshness (RFC 9110, 15.1 "heuristically cacheable").
_HEURISTIC_STATUSES = frozenset({200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501})
#: Header fields a 304 does not replace in the stored response: they describe the stored body.
_KEEP_ON_304 = frozenset({"content-length", "content-encoding", "transfer-encoding", "content-range"})
#: The headers that carry credentials whatever ``redact`` says: they are part of the key.
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization"})
#: The version of the file's layout: a file written before credentials were part of the key (1), or
#: before each row kept a checksum (2), is emptied.
_LAYOUT = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    method TEXT NOT NULL,
    key TEXT NOT NULL,
    url TEXT NOT NULL,
    status INTEGER NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    request_headers TEXT NOT NULL,
    request_time REAL NOT NULL,
    response_time REAL NOT NULL,
    checksum INTEGER NOT NULL,
    PRIMARY KEY (method, key)
)
"""


class CacheError(SpireError):
    """The cache's file cannot be opened, read or written."""

    category = "cache"


class _Corrupt(Exception):
    """A stored row that cannot be read back as a response, or a damaged file around it."""


#: SQLite's errors that say the file cannot be used here and now (a folder it may not write, a full
#: disk, a lock, no memory), whatever it holds: every other error of the cache's own statements says
#: the file is damaged (flipped bytes, garbage pages, a schema that is not the cache's, not a database).
_UNUSABLE = frozenset(
    {
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_INTERRUPT,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_AUTH,
    }
)


def _damaged(exc: Exception) -> bool:
    """Whether SQLite's ``exc`` says the file is damaged, rather than unusable (``_UNUSABLE``)."""
    if isinstance(exc, UnicodeDecodeError):
        return True  # SQLite's message quoted a damaged schema, which Python could not decode
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF not in _UNUSABLE


def _translated(exc: sqlite3.Error | UnicodeDecodeError, doing: str, path: Path) -> Exception:
    """``exc`` as the cache raises it: ``_Corrupt`` for a damaged file, else a ``CacheError``."""
    if _damaged(exc):
        return _Corrupt(f"the file is damaged: {exc}")
    return CacheError(f"cannot {doing} the cache {path}: {exc}")


@dataclasses.dataclass(slots=True)
class CacheStats:
    """What a ``CachingBackend`` did: served from the cache, revalidated with a 304, fetched, stored."""

    hits: int = 0
    revalidated: int = 0
    misses: int = 0
    stored: int = 0
    #: Rows that could not be read back: each was deleted and its response fetched again.
    corrupt: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class _Entry:
    url: str
    status: int
    headers: Headers
    body: bytes
    request_headers: Mapping[str, str]
    request_time: float
    response_time: float


def _directives(headers: Headers | Mapping[str, str] | None) -> dict[str, str | None]:
    """The ``Cache-Control`` directives of ``headers``, names lower-cased: ``{"max-age": "60", "no-cache": None}``."""
    if not headers:
        return {}
    found: dict[str, str | None] = {}
    values = headers.get_list("cache-control") if isinstance(headers, Headers) else [headers.get("cache-control", "")]
    for value in values:
        for part in (value or "").split(","):
            name, _, argument = part.strip().partition("=")
            if name:
                found[name.lower()] = argument.strip().strip('"') or None
    return found


def _date(headers: Headers, name: str) -> float | None:
    """An HTTP date header as a timestamp; the first one if a server sent several (each holds a comma)."""
    values = headers.get_list(name)
    if not values:
        return None
    value = values[0]
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed.timestamp()


def _delta(value: str | None) -> float | None:
    return float(value) if value is not None and value.isdigit() else None


@dataclasses.dataclass(frozen=True, slots=True)
class Freshness:
    """How long a stored response stays fresh, and how old it is now (RFC 9111, 4.2), in seconds."""

    lifetime: float
    age: float

    @property
    def fresh(self) -> bool:
        return self.lifetime > self.age

    @classmethod
    def of(cls, headers: Headers, *, request_time: float, response_time: float, now: float) -> Freshness:
        """The freshness of a response with ``headers``, requested and received at the given times."""
        directives = _directives(headers)
        date = _date(headers, "date")
        lifetime = _delta(directives.get("max-age"))
        if lifetime is None and "expires" in headers:
            expires = _date(headers, "expires")
            # An invalid Expires (such as "0") means already expired.
            lifetime = max(0.0, expires - (date if date is not None else response_time)) if expires else 0.0
        if lifetime is None:
            modified = _date(headers, "last-modified")
            # The customary heuristic: a tenth of the time since the resource last changed.
            lifetime = max(0.0, ((date or response_time) - modified) / 10) if modified is not None else 0.0
        age_value = _delta(headers.get("age")) or 0.0
        apparent = max(0.0, response_time - date) if date is not None else 0.0
        corrected = age_value + (response_time - request_time)
        return cls(lifetime=lifetime, age=max(apparent, corrected) + max(0.0, now - response_time))


def _storable_http(seed: Seed, response: Response) -> bool:
    """Whether a private HTTP cache may store ``response`` to ``seed`` and ever use it (RFC 9111, 3)."""
    if seed.method not in ("GET", "HEAD") or response.status in (206, 304) or response.status >= 500:
        return False
    directives = _directives(response.headers)
    if "no-store" in directives or "no-store" in _directives(seed.headers) or "private" in directives:
        return False
    if response.headers.get("vary", "").strip() == "*":
        return False
    explicit = "max-age" in directives or "expires" in response.headers or "public" in directives
    validator = "etag" in response.headers or "last-modified" in response.headers
    return explicit or (response.status in _HEURISTIC_STATUSES and validator)


def _storable_dev(seed: Seed, response: Response) -> bool:
    return response.status != 429 and response.status < 500


def _varies(entry: _Entry, seed: Seed, keyed: Collection[str]) -> bool:
    """Whether ``seed`` asks differently, in a header the stored response varies by, than the stored request.

    The headers in ``keyed`` are part of the cache key (and stored redacted): an entry found by its
    key already asked the same in them.
    """
    names = {name.strip().lower() for value in entry.headers.get_list("vary") for name in value.split(",")}
    if "*" in names:
        return True
    asked = {name.lower(): value for name, value in (seed.headers or {}).items()}
    stored = {name.lower(): value for name, value in entry.request_headers.items()}
    return any(asked.get(name) != stored.get(name) for name in names if name and name not in keyed)


def _refreshed(stored: Headers, update: Headers) -> Headers:
    """The stored headers with the fields of a 304 put in their place (RFC 9111, 3.2)."""
    names = {name.lower() for name in update} - _KEEP_ON_304
    kept = [(name, value) for name, value in stored.multi_items() if name.lower() not in names]
    return Headers(kept + [(name, value) for name, value in update.multi_items() if name.lower() in names])


class _Store:
    """The cache's SQLite file; every method runs in a worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            db: sqlite3.Connection | None = None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                db.text_factory = bytes  # decoded by ``_entry``: a bad byte is a corrupt row, not a failed query
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                if db.execute("PRAGMA user_version").fetchone()[0] < _LAYOUT:
                    # Written by a spire that stored credentials in clear, or kept no checksums.
                    db.execute("PRAGMA secure_delete=ON")
                    db.execute("DROP TABLE IF EXISTS responses")
                    db.execute(f"PRAGMA user_version={_LAYOUT}")
                db.execute(_SCHEMA)
            except OSError as exc:
                raise CacheError(f"cannot open the cache {self.path}: {exc}") from exc
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                if db is not None:
                    db.close()  # opened again by the next call: a damaged file is a miss each time
                raise _translated(exc, "open", self.path) from exc
            self._db = db
        return self._db

    def get(self, method: str, key: str) -> _Entry | None:
        """The stored entry, ``None`` when there is none; ``_Corrupt`` when it cannot be read back."""
        db = self._open()
        try:
            row = db.execute(
                "SELECT url, status, headers, body, request_headers, request_time, response_time, checksum"
                " FROM responses WHERE method = ? AND key = ?",
                (method, key),
            ).fetchone()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise _translated(exc, "read", self.path) from exc
        return None if row is None else _entry(f"{method} {key}", row)

    def put(self, method: str, key: str, entry: _Entry) -> None:
        """Store ``entry``; ``_Corrupt`` when the file is damaged."""
        headers = json.dumps(list(entry.headers.multi_items()))
        asked = json.dumps(dict(entry.request_headers))
        times = (entry.request_time, entry.response_time)
        checksum = _checksum(
            f"{method} {key}", entry.url.encode(), entry.status, headers.encode(), entry.body, asked.encode(), times
        )
        db = self._open()
        try:
            db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (method, key, entry.url, entry.status, headers, entry.body, asked, *times, checksum),
            )
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise _translated(exc, "write", self.path) from exc

    def delete(self, method: str, key: str) -> None:
        """Delete the entry under ``(method, key)``; ``_Corrupt`` when the file is damaged."""
        db = self._open()
        try:
            db.execute("DELETE FROM responses WHERE method = ? AND key = ?", (method, key))
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise _translated(exc, "write", self.path) from exc

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()


def _entry(under: str, row: tuple[object, ...]) -> _Entry:
    """A stored row read back, found ``under`` a method and key, every column checked; ``_Corrupt``
    says what is wrong with it."""
    url, status, headers, body, request_headers, request_time, response_time, checksum = row
    try:
        if not isinstance(status, int) or not 100 <= status <= 999:
            raise _Corrupt(f"status {status!r}")
        if not isinstance(body, bytes):
            raise _Corrupt(f"a body of type {type(body).__name__}")
        if not isinstance(request_time, int | float) or not isinstance(response_time, int | float):
            raise _Corrupt("a time that is not a number")
        url, headers, request_headers = _texts(url, headers, request_headers)
        times = (float(request_time), float(response_time))
        if checksum != _checksum(under, url, status, headers, body, request_headers, times):
            raise _Corrupt("a row whose bytes are not the ones written (its checksum differs)")
        pairs = json.loads(headers.decode())
        asked = json.loads(request_headers.decode())
        if not (isinstance(pairs, list) and all(_is_pair(pair) for pair in pairs)):
            raise _Corrupt("response headers that are not (name, value) pairs")
        if not (isinstance(asked, dict) and all(isinstance(v, str) for v in asked.values())):
            raise _Corrupt("request headers that are not a map of names to values")
        return _Entry(url.decode(), status, Headers(pairs), body, asked, *times)
    except ValueError as exc:  # JSON and UTF-8 errors both
        raise _Corrupt(str(exc)) from None


def _checksum(
    under: str,
    url: bytes,
    status: int,
    headers: bytes,
    body: bytes,
    request_headers: bytes,
    times: tuple[float, float],
) -> int:
    """A CRC-32 of a row's columns and the method and key it is stored ``under``, each length-prefixed:
    SQLite checks the structure of its pages, not the bytes a row holds, so a flipped byte in a body
    would otherwise be served, or a damaged index serve one page's row for another."""
    crc = zlib.crc32(struct.pack("<qdd", status, *times))
    for column in (under.encode(), url, headers, body, request_headers):
        crc = zlib.crc32(column, zlib.crc32(len(column).to_bytes(8, "little"), crc))
    return crc


def _texts(*values: object) -> tuple[bytes, ...]:
    """Text columns as the file holds them (UTF-8 bytes: ``text_factory``), each checked to be so."""
    texts = tuple(value for value in values if isinstance(value, bytes))
    if len(texts) != len(values):
        raise _Corrupt("a text column that holds no text")
    return texts


def _is_pair(pair: object) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)


class CachingBackend(Forwarding):
    """Wraps ``backend``: answers from responses stored in the folder ``path`` when the policy allows.

        Crawler(router, backend=CachingBackend(HttpBackend(), ".spire-cache"))

    ``expire`` (seconds or a ``timedelta``) bounds how long any stored response is used, whatever the
    policy; ``clock`` (wall-clock seconds, as HTTP dates are) is injected for tests. ``stats`` counts
    what the cache did. ``redact`` names the headers stored as ``[redacted]`` (and keyed by hash);
    extend the default with ``REDACTED_HEADERS | {"x-session"}``. ``keep_secrets=True`` stores every
    header and URL as it was. Closing it closes the wrapped backend too.
    """

    def __init__(
        self,
        backend: Backend,
        path: str | Path,
        *,
        policy: CachePolicy = "dev",
        expire: float | timedelta | None = None,
        clock: Callable[[], float] = time.time,
        redact: Collection[str] = REDACTED_HEADERS,
        keep_secrets: bool = False,
    ) -> None:
        if policy not in ("dev", "http"):
            raise ConfigError(f"the cache policy is 'dev' or 'http', not {policy!r}")
        self.backend = backend
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"the cache is a folder, and {self.path} is a file")
        self.policy = policy
        self.expire = seconds(expire)
        self.clock = clock
        self.stats = CacheStats()
        #: The headers stored as ``[redacted]``, lower case.
        self.redact = frozenset(name.lower() for name in redact)
        self.keep_secrets = keep_secrets
        self._keyed = self.redact | _CREDENTIALS
        self._store = _Store(self.path / DATABASE)
        self._storable = _storable_http if policy == "http" else _storable_dev
        self._blocking = SerialThread()
        self._damage_logged = False

    def __repr__(self) -> str:
        return f"CachingBackend({self.backend!r}, {str(self.path)!r}, policy={self.policy!r})"

    def key(self, seed: Seed) -> str:
        """The key ``seed``'s response is stored under: its unique key, and a hash of the credentials it sends."""
        secrets = sorted(
            (name.lower(), value) for name, value in (seed.headers or {}).items() if name.lower() in self._keyed
        )
        credentials = userinfo(seed.url)
        if not secrets and not credentials:
            return seed.unique_key
        digest = hashlib.sha256(json.dumps([credentials, secrets]).encode()).hexdigest()
        return f"{seed.unique_key} credentials:{digest}"

    async def _lookup(self, seed: Seed, key: str) -> _Entry | None:
        try:
            return await self._blocking.run(self._store.get, seed.method, key)
        except _Corrupt as exc:
            self.stats.corrupt += 1
            if self.stats.corrupt == 1:
                logger.warning(
                    "the cache %s holds a corrupt row for %s %s (%s): deleted, and the response fetched again",
                    self._store.path,
                    seed.method,
                    key,
                    exc,
                )
            await self._change(self._store.delete, seed.method, key)
            return None

    async def _change(self, change: Callable[[str, str, Unpack[Ts]], None], method: str, key: str, *args: *Ts) -> bool:
        """Write ``change`` (a put or a delete) to the file; ``False`` when the file is damaged, and the
        change is dropped: the response is served all the same, only not kept."""
        try:
            await self._blocking.run(change, method, key, *args)
        except _Corrupt as exc:
            if not self._damage_logged:
                self._damage_logged = True
                logger.warning("the cache %s is damaged (%s): responses are fetched, not stored", self._store.path, exc)
            return False
        return True

    async def fetch(self, seed: Seed) -> Response:
        """The stored response when it may be used, else the wrapped backend's (stored when allowed)."""
        key = self.key(seed)
        entry = await self._lookup(seed, key)
        now = self.clock()
        if entry is not None and self.expire is not None and now - entry.response_time > self.expire:
            entry = None
        if entry is not None and _varies(entry, seed, self._keyed):
            entry = None
        if entry is not None and self.policy == "dev":
            self.stats.hits += 1
            return _served(entry, seed)
        if entry is not None:
            freshness = Freshness.of(
                entry.headers, request_time=entry.request_time, response_time=entry.response_time, now=now
            )
            asked = _directives(seed.headers)
            if freshness.fresh and "no-cache" not in _directives(entry.headers) and "no-cache" not in asked:
                self.stats.hits += 1
                return _served(entry, seed)
            conditions = _conditions(entry)
            if conditions:
                return await self._revalidate(seed, key, entry, conditions)
        return await self._fetch_and_store(seed, key)

    async def _fetch_and_store(self, seed: Seed, key: str) -> Response:
        requested = self.clock()
        response = await self.backend.fetch(seed)
        self.stats.misses += 1
        await self._store_fetched(seed, key, response, requested)
        return response

    async def _store_fetched(self, seed: Seed, key: str, response: Response, requested: float) -> bool:
        """Store a response fetched from the site when the policy allows it; whether it did."""
        if not self._storable(seed, response):
            return False
        entry = _Entry(
            seed.url,
            response.status,
            response.headers,
            response.body,
            dict(seed.headers or {}),
            requested,
            self.clock(),
        )
        if not await self._change(self._store.put, seed.method, key, self._written(entry)):
            return False
        self.stats.stored += 1
        return True

    def _written(self, entry: _Entry) -> _Entry:
        """``entry`` as the file holds it: secret headers redacted and no credentials in its URL, unless
        ``keep_secrets``."""
        if self.keep_secrets:
            return entry
        return dataclasses.replace(
            entry,
            url=without_userinfo(entry.url),
            headers=Headers(redact_headers(entry.headers.multi_items(), self.redact)),
            request_headers=dict(redact_headers(entry.request_headers.items(), self._keyed)),
        )

    async def _revalidate(self, seed: Seed, key: str, entry: _Entry, conditions: dict[str, str]) -> Response:
        requested = self.clock()
        conditional = dataclasses.replace(seed, headers={**(seed.headers or {}), **conditions})
        response = await self.backend.fetch(conditional)
        if response.status != 304:
            self.stats.misses += 1
            if not await self._store_fetched(seed, key, response, requested):
                await self._change(self._store.delete, seed.method, key)
            return response
        refreshed = dataclasses.replace(
            entry,
            headers=_refreshed(entry.headers, response.headers),
            request_time=requested,
            response_time=self.clock(),
        )
        await self._change(self._store.put, seed.method, key, self._written(refreshed))
        self.stats.revalidated += 1
        served = _served(refreshed, seed)
        served.revalidated = True
        served.elapsed = response.elapsed
        return served

    async def aclose(self) -> None:
        """Close the cache's file and the wrapped backend."""
        with anyio.CancelScope(shield=True):
            await self._blocking.run(self._store.close)
        await self.backend.aclose()


def _conditions(entry: _Entry) -> dict[str, str]:
    """The headers of a conditional request that asks whether the stored response is still current."""
    conditions: dict[str, str] = {}
    etag = entry.headers.get("etag")
    if etag:
        conditions["If-None-Match"] = etag
    modified = entry.headers.get("last-modified")
    if modified:
        conditions["If-Modified-Since"] = modified
    return conditions


def _served(entry: _Entry, seed: Seed) -> Response:
    """The stored response as the answer to ``seed``: with ``seed``'s URL, never the stored one."""
    response = Response(url=seed.url, status=entry.status, headers=entry.headers, body=entry.body, seed=seed)
    response.from_cache = True
    return response
