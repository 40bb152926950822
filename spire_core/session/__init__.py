"""The settings every crawl of a session shares: timeouts, retries, proxies, identities, the request log, metrics.

``HttpBackend`` uses this package, so what sits on a backend lives elsewhere: ``download`` in
``spire_core.download``, ``Identities`` (a backend per identity) in ``spire_core.backend.identities``;
``spire_core`` exports both.
"""

from spire_core.session.identity import Identity
from spire_core.session.metrics import Metrics, MetricsSnapshot
from spire_core.session.proxies import ProxyAddress, ProxyPool, ProxyStats
from spire_core.session.record import RequestRecord
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts
from spire_core.session.trace import JsonFormatter

__all__ = [
    "Identity",
    "JsonFormatter",
    "Metrics",
    "MetricsSnapshot",
    "ProxyAddress",
    "ProxyPool",
    "ProxyStats",
    "RequestRecord",
    "RetryPolicy",
    "Timeouts",
]
