"""robots.txt (RFC 9309): the rules for one agent, fetched per origin, cached and refreshed.

    rules = await robots("https://shop.example/", "examplebot")
    if rules.allows(url) and rules.allows_use(url, Purpose.AI_TRAIN):
        ...
    rules.crawl_delay(), rules.sitemaps()

``Robots.parse(text, agent)`` reads a file you already have. The groups that name the agent's product
token (without case) are merged; with none, the ``*`` groups apply. Rule matching (longest match,
Allow wins a tie, ``*`` and ``$``, percent-encoding normalised on both sides, ``/robots.txt`` always
allowed) is protego's: this module only picks the group lines and hands them to it.

AI-use preferences come from ``Content-Signal`` lines (Cloudflare: ``search``, ``ai-input``,
``ai-train`` = ``yes``/``no``) and ``Content-Usage`` lines (the IETF aipref draft: ``search``,
``ai-use``, ``train-ai`` = ``y``/``n``, optionally after a path pattern), in the same groups. For a
purpose, the line with the longest matching path pattern decides, ``no`` wins a tie, and a purpose no
line names is allowed. The aipref labels are a draft and may change.

``robots_answer(response)`` says what one response to a robots.txt request means: a 2xx is the file, a
4xx allows everything, a 5xx, a 429 or a failed connection is worth another try, and a redirect names
the URL to ask next. ``RobotsCache`` reads its responses with it: it fetches ``/robots.txt`` once per
origin through a ``Backend`` and re-reads it after 24 hours; a file it cannot get is tried again after
1, 2, 4 and 8 seconds, after which the origin is unreachable (``Robots.reachable`` is false and
nothing is allowed). It follows up to five redirects itself; the rules apply to the origin asked about.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

import anyio
from protego import Protego

from spire_core import errors
from spire_core import url as urls
from spire_core.admission import SkipReason
from spire_core.backend.base import Backend, Fetcher
from spire_core.outcome import seconds
from spire_core.response import Response
from spire_core.session.addresses import PrivateAddress

__all__ = [
    "MAX_CRAWL_DELAY",
    "MAX_ROBOTS_BYTES",
    "Purpose",
    "Robots",
    "KnownRobots",
    "RobotsAnswer",
    "RobotsCache",
    "RobotsGate",
    "RobotsPolicy",
    "is_robots_txt",
    "product_token",
    "robots",
    "robots_answer",
]

#: Only this much of a robots.txt is read (RFC 9309 asks for at least 500 KiB).
MAX_ROBOTS_BYTES = 512 * 1024
#: A longer Crawl-delay is cut to this many seconds.
MAX_CRAWL_DELAY = 30.0
_REFRESH_AFTER = timedelta(hours=24)
_RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)
_MAX_REDIRECTS = 5


class Purpose(enum.StrEnum):
    """A use of a page that a site can allow or refuse in its robots.txt."""

    #: Building a search index and showing results that link to the page.
    SEARCH = "search"
    #: Feeding the page to an AI model as it answers (retrieval, grounding).
    AI_INPUT = "ai-input"
    #: Training or fine-tuning AI models.
    AI_TRAIN = "ai-train"


# Field names as sites write them, misspellings protego also accepts included, to one spelling each.
_FIELDS = {
    "user-agent": "user-agent",
    "useragent": "user-agent",
    "user agent": "user-agent",
    "allow": "allow",
    "disallow": "disallow",
    "dissallow": "disallow",
    "dissalow": "disallow",
    "disalow": "disallow",
    "diasllow": "disallow",
    "disallaw": "disallow",
    "crawl-delay": "crawl-delay",
    "crawl delay": "crawl-delay",
    "sitemap": "sitemap",
    "sitemaps": "sitemap",
    "site-map": "sitemap",
    "content-signal": "content-signal",
    "content-usage": "content-usage",
}
# Per line kind: label to purpose, and the values that mean yes and no.
_AI_LINES = {
    "content-signal": (
        {"search": Purpose.SEARCH, "ai-input": Purpose.AI_INPUT, "ai-train": Purpose.AI_TRAIN},
        "yes",
        "no",
    ),
    "content-usage": (
        {"search": Purpose.SEARCH, "ai-use": Purpose.AI_INPUT, "train-ai": Purpose.AI_TRAIN},
        "y",
        "n",
    ),
}
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


def product_token(value: str) -> str:
    """The product token a User-agent value (or an agent name) names, lower case; "*" for the wildcard."""
    value = value.strip()
    if value.startswith("*") and (len(value) == 1 or value[1].isspace()):
        return "*"
    match = _TOKEN.match(value)
    return match.group(0).lower() if match else ""


def _directive(line: str) -> tuple[str, str] | None:
    """A line's field (one spelling) and value; ``None`` for a blank, comment or unknown line."""
    line = line.split("#", 1)[0].strip()
    if not line:
        return None
    name, colon, value = line.partition(":")
    if colon:
        field = _FIELDS.get(" ".join(name.lower().split()))
        if field is not None:
            return field, value.strip()
    # Some files leave out the colon ("User-agent foo", "Sitemap https://...").
    words = line.split()
    for count in (2, 1):
        field = _FIELDS.get(" ".join(words[:count]).lower()) if len(words) > count else None
        if field is not None:
            return field, " ".join(words[count:])
    return None


