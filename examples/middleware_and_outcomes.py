"""Middleware and outcomes: hunt the whole shop for one book, retry a soft error, report broken links.

    python examples/middleware_and_outcomes.py

Middleware runs around every handler. Here it spots the shop's "please try again" page (status
200, no content) and returns ``Retry`` before any handler parses it. The handler follows every
link on every page and returns ``Stop`` once it finds the book it hunts for; a failed hook reports
the links that led nowhere. Exits 0 only if the busy page was retried and then crawled, the book
was found before the whole shop was crawled, the broken link was reported, and nothing off the
shop's host was requested.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio
from pydantic import BaseModel
from shop.server import ShopServer
from shop.site import BROKEN_PATH

from spire import (
    Context,
    Crawler,
    Dataset,
    Error,
    Html,
    Links,
    Next,
    Outcome,
    Retry,
    Router,
    Seed,
    SeedInfo,
    Stop,
    Url,
    resolve,
)

WANTED = "Notes on the Forgotten River"


class Found(BaseModel):
    url: str
    title: str
    price: float


router = Router()
hosts: set[str | None] = set()
retried: list[str] = []
broken: list[str] = []


@router.middleware
async def retry_busy_pages(ctx: Context, call_next: Next) -> Outcome | None:
    hosts.add(urlsplit(ctx.seed.url).hostname)  # before anything is fetched
    page = await resolve(ctx, Html)  # the handler's Html reuses this fetch and parse
    if page.css(".notice.busy"):
        retried.append(ctx.seed.url)
        return Retry(after=0.2)
    return await call_next(ctx)


@router.default
async def any_page(page: Html, url: Url, links: Links, found: Dataset[Found]) -> Outcome | None:
    await links.enqueue()  # every link on the page, on this host only: the policy's default strategy
    if page.css("h1::text").get() != WANTED:
        return None
    await found.push({"url": url, "title": WANTED, "price": page.css("p.price_color::text").re_first(r"[\d.]+")})
    return Stop()  # what is in flight finishes; nothing new starts


@router.failed
async def report(seed: SeedInfo, error: Error) -> None:
    broken.append(seed.url)
    print(f"broken link: {error}")


async def main() -> int:
    with ShopServer(busy_once={"/"}) as shop:
        crawler = Crawler(router)
        stats = await crawler.arun([Seed(shop.url("/"))])
    print(stats)
    found = [item async for item in crawler.dataset(Found)]
    pages = len(shop.shop.paths())

    problems: list[str] = []
    if retried != [shop.url("/")] or shop.hits()["/"] != 2:
        problems.append(f"expected the busy home page to be retried once, retried {retried}")
    if [item.title for item in found] != [WANTED]:
        problems.append(f"expected to find {WANTED!r} once, found {found}")
    if stats.requests >= pages:
        problems.append(f"Stop did not stop the crawl early: {stats.requests} requests for {pages} pages")
    if broken != [shop.url(BROKEN_PATH)]:
        problems.append(f"expected one broken link, {BROKEN_PATH}; got {broken}")
    if hosts != {"127.0.0.1"}:
        problems.append(f"handled seeds on other hosts: {sorted(map(str, hosts - {'127.0.0.1'}))}")
    print(f"found {WANTED!r} after {stats.requests} of {pages} pages: {'; '.join(problems) or 'every check passed'}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
