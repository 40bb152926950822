"""spire's pytest plugin (registered as the ``pytest11`` entry point ``spire``): the ``local_site`` fixture.

def test_home(local_site: LocalSite) -> None:
    local_site.page("/", "<title>Home</title>")
    assert Crawler(router).run([local_site.url("/")]).finished == 1
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spire.testing.site import LocalSite

__all__ = ["local_site"]


@pytest.fixture
def local_site() -> Iterator[LocalSite]:
    """A started ``LocalSite`` with no pages yet, stopped after the test."""
    with LocalSite() as site:
        yield site
