"""The examples, run the way CI runs them (each script a subprocess), and the example shop they crawl."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from parsel import Selector

from examples.shop.server import BUSY_MARKER, ShopServer
from examples.shop.site import BROKEN_PATH, CONTACT_EMAIL, OFF_SITE_URL, RATING_WORDS, Shop

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))
TIMEOUT = 60.0
ORIGIN = "http://127.0.0.1:8000"
STALE_LINE = '{"title": "left over from an earlier run"}\n'


@dataclasses.dataclass(frozen=True)
class Run:
    cwd: Path
    returncode: int | None  # None: killed after TIMEOUT
    stdout: str
    stderr: str

    @property
    def report(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def _shop_crawl_args(cwd: Path) -> list[str]:
    # the README's command, run where an earlier run left its output behind
    (cwd / "out").mkdir()
    (cwd / "out" / "books.jsonl").write_text(STALE_LINE)
    return ["--output", "out/books.jsonl"]


ARGS: dict[str, Callable[[Path], list[str]]] = {"shop_crawl.py": _shop_crawl_args}


def run_example(script: Path, cwd: Path) -> Run:
    """Run ``script`` in ``cwd`` as CI does, killed after ``TIMEOUT``."""
    args = ARGS[script.name](cwd) if script.name in ARGS else []
    process = subprocess.Popen(
        [sys.executable, str(script), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        returncode = None
    return Run(cwd, returncode, stdout, stderr)


class Runs:
    """Each example run once a test session, in its own directory, when a test first asks for it.

    Under xdist the workers share one folder of the session: a run is written there as JSON under a
    lock, so the worker that asks first runs the example and the others read what it did.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __getitem__(self, name: str) -> Run:
        record = self.folder / f"{name}.json"
        with (self.folder / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not record.exists():
                cwd = self.folder / Path(name).stem
                cwd.mkdir()
                run = run_example(EXAMPLES / name, cwd)
                record.write_text(json.dumps({**dataclasses.asdict(run), "cwd": str(run.cwd)}), encoding="utf-8")
        fields = json.loads(record.read_text(encoding="utf-8"))
        return Run(**{**fields, "cwd": Path(fields["cwd"])})


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The examples' runs, shared by every test (and every xdist worker) of the session."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return Runs(tmp_path_factory.mktemp("examples"))
    shared = tmp_path_factory.getbasetemp().parent / "examples"  # the session's folder, above each worker's own
    shared.mkdir(exist_ok=True)
    return Runs(shared)


def stats_line(run: Run) -> dict[str, str]:
    """The ``key=value`` fields of the crawl's stats line in the run's output."""
    line = next(line for line in run.stdout.splitlines() if line.startswith("requests="))
    return dict(field.split("=", 1) for field in line.split())


# -- every example ----------------------------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS, ids=[script.name for script in SCRIPTS])
def test_example_script_exits_zero_within_the_timeout(runs: Runs, script: Path) -> None:
    run = runs[script.name]
    assert run.returncode == 0, run.report


def test_the_examples_directory_holds_the_scripts_these_tests_check() -> None:
    assert {script.name for script in SCRIPTS} >= {"shop_crawl.py", "custom_extractor.py", "middleware_and_outcomes.py"}


# -- shop_crawl.py ----------------------------------------------------------------------------------


def test_shop_crawl_writes_each_book_once_with_the_fields_shown_on_its_page(runs: Runs) -> None:
    run = runs["shop_crawl.py"]
    assert run.returncode == 0, run.report
    lines = (run.cwd / "out" / "books.jsonl").read_text(encoding="utf-8").splitlines()
    shop = Shop()
    by_path = {book.path: book for book in shop.books}
    rows = [json.loads(line) for line in lines]
    assert len(rows) == len(shop.books) == 300
    assert sorted(urlsplit(row["url"]).path for row in rows) == sorted(by_path)
    for row in rows:
        book = by_path[urlsplit(row["url"]).path]
        assert row == {
            "url": row["url"],
            "title": book.title,
            "price": float(book.price),
            "rating": book.rating,
            "in_stock": book.in_stock,
            "category": book.category,
        }


def test_shop_crawl_replaces_the_output_an_earlier_run_left(runs: Runs) -> None:
    run = runs["shop_crawl.py"]
    assert STALE_LINE.strip() not in (run.cwd / "out" / "books.jsonl").read_text(encoding="utf-8")


def test_shop_crawl_prints_a_stats_line_counting_every_book_and_no_failure(runs: Runs) -> None:
    run = runs["shop_crawl.py"]
    stats = stats_line(run)
    # robots.txt, then 300 books, 25 listing pages and the home page, each fetched once
    assert (stats["requests"], stats["items"], stats["failed"]) == ("327", "300", "0"), run.report
    assert "300 of 300 books written to out/books.jsonl" in run.stdout


# -- custom_extractor.py ----------------------------------------------------------------------------


def test_custom_extractor_finds_every_book_through_the_sitemap_fetching_only_book_pages(runs: Runs) -> None:
    run = runs["custom_extractor.py"]
    assert "300 books, 302 requests: every check passed" in run.stdout, run.report
    stats = stats_line(run)
    assert (stats["requests"], stats["items"], stats["failed"]) == ("302", "300", "0"), run.report


# -- middleware_and_outcomes.py ---------------------------------------------------------------------


def test_middleware_example_retries_the_busy_page_reports_the_404_and_stops_early(runs: Runs) -> None:
    run = runs["middleware_and_outcomes.py"]
    assert "every check passed" in run.stdout, run.report
    broken = [line for line in run.stdout.splitlines() if line.startswith("broken link:")]
    assert broken == [f"broken link: HTTP status 404 ({broken[0].split('(')[-1]}"], run.report
    assert BROKEN_PATH in broken[0]
    stats = stats_line(run)
    assert (stats["retries"], stats["failed"], stats["items"]) == ("1", "1", "1"), run.report


# -- the shop --------------------------------------------------------------------------------------


def html_pages(shop: Shop) -> Iterator[tuple[str, Selector]]:
    for path in shop.paths():
        page = shop.render(path, origin=ORIGIN)
        if page.content_type.startswith("text/html"):
            yield path, Selector(text=page.body.decode("utf-8"))


def test_shop_generates_the_same_catalogue_every_time_and_another_with_another_seed() -> None:
    first, second, other = Shop(), Shop(), Shop(seed=7)
    assert first.books == second.books
    assert first.render("/", origin=ORIGIN) == second.render("/", origin=ORIGIN)
    assert [book.title for book in other.books] != [book.title for book in first.books]
    assert (len(first.categories), len(first.listing_paths()), len(first.books)) == (12, 25, 300)
    assert len({book.title for book in first.books}) == 300


def test_every_link_on_the_shop_leads_to_one_of_its_pages_but_the_deliberate_quirks() -> None:
    shop = Shop()
    served = set(shop.paths())
    elsewhere: set[str] = set()
    fragments = 0
    for path, page in html_pages(shop):
        for href in page.css("a::attr(href)").getall():
            target = urljoin(ORIGIN + path, href)
            fragments += "#" in href
            if not target.startswith(ORIGIN + "/"):
                elsewhere.add(target)
            elif urlsplit(target).path != BROKEN_PATH:
                assert urlsplit(target).path in served, f"{path} links to {href}"
    assert elsewhere == {f"mailto:{CONTACT_EMAIL}", OFF_SITE_URL}
    assert fragments > 300  # "#top" in every footer, "#reviews" on every book page
    assert shop.render(BROKEN_PATH, origin=ORIGIN).status == 404


def test_every_html_page_names_itself_canonical_and_has_one_h1() -> None:
    for path, page in html_pages(Shop()):
        assert page.css("link[rel=canonical]::attr(href)").getall() == [ORIGIN + path]
        assert len(page.css("h1")) == 1, path
        assert page.css("title::text").get(), path


def test_book_pages_show_their_book_and_carry_matching_json_ld() -> None:
    shop = Shop()
    for book in shop.books:
        page = Selector(text=shop.render(book.path, origin=ORIGIN).body.decode("utf-8"))
        assert page.css("h1::text").get() == book.title
        assert page.css("p.price_color::text").get() == f"£{book.price}"
        assert page.css("p.star-rating::attr(class)").get() == f"star-rating {RATING_WORDS[book.rating]}"
        product = json.loads(page.css('script[type="application/ld+json"]::text').get(""))
        assert (product["name"], Decimal(product["offers"]["price"])) == (book.title, book.price)


def test_sitemap_lists_every_html_page_and_robots_txt_names_the_sitemap() -> None:
    shop = Shop()
    robots = shop.render("/robots.txt", origin=ORIGIN).body.decode()
    assert f"Sitemap: {ORIGIN}/sitemap.xml" in robots.splitlines()
    sitemap = Selector(text=shop.render("/sitemap.xml", origin=ORIGIN).body.decode(), type="xml")
    sitemap.remove_namespaces()
    listed = sitemap.xpath("//url/loc/text()").getall()
    assert sorted(listed) == sorted(ORIGIN + path for path, _ in html_pages(shop) if path != "/cart/")


def test_server_serves_the_shop_and_answers_a_busy_path_busy_only_the_first_time() -> None:
    shop = Shop()
    book = shop.books[0]
    with ShopServer(shop, busy_once={book.path}) as server, httpx.Client(base_url=server.origin) as client:
        home = client.get("/")
        assert (home.status_code, home.headers["content-type"]) == (200, "text/html; charset=utf-8")
        assert f'<link rel="canonical" href="{server.origin}/">' in home.text
        assert client.get(BROKEN_PATH).status_code == 404
        assert client.get("/robots.txt").text.endswith(f"Sitemap: {server.origin}/sitemap.xml\n")
        busy, real = client.get(book.path), client.get(book.path)
        assert (busy.status_code, BUSY_MARKER in busy.text) == (200, True)
        assert (real.status_code, BUSY_MARKER in real.text) == (200, False)
        assert re.search(r"<h1>(.*?)</h1>", real.text) is not None
        assert server.hits()[book.path] == 2
        assert server.book_urls == {server.origin + b.path for b in shop.books}


# -- curl_cffi_backend.py ---------------------------------------------------------------------------


def test_the_curl_cffi_backend_crawls_a_local_tls_site_as_chrome(runs: Runs) -> None:
    run = runs["curl_cffi_backend.py"]
    assert "impersonated Chrome on every page: every check passed" in run.stdout, run.report
    stats = stats_line(run)
    assert (stats["pages"], stats["failed"]) == ("6", "0"), run.report
