"""HttpBackend refuses options that cannot work when it is made, not on every seed afterwards."""

from __future__ import annotations

import pytest

from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError


@pytest.mark.parametrize("size", [-1, -(2**40), 1.5, "10MB", True])
def test_a_body_cap_that_is_not_a_byte_count_is_a_config_error(size: object) -> None:
    with pytest.raises(ConfigError, match="max_body_size"):
        HttpBackend(max_body_size=size)  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [0, -3])
def test_a_pool_of_no_connections_is_a_config_error(count: int) -> None:
    with pytest.raises(ConfigError, match="max_connections"):
        HttpBackend(max_connections=count)


def test_a_zero_body_cap_is_allowed() -> None:
    assert HttpBackend(max_body_size=0).max_body_size == 0
