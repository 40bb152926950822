"""``Blocking``: requests a page makes that the browser refuses, by resource type and URL pattern.

    BrowserBackend(blocking=Blocking(types=("image", "font", "media"), urls=("*/analytics.js",)))

Images, fonts and media are most of a page's bytes and none of its text; blocking them saves time
and memory. A blocked request fails in the page as an ad blocker's would (``ERR_BLOCKED_BY_CLIENT``);
the page's own document is never blocked. URL patterns use ``*`` as a wildcard (DevTools'
``Network.setBlockedURLs``); ``/favicon.ico`` is always blocked, since a crawler has no use for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from spire_core import errors

__all__ = ["RESOURCE_TYPES", "Blocking"]

#: The resource types that can be blocked, and DevTools' name for each.
RESOURCE_TYPES = {
    "image": "Image",
    "font": "Font",
    "media": "Media",
    "stylesheet": "Stylesheet",
    "script": "Script",
    "xhr": "XHR",
    "fetch": "Fetch",
    "websocket": "WebSocket",
    "manifest": "Manifest",
    "other": "Other",
}
_ALWAYS = ("*/favicon.ico",)


@dataclasses.dataclass(frozen=True, slots=True)
class Blocking:
    """Resource types (``"image"``, ``"font"``, ``"media"``, ...) and URL patterns the browser refuses."""

    types: frozenset[str] = frozenset()
    urls: tuple[str, ...] = ()

    def __init__(self, *, types: Iterable[str] = (), urls: Iterable[str] = ()) -> None:
        chosen = frozenset(kind.lower() for kind in ([types] if isinstance(types, str) else types))
        unknown = sorted(chosen - RESOURCE_TYPES.keys())
        if unknown:
            raise errors.ConfigError(f"unknown resource types {unknown}; known: {sorted(RESOURCE_TYPES)}")
        patterns = (urls,) if isinstance(urls, str) else tuple(urls)
        for pattern in patterns:
            if not isinstance(pattern, str) or not pattern:
                raise errors.ConfigError(f"a blocked URL pattern must be a non-empty string, not {pattern!r}")
        object.__setattr__(self, "types", chosen)
        object.__setattr__(self, "urls", patterns)

    @classmethod
    def assets(cls, *, urls: Iterable[str] = ()) -> Blocking:
        """Images, fonts and media: what a crawler reading text never needs."""
        return cls(types=("image", "font", "media"), urls=urls)

    @property
    def devtools_types(self) -> frozenset[str]:
        """The blocked types as DevTools names them (``Image``, ``Font``, ...)."""
        return frozenset(RESOURCE_TYPES[kind] for kind in self.types)

    @property
    def url_patterns(self) -> list[str]:
        """Every blocked URL pattern, the favicon included."""
        return [*_ALWAYS, *self.urls]
