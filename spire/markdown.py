"""``Markdown``: a page's main content as Markdown, for people and language models.

    @router.handler("article")
    async def article(text: Markdown, url: Url, docs: Dataset[Doc]) -> None:
        await docs.push(Doc(url=url, markdown=text))

Headings, lists, links, tables and emphasis are kept; navigation, sidebars, footers and other
boilerplate are dropped. The work is trafilatura's (the ``markdown`` extra): it finds the main
content the way a reader would and writes Markdown itself, so spire needs no second library for the
conversion. It runs in a worker thread, since a large page takes it milliseconds of CPU.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Annotated, Any

import anyio.to_thread

from spire.extract import Extractor
from spire_core.context import Context
from spire_core.errors import ConfigError

__all__ = ["Markdown", "MarkdownOf", "to_markdown"]


def _trafilatura() -> Any:
    try:
        import trafilatura
    except ImportError:
        raise ConfigError("Markdown needs the markdown extra: pip install 'spire[markdown]'") from None
    return trafilatura


def to_markdown(html: str, *, url: str | None = None, links: bool = True, tables: bool = True) -> str:
    """The main content of the HTML page ``html`` as Markdown; ``""`` when it has none.

    ``url`` (the page's address) turns relative links into absolute ones.
    """
    found = _trafilatura().extract(
        html,
        url=url,
        output_format="markdown",
        include_links=links,
        include_tables=tables,
        include_formatting=True,
        include_comments=False,
        include_images=False,
    )
    # trafilatura ends table cells with a space; a trailing space means nothing in Markdown (two mean a break).
    return "\n".join(line.rstrip() for line in str(found or "").strip().splitlines())


class MarkdownOf(Extractor[str]):
    """The response's main content as Markdown; ``links`` and ``tables`` may be left out.

        async def handler(text: Annotated[str, MarkdownOf(links=False)]) -> None: ...

    A body that is not HTML is returned as its decoded text.
    """

    def __init__(self, *, links: bool = True, tables: bool = True) -> None:
        self.links = links
        self.tables = tables

    async def extract(self, ctx: Context) -> str:
        response = await ctx.response()
        content_type = response.content_type
        if content_type is not None and "html" not in content_type:
            return response.text
        text, url = response.text, response.url
        return await anyio.to_thread.run_sync(lambda: to_markdown(text, url=url, links=self.links, tables=self.tables))

    def key(self) -> Hashable:
        return (MarkdownOf, self.links, self.tables)

    def __repr__(self) -> str:
        return f"MarkdownOf(links={self.links}, tables={self.tables})"


#: The page's main content as Markdown (headings, lists, links and tables kept; boilerplate dropped).
Markdown = Annotated[str, MarkdownOf()]
