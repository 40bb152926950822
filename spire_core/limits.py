"""Per-origin politeness: ``HostLimits`` (the configuration) and ``HostGate`` (its live counters).

A request is admitted in this order: an in-flight slot of its origin; then the origin's pause and
rate spacing; then a global slot. Nothing holds a global slot while it waits for a pause or a
rate slot, and a busy or paused origin holds no crawl slot at all: the frontier simply hands out
another origin's seed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Protocol, runtime_checkable

import anyio

from spire_core import checks
from spire_core.clock import MONOTONIC, Clock, wait_on
from spire_core.errors import ConfigError
from spire_core.outcome import seconds

__all__ = ["MAX_RETRY_AFTER", "HostGate", "HostLimits", "HostStats", "SharedSlots", "parse_retry_after"]

#: The longest server-asked wait (``Retry-After``) obeyed when nothing else is configured, in seconds.
MAX_RETRY_AFTER = 300.0


@dataclasses.dataclass(frozen=True, slots=True)
class HostLimits:
    """How hard to press each origin (scheme, host, port).

    ``HostLimits()`` has no limits. A ``Crawler`` given none uses ``HostLimits.polite()``.

        HostLimits(
            max_in_flight=4,
            per_second=2.0,
            hosts={"api.shop.example": HostLimits(max_in_flight=1, per_second=0.5),
                   "*.cdn.example": HostLimits(max_in_flight=16)},
            max_total_in_flight=64,
        )

    ``hosts`` keys are host names, ``*.`` wildcards, or ``host:port`` for one origin's port.
    An override in ``hosts`` uses only its own ``max_in_flight`` and ``per_second``; a setting it
    leaves out has no limit for that host. ``pause_on`` statuses pause the origin for its
    ``Retry-After`` (seconds or an HTTP date), or ``default_pause`` seconds without one. No pause,
    and no retry a ``Retry-After`` asks for, is longer than ``max_pause``: a server asking for a day
    (or for 2100) gets the cap. The gate keeps the wait asked for too (``HostGate.asked``): a crawl
    whose retry policy's ``max_wait`` it passes fails the origin's queued seeds at once instead.
    """

    max_in_flight: int | None = None
    per_second: float | None = None
    pause_on: frozenset[int] = frozenset()
    default_pause: float | timedelta = 5.0
    max_pause: float | timedelta = MAX_RETRY_AFTER
    max_total_in_flight: int | None = None
    hosts: Mapping[str, HostLimits] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("max_in_flight", "max_total_in_flight"):
            if getattr(self, name) is not None:
                checks.count(name, getattr(self, name))
        if self.per_second is not None and not (checks.is_number(self.per_second) and 0 < self.per_second < math.inf):
            raise ConfigError(f"per_second must be a positive number, not {self.per_second!r}")
        checks.duration("default_pause", self.default_pause)
        checks.duration("max_pause", self.max_pause)
        try:
            statuses = frozenset(self.pause_on)
        except TypeError:
            raise ConfigError(f"pause_on must be a set of HTTP statuses, not {self.pause_on!r}") from None
        for status in statuses:
            if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
                raise ConfigError(f"pause_on holds HTTP statuses (100 to 599), not {status!r}")
        object.__setattr__(self, "pause_on", statuses)
        for pattern, limits in self.hosts.items():
            if (
                not isinstance(pattern, str)
                or "*" in pattern[1:]
                or (pattern.startswith("*") and not pattern.startswith("*."))
            ):
                raise ConfigError(f"a host pattern is a name or '*.' and a name, not {pattern!r}")
            if not isinstance(limits, HostLimits):
                raise ConfigError(f"hosts[{pattern!r}] must be a HostLimits, not {limits!r}")

    @classmethod
    def polite(cls) -> HostLimits:
        """The default of a ``Crawler``: 4 requests in flight per origin, pause on 429 and 503."""
        return cls(max_in_flight=4, pause_on=frozenset({429, 503}))

    def for_host(self, host: str, port: str = "") -> tuple[int | None, float | None]:
        """``(max_in_flight, per_second)`` for ``host``: an override for ``host:port``, for the host,
        the longest matching wildcard, or else the default."""
        host = host.rstrip(".").lower()
        override = self.hosts.get(f"{host}:{port}") if port else None
        if override is None:
            override = self.hosts.get(host)
        if override is None:
            best = -1
            for pattern, limits in self.hosts.items():
                if pattern.startswith("*.") and host.endswith(pattern[1:]) and len(pattern) > best:
                    override, best = limits, len(pattern)
        if override is not None:
            return override.max_in_flight, override.per_second
        return self.max_in_flight, self.per_second

    def for_origin(self, origin: str) -> tuple[int | None, float | None]:
        """``for_host`` for an origin, ``scheme://host[:port]``."""
        return self.for_host(*_split_origin(origin))


