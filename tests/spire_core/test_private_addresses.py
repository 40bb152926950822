"""Private, loopback and link-local addresses are reached only where the crawl started (nothing is sent there)."""

from __future__ import annotations

import ipaddress
import socket

import anyio
import pytest

import spire
from spire import Crawler, HostLimits, Links, Response, Router
from spire_core.backend.http import HttpBackend
from spire_core.seed import Seed
from spire_core.session.addresses import AddressPolicy, PrivateAddress, address_kind
from tests.sites.server import Site

FAST = HostLimits(max_in_flight=4)
# None of these is ever connected to: the policy refuses each before a socket is opened.
PRIVATE_TARGETS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://192.168.1.1/admin",
    "http://[fd00::1]/",
    "http://[::ffff:169.254.169.254]/",
]


def recording() -> tuple[Router, list[str]]:
    handled: list[str] = []
    routes = Router()

    @routes.default
    async def page(response: Response, links: Links) -> None:
        handled.append(response.url)
        await links.all()

    return routes, handled


@pytest.mark.parametrize("target", PRIVATE_TARGETS)
@pytest.mark.parametrize("robots", [True, False])
def test_a_redirect_to_a_private_address_is_skipped_not_fetched(site: Site, target: str, robots: bool) -> None:
    site.page("/go", "", status=302, headers={"Location": target})
    routes, handled = recording()
    stats = Crawler(routes, host_limits=FAST, robots=robots).run([site.url("/go")])
    assert handled == []
    assert stats.skipped("private_address") == 1
    assert stats.failed == 0


def test_a_link_to_a_private_address_is_skipped_and_its_robots_txt_not_read(site: Site) -> None:
    site.page("/", "<a href='http://169.254.169.254/latest/'>metadata</a> <a href='/ok'>ok</a>")
    site.page("/ok", "ok")
    routes, handled = recording()
    stats = Crawler(routes, host_limits=FAST, policy=spire.CrawlPolicy(strategy="all")).run([site.url("/")])
    assert sorted(handled) == [site.url("/"), site.url("/ok")]
    assert stats.skipped("private_address") == 1
    assert stats.requests == 3  # robots.txt, / and /ok: no request, robots.txt included, to the link-local host


def test_a_site_crawl_skips_a_start_page_redirected_to_a_private_address(site: Site) -> None:
    # a start page may go where its redirects lead: off the site's scope, but not to a link-local address
    site.page("/", "", status=302, headers={"Location": "http://169.254.169.254/"})

    async def main() -> list[str]:
        crawl = spire.crawl(site.url("/"), host_limits=FAST)
        async with crawl as pages:
            kept = [page.url async for page in pages]
        assert crawl.stats.skipped("private_address") == 1
        return kept

    assert anyio.run(main) == []


def test_loopback_links_are_followed_when_the_crawl_starts_on_loopback(site: Site, other_site: Site) -> None:
    site.page("/", f"<a href='{other_site.url('/b')}'>b</a>")
    other_site.page("/b", "b")
    routes, handled = recording()
    Crawler(routes, host_limits=FAST, policy=spire.CrawlPolicy(strategy="all")).run([site.url("/")])
    assert handled == [site.url("/"), other_site.url("/b")]


def test_the_kinds_of_address() -> None:
    kinds = {
        "127.0.0.1": "loopback",
        "::1": "loopback",
        "0.0.0.0": "loopback",  # unspecified: a connection to it reaches this machine
        "::": "loopback",
        "::ffff:0.0.0.0": "loopback",
        "169.254.169.254": "link_local",
        "fe80::1": "link_local",
        "::ffff:169.254.169.254": "link_local",
        "10.0.0.1": "private",
        "192.168.1.1": "private",
        "fd00::1": "private",
        "100.64.0.1": "private",
        "93.184.216.34": "public",
    }
    assert {text: address_kind(ipaddress.ip_address(text)) for text in kinds} == kinds


