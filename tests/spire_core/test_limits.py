"""Host limits: overrides, Retry-After, and the gate's admission rules."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anyio
import pytest

from spire_core.errors import ConfigError
from spire_core.limits import HostGate, HostLimits, parse_retry_after


def test_overrides_match_exact_hosts_then_the_longest_wildcard() -> None:
    limits = HostLimits(
        max_in_flight=4,
        per_second=2.0,
        hosts={
            "api.shop.example": HostLimits(max_in_flight=1, per_second=0.5),
            "*.cdn.example": HostLimits(max_in_flight=16),
            "*.eu.cdn.example": HostLimits(max_in_flight=8),
            "127.0.0.1:8001": HostLimits(max_in_flight=2),
        },
    )
    assert limits.for_host("api.shop.example") == (1, 0.5)
    assert limits.for_host("API.shop.example.") == (1, 0.5)
    assert limits.for_host("img.cdn.example") == (16, None)  # an override leaves out what it does not set
    assert limits.for_host("img.eu.cdn.example") == (8, None)
    assert limits.for_host("www.shop.example") == (4, 2.0)
    assert limits.for_host("127.0.0.1", "8001") == (2, None)
    assert limits.for_host("127.0.0.1", "8002") == (4, 2.0)


@pytest.mark.parametrize("bad", [{"max_in_flight": 0}, {"per_second": 0}, {"hosts": {"a*.example": HostLimits()}}])
def test_bad_limits_are_config_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        HostLimits(**bad)  # type: ignore[arg-type]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("2") == 2.0
    when = datetime.now(UTC) + timedelta(seconds=30)
    assert 28 <= (parse_retry_after(format_datetime(when, usegmt=True)) or 0) <= 31
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_the_gate_takes_origin_slots_then_spacing_then_the_global_cap() -> None:
    gate = HostGate(HostLimits(max_in_flight=1, per_second=10, max_total_in_flight=2))
    a, b, c = "http://a.example", "http://b.example", "http://c.example"
    assert gate.ready_in(a) == 0
    gate.acquire(a)
    assert gate.ready_in(a) == math.inf  # its one slot is taken
    gate.acquire(b)
    assert gate.ready_in(c) == math.inf  # the global cap is reached
    gate.release(a)
    assert 0 < gate.ready_in(a) <= 0.1  # a slot is free again, but the rate spacing holds it back
    assert gate.ready_in(c) == 0


def test_a_paused_origin_waits_out_its_pause() -> None:
    gate = HostGate(HostLimits(pause_on=frozenset({429}), default_pause=30))
    assert gate.pause_for_status("http://a.example", 200, None) is None
    assert gate.pause_for_status("http://a.example", 429, "3") == 3.0
    assert 2.5 < gate.ready_in("http://a.example") <= 3.0
    assert gate.pause_for_status("http://b.example", 429, None) == 30.0


def test_admit_waits_for_a_released_slot() -> None:
    async def scenario() -> list[str]:
        gate = HostGate(HostLimits(max_in_flight=1))
        order: list[str] = []
        gate.acquire("http://a.example")

        async def second() -> None:
            await gate.admit("http://a.example")
            order.append("admitted")

        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            await anyio.wait_all_tasks_blocked()
            order.append("released")
            gate.release("http://a.example")
        return order

    assert anyio.run(scenario) == ["released", "admitted"]
