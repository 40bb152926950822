"""Markup nested past libxml2's depth limit: telling a tree it cut short, and flattening the markup so its text is kept.

    if reaches_max_depth(tree):
        tree = parse(flattened(markup))   # every word of the page, nested no deeper than FLAT_DEPTH

libxml2 builds a tree at most ``MAX_DEPTH`` elements deep, even in its "huge" mode: markup nested
deeper stops the parse there, and the text below that depth and everything after it never reaches
the tree. ``flattened`` rewrites such markup so that no element opens below ``FLAT_DEPTH``: the
start and end tags deeper than that are left out (a block's become line breaks, so its words stay
apart) and everything else (text, entities, comments, scripts, the tags above that depth) is kept as
it was, so the page's text is whole and only its structure down there is lost.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from html.parser import HTMLParser  # the standard library's tokenizer: no depth limit of its own
from typing import Any

__all__ = ["FLAT_DEPTH", "MAX_DEPTH", "flattened", "reaches_max_depth"]

#: How deep libxml2 builds a tree, even in its "huge" mode. Markup nested deeper stops the parse
#: there: the text below that depth, and everything after it, never reaches the tree.
MAX_DEPTH = 2048
#: How deep ``flattened`` lets elements nest: half the parser's limit, so the elements a parser adds
#: of its own (``html``, ``body``, ``tbody``...) and the ends HTML leaves implied cannot reach it.
FLAT_DEPTH = MAX_DEPTH // 2

# Elements that never hold anything: they open no level.
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param", "source",
     "track", "wbr"}
)  # fmt: skip


@functools.cache
def _at_max_depth() -> Any:
    """The XPath that tells a tree reaching ``MAX_DEPTH``, compiled once: one step a level, linear in the elements."""
    from lxml import etree

    return etree.XPath("boolean(/" + "/*" * MAX_DEPTH + ")")


def reaches_max_depth(tree: Any) -> bool:
    """Whether the lxml ``tree`` (an element or a tree) reaches ``MAX_DEPTH``, where libxml2 stops parsing.

    A page nested exactly that deep, and no deeper, is reported too: the tree cannot tell them apart.
    """
    return bool(_at_max_depth()(tree.getroottree()))


def flattened(markup: str, *, blocks: Collection[str] = ()) -> str:
    """``markup`` with every element deeper than ``FLAT_DEPTH`` unwrapped: its tags left out, its content
    kept; the tags of ``blocks`` (names, lower case) left out become ``<br>``, which opens no level."""
    flattener = _Flattener(frozenset(blocks))
    flattener.feed(markup)
    flattener.close()
    return "".join(flattener.out)


class _Flattener(HTMLParser):
    """Copies markup through, leaving out the start and end tags of elements opened below ``FLAT_DEPTH``.

    Depth is counted as HTML's open elements are, an end tag closing every element opened after the
    one it names; an end tag HTML leaves implied (``</p>``, ``</li>``) is not seen, so the count errs
    deep, which only flattens a little more than needed.
    """

    def __init__(self, blocks: frozenset[str]) -> None:
        super().__init__(convert_charrefs=False)  # entities are copied as written
        self.out: list[str] = []
        self._blocks = blocks
        #: The open elements, each with whether its tags were kept.
        self._open: list[tuple[str, bool]] = []
        #: How many of each name are open: an end tag that names none closes nothing.
        self._names: dict[str, int] = {}
        self._kept = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}>"
        if tag in _VOID:
            self.out.append(raw)
            return
        kept = self._kept < FLAT_DEPTH
        self._open.append((tag, kept))
        self._names[tag] = self._names.get(tag, 0) + 1
        if kept:
            self._kept += 1
            self.out.append(raw)
        elif tag in self._blocks:
            self.out.append("<br>")

    # ``<div/>`` opens a div in HTML: the slash means nothing but on a void element.
    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        if not self._names.get(tag):
            self.out.append(f"</{tag}>")  # closes nothing open: as it was, for the parser to ignore
            return
        while True:
            name, kept = self._open.pop()
            self._names[name] -= 1
            self._kept -= kept
            if name == tag:
                break
        if kept:
            self.out.append(f"</{tag}>")
        elif tag in self._blocks:
            self.out.append("<br>")

    def handle_data(self, data: str) -> None:
        self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        self.out.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.out.append(f"&#{name};")

    def handle_comment(self, data: str) -> None:
        self.out.append(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self.out.append(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self.out.append(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self.out.append(f"<![{data}]>")
