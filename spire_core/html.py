"""Reading HTML: the text a reader sees, and the rules, canonical link and metadata a page carries.

``text(document)`` returns one block per line: each heading, paragraph, list item and table cell
starts a new line, ``<br>`` breaks a line, runs of whitespace collapse to one space except inside
``<pre>`` (which keeps its lines and indentation), entities are decoded, and the text of ``<head>``,
``<script>``, ``<style>``, ``<noscript>``, ``<template>``, ``<svg>`` and ``<textarea>`` is left out.

``main_text(document)`` is the page less its frame: the words of its title and main content (its
``<main>``, else its one ``<article>``, else its body), navigation, page header and footer, sidebars,
forms, scripts and hidden elements left out (``is_frame`` says what is frame, for the Markdown
converter too).

``Directives.read(document, headers, agent)`` reads ``<meta name="robots">``, a meta tag named for
the agent, and ``X-Robots-Tag`` headers; ``canonical``, ``meta``, ``metas`` and ``title`` read the head.

Every function takes a string, bytes (decoded by BOM, meta charset, then detection), a parsel
``Selector`` or an lxml tree from ``parse``; parse a page once when you read several things from it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spire_core.encoding import decode
from spire_core.nesting import MAX_DEPTH, flattened, reaches_max_depth
from spire_core.response import decode_body

if TYPE_CHECKING:
    from parsel import Selector

    #: What the functions here read: markup as text or bytes, a parsel ``Selector``, or a tree from ``parse``.
    Document = str | bytes | Selector | Any

# lxml and parsel are imported by the functions that parse (the first page a crawl reads): ``import
# spire`` leaves them alone, and ``Directives`` (a type handlers name) is here without them.

__all__ = [
    "MAX_DEPTH",
    "Directives",
    "canonical",
    "cut_at_max_depth",
    "hrefs",
    "is_frame",
    "main_content",
    "main_text",
    "meta",
    "metas",
    "parse",
    "text",
    "title",
]

#: Response headers: httpx ``Headers``, a mapping, or (name, value) pairs.
HeaderSource = Mapping[str, str] | Iterable[tuple[str, str]]

_SKIPPED = frozenset({"head", "script", "style", "noscript", "template", "svg", "textarea", "title"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog",
        "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
        "h4", "h5", "h6", "header", "hgroup", "hr", "html", "legend", "li", "main", "menu", "nav", "ol", "p",
        "pre", "search", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
_SPACE = re.compile(r"\s+")
_DIRECTIVE_SPLIT = re.compile(r"[\s,]+")
# X-Robots-Tag directives that take a value after a colon, so "name:" is not a product token.
_VALUED_DIRECTIVES = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})


def parse(document: str | bytes) -> Any:
    """An lxml tree for ``document``; an empty or unparsable one gives an empty ``<html>``.

    Bytes are decoded as a response body is (BOM, meta charset, then detection); the text is handed to
    lxml as UTF-8, so an XML declaration naming another encoding cannot garble it. Deep trees and
    huge text nodes are kept whole (libxml2's "huge" mode), as a browser keeps them; markup nested
    past libxml2's ``MAX_DEPTH`` is flattened (``nesting.flattened``), so none of its text is lost.
    """
    decoded = decode_body(document) if isinstance(document, bytes) else document
    tree = _parsed(decoded)
    if decoded.count("<") >= MAX_DEPTH - 3 and reaches_max_depth(tree):
        tree = _parsed(flattened(decoded, blocks=_BLOCKS))
    return tree


def _parsed(decoded: str) -> Any:
    """libxml2's tree for ``decoded``, in its "huge" mode (cut at ``MAX_DEPTH``)."""
    import lxml.html
    from lxml import etree

    try:
        return lxml.html.document_fromstring(
            decoded.encode("utf-8", "surrogatepass"), parser=lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)
        )
    except (etree.ParserError, ValueError):
        return lxml.html.document_fromstring("<html></html>")


def _root(document: Document, *, parser: Callable[[str | bytes], Any] = parse) -> Any:
    if isinstance(document, str | bytes):
        return parser(document)
    from parsel import Selector

    if isinstance(document, Selector):
        return document.root
    return document


def _tag(node: Any) -> str:
    """The lower-case tag of an element; "" for comments and processing instructions."""
    return node.tag.lower() if isinstance(node.tag, str) else ""


# -- text ----------------------------------------------------------------------------------------


