"""The caching backend against a real local site: replay without requests, RFC 9111 freshness, 304s."""

from __future__ import annotations

import email.utils
import logging
import random
import sqlite3
import time
from pathlib import Path

import anyio
import pytest

from spire import Crawler
from spire_core.backend.cache import CacheError, CachingBackend, Freshness
from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from spire_core.session.redact import REDACTED_HEADERS
from tests.sites.server import Request, Site, binary_tree
from tests.spire_core.backend.tree_crawl import crawl, tree_router


class Clock:
    """Wall-clock seconds that a test moves by hand."""

    def __init__(self) -> None:
        self.now = time.time()  # the server's own Date header is real time

    def __call__(self) -> float:
        return self.now


def http_date(at: float) -> str:
    return email.utils.formatdate(at, usegmt=True)


def fetch(backend: CachingBackend, url: str) -> Response:
    """One fetch in its own event loop; the backend is closed after it (it reopens on the next)."""

    async def go() -> Response:
        try:
            return await backend.fetch(Seed(url))
        finally:
            await backend.aclose()

    return anyio.run(go)


def test_a_second_crawl_through_the_cache_sends_no_request_and_yields_the_same_items(
    site: Site, tmp_path: Path
) -> None:
    start = binary_tree(site, 30)
    first, first_items = crawl(CachingBackend(HttpBackend(), tmp_path / "cache"), start)
    sent = len(site.page_requests())
    assert sent == 30
    assert first.stats.cached == 0

    second, second_items = crawl(CachingBackend(HttpBackend(), tmp_path / "cache"), start)

    assert len(site.page_requests()) == sent  # the server saw nothing new
    assert second_items == first_items
    assert len(second_items) == 30
    assert second.stats.cached == 31  # the 30 pages and robots.txt, which every crawl reads first
    assert second.stats.revalidated == 0
    assert "cached=31" in str(second.stats)


def test_dev_policy_keeps_errors_a_retry_should_not_see_again_out(site: Site, tmp_path: Path) -> None:
    site.page("/missing", "gone", status=404)
    site.page("/busy", "later", status=503)
    backend = CachingBackend(HttpBackend(), tmp_path)
    for _ in range(2):
        assert fetch(backend, site.url("/missing")).status == 404
        assert fetch(backend, site.url("/busy")).status == 503
    assert site.hits() == {"/missing": 1, "/busy": 2}
    assert backend.stats.hits == 1
    assert backend.stats.stored == 1


def test_dev_policy_refetches_after_the_expiry(site: Site, tmp_path: Path) -> None:
    site.page("/", "<title>home</title>")
    clock = Clock()
    backend = CachingBackend(HttpBackend(), tmp_path, expire=60, clock=clock)
    assert not fetch(backend, site.url("/")).from_cache
    clock.now += 59
    assert fetch(backend, site.url("/")).from_cache
    clock.now += 2
    assert not fetch(backend, site.url("/")).from_cache
    assert site.hits()["/"] == 2


def test_http_policy_revalidates_a_stale_response_and_a_304_is_used_and_counted(site: Site, tmp_path: Path) -> None:
    clock = Clock()
    body = "<html><head><title>Tagged</title></head><body>stable</body></html>"

    def tagged(request: Request) -> tuple[int, dict[str, str], bytes]:
        headers = {"ETag": '"v1"', "Cache-Control": "max-age=60", "Date": http_date(clock.now)}
        if request.headers.get("if-none-match") == '"v1"':
            return 304, {**headers, "Cache-Control": "max-age=600", "X-Checked": "yes"}, b""
        return 200, {"Content-Type": "text/html", **headers}, body.encode()

    site.route("/", tagged)
    backend = CachingBackend(HttpBackend(), tmp_path, policy="http", clock=clock)
    crawler, _ = crawl(backend, site.url("/"))
    assert crawler.stats.cached == 0

    clock.now += 30  # fresh: served without asking
    crawler, _ = crawl(backend, site.url("/"))
    assert len(site.page_requests()) == 1
    assert crawler.stats.cached == 1
    assert crawler.stats.revalidated == 0

    clock.now += 60  # stale: a conditional request, answered 304
    crawler, items = crawl(backend, site.url("/"))
    assert len(site.page_requests()) == 2
    assert site.page_requests()[-1].headers.get("if-none-match") == '"v1"'
    assert crawler.stats.cached == 1
    assert crawler.stats.revalidated == 1
    assert "revalidated=1" in str(crawler.stats)
    assert backend.stats.revalidated == 1

    assert [page.title for page in items] == ["Tagged"]  # the stored body, not the empty 304

    clock.now += 30  # the 304's fields (a longer max-age) refreshed the stored response: fresh again
    response = fetch(backend, site.url("/"))
    assert response.from_cache
    assert not response.revalidated
    assert len(site.page_requests()) == 2
    assert response.headers["x-checked"] == "yes"
    assert response.body == body.encode()


