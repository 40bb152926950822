"""Host limits: overrides, Retry-After, and the gate's admission rules."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anyio
import pytest

from spire_core.clock import FakeClock
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
    clock = FakeClock()
    gate = HostGate(HostLimits(max_in_flight=1, per_second=4, max_total_in_flight=2), clock=clock)
    a, b, c = "http://a.example", "http://b.example", "http://c.example"
    assert gate.ready_in(a) == 0
    gate.acquire(a)
    assert gate.ready_in(a) == math.inf  # its one slot is taken
    gate.acquire(b)
    assert gate.ready_in(c) == math.inf  # the global cap is reached
    clock.advance(0.125)
    gate.release(a)
    assert gate.ready_in(a) == 0.125  # a slot is free again, but the rate spacing holds it back
    assert gate.ready_in(c) == 0
    clock.advance(0.125)
    assert gate.ready_in(a) == 0


def test_spacing_counts_from_when_the_request_is_sent() -> None:
    clock = FakeClock()
    gate = HostGate(HostLimits(per_second=1), clock=clock)
    origin = "http://a.example"
    gate.acquire(origin)
    clock.advance(0.5)  # admitted, then held up half a second before it went out
    gate.sending(origin)
    gate.release(origin)
    assert gate.ready_in(origin) == 1.0
    clock.advance(1.0)
    assert gate.ready_in(origin) == 0


def test_a_paused_origin_waits_out_its_pause() -> None:
    clock = FakeClock()
    gate = HostGate(HostLimits(pause_on=frozenset({429}), default_pause=30), clock=clock)
    assert gate.pause_for_status("http://a.example", 200, None) is None
    assert gate.pause_for_status("http://a.example", 429, "3") == 3.0
    assert gate.ready_in("http://a.example") == 3.0
    clock.advance(2.0)
    assert gate.ready_in("http://a.example") == 1.0
    clock.advance(1.0)
    assert gate.ready_in("http://a.example") == 0
    assert gate.pause_for_status("http://b.example", 429, None) == 30.0
    assert gate.ready_in("http://b.example") == 30.0


def test_a_pause_is_cut_to_max_pause_and_shown_on_the_gates_clock() -> None:
    clock = FakeClock(start=500.0)
    gate = HostGate(HostLimits(pause_on=frozenset({503}), max_pause=60), clock=clock)
    assert gate.pause_for_status("http://a.example", 503, "3600") == 60.0
    (stats,) = gate.stats()
    assert stats.paused_until == 560.0
    clock.advance(60.0)
    assert gate.ready_in("http://a.example") == 0


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


def test_admit_waits_out_a_pause_on_the_gates_own_clock() -> None:
    async def scenario() -> FakeClock:
        clock = FakeClock()
        gate = HostGate(HostLimits(pause_on=frozenset({503}), default_pause=60), clock=clock)
        gate.pause_for_status("http://a.example", 503, None)
        with anyio.fail_after(5):  # a minute on the fake clock, at once on the real one
            await gate.admit("http://a.example")
        return clock

    clock = anyio.run(scenario)
    assert clock.slept == [60.0]
    assert clock() == 1000.0 + 60.0
