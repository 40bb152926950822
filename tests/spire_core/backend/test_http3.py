"""HTTP/3 through HttpBackend(http3=...), against hypercorn serving QUIC and TLS TCP on one 127.0.0.1 port."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from spire import BodyStream, Crawler, HostLimits, Html, Links, Response, Router
from spire_core.backend.altsvc import AltSvcMemory, http3_mode, parse_alt_svc
from spire_core.backend.http import HttpBackend, Timeouts
from spire_core.backend.http3 import STREAM_WINDOW
from spire_core.errors import BodyLimitError, ConfigError, ConnectError, FetchTimeout, InvalidUrl, TlsError
from spire_core.seed import Seed
from spire_core.session.proxies import ProxyPool
from spire_core.session.retry import RetryPolicy
from tests.sites.h3 import Http3Site


@pytest.fixture
def h3_site() -> Iterator[Http3Site]:
    with Http3Site() as running:
        yield running


def fetch_all(backend: HttpBackend, *urls: str) -> list[Response]:
    """Fetch ``urls`` one after another on one backend (one QUIC connection, one Alt-Svc memory)."""

    async def main() -> list[Response]:
        try:
            with anyio.fail_after(30):
                return [await backend.fetch(Seed(url)) for url in urls]
        finally:
            await backend.aclose()

    return anyio.run(main)


def test_http3_only_fetches_over_quic(h3_site: Http3Site) -> None:
    (response,) = fetch_all(HttpBackend(http3="only", verify=h3_site.ca_file), h3_site.url("/page"))
    assert response.status == 200
    assert response.http_version == "HTTP/3"
    assert b"HTTP/3 /page" in response.body  # the server saw HTTP/3 too
    assert h3_site.versions == ["3"]


def test_the_trace_line_says_http3(h3_site: Http3Site, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="spire.trace")
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    backend = HttpBackend(http3="only", verify=h3_site.ca_file)
    stats = Crawler(routes, backend=backend).run([h3_site.url("/one")])
    assert stats.finished == 1
    lines = [record.getMessage() for record in caplog.records if record.name == "spire.trace"]
    assert any("/one" in line and "status=200" in line and "version=HTTP/3" in line for line in lines)


def test_alt_svc_moves_the_next_request_to_quic(h3_site: Http3Site) -> None:
    first, second, third = fetch_all(
        HttpBackend(http3=True, verify=h3_site.ca_file), h3_site.url("/a"), h3_site.url("/b"), h3_site.url("/c")
    )
    assert first.http_version == "HTTP/1.1"  # nothing known of the origin yet: TCP, which offers h3
    assert first.headers["alt-svc"] == f'h3=":{h3_site.port}"; ma=3600'
    assert (second.http_version, third.http_version) == ("HTTP/3", "HTTP/3")
    assert h3_site.versions == ["1.1", "3", "3"]


def test_alt_svc_upgrades_from_http2_too(h3_site: Http3Site) -> None:
    first, second = fetch_all(
        HttpBackend(http2=True, http3=True, verify=h3_site.ca_file), h3_site.url("/a"), h3_site.url("/b")
    )
    assert (first.http_version, second.http_version) == ("HTTP/2", "HTTP/3")


def test_a_cookie_set_over_tcp_goes_with_the_next_request_over_quic(h3_site: Http3Site) -> None:
    first, second = fetch_all(
        HttpBackend(http3=True, verify=h3_site.ca_file), h3_site.url("/cookie"), h3_site.url("/cookie")
    )
    assert (first.http_version, second.http_version) == ("HTTP/1.1", "HTTP/3")
    assert second.body == b"cookie: visit=yes"


def test_http3_needs_asyncio() -> None:
    async def main() -> None:
        HttpBackend(http3=True).check_event_loop()

    with pytest.raises(ConfigError, match="asyncio only"):
        anyio.run(main, backend="trio")


def test_an_expired_alt_svc_goes_back_to_tcp() -> None:
    now = [0.0]
    memory = AltSvcMemory(clock=lambda: now[0])
    origin = "https://site.example:443"
    memory.heard(origin, "site.example", 'h3=":8443"; ma=60')
    assert memory.port(origin) == 8443
    now[0] = 59.9
    assert memory.port(origin) == 8443
    now[0] = 60.0
    assert memory.port(origin) is None


def test_each_alt_svc_header_replaces_the_last_and_clear_forgets() -> None:
    memory = AltSvcMemory(clock=lambda: 0.0)
    origin = "https://site.example:443"
    memory.heard(origin, "site.example", 'h3=":8443"')
    memory.heard(origin, "site.example", 'h2=":443"')  # no h3 now: the earlier offer is gone
    assert memory.port(origin) is None
    memory.heard(origin, "site.example", 'h3-29=":1", h3=":9443"; ma=10')
    assert memory.port(origin) == 9443
    memory.heard(origin, "site.example", "clear")
    assert memory.port(origin) is None


def test_alt_svc_for_another_host_is_not_followed() -> None:
    memory = AltSvcMemory(clock=lambda: 0.0)
    memory.heard("https://site.example:443", "site.example", 'h3="elsewhere.example:443"')
    assert memory.port("https://site.example:443") is None


def test_parse_alt_svc_reads_max_age_and_skips_malformed_entries() -> None:
    found = parse_alt_svc('h3=":443"; ma=3600; persist=1, h3="nonsense", h2="alt.example:8443"')
    assert found is not None
    assert [(each.protocol, each.host, each.port, each.max_age) for each in found] == [
        ("h3", "", 443, 3600.0),
        ("h2", "alt.example", 8443, 86400.0),
    ]
    assert parse_alt_svc(" Clear ") is None


def test_a_closed_udp_port_falls_back_to_tcp_within_the_connect_timeout() -> None:
    with Http3Site(quic=False) as site:  # TCP offers h3, nothing listens on the UDP port
        backend = HttpBackend(http3="prefer", verify=site.ca_file, timeout=Timeouts(connect=10, read=10, body=10))
        (response,) = fetch_all(backend, site.url("/a"))
        assert response.http_version == "HTTP/1.1"
        assert response.elapsed < 10  # the kernel's "port unreachable" ended the QUIC attempt, not the timeout
        assert site.versions == ["1.1"]


def test_quic_with_no_answer_falls_back_after_the_connect_timeout_and_is_remembered() -> None:
    with Http3Site(quic="silent") as site:  # the UDP port swallows every datagram, as a firewall does
        backend = HttpBackend(http3=True, verify=site.ca_file, timeout=Timeouts(connect=0.5, read=10, body=10))
        swallowed: list[int] = []

        async def main() -> list[Response]:
            responses = []
            try:
                with anyio.fail_after(30):
                    for path in ("/a", "/b", "/c"):
                        responses.append(await backend.fetch(Seed(site.url(path))))
                        # read after a response over TCP: the server has read every datagram sent before it
                        swallowed.append(site.swallowed)
            finally:
                await backend.aclose()
            return responses

        first, second, third = anyio.run(main)
        assert [each.http_version for each in (first, second, third)] == ["HTTP/1.1"] * 3
        assert second.elapsed >= 0.5  # Alt-Svc came with the first: it tried QUIC for the connect timeout, then TCP
        assert swallowed[1] > 0
        assert swallowed[2] == swallowed[1]  # the third did not try QUIC again: the failure is remembered
        assert site.versions == ["1.1", "1.1", "1.1"]


def test_a_remembered_quic_failure_ends_after_its_time() -> None:
    now = [0.0]
    memory = AltSvcMemory(clock=lambda: now[0], broken_for=300)
    origin = "https://site.example:443"
    memory.heard(origin, "site.example", 'h3=":443"; ma=86400')
    memory.failed(origin)
    assert memory.port(origin) is None
    now[0] = 300.0
    assert memory.port(origin) == 443


def test_http3_only_does_not_fall_back() -> None:
    with Http3Site(quic=False) as site:
        backend = HttpBackend(http3="only", verify=site.ca_file)
        with pytest.raises(ConnectError, match="no QUIC server"):
            fetch_all(backend, site.url("/a"))
        assert site.versions == []


def test_http3_only_times_out_when_quic_gets_no_answer() -> None:
    with Http3Site(quic="silent") as site:
        backend = HttpBackend(http3="only", verify=site.ca_file, timeout=Timeouts(connect=0.3, read=10, body=10))
        with pytest.raises(FetchTimeout, match="QUIC connect"):
            fetch_all(backend, site.url("/a"))
        assert site.versions == []  # nothing went over TCP


def test_http3_only_refuses_plain_http() -> None:
    with pytest.raises(InvalidUrl, match="https:// URLs only"):
        fetch_all(HttpBackend(http3="only"), "http://127.0.0.1:9/")


def test_an_untrusted_certificate_over_quic_is_a_tls_error(h3_site: Http3Site) -> None:
    with pytest.raises(TlsError):
        fetch_all(HttpBackend(http3="only"), h3_site.url("/a"))  # the system's CAs do not know the test CA


def test_the_body_cap_holds_over_http3_and_the_connection_stays_usable(h3_site: Http3Site) -> None:
    backend = HttpBackend(http3="only", verify=h3_site.ca_file, max_body_size=100_000)

    async def main() -> tuple[BaseException, Response]:
        try:
            with anyio.fail_after(30):
                with pytest.raises(BodyLimitError, match="100000-byte cap") as capped:
                    await backend.fetch(Seed(h3_site.url("/big?size=500000")))
                return capped.value, await backend.fetch(Seed(h3_site.url("/big?size=100000")))
        finally:
            await backend.aclose()

    error, after = anyio.run(main)
    assert error.url == h3_site.url("/big?size=500000")
    assert (after.http_version, len(after.body)) == (
        "HTTP/3",
        100_000,
    )  # the capped stream was stopped, not the connection


def test_concurrent_requests_share_one_quic_connection(h3_site: Http3Site) -> None:
    backend = HttpBackend(http3="only", verify=h3_site.ca_file)
    paths = [f"/page/{n}" for n in range(8)]

    async def main() -> dict[str, Response]:
        found: dict[str, Response] = {}

        async def one(path: str) -> None:
            found[path] = await backend.fetch(Seed(h3_site.url(path)))

        try:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    for path in paths:
                        group.start_soon(one, path)
        finally:
            await backend.aclose()
        return found

    found = anyio.run(main)
    for path in paths:  # each stream's body went to its own request
        assert f"HTTP/3 {path}<".encode() in found[path].body
    assert h3_site.max_in_flight > 1  # multiplexed: the server had several at once
    assert len(set(h3_site.clients)) == 1  # all on one connection, though they asked for it together


def test_the_body_deadline_holds_over_http3(h3_site: Http3Site) -> None:
    backend = HttpBackend(http3="only", verify=h3_site.ca_file, timeout=Timeouts(connect=10, read=10, body=0.5))
    with pytest.raises(FetchTimeout, match="body"):
        fetch_all(backend, h3_site.url("/stall"))


def test_the_read_timeout_holds_over_http3(h3_site: Http3Site) -> None:
    backend = HttpBackend(http3="only", verify=h3_site.ca_file, timeout=Timeouts(connect=10, read=0.5, body=10))
    with pytest.raises(FetchTimeout, match="read"):
        fetch_all(backend, h3_site.url("/stall"))


def test_a_crawl_over_http3_obeys_the_host_limits(h3_site: Http3Site) -> None:
    routes = Router()
    seen: list[str] = []

    @routes.default
    async def page(response: Response, html: Html, links: Links) -> None:
        seen.append(response.http_version or "")
        await links.enqueue()

    backend = HttpBackend(http3=True, verify=h3_site.ca_file)
    stats = Crawler(routes, backend=backend, concurrency=8, host_limits=HostLimits(max_in_flight=1)).run(
        [h3_site.url("/")]
    )
    assert stats.finished == 5  # / and its four pages
    assert h3_site.max_in_flight == 1  # never two at once on the server, over TCP or QUIC
    assert "HTTP/3" in seen  # the crawl moved to HTTP/3 once the origin offered it
    assert h3_site.versions[-1] == "3"


def test_http3_with_proxies_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot use a proxy"):
        HttpBackend(http3=True, proxies=ProxyPool(["http://127.0.0.1:3128"]))


def test_http3_takes_true_prefer_or_only() -> None:
    assert [http3_mode(each) for each in (False, True, "prefer", "only")] == [None, "alt-svc", "prefer", "only"]
    with pytest.raises(ConfigError, match='"prefer", "only"'):
        HttpBackend(http3="always")  # type: ignore[arg-type]


def test_http3_without_aioquic_is_a_config_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aioquic", None)  # as if aioquic were not installed
    with pytest.raises(ConfigError, match=r"spire-crawl\[http3\]"):
        HttpBackend(http3=True)


def test_a_body_streams_over_http3_to_a_file(h3_site: Http3Site, tmp_path: Path) -> None:
    routes = Router()
    written: list[int] = []

    @routes.default
    async def page(body: BodyStream) -> None:
        written.append(await body.copy_decoded_to(tmp_path / "big.bin"))

    backend = HttpBackend(http3="only", verify=h3_site.ca_file)
    stats = Crawler(routes, backend=backend, robots=False).run([h3_site.url("/big?size=300000")])
    assert stats.failed == 0
    assert written == [300_000]
    assert (tmp_path / "big.bin").stat().st_size == 300_000
    assert h3_site.versions[-1] == "3"


def streaming_crawl(backend: HttpBackend, *urls: str) -> tuple[list[str], list[str]]:
    """Crawl ``urls`` one at a time with a handler that reads each body as a stream to its end; return
    what each page's read ended with (its byte count, or the error's name) and the seeds' failures."""
    routes = Router()
    ends: list[str] = []

    @routes.default
    async def page(body: BodyStream) -> None:
        size = 0
        try:
            async for chunk in body:
                size += len(chunk)
        except Exception as exc:
            ends.append(type(exc).__name__)
            raise
        ends.append(str(size))

    stats = Crawler(routes, backend=backend, robots=False, concurrency=1, retry=RetryPolicy.never()).run(list(urls))
    return ends, sorted(stats.errors_by_category.elements())


