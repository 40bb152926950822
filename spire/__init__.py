"""spire: write crawls with a router, handlers and extractors. Re-exports what users need from spire_core.

What a crawl may never use (the browser and adaptive backends, the cache, Markdown, screenshots,
the SQLite stores and the site crawl) is imported on first use, so ``import spire`` stays fast.
"""

import typing as _typing

from spire.extract import (
    BodyStream,
    Directives,
    DirectivesFor,
    Error,
    Extractor,
    Json,
    RobotsRules,
    SeedInfo,
    Text,
    Url,
    resolve,
)
from spire.links import EnqueueResult, Links, Skipped
from spire.router import Next, Router
from spire_core import (
    BlockRules,
    ConfigError,
    Context,
    Crawler,
    CrawlPolicy,
    CrawlStats,
    CsvDataset,
    Dataset,
    DatasetError,
    Done,
    Fail,
    HostLimits,
    Identity,
    InvalidItem,
    JsonlDataset,
    MemoryDataset,
    MemoryFrontier,
    Metrics,
    Outcome,
    PauseTag,
    ProxyPool,
    Response,
    Retry,
    RetryPolicy,
    Seed,
    SkipReason,
    SkipTag,
    SpireError,
    Stop,
    Strategy,
    Timeouts,
    download,
)
from spire_core import lazy as _lazy

if _typing.TYPE_CHECKING:
    from spire.extract import Driver, Html
    from spire.markdown import Markdown, MarkdownOf, to_markdown
    from spire.screenshot import Screenshot
    from spire.site import CrawlError, CrawlPage, SiteCrawl, crawl
    from spire_core.backend.adaptive import AdaptiveBackend
    from spire_core.backend.browser.backend import BrowserBackend
    from spire_core.backend.browser.blocking import Blocking
    from spire_core.backend.browser.waits import PageWait
    from spire_core.backend.cache import CachingBackend
    from spire_core.backend.http import HttpBackend
    from spire_core.backend.identities import Identities
    from spire_core.dataset.sqlite import SqliteDataset
    from spire_core.frontier.sqlite import SqliteFrontier
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
            "CrawlError": "spire.site",
            "CrawlPage": "spire.site",
            "Driver": "spire.extract",
            "Html": "spire.extract",
            "Markdown": "spire.markdown",
            "MarkdownOf": "spire.markdown",
            "PageWait": "spire_core.backend.browser.waits",
            "Screenshot": "spire.screenshot",
            "SiteCrawl": "spire.site",
            "SqliteDataset": "spire_core.dataset.sqlite",
            "SqliteFrontier": "spire_core.frontier.sqlite",
            "crawl": "spire.site",
            "to_markdown": "spire.markdown",
        },
    )

#: The distribution's version, kept equal to ``pyproject.toml``'s by tests/test_imports.py (reading
#: it from the installed metadata would cost ``import importlib.metadata`` on every start).
__version__ = "0.1.0"

__all__ = [
    "AdaptiveBackend",
    "BlockRules",
    "Blocking",
    "BodyStream",
    "BrowserBackend",
    "CachingBackend",
    "ConfigError",
    "Context",
    "CrawlError",
    "CrawlPage",
    "CrawlPolicy",
    "CrawlStats",
    "Crawler",
    "CsvDataset",
    "Dataset",
    "DatasetError",
    "Directives",
    "DirectivesFor",
    "Done",
    "Driver",
    "EnqueueResult",
    "Error",
    "Extractor",
    "Fail",
    "HostLimits",
    "Html",
    "HttpBackend",
    "Identities",
    "Identity",
    "InvalidItem",
    "Json",
    "JsonlDataset",
    "Links",
    "Markdown",
    "MarkdownOf",
    "MemoryDataset",
    "MemoryFrontier",
    "Metrics",
    "Next",
    "Outcome",
    "PageWait",
    "PauseTag",
    "ProxyPool",
    "Response",
    "Retry",
    "RetryPolicy",
    "RobotsRules",
    "Router",
    "Screenshot",
    "Seed",
    "SeedInfo",
    "SiteCrawl",
    "SkipReason",
    "SkipTag",
    "Skipped",
    "SpireError",
    "SqliteDataset",
    "SqliteFrontier",
    "Stop",
    "Strategy",
    "Text",
    "Timeouts",
    "Url",
    "crawl",
    "download",
    "resolve",
    "to_markdown",
]
