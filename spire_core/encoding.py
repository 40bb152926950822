"""Which text encoding a body is in, as a browser decides it (WHATWG Encoding and HTML standards).

``sniff_encoding(body, content_type)`` runs the HTML standard's encoding sniffing: a byte order mark,
then the ``charset`` of the Content-Type, then the *prescan* of the first 1024 bytes for a
``<meta charset>`` or ``<meta http-equiv="Content-Type" content="...; charset=...">``, then detection.
``decode(body, encoding)`` decodes with an encoding it returned, never failing.

    sniff_encoding(b'<meta charset="latin1">caf\\xe9', None)   # "windows-1252", as browsers read it
    decode(b"caf\\xe9", "windows-1252")                        # "café"

Labels are read with the WHATWG Encoding Standard's table (the ``webencodings`` package holds it):
``latin1``, ``ISO-8859-1`` and ``us-ascii`` all mean windows-1252, ``gb2312`` means GBK, and a name
the table does not list (``hex``, ``base64``, ``rot13``, ``utf-7``, ``x-nonsense``) is no encoding
at all, so it is ignored rather than handed to Python's codec registry, which would accept the
binary codecs and fail on them. A meta naming UTF-16 means UTF-8, as the standard says: a page that
a byte-oriented prescan could read is not UTF-16.

Past the prescan, a body that is valid UTF-8 is UTF-8; anything else goes to charset-normalizer,
which prefers windows-1252 (the web's default) among equally likely answers.
"""

from __future__ import annotations

import re
from functools import lru_cache

import webencodings

__all__ = ["decode", "lookup", "prescan", "sniff_encoding"]

#: How much of a body the prescan reads, as the HTML standard has it.
PRESCAN_BYTES = 1024
_DETECT_BYTES = 65536
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xfe\xff", "utf-16be"),
    (b"\xff\xfe", "utf-16le"),
)
_BOM_STARTS = tuple(bom for bom, _ in _BOMS)
_WHITESPACE = b"\t\n\x0c\r "
_HEADER_CHARSET = re.compile(r"""charset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s;,"']+))""", re.IGNORECASE)
_META_CONTENT_CHARSET = re.compile(rb"charset", re.IGNORECASE)
_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@lru_cache(maxsize=256)
def lookup(label: str) -> str | None:
    """The WHATWG name of the encoding ``label`` names (without case or surrounding whitespace);
    ``None`` when the Encoding Standard lists no such label."""
    encoding = webencodings.lookup(label)
    return None if encoding is None else str(encoding.name)


def decode(body: bytes, encoding: str) -> str:
    """``body`` decoded with ``encoding`` (a name ``sniff_encoding`` returned, or any WHATWG label),
    bad bytes replaced; an unknown name decodes as windows-1252."""
    found = webencodings.lookup(encoding) or webencodings.lookup("windows-1252")
    if found.name == "replacement":
        # The standard's replacement decoder: one U+FFFD for the whole body (its labels name
        # encodings, such as ISO-2022-KR, that smuggle markup past filters).
        return "\ufffd" if body else ""
    text: str = found.codec_info.decode(body, "replace")[0]
    return text


def sniff_encoding(body: bytes, content_type: str | None = None) -> tuple[str, int]:
    """The WHATWG name of the encoding of ``body``, and the length of its byte order mark (to skip)."""
    if body.startswith(_BOM_STARTS):  # one test for most bodies, which have none
        for bom, name in _BOMS:
            if body.startswith(bom):
                return name, len(bom)
    declared = _header_charset(content_type) if content_type else None
    if declared is None:
        declared = prescan(body[:PRESCAN_BYTES])
    if declared is not None:
        return declared, 0
    return _detect(body), 0


@lru_cache(maxsize=256)  # a site sends the same few Content-Type values on every page
def _header_charset(content_type: str) -> str | None:
    match = _HEADER_CHARSET.search(content_type)
    if match is None:
        return None
    return lookup(next(group for group in match.groups() if group is not None))


def _detect(body: bytes) -> str:
    """Detection past the prescan: UTF-8 when the body is valid UTF-8, else charset-normalizer's guess."""
    if body.isascii():
        return "windows-1252"  # the standard's default; any ASCII-compatible encoding reads it the same
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return "utf-8"
    import charset_normalizer  # only a body that is neither ASCII nor UTF-8, nor labelled, needs it

    results = list(charset_normalizer.from_bytes(body[:_DETECT_BYTES]))
    if not results:
        return "windows-1252"
    best = results[0]
    tied = {m.encoding for m in results if (m.chaos, m.coherence) == (best.chaos, best.coherence)}
    if "cp1252" in tied:
        return "windows-1252"
    return _from_python(best.encoding) or "windows-1252"


