"""``Seed``: a request waiting to be crawled."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from spire_core import url as urls

if TYPE_CHECKING:
    from spire_core.revisit import Revisit

__all__ = ["Seed"]


@dataclasses.dataclass(frozen=True, slots=True)
class Seed:
    """A request waiting to be crawled: immutable, cheap, and keyed for deduplication.

    ``unique_key`` defaults to the canonical URL (fragment dropped, query sorted, percent-encoding
    and host case normalised); other methods add the method and a hash of the body. The request
    itself goes out exactly as written.

        Seed("https://shop.example/books?page=2", tag="listing")
    """

    url: str
    tag: str | None = None
    method: str = "GET"
    depth: int = 0
    priority: int = 0
    attempt: int = 0
    user_data: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    body: bytes | None = None
    unique_key: str = ""
    #: The strategy of the link that queued it (``same_origin``...), when not the crawl's: its
    #: redirect hops are judged by it. ``None``: the crawl policy's.
    strategy: str | None = None
    #: The page's state from the crawl before, on a recrawl's revisit of it (``spire_core.recrawl``):
    #: the request path sends its validators as a conditional request.
    revisit: Revisit | None = None
    #: ``scheme://host[:port]`` of the URL, worked out once from the same parse as the unique key.
    origin: str = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.method != self.method.upper():
            object.__setattr__(self, "method", self.method.upper())
        if self.unique_key:
            object.__setattr__(self, "origin", urls.origin(self.url))
            return
        parts = urls.split(self.url)
        canonical = parts.canonical
        if canonical == self.url:
            canonical = self.url  # one string for both: most URLs are already canonical
        object.__setattr__(self, "origin", parts.origin)
        object.__setattr__(self, "unique_key", _key(canonical, self.method, self.body))

    def child(self, url: str, **changes: Any) -> Seed:
        """A seed for ``url`` one link deeper than this one, with a fresh unique key."""
        changes.setdefault("depth", self.depth + 1)
        return Seed(url, **changes)

    def with_headers(self, headers: Mapping[str, str]) -> Seed:
        """This seed with ``headers`` added to its own (its own win), the same unique key."""
        if not headers:
            return self
        return dataclasses.replace(self, headers={**headers, **(self.headers or {})}, unique_key=self.unique_key)

    def retried(self) -> Seed:
        """This seed on its next attempt."""
        return dataclasses.replace(self, attempt=self.attempt + 1)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its fields, origin included: a seed crosses to a worker process unparsed."""
        return (_restored, tuple(getattr(self, name) for name in _FIELDS))


#: Every field of ``Seed``, ``origin`` included, in the order ``__reduce__`` gives them.
_FIELDS = (
    "url",
    "tag",
    "method",
    "depth",
    "priority",
    "attempt",
    "user_data",
    "headers",
    "body",
    "unique_key",
    "strategy",
    "revisit",
    "origin",
)


def _restored(*values: Any) -> Seed:
    """The ``Seed`` with these field values, as pickled (no parse, no check: they were made by one)."""
    seed = object.__new__(Seed)
    for name, value in zip(_FIELDS, values, strict=True):
        object.__setattr__(seed, name, value)
    return seed


def fingerprint(url: str, method: str = "GET", body: bytes | None = None) -> str:
    """The default unique key: the canonical URL, plus the method and a body hash when not a GET."""
    return _key(urls.canonicalize(url), method.upper(), body)


def _key(canonical: str, method: str, body: bytes | None) -> str:
    if method == "GET" and not body:
        return canonical
    digest = hashlib.sha256(body or b"").hexdigest()[:16]
    return f"{method} {canonical} {digest}"
