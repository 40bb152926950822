"""Content decoding with bounded output: a compression bomb never inflates past one small piece.

``ContentDecoder(headers["content-encoding"])`` undoes gzip, deflate and (with ``brotli`` 1.2 or
later installed) br, in the order the header lists them. ``feed`` yields decoded pieces of at most
64 KiB each, so the caller checks its body cap after every piece and a 1 KB bomb costs 64 KiB of
memory, not gigabytes. A coding spire did not offer (``OFFERED``) is refused with ``DecodeError``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from spire_core.errors import DecodeError

__all__ = ["OFFERED", "ContentDecoder"]

PIECE = 64 * 1024

_ERRORS: tuple[type[Exception], ...] = (zlib.error,)
try:
    import brotli as _brotli

    _HAS_BROTLI = hasattr(_brotli.Decompressor(), "can_accept_more_data")  # 1.2: bounded output
    _ERRORS = (zlib.error, _brotli.error)
except ImportError:  # pragma: no cover - brotli is a dev dependency
    _HAS_BROTLI = False

#: The codings spire can decode with bounded output, as its ``Accept-Encoding`` offers them.
OFFERED = "gzip, deflate, br" if _HAS_BROTLI else "gzip, deflate"


class _Stage(Protocol):
    def feed(self, data: bytes) -> Iterator[bytes]: ...


class _Zlib:
    """gzip or deflate; a deflate body may come with the zlib wrapper (as specified) or raw (as IIS sends)."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._raw_fallback = coding == "deflate"
        self._d: Any = zlib.decompressobj(16 + zlib.MAX_WBITS if coding != "deflate" else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._d.decompress(data, PIECE)
            except zlib.error:
                if not self._raw_fallback:
                    raise
                self._raw_fallback = False
                self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self._raw_fallback = False
            data = self._d.unconsumed_tail
            if out:
                yield out
            if self._d.eof or (not data and len(out) < PIECE):
                return


class _Brotli:
    def __init__(self) -> None:
        self._d: Any = _brotli.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        out = self._d.process(data, output_buffer_limit=PIECE)
        while True:
            if out:
                yield out
            if self._d.can_accept_more_data() or self._d.is_finished():
                return
            out = self._d.process(b"", output_buffer_limit=PIECE)


class ContentDecoder:
    """Decodes a body's content codings as its chunks arrive, one bounded piece at a time."""

    def __init__(self, content_encoding: str | None, *, url: str | None = None) -> None:
        self._url = url
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        self._stages: list[_Stage] = []
        for coding in reversed([c for c in codings if c and c != "identity"]):
            self._stages.append(self._stage(coding))

    def _stage(self, coding: str) -> _Stage:
        if coding in ("gzip", "x-gzip", "deflate"):
            return _Zlib(coding)
        if coding == "br" and _HAS_BROTLI:
            return _Brotli()
        raise DecodeError(f"content coding {coding!r} was not offered (spire accepts {OFFERED})", url=self._url)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of the next raw chunk, each at most 64 KiB (an unencoded chunk as it is)."""
        pieces: Iterable[bytes] = (data,)
        for stage in self._stages:
            pieces = _through(stage, pieces)
        try:
            yield from pieces
        except _ERRORS as exc:
            raise DecodeError(f"the body's content coding could not be decoded: {exc}", url=self._url) from None


def _through(stage: _Stage, pieces: Iterable[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield from stage.feed(piece)
