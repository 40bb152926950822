"""Reading HTML: the text a reader sees.

``text(document)`` returns one block per line: each heading, paragraph, list item and table cell
starts a new line, ``<br>`` breaks a line, runs of whitespace collapse to one space except inside
``<pre>``, entities are decoded, and the text of ``<head>``, ``<script>``, ``<style>``,
``<noscript>``, ``<template>``, ``<svg>`` and ``<textarea>`` is left out.
"""

from __future__ import annotations

import re
from typing import Any

import lxml.html
from lxml import etree
from parsel import Selector

__all__ = ["parse", "text"]

_SKIPPED = frozenset({"head", "script", "style", "noscript", "template", "svg", "textarea", "title"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog", "div",
        "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
        "h6", "header", "hr", "html", "legend", "li", "main", "nav", "ol", "p", "pre", "section",
        "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
_SPACE = re.compile(r"\s+")


def parse(document: str | bytes) -> Any:
    """An lxml tree for ``document``; an empty or unparsable one gives an empty ``<html>``."""
    try:
        return lxml.html.document_fromstring(document)
    except (etree.ParserError, ValueError):
        return lxml.html.document_fromstring("<html></html>")


def _root(document: str | bytes | Selector | Any) -> Any:
    if isinstance(document, Selector):
        return document.root
    if isinstance(document, str | bytes):
        return parse(document)
    return document


class _Lines:
    """Accumulates inline text into the current line; blocks end lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.parts: list[str] = []

    def add(self, value: str) -> None:
        self.parts.append(value)

    def add_pre(self, value: str) -> None:
        self.parts.append("\0" + value + "\0")

    def end_line(self) -> None:
        if not self.parts:
            return
        # Odd pieces came from <pre> and keep their whitespace; the others collapse it.
        pieces = [
            piece if index % 2 else _SPACE.sub(" ", piece)
            for index, piece in enumerate("".join(self.parts).split("\0"))
        ]
        pieces[0] = pieces[0].lstrip()
        pieces[-1] = pieces[-1].rstrip()
        line = "".join(pieces)
        if line.strip():
            self.lines.append(line)
        self.parts = []


def _walk(node: Any, lines: _Lines, in_pre: bool) -> None:
    tag = node.tag if isinstance(node.tag, str) else ""
    tag = tag.lower()
    if tag in _SKIPPED or not isinstance(node.tag, str):
        return
    block = tag in _BLOCKS
    pre = in_pre or tag == "pre"
    if block:
        lines.end_line()
    if node.text:
        (lines.add_pre if pre else lines.add)(node.text)
    for child in node:
        if isinstance(child.tag, str) and child.tag.lower() == "br":
            lines.end_line()
        else:
            _walk(child, lines, pre)
        if child.tail:
            (lines.add_pre if pre else lines.add)(child.tail)
    if block:
        lines.end_line()


def text(document: str | bytes | Selector | Any) -> str:
    """The readable text of an HTML document (a string, bytes, a parsel ``Selector`` or an lxml tree)."""
    lines = _Lines()
    _walk(_root(document), lines, False)
    lines.end_line()
    return "\n".join(lines.lines)
