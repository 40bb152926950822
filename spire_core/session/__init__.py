"""The settings every crawl of a session shares: timeouts, retries, proxies, downloads, the request log, metrics."""

from spire_core.session.download import Downloader, download
from spire_core.session.metrics import Metrics, MetricsSnapshot
from spire_core.session.proxies import ProxyAddress, ProxyPool, ProxyStats
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts
from spire_core.session.trace import JsonFormatter, RequestRecord

__all__ = [
    "Downloader",
    "JsonFormatter",
    "Metrics",
    "MetricsSnapshot",
    "ProxyAddress",
    "ProxyPool",
    "ProxyStats",
    "RequestRecord",
    "RetryPolicy",
    "Timeouts",
    "download",
]
