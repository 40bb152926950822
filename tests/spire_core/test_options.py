"""Options are checked when they are given: a ConfigError that names the value, never a later crash."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from spire import Dataset, HostLimits, MemoryFrontier, Router
from spire_core.errors import ConfigError
from spire_core.frontier.redis import RedisFrontier


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_in_flight": "8"}, "'8'"),
        ({"max_in_flight": 0}, "0"),
        ({"max_in_flight": 2.5}, "2.5"),
        ({"max_total_in_flight": True}, "True"),
        ({"per_second": -1.0}, "-1.0"),
        ({"per_second": math.inf}, "inf"),
        ({"per_second": math.nan}, "nan"),
        ({"per_second": "2"}, "'2'"),
        ({"default_pause": -5.0}, "-5.0"),
        ({"max_pause": timedelta(seconds=-1)}, "timedelta"),
        ({"max_pause": math.inf}, "inf"),
        ({"default_pause": "5"}, "'5'"),
        ({"pause_on": {"429"}}, "'429'"),
        ({"pause_on": {1000}}, "1000"),
        ({"pause_on": 429}, "429"),
        ({"hosts": {"a.example": {"max_in_flight": 1}}}, "max_in_flight"),
    ],
)
def test_host_limits_reject_bad_values_by_name(options: dict[str, Any], named: str) -> None:
    (option,) = options
    with pytest.raises(ConfigError, match=option) as caught:
        HostLimits(**options)
    assert named in str(caught.value)


def test_good_host_limits_are_kept() -> None:
    limits = HostLimits(max_in_flight=2, per_second=0.5, pause_on=[429], default_pause=timedelta(seconds=1))
    assert limits.pause_on == frozenset({429})


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda: MemoryFrontier().retry("3"), "'3'"),
        (lambda: MemoryFrontier().retry(0), "0"),
        (lambda: MemoryFrontier().retry(3, backoff=-1.0), "-1.0"),
        (lambda: MemoryFrontier().retry(3, max_backoff=math.inf), "inf"),
        (lambda: MemoryFrontier().retry(3, backoff="1"), "'1'"),
        (lambda: MemoryFrontier().retry(3, jitter=2.0), "2.0"),
        (lambda: MemoryFrontier().max_depth(-1), "-1"),
        (lambda: MemoryFrontier().max_depth("2"), "'2'"),
    ],
)
def test_frontier_facades_reject_bad_numbers_by_name(build: Any, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build()
    assert named in str(caught.value)


def test_a_dataset_of_something_not_a_model_is_refused_at_decoration() -> None:
    router = Router()
    with pytest.raises(ConfigError, match=r"Dataset\[<class 'int'>\]"):

        @router.default
        async def page(numbers: Dataset[int]) -> None:  # type: ignore[type-var]
            pass


class Item(BaseModel):
    name: str


def test_a_dataset_of_a_model_is_accepted() -> None:
    router = Router()

    @router.default
    async def page(items: Dataset[Item]) -> None:
        pass


def test_a_malformed_redis_url_is_a_config_error_without_its_password() -> None:
    for url in ("redis://[::1", "redis://user:hunter2@[::1"):
        with pytest.raises(ConfigError, match="not a Redis URL") as caught:
            RedisFrontier(url)
        assert "hunter2" not in str(caught.value)
    with pytest.raises(ConfigError, match="'8'"):
        RedisFrontier(per_origin_in_flight="8")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="lease_ttl"):
        RedisFrontier(lease_ttl=-1)


def test_the_fluent_retry_takes_a_policy_and_has_the_policys_jitter() -> None:
    from spire_core.frontier.facades import Retrying
    from spire_core.session.retry import RetryPolicy

    policy = RetryPolicy.transient(attempts=5)
    given = MemoryFrontier().retry(policy)
    assert isinstance(given, Retrying)
    assert given.policy is policy
    default = MemoryFrontier().retry(3)
    assert isinstance(default, Retrying)
    assert default.policy.jitter == RetryPolicy.transient().jitter  # one jitter default everywhere
