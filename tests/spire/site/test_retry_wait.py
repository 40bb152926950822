"""A site crawl against a server asking for a wait far past the retry policy's ``max_wait`` fails the
page at once (``retry_wait``), as a Router crawl does, instead of waiting the capped wait on every try."""

from __future__ import annotations

import anyio
import pytest

import spire
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, collect, page_paths

pytestmark = pytest.mark.anyio


async def test_a_429_asking_for_a_day_fails_the_page_at_once(site: Site) -> None:
    site.page("/", "slow down", status=429, headers={"Retry-After": "99999"})
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    with anyio.fail_after(30):  # before: five minutes a try, 40 minutes and more in all
        pages, errors = await collect(crawl)
    assert pages == []
    assert [(error.url, error.category) for error in errors] == [(site.url("/"), "retry_wait")]
    assert page_paths(site).count("/") == 1