def test_http_policy_stores_nothing_marked_no_store_and_refetches_a_changed_resource(
    site: Site, tmp_path: Path
) -> None:
    clock = Clock()
    site.page("/private", "secret", headers={"Cache-Control": "no-store, max-age=600"})
    modified = http_date(clock.now - 1000)
    site.sequence(
        "/changing",
        [
            (200, {"Last-Modified": modified, "Cache-Control": "no-cache"}, b"one"),
            (200, {"Last-Modified": http_date(clock.now), "Cache-Control": "no-cache"}, b"two"),
        ],
    )
    backend = CachingBackend(HttpBackend(), tmp_path, policy="http", clock=clock)
    for _ in range(2):
        assert not fetch(backend, site.url("/private")).from_cache
    assert fetch(backend, site.url("/changing")).body == b"one"
    changed = fetch(backend, site.url("/changing"))  # no-cache: always asked, and the site changed
    assert changed.body == b"two"
    assert not changed.from_cache
    assert site.page_requests()[-1].headers.get("if-modified-since") == modified
    assert site.hits() == {"/private": 2, "/changing": 2}


def test_freshness_follows_max_age_expires_age_and_the_last_modified_heuristic() -> None:
    now = 1_800_000_000.0
    aged = Freshness.of(
        Headers({"Cache-Control": "max-age=100", "Age": "90", "Date": http_date(now)}),
        request_time=now,
        response_time=now,
        now=now + 5,
    )
    assert aged.lifetime == 100
    assert aged.age == 95
    assert aged.fresh
    expires = Freshness.of(
        Headers({"Expires": http_date(now + 50), "Date": http_date(now)}), request_time=now, response_time=now, now=now
    )
    assert expires.lifetime == 50
    invalid = Freshness.of(Headers({"Expires": "0"}), request_time=now, response_time=now, now=now)
    assert not invalid.fresh
    heuristic = Freshness.of(
        Headers({"Last-Modified": http_date(now - 1000), "Date": http_date(now)}),
        request_time=now,
        response_time=now,
        now=now + 99,
    )
    assert heuristic.lifetime == 100
    assert heuristic.fresh


def test_a_bad_policy_or_a_file_for_a_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="policy"):
        CachingBackend(HttpBackend(), tmp_path, policy="forever")  # type: ignore[arg-type]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="folder"):
        CachingBackend(HttpBackend(), tmp_path / "file")


def test_a_cache_file_that_is_no_database_is_a_counted_miss_and_the_page_is_fetched(site: Site, tmp_path: Path) -> None:
    site.page("/", "<title>home</title>")
    (tmp_path / "responses.sqlite").write_bytes(b"this is not a database" * 100)
    backend = CachingBackend(HttpBackend(), tmp_path)
    assert fetch(backend, site.url("/")).body == b"<title>home</title>"
    assert (backend.stats.corrupt, backend.stats.misses, backend.stats.stored) == (1, 1, 0)