class _Lines:
    """Accumulates inline text into the current line; blocks and ``<br>`` end lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.parts: list[tuple[str, bool]] = []

    def add(self, value: str, pre: bool) -> None:
        self.parts.append((value, pre))

    def end_line(self) -> None:
        if not self.parts:
            return
        out: list[str] = []
        for value, pre in self.parts:
            if pre:
                out.append(value)
                continue
            collapsed = _SPACE.sub(" ", value)
            # A space never starts a line nor doubles the one before it, across element boundaries too.
            if collapsed.startswith(" ") and (not out or out[-1].endswith((" ", "\n"))):
                collapsed = collapsed[1:]
            if collapsed:
                out.append(collapsed)
        self.parts = []
        # Text from <pre> may hold several lines; blank ones at the edges are not part of the block.
        rows = [row.rstrip() for row in "".join(out).split("\n")]
        while rows and not rows[0].strip():
            rows.pop(0)
        while rows and not rows[-1].strip():
            rows.pop()
        if rows:
            self.lines.append("\n".join(rows))


def _walk(root: Any, lines: _Lines) -> None:
    """Visit ``root``'s text in document order, with a stack of its own rather than recursion, so a
    page of thousands of nested (say, unclosed) elements is read like any other."""
    # Each entry: an element to open (with whether it is inside <pre>), or a block to close
    # (``None``) or a tail to add after an element (a string).
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, in_pre = stack.pop()
        if node is None:
            lines.end_line()
            continue
        if isinstance(node, str):
            lines.add(node, in_pre)
            continue
        tag = _tag(node)
        if not tag or tag in _SKIPPED:
            continue
        block = tag in _BLOCKS
        pre = in_pre or tag == "pre"
        if block:
            lines.end_line()
            stack.append((None, pre))
        if node.text:
            value = node.text
            # As in a browser, a newline straight after <pre> is not part of its content.
            if tag == "pre" and value.startswith("\n"):
                value = value[1:]
            lines.add(value, pre)
        for child in reversed(node):
            if child.tail:
                stack.append((child.tail, pre))
            if _tag(child) == "br":
                stack.append((None, pre))
            else:
                stack.append((child, pre))


def text(document: Document) -> str:
    """The readable text of an HTML document, one block per line."""
    lines = _Lines()
    _walk(_root(document), lines)
    lines.end_line()
    return "\n".join(lines.lines)


# -- main content: the page less its frame -----------------------------------------------------

# Never content: scripts, forms, media, and the landmarks of a page's frame.
_FRAME_TAGS = frozenset(
    {
        "aside", "audio", "button", "canvas", "dialog", "embed", "form", "head", "iframe", "img", "input",
        "map", "nav", "noscript", "object", "picture", "script", "select", "style", "svg", "template",
        "textarea", "title", "video",
    }
)  # fmt: skip
# ARIA roles of the frame around the content.
_FRAME_ROLES = frozenset(
    {"alertdialog", "banner", "complementary", "contentinfo", "dialog", "menu", "menubar", "navigation", "search"}
)
# Class and id tokens that mark the frame (the PostgreSQL manual's navheader and navfooter among them).
_FRAME_TOKEN = re.compile(
    r"(?:nav|navbar|navheader|navfooter|navigation|menu|sidebar|breadcrumbs?|footer|site-?(?:header|footer)"
    r"|skip-?link|cookie-?(?:banner|notice|consent)?|share|social|advert(?:isement)?|ads?)"
)


def main_content(document: Document) -> tuple[Any, bool]:
    """The element holding the page's main content, and whether it is a section (so its header is content).

    The page's ``<main>`` (or ``role="main"``), else its one ``<article>``, else its ``<body>``.
    """
    tree = _root(document)
    found = tree.xpath("//main | //*[@role='main']")
    if found:
        return found[0], True
    articles = tree.xpath("//article")
    if len(articles) == 1:
        return articles[0], True
    body = tree.find("body")
    return (body if body is not None else tree), False


def is_frame(node: Any, tag: str, sectioned: bool) -> bool:
    """Whether ``node`` (its lower-case ``tag`` given) is part of the page's frame (navigation, sidebars,
    banners, a page header or footer outside a section), not its content."""
    if tag in _FRAME_TAGS or (tag in _SECTION_FRAME and not sectioned):
        return True
    attributes = node.items()
    return bool(attributes) and _framed_by(attributes)


_SECTION_FRAME = frozenset({"header", "footer"})


def _framed_by(attributes: list[tuple[str, str]]) -> bool:
    """Whether an element with these attributes is frame: hidden, a frame's ARIA role, a class or id
    that names one, ``display:none``."""
    for name, value in attributes:
        if name == "class" or name == "id":
            if _frame_token(value):
                return True
        elif name == "hidden":
            return True
        elif name == "aria-hidden":
            if value == "true":
                return True
        elif name == "role":
            if value.strip().lower() in _FRAME_ROLES:
                return True
        elif name == "style" and "display:none" in value.replace(" ", "").lower():
            return True
    return False


@functools.lru_cache(maxsize=8192)
def _frame_token(value: str) -> bool:
    """Whether a class or id attribute names the frame (a site uses few of them: each is judged once)."""
    return any(_FRAME_TOKEN.fullmatch(token) for token in value.lower().split())


def main_text(document: Document) -> str:
    """The words of the page's title and main content, its frame left out, one space between them
    (what a recrawl compares).

    A date in the footer, a menu, a script's session token or a sidebar's "latest posts" change no
    word here; a changed sentence, price or heading of the content does.
    """
    root = _root(document)
    content, sectioned = main_content(root)
    parts = [title(root) or ""]
    add = parts.append
    frame = _FRAME_TAGS if sectioned else _FRAME_TAGS | _SECTION_FRAME
    stack: list[Any] = [content]
    while stack:  # a stack of its own: a page of thousands of nested elements is read like any other
        node = stack.pop()
        if node.__class__ is str:
            add(node)
            continue
        tag = node.tag
        if tag.__class__ is not str or tag in frame:
            continue  # a comment, or frame by its tag
        attributes = node.items()
        if attributes and _framed_by(attributes):
            continue
        if node.text:
            add(node.text)
        for child in reversed(node):
            if child.tail:
                stack.append(child.tail)
            stack.append(child)
    return _SPACE.sub(" ", " ".join(parts)).strip()


def hrefs(document: Document) -> list[str]:
    """The ``href`` of every ``<a>`` of the page, as written (spaces trimmed), in document order."""
    return [str(value).strip() for value in _root(document).xpath("//a/@href")]


# -- head: title, meta, canonical ----------------------------------------------------------------


def title(document: Document) -> str | None:
    """The page's ``<title>`` with whitespace collapsed, or ``None`` when it has none."""
    for element in _root(document).iter("title"):
        if any(_tag(ancestor) == "svg" for ancestor in element.iterancestors()):
            continue  # an SVG image's own title, not the page's
        return _SPACE.sub(" ", element.text_content()).strip()
    return None


