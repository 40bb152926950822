"""How spire tells a person what happened: the ``spire`` logger tree and the crawl's failure report.

spire logs, it never prints. Every module logs under ``spire`` (``spire.crawler``, ``spire.site``,
``spire.frontier``, ...), and the library installs only a ``NullHandler``. ``Crawler.run()`` and the
``spire`` command call ``console()``, which adds a concise stderr handler only when the application
configured none; ``logging.basicConfig`` or an application's own setup always wins:

    import logging
    logging.basicConfig(level=logging.INFO)   # now spire's records go where yours go

``FailureLog`` is what the crawler reports handler failures to: the first few of each kind (error
type and handler) are logged with the seed's URL, tag, attempt and traceback, the rest are counted,
and ``summary()`` says at the end what failed and how often.
"""

from __future__ import annotations

import dataclasses
import logging
import sys

from spire_core.errors import Blocked, FetchError, ShutDown
from spire_core.seed import Seed

__all__ = ["ROOT", "ConsoleHandler", "FailureKind", "FailureLog", "console", "logger"]

#: The name of the logger every spire module logs under.
ROOT = "spire"

logging.getLogger(ROOT).addHandler(logging.NullHandler())

#: Errors whose traceback is spire's own code (a refused connection, a 404): their message is enough.
_NO_TRACEBACK = (FetchError, Blocked, ShutDown)


def logger(name: str) -> logging.Logger:
    """The logger ``spire.<name>``: ``logger("crawler")`` is ``logging.getLogger("spire.crawler")``."""
    return logging.getLogger(f"{ROOT}.{name}")


class ConsoleHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A one-line-per-record stderr handler that steps aside once the application configures logging.

    It writes to whatever ``sys.stderr`` is when a record arrives (so redirections and test captures
    see it) and stays quiet when the root logger has a handler: the record reaches that one instead.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("spire %(levelname)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return  # the application configured logging after we were installed: its handlers win
        self.stream = sys.stderr
        super().emit(record)


def console(level: int | None = None) -> ConsoleHandler | None:
    """Install spire's console handler unless logging is already configured; return it if installed.

    Configured means the root logger has a handler, or the ``spire`` logger has one that is not a
    ``NullHandler``. ``level``, when given, is set on the ``spire`` logger (``-v``, ``-q``,
    ``--log-level``); without it the root logger's level applies (warnings and errors by default).
    """
    spire = logging.getLogger(ROOT)
    if level is not None:
        spire.setLevel(level)
    if logging.getLogger().handlers:
        return None
    if any(not isinstance(handler, logging.NullHandler) for handler in spire.handlers):
        return None
    handler = ConsoleHandler()
    spire.addHandler(handler)
    return handler


@dataclasses.dataclass(slots=True)
class FailureKind:
    """Failures of one error type in one handler: how many, and the first one's URL and message."""

    error_type: str
    handler: str
    count: int = 0
    retries: int = 0
    sample_url: str = ""
    sample_message: str = ""


def _message(error: BaseException) -> str:
    text = str(error)
    return text if text else type(error).__name__


class FailureLog:
    """Logs handler failures as they happen, a few of each kind in full, and summarises them at the end.

    failures = FailureLog()
    failures.failed(seed, error, handler="book")   # ERROR with the traceback, the first few times
    failures.retried(seed, error, handler="book")  # INFO
    print(failures.summary())                      # None when nothing failed
    """

    def __init__(self, *, in_full: int = 3, log: logging.Logger | None = None) -> None:
        self.in_full = in_full
        self.log = log if log is not None else logger("crawler")
        self.kinds: dict[tuple[str, str], FailureKind] = {}
        #: The URL and message of the latest failure or retry, for a progress display.
        self.last: tuple[str, str] | None = None
        #: Origins that could not be reached (their robots.txt failed), with the error: their pages
        #: are skipped as ``robots_unreachable``, not failed, so they are not in the summary.
        self.unreachable: dict[str, BaseException] = {}
        #: Links found on pages that failed for good, not queued with them (a retry finds them again).
        self.dropped_links = 0
        #: Tries that failed so far, counted as they happen: each retry and failure of a seed, and
        #: each robots.txt read tried again (``note``). A progress display shows it while the retries
        #: go on, long before a seed fails for good.
        self.failed_tries = 0

    def note(self, url: str, what: str) -> None:
        """Say what went wrong last (the progress display shows it) without logging a failure:
        a robots.txt read that is tried again, say. It counts as a failed try."""
        self.last = (url, what)
        self.failed_tries += 1

    def host_unreachable(self, origin: str, error: BaseException) -> None:
        """``origin`` could not be reached (its robots.txt failed): logged once, with the host and the error."""
        self.unreachable[origin] = error
        self.last = (origin, f"{type(error).__name__}: {_message(error)}")
        self.log.error(
            "cannot reach %s: its robots.txt failed (%s: %s), so its pages are skipped as robots_unreachable",
            origin,
            type(error).__name__,
            _message(error),
        )

    def _kind(self, error: BaseException, handler: str, seed: Seed) -> FailureKind:
        key = (type(error).__name__, handler)
        kind = self.kinds.get(key)
        if kind is None:
            kind = self.kinds[key] = FailureKind(key[0], handler, sample_url=seed.url, sample_message=_message(error))
        self.last = (seed.url, f"{key[0]}: {_message(error)}")
        return kind

    def _report(self, level: int, what: str, seed: Seed, error: BaseException, kind: FailureKind, seen: int) -> None:
        if seen > self.in_full + 1:
            return
        if seen == self.in_full + 1:
            plural = "retries" if what == "retry" else f"{what}s"
            self.log.log(
                level, "more %s like this (%s in %s) are counted, not logged", plural, kind.error_type, kind.handler
            )
            return
        tag = f"tag {seed.tag!r}" if seed.tag is not None else "no tag"
        exc_info = None if isinstance(error, _NO_TRACEBACK) else (type(error), error, error.__traceback__)
        self.log.log(
            level,
            "%s %s (%s, handler %s, attempt %d): %s: %s",
            what,
            seed.url,
            tag,
            kind.handler,
            seed.attempt + 1,
            kind.error_type,
            _message(error),
            exc_info=exc_info,
        )

    def failed(self, seed: Seed, error: BaseException, *, handler: str) -> None:
        """A seed failed for good: logged at ERROR."""
        kind = self._kind(error, handler, seed)
        kind.count += 1
        self.failed_tries += 1
        self._report(logging.ERROR, "failure", seed, error, kind, kind.count)

    def retried(self, seed: Seed, error: BaseException | None, *, handler: str) -> None:
        """A seed will be tried again: logged at INFO (an explicit ``Retry()`` with no error is not)."""
        if error is None:
            return
        kind = self._kind(error, handler, seed)
        kind.retries += 1
        self.failed_tries += 1
        self._report(logging.INFO, "retry", seed, error, kind, kind.retries)

    @property
    def failures(self) -> int:
        return sum(kind.count for kind in self.kinds.values())

    def summary(self, top: int = 5) -> str | None:
        """What failed for good, most frequent kind first, with one sample each; ``None`` if nothing did."""
        failed = sorted((kind for kind in self.kinds.values() if kind.count), key=lambda kind: -kind.count)
        if not failed:
            return None
        total = sum(kind.count for kind in failed)
        lines = [f"{total} seed{'s' if total != 1 else ''} failed:"]
        for kind in failed[:top]:
            lines.append(
                f"  {kind.count} x {kind.error_type} in {kind.handler}, e.g. {kind.sample_url}: {kind.sample_message}"
            )
        if len(failed) > top:
            rest = sum(kind.count for kind in failed[top:])
            lines.append(f"  {rest} more in {len(failed) - top} other kinds")
        if self.dropped_links:
            lines.append(
                f"  {self.dropped_links} link{'s' if self.dropped_links != 1 else ''} found on failed pages "
                "were not queued (a page's links are queued only when its handler succeeds)"
            )
        return "\n".join(lines)