def test_a_cache_file_sqlite_cannot_open_is_a_cache_error(site: Site, tmp_path: Path) -> None:
    (tmp_path / "responses.sqlite").mkdir()  # unusable whatever it holds: not damage, a mistake to name
    backend = CachingBackend(HttpBackend(), tmp_path)
    with pytest.raises(CacheError, match="cache"):
        fetch(backend, site.url("/"))


def test_spire_run_with_a_cache_replays_the_second_run(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spire.cli import main

    binary_tree(site, 7)
    script = tmp_path / "crawl.py"
    script.write_text(
        "from spire import Html, Links, Router\n"
        "router = Router()\n"
        "@router.default\n"
        "async def page(html: Html, links: Links) -> None:\n"
        "    await links.follow(html.css('a::attr(href)').getall())\n"
        f"seeds = [{site.url('/page/0')!r}]\n"
    )
    cache = tmp_path / "cache"
    assert main(["run", str(script), "--cache", str(cache)]) == 0
    assert len(site.page_requests()) == 7
    assert main(["run", str(script), "--cache", str(cache)]) == 0
    assert len(site.page_requests()) == 7
    assert "cached=8" in capsys.readouterr().err.splitlines()[-1]  # 7 pages and robots.txt


def test_http_policy_serves_a_varying_response_only_to_a_request_that_asks_the_same(site: Site, tmp_path: Path) -> None:
    def by_language(request: Request) -> tuple[int, dict[str, str], bytes]:
        language = request.headers.get("accept-language", "en")
        return 200, {"Cache-Control": "max-age=600", "Vary": "Accept-Language"}, language.encode()

    site.route("/", by_language)
    backend = CachingBackend(HttpBackend(), tmp_path, policy="http")

    def ask(language: str) -> Response:
        async def go() -> Response:
            try:
                return await backend.fetch(Seed(site.url("/"), headers={"Accept-Language": language}))
            finally:
                await backend.aclose()

        return anyio.run(go)

    assert ask("fr").body == b"fr"
    assert ask("fr").from_cache
    german = ask("de")
    assert german.body == b"de"
    assert not german.from_cache
    assert len(site.page_requests()) == 2


# -- whose response: credentials, Vary, private --------------------------------------------------


def whoami(request: Request) -> tuple[int, dict[str, str], bytes]:
    """The site's private page: it answers with the credentials it was sent (or "anonymous")."""
    who = request.headers.get("authorization") or request.headers.get("cookie") or "anonymous"
    return 200, {"Content-Type": "text/plain", "Cache-Control": "max-age=600", "Vary": "Authorization"}, who.encode()


def ask(backend: CachingBackend, url: str, headers: dict[str, str] | None = None) -> Response:
    async def go() -> Response:
        try:
            return await backend.fetch(Seed(url, headers=headers))
        finally:
            await backend.aclose()

    return anyio.run(go)


@pytest.mark.parametrize("policy", ["dev", "http"])
def test_a_response_is_served_only_to_a_request_with_the_same_credentials(
    site: Site, tmp_path: Path, policy: str
) -> None:
    site.route("/me", whoami)
    backend = CachingBackend(HttpBackend(), tmp_path, policy=policy)  # type: ignore[arg-type]
    assert ask(backend, site.url("/me"), {"Authorization": "USER-A"}).body == b"USER-A"
    again = ask(backend, site.url("/me"), {"Authorization": "USER-A"})
    assert again.from_cache
    assert again.body == b"USER-A"
    other = ask(backend, site.url("/me"), {"Authorization": "USER-B"})
    assert other.body == b"USER-B"
    assert not other.from_cache
    nobody = ask(backend, site.url("/me"))
    assert nobody.body == b"anonymous"
    assert not nobody.from_cache
    assert ask(backend, site.url("/me"), {"Cookie": "sid=C"}).body == b"sid=C"
    assert len(site.page_requests()) == 4


def test_a_url_password_is_part_of_the_key_and_never_comes_back_in_response_url(site: Site, tmp_path: Path) -> None:
    def by_user(request: Request) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/plain"}, request.headers.get("authorization", "anonymous").encode()

    site.route("/me", by_user)
    backend = CachingBackend(HttpBackend(), tmp_path)
    alice = site.url("/me").replace("http://", "http://alice:alice-pw@")
    bob = site.url("/me").replace("http://", "http://bob:bob-pw@")
    first = ask(backend, alice)
    assert first.body.startswith(b"Basic ")  # aiohttp sent the URL's user and password
    served = ask(backend, bob)
    assert not served.from_cache  # bob is not served alice's response
    assert served.body != first.body
    for url in (alice, bob):
        cached = ask(backend, url)
        assert cached.from_cache
        assert cached.url == url  # the URL the request asked for, never the one stored
    assert "alice-pw" not in ask(backend, bob).url
    assert b"alice-pw" not in (tmp_path / "responses.sqlite").read_bytes()


def test_dev_policy_honours_vary(site: Site, tmp_path: Path) -> None:
    def by_language(request: Request) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Vary": "Accept-Language"}, request.headers.get("accept-language", "en").encode()

    site.route("/", by_language)
    backend = CachingBackend(HttpBackend(), tmp_path)
    assert ask(backend, site.url("/"), {"Accept-Language": "fr"}).body == b"fr"
    assert ask(backend, site.url("/"), {"Accept-Language": "fr"}).from_cache
    german = ask(backend, site.url("/"), {"Accept-Language": "de"})
    assert german.body == b"de"
    assert not german.from_cache


def test_http_policy_does_not_store_a_private_response(site: Site, tmp_path: Path) -> None:
    site.page("/account", "my account", headers={"Cache-Control": "private, max-age=600"})
    site.page("/public", "everyone's", headers={"Cache-Control": "max-age=600"})
    backend = CachingBackend(HttpBackend(), tmp_path, policy="http")
    for _ in range(2):
        ask(backend, site.url("/account"))
        ask(backend, site.url("/public"))
    assert site.hits() == {"/account": 2, "/public": 1}
    assert backend.stats.stored == 1


# -- what the file holds ---------------------------------------------------------------------------


def secret_page(request: Request) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Set-Cookie": "session=srv-s3cret; Path=/", "X-Api-Key": "resp-s3cret"}, b"hello"


def test_the_cache_file_holds_no_credentials_sent_by_the_crawl_or_set_by_the_site(site: Site, tmp_path: Path) -> None:
    site.route("/", secret_page)
    start = site.url("/")
    crawler = Crawler(
        tree_router(),
        backend=CachingBackend(HttpBackend(), tmp_path),
        credentials={site.origin: {"Authorization": "Bearer cred-s3cret", "Cookie": "sid=cookie-s3cret"}},
    )
    crawler.run([start])
    assert crawler.stats.pages == 1
    assert site.page_requests()[0].headers["authorization"] == "Bearer cred-s3cret"
    stored = (tmp_path / "responses.sqlite").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("*-wal"))
    assert b"s3cret" not in stored
    assert b"[redacted]" in stored
    # Served again, the response keeps its headers, the secret ones redacted.
    replayed = Crawler(
        tree_router(),
        backend=CachingBackend(HttpBackend(), tmp_path),
        credentials={site.origin: {"Authorization": "Bearer cred-s3cret", "Cookie": "sid=cookie-s3cret"}},
    )
    replayed.run([start])
    assert replayed.stats.cached == 2  # robots.txt and the page
    assert len(site.page_requests()) == 1


