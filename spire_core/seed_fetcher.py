"""``SeedFetcher``: one seed's fetch, hop by hop, under its host slot: what a handler's lazy fetch runs.

Each hop goes out on the one request path (``Sender``: a slot of its origin, the origin's
credentials, counting, the request log, the pause of an origin that answers 429 or 503) and, when
it is a redirect, passes the crawl's admission (``Redirects``) before the next hop; a browser that
holds the page afterwards asks the same rules before its tab moves on (``session.navigations``). The last
response is checked for a block page and for a failing status. The crawl's own process holds its
slots in the ``HostGate``; a worker process of ``processes=N`` holds them in the crawl's gate over
its pipe: the ``Slot`` is the seam.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Protocol

from spire_core.blocks import BlockRules
from spire_core.errors import Blocked, HttpStatusError
from spire_core.limits import parse_retry_after
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.send import Sender, Slot
from spire_core.session.navigations import judging
from spire_core.session.streaming import StreamedResponse
from spire_core.session.timeouts import deadline

__all__ = ["NextHop", "SeedFetcher"]


class NextHop(Protocol):
    """The crawl's rule for a redirect hop (``Redirects``): the next seed, or ``RedirectRefused``;
    and for a browser tab's move after its page loaded.

    ``chain`` holds the URLs fetched so far for ``seed``, its own first.
    """

    async def next_hop(self, seed: Seed, current: Seed, response: Response, chain: Sequence[str]) -> Seed: ...

    async def navigation(self, seed: Seed, page: str, target: str) -> bool:
        """Whether the tab holding ``seed``'s page, now at ``page``, may go on to ``target`` (a refusal is counted)."""
        ...


@dataclasses.dataclass(slots=True)
class SeedFetcher:
    """How the crawl fetches a seed: the request path, the redirect rule, block rules and status handling.

    ``max_pause`` bounds a ``Retry-After`` the error carries, as the host limits do.
    """

    sender: Sender
    redirects: NextHop
    block_rules: BlockRules
    max_pause: float | timedelta = 3600.0
    follow_redirects: bool = True
    raise_for_status: bool = True

    async def fetch(self, seed: Seed, slot: Slot, *, accepts_blocks: Callable[[], bool]) -> Response:
        """Fetch ``seed`` within the request deadline (the wait for a host slot included), then give
        the slot back (a streamed body gives it back when it ends); ``accepts_blocks()`` says whether
        the handler takes a block page as a page."""
        streaming = False
        try:
            with deadline(self.sender.timeouts.seconds("request"), url=seed.url, what="request"):
                response = await self._hops(seed, slot, accepts_blocks)
            streaming = isinstance(response, StreamedResponse)  # its body gives the slot back when it ends
            return response
        finally:
            if not streaming:
                slot.release()

    async def _hops(self, seed: Seed, slot: Slot, accepts_blocks: Callable[[], bool]) -> Response:
        """Follow redirects hop by hop, each admitted like a link and against its own origin."""
        current = seed
        hops: list[str] = []
        page = True  # whether the last response counts as a page (not a block page the handler took)

        def check(response: Response) -> None:
            nonlocal page
            if not (self.follow_redirects and response.is_redirect):
                page = self._judge(response, accepts_blocks)

        async def navigation(page: str, target: str) -> bool:
            return await self.redirects.navigation(seed, page, target)

        while True:
            with judging(navigation):
                response = await self.sender.send(current, slot, hop=len(hops), check=check)
            if self.follow_redirects and response.is_redirect:
                hops.append(current.url)
                current = await self.redirects.next_hop(seed, current, response, hops)
                if current.origin != slot.origin:
                    slot.release()
                continue
            response.seed = seed
            response.redirects = (*hops, *response.redirects)
            if page and response.status < 400 and response.status != 304:
                self.sender.stats.pages += 1  # a 304 to a recrawl's revisit reaches no handler
            return response

    def _judge(self, response: Response, accepts_blocks: Callable[[], bool]) -> bool:
        """Raise for a block page the handler does not take, or a failing status; ``False`` for a block
        page the handler takes (it is not counted as a page)."""
        signal = self.block_rules.check(response)
        if signal is not None:
            if not accepts_blocks():
                raise Blocked(signal.vendor, signal.kind, url=response.url, response=response)
            return False  # the handler asked for block pages: it gets this one, whatever its status
        if response.status >= 400 and self.raise_for_status:
            error = HttpStatusError(
                response.status,
                url=response.url,
                retry_after=parse_retry_after(response.headers.get("retry-after"), max_wait=self.max_pause),
            )
            error.response = response
            raise error
        return True
