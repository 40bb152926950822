"""Fixtures for the browser tests: the Chromium binaries (a failure on CI without them) and a backend."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import anyio
import pytest

from spire import BrowserBackend, PageWait


@pytest.fixture(scope="session")
def chrome() -> tuple[str, str]:
    """The Chromium and chromedriver binaries: a skip without them, a failure on CI."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        message = "chromium and chromedriver are needed (Debian: apt install chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return chromium, chromedriver


@pytest.fixture(scope="module")
def browser(chrome: tuple[str, str]) -> Iterator[BrowserBackend]:
    """One backend for the module: two drivers, restarted lazily after each crawl closes them.

    Seeds can ask for two named waits: ``done`` (until the page marks its body done) and ``strict``
    (for an element that never comes, briefly).
    """
    waits = {
        "done": PageWait.css("body[data-done]", timeout=5),
        "strict": PageWait.css("#never", timeout=0.3),
    }
    backend = BrowserBackend(drivers=2, page_load_timeout=10, waits=waits, chromium=chrome[0], chromedriver=chrome[1])
    yield backend
    anyio.run(backend.aclose)
