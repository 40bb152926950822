"""HTTP/2 through HttpBackend(http2=True), against a local TLS HTTP/2 server; HTTP/1.1 stays the default."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import anyio
import pytest

from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError
from spire_core.response import Response
from spire_core.seed import Seed
from tests.sites.h2 import Http2Site


@pytest.fixture
def h2_site() -> Iterator[Http2Site]:
    with Http2Site() as running:
        yield running


def fetch(backend: HttpBackend, url: str) -> Response:
    async def main() -> Response:
        try:
            with anyio.fail_after(20):
                return await backend.fetch(Seed(url))
        finally:
            await backend.aclose()

    return anyio.run(main)


def test_http2_true_speaks_http2_to_an_h2_server(h2_site: Http2Site) -> None:
    response = fetch(HttpBackend(http2=True, verify=h2_site.ca_file), h2_site.url("/page"))
    assert response.status == 200
    assert response.http_version == "HTTP/2"
    assert b"2 /page" in response.body  # the server saw HTTP/2 too


def test_http1_1_stays_the_default(h2_site: Http2Site) -> None:
    response = fetch(HttpBackend(verify=h2_site.ca_file), h2_site.url("/page"))
    assert response.http_version == "HTTP/1.1"
    assert b"1.1 /page" in response.body


def test_http2_without_h2_installed_is_a_config_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "h2", None)  # as if h2 were not installed
    with pytest.raises(ConfigError, match=r"spire-crawl\[http2\]"):
        HttpBackend(http2=True)