def parse_retry_after(
    value: str | None, *, now: float | None = None, max_wait: float | timedelta = MAX_RETRY_AFTER
) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delay-seconds or an HTTP date), at most
    ``max_wait``; ``None`` if malformed.

    A server may ask for anything (``99999``, a date in 2100, 400 digits): a crawler that obeyed
    would hold the seed for days or for ever, so a longer wait is cut to ``max_wait`` (five minutes
    unless told otherwise; ``HostLimits.max_pause`` for a crawl).
    """
    if not value:
        return None
    value = value.strip()
    cap = seconds(max_wait) or 0.0
    if value.isascii() and value.isdigit():
        # Compared as digits first: float() of 400 digits is infinity.
        return float(value) if len(value) < 16 and float(value) <= cap else cap
    import email.utils  # an HTTP date: rare, and the email package is not light

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None
    return min(cap, max(0.0, when.timestamp() - (time.time() if now is None else now)))


@dataclasses.dataclass(frozen=True, slots=True)
class HostStats:
    """One origin's state in the host limits; times are seconds on the gate's clock, ``time.monotonic()``
    unless it was given another (0: not paused / now)."""

    origin: str
    in_flight: int
    #: Requests waiting for a slot of this origin (a paused origin's requests count here).
    waiting: int
    paused_until: float
    next_allowed: float
    #: When the current (or last) pause began: with ``paused_until``, how long it is.
    paused_from: float = 0.0


@dataclasses.dataclass(slots=True)
class _Origin:
    limit: float
    interval: float
    in_flight: int = 0
    next_at: float = 0.0
    paused_until: float = 0.0
    paused_from: float = 0.0
    waiting: int = 0
    #: ``next_at`` before the last ``acquire`` reserved a rate slot, and what it reserved.
    before_reserve: float = 0.0
    reserved: float = 0.0
    #: When the wait the origin's last ``pause_on`` answer asked for ends, uncapped (0: none asked).
    asked_until: float = 0.0


@runtime_checkable
class SharedSlots(Protocol):
    """Host slots kept outside this process and shared by every worker of a crawl (``RedisFrontier``):
    what a request outside a lease (robots.txt) takes besides this process's own ``HostGate`` slot."""

    async def hold(self, origin: str) -> float:
        """Take a slot of ``origin``: 0 once taken, else the seconds to wait before asking again."""
        ...

    async def unhold(self, origin: str) -> None:
        """Give back a slot ``hold`` took."""
        ...