def test_keep_secrets_stores_every_header_as_it_was(site: Site, tmp_path: Path) -> None:
    site.route("/", secret_page)
    backend = CachingBackend(HttpBackend(), tmp_path, keep_secrets=True, redact=REDACTED_HEADERS | {"x-extra"})
    ask(backend, site.url("/"), {"Authorization": "Bearer cred-s3cret"})
    served = ask(backend, site.url("/"), {"Authorization": "Bearer cred-s3cret"})
    assert served.from_cache
    assert served.headers["set-cookie"] == "session=srv-s3cret; Path=/"
    assert b"cred-s3cret" in (tmp_path / "responses.sqlite").read_bytes()


def test_an_extended_redact_list_hides_the_headers_it_names(site: Site, tmp_path: Path) -> None:
    site.page("/", "hi", headers={"X-Session": "sess-s3cret"})
    backend = CachingBackend(HttpBackend(), tmp_path, redact=REDACTED_HEADERS | {"X-Session"})
    ask(backend, site.url("/"))
    served = ask(backend, site.url("/"))
    assert served.headers["x-session"] == "[redacted]"
    assert b"sess-s3cret" not in (tmp_path / "responses.sqlite").read_bytes()


# -- a corrupt row --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "poison",
    [
        "headers = 'not json'",
        "headers = X'FFFE00'",
        "headers = '[1, 2]'",
        "request_headers = '[]'",
        "status = 'abc'",
        "body = 42",
        "url = CAST(X'FF' AS TEXT)",
        "response_time = 'later'",
        "body = CAST('<title>elsewhere</title>' AS BLOB)",  # well-formed, but not the bytes written
    ],
)
def test_a_corrupt_row_is_a_counted_miss_logged_with_its_key_and_replaced(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture, poison: str
) -> None:
    site.page("/", "<title>home</title>")
    backend = CachingBackend(HttpBackend(), tmp_path)
    ask(backend, site.url("/"))
    with sqlite3.connect(tmp_path / "responses.sqlite") as db:
        db.execute(f"UPDATE responses SET {poison}")
    db.close()
    caplog.set_level(logging.WARNING, logger="spire.cache")
    fetched = ask(backend, site.url("/"))
    assert fetched.body == b"<title>home</title>"
    assert not fetched.from_cache
    assert backend.stats.corrupt == 1
    (warning,) = [record.getMessage() for record in caplog.records if record.name == "spire.cache"]
    assert "corrupt row" in warning
    assert site.url("/") in warning  # the key
    assert ask(backend, site.url("/")).from_cache  # the row was replaced by the fresh response
    assert len(site.page_requests()) == 2


