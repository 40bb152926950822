"""Fixtures for the browser tests: the Chromium binaries (a failure on CI without them) and a backend.

Every test builds its backends with ``BrowserBackend(..., **chrome)``: Chromium then resolves
127.0.0.1 and localhost only, so nothing a test starts can reach another host.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import anyio
import pytest

from spire import BrowserBackend, PageWait
from tests.spire_core.backend.local_chrome import LOCAL_HOSTS, LocalChrome


@pytest.fixture(scope="session")
def chrome() -> LocalChrome:
    """The Chromium and chromedriver binaries, resolving local names only: a skip without them, a failure on CI."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        message = "chromium and chromedriver are needed (Debian: apt install chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return LocalChrome(chromium=chromium, chromedriver=chromedriver, resolve_only=LOCAL_HOSTS)


@pytest.fixture(scope="module")
def browser(chrome: LocalChrome) -> Iterator[BrowserBackend]:
    """One backend for the module: two drivers, restarted lazily after each crawl closes them.

    Seeds can ask for two named waits: ``done`` (until the page marks its body done) and ``strict``
    (for an element that never comes, briefly).
    """
    waits = {
        "done": PageWait.css("body[data-done]", timeout=5),
        "strict": PageWait.css("#never", timeout=0.3),
    }
    backend = BrowserBackend(drivers=2, page_load_timeout=10, waits=waits, **chrome)
    yield backend
    anyio.run(backend.aclose)
