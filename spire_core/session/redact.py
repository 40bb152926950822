"""Redaction: URL credentials and secret headers hidden wherever spire prints, logs, raises or stores them.

    redact("http://user:secret@proxy:8080")        # 'http://user:***@proxy:8080'
    redact("http://TOKEN@proxy:8080")              # 'http://***@proxy:8080'
    without_userinfo("http://alice:pw@host/me")    # 'http://host/me'
    redact_headers([("Cookie", "sid=1"), ("Accept", "*/*")])   # [('Cookie', '[redacted]'), ('Accept', '*/*')]

``REDACTED_HEADERS`` is the list of header names whose values the cache and the WARC recorder write
as ``[redacted]``; extend it with a set union (``REDACTED_HEADERS | {"x-session"}``).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Collection, Iterable

__all__ = [
    "REDACTED",
    "REDACTED_HEADERS",
    "redact",
    "redact_headers",
    "redact_text",
    "userinfo",
    "without_userinfo",
]

#: The value a redacted header is written with.
REDACTED = "[redacted]"

#: Header names (lower case) whose values are credentials: written as ``[redacted]`` by default.
REDACTED_HEADERS: frozenset[str] = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "set-cookie2",
        "x-api-key",
        "api-key",
        "apikey",
        "x-auth-token",
        "x-access-token",
        "x-csrf-token",
        "x-xsrf-token",
        "x-amz-security-token",
        "x-goog-api-key",
        "private-token",
        "authentication-info",
        "proxy-authentication-info",
    }
)

# The userinfo of a URL runs from "//" to the last "@" before the host, so a raw "@" in a password
# stays inside it; it never holds "/", "?", "#" or white space.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")


def _hidden(match: re.Match[str]) -> str:
    user, colon, password = match["userinfo"].partition(":")
    # Only a user name beside a password is kept: alone (``TOKEN@``, ``APIKEY:@``) it is the secret.
    shown = f"{user}:***" if colon and user and password else "***"
    return f"{match['scheme']}{shown}@"


def redact(url: str | None) -> str | None:
    """``http://user:***@proxy:8080`` for ``http://user:secret@proxy:8080``; other URLs as they are."""
    if url is None:
        return None
    return redact_text(url)


def redact_text(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***`` (an error message, a log line).

    A password is hidden and its user name kept; a user name with no password (``http://TOKEN@proxy``,
    ``http://APIKEY:@proxy``) is a token, and is hidden.
    """
    if "@" not in text:
        return text  # the common case, on every request's log line: no URL in it has credentials
    return _USERINFO.sub(_hidden, text)


def userinfo(url: str) -> str:
    """The ``user:password`` part of ``url`` as written, ``""`` when it has none."""
    netloc = urllib.parse.urlsplit(url).netloc
    return netloc.rpartition("@")[0]


def without_userinfo(url: str) -> str:
    """``url`` with its user name and password dropped: ``http://host/me`` for ``http://alice:pw@host/me``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def redact_headers(
    headers: Iterable[tuple[str, str]], names: Collection[str] = REDACTED_HEADERS
) -> list[tuple[str, str]]:
    """``headers`` with the value of each one named in ``names`` (lower case) replaced by ``[redacted]``."""
    return [(name, REDACTED if name.lower() in names else value) for name, value in headers]
