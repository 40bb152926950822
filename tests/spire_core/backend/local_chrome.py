"""``LocalChrome``: the backend arguments every test's Chromium starts with, keeping it on this machine."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["LOCAL_HOSTS", "LocalChrome"]

#: The only names a test's Chromium resolves: a service whose switch spire missed fails to resolve
#: anything else, so no test reaches another host.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})


class LocalChrome(TypedDict):
    """``BrowserBackend(**chrome)``: the binaries, and host resolution kept to ``LOCAL_HOSTS``."""

    chromium: str
    chromedriver: str
    resolve_only: frozenset[str]
