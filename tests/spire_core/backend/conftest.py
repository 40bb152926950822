"""Fixtures for the browser tests: the Chromium binaries (a failure on CI without them) and a backend."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import anyio
import pytest

from spire import BrowserBackend


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
    """One backend for the module: two drivers, restarted lazily after each crawl closes them."""
    backend = BrowserBackend(drivers=2, page_load_timeout=10, chromium=chrome[0], chromedriver=chrome[1])
    yield backend
    anyio.run(backend.aclose)
