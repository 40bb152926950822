"""The site-crawl tests run on asyncio: the HTTP backend's default transport is aiohttp."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
