"""Sniffing a body without a Content-Type: does it start like HTML?

``sniffs_as_html(body)`` applies the HTML rows of the WHATWG MIME Sniffing Standard's table for a
resource of unknown type: after leading whitespace, the body starts with one of a few tags (compared
without ASCII case) or a comment opener, followed by a tag-terminating byte (a space or ``>``).

    sniffs_as_html(b"  <!DOCTYPE html>\\n<html>...")   # True
    sniffs_as_html(b"<html5>")                       # False: "5" does not end the tag

``is_html(content_type, body)`` is the one answer to "is this response an HTML page": its media type
is one of ``HTML_TYPES``, or it has none and its body sniffs as HTML.
"""

from __future__ import annotations

__all__ = ["HTML_TYPES", "is_html", "sniffs_as_html"]

# Only the resource header counts: the standard reads at most this many bytes.
_HEADER_SIZE = 1445
_WHITESPACE = b"\t\n\x0c\r "
_TAG_END = frozenset(b" >")
# Compared against the upper-cased body, which leaves "<!--" as it is.
_PATTERNS = tuple(
    pattern.encode("ascii")
    for pattern in (
        "<!DOCTYPE HTML", "<HTML", "<HEAD", "<SCRIPT", "<IFRAME", "<H1", "<DIV", "<FONT", "<TABLE", "<A",
        "<STYLE", "<TITLE", "<B", "<BODY", "<BR", "<P", "<!--",
    )
)  # fmt: skip


#: The media types of an HTML page.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def is_html(content_type: str | None, body: bytes) -> bool:
    """Whether a response is an HTML page: its media type says so, or, with none, its body starts like one."""
    if content_type is None:
        return sniffs_as_html(body)
    return content_type in HTML_TYPES


def sniffs_as_html(body: bytes) -> bool:
    """Whether ``body`` starts like HTML by the MIME Sniffing Standard's HTML patterns."""
    # bytes.upper() changes ASCII letters only, as the standard's 0xDF masks do.
    header = body[:_HEADER_SIZE].lstrip(_WHITESPACE).upper()
    for pattern in _PATTERNS:
        if header.startswith(pattern) and len(header) > len(pattern) and header[len(pattern)] in _TAG_END:
            return True
    return False