def test_the_body_cap_holds_for_a_streamed_body_over_http3(h3_site: Http3Site) -> None:
    cap = 2 * STREAM_WINDOW  # past the first window: the cap holds as the window widens
    backend = HttpBackend(http3="only", verify=h3_site.ca_file, max_body_size=cap)
    ends, failures = streaming_crawl(backend, h3_site.url(f"/big?size={3 * STREAM_WINDOW}"), h3_site.url("/big?size=5"))
    assert ends == ["BodyLimitError", "5"]  # the capped stream was stopped, and the connection went on
    assert failures == ["body_limit"]
    assert h3_site.versions[-1] == "3"


def test_the_body_deadline_holds_for_a_streamed_body_over_http3(h3_site: Http3Site) -> None:
    backend = HttpBackend(http3="only", verify=h3_site.ca_file, timeout=Timeouts(connect=10, read=10, body=0.5))
    ends, failures = streaming_crawl(backend, h3_site.url("/stall"))
    assert ends == ["FetchTimeout"]
    assert failures == ["timeout"]


#: The crawl process's /etc/hosts: two names on loopback, written as their A-labels (UTS 46), as DNS has
#: them. ``fass.test`` is not there: ``faß`` is ``xn--fa-hia``, only IDNA 2003 made it ``fass``.
IDN_HOSTS = "127.0.0.1 localhost\n127.0.0.1 xn--fa-hia.test\n127.0.0.1 xn--bcher-kva.test\n"

