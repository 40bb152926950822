"""``RequestRecord``: what one request did, as the request log writes it and ``Metrics`` counts it."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["BodyEndRecord", "RequestRecord"]


@dataclasses.dataclass(frozen=True, slots=True)
class RequestRecord:
    """What one request did: the fields of its log line."""

    id: str
    method: str
    url: str
    redirects: int
    status: int | None
    version: str | None
    attempts: int
    elapsed_ms: int
    tag: str | None
    proxy: str | None
    identity: str | None
    outcome: str
    bytes: int = 0

    def line(self) -> str:
        """The ``key=value`` log line (written out by hand: ``dataclasses.asdict`` would cost 10 times more)."""
        return (
            f"request id={self.id} method={self.method} url={self.url} redirects={self.redirects} "
            f"status={_shown(self.status)} version={_shown(self.version)} attempts={self.attempts} "
            f"elapsed_ms={self.elapsed_ms} tag={_shown(self.tag)} proxy={_shown(self.proxy)} "
            f"identity={_shown(self.identity)} outcome={self.outcome}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, for JSON."""
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS = tuple(field.name for field in dataclasses.fields(RequestRecord))


@dataclasses.dataclass(frozen=True, slots=True)
class BodyEndRecord:
    """The end of a streamed body: its own event, with the ``id`` of its request's line.

    ``outcome`` is ``ok`` (read to its end), ``dropped`` (closed before it) or the error's category.
    """

    id: str
    url: str
    bytes: int
    elapsed_ms: int
    outcome: str

    def line(self) -> str:
        return (
            f"body id={self.id} url={self.url} bytes={self.bytes} elapsed_ms={self.elapsed_ms} outcome={self.outcome}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {"event": "body_end", **dataclasses.asdict(self)}


def _shown(value: object) -> object:
    return "-" if value is None else value
