"""WARC: record a crawl's requests and responses as WARC 1.1 files, and replay them as the site.

    recorder = WarcRecorder(HttpBackend(), "archive/")            # archive/spire-...-00000.warc.gz
    Crawler(router, backend=recorder).run(["https://example.org/"])

    Crawler(router, backend=WarcReplay("archive/")).run(["https://example.org/"])   # offline

Needs the ``warc`` extra (``warcio``). Every record is gzipped on its own, each file opens with a
``warcinfo`` record, and a file that passes ``max_size`` is closed and the next one begun.

Bodies: spire's ``Response`` holds the *decoded* body (the HTTP client undid any content coding),
and the raw bytes from the wire are gone. The recorder therefore stores the decoded body and writes
the HTTP headers to match it: ``Content-Encoding`` and ``Transfer-Encoding`` are left out (the
original coding is kept as ``X-Spire-Decoded-Content-Encoding``) and ``Content-Length`` is the
decoded length. A request record holds what the seed asked for (method, URL, the seed's own headers
and body), not the headers the HTTP client added. Replay decodes whatever a record's headers say, so
archives from other tools (wget, Heritrix) replay too.
"""

from __future__ import annotations

import dataclasses
import io
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import anyio

from spire_core.backend.abilities import Forwarding
from spire_core.backend.base import Backend
from spire_core.errors import ConfigError, FetchError, SpireError
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from spire_core.threads import SerialThread

try:
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter
except ImportError as exc:  # pragma: no cover - the extra is installed for the tests
    raise ImportError("WARC needs the warc extra: pip install 'spire-crawl[warc]'") from exc

__all__ = ["NotArchived", "WarcError", "WarcRecorder", "WarcReplay"]

DEFAULT_MAX_SIZE = 1024**3
_SOFTWARE = "spire/0.1 (https://pypi.org/project/spire-crawl/)"
#: Headers that describe the wire form of a body the recorder stores decoded.
_WIRE_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length"})


class WarcError(SpireError):
    """A WARC file cannot be written or read."""

    category = "warc"


class NotArchived(FetchError):
    """The archive being replayed holds no response for this request: offline, it is like a 404."""

    category = "not_archived"


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _response_headers(response: Response) -> list[tuple[str, str]]:
    """The response's headers as they describe the decoded body the record holds."""
    headers = [(name, value) for name, value in response.headers.multi_items() if name.lower() not in _WIRE_HEADERS]
    coding = response.headers.get("content-encoding")
    if coding and coding.strip().lower() != "identity":
        headers.append(("X-Spire-Decoded-Content-Encoding", coding))
    headers.append(("Content-Length", str(len(response.body))))
    return headers


def _request_headers(seed: Seed) -> list[tuple[str, str]]:
    parts = urlsplit(seed.url)
    headers = [("Host", parts.netloc)]
    headers += [(name, value) for name, value in (seed.headers or {}).items() if name.lower() != "host"]
    if seed.body:
        headers.append(("Content-Length", str(len(seed.body))))
    return headers


class WarcRecorder(Forwarding):
    """Wraps ``backend`` and writes every request and response it sees as WARC 1.1 records.

        WarcRecorder(HttpBackend(), "archive/", prefix="shop", max_size=100 * 2**20)

    Files are named ``{prefix}-{UTC time to the microsecond}-{serial}.warc.gz`` in the folder ``path``. A response is
    written before ``fetch`` returns it; closing the recorder closes the file and the wrapped backend.
    """

    def __init__(
        self,
        backend: Backend,
        path: str | Path,
        *,
        prefix: str = "spire",
        max_size: int = DEFAULT_MAX_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_size < 1:
            raise ConfigError(f"max_size must be at least 1 byte, not {max_size}")
        self.backend = backend
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"WARC files go in a folder, and {self.path} is a file")
        self.prefix = prefix
        self.max_size = max_size
        self.clock = clock
        #: The files written so far, first first.
        self.files: list[Path] = []
        self.records = 0
        self._file: IO[bytes] | None = None
        self._writer: Any = None
        self._blocking = SerialThread()

    def __repr__(self) -> str:
        return f"WarcRecorder({self.backend!r}, {str(self.path)!r})"

    async def fetch(self, seed: Seed) -> Response:
        """Fetch through the wrapped backend, write the request and the response, return the response."""
        response = await self.backend.fetch(seed)
        await self._blocking.run(self._write, seed, response, self.clock())
        return response

    async def aclose(self) -> None:
        """Close the current file and the wrapped backend."""
        with anyio.CancelScope(shield=True):
            await self._blocking.run(self._close)
        await self.backend.aclose()

    # -- in a worker thread -----------------------------------------------------------------------

    def _write(self, seed: Seed, response: Response, now: float) -> None:
        try:
            writer, file = self._current(now)
            date = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            http = StatusAndHeaders(
                f"{response.status} {_reason(response.status)}", _response_headers(response), protocol="HTTP/1.1"
            )
            record = writer.create_warc_record(
                seed.url,
                "response",
                payload=io.BytesIO(response.body),
                length=None,
                http_headers=http,
                warc_headers_dict={"WARC-Date": date},
            )
            parts = urlsplit(seed.url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            request_http = StatusAndHeaders(
                f"{seed.method} {target} HTTP/1.1", _request_headers(seed), is_http_request=True
            )
            request = writer.create_warc_record(
                seed.url, "request", payload=io.BytesIO(seed.body or b""), http_headers=request_http
            )
            writer.write_request_response_pair(request, record)
            file.flush()
            self.records += 2
            if file.tell() >= self.max_size:
                self._close()
        except OSError as exc:
            raise WarcError(f"cannot write WARC records to {self.path}: {exc}") from exc

    def _current(self, now: float) -> tuple[Any, IO[bytes]]:
        """The writer and file records go to now, a new file begun if none is open."""
        if self._writer is None or self._file is None:
            self.path.mkdir(parents=True, exist_ok=True)
            stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d%H%M%S%f")
            name = f"{self.prefix}-{stamp}-{len(self.files):05d}.warc.gz"
            file = open(self.path / name, "xb")  # noqa: SIM115 - closed by _close
            writer = WARCWriter(file, gzip=True, warc_version="WARC/1.1")
            info = writer.create_warcinfo_record(
                name, {"software": _SOFTWARE, "format": "WARC File Format 1.1", "isPartOf": self.prefix}
            )
            writer.write_record(info)
            self.records += 1
            self._file, self._writer = file, writer
            self.files.append(self.path / name)
        return self._writer, self._file

    def _close(self) -> None:
        file, self._file, self._writer = self._file, None, None
        if file is not None:
            file.flush()
            os.fsync(file.fileno())
            file.close()


@dataclasses.dataclass(frozen=True, slots=True)
class _Location:
    file: Path
    offset: int


def _warc_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.name.endswith((".warc", ".warc.gz")))
    if path.is_file():
        return [path]
    raise ConfigError(f"no WARC file or folder at {path}")