def meta(document: Document, name: str) -> str | None:
    """The content of the first ``<meta>`` whose ``name`` (or ``property``) is ``name``, without case."""
    wanted = name.strip().lower()
    for element in _root(document).iter("meta"):
        key = element.get("name") or element.get("property") or ""
        content = element.get("content")
        if key.strip().lower() == wanted and content is not None:
            return str(content)
    return None


def metas(document: Document) -> dict[str, str]:
    """Every ``<meta>`` with a ``name`` (or ``property``) and a ``content``: lower-case name to content.

    The first tag of a name wins, as ``meta`` reads it.
    """
    found: dict[str, str] = {}
    for element in _root(document).iter("meta"):
        key = (element.get("name") or element.get("property") or "").strip().lower()
        content = element.get("content")
        if key and content is not None:
            found.setdefault(key, str(content))
    return found


def canonical(document: Document) -> str | None:
    """The href of the first ``<link rel="canonical">``, as written (join it with the page URL yourself)."""
    for element in _root(document).iter("link"):
        rel = (element.get("rel") or "").lower().split()
        href = (element.get("href") or "").strip()
        if "canonical" in rel and href:
            return href
    return None


# -- directives ----------------------------------------------------------------------------------


def _product_token(agent: str) -> str:
    """The product token of an agent name, lower case ("ExampleBot/1.2" gives "examplebot")."""
    return agent.strip().split("/", 1)[0].strip().lower()


def _header_values(headers: HeaderSource | None, name: str) -> list[str]:
    if headers is None:
        return []
    get_list = getattr(headers, "get_list", None)
    if get_list is not None:  # httpx.Headers keeps every value of a repeated header
        return list(get_list(name))
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return [value for key, value in pairs if key.lower() == name]


