"""Selenium's and Chromium's failures as spire errors: the one place they are translated.

Chrome's network errors (``net::ERR_...``) map like their httpx counterparts; a page that does not
finish loading is a timeout; a browser that crashed, hung or went away is a connect error (transient,
so the seed is retried on a fresh driver).
"""

from __future__ import annotations

import re

from spire_core import errors

__all__ = ["NET_ERROR", "breaks_driver", "first_line", "lost", "translate"]

#: Chrome's network error code in a message, such as ``net::ERR_CONNECTION_REFUSED``.
NET_ERROR = re.compile(r"net::(ERR_[A-Z0-9_]+)")
_NET_ERRORS: tuple[tuple[tuple[str, ...], type[errors.SpireError]], ...] = (
    (("ERR_TIMED_OUT", "ERR_CONNECTION_TIMED_OUT"), errors.FetchTimeout),
    (("ERR_CERT_", "ERR_SSL_", "ERR_BAD_SSL_"), errors.TlsError),
    (("ERR_PROXY_", "ERR_TUNNEL_"), errors.ProxyError),
    (("ERR_TOO_MANY_REDIRECTS",), errors.TooManyRedirects),
    (("ERR_CONTENT_DECODING_FAILED",), errors.DecodeError),
    (("ERR_INVALID_URL", "ERR_UNSAFE_PORT", "ERR_DISALLOWED_URL_SCHEME", "ERR_UNKNOWN_URL_SCHEME"), errors.InvalidUrl),
    (
        (
            "ERR_CONNECTION_",
            "ERR_NAME_",
            "ERR_ADDRESS_",
            "ERR_EMPTY_RESPONSE",
            "ERR_NETWORK_",
            "ERR_INTERNET_DISCONNECTED",
            "ERR_SOCKET_",
            "ERR_HTTP2_",
            "ERR_INVALID_HTTP_RESPONSE",
            "ERR_CONTENT_LENGTH_MISMATCH",
            "ERR_INCOMPLETE_CHUNKED_ENCODING",
        ),
        errors.ConnectError,
    ),
)
#: What WebDriver says when the browser or its tab is gone.
_LOST = (
    "invalid session id",
    "chrome not reachable",
    "disconnected",
    "tab crashed",
    "session deleted",
    "no such window",
    "target window already closed",
    "target frame detached",
)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message: Selenium appends a stack trace of the driver."""
    text = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    return str(text).strip().splitlines()[0]


def _net_error(code: str) -> type[errors.SpireError] | None:
    for prefixes, kind in _NET_ERRORS:
        if code.startswith(prefixes):
            return kind
    return None


def translate(exc: BaseException, url: str | None) -> errors.SpireError:
    """The spire error for a Selenium (or driver connection) exception."""
    from selenium.common.exceptions import NoSuchDriverException, SessionNotCreatedException, TimeoutException

    if isinstance(exc, errors.SpireError):
        return exc
    message = first_line(exc)
    net = NET_ERROR.search(str(exc))
    if net is not None:
        kind = _net_error(net.group(1)) or errors.FetchError
        return kind(f"Chromium failed to load the page: {net.group(0)}", url=url)
    if isinstance(exc, TimeoutException | TimeoutError):
        return errors.FetchTimeout(f"Chromium timed out: {message}", url=url)
    if isinstance(exc, SessionNotCreatedException | NoSuchDriverException):
        return errors.ConfigError(f"Chromium did not start: {message}", url=url)
    if lost(exc):
        return errors.ConnectError(f"lost the browser: {message}", url=url)
    return errors.FetchError(message, url=url)


def lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the browser or its tab is gone (crashed, quit, unreachable)."""
    from urllib3.exceptions import HTTPError as DriverConnectionError

    return isinstance(exc, DriverConnectionError | OSError) or any(gone in first_line(exc) for gone in _LOST)


def breaks_driver(exc: BaseException) -> bool:
    """Whether a driver whose page load raised ``exc`` should be discarded rather than reused.

    Spire's own errors (a failed wait, a network error reported by the page) leave the driver sound;
    anything else, a page-load timeout included, may have left its renderer hung.
    """
    return not isinstance(exc, errors.SpireError) and NET_ERROR.search(str(exc)) is None