class WarcReplay:
    """A backend that answers from a WARC file, or a folder of them, as if it were the site.

        Crawler(router, backend=WarcReplay("archive/")).run(["https://example.org/"])

    Responses are found by the request's method and unique key (the canonical URL for a GET); when a
    URL was recorded more than once, the last response wins. A request the archive has no response
    for raises ``NotArchived`` (category ``not_archived``). Replayed responses have ``from_cache`` set.
    The files are indexed on the first fetch and read a record at a time.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._index: dict[tuple[str, str], _Location] | None = None
        self._blocking = SerialThread()

    def __repr__(self) -> str:
        return f"WarcReplay({str(self.path)!r})"

    async def fetch(self, seed: Seed) -> Response:
        """The archived response to ``seed``; ``NotArchived`` when there is none."""
        index = self._index
        if index is None:
            index = self._index = await self._blocking.run(self._build_index)
        location = index.get((seed.method, seed.unique_key))
        if location is None:
            raise NotArchived("the archive holds no response for this request", url=seed.url)
        status, headers, body = await self._blocking.run(_read_response, location)
        response = Response(url=seed.url, status=status, headers=headers, body=body, seed=seed)
        response.from_cache = True
        return response

    async def aclose(self) -> None:
        """Nothing stays open between fetches."""

    def _build_index(self) -> dict[tuple[str, str], _Location]:
        responses: dict[str, tuple[str, _Location]] = {}
        requests: dict[str, tuple[str, bytes]] = {}
        for file in _warc_files(self.path):
            for record_id, kind, url, location, method, body in _records(file):
                if kind == "response":
                    responses[record_id] = (url, location)
                elif kind == "request":
                    requests[record_id] = (method, body)
        index: dict[tuple[str, str], _Location] = {}
        for record_id, (url, location) in responses.items():
            method, body = requests.get(record_id, ("GET", b""))
            try:
                seed = Seed(url, method=method, body=body or None)
            except SpireError:
                continue  # a URL spire cannot crawl is one it will never ask for
            index[(seed.method, seed.unique_key)] = location
        return index


def _records(file: Path) -> Iterator[tuple[str, str, str, _Location, str, bytes]]:
    """``(response id, type, URL, location, method, request body)`` for each request and response record.

    A request's id is the id of the response it is concurrent to, so the two pair up.
    """
    try:
        with open(file, "rb") as stream:
            records = ArchiveIterator(stream)
            for record in records:
                kind = record.rec_type
                if kind not in ("response", "request"):
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI") or ""
                if kind == "response":
                    location = _Location(file, records.get_record_offset())
                    yield record.rec_headers.get_header("WARC-Record-ID") or "", kind, url, location, "GET", b""
                else:
                    body = record.content_stream().read()  # before the offset is asked: that skips the record
                    location = _Location(file, records.get_record_offset())
                    concurrent = record.rec_headers.get_header("WARC-Concurrent-To") or ""
                    method = record.http_headers.protocol if record.http_headers else "GET"
                    yield concurrent, kind, url, location, method.upper(), body
    except (ArchiveLoadFailed, OSError, ValueError) as exc:
        raise WarcError(f"cannot read the WARC file {file}: {exc}") from exc


def _read_response(location: _Location) -> tuple[int, Headers, bytes]:
    try:
        with open(location.file, "rb") as stream:
            stream.seek(location.offset)
            record = next(iter(ArchiveIterator(stream)))
            http = record.http_headers
            status = int(http.get_statuscode())
            return status, Headers(http.headers), record.content_stream().read()
    except (ArchiveLoadFailed, OSError, ValueError, StopIteration) as exc:
        raise WarcError(f"cannot read the WARC file {location.file}: {exc}") from exc
