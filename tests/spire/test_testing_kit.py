"""``spire.testing``: the local site users test against, the function backend, the pytest fixture."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx

from spire import Crawler, Html, Links, Response, Router, Seed
from spire.testing import FunctionBackend, LocalSite


def test_a_site_from_a_dict_logs_requests_and_peak_concurrency() -> None:
    router = Router()

    @router.default
    async def page(html: Html, links: Links) -> None:
        await links.same_hostname()

    with LocalSite({"/": "<a href='/a'>a</a><a href='/b'>b</a>", "/a": "A", "/b": "B"}) as site:
        stats = Crawler(router).run(site.url("/"))
    assert stats.finished == 3
    assert site.hits() == {"/": 1, "/a": 1, "/b": 1}
    assert 1 <= site.peak <= 2
    assert site.in_flight == 0
    assert site.requests[0].method == "GET"


def test_a_route_answering_a_str_body_sends_it_as_utf8() -> None:
    with LocalSite() as site:
        site.route("/", lambda request: (200, {"Content-Type": "text/plain; charset=utf-8"}, "café"))
        answer = httpx.get(site.url("/"))
    assert (answer.content, answer.headers["content-length"]) == ("café".encode(), "5")


def test_a_site_from_a_folder_serves_its_files_and_nothing_outside(tmp_path: Path) -> None:
    (tmp_path / "site" / "docs").mkdir(parents=True)
    (tmp_path / "site" / "index.html").write_text("<title>home</title>", encoding="utf-8")
    (tmp_path / "site" / "docs" / "a.css").write_text("body {}", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("no", encoding="utf-8")
    with LocalSite(folder=tmp_path / "site") as site:
        home = httpx.get(site.url("/"))
        css = httpx.get(site.url("/docs/a.css"))
        outside = httpx.get(site.url("/../secret.txt"))
    assert (home.status_code, home.text, home.headers["content-type"]) == (
        200,
        "<title>home</title>",
        "text/html; charset=utf-8",
    )
    assert css.headers["content-type"].startswith("text/css")
    assert outside.status_code == 404


def test_a_function_backend_answers_without_a_network() -> None:
    async def fake(seed: Seed) -> Response:
        return Response(url=seed.url, status=200, body=b"<title>fake</title>")

    titles: list[str | None] = []
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        titles.append(html.css("title::text").get())

    Crawler(router, backend=FunctionBackend(fake)).run("http://nowhere.test/")
    assert titles == ["fake"]


def test_the_pytest_plugin_gives_tests_a_local_site(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            from spire import Crawler, Router, Url
            from spire.testing import LocalSite

            router = Router()

            @router.default
            async def page(url: Url) -> None: ...

            def test_uses_the_fixture(local_site: LocalSite) -> None:
                local_site.page("/", "<title>Home</title>")
                assert Crawler(router).run(local_site.url("/")).finished == 1
                assert local_site.hits() == {}  # a Url-only handler fetches nothing
            """
        ),
        encoding="utf-8",
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_user.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
