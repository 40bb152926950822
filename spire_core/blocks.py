"""Block pages: telling an anti-bot challenge, captcha or block apart from a page.

A block is a response, not an error. ``BlockRules.check(response)`` returns a ``BlockSignal`` (the
vendor and the kind) for the first rule that matches, or ``None``. ``BlockRules.builtin()`` knows
the pages of Cloudflare, Akamai, DataDome, PerimeterX (HUMAN), Imperva (Incapsula) and AWS WAF; a
bare 403 or 429 is not a block signal unless you add ``BlockRules.statuses([403, 429])``.

    rules = BlockRules.builtin()
    rules.extend(BlockRules.from_toml('''
    [[rule]]
    vendor = "shop"
    kind = "block"
    status = 403
    header = "x-shop-block"
    value = "1"
    '''))
    rules.extend(BlockRules.statuses([403, 429]))   # after the vendor rules: rules match in order
    signal = rules.check(response)

A rule matches when every condition it has holds: ``status`` (one or several), ``header`` present,
its ``value`` equal or its value ``contains`` a string, and ``body`` found in the start of the body.
Every text comparison ignores ASCII case.
"""

from __future__ import annotations

import dataclasses
import enum
import string
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from spire_core.errors import ConfigError

if TYPE_CHECKING:
    import httpx

__all__ = ["BlockKind", "BlockRule", "BlockRules", "BlockSignal", "Page"]

# Challenge and block pages are small and carry their markers early (the vendors' pages are 1 to 20
# KiB, their markers in the first few); a body is searched this far, lowered once per check.
_BODY_WINDOW = 32 * 1024
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_RULE_KEYS = frozenset({"vendor", "kind", "status", "header", "value", "contains", "body"})


def _lower(value: str) -> str:
    return value.translate(_ASCII_LOWER)