# Python codec names (as charset-normalizer reports them) whose WHATWG label is not the same name.
_PYTHON_NAMES = {
    "cp932": "shift_jis", "shift_jis_2004": "shift_jis", "shift_jisx0213": "shift_jis", "cp949": "euc-kr",
    "euc_jis_2004": "euc-jp", "euc_jisx0213": "euc-jp", "iso2022_jp": "iso-2022-jp", "big5hkscs": "big5",
    "utf_16": "utf-16le", "utf_16_le": "utf-16le", "utf_16_be": "utf-16be", "latin_1": "windows-1252",
    "cp874": "windows-874", "mac_cyrillic": "x-mac-cyrillic", "mac_roman": "macintosh",
}  # fmt: skip


def _from_python(name: str) -> str | None:
    """The WHATWG name for a Python codec name; ``None`` for a codec the web does not use (EBCDIC...)."""
    return lookup(_PYTHON_NAMES.get(name, name)) or lookup(name.replace("_", "-"))


# -- the prescan (HTML standard, "prescan a byte stream to determine its encoding") ---------------


class _End(Exception):
    """The prescan ran past the bytes it may read."""


# Each loop of the standard's algorithm that reads byte after byte is one regular expression here,
# matched at the position: the same bytes consumed, at C speed. A match that reaches the end of the
# data is the algorithm reading past it (``_End``).
_SPACES_OR_SLASHES = re.compile(rb"[\t\n\x0c\r /]*")
_SPACES = re.compile(rb"[\t\n\x0c\r ]*")
#: The rest of an attribute name, after its first byte (which may be anything, even "=").
_NAME_REST = re.compile(rb"[^\t\n\x0c\r />=]*")
#: A tag name, or an unquoted attribute value: up to whitespace or ">".
_TO_SPACE_OR_END = re.compile(rb"[^\t\n\x0c\r >]*")
#: The rest of a tag that is not a ``<meta>``, from its name to its ``>``, as "get an attribute" reads
#: it attribute after attribute (possessive, so it never backtracks into a reading the standard would
#: not make). An attribute ending in an "=" without a value it can read (an unclosed quote) does not
#: match: the byte-by-byte scanner takes those, and the tags the data cuts short.
_TAG_REST = (
    rb"""[^\t\n\x0c\r >]*+"""  # the tag name
    rb"""(?:[\t\n\x0c\r /]*+[^\t\n\x0c\r />][^\t\n\x0c\r />=]*+"""  # an attribute name
    rb"""(?:[\t\n\x0c\r ]*+=[\t\n\x0c\r ]*+(?:"[^"]*+"|'[^']*+'|[^\t\n\x0c\r >"'][^\t\n\x0c\r >]*+|(?=>)))?+"""
    rb"""(?![\t\n\x0c\r ]*+=))*+"""
    rb"""[\t\n\x0c\r /]*+>"""
)
_START_TAG = rb"<(?![Mm][Ee][Tt][Aa][\t\n\x0c\r /])(?=[A-Za-z])" + _TAG_REST  # any start tag but a meta
_END_TAG = rb"</(?=[A-Za-z])" + _TAG_REST
#: What the prescan passes over, as a run read in one go: text, comments, tags other than ``<meta>``,
#: ``<!...>``, ``</...>`` and ``<?...>``, and a ``<`` that starts none of them. Each alternative
#: starts differently, so one that fails (an unclosed comment) lets no other take its bytes: the run
#: stops there, and the step-by-step scan reads what follows (a ``<meta>``, or data cut short).
_PASSED_OVER = re.compile(
    rb"(?:[^<]++"
    rb"|<!(?=--)(?s:.)*?-->"  # the "-->" may share the dashes of "<!--": "<!-->" is a whole comment
    rb"|" + _START_TAG + rb"|" + _END_TAG + rb"|<(?:!(?!--)|/(?![A-Za-z])|\?)[^>]*+>"
    rb"|<(?![A-Za-z!/?]))*+"
)
_SLASH, _GT, _EQUALS, _DOUBLE, _SINGLE = b"/>=\"'"


