"""Backends: how a seed becomes a response. Each one is imported on first use, the HTTP one (aiohttp) too."""

import typing as _typing

from spire_core import lazy as _lazy
from spire_core.backend.base import Backend, FunctionBackend
from spire_core.session.timeouts import Timeouts

if _typing.TYPE_CHECKING:
    from spire_core.backend.adaptive import AdaptiveBackend
    from spire_core.backend.browser.backend import BrowserBackend
    from spire_core.backend.browser.blocking import Blocking
    from spire_core.backend.browser.driver import AsyncDriver
    from spire_core.backend.browser.waits import PageWait
    from spire_core.backend.cache import CachingBackend
    from spire_core.backend.http import HttpBackend
else:
    __getattr__, __dir__ = _lazy.exports(
        __name__,
        {
            "AdaptiveBackend": "spire_core.backend.adaptive",
            "AsyncDriver": "spire_core.backend.browser.driver",
            "Blocking": "spire_core.backend.browser.blocking",
            "BrowserBackend": "spire_core.backend.browser.backend",
            "CachingBackend": "spire_core.backend.cache",
            "HttpBackend": "spire_core.backend.http",
            "PageWait": "spire_core.backend.browser.waits",
        },
    )

__all__ = [
    "AdaptiveBackend",
    "AsyncDriver",
    "Backend",
    "Blocking",
    "BrowserBackend",
    "CachingBackend",
    "FunctionBackend",
    "HttpBackend",
    "PageWait",
    "Timeouts",
]