class Page(Protocol):
    """What a rule looks at: a status, headers and the body (a ``Response`` is one)."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> httpx.Headers: ...

    @property
    def body(self) -> bytes: ...


class BlockKind(enum.StrEnum):
    """What the block page asks of the client."""

    #: An interstitial that a browser passes by running script (Cloudflare's "Just a moment...").
    CHALLENGE = "challenge"
    #: A puzzle for a person.
    CAPTCHA = "captcha"
    #: A refusal: no way through from this client.
    BLOCK = "block"


@dataclasses.dataclass(frozen=True, slots=True)
class BlockSignal:
    """A response recognised as a block page: who served it and what kind it is."""

    vendor: str
    kind: BlockKind


@dataclasses.dataclass(frozen=True, slots=True)
class BlockRule:
    """One way to recognise a block page; every condition given must hold.

    ``value`` must equal a value of ``header``; ``contains`` must occur in one; ``body`` must occur in
    the first 32 KiB of the body. Text comparisons ignore ASCII case.
    """

    vendor: str
    kind: BlockKind
    status: frozenset[int] = frozenset()
    header: str | None = None
    value: str | None = None
    contains: str | None = None
    body: str | None = None
    #: ``body`` as the bytes a lowered body is searched for (worked out once, not per response).
    _marker: bytes | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.vendor:
            raise ConfigError("a block rule needs a vendor")
        if (self.value is not None or self.contains is not None) and self.header is None:
            raise ConfigError(f"block rule for {self.vendor!r}: value and contains need a header")
        if not self.status and self.header is None and self.body is None:
            raise ConfigError(f"block rule for {self.vendor!r} has no condition: it would match every response")
        object.__setattr__(self, "kind", BlockKind(self.kind))
        for name in ("header", "value", "contains", "body"):
            text = getattr(self, name)
            if text is not None:
                object.__setattr__(self, name, _lower(text.strip()))
        if self.body is not None:
            object.__setattr__(self, "_marker", self.body.encode())

    def matches(self, response: Page) -> bool:
        """Whether ``response`` meets every condition of this rule."""
        return (not self.status or response.status in self.status) and self._holds(_Read(response))

    def _holds(self, read: _Read) -> bool:
        """Whether the response ``read`` reads meets the header and body conditions of this rule."""
        if self.header is not None:
            values = read.values(self.header)
            if not values:
                return False
            if self.value is not None and self.value not in values:
                return False
            if self.contains is not None and not any(self.contains in value for value in values):
                return False
        return self._marker is None or self._marker in read.body()


class _Read:
    """What one check reads of a response, each part once and only when a rule needs it, in ASCII
    lower case: the start of its body, the names of its headers, the values of the headers rules name."""

    __slots__ = ("_body", "_names", "_response", "_values")

    def __init__(self, response: Page) -> None:
        self._response = response
        self._body: bytes | None = None
        self._names: bytes | None = None
        self._values: dict[str, list[str]] = {}

    def body(self) -> bytes:
        if self._body is None:
            self._body = self._response.body[:_BODY_WINDOW].lower()
        return self._body

    def names(self) -> bytes:
        """Every header name, each between newlines (``b"\\nserver\\n"`` is in it when ``Server`` is sent)."""
        if self._names is None:
            self._names = b"\n%b\n" % b"\n".join([name for name, _ in self._response.headers.raw]).lower()
        return self._names

    def values(self, name: str) -> list[str]:
        found = self._values.get(name)
        if found is None:
            found = self._values[name] = [_lower(value.strip()) for value in self._response.headers.get_list(name)]
        return found


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """The rules that may match a response of one status, in order, and the header names they need:
    what rules an ordinary response out at once, without a call per rule."""

    rules: tuple[BlockRule, ...]
    #: Per rule, its header's line in ``_Read.names()``; ``None`` for a rule without a header condition
    #: (or with a name that is not ASCII, which only the rule itself compares).
    names: tuple[bytes | None, ...]
    #: Whether any rule's header is looked up by name (then the names are read once).
    named: bool

    @classmethod
    def of(cls, rules: Iterable[BlockRule], status: int) -> _Plan:
        chosen = tuple(rule for rule in rules if not rule.status or status in rule.status)
        names = tuple(
            b"\n%b\n" % rule.header.encode() if rule.header is not None and rule.header.isascii() else None
            for rule in chosen
        )
        return cls(chosen, names, any(names))

    def possible(self, read: _Read) -> bool:
        """Whether some rule has its header sent and its marker in the body (or has no such condition)."""
        names = read.names() if self.named else b""
        body: bytes | None = None
        for rule, name in zip(self.rules, self.names, strict=True):
            if name is not None and name not in names:
                continue
            marker = rule._marker
            if marker is None:
                return True
            if body is None:
                body = read.body()
            if marker in body:
                return True
        return False


class BlockRules:
    """An ordered set of block rules; ``check`` returns the signal of the first rule that matches.

    ``builtin()`` returns a fresh copy each time, so ``extend`` on it never changes another caller's set.
    """

    __slots__ = ("_plans", "_rules")

    def __init__(self, rules: Iterable[BlockRule] = ()) -> None:
        self._rules = list(rules)
        #: The plan for each status seen, made on its first response (``extend`` starts afresh).
        self._plans: dict[int, _Plan] = {}

    @classmethod
    def builtin(cls) -> BlockRules:
        """The rules for the anti-bot vendors spire knows."""
        return cls(_BUILTIN)

    @classmethod
    def statuses(cls, statuses: Iterable[int]) -> BlockRules:
        """Bare statuses counted as blocks, with vendor ``"status"`` and kind ``block``."""
        codes = frozenset(_status(code, "statuses") for code in statuses)
        if not codes:
            return cls()
        return cls([BlockRule("status", BlockKind.BLOCK, status=codes)])

    @classmethod
    def from_toml(cls, text: str) -> BlockRules:
        """Rules from ``[[rule]]`` tables: vendor, kind, and optional status, header, value, contains, body.

        Raises ``ConfigError`` for TOML that does not parse, an unknown key or kind, or a rule with no
        condition.
        """
        import tomllib  # only for rules written in TOML

        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"block rules are not valid TOML: {exc}") from None
        unknown = set(document) - {"rule"}
        if unknown:
            raise ConfigError(f"block rules: unknown top-level keys {sorted(unknown)}; write [[rule]] tables")
        tables = document.get("rule", [])
        if not isinstance(tables, list):
            raise ConfigError("block rules: 'rule' must be an array of tables ([[rule]])")
        return cls(_rule_from_table(index, table) for index, table in enumerate(tables, 1))

    def extend(self, rules: BlockRules | Iterable[BlockRule]) -> None:
        """Add ``rules`` after these ones: they are checked only when none of these match."""
        self._rules.extend(rules)
        self._plans.clear()

    def copy(self) -> BlockRules:
        """A copy that can be extended without changing this set."""
        return BlockRules(self._rules)

    def check(self, response: Page) -> BlockSignal | None:
        """The signal of the first rule ``response`` matches, or ``None`` for an ordinary response."""
        status = response.status
        plan = self._plans.get(status)
        if plan is None:
            plan = self._plans[status] = _Plan.of(self._rules, status)
        read = _Read(response)
        # An ordinary page has neither the header nor the marker of any rule: no rule is tried on it.
        if plan.rules and plan.possible(read):
            for rule in plan.rules:
                if rule._holds(read):
                    return BlockSignal(rule.vendor, rule.kind)
        return None

    def __iter__(self) -> Iterator[BlockRule]:
        return iter(tuple(self._rules))

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        vendors = ", ".join(dict.fromkeys(rule.vendor for rule in self._rules))
        return f"<BlockRules {len(self._rules)} rules: {vendors}>"


def _status(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 599:
        raise ConfigError(f"{where}: {value!r} is not an HTTP status")
    return value


def _rule_from_table(index: int, table: Any) -> BlockRule:
    where = f"block rule {index}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = set(table) - _RULE_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    vendor = table.get("vendor")
    if not isinstance(vendor, str) or not vendor.strip():
        raise ConfigError(f"{where}: vendor must be a non-empty string")
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in BlockKind.__members__.values():
        raise ConfigError(f"{where}: kind must be one of challenge, captcha, block, not {kind!r}")
    status = table.get("status")
    codes = status if isinstance(status, list) else [] if status is None else [status]
    texts: dict[str, str | None] = {}
    for key in ("header", "value", "contains", "body"):
        text = table.get(key)
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise ConfigError(f"{where}: {key} must be a non-empty string")
        texts[key] = text
    return BlockRule(
        vendor.strip(),
        BlockKind(kind),
        status=frozenset(_status(code, where) for code in codes),
        **texts,
    )


def _rule(vendor: str, kind: BlockKind, *statuses: int, **conditions: str) -> BlockRule:
    return BlockRule(vendor, kind, status=frozenset(statuses), **conditions)


_C, _Q, _B = BlockKind.CHALLENGE, BlockKind.CAPTCHA, BlockKind.BLOCK
# Each marker is one the vendor puts on its own block pages and not on the pages it protects (both
# Cloudflare and Imperva inject scripts into ordinary pages, so their challenge markers are specific).
_BUILTIN = (
    # Cloudflare marks every challenge it serves with this header.
    _rule("cloudflare", _C, header="cf-mitigated", value="challenge"),
    _rule("cloudflare", _C, 403, 503, header="server", value="cloudflare", body="window._cf_chl_opt"),
    _rule("cloudflare", _C, 403, 503, header="server", value="cloudflare", body="<title>Just a moment...</title>"),
    _rule("cloudflare", _B, 403, header="server", value="cloudflare", body="Sorry, you have been blocked"),
    _rule("cloudflare", _B, 403, 429, header="server", value="cloudflare", body="error code: 10"),
    # Akamai's edge answers "Access Denied" itself; its Bot Manager serves a sec-cpt challenge page.
    _rule("akamai", _C, 403, 428, body="/_sec/cp_challenge/"),
    _rule("akamai", _B, 403, header="server", value="AkamaiGHost", body="You don't have permission to access"),
    # DataDome's block page loads its captcha from captcha-delivery.com; x-dd-b flags a hard block.
    _rule("datadome", _Q, 403, body="captcha-delivery.com"),
    _rule("datadome", _B, 403, header="x-dd-b"),
    # PerimeterX (HUMAN) puts its "press and hold" captcha in a px-captcha element.
    _rule("perimeterx", _Q, 403, body='id="px-captcha"'),
    _rule("perimeterx", _Q, 403, body="window._pxAppId"),
    # Imperva (Incapsula): the challenge frame and the "incident ID" refusal, served with any status.
    _rule("imperva", _C, body="/_Incapsula_Resource?CWUDNSAI="),
    _rule("imperva", _B, body="Incapsula incident ID"),
    # AWS WAF names its action in a header on the 202 (challenge) and 405 (captcha) it answers.
    _rule("aws-waf", _Q, header="x-amzn-waf-action", value="captcha"),
    _rule("aws-waf", _C, header="x-amzn-waf-action", value="challenge"),
)