class HostGate:
    """The live counters behind one ``HostLimits``: slots in flight, rate spacing and pauses per origin."""

    def __init__(self, limits: HostLimits, *, clock: Clock = MONOTONIC) -> None:
        self.limits = limits
        #: What spacing, pauses and ``HostStats`` times are read from (a ``FakeClock`` in tests).
        self.clock = clock
        self._origins: dict[str, _Origin] = {}
        self._total = 0
        self._total_limit = limits.max_total_in_flight or math.inf
        self._changed: anyio.Event | None = None

    def _state(self, origin: str) -> _Origin:
        state = self._origins.get(origin)
        if state is None:
            max_in_flight, per_second = self.limits.for_host(*_split_origin(origin))
            state = self._origins[origin] = _Origin(
                limit=max_in_flight or math.inf,
                interval=1.0 / per_second if per_second else 0.0,
            )
        return state

    def ready_in(self, origin: str) -> float:
        """Seconds until ``origin`` can take a request: 0 now, ``inf`` until a request finishes."""
        if self._total >= self._total_limit:
            return math.inf
        state = self._state(origin)
        if state.in_flight >= state.limit:
            return math.inf
        return self._spacing(state)

    def _spacing(self, state: _Origin) -> float:
        """Seconds until an origin's pause and rate spacing let a request go."""
        now = self.clock()
        return max(0.0, state.paused_until - now, state.next_at - now)

    def acquire(self, origin: str) -> None:
        """Take a slot of ``origin`` now; only after ``ready_in(origin)`` said 0."""
        state = self._state(origin)
        state.in_flight += 1
        self._total += 1
        state.before_reserve = state.next_at
        state.next_at = state.reserved = self.clock() + state.interval

    def sending(self, origin: str) -> None:
        """The request admitted to ``origin`` goes out now: its rate spacing counts from this moment,
        so a delay between admission and sending cannot shorten the gap to the next request."""
        state = self._state(origin)
        if state.interval:
            state.next_at = max(state.next_at, self.clock() + state.interval)

    async def admit(self, origin: str) -> None:
        """Wait until ``origin`` can take a request, then take its slot."""
        state = self._state(origin)
        state.waiting += 1
        try:
            while (wait := self.ready_in(origin)) > 0:
                if self._changed is None:
                    self._changed = anyio.Event()
                await wait_on(self.clock, self._changed, wait)  # a pause on the gate's clock passes on it
        finally:
            state.waiting -= 1
        self.acquire(origin)

    async def pace(self, origin: str) -> None:
        """For a request holding a slot of ``origin`` that sends one more (a render after its page's
        fetch): wait until the origin's pause and rate spacing let it go, then space from now."""
        state = self._state(origin)
        while (wait := self._spacing(state)) > 0:
            if self._changed is None:
                self._changed = anyio.Event()
            await wait_on(self.clock, self._changed, wait)
        self.sending(origin)

    def release(self, origin: str, *, sent: bool = True) -> None:
        """Give back the slot a finished request held.

        A slot given back unused (``sent=False``: the handler needed no response) gives back the
        rate slot it reserved too, unless another request has been spaced after it since.
        """
        state = self._state(origin)
        state.in_flight -= 1
        self._total -= 1
        if not sent and state.next_at == state.reserved:
            state.next_at = state.before_reserve
        self._notify()

    def pause(self, origin: str, duration: float | timedelta) -> None:
        """Admit nothing to ``origin`` for ``duration`` (capped by ``max_pause``)."""
        wait = min(seconds(duration) or 0.0, seconds(self.limits.max_pause) or math.inf)
        state = self._state(origin)
        now = self.clock()
        if state.paused_until <= now:
            state.paused_from = now  # a new pause, not the running one made longer
        state.paused_until = max(state.paused_until, now + wait)
        self._notify()

    def spaced(self, origin: str) -> bool:
        """Whether requests to ``origin`` keep a minimum interval (a rate limit or a Crawl-delay)."""
        return self._state(origin).interval > 0

    def space(self, origin: str, interval: float) -> None:
        """Keep at least ``interval`` seconds between requests to ``origin`` (a robots Crawl-delay)."""
        state = self._state(origin)
        state.interval = max(state.interval, interval)

    def pause_for_status(self, origin: str, status: int, retry_after: str | None) -> float | None:
        """Pause ``origin`` when ``status`` is one of ``pause_on``; return the pause, or ``None``."""
        if status not in self.limits.pause_on:
            return None
        asked = parse_retry_after(retry_after, max_wait=math.inf)
        if asked is not None:
            self._state(origin).asked_until = self.clock() + asked
            wait = min(asked, seconds(self.limits.max_pause) or math.inf)
        else:
            wait = seconds(self.limits.default_pause) or 0.0
        self.pause(origin, wait)
        return wait

    def asked(self, origin: str) -> float:
        """Seconds still to run of the wait ``origin``'s last ``pause_on`` answer asked for (its
        ``Retry-After``, uncapped: a day stays a day); 0 when none is running.

        The pause itself is capped by ``max_pause``; whether a crawl waits that long at all is its
        retry policy's ``max_wait`` (``RetryPolicy.too_long``).
        """
        state = self._origins.get(origin)
        if state is None or not state.asked_until:
            return 0.0  # nothing asked (every request asks this): no clock read
        return max(0.0, state.asked_until - self.clock())

    def in_flight(self, origin: str | None = None) -> int:
        """Requests in flight to ``origin``, or to every origin."""
        if origin is None:
            return self._total
        state = self._origins.get(origin)
        return state.in_flight if state else 0

    def origins(self) -> Iterable[tuple[str, int, int]]:
        """``(origin, in_flight, waiting)`` for each origin seen."""
        return ((o, s.in_flight, s.waiting) for o, s in self._origins.items())

    def stats(self) -> list[HostStats]:
        """A ``HostStats`` for each origin seen."""
        return [
            HostStats(origin, state.in_flight, state.waiting, state.paused_until, state.next_at, state.paused_from)
            for origin, state in self._origins.items()
        ]

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


def _split_origin(origin: str) -> tuple[str, str]:
    """``(host, port)`` of ``scheme://host[:port]``; the port is empty when the origin has none."""
    authority = origin.partition("//")[2]
    host, colon, port = authority.rpartition(":")
    if colon and port.isdigit() and not authority.endswith("]"):
        return host, port
    return authority, ""