class _Scanner:
    """A position in the bytes being prescanned; reading past the end raises ``_End``."""

    __slots__ = ("data", "position")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def skip_past(self, marker: bytes) -> None:
        found = self.data.find(marker, self.position)
        if found < 0:
            raise _End
        self.position = found + len(marker)

    def skip_to_tag_end(self) -> None:
        """Past the tag name, to the whitespace or ``>`` that ends it."""
        self.position = self._end_of(_TO_SPACE_OR_END, self.position)

    def _end_of(self, pattern: re.Pattern[bytes], position: int) -> int:
        """Where ``pattern``'s run from ``position`` stops; ``_End`` when the data ends first."""
        end = pattern.match(self.data, position).end()  # type: ignore[union-attr]  # a * pattern always matches
        if end >= len(self.data):
            raise _End
        return end

    def attribute(self) -> tuple[bytes, bytes] | None:
        """The standard's "get an attribute": the next (name, value), lower-cased; ``None`` at ``>``."""
        data = self.data
        start = self._end_of(_SPACES_OR_SLASHES, self.position)
        if data[start] == _GT:
            self.position = start
            return None
        end = self._end_of(_NAME_REST, start + 1)  # the first byte is the name's, even an "="
        name = data[start:end].lower()
        after = data[end]
        if after in (_SLASH, _GT):
            self.position = end
            return name, b""
        if after != _EQUALS:  # whitespace: an "=" may still follow it
            end = self._end_of(_SPACES, end)
            if data[end] != _EQUALS:
                self.position = end
                return name, b""
        return name, self._value(end + 1)

    def _value(self, position: int) -> bytes:
        data = self.data
        start = self._end_of(_SPACES, position)
        quote = data[start]
        if quote in (_DOUBLE, _SINGLE):
            close = data.find(b'"' if quote == _DOUBLE else b"'", start + 1)
            if close < 0:
                raise _End
            self.position = close + 1
            return data[start + 1 : close].lower()
        if quote == _GT:
            self.position = start
            return b""
        end = self._end_of(_TO_SPACE_OR_END, start)
        self.position = end
        return data[start:end].lower()


def prescan(data: bytes) -> str | None:
    """The encoding a ``<meta>`` in ``data`` declares, read as the HTML standard's prescan reads it.

    Comments are skipped, so is every other tag with its attributes (a ``>`` inside a quoted value
    does not end it); the first ``<meta>`` that declares a known encoding wins, and one that declares
    an unknown label is passed over. ``None`` when no meta declares one.
    """
    if b"<meta" not in data.lower():
        return None  # a page without a meta: nothing to read
    scanner = _Scanner(data)
    try:
        while True:
            at = _PASSED_OVER.match(data, scanner.position).end()  # type: ignore[union-attr]  # *+ always matches
            if at >= len(data):
                return None
            scanner.position = at
            found = _prescan_step(scanner)
            if found is not None:
                return found
    except _End:
        pass
    return None


def _prescan_step(scanner: _Scanner) -> str | None:
    data, at = scanner.data, scanner.position
    if data.startswith(b"<!--", at):
        # "<!-->" is a whole comment: the dashes of "-->" may be those of "<!--".
        scanner.position = at + 2
        scanner.skip_past(b"-->")
        return None
    if data[at : at + 5].lower() == b"<meta" and at + 5 < len(data) and data[at + 5] in b"\t\n\x0c\r /":
        scanner.position = at + 5
        return _meta(scanner)
    if data.startswith(b"<", at) and (
        (at + 1 < len(data) and data[at + 1] in _LETTERS)
        or (data.startswith(b"</", at) and at + 2 < len(data) and data[at + 2] in _LETTERS)
    ):
        scanner.position = at + (2 if data[at + 1] == ord("/") else 1)
        scanner.skip_to_tag_end()
        while scanner.attribute() is not None:
            pass
        scanner.position += 1
        return None
    if data.startswith((b"<!", b"</", b"<?"), at):
        scanner.position = at + 2
        scanner.skip_past(b">")
        return None
    scanner.position = at + 1
    return None


def _meta(scanner: _Scanner) -> str | None:
    """The attributes of one ``<meta>``; the encoding it declares, when it declares a known one."""
    seen: set[bytes] = set()
    got_pragma = False
    need_pragma: bool | None = None
    charset: str | None = None
    while (attribute := scanner.attribute()) is not None:
        name, value = attribute
        if name in seen:
            continue
        seen.add(name)
        if name == b"http-equiv":
            got_pragma = got_pragma or value == b"content-type"
        elif name == b"content":
            declared = _content_charset(value)
            if declared is not None and charset is None:
                charset, need_pragma = declared, True
        elif name == b"charset":
            charset, need_pragma = lookup(value.decode("latin-1")) or "", False
    scanner.position += 1
    if need_pragma is None or (need_pragma and not got_pragma) or not charset:
        return None
    if charset in ("utf-16be", "utf-16le"):
        return "utf-8"
    if charset == "x-user-defined":
        return "windows-1252"
    return charset


def _content_charset(value: bytes) -> str | None:
    """The standard's "extracting a character encoding from a meta element" for a ``content`` value."""
    position = 0
    while True:
        match = _META_CONTENT_CHARSET.search(value, position)
        if match is None:
            return None
        position = match.end()
        while position < len(value) and value[position] in _WHITESPACE:
            position += 1
        if position < len(value) and value[position] == ord("="):
            break
    position += 1
    while position < len(value) and value[position] in _WHITESPACE:
        position += 1
    if position >= len(value):
        return None
    quote = value[position]
    if quote in b"\"'":
        end = value.find(bytes([quote]), position + 1)
        return None if end < 0 else lookup(value[position + 1 : end].decode("latin-1"))
    end = position
    while end < len(value) and value[end] not in b"\t\n\x0c\r ;":
        end += 1
    return lookup(value[position:end].decode("latin-1"))
