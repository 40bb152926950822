"""``Retrying``: bounded attempts with exponential backoff and jitter."""

from __future__ import annotations

import random
from datetime import timedelta

from spire_core import checks
from spire_core.errors import ConfigError, SpireError
from spire_core.frontier.base import Frontier, Lease
from spire_core.frontier.facade import Facade
from spire_core.outcome import MAX_RETRY_DELAY, Fail, Outcome, Retry

__all__ = ["Retrying", "backoff_delay"]


def backoff_delay(attempt: int, *, base: float, cap: float, jitter: float, rng: random.Random) -> float:
    """The wait before retry number ``attempt + 1``: ``base * 2**attempt``, capped, ± ``jitter`` of it."""
    delay: float = min(cap, base * (2**attempt))
    return max(0.0, delay * (1 + rng.uniform(-jitter, jitter)))


class Retrying(Facade):
    """Turns a ``Retry`` into a delayed re-queue while attempts remain, and into ``Fail`` after.

    ``attempts`` counts every try, the first included. An explicit ``Retry(after=…)`` (from a
    ``Retry-After`` header, say) is honoured as given; otherwise the delay backs off exponentially.
    """

    def __init__(
        self,
        inner: Frontier,
        attempts: int = 3,
        *,
        backoff: float | timedelta = 1.0,
        max_backoff: float | timedelta = 60.0,
        jitter: float = 0.25,
        seed: int | None = None,
    ) -> None:
        checks.count("attempts", attempts)
        if not checks.is_number(jitter) or not 0 <= jitter <= 1:
            raise ConfigError(f"jitter is a fraction from 0 to 1, not {jitter!r}")
        super().__init__(inner)
        self.attempts = attempts
        self.backoff = checks.duration("backoff", backoff, maximum=MAX_RETRY_DELAY)
        self.max_backoff = checks.duration("max_backoff", max_backoff, maximum=MAX_RETRY_DELAY)
        self.jitter = jitter
        self._rng = random.Random(seed)

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        if isinstance(outcome, Retry):
            if lease.seed.attempt + 1 >= self.attempts:
                error = outcome.error or SpireError(f"gave up after {self.attempts} attempts", url=lease.seed.url)
                outcome = Fail(error)
            elif outcome.delay is None:
                delay = backoff_delay(
                    lease.seed.attempt,
                    base=self.backoff,
                    cap=self.max_backoff,
                    jitter=self.jitter,
                    rng=self._rng,
                )
                outcome = Retry(after=delay, error=outcome.error)
        return await self.inner.report(lease, outcome)
