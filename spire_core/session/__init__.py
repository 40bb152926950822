"""The settings every crawl of a session shares: timeouts, retries, proxies, identities, the request log, metrics.

``download`` (``spire_core.session.download``) and ``Identities`` (``spire_core.session.identities``)
sit on ``HttpBackend``, which uses this package, so they are imported from their modules (and from
``spire_core``), not from here.
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