def _truncate(text: str | bytes) -> str:
    """The first ``MAX_ROBOTS_BYTES`` of a file as text, without a line cut short by the limit."""
    if isinstance(text, str):
        # Four bytes a character at most: a short string needs no encoding to be measured.
        if len(text) <= MAX_ROBOTS_BYTES // 4:
            return text.removeprefix("\ufeff")
        text = text.encode("utf-8", "surrogatepass")
    if len(text) > MAX_ROBOTS_BYTES:
        # A line cut short could change meaning ("Disallow: /private" read as "Disallow: /").
        text = text[:MAX_ROBOTS_BYTES]
        end = max(text.rfind(b"\n"), text.rfind(b"\r"))
        text = text[: end + 1]
    return _without_bom(text).decode("utf-8", "replace")


def _without_bom(data: bytes) -> bytes:
    """``data`` without a UTF-8 byte order mark, or the first one or two bytes of one: some editors
    write a partial mark, and it must not spoil the first line (a User-agent line, often)."""
    for mark in (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"):
        if data.startswith(mark):
            rest = data[len(mark) :]
            # What follows a partial mark must not complete a character (it would not be a mark then).
            if len(mark) == 3 or not rest or not 0x80 <= rest[0] <= 0xBF:
                return rest
            break
    return data


@dataclasses.dataclass(frozen=True, slots=True)
class _Preference:
    """One purpose's yes or no from a Content-Signal or Content-Usage line."""

    purpose: Purpose
    allowed: bool
    pattern: str | None  # None: every path

    @property
    def length(self) -> int:
        return len(self.pattern.encode()) if self.pattern else 0


def _preferences(field: str, value: str) -> list[_Preference]:
    labels, yes, no = _AI_LINES[field]
    pattern: str | None = None
    if value.startswith(("/", "*")):
        pattern, *rest = value.split(None, 1)
        value = rest[0] if rest else ""
    found: list[_Preference] = []
    for item in value.split(","):
        label, equals, answer = item.partition("=")
        purpose = labels.get(label.strip().lower())
        # Structured-field parameters (";...") carry nothing these labels use.
        answer = answer.split(";", 1)[0].strip().lower()
        if purpose is None or not equals or answer not in (yes, no):
            continue
        found.append(_Preference(purpose, answer == yes, pattern))
    return found


@dataclasses.dataclass
class _Group:
    agents: set[str] = dataclasses.field(default_factory=set)
    lines: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def _read(text: str) -> tuple[list[_Group], list[str]]:
    """The file's groups, in order, and its Sitemap lines."""
    groups: list[_Group] = []
    sitemaps: list[str] = []
    group: _Group | None = None
    in_rules = False
    for line in text.splitlines():
        directive = _directive(line)
        if directive is None:
            continue
        field, value = directive
        if field == "sitemap":
            if value:
                sitemaps.append(value)
        elif field == "user-agent":
            # User-agent lines after a rule start a new group; consecutive ones share one.
            if group is None or in_rules:
                group = _Group()
                groups.append(group)
                in_rules = False
            token = product_token(value)
            if token:
                group.agents.add(token)
        elif group is not None:
            in_rules = True
            group.lines.append((field, value))
    return groups, sitemaps


def _absolute_sitemaps(listed: list[str], url: str | None) -> list[str]:
    """The Sitemap lines as URLs in their normal form (``HTTP://`` is ``http://``); a relative line is
    resolved against ``url``, the robots.txt file's own address, and dropped without one."""
    found: list[str] = []
    for value in listed:
        if value[:8].lower().startswith(("http://", "https://")):
            resolved = urls.absolute(value)
        else:
            resolved = urls.join(url, value) if url is not None else None
        if resolved is not None:
            found.append(resolved)
    return found


class Robots:
    """The robots.txt rules for one agent: which URLs it may fetch, for which uses, how often.

    Build one with ``Robots.parse(text, agent)``, or get one for a site from ``robots(url, agent)``.
    """

    __slots__ = ("_lines", "_matchers", "_preferences", "_rules", "_sitemaps", "agent", "reachable")

    def __init__(
        self,
        rules: Protego,
        *,
        preferences: Sequence[_Preference] = (),
        sitemaps: Sequence[str] = (),
        agent: str = "*",
        reachable: bool = True,
        lines: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._rules = rules
        #: The group's Allow and Disallow lines, to name the one that refuses a URL.
        self._lines = tuple(lines)
        self._preferences = tuple(preferences)
        self._sitemaps = tuple(sitemaps)
        self._matchers: dict[str, Protego] = {}
        #: The product token the rules were chosen for ("*" for every crawler).
        self.agent = agent
        #: False when robots.txt could not be read (5xx or no connection, after retries): skip the site.
        self.reachable = reachable

    @classmethod
    def parse(cls, text: str | bytes, agent: str = "*", *, url: str | None = None) -> Robots:
        """The rules of a robots.txt for ``agent``; at most its first 512 KiB are read.

        A relative ``Sitemap`` line is resolved against ``url``, the file's own address (without one,
        it is dropped: a sitemap is named by an absolute URL). Lines that cannot be read are ignored:
        parsing never fails.
        """
        token = product_token(agent) or "*"
        groups, listed = _read(_truncate(text))
        sitemaps = _absolute_sitemaps(listed, url)
        chosen = [group for group in groups if token in group.agents] if token != "*" else []
        chosen = chosen or [group for group in groups if "*" in group.agents]
        lines = [line for group in chosen for line in group.lines]
        # protego matches the chosen lines, written as one group for every agent.
        rules = ["User-agent: *"]
        rules.extend(f"{field}: {value}" for field, value in lines if field in ("allow", "disallow", "crawl-delay"))
        paths = [(field, value) for field, value in lines if field in ("allow", "disallow") and value]
        preferences = [
            preference for field, value in lines if field in _AI_LINES for preference in _preferences(field, value)
        ]
        return cls(
            Protego.parse("\n".join(rules)), preferences=preferences, sitemaps=sitemaps, agent=token, lines=paths
        )

    @classmethod
    def allow_all(cls, agent: str = "*") -> Robots:
        """Rules that allow everything: what a missing robots.txt (a 4xx) means."""
        return cls(Protego.parse(""), agent=product_token(agent) or "*")

    @classmethod
    def unreachable(cls, agent: str = "*") -> Robots:
        """Rules for a site whose robots.txt could not be read: nothing allowed, ``reachable`` false."""
        refusals = [_Preference(purpose, False, None) for purpose in Purpose]
        disallow_all = Protego.parse("User-agent: *\nDisallow: /")
        return cls(disallow_all, preferences=refusals, agent=product_token(agent) or "*", reachable=False)

    def allows(self, url: str) -> bool:
        """Whether the agent may fetch ``url`` (a URL or a path); ``/robots.txt`` is always allowed.

        ``InvalidUrl`` for a URL too broken to split (``http://example.com[``).
        """
        try:
            return bool(self._rules.can_fetch(_scalar_values(url), "*"))
        except ValueError:
            raise errors.InvalidUrl(f"not a valid URL: {url!r}", url=url) from None

    def refusing_rule(self, url: str) -> str | None:
        """The line that keeps ``url`` out (``Disallow: /private``), the longest match as RFC 9309
        decides; ``None`` when none does. Read only for a URL refused: it matches each line alone."""
        best: tuple[int, str, str] | None = None
        for field, value in self._lines:
            if self._matches(value, url) and (best is None or len(value) > best[0]):
                best = (len(value), field, value)
        if best is None or best[1] != "disallow":
            return None
        return f"Disallow: {best[2]}"

    def allows_use(self, url: str, purpose: Purpose | str) -> bool:
        """Whether the site allows ``url`` to be used for ``purpose``, by its AI-use lines."""
        purpose = Purpose(purpose)
        best: tuple[int, bool] | None = None  # (pattern length, refuses): the larger decides
        for preference in self._preferences:
            if preference.purpose is not purpose:
                continue
            if preference.pattern is not None and not self._matches(preference.pattern, url):
                continue
            candidate = (preference.length, not preference.allowed)
            if best is None or candidate > best:
                best = candidate
        return best is None or not best[1]

    def _matches(self, pattern: str, url: str) -> bool:
        # A path pattern here is read exactly as a Disallow pattern, so protego matches it.
        matcher = self._matchers.get(pattern)
        if matcher is None:
            matcher = self._matchers[pattern] = Protego.parse(f"User-agent: *\nDisallow: {pattern}")
        try:
            return not matcher.can_fetch(url, "*")
        except ValueError:
            raise errors.InvalidUrl(f"not a valid URL: {url!r}", url=url) from None

    def crawl_delay(self) -> float | None:
        """The group's Crawl-delay in seconds, at most 30; ``None`` when it sets none."""
        delay = self._rules.crawl_delay("*")
        return None if delay is None else min(float(delay), MAX_CRAWL_DELAY)

    def sitemaps(self) -> list[str]:
        """Every Sitemap line of the file, in order, whatever group it sits in."""
        return list(self._sitemaps)

    def __repr__(self) -> str:
        state = "" if self.reachable else " unreachable"
        return f"<Robots for {self.agent!r}{state}>"


@dataclasses.dataclass(frozen=True, slots=True)
class RobotsAnswer:
    """What one response to a robots.txt request means (RFC 9309); ``robots_answer`` reads one.

    ``retry``: worth another try (a 5xx, a 429, no connection). ``redirect``: the URL to ask next.
    Otherwise the answer is final, and ``rules(agent)`` reads it.
    """

    #: The file's first 512 KiB (and a byte more, so a line cut short shows) for a 2xx; ``None``: no file.
    body: bytes | None = None
    retry: bool = False
    redirect: str | None = None
    #: Where the file was read: relative Sitemap lines are resolved against it.
    url: str | None = None

    def rules(self, agent: str = "*") -> Robots:
        """The rules for ``agent`` when nothing more is asked.

        The file's own for a 2xx; nothing allowed (unreachable) for a try that is not repeated; else
        everything allowed: a 4xx, or a redirect not followed (RFC 9309 reads too many as no file).
        """
        if self.body is not None:
            return Robots.parse(self.body, agent, url=self.url)
        if self.retry:
            return Robots.unreachable(agent)
        return Robots.allow_all(agent)


def robots_answer(response: Response | None) -> RobotsAnswer:
    """What ``response`` to a robots.txt request means; ``None`` stands for a failed connection.

    answer = robots_answer(response)
    if answer.redirect is not None:
        ...  # ask answer.redirect next
    rules = answer.rules("examplebot")
    """
    if response is None:
        return RobotsAnswer(retry=True)
    if 200 <= response.status < 300:
        # Only the first 512 KiB are read, so that is all an answer keeps.
        return RobotsAnswer(body=response.body[: MAX_ROBOTS_BYTES + 1], url=response.url)
    if response.status >= 500 or response.status == 429:
        return RobotsAnswer(retry=True)
    if response.is_redirect:
        target = urls.join(response.url, response.headers["location"])
        if target is not None and target.startswith(("http://", "https://")):
            return RobotsAnswer(redirect=target)
    return RobotsAnswer()  # a 4xx, or a redirect to nowhere: no robots.txt


@dataclasses.dataclass
class _Entry:
    answer: RobotsAnswer  # final, or ``retry`` when the tries ran out: unreachable
    fetched_at: float
    by_agent: dict[str, Robots] = dataclasses.field(default_factory=dict)

    @property
    def unreachable(self) -> bool:
        return self.answer.retry

    def robots(self, agent: str) -> Robots:
        token = product_token(agent) or "*"
        rules = self.by_agent.get(token)
        if rules is None:
            rules = self.by_agent[token] = self.answer.rules(token)
        return rules


class RobotsCache(Fetcher):
    """Fetches and caches ``/robots.txt`` per origin, re-reading it after ``refresh_after``.

        cache = RobotsCache(backend)
        rules = await cache.get("https://shop.example/item/1", "examplebot")

    One fetch serves every agent; ``agent`` is the one ``get`` uses when given none. Callers asking
    for the same origin at once share one fetch. ``retry_delays`` are the waits
    before each new try of a robots.txt that answers 5xx or 429, or cannot be reached; after the last,
    the origin is unreachable. When a refresh finds the site unreachable, the rules read before are
    kept, as RFC 9309 allows. Without a ``backend``, an ``HttpBackend`` is made and closed by ``aclose``.
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        refresh_after: float | timedelta = _REFRESH_AFTER,
        retry_delays: Sequence[float | timedelta] = _RETRY_DELAYS,
        max_redirects: int = _MAX_REDIRECTS,
        agent: str = "*",
    ) -> None:
        super().__init__(backend)
        self._refresh_after = seconds(refresh_after) or 0.0
        self._retry_delays = tuple(seconds(delay) or 0.0 for delay in retry_delays)
        if max_redirects < 0:
            raise errors.ConfigError("max_redirects must be 0 or more")
        self._max_redirects = max_redirects
        #: The agent ``get`` reads the rules for when it is given none.
        self.agent = agent
        self._entries: dict[str, _Entry] = {}
        self._pending: dict[str, anyio.Event] = {}
        #: The last error a fetch of each origin's robots.txt failed with (a dead host, say).
        self.errors: dict[str, errors.SpireError] = {}

    async def get(self, url: str, agent: str | None = None) -> Robots:
        """The rules for ``agent`` (by default the cache's) on the origin of ``url``; raises ``InvalidUrl`` only.

        An origin whose robots.txt cannot be read gives rules with ``reachable`` false.
        """
        origin = urls.origin(url)
        entry = await self._entry(origin)
        return entry.robots(self.agent if agent is None else agent)

    def known(self, origin: str) -> _Entry | None:
        """``origin``'s entry when it is read and still fresh; else ``None`` (nothing is fetched)."""
        entry = self._entries.get(origin)
        if entry is not None and time.monotonic() - entry.fetched_at < self._refresh_after:
            return entry
        return None

    def reading(self, origin: str) -> bool:
        """Whether ``origin``'s robots.txt is being fetched now."""
        return origin in self._pending

    async def _entry(self, origin: str) -> _Entry:
        while True:
            entry = self._entries.get(origin)
            if entry is not None and time.monotonic() - entry.fetched_at < self._refresh_after:
                return entry
            pending = self._pending.get(origin)
            if pending is not None:
                # Someone is fetching it; when they are done (or cancelled) look again.
                await pending.wait()
                continue
            done = self._pending[origin] = anyio.Event()
            try:
                fresh = await self._fetch(origin)
                if fresh.unreachable and entry is not None and not entry.unreachable:
                    # RFC 9309 lets a crawler keep the rules it has while robots.txt is unreachable.
                    fresh = dataclasses.replace(entry, fetched_at=fresh.fetched_at)
                self._entries[origin] = fresh
                return fresh
            finally:
                del self._pending[origin]
                done.set()

    async def _fetch(self, origin: str) -> _Entry:
        answer = RobotsAnswer(retry=True)
        for delay in (0.0, *self._retry_delays):
            if delay:
                await anyio.sleep(delay)
            answer = await self._try(origin + "/robots.txt")
            if not answer.retry or isinstance(self.errors.get(origin), PrivateAddress):
                break  # an address the crawl may not reach is refused every time: no point asking again
        return _Entry(answer, time.monotonic())

    async def _try(self, url: str) -> RobotsAnswer:
        """One try, following redirects; a redirect still left once they are used up means no file."""
        answer = RobotsAnswer()
        for _ in range(self._max_redirects + 1):
            try:
                response: Response | None = await self.fetch_one(url)
            except errors.InvalidUrl:
                return RobotsAnswer()
            except errors.FetchError as exc:
                self.errors[urls.origin(url)] = exc
                response = None
            answer = robots_answer(response)
            if answer.redirect is None:
                return answer
            url = answer.redirect
        return answer


def is_robots_txt(url: str) -> bool:
    """Whether ``url`` is an origin's own ``/robots.txt`` (always allowed; no page)."""
    return url.endswith("/robots.txt") and urls.origin(url) + "/robots.txt" == url


@dataclasses.dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """How a crawl reads robots.txt: ``Crawler(robots=RobotsPolicy(agent="mybot", refresh_after=3600))``.

    ``agent`` is the product token whose groups apply (``None``: the backend's user agent's);
    ``refresh_after`` how long rules are trusted; ``retry_delays`` the waits before each new try of a
    file that answers 5xx or 429 or cannot be reached, after which the origin is unreachable.
    """

    agent: str | None = None
    refresh_after: float | timedelta = _REFRESH_AFTER
    retry_delays: Sequence[float | timedelta] = _RETRY_DELAYS


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
        entry = self.cache.known(urls.origin(url))
        return entry.robots(self.agent) if entry is not None else None

    def verdict(self, url: str) -> SkipReason | None:
        """Why the known rules keep ``url`` out (``robots``, ``robots_unreachable``); ``None`` if they don't.

        ``/robots.txt`` itself is always allowed.
        """
        if is_robots_txt(url):
            return None
        rules = self.rules(url)
        if rules is None or not rules.reachable:
            if isinstance(self.cache.errors.get(urls.origin(url)), PrivateAddress):
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


async def robots(url: str, agent: str = "*", *, backend: Backend | None = None) -> Robots:
    """Fetch and read the robots.txt of ``url``'s origin for ``agent``; raises ``InvalidUrl`` only.

    For many URLs of many sites, keep a ``RobotsCache`` instead: it fetches each origin once.
    """
    async with RobotsCache(backend) as cache:
        return await cache.get(url, agent)


def _scalar_values(url: str) -> str:
    """``url`` with each lone surrogate (UTF-8 cannot hold one) as U+FFFD, as a URL parser reads it."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        return url.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return url
