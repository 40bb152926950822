"""``Interceptor``: a tab's requests paused and answered: credentials kept on one origin, resource types
blocked, the page's redirects stopped for the crawl to admit, its later moves judged by the crawl,
and a proxy's challenge answered.

DevTools' ``Network.setExtraHTTPHeaders`` adds headers to every request a page makes, so a seed's
``Authorization`` or ``Cookie`` would reach every third-party script, image and ``fetch()``. Instead,
the requests for the page's own origin are paused (DevTools' ``Fetch`` domain, with a URL pattern
for that origin only) and continued with the headers added; requests of a blocked resource type are
paused and failed.

Every document request pauses too. While spire loads a page (``stopping_redirects``), the main
frame's request for a redirect's target (one with a ``redirectedRequestId``) is failed before it
is sent, and so is any later main-frame request for another URL (the page navigating by itself:
a refresh, a script, a form), its network id noted in ``stopped``: the backend answers the
redirect itself, and the crawl admits the hop like a link (robots.txt, strategy, dedup, the hop
limit) before it sends it as a page load of its own. The load's own document request, as it is
let through, tells the crawl it goes out now: the origin's rate spacing counts from that moment
(``session.pacing``).

After the load, while a handler holds the tab, every main-frame request for a URL other than the
page's (a script's timer, a refresh, a handler's click or form, and each redirect they meet) waits
in this thread for the crawl's verdict (``session.navigations``: the address policy, the strategy,
robots.txt) before it is sent; a refused one is aborted (a blocked one would commit Chromium's
error page in its place), so the tab stays on its page. Between loads the tab goes nowhere.

Through a proxy with credentials, every request pauses, so that the proxy's challenge
(``Fetch.authRequired``) is answered with them: Chromium takes none on ``--proxy-server``. A site's
own challenge is left to the browser.

chromedriver's DevTools bridge only sends commands and cannot answer the browser's events, so this
opens a DevTools connection of its own to the tab and serves ``Fetch.requestPaused`` in a thread of
its own for as long as the browser lives (``close`` ends it). That thread only answers DevTools: it
never touches the event loop or the WebDriver session.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from spire_core import url as urls
from spire_core.session.navigations import Admit

__all__ = ["Interceptor"]

#: How long a DevTools command may take to be acknowledged, in seconds.
_ACK_TIMEOUT = 10.0


def _unpaced() -> None:
    """No page load is told when its request goes out."""


def _stay(page: str, target: str) -> bool:
    """Between loads, the tab moves nowhere."""
    return False


class Interceptor:
    """Serves one tab's paused requests. Every method blocks; the reader runs in its own thread.

    ``target`` is the tab's DevTools target id, which is also its main frame's id. ``proxy_login``
    (user name, password) answers the proxy's authentication challenge.
    """

    def __init__(
        self,
        debugger_address: str,
        target: str,
        *,
        blocked_types: frozenset[str] = frozenset(),
        proxy_login: tuple[str, str] | None = None,
    ) -> None:
        import websocket

        self._socket = websocket.create_connection(
            f"ws://{debugger_address}/devtools/page/{target}", suppress_origin=True, timeout=_ACK_TIMEOUT
        )
        self._socket.settimeout(None)  # the reader waits for events as long as the browser lives
        self._frame = target
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._acks: dict[int, threading.Event] = {}
        self._blocked_types = blocked_types
        self._proxy_login = proxy_login
        # One value, replaced whole, so the reader never sees one page's origin with another's headers.
        self._target: tuple[str | None, dict[str, str]] = (None, {})
        self._stopping = False
        self._loading: str | None = None  # the URL of the page load's own document request, once let through
        self._sent: Callable[[], None] = _unpaced  # told when that request goes out
        self._moves: Admit = _stay  # asked, after the load, whether the tab may move on from its page
        self._challenged: set[str] = set()  # requests whose proxy challenge was answered once already
        #: The network ids of the page loads whose redirect was stopped (the reader adds, the loader takes).
        self.stopped: set[str] = set()
        self._thread = threading.Thread(target=self._serve, name="spire-interceptor", daemon=True)
        self._thread.start()
        self.set(None, {})

    def set(self, origin: str | None, headers: Mapping[str, str]) -> None:
        """From now on, requests for ``origin`` carry ``headers`` (and blocked types stay blocked)."""
        self._target = (origin, dict(headers))
        patterns: list[dict[str, str]] = [
            {"resourceType": kind, "requestStage": "Request"} for kind in sorted(self._blocked_types)
        ]
        patterns.append({"resourceType": "Document", "requestStage": "Request"})
        if origin is not None and headers:
            patterns.append({"urlPattern": f"{origin}/*", "requestStage": "Request"})
        if self._proxy_login is not None:
            patterns.append({"urlPattern": "*", "requestStage": "Request"})  # a challenge comes to paused requests only
        self._command("Fetch.enable", {"patterns": patterns, "handleAuthRequests": self._proxy_login is not None})

    @contextlib.contextmanager
    def stopping_redirects(self, sent: Callable[[], None], moves: Admit) -> Iterator[Collection[str]]:
        """Within: the main frame's redirects, and every navigation after the first document request,
        are stopped before their target is requested; ``sent()`` is called as that first request
        goes out. Yields ``stopped``, the network ids of those stopped. After it (until ``idle``),
        ``moves(page, target)`` says whether the tab may go on from its page to another URL."""
        self.stopped.clear()
        self._challenged.clear()
        self._loading = None
        self._sent = sent
        self._moves = _stay
        self._stopping = True
        try:
            yield self.stopped
        finally:
            self._stopping = False
            self._sent = _unpaced
            self._moves = moves

    def idle(self) -> None:
        """The tab's page is done with: from now until the next load, the tab moves nowhere."""
        self._moves = _stay

    def close(self) -> None:
        """End the connection and its thread; never raises."""
        with contextlib.suppress(Exception):  # a browser already gone has closed it
            self._socket.close()
        self._thread.join(timeout=_ACK_TIMEOUT)

    def _command(self, method: str, params: Mapping[str, Any]) -> None:
        done = threading.Event()
        number = self._send(method, params, done)
        if not done.wait(_ACK_TIMEOUT):
            self._acks.pop(number, None)
            raise ConnectionError(f"DevTools did not answer {method}: chrome not reachable")

    def _send(self, method: str, params: Mapping[str, Any], done: threading.Event | None = None) -> int:
        number = next(self._ids)
        if done is not None:
            self._acks[number] = done
        with self._send_lock:
            self._socket.send(json.dumps({"id": number, "method": method, "params": params}))
        return number

    def _serve(self) -> None:
        while True:
            try:
                message = json.loads(self._socket.recv())
            except Exception:  # closed, or the browser went away
                return
            if "id" in message:
                done = self._acks.pop(int(message["id"]), None)
                if done is not None:
                    done.set()
                continue
            method = message.get("method")
            try:
                if method == "Fetch.requestPaused":
                    self._answer(message.get("params", {}))
                elif method == "Fetch.authRequired":
                    self._authenticate(message.get("params", {}))
            except Exception:  # the browser went away mid-request; its page load fails on its own
                return

    def _answer(self, params: Mapping[str, Any]) -> None:
        request_id = params.get("requestId")
        if params.get("resourceType") in self._blocked_types:
            self._send("Fetch.failRequest", {"requestId": request_id, "errorReason": "BlockedByClient"})
            return
        if self._main_document(params):
            url = str(params.get("request", {}).get("url", ""))
            if self._stopping:
                # A redirect, or a navigation of the page's own (refresh, script, form) away from the
                # load's URL: neither is sent before the crawl admits it. The same URL again (Chromium
                # retries a failed load, a script reloads) was admitted already.
                if params.get("redirectedRequestId") or self._loading not in (None, url):
                    self.stopped.add(str(params.get("networkId")))
                    self._fail(request_id, "BlockedByClient")
                    return
                if self._loading is None:
                    self._loading = url
                    self._sent()  # the page's request leaves now: its origin's spacing counts from here
            elif url != self._loading:
                # After the load: the tab moves on only where the crawl would go from its page. An
                # aborted navigation commits nothing (a blocked one would show Chromium's error page).
                if not self._moves(self._loading or "", url):
                    self._fail(request_id, "Aborted")
                    return
                self._loading = url
        request = params.get("request", {})
        continued: dict[str, Any] = {"requestId": request_id}
        origin, headers = self._target
        if headers and origin is not None and urls.origin(str(request.get("url", ""))) == origin:
            given = {name.lower() for name in headers}
            sent = {name: value for name, value in request.get("headers", {}).items() if name.lower() not in given}
            sent.update(headers)
            continued["headers"] = [{"name": name, "value": str(value)} for name, value in sent.items()]
        self._send("Fetch.continueRequest", continued)

    def _fail(self, request_id: object, reason: str) -> None:
        self._send("Fetch.failRequest", {"requestId": request_id, "errorReason": reason})

    def _main_document(self, params: Mapping[str, Any]) -> bool:
        return params.get("resourceType") == "Document" and params.get("frameId") == self._frame

    def _authenticate(self, params: Mapping[str, Any]) -> None:
        """The proxy's challenge gets the proxy's login; a site's goes on as the browser would take it."""
        answer: dict[str, str] = {"response": "Default"}
        challenge = params.get("authChallenge", {})
        request_id = str(params.get("requestId"))
        if self._proxy_login is not None and challenge.get("source") == "Proxy":
            if request_id in self._challenged:  # the login was refused: the 407 is the answer
                self._challenged.discard(request_id)
                answer = {"response": "CancelAuth"}
            else:
                self._challenged.add(request_id)
                username, password = self._proxy_login
                answer = {"response": "ProvideCredentials", "username": username, "password": password}
        self._send("Fetch.continueWithAuth", {"requestId": request_id, "authChallengeResponse": answer})
