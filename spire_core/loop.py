"""The event loop a crawl starts: asyncio, on uvloop when it is installed (the ``speed`` extra).

``Crawler.run``, the CLI and each worker process start their loop with ``run(fn, *args)``, which is
``anyio.run`` with that choice made; ``Crawler.arun`` runs on whatever loop its caller started. uvloop
runs asyncio's event loop on libuv: the same crawl, with less CPU spent in the loop for each request.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, TypeVarTuple, Unpack

import anyio

__all__ = ["backend_options", "run"]

T = TypeVar("T")
Args = TypeVarTuple("Args")


@functools.cache
def backend_options() -> dict[str, Any]:
    """anyio's asyncio options: uvloop's loop when the ``uvloop`` package is installed."""
    return {"use_uvloop": True} if importlib.util.find_spec("uvloop") is not None else {}


def run(fn: Callable[[Unpack[Args]], Awaitable[T]], *args: *Args) -> T:
    """``anyio.run(fn, *args)`` on asyncio, on uvloop when it is installed."""
    return anyio.run(fn, *args, backend_options=backend_options())