def own_private_address() -> str:
    """This machine's own address on its network, when it is a private one (else the test is skipped).

    A UDP socket's ``connect`` only picks the route, and the address it would send from: nothing is sent.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))
        except OSError:
            pytest.skip("this machine has no route off loopback")
        own = str(probe.getsockname()[0])
    if address_kind(ipaddress.ip_address(own)) != "private":
        pytest.skip(f"this machine's own address {own} is not a private one")
    return own


def test_an_unspecified_address_is_loopback_so_a_crawl_started_on_private_space_does_not_reach_this_machine(
    site: Site,
) -> None:
    # the unspecified address and its short and IPv4-in-IPv6 forms connect to this machine's own services
    own = own_private_address()
    with Site(host=own) as intranet:
        start = f"http://{own}:{intranet.port}/"
        port = site.port
        forms = [f"http://0.0.0.0:{port}/zero", f"http://0:{port}/short", f"http://[::ffff:0.0.0.0]:{port}/mapped"]
        intranet.page("/", "".join(f"<a href='{url}'>x</a>" for url in [*forms, site.url("/loopback")]))
        routes, handled = recording()
        stats = Crawler(routes, host_limits=FAST, policy=spire.CrawlPolicy(strategy="all")).run([start])
    assert handled == [start]
    assert site.requests == []  # nothing reached the service on loopback, robots.txt included
    assert stats.skipped("private_address") == 4


def own_name() -> tuple[str, str]:
    """This machine's name, not a ``localhost`` one, and the address it resolves to here, when that is
    this machine's own and not public (loopback in /etc/hosts, a container's private address); else skip."""
    name = socket.gethostname().lower()
    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)}
    except OSError:
        pytest.skip(f"this machine's name {name} does not resolve")
    if name == "localhost" or name.endswith(".localhost") or len(found) != 1:
        pytest.skip(f"this machine's name {name} is a localhost name or has several addresses: {found}")
    (address,) = found
    if address_kind(ipaddress.ip_address(address)) == "public":
        pytest.skip(f"this machine's name {name} resolves to a public address")
    return name, address


@pytest.mark.parametrize("options", [{}, {"http2": True}], ids=["aiohttp", "httpx"])
def test_a_crawl_started_on_a_name_follows_links_to_addresses_of_the_kind_the_name_resolves_to(
    options: dict[str, bool],
) -> None:
    # a start name that resolves to loopback (or private space) is a crawl of that space, not a public one
    name, address = own_name()
    with Site(host=address) as start_site, Site(host=address) as other:
        start = f"http://{name}:{start_site.port}/"
        linked = f"http://{address}:{other.port}/b"
        start_site.page("/", f"<a href='{linked}'>b</a>")
        other.page("/b", "b")
        routes, handled = recording()
        crawler = Crawler(
            routes, backend=HttpBackend(**options), host_limits=FAST, policy=spire.CrawlPolicy(strategy="all")
        )
        stats = crawler.run([start])
    assert handled == [start, linked]
    assert stats.skipped("private_address") == 0


def test_allow_private_sends_anywhere_and_the_refusal_names_the_fix() -> None:
    async def main() -> None:
        policy = AddressPolicy()
        policy.started([Seed("http://127.0.0.1:9/")])
        policy.check(Seed("http://127.0.0.2:9/"))  # loopback, like the start: allowed
        with pytest.raises(PrivateAddress, match=r"allow_private=True"):
            policy.check(Seed("http://10.1.2.3/"))
        AddressPolicy(allow_private=True).check(Seed("http://10.1.2.3/"))

    anyio.run(main)


def test_a_process_given_no_seeds_refuses_link_local_addresses_only() -> None:
    # a fleet worker or a resumed crawl: it cannot tell whether the crawl started on private space
    async def main() -> None:
        policy = AddressPolicy()
        policy.check(Seed("http://127.0.0.1:9/"))
        policy.check(Seed("http://10.1.2.3/"))
        with pytest.raises(PrivateAddress, match="link-local"):
            policy.check(Seed("http://169.254.169.254/"))
        policy.started([Seed("http://93.184.216.34/")])  # told now: a public start
        with pytest.raises(PrivateAddress, match="loopback"):
            policy.check(Seed("http://127.0.0.1:9/"))

    anyio.run(main)


def test_a_host_name_is_judged_by_the_addresses_the_backend_resolves_it_to() -> None:
    from spire_core.backend.http import GuardedResolver

    async def main() -> None:
        policy = AddressPolicy()
        policy.started([Seed("http://93.184.216.34/")])  # a public start: loopback is not the crawl's
        resolver = GuardedResolver()
        try:
            with policy.guarding(Seed("http://localhost:9/x")), pytest.raises(PrivateAddress, match="resolves to"):
                await resolver.resolve("localhost", 9)  # real resolution: /etc/hosts says loopback
            with policy.guarding(Seed("http://a.example/")):
                assert await resolver.resolve("localhost", 9)  # a proxy's host, not the request's: passes
            assert await resolver.resolve("localhost", 9)  # outside a crawl's request: no policy
        finally:
            await resolver.close()

    anyio.run(main)


#: Each path of ``HttpBackend`` that connects over TCP, and the loops it runs on (http3's TCP side: a
#: plain ``http://`` URL, or an https one before any Alt-Svc).
TCP_PATHS = [
    pytest.param({}, "asyncio", id="aiohttp"),
    pytest.param({"http2": True}, "asyncio", id="httpx-asyncio"),
    pytest.param({"http2": True}, "trio", id="httpx-trio"),
    pytest.param({"http3": True}, "asyncio", id="http3-tcp-side"),
]


def fetched_under(policy_start: str, url: str, options: dict[str, bool], loop: str) -> int | PrivateAddress:
    """``url``'s status through ``HttpBackend(**options)``, sent as a crawl started on ``policy_start``
    sends it (the request path marks it with the crawl's policy), or the ``PrivateAddress`` refusing it."""

    async def main() -> int | PrivateAddress:
        policy = AddressPolicy()
        policy.started([Seed(policy_start)])
        backend = HttpBackend(**options)
        seed = Seed(url)
        try:
            with anyio.fail_after(10), policy.guarding(seed):
                return (await backend.fetch(seed)).status
        except PrivateAddress as refused:
            return refused
        finally:
            await backend.aclose()

    return anyio.run(main, backend=loop)


@pytest.mark.parametrize(("options", "loop"), TCP_PATHS)
def test_a_host_name_that_resolves_to_loopback_is_not_connected_to_on_any_tcp_path(
    site: Site, options: dict[str, bool], loop: str
) -> None:
    site.page("/x", "x")
    # a public start: loopback is not the crawl's; localhost resolves (/etc/hosts) to loopback
    refused = fetched_under("http://93.184.216.34/", f"http://localhost:{site.port}/x", options, loop)
    assert isinstance(refused, PrivateAddress)
    assert "resolves to a loopback address" in str(refused)
    assert site.requests == []  # refused before a connection was opened


@pytest.mark.parametrize(("options", "loop"), TCP_PATHS)
def test_a_host_name_the_crawl_may_reach_is_connected_to_at_an_address_it_resolved_to(
    site: Site, options: dict[str, bool], loop: str
) -> None:
    site.page("/x", "x")
    # localhost may resolve to ::1 before 127.0.0.1, where the site listens: each address is tried in turn
    assert fetched_under(site.url("/"), f"http://localhost:{site.port}/x", options, loop) == 200
    assert site.hits() == {"/x": 1}
