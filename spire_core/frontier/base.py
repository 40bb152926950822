"""The ``Frontier`` contract: where seeds wait, and how they are leased out and reported back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from spire_core.outcome import Outcome
from spire_core.seed import Seed
from spire_core.skips import SkipReason

if TYPE_CHECKING:
    from spire_core.clock import Clock
    from spire_core.session.retry import RetryPolicy

__all__ = ["Composable", "Frontier", "Lease", "PushResult", "Ready", "Wait", "always_ready"]

#: Asked by a frontier about an origin: seconds until that origin can take a request.
#: ``0`` means now; ``math.inf`` means not until a request to it finishes.
Ready = Callable[[str], float]


def always_ready(origin: str) -> float:
    """A ``Ready`` that admits every origin at once."""
    return 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Lease:
    """A seed handed out to one worker. Until it is reported, the seed is neither done nor lost."""

    seed: Seed
    token: Any

    @property
    def origin(self) -> str:
        return self.seed.origin


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """No seed can be handed out now.

    ``seconds`` is when one may become ready (a rate spacing, a retry delay or a pause ends);
    ``None`` means nothing will until seeds are pushed, reported or a slot frees.
    """

    seconds: float | None = None


@dataclasses.dataclass(slots=True)
class PushResult:
    """What a push did with each seed: added, a duplicate of one seen before, or rejected with a reason."""

    added: list[Seed] = dataclasses.field(default_factory=list)
    duplicates: list[Seed] = dataclasses.field(default_factory=list)
    rejected: list[tuple[Seed, SkipReason]] = dataclasses.field(default_factory=list)

    def merge(self, other: PushResult) -> PushResult:
        self.added.extend(other.added)
        self.duplicates.extend(other.duplicates)
        self.rejected.extend(other.rejected)
        return self


@runtime_checkable
class Frontier(Protocol):
    """Where seeds wait. Stores (memory, SQLite, Redis) and facades (dedup, depth...) all implement it.

    - ``push`` queues seeds; with ``unique=True`` a seed whose ``unique_key`` was pushed uniquely
      before is reported as a duplicate instead. ``forefront`` puts them ahead of their origin's queue.
    - ``seen`` tells, without changing anything, which unique keys were pushed uniquely before.
    - ``claim`` marks unique keys seen without queueing anything (a redirect target followed in
      place), and tells which were new; later unique pushes of them are duplicates.
    - ``lease`` hands out the best seed of an origin that ``ready`` admits now, or says how long to wait.
    - ``report`` settles a lease with an outcome and returns the outcome it applied (a retry
      policy may turn a ``Retry`` into a ``Fail``).
    - ``release`` hands a lease back unfinished (on shutdown), without counting an attempt.
    - ``pending`` counts seeds queued or leased: the work not yet settled.
    """

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult: ...

    async def seen(self, keys: Sequence[str]) -> list[bool]: ...

    async def claim(self, keys: Sequence[str]) -> list[bool]: ...

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait: ...

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome: ...

    async def release(self, lease: Lease) -> None: ...

    async def pending(self) -> int: ...

    async def aclose(self) -> None: ...


class Composable(Frontier, Protocol):
    """A frontier that composes: every store and facade, each fluent call returning another one."""

    def dedup(self, *, bloom: int | None = None, error_rate: float = 0.01) -> Composable: ...

    def max_depth(self, depth: int) -> Composable: ...

    def retry(
        self,
        attempts: int | RetryPolicy = 3,
        *,
        backoff: float | timedelta = 1.0,
        max_backoff: float | timedelta = 60.0,
        jitter: float = 1.0,
    ) -> Composable: ...

    def tag_control(self, *, clock: Clock = ...) -> Composable: ...

    def avoid_traps(self, *, max_per_prefix: int = 1000, depth: int = 2) -> Composable: ...
