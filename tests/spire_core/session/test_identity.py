"""Identity: a browser's consistent headers in its order, its own cookies, and seeds spread over several."""

from __future__ import annotations

import anyio
import pytest

from spire import Crawler, HostLimits, Response, Router
from spire_core.backend.http import HttpBackend
from spire_core.backend.identities import Identities
from spire_core.errors import ConfigError
from spire_core.seed import Seed
from spire_core.session.decoding import OFFERED
from spire_core.session.identity import Identity
from tests.sites.raw import RawServer, read_head
from tests.sites.server import Site


def test_a_chrome_identity_is_consistent() -> None:
    chrome = Identity("chrome", "macos")
    headers = dict(chrome.headers())
    assert "Macintosh" in headers["User-Agent"]
    assert "Chrome/" in headers["User-Agent"]
    assert headers["Sec-CH-UA-Platform"] == '"macOS"'
    assert headers["Sec-CH-UA-Mobile"] == "?0"
    version = headers["User-Agent"].split("Chrome/")[1].split(".")[0]
    assert f'"Google Chrome";v="{version}"' in headers["Sec-CH-UA"]
    assert headers["Accept-Encoding"] == OFFERED  # only codings spire decodes with a bounded output


def test_firefox_and_safari_send_no_client_hints() -> None:
    for identity in (Identity("firefox", "linux"), Identity("safari", "ios")):
        names = [name for name, _ in identity.headers()]
        assert not [name for name in names if name.lower().startswith("sec-ch-ua")]
    assert "Firefox/" in Identity("firefox", "windows").user_agent
    assert "iPhone" in Identity("safari", "ios").user_agent


def test_impossible_identities_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        Identity("safari", "windows")
    with pytest.raises(ConfigError):
        Identity("chrome", "ios")
    with pytest.raises(ConfigError):
        Identity("netscape", "linux")  # type: ignore[arg-type]


def test_the_headers_go_out_in_the_browsers_order_and_case() -> None:
    heads: list[bytes] = []

    def serve(conn: object) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")  # type: ignore[attr-defined]

    class Recording(RawServer):
        def _handle(self, conn: object) -> None:  # type: ignore[override]
            head = read_head(conn)  # type: ignore[arg-type]
            if b"\r\n\r\n" not in head:
                return
            heads.append(head)
            serve(conn)

    identity = Identity("chrome", "windows")
    with Recording(serve) as server:
        backend = HttpBackend(identity=identity)

        async def main() -> None:
            try:
                await backend.fetch(Seed(server.url("/")))
            finally:
                await backend.aclose()

        anyio.run(main)
    lines = heads[0].decode().split("\r\n")[1:]
    sent = [line.split(":", 1)[0] for line in lines if ":" in line]
    expected = [name for name, _ in identity.headers()]
    assert [name for name in sent if name in expected] == expected


def test_each_identity_keeps_its_own_cookies(site: Site) -> None:
    site.page("/login", "in", headers={"Set-Cookie": "session=abc; Path=/"})
    site.page("/account", "account")
    pool = Identities([Identity("chrome", "windows"), Identity("firefox", "linux")])
    login = Seed(site.url("/login"))
    accounts = [Seed(site.url(f"/account?n={n}")) for n in range(20)]
    same = next(seed for seed in accounts if pool.identity_for(seed) == pool.identity_for(login))
    other = next(seed for seed in accounts if pool.identity_for(seed) != pool.identity_for(login))

    async def main() -> None:
        try:
            for seed in (login, same, other):
                await pool.fetch(seed)
        finally:
            await pool.aclose()

    anyio.run(main)
    sent = {
        r.headers.get("User-Agent"): r.headers.get("Cookie") for r in site.requests if r.path.startswith("/account")
    }
    assert sent == {pool.identity_for(same).user_agent: "session=abc", pool.identity_for(other).user_agent: None}


def test_a_crawl_spreads_its_seeds_over_the_identities(site: Site) -> None:
    for n in range(20):
        site.page(f"/p{n}", "ok")
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    identities = [Identity("chrome", "windows"), Identity("firefox", "macos"), Identity("safari", "macos")]
    Crawler(router, backend=Identities(identities), host_limits=HostLimits(max_in_flight=4)).run(
        [site.url(f"/p{n}") for n in range(20)]
    )
    agents = {r.headers.get("User-Agent") for r in site.requests}
    assert agents == {identity.user_agent for identity in identities}
