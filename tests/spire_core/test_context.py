"""``Context``: the seed's lazy fetch runs once, however many extractors ask for it at once."""

from __future__ import annotations

import anyio
import pytest

from spire import Crawler, Router
from spire_core.backend.http import HttpBackend
from spire_core.context import Context
from spire_core.errors import FetchError
from spire_core.response import Response
from spire_core.seed import Seed
from tests.sites.server import Site


def context(seed: Seed, backend: HttpBackend) -> Context:
    crawler = Crawler(Router())  # only its admission and datasets
    return Context(
        seed, lambda ctx: backend.fetch(seed), admission=crawler.admission, datasets=crawler.dataset, backend=backend
    )


async def responses(ctx: Context, askers: int) -> list[Response | BaseException]:
    got: list[Response | BaseException] = []

    async def ask() -> None:
        try:
            got.append(await ctx.response())
        except FetchError as exc:
            got.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(askers):
                tg.start_soon(ask)
    return got


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_extractors_asking_at_once_share_one_fetch(site: Site, anyio_backend: str) -> None:
    site.page("/slow", "<title>slow</title>", delay=0.2)
    backend = HttpBackend(timeout=5)
    try:
        ctx = context(Seed(site.url("/slow")), backend)
        got = await responses(ctx, 3)
        later = await ctx.response()
    finally:
        await backend.aclose()
    assert site.hits() == {"/slow": 1}
    assert len(got) == 3
    assert all(response is later for response in got)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_failed_fetch_fails_every_extractor_waiting_and_every_later_one(
    dead_port: int, anyio_backend: str
) -> None:
    backend = HttpBackend(timeout=5)
    try:
        ctx = context(Seed(f"http://127.0.0.1:{dead_port}/"), backend)
        got = await responses(ctx, 3)
        with pytest.raises(FetchError) as later:
            await ctx.response()
    finally:
        await backend.aclose()
    assert len(got) == 3
    assert all(error is later.value for error in got)
