"""Backends: how a seed becomes a response."""

from spire_core.backend.adaptive import AdaptiveBackend
from spire_core.backend.base import Backend, FunctionBackend
from spire_core.backend.browser import AsyncDriver, Blocking, BrowserBackend, PageWait
from spire_core.backend.cache import CachingBackend
from spire_core.backend.http import HttpBackend, Timeouts

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
