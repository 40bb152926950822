"""Pacing: a backend tells the request path when its requests go out, so rate spacing counts from there.

The request path marks a request as sent just before it calls the backend (``Slot.sending``), and an
origin's ``per_second`` spacing and robots.txt ``Crawl-delay`` count from that moment. Two backends
know better:

- a browser's page load leaves only once a tab is free, its browser has started and the browser
  has made the page's request, which can take seconds: the thread that lets that request out calls
  the function ``marker()`` gave, and the spacing counts from then;
- ``AdaptiveBackend`` sends a second request for the same seed (the page rendered after its HTTP
  fetch): before it, ``await one_more()`` waits out the origin's spacing (and pause) as any other
  request would, then counts from then.

The request path sets the request's slot as the pacing of the backend call (``pacing``); outside it
(a backend used on its own) both do nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

import anyio.from_thread
import anyio.lowlevel

__all__ = ["Pacing", "marker", "one_more", "pacing"]


class Pacing(Protocol):
    """What a backend may tell the host slot of the request it is sending (``Slot`` has both)."""

    def sent_later(self) -> None:
        """The request goes out only now: the origin's rate spacing counts from here."""
        ...

    async def another(self) -> None:
        """One more request goes to the origin under this slot: wait out its spacing, then count from here."""
        ...


#: The slot of the request whose backend call runs in this task.
_current: ContextVar[Pacing | None] = ContextVar("spire_pacing", default=None)


@contextmanager
def pacing(slot: Pacing) -> Iterator[None]:
    """Within: ``sent_now`` and ``one_more`` tell ``slot`` (the request path wraps each backend call)."""
    token = _current.set(slot)
    try:
        yield
    finally:
        _current.reset(token)


def marker() -> Callable[[], None]:
    """A function for another thread to call right before a backend's request goes out: the origin's
    spacing then counts from that moment (told on the event loop; never raises)."""
    slot = _current.get()
    if slot is None:
        return _unpaced
    token = anyio.lowlevel.current_token()

    def sent() -> None:
        with contextlib.suppress(Exception):  # the run has ended: nothing is spaced any more
            anyio.from_thread.run_sync(slot.sent_later, token=token)

    return sent


def _unpaced() -> None:
    """Outside the request path: nothing to tell."""


async def one_more() -> None:
    """Before a backend sends a second request for the same seed: wait for the origin's spacing."""
    slot = _current.get()
    if slot is not None:
        await slot.another()
