"""``Blocking``: one owner's blocking calls (files, sqlite3, pyarrow) in worker threads, one at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, TypeVarTuple, Unpack

import anyio
import anyio.lowlevel
import anyio.to_thread

__all__ = ["Blocking"]

R = TypeVar("R")
Ts = TypeVarTuple("Ts")


class Blocking:
    """Runs one owner's blocking calls in worker threads, one at a time and in order.

    The limiter is made per event loop, so an owner made before ``anyio.run`` (or used by two runs
    one after the other, even on different backends) needs nothing from its creator.
    """

    def __init__(self) -> None:
        self._limiter: anyio.CapacityLimiter | None = None
        self._loop: object = None

    async def run(self, fn: Callable[[Unpack[Ts]], R], *args: *Ts) -> R:
        """``fn(*args)`` in a worker thread, after every call before it has finished."""
        loop = anyio.lowlevel.current_token()
        if self._limiter is None or self._loop != loop:
            self._limiter, self._loop = anyio.CapacityLimiter(1), loop
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)
