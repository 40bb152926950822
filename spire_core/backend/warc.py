"""WARC: record a crawl's requests and responses as WARC 1.1 files, and replay them as the site.

    recorder = WarcRecorder(HttpBackend(), "archive/")            # archive/spire-...-00000.warc.gz
    Crawler(router, backend=recorder).run(["https://example.org/"])

    Crawler(router, backend=WarcReplay("archive/")).run(["https://example.org/"])   # offline

Needs the ``warc`` extra (``warcio``). Every record is gzipped on its own, each file opens with a
``warcinfo`` record, and a file that passes ``max_size`` is closed and the next one begun.

Bodies: a response record holds the payload as it came over the wire (``response.wire_body``), with
its ``Content-Encoding`` and the ``WARC-Payload-Digest`` of those bytes, as archivists' tools expect.
The HTTP client has already undone any chunked framing, so ``Transfer-Encoding`` is left out and
``Content-Length`` is the payload's length. Where a backend has no wire bytes (the browser, a test
seam), the record holds the decoded body with headers that match it: ``Content-Encoding`` is left
out (kept as ``X-Spire-Decoded-Content-Encoding``), and the record says so in its WARC header
``WARC-Spire-Payload: decoded``. A request record holds what the seed asked for (method, URL, the
seed's own headers and body, and a ``Host`` of the URL's host and port), not the headers the HTTP
client added.

Secrets: WARC files are made to be shared, so by default the values of the headers named in
``redact`` (``REDACTED_HEADERS``: ``Authorization``, ``Cookie``, ``Set-Cookie``, API keys...) are
written as ``[redacted]`` in request and response records, and ``WARC-Target-URI`` carries no user
name or password. ``keep_secrets=True`` archives everything as it was sent and received.

Replay reads the payload and decodes whatever its headers say (chunked framing, gzip, deflate, br)
with spire's bounded decoder, so archives from other tools (wget, Heritrix) replay too, and a body
past ``max_body_size`` is a ``BodyLimitError`` however small its compressed form.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import time
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import anyio

from spire_core.backend.abilities import Forwarding
from spire_core.backend.base import Backend
from spire_core.errors import BodyLimitError, ConfigError, FetchError, SpireError
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from spire_core.session.decoding import ContentDecoder
from spire_core.session.redact import REDACTED_HEADERS, redact_headers, without_userinfo
from spire_core.threads import SerialThread

try:
    from warcio.archiveiterator import ArchiveIterator
    from warcio.bufferedreaders import ChunkedDataReader
    from warcio.exceptions import ArchiveLoadFailed
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter
except ImportError as exc:  # pragma: no cover - the extra is installed for the tests
    raise ImportError("WARC needs the warc extra: pip install 'spire-crawl[warc]'") from exc

__all__ = ["NotArchived", "WarcError", "WarcRecorder", "WarcReplay"]

logger = logging.getLogger("spire.warc")
logger.addHandler(logging.NullHandler())

DEFAULT_MAX_SIZE = 1024**3
#: The replay's default body cap: ``HttpBackend``'s.
DEFAULT_MAX_BODY = 100 * 1024 * 1024
_SOFTWARE = "spire/0.1 (https://pypi.org/project/spire-crawl/)"
#: Headers that describe the wire form of a body the recorder stores decoded.
_WIRE_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length"})
#: Headers that describe a framing the HTTP client undid before spire saw the payload.
_FRAMING = frozenset({"transfer-encoding", "content-length"})
#: The WARC header that marks a record holding a decoded body, not the wire's.
_PAYLOAD_FIELD = "WARC-Spire-Payload"
_PIECE = 64 * 1024


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


def _wire_headers(response: Response, payload: bytes) -> list[tuple[str, str]]:
    """The response's headers as received, less the framing the HTTP client undid."""
    headers = [(name, value) for name, value in response.headers.multi_items() if name.lower() not in _FRAMING]
    headers.append(("Content-Length", str(len(payload))))
    return headers


def _decoded_headers(response: Response) -> list[tuple[str, str]]:
    """The response's headers as they describe the decoded body the record holds."""
    headers = [(name, value) for name, value in response.headers.multi_items() if name.lower() not in _WIRE_HEADERS]
    coding = response.headers.get("content-encoding")
    if coding and coding.strip().lower() != "identity":
        headers.append(("X-Spire-Decoded-Content-Encoding", coding))
    headers.append(("Content-Length", str(len(response.body))))
    return headers


