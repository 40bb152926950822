"""``redact``: a URL with its password hidden, for every place a proxy address is printed, logged or raised."""

from __future__ import annotations

import re

__all__ = ["redact", "redact_text"]

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:@/\s]*):(?P<password>[^@/\s]*)@")


def redact(url: str | None) -> str | None:
    """``http://user:***@proxy:8080`` for ``http://user:secret@proxy:8080``; other URLs as they are."""
    if url is None:
        return None
    return redact_text(url)


def redact_text(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***`` (an error message, a log line)."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
