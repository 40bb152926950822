"""spire_core: the crawl engine. Depend on it alone to write a backend, a frontier or a dataset.

The browser and adaptive backends, the cache and the SQLite stores are imported on first use
(``spire_core.lazy``): a crawl that never names them never pays for them.
"""

import typing as _typing

from spire_core import lazy as _lazy
from spire_core.admission import CrawlPolicy, SkipReason, Strategy
from spire_core.backend import Backend, FunctionBackend, Timeouts
from spire_core.blocks import BlockKind, BlockRules, BlockSignal
from spire_core.context import Context, Worker
from spire_core.crawler import Crawler
from spire_core.dataset import CsvDataset, Dataset, JsonlDataset, MemoryDataset, StoredDataset
from spire_core.download import download
from spire_core.errors import (
    Blocked,
    ConfigError,
    DatasetError,
    FetchError,
    HttpStatusError,
    InvalidItem,
    InvalidUrl,
    ShutDown,
    SpireError,
    WorkerCrashed,
)
from spire_core.frontier import (
    AvoidTraps,
    Dedup,
    DepthLimit,
    Frontier,
    Lease,
    MemoryFrontier,
    PushResult,
    Retrying,
    TagControl,
    Wait,
)
from spire_core.limits import HostGate, HostLimits
from spire_core.outcome import Done, Fail, Outcome, PauseTag, Retry, SkipTag, Stop
from spire_core.response import Response
from spire_core.robots import Purpose, Robots, RobotsCache
from spire_core.seed import Seed
from spire_core.session import Identity, Metrics, ProxyPool, RetryPolicy
from spire_core.stats import CrawlStats

if _typing.TYPE_CHECKING:
    from spire_core.backend.adaptive import AdaptiveBackend
    from spire_core.backend.browser.backend import BrowserBackend
    from spire_core.backend.browser.blocking import Blocking
    from spire_core.backend.browser.waits import PageWait
    from spire_core.backend.cache import CachingBackend
    from spire_core.backend.http import HttpBackend
    from spire_core.backend.identities import Identities
    from spire_core.dataset.sqlite import SqliteDataset
    from spire_core.frontier.sqlite import SqliteFrontier
    from spire_core.sitemaps import SitemapReader
else:
    __getattr__, __dir__ = _lazy.exports(
        __name__,
        {
            "AdaptiveBackend": "spire_core.backend.adaptive",
            "Blocking": "spire_core.backend.browser.blocking",
            "BrowserBackend": "spire_core.backend.browser.backend",
            "CachingBackend": "spire_core.backend.cache",
            "HttpBackend": "spire_core.backend.http",
            "Identities": "spire_core.backend.identities",
            "PageWait": "spire_core.backend.browser.waits",
            "SqliteDataset": "spire_core.dataset.sqlite",
            "SitemapReader": "spire_core.sitemaps",
            "SqliteFrontier": "spire_core.frontier.sqlite",
        },
    )

__all__ = [
    "AdaptiveBackend",
    "AvoidTraps",
    "Backend",
    "BlockKind",
    "BlockRules",
    "BlockSignal",
    "Blocked",
    "Blocking",
    "BrowserBackend",
    "CachingBackend",
    "ConfigError",
    "Context",
    "CrawlPolicy",
    "CrawlStats",
    "Crawler",
    "CsvDataset",
    "Dataset",
    "DatasetError",
    "Dedup",
    "DepthLimit",
    "Done",
    "Fail",
    "FetchError",
    "Frontier",
    "FunctionBackend",
    "HostGate",
    "HostLimits",
    "HttpBackend",
    "HttpStatusError",
    "Identities",
    "Identity",
    "InvalidItem",
    "InvalidUrl",
    "JsonlDataset",
    "Lease",
    "MemoryDataset",
    "MemoryFrontier",
    "Metrics",
    "Outcome",
    "PageWait",
    "PauseTag",
    "ProxyPool",
    "Purpose",
    "PushResult",
    "Response",
    "Retry",
    "RetryPolicy",
    "Retrying",
    "Robots",
    "RobotsCache",
    "Seed",
    "ShutDown",
    "SitemapReader",
    "SkipReason",
    "SkipTag",
    "SpireError",
    "SqliteDataset",
    "SqliteFrontier",
    "Stop",
    "StoredDataset",
    "Strategy",
    "TagControl",
    "Timeouts",
    "Wait",
    "Worker",
    "WorkerCrashed",
    "download",
]
