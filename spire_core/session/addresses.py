"""``AddressPolicy``: a crawl reaches private, loopback and link-local addresses only where it started.

A service that crawls URLs its users submit must not be made to read its own network: a redirect
to ``169.254.169.254`` (a cloud's metadata service), ``10.0.0.1`` or ``[fd00::1]``, or a link to
one, is refused before anything is sent, and counted as ``private_address``. The hosts of the start
seeds are the user's choice and always allowed, and so is every address of the same kind as theirs:
a crawl started on ``127.0.0.1`` follows links on loopback, a crawl of an intranet host follows
links within private space, and neither reaches a link-local address unless it started on one.
``Crawler(allow_private=True)`` turns the check off.

Hosts written as addresses (the usual way in: a redirect to ``http://169.254.169.254/``), IPv4 in
IPv6 included, are judged before anything is sent, and ``localhost`` names are loopback (RFC 6761),
as is an unspecified address (``0.0.0.0``, ``0``, ``[::]``): a connection to it reaches this machine.
A host name is judged by the addresses it resolves to, when the backend resolves it: the request
path marks each request (``guarding``) and ``HttpBackend`` asks ``resolved`` before it connects (its
aiohttp resolver, its httpx dialer, its QUIC connect), so no second DNS lookup is made and the
addresses judged are the ones connected to. Where something else resolves the name (a proxy, a
given httpx transport, a browser), only addresses and ``localhost`` names are judged. A start host
that is a name has the kinds of the addresses it resolves to, learnt as its first request resolves
it (no lookup of its own: a crawl of a long list of sites starts at once), so a crawl started on
``http://wiki.corp/`` (``10.0.0.5``) follows links to ``10.0.0.6``.

A crawl process given no seeds (a ``spire worker`` of a fleet, a crawl resumed from its frontier
file) cannot tell where the crawl started: it refuses link-local addresses only, until it is given
seeds (``crawler.push``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from contextvars import ContextVar

from spire_core import url as urls
from spire_core.errors import FetchError
from spire_core.seed import Seed

__all__ = ["AddressPolicy", "PrivateAddress", "address_kind", "check_resolved"]

#: Origins whose verdict is remembered.
_REMEMBERED = 4096

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
#: What a process given no start seeds allows besides public addresses: it cannot tell whether the
#: crawl started there, and a fleet of workers crawling an intranet (or loopback) must go on.
_UNTOLD = frozenset({"loopback", "private"})


#: The policy and the seed of the request being sent in this task, for the backend's resolver.
_sending: ContextVar[tuple[AddressPolicy, Seed] | None] = ContextVar("spire_address_policy", default=None)


def check_resolved(host: str, addresses: Sequence[str]) -> None:
    """``PrivateAddress`` when ``host``, the host of the request being sent, resolved to addresses of a
    kind its crawl did not start on; for a backend's resolver. Any other host (a proxy's) passes."""
    found = _sending.get()
    if found is not None:
        policy, seed = found
        policy.resolved(seed, host, addresses)


class PrivateAddress(FetchError):
    """A request to a private, loopback or link-local address the crawl did not start on: not sent."""

    category = "private_address"


def address_kind(address: Address) -> str:
    """``public``, ``loopback``, ``link_local`` or ``private`` (every other address not reachable from everywhere).

    An unspecified address (``0.0.0.0``, ``::``) is loopback: a connection to it reaches this machine.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback or address.is_unspecified:
        return "loopback"
    if address.is_link_local:
        return "link_local"
    if address.is_global:
        return "public"
    return "private"


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


class AddressPolicy:
    """Which hosts a crawl may send to: its start seeds' hosts, and any host whose addresses are of a
    kind they have (public addresses always); ``allow_private`` sends anywhere."""

    def __init__(self, *, allow_private: bool = False) -> None:
        self.allow_private = allow_private
        self._start_hosts: set[str] = set()
        self._kinds: set[str] = {"public"}
        #: Whether this process was given start seeds (else it cannot tell private space was chosen).
        self._given = False
        #: Origins found allowed (until the crawl is told of its start seeds).
        self._allowed: set[str] = set()

    def started(self, seeds: Iterable[Seed]) -> None:
        """Note the hosts of start seeds (the user's choice): they, and addresses of their kinds, are allowed
        (a name's kinds: those of the addresses it resolves to, learnt by ``resolved``)."""
        if self.allow_private:
            return
        for host in {urls.host_of(seed.url) for seed in seeds} - self._start_hosts:
            self._given = True
            self._allowed.clear()  # verdicts made before the crawl said where it starts
            self._start_hosts.add(host)
            self._kinds |= self._kinds_of(host)

    def check(self, seed: Seed) -> None:
        """``PrivateAddress`` when ``seed``'s host is of an address kind the crawl did not start on."""
        if self.allow_private or seed.origin in self._allowed:
            return
        host = urls.host_of(seed.url)
        if host not in self._start_hosts:
            self._refuse(seed, host, self._kinds_of(host), "is")
        if len(self._allowed) < _REMEMBERED:
            self._allowed.add(seed.origin)

    def guarding(self, seed: Seed) -> _Guard:
        """``with policy.guarding(seed):`` marks ``seed`` as the request being sent, so the backend's
        resolver can judge its addresses (a small class: it runs once a request)."""
        return _Guard(None if self.allow_private else (self, seed))

    def resolved(self, seed: Seed, host: str, addresses: Sequence[str]) -> None:
        """``PrivateAddress`` when ``seed``'s host ``host`` resolved to an address kind the crawl did not start on;
        a start host's addresses make their kinds the crawl's."""
        if self.allow_private or _literal(host) is not None:
            return  # an address, already judged by check()
        if host != urls.host_of(seed.url):
            return  # not the request's own host: a proxy's
        kinds = {address_kind(ipaddress.ip_address(address.split("%", 1)[0])) for address in addresses}
        if host in self._start_hosts:
            self._kinds |= kinds  # its first request resolves it, before any link or redirect of it is judged
        else:
            self._refuse(seed, host, kinds, "resolves to")

    def _refuse(self, seed: Seed, host: str, kinds: Iterable[str], how: str) -> None:
        """``PrivateAddress`` naming the fix when any of ``kinds`` is not the crawl's to reach."""
        refused = set(kinds) - (self._kinds if self._given else self._kinds | _UNTOLD)
        if refused:
            raise PrivateAddress(
                f"{host} {how} a {' and '.join(sorted(refused)).replace('_', '-')} address the crawl did not "
                "start on: not sent (Crawler(allow_private=True) allows it)",
                url=seed.url,
            )

    @staticmethod
    def _kinds_of(host: str) -> frozenset[str]:
        """The kinds of address ``host`` is, when that can be told without DNS: an address, or a ``localhost`` name."""
        literal = _literal(host)
        if literal is not None:
            return frozenset({address_kind(literal)})
        if host == "localhost" or host.endswith(".localhost"):
            return frozenset({"loopback"})
        return frozenset({"public"})  # a name: judged by what it resolves to (``resolved``), not looked up here


class _Guard:
    """The mark ``AddressPolicy.guarding`` sets for the length of one request."""

    __slots__ = ("_mark", "_token")

    def __init__(self, mark: tuple[AddressPolicy, Seed] | None) -> None:
        self._mark = mark

    def __enter__(self) -> None:
        if self._mark is not None:
            self._token = _sending.set(self._mark)

    def __exit__(self, *exc: object) -> None:
        if self._mark is not None:
            _sending.reset(self._token)
