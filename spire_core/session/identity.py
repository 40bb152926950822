"""``Identity``: one browser's consistent set of request headers, with a cookie jar of its own.

    chrome = Identity("chrome", "windows")
    HttpBackend(identity=chrome)            # its headers on every request, its own cookie jar
    Identities([Identity("chrome", "macos"), Identity("firefox", "linux")])   # spread seeds over both

The User-Agent, the client hints (``Sec-CH-UA``, ``-Mobile``, ``-Platform``; Chromium browsers
only, as they send them), ``Accept``, ``Accept-Language`` and ``Accept-Encoding`` agree with each
other and come in the browser's own order, which the aiohttp path keeps. ``Accept-Encoding`` names
only the codings spire decodes with bounded output, so a compression bomb cannot slip in under a
browser's ``zstd``. The TLS and HTTP/2 fingerprint is the transport's; for a browser's own, see
``examples/curl_cffi_backend.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from spire_core.errors import ConfigError
from spire_core.session.decoding import OFFERED

__all__ = ["BrowserFamily", "Identity", "Platform"]

BrowserFamily = Literal["chrome", "edge", "firefox", "safari"]
Platform = Literal["windows", "macos", "linux", "android", "ios"]

_CHROME_VERSION = 131
_FIREFOX_VERSION = 133
_SAFARI_VERSION = "18.1"

_UA_PLATFORM = {
    "windows": "Windows NT 10.0; Win64; x64",
    "macos": "Macintosh; Intel Mac OS X 10_15_7",
    "linux": "X11; Linux x86_64",
    "android": "Linux; Android 10; K",
    "ios": "iPhone; CPU iPhone OS 18_1 like Mac OS X",
}
_FIREFOX_PLATFORM = {
    "windows": "Windows NT 10.0; Win64; x64; rv:{v}.0",
    "macos": "Macintosh; Intel Mac OS X 10.15; rv:{v}.0",
    "linux": "X11; Linux x86_64; rv:{v}.0",
    "android": "Android 14; Mobile; rv:{v}.0",
}
_HINT_PLATFORM = {"windows": "Windows", "macos": "macOS", "linux": "Linux", "android": "Android"}
_HTML_ACCEPT = {
    "chrome": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
    "application/signed-exchange;v=b3;q=0.7",
    "firefox": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "safari": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Identity:
    """A browser family on a platform, as its requests present it."""

    browser_family: BrowserFamily
    platform: Platform
    accept_language: str = "en-US,en;q=0.9"
    #: A name for the request log; ``"chrome-windows"`` by default.
    name: str = ""

    def __post_init__(self) -> None:
        if self.browser_family not in ("chrome", "edge", "firefox", "safari"):
            raise ConfigError(f"browser_family is chrome, edge, firefox or safari, not {self.browser_family!r}")
        if self.platform not in _UA_PLATFORM:
            raise ConfigError(f"platform is windows, macos, linux, android or ios, not {self.platform!r}")
        if self.browser_family == "safari" and self.platform not in ("macos", "ios"):
            raise ConfigError(f"Safari runs on macos and ios, not {self.platform}")
        if self.browser_family == "firefox" and self.platform == "ios":
            raise ConfigError("Firefox on iOS presents itself as Safari: use Identity('safari', 'ios')")
        if self.platform == "ios" and self.browser_family != "safari":
            raise ConfigError("every iOS browser presents itself as Safari: use Identity('safari', 'ios')")
        if not self.name:
            object.__setattr__(self, "name", f"{self.browser_family}-{self.platform}")

    @property
    def mobile(self) -> bool:
        return self.platform in ("android", "ios")

    @property
    def user_agent(self) -> str:
        family, platform = self.browser_family, self.platform
        if family == "firefox":
            os_part = _FIREFOX_PLATFORM[platform].format(v=_FIREFOX_VERSION)
            return f"Mozilla/5.0 ({os_part}) Gecko/20100101 Firefox/{_FIREFOX_VERSION}.0"
        if family == "safari":
            mobile = " Mobile/15E148" if platform == "ios" else ""
            return (
                f"Mozilla/5.0 ({_UA_PLATFORM[platform]}) AppleWebKit/605.1.15 (KHTML, like Gecko) "
                f"Version/{_SAFARI_VERSION}{mobile} Safari/605.1.15"
            )
        mobile = " Mobile" if self.mobile else ""
        chrome = (
            f"Mozilla/5.0 ({_UA_PLATFORM[platform]}) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"Chrome/{_CHROME_VERSION}.0.0.0{mobile} Safari/537.36"
        )
        return chrome + (f" Edg/{_CHROME_VERSION}.0.0.0" if family == "edge" else "")

    def headers(self) -> list[tuple[str, str]]:
        """The headers of a top-level page load, in the order this browser sends them."""
        accept = ("Accept", _HTML_ACCEPT["firefox" if self.browser_family == "firefox" else "chrome"])
        if self.browser_family == "safari":
            accept = ("Accept", _HTML_ACCEPT["safari"])
        fetch = [
            ("Sec-Fetch-Site", "none"),
            ("Sec-Fetch-Mode", "navigate"),
            ("Sec-Fetch-User", "?1"),
            ("Sec-Fetch-Dest", "document"),
        ]
        language = ("Accept-Language", self.accept_language)
        encoding = ("Accept-Encoding", OFFERED)
        agent = ("User-Agent", self.user_agent)
        if self.browser_family == "firefox":
            return [agent, accept, language, encoding, ("Upgrade-Insecure-Requests", "1"), *fetch]
        if self.browser_family == "safari":
            return [accept, *fetch[:1], *fetch[1:2], agent, language, fetch[3], encoding]
        brand = "Microsoft Edge" if self.browser_family == "edge" else "Google Chrome"
        hints = [
            ("Sec-CH-UA", f'"{brand}";v="{_CHROME_VERSION}", "Chromium";v="{_CHROME_VERSION}", "Not_A Brand";v="24"'),
            ("Sec-CH-UA-Mobile", "?1" if self.mobile else "?0"),
            ("Sec-CH-UA-Platform", f'"{_HINT_PLATFORM[self.platform]}"'),
        ]
        return [*hints, ("Upgrade-Insecure-Requests", "1"), agent, accept, *fetch, encoding, language]
