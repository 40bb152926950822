"""Backends: how a seed becomes a response. The browser, adaptive and caching ones are imported on first use."""

import typing as _typing

from spire_core import lazy as _lazy
from spire_core.backend.base import Backend, FunctionBackend
from spire_core.backend.http import HttpBackend, Timeouts

if _typing.TYPE_CHECKING:
    from spire_core.backend.adaptive import AdaptiveBackend
    from spire_core.backend.browser.backend import BrowserBackend
    from spire_core.backend.browser.blocking import Blocking
    from spire_core.backend.browser.driver import AsyncDriver
    from spire_core.backend.browser.waits import PageWait
    from spire_core.backend.cache import CachingBackend
else:
    __getattr__, __dir__ = _lazy.exports(
        __name__,
        {
            "AdaptiveBackend": "spire_core.backend.adaptive",
            "AsyncDriver": "spire_core.backend.browser.driver",
            "Blocking": "spire_core.backend.browser.blocking",
            "BrowserBackend": "spire_core.backend.browser.backend",
            "CachingBackend": "spire_core.backend.cache",
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
