"""Block pages in a crawl: the engine raises Blocked, the retry policy hands a block back at once (skip_blocks)."""

from __future__ import annotations

import anyio
import pytest

from spire import Crawler, Error, HostLimits, Response, Router
from spire_core.blocks import BlockKind, BlockRules
from spire_core.errors import Blocked
from spire_core.frontier.memory import MemoryFrontier
from spire_core.response import Response as FetchedResponse
from spire_core.session.retry import RetryPolicy
from tests.sites.server import Site
from tests.spire_core import test_blocks as pages

VENDOR_PAGES = {
    "cloudflare-challenge": (pages.CLOUDFLARE_CHALLENGE, "cloudflare", BlockKind.CHALLENGE),
    "cloudflare-uam": (pages.CLOUDFLARE_UAM, "cloudflare", BlockKind.CHALLENGE),
    "cloudflare-block": (pages.CLOUDFLARE_BLOCK, "cloudflare", BlockKind.BLOCK),
    "cloudflare-1020": (pages.CLOUDFLARE_1020, "cloudflare", BlockKind.BLOCK),
    "akamai": (pages.AKAMAI, "akamai", BlockKind.BLOCK),
    "datadome": (pages.DATADOME, "datadome", BlockKind.CAPTCHA),
    "perimeterx": (pages.PERIMETERX, "perimeterx", BlockKind.CAPTCHA),
    "imperva-block": (pages.IMPERVA_BLOCK, "imperva", BlockKind.BLOCK),
    "imperva-challenge": (pages.IMPERVA_CHALLENGE, "imperva", BlockKind.CHALLENGE),
    "aws-waf": (pages.AWS_WAF, "aws-waf", BlockKind.CAPTCHA),
}


def serve(site: Site, page: FetchedResponse) -> str:
    headers = {name: value for name, value in page.headers.items() if name.lower() != "content-type"}
    site.page("/item", page.body, status=page.status, headers=headers)
    return site.url("/item")


@pytest.mark.parametrize("name", sorted(VENDOR_PAGES))
def test_a_block_page_from_each_vendor_fails_as_blocked_after_one_request(site: Site, name: str) -> None:
    page, vendor, kind = VENDOR_PAGES[name]
    url = serve(site, page)
    failures: list[BaseException] = []
    router = _plain()

    @router.failed
    async def failed(error: Error) -> None:
        assert error is not None
        failures.append(error)

    # Every status of the vendor pages is a trigger here, so only skip_blocks keeps them from being retried.
    policy = RetryPolicy.transient(backoff=0.01).on_status(403, 405, 200).skip_blocks(BlockRules.builtin())
    frontier = MemoryFrontier().dedup()
    crawler = Crawler(router, frontier=frontier, retry=policy, host_limits=HostLimits(max_in_flight=2))
    stats = crawler.run([url])
    assert site.hits()["/item"] == 1
    assert (stats.failed, stats.errors_by_category["blocked"]) == (1, 1)
    (error,) = failures
    assert isinstance(error, Blocked)
    assert (error.vendor, error.kind) == (vendor, kind)
    assert anyio.run(frontier.pending) == 0


def test_without_skip_blocks_a_block_on_a_trigger_status_is_retried(site: Site) -> None:
    url = serve(site, pages.CLOUDFLARE_1020)
    policy = RetryPolicy.transient(attempts=3, backoff=0.01).on_status(403)
    stats = Crawler(_plain(), retry=policy, host_limits=HostLimits(max_in_flight=2)).run([url])
    assert site.hits()["/item"] == 3
    assert stats.errors_by_category["blocked"] == 1
    skipping = Crawler(_plain(), retry=policy.skip_blocks(BlockRules.builtin()), host_limits=HostLimits())
    skipping.run([url])
    assert site.hits()["/item"] == 4  # one more request: handed back at once


def _plain() -> Router:
    router = Router()

    @router.default
    async def item(response: Response) -> None:
        pass

    return router


def test_response_block_uses_the_builtin_rules_or_the_ones_given() -> None:
    assert pages.CLOUDFLARE_CHALLENGE.block() is not None
    bare = pages.response(403, {}, "Forbidden")
    assert bare.block() is None
    signal = bare.block(BlockRules.statuses([403, 429]))
    assert signal is not None
    assert signal.vendor == "status"
