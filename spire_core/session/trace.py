"""The request log: one line per request on logger ``spire.trace``, quiet unless enabled.

    import logging
    logging.basicConfig()
    logging.getLogger("spire.trace").setLevel(logging.INFO)

Each line carries the request's id, method, URL, redirects, status, HTTP version, attempts,
elapsed ms, tag, proxy (credentials redacted), identity and outcome (``ok`` or an error category):

    request id=12 method=GET url=http://127.0.0.1:8000/item/1 redirects=0 status=200 version=HTTP/1.1
    attempts=1 elapsed_ms=21 tag=listing proxy=- identity=- outcome=ok

A streamed body (``BodyStream``) logs its end as a second event with the same id:

    body id=12 url=http://127.0.0.1:8000/big.csv bytes=209715200 elapsed_ms=2210 outcome=ok

``JsonFormatter`` writes the same fields as one JSON object per line, for log shippers. ``Trace`` is
the seam the crawler calls once per request; it feeds the log and a ``Metrics``, and does no work
for a sink that is off.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from spire_core.errors import HttpStatusError, SpireError
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.metrics import Metrics
from spire_core.session.record import BodyEndRecord, RequestRecord
from spire_core.session.redact import redact, redact_text

if TYPE_CHECKING:
    from spire_core.ledger import LedgerSink

__all__ = ["JsonFormatter", "Trace", "logger"]

logger = logging.getLogger("spire.trace")
logger.addHandler(logging.NullHandler())


class JsonFormatter(logging.Formatter):
    """Formats ``spire.trace`` records as one JSON object a line (other records: message and level)."""

    def format(self, record: logging.LogRecord) -> str:
        request: RequestRecord | BodyEndRecord | None = getattr(record, "request", None)
        # time as epoch seconds: what log shippers parse fastest, and formatTime's strftime is slow
        payload: dict[str, Any] = {"time": round(record.created, 3), "level": record.levelname, "logger": record.name}
        if request is not None:
            payload.update(request.as_dict())
        else:
            payload["message"] = record.getMessage()
        return json.dumps(payload, separators=(",", ":"))


class Trace:
    """Builds a ``RequestRecord`` per request, for the request log and ``metrics``, only when one is on."""

    def __init__(self, metrics: Metrics | None = None, *, prefix: str = "", ledger: LedgerSink | None = None) -> None:
        self.metrics = metrics
        #: The crawl's ledger: each request is an attempt of the seed it was made for.
        self.ledger = ledger
        #: What leads each request id: a worker process's pid, so ids are unique across the crawl's processes.
        self.prefix = prefix
        self._ids = itertools.count(1)

    def fork(self, prefix: str, *, ledger: LedgerSink | None = None) -> Trace:
        """A trace for another process of the same crawl: the same metrics, ids led by ``prefix``, its
        requests noted on ``ledger`` (a worker's ``DeferredLedger``)."""
        return Trace(self.metrics, prefix=prefix, ledger=ledger)

    @property
    def enabled(self) -> bool:
        return self.metrics is not None or self.ledger is not None or logger.isEnabledFor(logging.INFO)

    def request(
        self,
        seed: Seed,
        *,
        response: Response | None,
        error: BaseException | None,
        elapsed: float,
        proxy: str | None = None,
        identity: str | None = None,
        hop: int = 0,
        size: int | None = None,
    ) -> str | None:
        """Record one request that ended with ``response`` or ``error`` after ``elapsed`` seconds.

        ``hop`` counts the redirects that led to it; ``size`` is the body's when no response holds it
        (a download). A response the crawl failed (a status, a block page) is the error's record too.
        Returns the request's id (``None`` when no sink is on), for a streamed body's end.
        """
        if not self.enabled:
            return None
        if error is not None:
            outcome = error.category if isinstance(error, SpireError) else "error"
            proxy = proxy or (error.proxy if isinstance(error, SpireError) else None)
            if isinstance(error, HttpStatusError) and error.response is not None:
                response = error.response  # a status the crawl treats as failure still had its response
        else:
            outcome = "ok"
        proxy = proxy or (response.proxy if response is not None else None)
        if identity is None and response is not None:
            identity = response.identity
        status = response.status if response is not None else None
        if error is not None and isinstance(error, HttpStatusError):
            status = error.status
        record = RequestRecord(
            id=f"{self.prefix}{next(self._ids)}",
            method=seed.method,
            url=redact_text(seed.url),  # a seed's own user:password stays out of logs, ledgers and reports
            redirects=hop,
            status=status,
            version=response.http_version if response is not None else None,
            attempts=seed.attempt + 1,
            elapsed_ms=round(elapsed * 1000),
            tag=seed.tag,
            proxy=redact(proxy),
            identity=identity,
            outcome=outcome,
            bytes=size if size is not None else len(response.body) if response is not None else 0,
        )
        if self.metrics is not None:
            self.metrics.record(record)
        if self.ledger is not None:
            self.ledger.attempt(seed, record, time.time() - elapsed)
        if logger.isEnabledFor(logging.INFO):
            # makeRecord + handle: what logger.info does, less its walk up the stack for the caller
            entry = logger.makeRecord(logger.name, logging.INFO, __file__, 0, record.line(), (), None)
            entry.request = record
            logger.handle(entry)
        return record.id

    def body_end(
        self,
        request_id: str | None,
        seed: Seed,
        *,
        error: BaseException | None,
        size: int,
        dropped: bool,
        elapsed: float,
    ) -> None:
        """Log the end of a streamed body as its own event, with its request's id (``body id=12 ...``)."""
        if request_id is None or not logger.isEnabledFor(logging.INFO):
            return
        if error is not None:
            outcome = error.category if isinstance(error, SpireError) else "error"
        else:
            outcome = "dropped" if dropped else "ok"
        record = BodyEndRecord(
            id=request_id, url=redact_text(seed.url), bytes=size, elapsed_ms=round(elapsed * 1000), outcome=outcome
        )
        entry = logger.makeRecord(logger.name, logging.INFO, __file__, 0, record.line(), (), None)
        entry.request = record
        logger.handle(entry)
