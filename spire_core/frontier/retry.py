"""``Retrying``: the frontier facade that turns failures into delayed re-queues, as a ``RetryPolicy`` says.

A retried seed goes back to the frontier with a due time; when it is due it is leased again and
waits its turn in the host limits like any seed, holding no slot while it waits.
"""

from __future__ import annotations

import random
from datetime import timedelta

from spire_core.errors import RetryWaitTooLong, SpireError
from spire_core.frontier.base import Frontier, Lease
from spire_core.frontier.facade import Facade
from spire_core.outcome import Fail, Outcome, Retry
from spire_core.session.retry import RetryPolicy

__all__ = ["Retrying"]


class Retrying(Facade):
    """Turns a ``Retry`` into a delayed re-queue while the policy's attempts remain, and into ``Fail`` after.

        Retrying(frontier, RetryPolicy.transient(attempts=5))
        Retrying(frontier, 3, backoff=0.5)     # RetryPolicy.transient with these settings

    The wait is the ``Retry``'s own (``Retry(after=...)``), else the server's (``Retry-After``), else
    the policy's backoff; a wait past the policy's ``max_wait`` fails the seed with ``RetryWaitTooLong``.
    Every final error is marked with the number of tries made (``error.attempts``).
    """

    def __init__(
        self,
        inner: Frontier,
        attempts: int | RetryPolicy = 3,
        *,
        backoff: float | timedelta = 1.0,
        max_backoff: float | timedelta = 60.0,
        jitter: float = 1.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(inner)
        if isinstance(attempts, RetryPolicy):
            self.policy = attempts
        else:
            self.policy = RetryPolicy.transient(
                attempts=attempts, backoff=backoff, max_backoff=max_backoff, jitter=jitter, rng=random.Random(seed)
            )

    @property
    def attempts(self) -> int:
        return self.policy.attempts

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        tries = lease.seed.attempt + 1
        if isinstance(outcome, Retry):
            if tries >= self.policy.attempts:
                error = outcome.error or SpireError(f"gave up after {tries} attempts", url=lease.seed.url)
                outcome = Fail(error)
            else:
                try:
                    delay = self.policy.wait(outcome.error, lease.seed.attempt, outcome.delay)
                except RetryWaitTooLong as too_long:
                    too_long.__cause__ = outcome.error
                    outcome = Fail(too_long)
                else:
                    outcome = Retry(after=delay, error=outcome.error)
        if isinstance(outcome, Fail) and isinstance(outcome.error, SpireError):
            outcome.error.attempts = tries
        return await self.inner.report(lease, outcome)
