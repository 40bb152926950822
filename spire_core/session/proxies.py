"""``ProxyPool``: sticky proxies per origin, strikes and bans, a new proxy for each retry.

    pool = ProxyPool(
        ["http://user:pass@proxy-a.example:8080", "http://user:pass@proxy-b.example:8080"],
        sticky_for=600, ban_after=3, ban_for=120,
    ).rotate_on_block(BlockRules.builtin())
    HttpBackend(proxies=pool)

An origin keeps the proxy it got for ``sticky_for`` seconds. A proxy error (the proxy refused,
reset, or answered 407) or a block page that ``rotate_on_block`` rules recognise is a strike on the
proxy that carried it, and moves the origin off that proxy; ``ban_after`` strikes in a row ban the
proxy for ``ban_for`` seconds. A retry (``seed.attempt > 0``) always goes through another healthy
proxy than the try before. ``stats()`` reports each proxy; every address it prints, logs or raises
has its password redacted. Host limits count an origin's requests across every proxy.

``ProxyPool.identified({url: Identity(...), ...})`` pairs each proxy with a browser identity: requests
through it present that identity's headers and keep its own cookie jar and connections.

The browser backend sets Chromium's proxy from ``ProxyPool.choose`` and ``ProxyAddress``:
``address.server`` is the ``--proxy-server`` value (no credentials; Chromium takes none there) and
``address.username`` / ``address.password`` answer the proxy's authentication challenge.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta

from spire_core.blocks import BlockRules, BlockSignal
from spire_core.errors import ConfigError, ProxyError, SpireError
from spire_core.outcome import seconds
from spire_core.response import Response
from spire_core.session.identity import Identity
from spire_core.session.redact import redact_text

__all__ = ["ProxyAddress", "ProxyPool", "ProxyStats"]

#: Seeds whose last proxy a pool remembers for their retries.
_REMEMBERED = 10_000


@dataclasses.dataclass(frozen=True, slots=True)
class ProxyAddress:
    """A proxy URL taken apart, for transports that want the parts (Chromium's ``--proxy-server``)."""

    url: str
    scheme: str
    host: str
    port: int
    username: str | None
    password: str | None
    #: The browser identity requests through this proxy present (``ProxyPool.identified``), if any.
    identity: Identity | None = None

    @classmethod
    def parse(cls, url: str) -> ProxyAddress:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https", "socks5", "socks5h") or not parts.hostname:
            raise ConfigError(f"a proxy is scheme://[user:password@]host:port, not {redact_text(url)!r}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 1080 if parts.scheme.startswith("socks") else 80)
        except ValueError:
            raise ConfigError(f"proxy {redact_text(url)!r} has an invalid port") from None
        username = urllib.parse.unquote(parts.username) if parts.username else None
        password = urllib.parse.unquote(parts.password) if parts.password else None
        return cls(url, parts.scheme, parts.hostname, port, username, password)

    @property
    def server(self) -> str:
        """``scheme://host:port``, without credentials."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def redacted(self) -> str:
        return redact_text(self.url)

    def __repr__(self) -> str:
        named = f" as {self.identity.name}" if self.identity is not None else ""
        return f"<ProxyAddress {self.redacted}{named}>"


@dataclasses.dataclass(frozen=True, slots=True)
class ProxyStats:
    """One proxy's counters; ``proxy`` is redacted."""

    proxy: str
    requests: int
    failures: int
    blocks: int
    strikes: int
    banned: bool
    banned_until: float
    #: The name of the identity the proxy carries (``ProxyPool.identified``), if any.
    identity: str | None = None


@dataclasses.dataclass(slots=True)
class _Proxy:
    address: ProxyAddress
    requests: int = 0
    failures: int = 0
    blocks: int = 0
    strikes: int = 0
    banned_until: float = 0.0


@dataclasses.dataclass(slots=True)
class _Stick:
    proxy: _Proxy
    until: float


class ProxyPool:
    """The proxies a crawl sends through, which origin uses which, and which are banned."""

    def __init__(
        self,
        proxies: Iterable[str],
        *,
        sticky_for: float | timedelta = 600.0,
        ban_after: int = 3,
        ban_for: float | timedelta = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._proxies = [_Proxy(ProxyAddress.parse(url)) for url in proxies]
        if not self._proxies:
            raise ConfigError("a ProxyPool needs at least one proxy")
        if ban_after < 1:
            raise ConfigError(f"ban_after must be at least 1, not {ban_after}")
        self.sticky_for = seconds(sticky_for) or 0.0
        self.ban_after = ban_after
        self.ban_for = seconds(ban_for) or 0.0
        self.block_rules: BlockRules | None = None
        self._clock = clock
        self._by_url = {proxy.address.url: proxy for proxy in self._proxies}
        self._sticks: dict[str, _Stick] = {}
        self._turn = itertools.count()
        #: The proxy each seed (by unique key) last went through until it succeeds, so its retry takes
        #: another; bounded, oldest first out.
        self._last_of: collections.OrderedDict[str, _Proxy] = collections.OrderedDict()

    @classmethod
    def identified(
        cls,
        proxies: Mapping[str, Identity] | Iterable[tuple[str, Identity]],
        *,
        sticky_for: float | timedelta = 600.0,
        ban_after: int = 3,
        ban_for: float | timedelta = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> ProxyPool:
        """A pool whose every proxy carries its own browser identity: its headers, its own cookie jar
        and its own connections in ``HttpBackend``, and its name in the request log.

            ProxyPool.identified({
                "http://user:pass@proxy-a.example:8080": Identity("chrome", "windows"),
                "http://user:pass@proxy-b.example:8080": Identity("firefox", "macos"),
            }, sticky_for=600)

        The two stick together: an origin keeps its proxy, and so its identity, for ``sticky_for``
        seconds; a retry moves to another proxy and presents that proxy's identity.
        """
        pairs = list(proxies.items() if isinstance(proxies, Mapping) else proxies)
        for url, identity in pairs:
            if not isinstance(identity, Identity):
                raise ConfigError(
                    f"ProxyPool.identified pairs each proxy with an Identity, not {identity!r} "
                    f"(for {redact_text(url)!r})"
                )
        pool = cls([url for url, _ in pairs], sticky_for=sticky_for, ban_after=ban_after, ban_for=ban_for, clock=clock)
        for proxy, (_, identity) in zip(pool._proxies, pairs, strict=True):
            proxy.address = dataclasses.replace(proxy.address, identity=identity)
        pool._by_url = {proxy.address.url: proxy for proxy in pool._proxies}
        return pool

    @property
    def carries_identities(self) -> bool:
        """Whether its proxies carry identities of their own (``ProxyPool.identified``)."""
        return any(proxy.address.identity is not None for proxy in self._proxies)

    @property
    def addresses(self) -> tuple[ProxyAddress, ...]:
        """The pool's proxies, in the order given."""
        return tuple(proxy.address for proxy in self._proxies)

    def rotate_on_block(self, rules: BlockRules) -> ProxyPool:
        """Count a block page these ``rules`` recognise as a strike on its proxy; returns the pool."""
        if self.block_rules is None:
            self.block_rules = rules.copy()
        else:
            self.block_rules.extend(rules)
        return self

    # -- choosing ---------------------------------------------------------------------------------

    def _healthy(self, now: float) -> list[_Proxy]:
        return [proxy for proxy in self._proxies if proxy.banned_until <= now]

    def choose(self, origin: str, *, attempt: int = 0, key: str | None = None) -> ProxyAddress:
        """The proxy for a request to ``origin``: its sticky one, or on a retry another healthy one.

        ``key`` (the seed's unique key) lets a retry move off the proxy that carried that seed's try
        before, whichever proxy the origin uses now. Raises ``ProxyError`` when every proxy is banned.
        """
        now = self._clock()
        stick = self._sticks.get(origin)
        healthy = self._healthy(now)
        if not healthy:
            until = min(proxy.banned_until for proxy in self._proxies)
            raise ProxyError(f"every proxy of the pool is banned, the first for {until - now:.0f} s more")
        before = self._last_of.pop(key, None) if key is not None and attempt > 0 else None
        if stick is not None and attempt == 0 and stick.until > now and stick.proxy in healthy:
            chosen = stick.proxy
        else:
            last = before if before is not None else stick.proxy if stick is not None else None
            chosen = self._next(last, healthy)
            self._sticks[origin] = _Stick(chosen, now + self.sticky_for)
        chosen.requests += 1
        if key is not None:
            self._last_of[key] = chosen
            if len(self._last_of) > _REMEMBERED:
                self._last_of.popitem(last=False)
        return chosen.address

    def _next(self, last: _Proxy | None, healthy: list[_Proxy]) -> _Proxy:
        """A new origin gets the next proxy in turn; a moving one the next healthy proxy after its last."""
        if last is None:
            return healthy[next(self._turn) % len(healthy)]
        start = self._proxies.index(last) + 1
        ring = self._proxies[start:] + self._proxies[:start]
        return next(proxy for proxy in ring if proxy in healthy)

    # -- what happened ----------------------------------------------------------------------------

    def observe(
        self, origin: str, proxy: ProxyAddress, response: Response, *, key: str | None = None
    ) -> BlockSignal | None:
        """Note the response ``proxy`` carried; a block page is a strike. Returns the block signal, if any.

        A response below 400 for seed ``key`` ends its retries: its proxy is no longer remembered.
        """
        entry = self._by_url.get(proxy.url)
        if entry is None:
            return None
        signal = self.block_rules.check(response) if self.block_rules is not None else None
        if signal is None:
            entry.strikes = 0
            if key is not None and response.status < 400:
                self._last_of.pop(key, None)
            return None
        entry.blocks += 1
        self._strike(origin, entry)
        return signal

    def failed(self, origin: str, proxy: ProxyAddress, error: BaseException) -> None:
        """Note a failure through ``proxy``; a proxy error is a strike."""
        entry = self._by_url.get(proxy.url)
        if entry is None:
            return
        if isinstance(error, SpireError) and error.category == "proxy":  # not proxy_target: the site failed
            entry.failures += 1
            self._strike(origin, entry)

    def _strike(self, origin: str, entry: _Proxy) -> None:
        entry.strikes += 1
        stick = self._sticks.get(origin)
        if stick is not None and stick.proxy is entry:
            del self._sticks[origin]  # the origin moves off the proxy that failed it
        if entry.strikes >= self.ban_after:
            entry.banned_until = self._clock() + self.ban_for
            entry.strikes = 0

    def stats(self) -> list[ProxyStats]:
        """Each proxy's requests, failures, blocks, strikes in a row and ban; addresses redacted."""
        now = self._clock()
        return [
            ProxyStats(
                proxy=proxy.address.redacted,
                requests=proxy.requests,
                failures=proxy.failures,
                blocks=proxy.blocks,
                strikes=proxy.strikes,
                banned=proxy.banned_until > now,
                banned_until=proxy.banned_until,
                identity=proxy.address.identity.name if proxy.address.identity is not None else None,
            )
            for proxy in self._proxies
        ]

    def __repr__(self) -> str:
        return f"<ProxyPool {', '.join(proxy.address.redacted for proxy in self._proxies)}>"
