"""Shared fixtures: local sites on 127.0.0.1, started and stopped by the tests themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sites.server import Site
from tests.sites.sockets import refusing_port


@pytest.fixture
def site() -> Iterator[Site]:
    with Site() as running:
        yield running


@pytest.fixture
def other_site() -> Iterator[Site]:
    with Site() as running:
        yield running


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses every connection for the whole test (no other test can take it)."""
    with refusing_port() as port:
        yield port
