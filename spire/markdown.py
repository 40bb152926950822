"""``Markdown``: a page's main content as Markdown, for people and language models.

    @router.handler("article")
    async def article(text: Markdown, url: Url, docs: Dataset[Doc]) -> None:
        await docs.push(Doc(url=url, markdown=text))

Headings, paragraphs, lists, links (resolved against the page, or its ``<base href>``), emphasis,
inline code, code listings (fenced blocks) and tables are kept; navigation, sidebars, page headers
and footers, forms and scripts are dropped. The main content is the page's ``<main>`` (or
``role="main"``, or its one ``<article>``); without one, the ``<body>`` less what its tags, ARIA roles
and class names mark as navigation.

The conversion is spire's own, on the lxml tree the crawl parses (no extra to install): it visits
each element once, so its work grows with the page. Every page is bounded all the same
(``MarkdownLimits``: input, output, table columns however wide a ``colspan``, time), and a page past
a bound fails with ``ContentLimitError`` instead of holding a worker thread. In a crawl it runs in a
worker thread that stops as soon as its request is cancelled (a time budget, a shutdown).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio.to_thread

from spire.extract import Extractor
from spire_core import html
from spire_core import url as urls
from spire_core.context import Context
from spire_core.errors import ContentLimitError

__all__ = ["Markdown", "MarkdownLimits", "MarkdownOf", "ato_markdown", "to_markdown"]


@dataclass(frozen=True, slots=True)
class MarkdownLimits:
    """How much work one page's Markdown may take; past any of them the page fails with ``ContentLimitError``."""

    #: Characters of HTML a page may have.
    max_input: int = 10_000_000
    #: Characters of Markdown a page may produce.
    max_output: int = 10_000_000
    #: Columns of a table: wider ``colspan``s, and cells past it, are cut here.
    max_columns: int = 100
    #: Seconds one page's conversion may take.
    max_seconds: float = 10.0


