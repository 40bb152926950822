"""``Screenshot``: an extractor that saves a PNG of the page's browser tab and gives its path.

    @router.handler("product")
    async def product(page: Html, shot: Annotated[Path, Screenshot("shots", full_page=True)]) -> None: ...

The picture is of the tab as the handler finds it (after the backend's waits), taken through DevTools
(``Page.captureScreenshot``). It needs a tab, so the page must come from ``BrowserBackend`` (or be
rendered by ``AdaptiveBackend``); the file is named after the URL, so a page taken again replaces it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable
from pathlib import Path

import anyio

from spire.extract import Driver, Extractor, resolve
from spire_core.context import Context

__all__ = ["Screenshot"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_name(url: str) -> str:
    """A readable, unique file name for ``url``: its host and path made safe, and a short hash."""
    readable = _UNSAFE.sub("_", url.split("://", 1)[-1]).strip("_")[:80]
    digest = hashlib.sha1(url.encode()).hexdigest()[:10]
    return f"{readable}-{digest}.png"


class Screenshot(Extractor[Path]):
    """Saves the tab as a PNG in ``directory`` (made if missing) and gives the file's path."""

    def __init__(self, directory: str | Path = "screenshots", *, full_page: bool = False) -> None:
        self.directory = Path(directory)
        self.full_page = full_page

    async def extract(self, ctx: Context) -> Path:
        driver = await resolve(ctx, Driver)
        png = await driver.screenshot(full_page=self.full_page)
        path = self.directory / file_name(ctx.seed.url)
        await anyio.Path(self.directory).mkdir(parents=True, exist_ok=True)
        await anyio.Path(path).write_bytes(png)
        return path

    def key(self) -> Hashable:
        return (Screenshot, self.directory, self.full_page)
