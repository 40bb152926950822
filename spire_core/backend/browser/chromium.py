"""``Chromium``: one headless Chromium under one chromedriver, with the profile and the processes it owns.

``Launch`` says how every browser of a backend starts (binaries, flags, timeouts, user agent,
blocking); ``Chromium.start(launch, proxy)`` starts one, through its own proxy (its login answered
by the ``Interceptor``, since Chromium takes none on its command line). Quitting ends the browser, kills whatever of its
process tree is left (a hung renderer included) and deletes its temporary profile.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from spire_core import errors
from spire_core.backend.browser.blocking import Blocking
from spire_core.backend.browser.interception import Interceptor
from spire_core.backend.browser.memory import tree_pids, tree_rss
from spire_core.backend.browser.switches import CHROMIUM_FLAGS, STARTUP_PREFS, host_rules, merged_features
from spire_core.session.navigations import Admit
from spire_core.session.proxies import ProxyAddress

if TYPE_CHECKING:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["Chromium", "Launch", "find_binary"]


def find_binary(given: str | None, names: Iterable[str], what: str) -> str:
    """The path of ``given`` or of the first of ``names`` on PATH; ``ConfigError`` naming what to install."""
    if given is not None:
        found = shutil.which(given)
        if found is None:
            raise errors.ConfigError(f"{what} not found at {given!r}")
        return found
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    raise errors.ConfigError(f"{what} not found on PATH; install it (Debian: apt install chromium chromium-driver)")


@dataclasses.dataclass(frozen=True, slots=True)
class Launch:
    """How each browser of a backend starts. ``user_agent`` is the identity it keeps.

    With ``resolve_only``, the browser resolves those host names and no other (``host_rules``).
    """

    chromium: str
    chromedriver: str
    headless: bool = True
    options: Options | None = None
    user_agent: str | None = None
    resolve_only: frozenset[str] | None = None
    page_load_timeout: float = 30.0
    script_timeout: float = 30.0
    blocking: Blocking = dataclasses.field(default_factory=Blocking)

    @property
    def command_timeout(self) -> float:
        """Seconds one WebDriver call may take: the longest page load or script, and a margin."""
        return max(self.page_load_timeout, self.script_timeout) + 30.0

    def chrome_options(self, profile: str, proxy: ProxyAddress | None = None) -> Options:
        from selenium.webdriver.chrome.options import Options

        options = copy.deepcopy(self.options) if self.options is not None else Options()
        flags = [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        if self.headless:
            flags.insert(0, "--headless=new")
        if self.user_agent is not None:
            flags.append(f"--user-agent={self.user_agent}")
        if proxy is not None:
            # Chromium never proxies loopback by default; spire's proxy applies to every target alike.
            flags += [f"--proxy-server={proxy.server}", "--proxy-bypass-list=<-loopback>"]
        if self.resolve_only is not None:
            flags.append(host_rules(self.resolve_only))
        # The user's own switches win, but their --disable-features joins spire's: Chromium reads one.
        given = list(options.arguments)
        named = {argument.split("=", 1)[0] for argument in given}
        options.arguments.clear()
        for argument in [*given, *(flag for flag in flags if flag.split("=", 1)[0] not in named)]:
            if not argument.startswith("--disable-features="):
                options.add_argument(argument)
        options.add_argument(merged_features(given))
        prefs = options.experimental_options.get("prefs", {})
        options.add_experimental_option("prefs", {**STARTUP_PREFS, **prefs})
        if not options.binary_location:
            options.binary_location = self.chromium
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        options.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
        return options


class Chromium:
    """One running browser: its WebDriver, its main frame, its request interceptor, its proxy, the pages it served."""

    __slots__ = ("broken", "driver", "interceptor", "main_frame", "pages", "pid", "profile", "proxy", "sent_headers")

    def __init__(
        self,
        driver: WebDriver,
        profile: str,
        main_frame: str,
        interceptor: Interceptor | None,
        proxy: ProxyAddress | None = None,
    ) -> None:
        self.driver = driver
        self.proxy = proxy
        self.profile = profile
        self.main_frame = main_frame
        self.interceptor = interceptor
        self.pid: int | None = driver.service.process.pid if driver.service.process is not None else None
        self.pages = 0
        self.broken = False
        self.sent_headers: tuple[str | None, dict[str, str]] = (None, {})

    @classmethod
    def start(cls, launch: Launch, proxy: ProxyAddress | None = None) -> Chromium:
        """Blocking: start one Chromium with its own temporary profile, through ``proxy`` if given."""
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.chrome.webdriver import WebDriver
        from selenium.webdriver.remote.remote_connection import RemoteConnection

        profile = tempfile.mkdtemp(prefix="spire-chromium-")
        try:
            driver = WebDriver(
                options=launch.chrome_options(profile, proxy), service=Service(executable_path=launch.chromedriver)
            )
        except BaseException:
            shutil.rmtree(profile, ignore_errors=True)
            raise
        browser = cls(driver, profile, "", None, proxy)
        try:
            # Without a bound, a chromedriver that stops answering holds its worker thread forever;
            # past it, the call fails as a lost browser, which is then replaced.
            if isinstance(driver.command_executor, RemoteConnection):
                driver.command_executor.client_config.timeout = launch.command_timeout
            driver.set_page_load_timeout(launch.page_load_timeout)
            driver.set_script_timeout(launch.script_timeout)
            # chromedriver names a window by its DevTools target id, which is also its main frame's id.
            browser.main_frame = str(driver.current_window_handle)
            driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": launch.blocking.url_patterns})
            address = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
            login = (proxy.username, proxy.password or "") if proxy is not None and proxy.username else None
            browser.interceptor = Interceptor(
                str(address), browser.main_frame, blocked_types=launch.blocking.devtools_types, proxy_login=login
            )
        except BaseException:
            browser.quit()
            raise
        return browser

    def send_headers(self, origin: str, headers: Mapping[str, str]) -> None:
        """Blocking: requests for ``origin`` (and no other) carry ``headers`` from now on."""
        wanted = (origin if headers else None, dict(headers))
        if wanted != self.sent_headers and self.interceptor is not None:
            self.interceptor.set(*wanted)
            self.sent_headers = wanted

    def loading(self, sent: Callable[[], None], moves: Admit) -> AbstractContextManager[Collection[str]]:
        """Within: a page load whose main document is redirected stops there (``Interceptor``), and
        ``sent()`` is called as its document request goes out; yields the network ids of the loads
        that stopped. After it, until ``idle``, the tab moves on from its page where ``moves`` admits."""
        if self.interceptor is None:
            sent()
            return contextlib.nullcontext(set())
        return self.interceptor.stopping_redirects(sent, moves)

    def idle(self) -> None:
        """The tab's page is done with (the browser goes back to its pool): it moves nowhere until the next load."""
        if self.interceptor is not None:
            self.interceptor.idle()

    def rss(self) -> int | None:
        """Blocking: the bytes resident in chromedriver, Chromium and every process they started."""
        return tree_rss(self.pid) if self.pid is not None else None

    def quit(self) -> None:
        """Blocking: end the browser, kill what is left of its processes, delete its profile; never raises."""
        left = tree_pids(self.pid) if self.pid is not None else []
        if self.interceptor is not None:
            self.interceptor.close()
        with contextlib.suppress(Exception):  # a browser already gone still leaves its profile
            self.driver.quit()
        for pid in left:  # a hung renderer outlives a polite quit
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.profile, ignore_errors=True)
