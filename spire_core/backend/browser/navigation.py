"""What the main document's response was, read from Chrome's performance log (DevTools events).

WebDriver reports neither the status nor the headers of a page, so every driver logs DevTools'
``Network`` events and a ``Navigation`` reads them back: the main frame's document requests in
order, each with its redirects, its response and its failure. The same entries tell ``Traffic``
whether the page's network has gone quiet.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spire_core import errors

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = [
    "HTML_TYPES",
    "Document",
    "LoadFailed",
    "Navigation",
    "Traffic",
    "performance_log",
    "response_headers",
    "worth_waiting_on",
]

HTML_TYPES = frozenset({"", "text/html", "application/xhtml+xml"})
#: Headers that describe the bytes on the wire, not the body a browser response carries.
_WIRE_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})
#: Chromium's verdict on a 4xx/5xx whose body is empty: it shows its own error page instead. The
#: response itself arrived, so its status is the truth, and its body is empty.
_EMPTY_ERROR_PAGE = "net::ERR_HTTP_RESPONSE_CODE_FAILURE"


class LoadFailed(Exception):
    """The main document failed to load; the message holds Chrome's ``net::ERR_...`` code."""


@dataclasses.dataclass
class Document:
    """One main-frame document request, read from the performance log."""

    request_id: str
    urls: list[str]
    response: dict[str, Any] | None = None
    failure: str | None = None
    #: The last redirect's response (status, headers), when the request was redirected.
    redirect: dict[str, Any] | None = None
    #: That redirect's headers as they came (DevTools leaves ``Set-Cookie`` out of ``redirect``'s).
    redirect_headers: dict[str, str] | None = None

    @property
    def empty(self) -> bool:
        """Whether the server sent an error status with no body (Chromium then shows its own page)."""
        return self.failure == _EMPTY_ERROR_PAGE and self.response is not None


def _messages(entries: Iterable[Mapping[str, Any]], needle: str) -> Iterable[tuple[str, dict[str, Any]]]:
    for entry in entries:
        raw = entry.get("message", "")
        if needle not in raw:  # cheap: skip the JSON parse of entries that cannot matter
            continue
        message = json.loads(raw)["message"]
        yield str(message.get("method")), message.get("params", {})


class Navigation:
    """The main-frame documents a navigation requested, in order, from performance-log entries."""

    def __init__(self, frame: str) -> None:
        self.frame = frame
        self.documents: dict[str, Document] = {}

    def read(self, entries: Iterable[Mapping[str, Any]]) -> None:
        for method, params in _messages(entries, '"Document"'):
            request_id = params.get("requestId")
            document = self.documents.get(str(request_id))
            if method == "Network.requestWillBeSent":
                if params.get("type") != "Document" or params.get("frameId") != self.frame:
                    continue
                url = params["request"]["url"]
                if document is None:
                    self.documents[str(request_id)] = Document(str(request_id), [url])
                else:
                    document.urls.append(url)  # a redirect: the same request, its next URL
                    document.redirect = params.get("redirectResponse")
            elif document is None:
                continue
            elif method == "Network.responseReceived":
                document.response = params["response"]
            elif method == "Network.loadingFailed":
                document.failure = params.get("errorText") or "net::ERR_FAILED"
        for _, params in _messages(entries, '"Network.responseReceivedExtraInfo"'):
            document = self.documents.get(str(params.get("requestId")))
            if document is not None and 300 <= int(params.get("statusCode", 0)) < 400:
                document.redirect_headers = params.get("headers")

    def stopped(self, stopped: Collection[str]) -> tuple[str, Document] | None:
        """The URL the tab was leaving and the document it stopped at, when the last document request
        was stopped (its network id in ``stopped``): a redirect, or the page's own navigation."""
        documents = list(self.documents.values())
        if not documents or documents[-1].request_id not in stopped:
            return None
        last = documents[-1]
        if last.redirect is not None:
            return last.urls[-2], last
        if len(documents) > 1:
            return documents[-2].urls[-1], last
        return None

    def final(self, url: str) -> tuple[Document, tuple[str, ...]]:
        """The document the tab ended on, and every URL that led to it, first first."""
        documents = list(self.documents.values())
        if not documents:
            raise errors.FetchError("Chromium loaded no document for the page", url=url)
        last = documents[-1]
        if last.failure is not None and not last.empty:
            raise LoadFailed(last.failure)
        hops = [hop for document in documents[:-1] for hop in document.urls] + last.urls[:-1]
        return last, tuple(hops)


class Traffic:
    """Whether a page's network is quiet: no request in flight, and none started or ended lately.

    Fed the same performance-log entries as ``Navigation``, with the time they were read at.
    """

    def __init__(self, now: float) -> None:
        self.in_flight: set[str] = set()
        self.last_activity = now

    def read(self, entries: Iterable[Mapping[str, Any]], now: float) -> None:
        for method, params in _messages(entries, '"Network.'):
            request_id = str(params.get("requestId"))
            if method == "Network.requestWillBeSent":
                self.in_flight.add(request_id)
            elif method in ("Network.loadingFinished", "Network.loadingFailed"):
                self.in_flight.discard(request_id)
            else:
                continue
            self.last_activity = now

    def quiet_for(self, now: float) -> float:
        """Seconds since the last request started or ended, or 0 while one is in flight."""
        return 0.0 if self.in_flight else now - self.last_activity


def performance_log(driver: WebDriver) -> list[dict[str, Any]]:
    """Blocking: the performance-log entries since the last read (reading empties the log)."""
    entries: list[dict[str, Any]] = driver.get_log("performance")  # type: ignore[no-untyped-call]
    return entries


def response_headers(raw: Mapping[str, str]) -> list[tuple[str, str]]:
    """DevTools joins repeated headers with newlines; split them back into separate values."""
    return [
        (name, value)
        for name, joined in raw.items()
        if name.lower() not in _WIRE_HEADERS
        for value in str(joined).split("\n")
    ]


def worth_waiting_on(response: Mapping[str, Any] | None) -> bool:
    """Whether a document is a page worth waiting on: HTML, and not an error status."""
    if response is None:
        return False
    return int(response.get("status", 0)) < 400 and str(response.get("mimeType", "")).lower() in HTML_TYPES
