"""The browser backend: headless Chromium through Selenium, split by concept.

- ``backend``: ``BrowserBackend``, loading one page and building its response.
- ``pool``: ``DriverPool``, the bounded pool that recycles browsers by pages and memory.
- ``chromium``: one browser and how it starts (``Launch``); ``memory``: its process tree's RSS.
- ``switches``: the command line that keeps Chromium's own services from sending anything.
- ``driver``: ``AsyncDriver``, the tab a handler drives.
- ``navigation``: the main document's status and headers, read from DevTools' performance log.
- ``waits``: ``PageWait``, what a page is waited on for; ``blocking``: ``Blocking``, what it may not load.
- ``interception``: requests paused to keep credentials on one origin, block resource types, stop a
  page's redirects for the crawl to admit, and answer a proxy's login.
- ``faults``: Selenium's and Chromium's errors as spire errors.

Each name is imported on first use: ``spire.Driver`` needs ``AsyncDriver`` without the backend.
"""

import typing as _typing

from spire_core import lazy as _lazy

if _typing.TYPE_CHECKING:
    from spire_core.backend.browser.backend import WAIT_KEY, BrowserBackend
    from spire_core.backend.browser.blocking import Blocking
    from spire_core.backend.browser.driver import AsyncDriver
    from spire_core.backend.browser.faults import translate
    from spire_core.backend.browser.pool import PoolStats
    from spire_core.backend.browser.switches import CHROMIUM_FLAGS
    from spire_core.backend.browser.waits import PageWait, WaitFor
else:
    __getattr__, __dir__ = _lazy.exports(
        __name__,
        {
            "AsyncDriver": "spire_core.backend.browser.driver",
            "Blocking": "spire_core.backend.browser.blocking",
            "BrowserBackend": "spire_core.backend.browser.backend",
            "CHROMIUM_FLAGS": "spire_core.backend.browser.switches",
            "PageWait": "spire_core.backend.browser.waits",
            "PoolStats": "spire_core.backend.browser.pool",
            "WAIT_KEY": "spire_core.backend.browser.backend",
            "WaitFor": "spire_core.backend.browser.waits",
            "translate": "spire_core.backend.browser.faults",
        },
    )

__all__ = [
    "AsyncDriver",
    "Blocking",
    "BrowserBackend",
    "CHROMIUM_FLAGS",
    "PageWait",
    "PoolStats",
    "WAIT_KEY",
    "WaitFor",
    "translate",
]