#: Fetch over HTTP/3 by Unicode names: twice for a crawl that started on a public address (its
#: address policy judges what they resolve to), then once for a crawl that started there.
IDN_FETCHES = """
import asyncio, json, sys
from spire_core.backend.http import HttpBackend
from spire_core.errors import SpireError
from spire_core.seed import Seed
from spire_core.session.addresses import AddressPolicy

port, ca = sys.argv[1], sys.argv[2]

async def fetch(backend, url, policy):
    try:
        if policy is None:
            return (await backend.fetch(Seed(url))).http_version
        with policy.guarding(Seed(url)):
            return (await backend.fetch(Seed(url))).http_version
    except SpireError as exc:
        return type(exc).__name__

async def main():
    public = AddressPolicy()
    public.started([Seed("https://93.184.216.34/")])  # loopback is not this crawl's to reach
    backend = HttpBackend(http3="only", verify=ca)
    try:
        found = {
            "bücher, public start": await fetch(backend, f"https://bücher.test:{port}/page", public),
            "faß, public start": await fetch(backend, f"https://faß.test:{port}/page", public),
            "faß": await fetch(backend, f"https://faß.test:{port}/page", None),
        }
    finally:
        await backend.aclose()
    print(json.dumps(found))

asyncio.run(main())
"""


def with_hosts_file(hosts: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with ``hosts`` as its /etc/hosts, bind-mounted in a mount namespace of its own:
    its names resolve through the system's resolver, and nothing else sees them."""
    bind = 'mount --bind "$0" /etc/hosts && exec "$@"'
    return subprocess.run(
        ["unshare", "--map-root-user", "--mount", "sh", "-c", bind, str(hosts), *command],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )


def test_an_idn_host_over_http3_is_resolved_and_judged_as_its_a_label(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(IDN_HOSTS)
    if with_hosts_file(hosts, "true").returncode != 0:
        pytest.skip("needs a mount namespace of its own (unshare --map-root-user --mount)")
    with Http3Site(names=["xn--fa-hia.test", "xn--bcher-kva.test"]) as site:
        done = with_hosts_file(hosts, sys.executable, "-c", IDN_FETCHES, str(site.port), site.ca_file)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {
            "bücher, public start": "PrivateAddress",  # judged by what xn--bcher-kva.test resolves to: loopback
            "faß, public start": "PrivateAddress",
            "faß": "HTTP/3",  # resolved as xn--fa-hia.test, and its certificate checked for that name
        }
        assert site.versions == ["3"]  # neither refused request reached the server
