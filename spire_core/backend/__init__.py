"""Backends: how a seed becomes a response."""

from spire_core.backend.base import Backend, FunctionBackend, Session
from spire_core.backend.http import HttpBackend, Timeouts

__all__ = ["Backend", "FunctionBackend", "HttpBackend", "Session", "Timeouts"]
