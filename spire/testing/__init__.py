"""The kit for testing crawls: a local site, a backend made of a function, and a pytest fixture.

    from spire.testing import LocalSite

    def test_the_crawl_finds_every_book() -> None:
        with LocalSite({"/": "<a href='/b'>b</a>", "/b": "<h1>B</h1>"}) as site:
            stats = Crawler(router).run([site.url("/")])
        assert stats.finished == 2

With spire-crawl installed, pytest also gets the ``local_site`` fixture (``spire.testing.plugin``).
"""

from spire.testing.site import LocalSite, Reply, Request, RouteFn
from spire_core.backend.base import FunctionBackend

__all__ = ["FunctionBackend", "LocalSite", "Reply", "Request", "RouteFn"]
