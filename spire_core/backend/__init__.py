"""Backends: how a seed becomes a response."""

from spire_core.backend.base import Backend, FunctionBackend
from spire_core.backend.browser import AsyncDriver, BrowserBackend
from spire_core.backend.cache import CachingBackend
from spire_core.backend.http import HttpBackend, Timeouts

__all__ = ["AsyncDriver", "Backend", "BrowserBackend", "CachingBackend", "FunctionBackend", "HttpBackend", "Timeouts"]
