"""What a handler tells the crawler about a seed: ``Outcome`` values.

A handler returns ``None`` (done) or one of these. An exception counts as ``Fail``, or as
``Retry`` when it is transient (timeouts, connection errors, 429 and 5xx statuses).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from spire_core import checks

__all__ = ["MAX_RETRY_DELAY", "Done", "Fail", "Outcome", "PauseTag", "Retry", "SkipTag", "Stop", "seconds"]

#: The longest delay a ``Retry`` may ask for: a week, in seconds.
MAX_RETRY_DELAY = 7 * 24 * 3600.0


def seconds(value: float | timedelta | None) -> float | None:
    """A duration in seconds, from seconds or a ``timedelta``: the one convention spire uses."""
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


@dataclasses.dataclass(frozen=True, slots=True)
class Done:
    """The seed was handled."""


@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """Try the seed again, ``after`` seconds from now (or after the retry policy's backoff)."""

    after: float | timedelta | None = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        # A due time must be a time: an infinite or NaN delay would leave the seed pending for ever.
        if self.after is not None:
            checks.duration("Retry(after=...)", self.after, maximum=MAX_RETRY_DELAY)

    @property
    def delay(self) -> float | None:
        return seconds(self.after)


@dataclasses.dataclass(frozen=True, slots=True)
class PauseTag:
    """Hand out no seed with ``tag`` for ``for_`` seconds; this seed waits and runs again after."""

    tag: str
    for_: float | timedelta = 60.0

    @property
    def duration(self) -> float:
        return seconds(self.for_) or 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class SkipTag:
    """Drop this seed and every seed with ``tag``, queued now or later."""

    tag: str


@dataclasses.dataclass(frozen=True, slots=True)
class Stop:
    """Stop the crawl: this seed is done, nothing new starts, what is in flight finishes."""


@dataclasses.dataclass(frozen=True, slots=True)
class Fail:
    """The seed failed for good."""

    error: BaseException


Outcome = Done | Retry | PauseTag | SkipTag | Stop | Fail