def _x_robots_tag(value: str, agent: str) -> list[str]:
    """The directives of one X-Robots-Tag value that apply to ``agent``.

    "examplebot: noindex, nofollow" names a product token: the directives after it apply to that
    agent alone, up to the next token.
    """
    found: list[str] = []
    target: str | None = None
    for raw in value.split(","):
        part = raw.strip()
        name, colon, rest = part.partition(":")
        if colon and name.strip().lower() not in _VALUED_DIRECTIVES:
            target = name.strip().lower()
            part = rest.strip()
        if part and (target is None or target == agent):
            found.append(part.lower())
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class Directives:
    """What a page's own robots rules allow: index it, follow its links, use it for AI.

    ``noindex`` clears ``index``, ``nofollow`` clears ``follow``, ``none`` clears both; ``noai`` clears
    ``ai`` and ``image_ai``, ``noimageai`` clears ``image_ai`` (a convention, not a standard). Other
    directives (noarchive, max-snippet...) are read and ignored; when directives disagree, the
    restrictive one wins.
    """

    index: bool = True
    follow: bool = True
    ai: bool = True
    image_ai: bool = True

    @classmethod
    def read(cls, document: Document | None, headers: HeaderSource | None = None, agent: str = "*") -> Directives:
        """The directives for ``agent`` from a page's meta tags and its ``X-Robots-Tag`` headers.

        A ``<meta>`` named ``robots``, or named for ``agent`` (without case), applies; so does an
        ``X-Robots-Tag`` value, unless it starts with another agent's product token and a colon.
        """
        token = _product_token(agent)
        names = {"robots"} if token in ("", "*") else {"robots", token}
        found: set[str] = set()
        if document is not None:
            for element in _root(document).iter("meta"):
                if (element.get("name") or "").strip().lower() in names:
                    content = (element.get("content") or "").lower()
                    found.update(part for part in _DIRECTIVE_SPLIT.split(content) if part)
        for value in _header_values(headers, "x-robots-tag"):
            found.update(_x_robots_tag(value, token))
        return cls(
            index="noindex" not in found and "none" not in found,
            follow="nofollow" not in found and "none" not in found,
            ai="noai" not in found,
            image_ai="noai" not in found and "noimageai" not in found,
        )


def selector(body: bytes, encoding: str, url: str) -> Selector:
    """A parsel ``Selector`` over a response body; an empty or blank body (a lone BOM too) gives an empty document.

    Markup nested past libxml2's ``MAX_DEPTH`` is flattened (``nesting.flattened``): its text is kept.
    """
    return read_page(body, encoding, url)[0]


def read_page(body: bytes, encoding: str, url: str) -> tuple[Selector, bool]:
    """``selector(body, encoding, url)``, and whether the markup nested past ``MAX_DEPTH`` (and was flattened)."""
    from parsel import Selector

    page = _selector(body, encoding, url)
    if not cut_at_max_depth(page, body):
        return page, False
    markup = decode(body, encoding).removeprefix("\ufeff")
    return Selector(text=flattened(markup, blocks=_BLOCKS), base_url=url, type="html"), True


def _selector(body: bytes, encoding: str, url: str) -> Selector:
    """libxml2's ``Selector`` over ``body``, as it parses it (cut at ``MAX_DEPTH``)."""
    from parsel import Selector

    if encoding == "utf-8" or (encoding == "windows-1252" and body.isascii()):
        # Most pages: lxml reads the bytes as they are (parsel deals with invalid sequences).
        body = body.removeprefix(b"\xef\xbb\xbf")
        if body and not body.isspace():  # stops at the first byte of markup, where strip() copies the page
            return Selector(body=body, encoding="utf-8", base_url=url, type="html")
    else:
        # Decoded here rather than by parsel, so every WHATWG encoding (x-user-defined too) reads.
        decoded = decode(body, encoding).removeprefix("\ufeff")
        if decoded.strip():
            return Selector(text=decoded, base_url=url, type="html")
    return Selector(text="<html></html>", base_url=url, type="html")


def cut_at_max_depth(document: Document, body: bytes | None = None) -> bool:
    """Whether ``document``'s tree reaches ``MAX_DEPTH``, where libxml2 stops parsing (so text may be lost).

    Markup (text or bytes) is read as libxml2 parses it, not flattened: whether ``parse`` and
    ``selector`` flatten it. A page nested exactly that deep, and no deeper, is reported too: the
    tree cannot tell them apart. ``body``, the markup it was parsed from, answers at once for nearly
    every page: a tree that deep needs that many tags (the parser adds at most ``html``, ``head`` and
    ``body`` of its own), and counting ``<`` in the bytes costs far less than walking the tree.
    """
    if body is not None and body.count(b"<") < MAX_DEPTH - 3:
        return False
    return reaches_max_depth(_root(document, parser=_libxml2))


def _libxml2(document: str | bytes) -> Any:
    return _parsed(decode_body(document) if isinstance(document, bytes) else document)
