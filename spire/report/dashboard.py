"""``Dashboard``: the crawl report served live while the crawl runs, on aiohttp's web server.

    async with Dashboard(ledger, settings={"start": url}, sampler=sampler) as dashboard:
        print("dashboard:", dashboard.url)   # http://127.0.0.1:8765/
        await crawler.arun(seeds)

It binds 127.0.0.1 unless given another ``host``: the page shows every URL the crawl met, so it
stays on this machine unless asked. It answers only requests addressed to it (a Host of
127.0.0.1, localhost or [::1] and its port, or the host it was given) and, when a browser sends an
Origin, from its own page: anything else gets 421 or 403, so a site the user opens cannot rebind a
name of its own to 127.0.0.1 and read the crawl's URLs. ``/`` is the report page (``live``: it polls), ``/data.json``
the report's data now, ``/entries.json?fate=&reason=&origin=&change=&offset=`` one page of the URL table.
A page open polls every ``refresh`` seconds (2). The data are read again at most once a ``refresh``, and never
more often than keeps their reading under 5% of the event loop (``LOOP_SHARE``): a huge ledger
whose summary takes 200 ms is read every 4 s, however many pages are open. Polls that come while
the data are being read wait for that read and share it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Self

import anyio
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from spire.report.data import PAGE_SIZE, entries_page, report_data
from spire.report.page import page_html
from spire.report.sampler import Sampler
from spire_core.errors import ConfigError
from spire_core.ledger import Fate, LedgerView
from spire_core.revisit import Change

__all__ = ["LOOPBACK", "Dashboard"]

#: The address the dashboard binds unless told another: this machine only.
LOOPBACK = "127.0.0.1"

#: At most this share of the crawl's event loop goes to reading the dashboard's data.
LOOP_SHARE = 0.05

#: The largest offset a ledger's SQL takes (SQLite's largest integer); past it no row is, anyway.
_MAX_OFFSET = 2**63 - 1

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_server_log = logging.getLogger("aiohttp.server")


class _RequestLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server log, where a client's malformed request (a 100 KB line) is one line, not a traceback."""

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):  # the client's mistake: aiohttp answers it 400
            self.warning(f"{msg}: %s", *args, exc_info.message)
        else:
            self.error(msg, *args, exc_info=exc_info, **kwargs)


class Dashboard:
    """Serves ``view``'s report on ``host:port`` (``port=0``: any free one) until closed."""

    def __init__(
        self,
        view: LedgerView,
        *,
        settings: Mapping[str, str],
        title: str = "spire crawl",
        host: str = LOOPBACK,
        port: int = 0,
        sampler: Sampler | None = None,
        refresh: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.view = view
        self.settings = dict(settings)
        self.title = title
        self.host = host
        self.port = port
        self.sampler = sampler
        self.refresh = refresh
        self.clock = clock
        self._runner: web.AppRunner | None = None
        self._latest: dict[str, Any] | None = None
        self._latest_json: str | None = None
        self._fresh_until = 0.0
        #: Set when the read in flight ends (``None``: none is): the polls that come meanwhile wait for it.
        self._reading: anyio.Event | None = None

    @property
    def url(self) -> str:
        """The page's address, once started."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def data(self) -> dict[str, Any]:
        """The report's data, as ``/data.json`` serves it: read again once they are ``refresh`` old, or
        later when reading them takes longer than ``LOOP_SHARE`` of that. Callers that come while a read
        is in flight get what it reads (one read, however many pages poll)."""
        while self._reading is not None:
            await self._reading.wait()
        if self._latest is not None and self.clock() < self._fresh_until:
            return self._latest
        reading = self._reading = anyio.Event()
        try:
            started = self.clock()
            self._latest, self._latest_json = await self._read(), None
            took = self.clock() - started
            self._fresh_until = started + max(self.refresh, took / LOOP_SHARE)
            return self._latest
        finally:
            self._reading = None
            reading.set()

    async def _read(self) -> dict[str, Any]:
        sampler = self.sampler
        return await report_data(
            self.view,
            settings=self.settings,
            title=self.title,
            in_flight=sampler.in_flight if sampler is not None else (),
            pauses=sampler.pause_texts() if sampler is not None else None,
            live=True,
        )

    def _names(self) -> frozenset[str]:
        """The ``host:port`` a request to this dashboard names in its Host header."""
        hosts = {"127.0.0.1", "localhost", "[::1]", f"[{self.host}]" if ":" in self.host else self.host}
        return frozenset(f"{host}:{self.port}".lower() for host in hosts)

    @web.middleware
    async def _addressed_here(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        """Refuse a request whose Host or Origin is another site's (DNS rebinding, a cross-site fetch)."""
        names = self._names()
        if request.headers.get("Host", "").lower() not in names:
            raise web.HTTPMisdirectedRequest(text=f"this dashboard answers only to {', '.join(sorted(names))}\n")
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in {f"http://{name}" for name in names}:
            raise web.HTTPForbidden(text="this dashboard answers only its own page, not another site's\n")
        return await handler(request)

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(text=page_html(await self.data(), refresh=self.refresh), content_type="text/html")

    async def _data(self, request: web.Request) -> web.Response:
        latest = await self.data()
        if self._latest_json is None:  # encoded once per read, however many pages poll
            self._latest_json = json.dumps(latest, separators=(",", ":"))
        return web.Response(text=self._latest_json, content_type="application/json")

    async def _entries(self, request: web.Request) -> web.Response:
        query = request.query
        try:
            fate = Fate(query["fate"]) if query.get("fate") else None
            change = Change(query["change"]) if query.get("change") else None
            offset = int(query.get("offset", "0"))
            if offset > _MAX_OFFSET:
                raise ValueError(offset)
        except ValueError:
            raise web.HTTPBadRequest(
                text="fate is kept, skipped, failed or queued; change new, changed, unchanged, gone or failed; "
                "offset a number.\n"
            ) from None
        rows = await entries_page(
            self.view,
            fate=fate,
            reason=query.get("reason") or None,
            origin=query.get("origin") or None,
            change=change,
            offset=max(0, offset),
            limit=PAGE_SIZE,
        )
        return web.json_response(rows)

    async def start(self) -> None:
        """Start serving; ``ConfigError`` naming the address when it cannot be bound."""
        app = web.Application(middlewares=[self._addressed_here])
        app.router.add_get("/", self._page)
        app.router.add_get("/data.json", self._data)
        app.router.add_get("/entries.json", self._entries)
        runner = web.AppRunner(app, access_log=None, logger=_RequestLog(_server_log))
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"the dashboard cannot listen on {self.host}:{self.port} ({exc.strerror or exc}): "
                "give another port (--dashboard PORT, or 0 for any free one)"
            ) from None
        self._runner = runner
        if self.port == 0:
            self.port = int(runner.addresses[0][1])  # the free port the system gave

    async def aclose(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