def test_a_corrupt_database_page_is_a_counted_miss_and_the_pages_are_fetched(site: Site, tmp_path: Path) -> None:
    for n in range(40):
        site.page(f"/{n}", "x" * 3000)
    backend = CachingBackend(HttpBackend(), tmp_path)
    for n in range(40):
        ask(backend, site.url(f"/{n}"))
    database = tmp_path / "responses.sqlite"
    raw = bytearray(database.read_bytes())
    page_size = int.from_bytes(raw[16:18], "big")
    raw[page_size : 3 * page_size] = b"\x0d" * (2 * page_size)  # the table's first pages: garbage b-tree pages
    database.write_bytes(bytes(raw))

    answers = [ask(backend, site.url(f"/{n}")) for n in range(40)]
    assert [answer.body for answer in answers] == [b"x" * 3000] * 40
    assert backend.stats.corrupt > 0
    fetched_again = sum(not answer.from_cache for answer in answers)
    assert len(site.page_requests()) == 40 + fetched_again


@pytest.mark.parametrize("seed", range(6))
def test_a_cache_file_with_200_flipped_bytes_is_counted_misses_and_the_crawl_fetches_its_pages(
    site: Site, tmp_path: Path, seed: int
) -> None:
    start = binary_tree(site, 40)
    crawl(CachingBackend(HttpBackend(), tmp_path), start)
    database = tmp_path / "responses.sqlite"
    raw = bytearray(database.read_bytes())
    flips = random.Random(seed)
    for _ in range(200):
        raw[flips.randrange(len(raw))] ^= 1 << flips.randrange(8)
    database.write_bytes(bytes(raw))

    backend = CachingBackend(HttpBackend(), tmp_path)
    crawler, pages = crawl(backend, start)  # before: a UnicodeDecodeError or a CacheError out of the cache
    assert crawler.stats.failed == 0
    assert len(pages) == 40
    assert backend.stats.hits + backend.stats.misses == 41  # each page and robots.txt: served or fetched
