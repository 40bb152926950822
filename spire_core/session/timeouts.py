"""``Timeouts``: how long each part of a request may take, and the deadline scope that enforces them.

    Timeouts(connect=5, read=10, body=30, request=60)

``connect`` bounds opening a connection; ``read`` each read of the socket; ``body`` the whole body
from its first byte, so a body that trickles or stalls fails; ``request`` the whole request from the
wait for a host-limit slot to the last byte of the body, so nothing holds a slot for ever (a server
sending its headers one byte at a time included). Every one is in seconds (float or ``timedelta``);
``None`` means no limit.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING

import anyio

from spire_core.errors import ConfigError, FetchTimeout
from spire_core.outcome import seconds

if TYPE_CHECKING:
    import httpx

__all__ = ["Timeouts", "deadline", "expired"]

Duration = float | timedelta
_FIELDS = ("connect", "read", "body", "request")


@dataclasses.dataclass(frozen=True, slots=True)
class Timeouts:
    """Connect, per-read, whole-body and whole-request timeouts, in seconds."""

    connect: Duration | None = 10.0
    read: Duration | None = 30.0
    body: Duration | None = 60.0
    request: Duration | None = 120.0
    #: Each timeout in seconds, worked out once: ``seconds`` is asked twice a request.
    _seconds: dict[str, float | None] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for field in _FIELDS:
            value = getattr(self, field)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
                raise ConfigError(f"timeout {field} is seconds (a number or timedelta), not {value!r}")
            if (seconds(value) or 0.0) <= 0:
                raise ConfigError(f"timeout {field} must be positive, not {value!r}")
        object.__setattr__(self, "_seconds", {field: seconds(getattr(self, field)) for field in _FIELDS})

    @classmethod
    def of(cls, value: Duration | Timeouts) -> Timeouts:
        """Accept a single number (connect, read and body; the request gets twice it) or a ``Timeouts``."""
        if isinstance(value, Timeouts):
            return value
        each = seconds(value)
        return cls(connect=each, read=each, body=each, request=None if each is None else 2 * each)

    def seconds(self, field: str) -> float | None:
        """One timeout in seconds (``None`` for no limit)."""
        try:
            return self._seconds[field]
        except KeyError:
            raise AttributeError(f"Timeouts has no timeout {field!r}") from None

    def httpx(self) -> httpx.Timeout:
        """The connect and read timeouts as httpx's; the body and request deadlines are spire's own."""
        import httpx  # the httpx path only

        read = self.seconds("read")
        return httpx.Timeout(connect=self.seconds("connect"), read=read, write=read, pool=None)


#: The innermost active deadline of this task, if any: when it expires (``anyio.current_time()``) and
#: its limit in seconds.
_expiry: ContextVar[tuple[float, float] | None] = ContextVar("spire_deadline_expiry", default=None)


def deadline(limit: float | None, *, url: str, what: str) -> AbstractContextManager[None]:
    """Fail the code inside with ``FetchTimeout`` (category ``timeout``) after ``limit`` seconds.

    It is a cancel scope, so it fires while the code waits (a stalled read, a host-limit queue),
    not only between reads. ``None`` means no deadline.
    """
    return _NONE if limit is None else _Deadline(limit, url, what)


_NONE: AbstractContextManager[None] = nullcontext()


def expired() -> bool:
    """Whether the innermost deadline around this task has passed (a cancel now is its timeout)."""
    innermost = _expiry.get()
    return innermost is not None and anyio.current_time() >= innermost[0]


class _Deadline:
    """One deadline: a cancel scope, unless an enclosing deadline (the crawler's, around a backend's)
    fires first, which needs no second scope. A class, not a generator: it runs twice a request."""

    __slots__ = ("_limit", "_scope", "_token", "_url", "_what")

    def __init__(self, limit: float, url: str, what: str) -> None:
        self._limit = limit
        self._url = url
        self._what = what
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> None:
        outer = _expiry.get()
        # An enclosing deadline no longer than this one, begun before it, fires first: no need to read the time.
        if outer is not None and outer[1] <= self._limit:
            return
        expires = anyio.current_time() + self._limit
        if outer is not None and outer[0] <= expires:
            return
        self._token = _expiry.set((expires, self._limit))
        scope = self._scope = anyio.CancelScope(deadline=expires)
        scope.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> bool:
        scope = self._scope
        if scope is None:
            return False
        try:
            swallowed = scope.__exit__(kind, error, trace)
        finally:
            _expiry.reset(self._token)
        if scope.cancelled_caught:  # only this scope's own expiry: a timeout raised inside keeps its message
            raise FetchTimeout(
                f"the {self._what} took longer than its {self._limit:g} s deadline", url=self._url
            ) from None
        return bool(swallowed)