_BLOCKS = frozenset(
    {
        "address", "article", "blockquote", "body", "caption", "center", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup",
        "hr", "html", "legend", "li", "main", "menu", "ol", "p", "pre", "search", "section", "summary",
        "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
_SECTIONS = frozenset({"article", "main", "section"})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_CODE = frozenset({"code", "kbd", "samp", "tt"})
_STRONG = frozenset({"b", "strong"})
_EMPHASIS = frozenset({"cite", "dfn", "em", "i", "var"})
_STRUCK = frozenset({"del", "s", "strike"})
_LINK_SCHEMES = ("http:", "https:", "mailto:", "ftp:")
# Deeper than this, an element's text is kept without its structure: Python's stack stays small.
_MAX_DEPTH = 64
# How many elements are visited between two looks at the clock and the stop flag.
_CHECK_EVERY = 256

_SPACE = re.compile(r"\s+")
# Characters that would start Markdown syntax in prose; "_" only at a word's edge (temp_lo stays as it is).
_INLINE_SYNTAX = re.compile(r"[\\`*\[\]]|(?<![^\W_])_|_(?![^\W_])|<(?=[A-Za-z/!?])")
# A line of prose that Markdown would read as a heading, quote, list item or rule.
_LINE_SYNTAX = re.compile(r"(#{1,6}(?:\s|$)|>|[-+](?:\s|$)|\d{1,9}[.)](?:\s|$)|=+\s*$|-+\s*$)")
_LIST_ITEM = re.compile(r"(?:- |\d{1,10}\. )")
_LANGUAGE = re.compile(r"(?:language|lang)-([\w+#.-]+)")
_BACKTICKS = re.compile(r"`+")


def to_markdown(
    html: str,
    *,
    url: str | None = None,
    links: bool = True,
    tables: bool = True,
    limits: MarkdownLimits = MarkdownLimits(),
) -> str:
    """The main content of the HTML page ``html`` as Markdown; ``""`` when it has none.

    ``url`` (the page's address) turns relative links into absolute ones. A page past ``limits``
    raises ``ContentLimitError``.
    """
    return _convert(html, url=url, links=links, tables=tables, limits=limits, stop=None)


async def ato_markdown(
    html: str,
    *,
    url: str | None = None,
    links: bool = True,
    tables: bool = True,
    limits: MarkdownLimits = MarkdownLimits(),
) -> str:
    """``to_markdown`` in a worker thread, which stops within a few hundred elements when the caller is cancelled."""
    stop = threading.Event()
    try:
        return await anyio.to_thread.run_sync(
            lambda: _convert(html, url=url, links=links, tables=tables, limits=limits, stop=stop),
            abandon_on_cancel=True,
        )
    finally:
        stop.set()


def _convert(
    document: str, *, url: str | None, links: bool, tables: bool, limits: MarkdownLimits, stop: threading.Event | None
) -> str:
    if len(document) > limits.max_input:
        raise ContentLimitError(
            f"the page has {len(document):,} characters of HTML, past Markdown's max_input of {limits.max_input:,}: "
            "pass MarkdownLimits(max_input=...) to convert larger pages",
            url=url,
        )
    tree = html.parse(document)
    writer = _Writer(_resolver(tree, url, links), tables=tables, limits=limits, stop=stop, url=url)
    root, sectioned = html.main_content(tree)
    markdown = "\n\n".join(writer.blocks(root, 0, sectioned)).strip()
    writer.check_output(len(markdown))  # the pieces were counted; list and quote prefixes add to them
    return markdown


def _resolver(tree: Any, url: str | None, links: bool) -> Callable[[str], str | None] | None:
    """Resolves an ``href`` against the page (or its ``<base href>``), keeping its fragment; ``None``: no links."""
    if not links:
        return None
    if url is None:
        return lambda href: href.strip() or None
    base = url
    declared = tree.xpath("//base/@href")
    if declared:
        base = urls.join(url, str(declared[0])) or url
    join = urls.joiner(base)
    here = urls.strip_fragment(base)

    def resolve(href: str) -> str | None:
        path, hashmark, fragment = href.strip().partition("#")
        target = join(path) if path else here
        if target is None or not target.startswith(_LINK_SCHEMES):
            return None  # javascript:, data: and the like are not places to go
        return target + hashmark + fragment

    return resolve


def _tag(node: Any) -> str:
    """The lower-case tag of an element; "" for comments and processing instructions."""
    return node.tag.lower() if isinstance(node.tag, str) else ""


def _escape(text: str) -> str:
    return _INLINE_SYNTAX.sub(lambda match: "\\" + match.group(0), _SPACE.sub(" ", text))


def _wrap(mark: str, inner: str) -> str:
    """``inner`` between two ``mark``s, its edge spaces moved outside (``** x**`` is not bold)."""
    core = inner.strip()
    if not core:
        return inner
    lead = " " if inner[:1].isspace() else ""
    trail = " " if inner[-1:].isspace() else ""
    return f"{lead}{mark}{core}{mark}{trail}"


def _code_span(text: str) -> str:
    code = _SPACE.sub(" ", text).strip()
    if not code:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(code)), default=0) + 1)
    pad = " " if code.startswith("`") or code.endswith("`") else ""
    return f"{fence}{pad}{code}{pad}{fence}"


def _paragraph(text: str) -> str:
    """Inline Markdown as a paragraph: one space between words, no line Markdown would read as syntax."""
    lines = []
    for raw in text.split("\n"):
        line = re.sub(" {2,}", " ", raw).strip()
        if line:
            lines.append("\\" + line if _LINE_SYNTAX.match(line) else line)
    return "\n".join(lines)


def _fill_spanned(cells: list[str], spanned: list[int]) -> None:
    """Add an empty cell to ``cells`` for each column a rowspan from above still covers, at its end."""
    while len(cells) < len(spanned) and spanned[len(cells)]:
        spanned[len(cells)] -= 1
        cells.append("")


