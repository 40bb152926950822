"""Helpers the frontier tests share: lease one seed, lease once one is ready, drain a queue."""

from __future__ import annotations

import anyio

from spire_core.frontier.base import Frontier, Lease, Ready, always_ready
from spire_core.outcome import Done


async def lease_seed(frontier: Frontier, ready: Ready = always_ready) -> Lease:
    """Lease one seed now; fail the test if the frontier says wait."""
    result = await frontier.lease(ready)
    assert isinstance(result, Lease), result
    return result


async def lease_when_ready(frontier: Frontier, *, within: float = 5.0) -> Lease:
    """Lease, waiting as long as the frontier says each time, until a seed comes out (at most ``within`` s)."""
    with anyio.fail_after(within):
        while True:
            result = await frontier.lease()
            if isinstance(result, Lease):
                return result
            assert result.seconds is not None, "the frontier said nothing would become ready"
            await anyio.sleep(result.seconds)


async def drain(frontier: Frontier) -> list[str]:
    """Lease everything queued now, settling each as done; the URLs in the order handed out."""
    urls: list[str] = []
    while isinstance(result := await frontier.lease(), Lease):
        urls.append(result.seed.url)
        await frontier.report(result, Done())
    return urls
