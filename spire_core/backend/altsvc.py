"""What origins say of HTTP/3: ``Alt-Svc`` headers (RFC 7838), remembered per origin with their max-age.

    memory = AltSvcMemory()
    memory.heard("https://site.example:443", "site.example", 'h3=":443"; ma=3600')
    memory.port("https://site.example:443")  # 443, for an hour

Each header from an origin replaces what it said before, and ``clear`` forgets it. An origin whose
QUIC handshake failed stays on TCP for ``broken_for`` seconds (``failed``). No aioquic here: the
backend reads the mode and this memory without loading the QUIC stack.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Literal

from spire_core import errors

__all__ = [
    "DEFAULT_ALT_SVC_MAX_AGE",
    "DEFAULT_BROKEN_FOR",
    "AltService",
    "AltSvcMemory",
    "Http3Mode",
    "http3_mode",
    "parse_alt_svc",
]

#: How ``HttpBackend(http3=)`` chooses HTTP/3: ``alt-svc`` (``True``), ``prefer`` or ``only``.
Http3Mode = Literal["alt-svc", "prefer", "only"]

#: An ``Alt-Svc`` entry without ``ma=`` lasts 24 hours (RFC 7838, section 3.1).
DEFAULT_ALT_SVC_MAX_AGE = 86400.0
#: How long an origin whose QUIC handshake failed stays on TCP before HTTP/3 is tried again.
DEFAULT_BROKEN_FOR = 300.0


def http3_mode(value: object) -> Http3Mode | None:
    """The mode ``HttpBackend(http3=value)`` names (``None``: off); ``ConfigError`` for anything else."""
    if value is False or value is None:
        return None
    if value is True:
        return "alt-svc"
    if value in ("alt-svc", "prefer", "only"):
        return value
    raise errors.ConfigError(
        f'http3= is True (HTTP/3 where the server offers it), "prefer", "only" or False, not {value!r}'
    )


@dataclasses.dataclass(frozen=True, slots=True)
class AltService:
    """One ``Alt-Svc`` entry: the protocol, its host (empty: the origin's own) and port, and its max-age."""

    protocol: str
    host: str
    port: int
    max_age: float


def parse_alt_svc(value: str) -> list[AltService] | None:
    """The entries of an ``Alt-Svc`` header, in order; ``None`` for ``clear``. Malformed entries are left out.

    parse_alt_svc('h3=":443"; ma=3600, h2="alt.example:443"')  # [AltService("h3", "", 443, 3600.0), ...]
    """
    if value.strip().lower() == "clear":
        return None
    found = []
    for entry in value.split(","):
        alternative, *parameters = (part.strip() for part in entry.split(";"))
        protocol, equals, authority = alternative.partition("=")
        host, colon, port = authority.strip().strip('"').rpartition(":")
        if not equals or not colon or not port.isdigit() or not 0 < int(port) < 65536:
            continue
        max_age = DEFAULT_ALT_SVC_MAX_AGE
        for parameter in parameters:
            name, _, given = parameter.partition("=")
            if name.strip().lower() == "ma" and given.strip().strip('"').isdigit():
                max_age = float(given.strip().strip('"'))
        found.append(AltService(protocol.strip(), host, int(port), max_age))
    return found


class AltSvcMemory:
    """What each origin (``scheme://host:port``) said of HTTP/3, until its max-age, and which origins
    failed over QUIC lately. ``clock`` is injected so tests step it."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, broken_for: float = DEFAULT_BROKEN_FOR) -> None:
        self._clock = clock
        self.broken_for = broken_for
        self._h3: dict[str, tuple[int, float]] = {}  # origin -> (UDP port, expiry)
        self._broken: dict[str, float] = {}  # origin -> when QUIC may be tried again

    def heard(self, origin: str, host: str, value: str) -> None:
        """Take in an ``Alt-Svc`` header from ``origin``: it replaces what the origin said before."""
        entries = parse_alt_svc(value)
        self._h3.pop(origin, None)
        for entry in entries or ():
            # another host would need its own address check and certificate: only the origin's own host is used
            if entry.protocol == "h3" and entry.host in ("", host) and entry.max_age > 0:
                self._h3[origin] = (entry.port, self._clock() + entry.max_age)
                return

    def port(self, origin: str) -> int | None:
        """The UDP port ``origin`` offers HTTP/3 on, while its ``Alt-Svc`` lasts and QUIC is not broken there."""
        found = self._h3.get(origin)
        if found is None or self.broken(origin):
            return None
        if self._clock() >= found[1]:
            del self._h3[origin]
            return None
        return found[0]

    def failed(self, origin: str) -> None:
        """QUIC got no working answer from ``origin``: keep it on TCP for ``broken_for`` seconds."""
        self._broken[origin] = self._clock() + self.broken_for

    def worked(self, origin: str) -> None:
        self._broken.pop(origin, None)

    def broken(self, origin: str) -> bool:
        """Whether QUIC failed at ``origin`` less than ``broken_for`` seconds ago."""
        until = self._broken.get(origin)
        if until is None:
            return False
        if self._clock() >= until:
            del self._broken[origin]
            return False
        return True
