"""``Links``: queue the links a handler finds, as child seeds one level deeper.

    @router.handler("listing")
    async def listing(page: Html, links: Links) -> None:
        await links.follow(page.css("a.book::attr(href)").getall(), tag="book")

Links are staged and pushed to the frontier together when the handler succeeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from spire_core import url as urls
from spire_core.context import Context
from spire_core.errors import InvalidUrl
from spire_core.seed import Seed

__all__ = ["EnqueueResult", "Links"]


@dataclasses.dataclass(slots=True)
class EnqueueResult:
    """What one call queued, and what it skipped with the reason (``invalid_url``, ``scheme``...)."""

    added: list[Seed] = dataclasses.field(default_factory=list)
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)


class Links:
    """The link queue of one request."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    @property
    def base_url(self) -> str:
        """The URL relative links resolve against: the response's after redirects, else the seed's."""
        response = self._ctx.fetched_response
        return response.url if response is not None else self._ctx.seed.url

    async def follow(
        self,
        urls_: Iterable[str] | str,
        *,
        tag: str | None = None,
        user_data: Mapping[str, Any] | None = None,
        priority: int = 0,
        forefront: bool = False,
    ) -> EnqueueResult:
        """Queue ``urls_`` (relative ones resolved against the page) as children of this seed."""
        if isinstance(urls_, str):
            urls_ = [urls_]
        result = EnqueueResult()
        parent = self._ctx.seed
        base = self.base_url
        stats = self._ctx.crawler.stats
        for raw in urls_:
            joined = urls.join(base, raw)
            if joined is None:
                result.skipped.append((raw, "invalid_url"))
                continue
            if not joined.startswith(("http://", "https://")):
                result.skipped.append((raw, "scheme"))
                continue
            try:
                child = parent.child(joined, tag=tag, user_data=user_data, priority=priority)
            except InvalidUrl:
                result.skipped.append((raw, "invalid_url"))
                continue
            result.added.append(child)
        for _, reason in result.skipped:
            stats.skip(reason)
        self._ctx.enqueue(result.added, forefront=forefront)
        return result
