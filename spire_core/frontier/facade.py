"""``Facade``: the base of every frontier that adds behaviour on top of another one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from spire_core.frontier.base import Frontier, FrontierOps, Lease, PushResult, Ready, Wait, always_ready
from spire_core.outcome import Outcome
from spire_core.seed import Seed

__all__ = ["Facade"]


class Facade(FrontierOps):
    """Forwards every call to ``inner``; a facade overrides only the calls it changes."""

    def __init__(self, inner: Frontier) -> None:
        self.inner = inner

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        return await self.inner.push(seeds, forefront=forefront, unique=unique)

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        return await self.inner.seen(keys)

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        return await self.inner.claim(keys)

    async def lease(self, ready: Ready = always_ready) -> Lease | Wait:
        return await self.inner.lease(ready)

    async def report(self, lease: Lease, outcome: Outcome) -> Outcome:
        return await self.inner.report(lease, outcome)

    async def release(self, lease: Lease) -> None:
        await self.inner.release(lease)

    async def pending(self) -> int:
        return await self.inner.pending()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"
