"""Navigations: a backend holding a page asks the crawl whether that page may go on to another URL.

A browser's tab outlives its page load: a script's timer, a meta refresh or a handler's click can
send the tab somewhere else while the handler runs. The request path sets, for each page it fetches,
the crawl's rule for such a move (``judging``): ``Redirects.navigation``, which applies the address
policy, the strategy relative to the page and the robots.txt rules already known. A backend takes
it on the event loop (``judge()``) and calls what it gets from the thread that sees the navigation;
the verdict is made on the event loop, and a run that has ended refuses.

Outside the request path (a backend used on its own) there is no crawl to ask: ``judge()`` gives
``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio.from_thread
import anyio.lowlevel

__all__ = ["Admit", "Rule", "judge", "judging"]

#: The crawl's rule for the page being fetched: ``await rule(page, target)`` is whether the tab
#: holding ``page`` may go on to ``target`` (a refusal is counted and logged by the rule).
Rule = Callable[[str, str], Coroutine[Any, Any, bool]]
#: What a backend's thread calls: ``admit(page, target)``, blocking until the crawl answers.
Admit = Callable[[str, str], bool]

#: The rule for the page whose backend call runs in this task.
_current: ContextVar[Rule | None] = ContextVar("spire_navigation_rule", default=None)


@contextmanager
def judging(rule: Rule) -> Iterator[None]:
    """Within: ``judge()`` gives a backend ``rule`` (the request path wraps each page's backend call)."""
    token = _current.set(rule)
    try:
        yield
    finally:
        _current.reset(token)


def judge() -> Admit | None:
    """On the event loop: a function for another thread to ask whether the page may navigate to a
    URL (``None`` outside the request path). A run that ended, or a rule that failed, refuses."""
    rule = _current.get()
    if rule is None:
        return None
    token = anyio.lowlevel.current_token()

    def admit(page: str, target: str) -> bool:
        try:
            return anyio.from_thread.run(rule, page, target, token=token)
        except Exception:  # the run has ended (its loop is gone): nothing more is admitted
            return False

    return admit