def _number(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


class _Writer:
    """Writes one page's Markdown, element by element, counting what it writes against the limits."""

    def __init__(
        self,
        resolve: Callable[[str], str | None] | None,
        *,
        tables: bool,
        limits: MarkdownLimits,
        stop: threading.Event | None,
        url: str | None,
    ) -> None:
        self.resolve = resolve
        self.tables = tables
        self.limits = limits
        self.stop = stop
        self.url = url
        self.written = 0
        self.visited = 0
        self.deadline = time.monotonic() + limits.max_seconds

    # -- limits --------------------------------------------------------------------------------

    def visit(self) -> None:
        """Count one element; look at the clock and the stop flag every few hundred."""
        self.visited += 1
        if self.visited % _CHECK_EVERY:
            return
        if self.stop is not None and self.stop.is_set():
            raise ContentLimitError("the Markdown conversion was stopped: its request was cancelled", url=self.url)
        if time.monotonic() > self.deadline:
            raise ContentLimitError(
                f"the page's Markdown took longer than max_seconds={self.limits.max_seconds}: "
                "pass MarkdownLimits(max_seconds=...) to give such pages more time",
                url=self.url,
            )

    def count(self, characters: int) -> None:
        self.written += characters
        self.check_output(self.written)

    def check_output(self, characters: int) -> None:
        if characters > self.limits.max_output:
            raise ContentLimitError(
                f"the page's Markdown passed max_output={self.limits.max_output:,} characters: "
                "pass MarkdownLimits(max_output=...) to keep longer pages",
                url=self.url,
            )

    def text(self, value: str) -> str:
        escaped = _escape(value)
        self.count(len(escaped))
        return escaped

    # -- blocks --------------------------------------------------------------------------------

    def blocks(self, node: Any, depth: int, sectioned: bool) -> list[str]:
        """The Markdown blocks of ``node``'s content: runs of inline content become paragraphs."""
        out: list[str] = []
        run: list[str] = []

        def flush() -> None:
            paragraph = _paragraph("".join(run))
            run.clear()
            if paragraph:
                out.append(paragraph)

        if node.text:
            run.append(self.text(node.text))
        for child in node:
            tag = _tag(child)
            if not tag or html.is_frame(child, tag, sectioned):
                pass
            elif tag in _BLOCKS:
                flush()
                out.extend(self.block(child, tag, depth + 1, sectioned or tag in _SECTIONS))
            else:
                run.append(self.inline(child, tag, depth + 1))
            if child.tail:
                run.append(self.text(child.tail))
        flush()
        return out

    def block(self, node: Any, tag: str, depth: int, sectioned: bool) -> list[str]:
        self.visit()
        if depth > _MAX_DEPTH:
            return [_paragraph(self.text(html.text(node)))]
        if tag in _HEADINGS:
            title = self.inline_content(node, depth).replace("\n", " ").strip()
            return [f"{'#' * _HEADINGS[tag]} {title}"] if title else []
        if tag in ("ul", "ol", "menu"):
            return self.items(node, tag == "ol", depth, sectioned)
        if tag == "pre":
            return [self.code_block(node)]
        if tag == "blockquote":
            quoted = "\n\n".join(self.blocks(node, depth, sectioned))
            return ["\n".join(f"> {line}" if line else ">" for line in quoted.split("\n"))] if quoted else []
        if tag == "table":
            return self.table(node, depth, sectioned) if self.tables else []
        if tag == "hr":
            return ["---"]
        return self.blocks(node, depth, sectioned)

    def items(self, node: Any, ordered: bool, depth: int, sectioned: bool) -> list[str]:
        """A list, tight unless an item holds more than one paragraph; nested lists indented under their item."""
        start = max(0, min(_number(node.get("start"), 1), 10**9))
        items: list[list[str]] = []
        for child in node:
            tag = _tag(child)
            if tag and not html.is_frame(child, tag, sectioned):
                self.visit()
                blocks = (
                    self.blocks(child, depth + 1, sectioned)
                    if tag == "li"
                    else self.block(child, tag, depth + 1, sectioned)
                )
                if blocks:
                    items.append(blocks)
        loose = any(not _LIST_ITEM.match(after) for item in items for _, after in itertools.pairwise(item))
        written = []
        for number, item in enumerate(items, start):
            marker = f"{number}. " if ordered else "- "
            body = item[0]
            for block in item[1:]:
                body += ("\n" if _LIST_ITEM.match(block) and not loose else "\n\n") + block
            first, *rest = body.split("\n")
            pad = " " * len(marker)
            written.append("\n".join([marker + first, *(pad + line if line else "" for line in rest)]))
        if not written:
            return []
        return ["\n\n".join(written) if loose else "\n".join(written)]

    def code_block(self, node: Any) -> str:
        """A ``<pre>`` as a fenced block, fenced longer than any run of backticks inside it."""
        lines = [line.rstrip() for line in node.text_content().split("\n")]
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        code = "\n".join(lines)
        fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(code)), default=0) + 1)
        language = ""
        for element in (node, *node.iterchildren("code")):
            found = _LANGUAGE.search(element.get("class") or "")
            if found:
                language = found.group(1)
                break
        self.count(len(code) + 2 * len(fence) + len(language) + 2)
        return f"{fence}{language}\n{code}\n{fence}"

    def table(self, node: Any, depth: int, sectioned: bool) -> list[str]:
        """A table as a GFM table: its first row is the header; spans become empty cells, bounded."""
        rows = []
        caption = []
        for child in node:
            tag = _tag(child)
            if tag == "tr":
                rows.append(child)
            elif tag in ("thead", "tbody", "tfoot"):
                rows.extend(row for row in child if _tag(row) == "tr")
            elif tag == "caption":
                caption = self.blocks(child, depth + 1, sectioned)
        columns = self.limits.max_columns
        spanned = [0] * columns  # rows still covered by a rowspan from above, per column
        grid: list[list[str]] = []
        for index, row in enumerate(rows):
            self.visit()
            cells: list[str] = []
            for cell in row:
                if _tag(cell) not in ("td", "th"):
                    continue
                _fill_spanned(cells, spanned)
                if len(cells) >= columns:
                    break
                self.visit()
                width = max(1, min(_number(cell.get("colspan"), 1), columns - len(cells)))
                height = _number(cell.get("rowspan"), 1)
                height = len(rows) - index if height <= 0 else min(height, len(rows) - index)
                for column in range(len(cells), len(cells) + width):
                    spanned[column] = height - 1
                cells.append(self.cell(cell, depth + 1, sectioned))
                cells.extend([""] * (width - 1))
            _fill_spanned(cells, spanned)
            grid.append(cells)
        width = max((len(cells) for cells in grid), default=0)
        if not width:
            return caption
        lines = []
        for number, cells in enumerate(grid):
            line = "| " + " | ".join(cells + [""] * (width - len(cells))) + " |"
            self.count(len(line))
            lines.append(line)
            if number == 0:
                lines.append("|" + "---|" * width)
        return [*caption, "\n".join(lines)]

    def cell(self, node: Any, depth: int, sectioned: bool) -> str:
        text = " ".join(self.blocks(node, depth, sectioned)).replace("\n", " ")
        return re.sub(" {2,}", " ", text).replace("|", "\\|").strip()

    # -- inline --------------------------------------------------------------------------------

    def inline_content(self, node: Any, depth: int) -> str:
        """``node``'s text and inline children as inline Markdown (block children are read inline)."""
        parts = [self.text(node.text)] if node.text else []
        for child in node:
            tag = _tag(child)
            if tag and not html.is_frame(child, tag, True):
                parts.append(self.inline(child, tag, depth + 1))
            if child.tail:
                parts.append(self.text(child.tail))
        return "".join(parts)

    def inline(self, node: Any, tag: str, depth: int) -> str:
        self.visit()
        if depth > _MAX_DEPTH:
            return self.text(" ".join(html.text(node).split("\n")))
        if tag == "br":
            return "\n"
        if tag in _CODE:
            span = _code_span(node.text_content())
            self.count(len(span))
            return span
        inner = self.inline_content(node, depth)
        if tag in _STRONG:
            return _wrap("**", inner)
        if tag in _EMPHASIS:
            return _wrap("*", inner)
        if tag in _STRUCK:
            return _wrap("~~", inner)
        if tag == "a":
            return self.link(node, inner)
        return f" {inner} " if tag in _BLOCKS else inner

    def link(self, node: Any, inner: str) -> str:
        text = inner.replace("\n", " ").strip()
        href = node.get("href")
        target = self.resolve(href) if self.resolve is not None and href and text else None
        if target is None:
            return inner
        target = target.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
        self.count(len(target) + 4)
        lead = " " if inner[:1].isspace() else ""
        trail = " " if inner[-1:].isspace() else ""
        return f"{lead}[{text}]({target}){trail}"


class MarkdownOf(Extractor[str]):
    """The response's main content as Markdown; ``links`` and ``tables`` may be left out, ``limits`` changed.

        async def handler(text: Annotated[str, MarkdownOf(links=False)]) -> None: ...

    A body that is not HTML is returned as its decoded text. A page past ``limits`` fails with
    ``ContentLimitError`` (category ``content_limit``).
    """

    def __init__(self, *, links: bool = True, tables: bool = True, limits: MarkdownLimits = MarkdownLimits()) -> None:
        self.links = links
        self.tables = tables
        self.limits = limits

    async def extract(self, ctx: Context) -> str:
        response = await ctx.response()
        content_type = response.content_type
        if content_type is not None and "html" not in content_type:
            return response.text
        return await ato_markdown(
            response.text, url=response.url, links=self.links, tables=self.tables, limits=self.limits
        )

    def key(self) -> Hashable:
        return (MarkdownOf, self.links, self.tables, self.limits)

    def __repr__(self) -> str:
        return f"MarkdownOf(links={self.links}, tables={self.tables}, limits={self.limits})"


#: The page's main content as Markdown (headings, code, lists, links and tables kept; boilerplate dropped).
Markdown = Annotated[str, MarkdownOf()]
