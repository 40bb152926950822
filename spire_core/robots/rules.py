"""robots.txt rules (RFC 9309) for one agent, read from a file's text, on protego.

``Robots.parse(text, agent)`` reads a file you already have. The groups that name the agent's product
token (without case) are merged; with none, the ``*`` groups apply. Rule matching (longest match,
Allow wins a tie, ``*`` and ``$``, percent-encoding normalised on both sides, ``/robots.txt`` always
allowed) is protego's: this module only picks the group lines and hands them to it.

AI-use preferences come from ``Content-Signal`` lines (Cloudflare: ``search``, ``ai-input``,
``ai-train`` = ``yes``/``no``) and ``Content-Usage`` lines (the IETF aipref draft: ``search``,
``ai-use``, ``train-ai`` = ``y``/``n``, optionally after a path pattern), in the same groups. For a
purpose, the line with the longest matching path pattern decides, ``no`` wins a tie, and a purpose no
line names is allowed. The aipref labels are a draft and may change.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Sequence

from protego import Protego

from spire_core import errors
from spire_core import url as urls

__all__ = ["MAX_CRAWL_DELAY", "MAX_ROBOTS_BYTES", "Purpose", "Robots", "product_token"]

#: Only this much of a robots.txt is read (RFC 9309 asks for at least 500 KiB).
MAX_ROBOTS_BYTES = 512 * 1024
#: A longer Crawl-delay is cut to this many seconds.
MAX_CRAWL_DELAY = 30.0


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


def _scalar_values(url: str) -> str:
    """``url`` with each lone surrogate (UTF-8 cannot hold one) as U+FFFD, as a URL parser reads it."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        return url.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return url
