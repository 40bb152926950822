"""Whether a crawl did its job, and the one line that says why not: the command's exit status."""

from __future__ import annotations

import dataclasses

from spire_core.errors import ConnectError, FetchTimeout, HttpStatusError, SpireError
from spire_core.log import FailureLog
from spire_core.stats import CrawlStats

__all__ = ["FAILED", "OK", "UNWRITABLE", "Verdict", "is_complete", "judge_run", "judge_site"]

OK = 0
#: The crawl ran but did not do its job (host down, error status, nothing crawled, failures).
FAILED = 1
#: The output file could not be written (a read-only folder, a full disk): the crawl stopped.
UNWRITABLE = 3


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    status: int
    reason: str | None = None


def _unreachable(failures: FailureLog) -> str | None:
    """The message of a host that could not be reached, or of a connect or timeout failure (or retry)."""
    for error in failures.unreachable.values():
        if isinstance(error, ConnectError | FetchTimeout):
            return str(error)
    for kind in failures.kinds.values():
        if kind.error_type in (ConnectError.__name__, FetchTimeout.__name__):
            return kind.sample_message
    return None


def is_complete(stats: CrawlStats, failures: FailureLog) -> bool:
    """A resumed crawl found nothing left: every seed it was given had been done before, and nothing failed."""
    return (
        stats.finished == 0
        and stats.failed == 0
        and not failures.kinds
        and set(stats.skipped_by_reason) <= {"duplicate"}
    )


def judge_site(
    url: str,
    stats: CrawlStats,
    failures: FailureLog,
    seed_error: BaseException | None,
    *,
    limit_reached: bool = False,
    start_status: int | None = None,
) -> Verdict:
    """A site crawl did its job when it kept at least one page."""
    if stats.pages > 0 or limit_reached:
        return Verdict(OK)
    if isinstance(seed_error, HttpStatusError):
        return Verdict(FAILED, f"the start page {url} answered HTTP {seed_error.status}")
    down = _unreachable(failures)
    if down is not None:
        return Verdict(FAILED, f"cannot reach {url}: {down}")
    if stats.skipped("robots_unreachable"):
        return Verdict(
            FAILED, f"robots.txt of {url} stayed unreachable, so nothing was crawled (--ignore-robots skips it)"
        )
    if start_status is not None:
        return Verdict(FAILED, f"the start page {url} answered HTTP {start_status}")
    if stats.skipped("status"):
        return Verdict(FAILED, f"the start page {url} answered an error status")
    if seed_error is not None:
        category = seed_error.category if isinstance(seed_error, SpireError) else type(seed_error).__name__
        return Verdict(FAILED, f"the start page {url} failed ({category}): {seed_error}")
    skips = ", ".join(f"{reason}={n}" for reason, n in sorted(stats.skipped_by_reason.items()))
    return Verdict(FAILED, f"nothing was crawled from {url}" + (f" (skipped: {skips})" if skips else ""))


def judge_run(stats: CrawlStats, failures: FailureLog) -> Verdict:
    """A script's crawl did its job when it handled a seed and none failed for good."""
    if stats.finished == 0 and stats.failed == 0:
        down = _unreachable(failures)
        if down is not None:
            return Verdict(FAILED, f"cannot reach the seed host: {down}")
        if stats.skipped("robots_unreachable"):
            return Verdict(FAILED, "robots.txt of the seed host stayed unreachable, so nothing was crawled")
        if stats.skipped() and set(stats.skipped_by_reason) == {"duplicate"}:
            return Verdict(OK)  # every seed was done before: a resumed crawl that had finished
        if stats.skipped():
            skips = ", ".join(f"{reason}={n}" for reason, n in sorted(stats.skipped_by_reason.items()))
            return Verdict(FAILED, f"nothing was crawled (skipped: {skips})")
        return Verdict(FAILED, "nothing was crawled: no seeds (give --seed URL or define `seeds` in the script)")
    if stats.failed:
        down = _unreachable(failures)
        if stats.finished == 0 and down is not None:
            return Verdict(FAILED, f"cannot reach the seed host: {down}")
        return Verdict(FAILED, f"{stats.failed} of {stats.failed + stats.finished} seeds failed (summary above)")
    return Verdict(OK)
