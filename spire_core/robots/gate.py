"""The engine's robots.txt gate: an origin is ready once its rules are known, and a URL they refuse is skipped."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

from spire_core import url as urls
from spire_core.admission import SkipReason
from spire_core.robots.cache import REFRESH_AFTER, RETRY_DELAYS, RobotsCache
from spire_core.robots.rules import Robots
from spire_core.session.addresses import PrivateAddress
from spire_core.url import is_robots_txt

__all__ = ["KnownRobots", "RobotsGate", "RobotsPolicy"]


@dataclasses.dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """How a crawl reads robots.txt: ``Crawler(robots=RobotsPolicy(agent="mybot", refresh_after=3600))``.

    ``agent`` is the product token whose groups apply (``None``: the backend's user agent's);
    ``refresh_after`` how long rules are trusted; ``retry_delays`` the waits before each new try of a
    file that answers 5xx or 429 or cannot be reached, after which the origin is unreachable.
    """

    agent: str | None = None
    refresh_after: float | timedelta = REFRESH_AFTER
    retry_delays: Sequence[float | timedelta] = RETRY_DELAYS


class KnownRobots(Protocol):
    """The robots.txt rules a crawl knows, by URL, without fetching: a ``RobotsGate``, or a worker
    process's copy of the rules the crawl sent it (``processes=N``)."""

    def rules(self, url: str) -> Robots | None:
        """The known rules for ``url``'s origin; ``None`` when not read yet."""
        ...


class RobotsGate:
    """The engine's robots.txt gate: an origin is ready only once its rules are known and fresh.

    ``ready(origin)`` answers without waiting; an origin that is not ready is noted, and the crawler
    reads it with ``read`` (through the crawl's own host limits, as any request) while that origin's
    seeds stay queued. ``verdict(url)`` says why robots.txt keeps a URL out, if it does.
    """

    def __init__(self, cache: RobotsCache, agent: str) -> None:
        self.cache = cache
        self.agent = agent
        self._wanted: dict[str, None] = {}

    def ready(self, origin: str) -> bool:
        """Whether ``origin``'s rules are known; if not (and nobody is reading them), note it as wanted."""
        if self.cache.known(origin) is not None:
            return True
        if not self.cache.reading(origin):
            self._wanted[origin] = None
        return False

    def wanted(self) -> list[str]:
        """The origins noted as wanted since the last call, each once."""
        found, self._wanted = list(self._wanted), {}
        return [origin for origin in found if not self.cache.reading(origin)]

    async def read(self, origin: str) -> Robots:
        """``origin``'s rules for the gate's agent: fetched (once, shared) when not known or stale."""
        return await self.cache.get(origin + "/", self.agent)

    def rules(self, url: str) -> Robots | None:
        """The known rules for ``url``'s origin, without fetching; ``None`` when not read yet."""
        return self._known(urls.origin(url))

    def _known(self, origin: str) -> Robots | None:
        entry = self.cache.known(origin)
        return entry.robots(self.agent) if entry is not None else None

    def verdict(self, url: str, *, origin: str | None = None) -> SkipReason | None:
        """Why the known rules keep ``url`` out (``robots``, ``robots_unreachable``); ``None`` if they don't.

        ``/robots.txt`` itself is always allowed. ``origin`` is ``url``'s, when the caller has it (a seed's).
        """
        if is_robots_txt(url):
            return None
        if origin is None:
            origin = urls.origin(url)
        rules = self._known(origin)
        if rules is None or not rules.reachable:
            if isinstance(self.cache.errors.get(origin), PrivateAddress):
                return SkipReason.PRIVATE_ADDRESS
            return SkipReason.ROBOTS_UNREACHABLE
        return None if rules.allows(url) else SkipReason.ROBOTS

    def explain(self, url: str, reason: SkipReason) -> str | None:
        """What kept ``url`` out for ``reason``: the robots.txt line, else the agent; why it was unreachable."""
        if reason is SkipReason.ROBOTS:
            rules = self.rules(url)
            rule = rules.refusing_rule(url) if rules is not None else None
            return rule if rule is not None else f"for user agent {self.agent!r}"
        error = self.cache.errors.get(urls.origin(url))
        return None if error is None else f"{type(error).__name__}: {error}"