def _request_headers(seed: Seed) -> list[tuple[str, str]]:
    parts = urlsplit(seed.url)
    host = parts.netloc.rpartition("@")[2]  # a Host header never holds a user name or password
    headers = [("Host", host)]
    headers += [(name, value) for name, value in (seed.headers or {}).items() if name.lower() != "host"]
    if seed.body:
        headers.append(("Content-Length", str(len(seed.body))))
    return headers


class WarcRecorder(Forwarding):
    """Wraps ``backend`` and writes every request and response it sees as WARC 1.1 records.

        WarcRecorder(HttpBackend(), "archive/", prefix="shop", max_size=100 * 2**20)

    Files are named ``{prefix}-{UTC time to the microsecond}-{serial}.warc.gz`` in the folder ``path``. A response is
    written before ``fetch`` returns it; closing the recorder closes the file and the wrapped backend.
    ``redact`` names the headers written as ``[redacted]`` (extend the default with
    ``REDACTED_HEADERS | {"x-session"}``); ``keep_secrets=True`` writes every header and URL as it was.

    A pair of records that cannot be written (a full disk) fails its page with ``WarcError`` and is
    cut from the file, so the file stays valid; ``failed`` counts them, and closing the recorder logs
    one line on ``spire.warc`` saying how many were lost. Closing never raises for a file it cannot
    finish: it logs that too.
    """

    def __init__(
        self,
        backend: Backend,
        path: str | Path,
        *,
        prefix: str = "spire",
        max_size: int = DEFAULT_MAX_SIZE,
        clock: Callable[[], float] = time.time,
        redact: Collection[str] = REDACTED_HEADERS,
        keep_secrets: bool = False,
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
        #: The headers written as ``[redacted]``, lower case.
        self.redact = frozenset(name.lower() for name in redact)
        self.keep_secrets = keep_secrets
        #: The files written so far, first first.
        self.files: list[Path] = []
        self.records = 0
        #: Request and response pairs that could not be written; ``last_error`` says why.
        self.failed = 0
        self.last_error: OSError | None = None
        self._file: IO[bytes] | None = None
        self._blocking = SerialThread()

    def __repr__(self) -> str:
        return f"WarcRecorder({self.backend!r}, {str(self.path)!r})"

    async def fetch(self, seed: Seed) -> Response:
        """Fetch through the wrapped backend, write the request and the response, return the response."""
        response = await self.backend.fetch(seed)
        await self._blocking.run(self._write, seed, response, self.clock())
        return response

    async def aclose(self) -> None:
        """Close the current file and the wrapped backend; a file that cannot be finished is logged."""
        with anyio.CancelScope(shield=True):
            await self._blocking.run(self._finish)
        await self.backend.aclose()

    # -- in a worker thread -----------------------------------------------------------------------

    def _finish(self) -> None:
        try:
            self._close()
        except OSError as exc:
            self.failed += 1
            self.last_error = exc
        if self.failed:
            logger.error(
                "WARC: %d response(s) could not be written to %s (%s); the files hold the %d records written before",
                self.failed,
                self.path,
                self.last_error,
                self.records,
            )

    def _secret(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return headers if self.keep_secrets else redact_headers(headers, self.redact)

    def _render(self, seed: Seed, response: Response, now: float) -> bytes:
        """The request and response records of one fetch, each its own gzip member."""
        out = io.BytesIO()
        writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
        date = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        uri = seed.url if self.keep_secrets else without_userinfo(seed.url)
        fields = {"WARC-Date": date}
        if response.wire_body is not None:
            payload, headers = response.wire_body, _wire_headers(response, response.wire_body)
        else:
            payload, headers = response.body, _decoded_headers(response)
            fields[_PAYLOAD_FIELD] = "decoded"
        http = StatusAndHeaders(
            f"{response.status} {_reason(response.status)}", self._secret(headers), protocol="HTTP/1.1"
        )
        record = writer.create_warc_record(
            uri, "response", payload=io.BytesIO(payload), length=None, http_headers=http, warc_headers_dict=fields
        )
        parts = urlsplit(seed.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request_http = StatusAndHeaders(
            f"{seed.method} {target} HTTP/1.1", self._secret(_request_headers(seed)), is_http_request=True
        )
        request = writer.create_warc_record(
            uri, "request", payload=io.BytesIO(seed.body or b""), http_headers=request_http
        )
        writer.write_request_response_pair(request, record)
        return out.getvalue()

    def _write(self, seed: Seed, response: Response, now: float) -> None:
        data = self._render(seed, response, now)
        try:
            file = self._current(now)
            _append(file, data)
            self.records += 2
            if file.tell() >= self.max_size:
                self._close()
        except OSError as exc:
            self.failed += 1
            self.last_error = exc
            raise WarcError(f"cannot write WARC records to {self.path}: {exc}", url=seed.url) from exc

    def _current(self, now: float) -> IO[bytes]:
        """The file records go to now, a new file begun (with its warcinfo record) if none is open."""
        if self._file is None:
            self.path.mkdir(parents=True, exist_ok=True)
            stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d%H%M%S%f")
            name = f"{self.prefix}-{stamp}-{len(self.files):05d}.warc.gz"
            # Unbuffered: a failed write leaves nothing behind in a buffer for a later flush to retry.
            file = open(self.path / name, "xb", buffering=0)  # noqa: SIM115 - closed by _close
            try:
                out = io.BytesIO()
                writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
                info = writer.create_warcinfo_record(
                    name, {"software": _SOFTWARE, "format": "WARC File Format 1.1", "isPartOf": self.prefix}
                )
                writer.write_record(info)
                _append(file, out.getvalue())
            except OSError:
                file.close()
                with contextlib.suppress(OSError):
                    os.unlink(self.path / name)
                raise
            self.records += 1
            self._file = file
            self.files.append(self.path / name)
        return self._file

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                os.fsync(file.fileno())
            finally:
                file.close()


def _append(file: IO[bytes], data: bytes) -> None:
    """Write ``data`` at the end of ``file`` whole, or cut the file back to where it was and raise."""
    start = file.tell()
    try:
        view = memoryview(data)
        while view:
            written = file.write(view)
            if not written:
                raise OSError(f"wrote nothing of {len(view)} bytes")
            view = view[written:]
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(file.fileno(), start)
            file.seek(start)
        raise


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
    for raises ``NotArchived`` (category ``not_archived``). Replayed responses have ``from_cache`` set,
    their headers as recorded and their body decoded, up to ``max_body_size`` decoded bytes (past it,
    ``BodyLimitError``, as ``HttpBackend`` does). The files are indexed on the first fetch and read a
    record at a time.
    """

    def __init__(self, path: str | Path, *, max_body_size: int = DEFAULT_MAX_BODY) -> None:
        if max_body_size < 0:
            raise ConfigError(f"max_body_size is a number of bytes, at least 0, not {max_body_size}")
        self.path = Path(path)
        self.max_body_size = max_body_size
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
        status, headers, body = await self._blocking.run(_read_response, location, seed.url, self.max_body_size)
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


def _read_response(location: _Location, url: str, cap: int) -> tuple[int, Headers, bytes]:
    try:
        with open(location.file, "rb") as stream:
            stream.seek(location.offset)
            record = next(iter(ArchiveIterator(stream)))
            http = record.http_headers
            status = int(http.get_statuscode())
            headers = Headers(http.headers)
            decoded = record.rec_headers.get_header(_PAYLOAD_FIELD) == "decoded"
            return status, headers, _payload(record.raw_stream, headers, decoded=decoded, url=url, cap=cap)
    except (ArchiveLoadFailed, OSError, ValueError, StopIteration) as exc:
        raise WarcError(f"cannot read the WARC file {location.file}: {exc}") from exc


def _payload(raw: Any, headers: Headers, *, decoded: bool, url: str, cap: int) -> bytes:
    """A record's payload, its chunked framing and content coding undone, within ``cap`` decoded bytes.

    warcio's own ``content_stream`` inflates without a bound; spire's decoder yields 64 KiB pieces,
    each counted before it is kept, so a small bomb stops at the cap.
    """
    if headers.get("transfer-encoding", "").strip().lower() == "chunked":
        raw = ChunkedDataReader(raw)  # no decomp_type: the coding is undone below, bounded
    coding = None if decoded else headers.get("content-encoding")
    decoder = ContentDecoder(coding, url=url)
    pieces: list[bytes] = []
    size = 0
    while chunk := raw.read(_PIECE):
        for piece in decoder.feed(chunk):
            size += len(piece)
            if size > cap:
                raise BodyLimitError(f"the archived body passed the {cap}-byte cap", url=url)
            pieces.append(piece)
    return b"".join(pieces)
