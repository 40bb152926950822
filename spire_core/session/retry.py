"""``RetryPolicy``: which failures to try again, how long to wait, and when to give up.

    policy = RetryPolicy.transient(attempts=4).on_status(403).wait_header("X-RateLimit-Reset")

``transient()`` retries timeouts, connect, TLS and proxy errors, and the statuses 408, 429, 500,
502, 503 and 504. The wait before a retry is the server's when it asks for one (each
``wait_header`` in order, then ``Retry-After``, as seconds or an HTTP date), else exponential
backoff with full jitter, capped by ``max_backoff``. A server-asked wait longer than ``max_wait``
fails the seed with ``RetryWaitTooLong`` (category ``retry_wait``) instead of sleeping a day.
``skip_blocks(rules)`` hands a block page back at once, even when its status is a trigger.

The policy is a plain function too: ``policy(error, attempt)`` returns the ``Outcome`` for a
failure (a ``Retry`` with its wait, or a ``Fail``), so a handler can apply it to its own errors.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from spire_core import checks
from spire_core.blocks import BlockRules
from spire_core.errors import (
    TRANSIENT_CATEGORIES,
    TRANSIENT_STATUSES,
    Blocked,
    ConfigError,
    HttpStatusError,
    RetryWaitTooLong,
    SpireError,
)
from spire_core.limits import parse_retry_after
from spire_core.outcome import MAX_RETRY_DELAY, Fail, Retry, seconds

__all__ = ["TRANSIENT_CATEGORIES", "TRANSIENT_STATUSES", "RetryPolicy"]


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which failures to retry, up to ``attempts`` tries in all (the first included), and the wait between.

    ``RetryPolicy()`` retries nothing; start from ``RetryPolicy.transient()``.
    """

    attempts: int = 3
    categories: frozenset[str] = frozenset()
    statuses: frozenset[int] = frozenset()
    wait_headers: tuple[str, ...] = ()
    backoff: float | timedelta = 1.0
    max_backoff: float | timedelta = 60.0
    max_wait: float | timedelta = 300.0
    #: The share of each backoff that is random: 1.0 is full jitter (a wait anywhere from 0 to the backoff).
    jitter: float = 1.0
    skip: BlockRules | None = None
    rng: random.Random = dataclasses.field(default_factory=random.Random, compare=False, repr=False)
    #: Wall-clock time, for ``Retry-After`` dates; injectable so tests step it.
    clock: Callable[[], float] = dataclasses.field(default=time.time, compare=False, repr=False)

    def __post_init__(self) -> None:
        checks.count("attempts", self.attempts)
        if not checks.is_number(self.jitter) or not 0 <= self.jitter <= 1:
            raise ConfigError(f"jitter is a fraction from 0 to 1, not {self.jitter!r}")
        for name in ("backoff", "max_backoff", "max_wait"):
            checks.duration(name, getattr(self, name), maximum=MAX_RETRY_DELAY)

    @classmethod
    def transient(cls, *, attempts: int = 3, **options: Any) -> RetryPolicy:
        """Retry timeouts, connect, TLS and proxy errors, and 408, 429, 500, 502, 503, 504."""
        return cls(attempts=attempts, categories=TRANSIENT_CATEGORIES, statuses=TRANSIENT_STATUSES, **options)

    @classmethod
    def never(cls) -> RetryPolicy:
        """Try each seed once."""
        return cls(attempts=1)

    def on_status(self, *statuses: int) -> RetryPolicy:
        """This policy retrying ``statuses`` as well."""
        return dataclasses.replace(self, statuses=self.statuses | frozenset(statuses))

    def on_category(self, *categories: str) -> RetryPolicy:
        """This policy retrying errors of ``categories`` as well."""
        return dataclasses.replace(self, categories=self.categories | frozenset(categories))

    def wait_header(self, name: str) -> RetryPolicy:
        """This policy reading the server's wait from header ``name`` (seconds or a date) before ``Retry-After``."""
        return dataclasses.replace(self, wait_headers=(*self.wait_headers, name))

    def skip_blocks(self, rules: BlockRules) -> RetryPolicy:
        """This policy handing a response ``rules`` recognise back at once, without a retry; again adds rules."""
        combined = self.skip.copy() if self.skip is not None else BlockRules()
        combined.extend(rules)
        return dataclasses.replace(self, skip=combined)

    # -- deciding ---------------------------------------------------------------------------------

    def retries(self, error: BaseException) -> bool:
        """Whether ``error`` is a failure this policy tries again (attempts aside)."""
        if not isinstance(error, SpireError):
            return False
        if isinstance(error, HttpStatusError | Blocked):
            if self.skip is not None and error.response is not None and self.skip.check(error.response):
                return False  # skip_blocks: a block goes back at once, whatever its status
            if isinstance(error, Blocked):  # a challenge is a 403: on_status(403) retries it, as it would the status
                status = error.response.status if error.response is not None else None
                return "blocked" in self.categories or status in self.statuses
            return error.status in self.statuses
        return error.category in self.categories

    def server_wait(self, error: BaseException) -> float | None:
        """The wait the server asked for on the response behind ``error``, in seconds, or ``None``."""
        if not isinstance(error, HttpStatusError):
            return None
        response = error.response
        if response is None:  # an error made without its response keeps the Retry-After it parsed
            return error.retry_after
        now = self.clock()
        for name in (*self.wait_headers, "retry-after"):
            # Uncapped here: a wait past ``max_wait`` fails the seed (``retry_wait``), it is not shortened.
            wait = parse_retry_after(response.headers.get(name), now=now, max_wait=math.inf)
            if wait is not None:
                return wait
        return None

    def backoff_for(self, attempt: int) -> float:
        """The backoff after try number ``attempt + 1`` (0-based): exponential, capped, with jitter."""
        base = seconds(self.backoff) or 0.0
        ceiling = min(seconds(self.max_backoff) or 0.0, base * 2.0 ** min(attempt, 64))
        return ceiling * (1.0 - self.jitter * self.rng.random())

    def wait(self, error: BaseException | None, attempt: int, asked: float | None = None) -> float:
        """The wait before the next try: ``asked`` or the server's (within ``max_wait``), else the backoff.

        Raises ``RetryWaitTooLong`` when the wait asked for is longer than ``max_wait``.
        """
        if asked is None and error is not None:
            asked = self.server_wait(error)
        if asked is None:
            return self.backoff_for(attempt)
        too_long = self.too_long(asked, url=error.url if isinstance(error, SpireError) else None)
        if too_long is not None:
            raise too_long
        return max(0.0, asked)

    def too_long(self, asked: float, *, url: str | None = None) -> RetryWaitTooLong | None:
        """The ``RetryWaitTooLong`` for a server-asked wait of ``asked`` seconds past ``max_wait``; else ``None``.

        The crawl asks it of each origin too: while a wait one of its answers asked for runs past
        ``max_wait``, its queued seeds fail at once with this error rather than wait out the pause.
        """
        if asked <= 0.0:
            return None  # nothing asked: every request asks this
        limit = seconds(self.max_wait) or 0.0
        if asked <= limit:  # not past it; inf and nan are
            return None
        return RetryWaitTooLong(asked, limit, url=url)

    def outcome(self, error: BaseException, attempt: int, *, asked: float | None = None) -> Retry | Fail:
        """What to do after try number ``attempt + 1`` (0-based) failed with ``error``.

        A ``Retry`` with its wait while attempts remain and the policy retries the error; a ``Fail``
        otherwise, its error marked with the number of tries made.
        """
        tries = attempt + 1
        if not self.retries(error) or tries >= self.attempts:
            return Fail(_final(error, tries))
        try:
            delay = self.wait(error, attempt, asked)
        except RetryWaitTooLong as too_long:
            too_long.__cause__ = error
            return Fail(_final(too_long, tries))
        return Retry(after=delay, error=error)

    __call__ = outcome


def _final(error: BaseException, tries: int) -> BaseException:
    if isinstance(error, SpireError):
        error.attempts = tries
    return error
