"""RetryPolicy: what it retries, how long it waits, when it gives up; alone and driving a crawl."""

from __future__ import annotations

import email.utils
import random

import anyio
import pytest

from spire import Crawler, Error, HostLimits, Response, Router
from spire_core.blocks import BlockRules
from spire_core.errors import ConfigError, ConnectError, DecodeError, HttpStatusError, RetryWaitTooLong
from spire_core.frontier.memory import MemoryFrontier
from spire_core.outcome import Fail, Retry
from spire_core.response import Headers
from spire_core.response import Response as RawResponse
from spire_core.session.retry import RetryPolicy
from tests.sites.server import Site

FAST = HostLimits(max_in_flight=4, pause_on=frozenset({429, 503}), default_pause=0.01)


def status_error(status: int, **headers: str) -> HttpStatusError:
    error = HttpStatusError(status, url="http://127.0.0.1:1/x")
    error.response = RawResponse(url="http://127.0.0.1:1/x", status=status, headers=Headers(headers))
    return error


def noop_router() -> Router:
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    return router


def test_transient_retries_network_errors_and_the_listed_statuses_only() -> None:
    policy = RetryPolicy.transient()
    assert policy.retries(ConnectError("reset"))
    for status in (408, 429, 500, 502, 503, 504):
        assert policy.retries(status_error(status))
    assert not policy.retries(status_error(404))
    assert not policy.retries(status_error(403))
    assert not policy.retries(DecodeError("bad gzip"))
    assert policy.on_status(403).retries(status_error(403))


def test_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    policy = RetryPolicy.transient(backoff=1.0, max_backoff=8.0, rng=random.Random(7))
    for attempt, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (10, 8.0), (500, 8.0)]:
        waits = [policy.backoff_for(attempt) for _ in range(200)]
        assert all(0 <= wait <= ceiling for wait in waits)
        assert max(waits) > ceiling * 0.8
        assert min(waits) < ceiling * 0.2


def test_the_wait_header_is_read_before_retry_after() -> None:
    policy = RetryPolicy.transient().wait_header("X-Wait")
    assert policy.wait(status_error(503, **{"X-Wait": "7", "Retry-After": "30"}), 0) == 7.0
    assert policy.wait(status_error(503, **{"Retry-After": "30"}), 0) == 30.0


def test_retry_after_as_an_http_date_uses_the_injected_clock() -> None:
    now = 1_800_000_000.0
    policy = RetryPolicy.transient(clock=lambda: now)
    date = email.utils.formatdate(now + 42, usegmt=True)
    assert policy.wait(status_error(429, **{"Retry-After": date}), 0) == pytest.approx(42, abs=1)


@pytest.mark.parametrize("asked", ["99999", "9" * 400, "Fri, 01 Jan 2100 00:00:00 GMT"])
def test_a_server_wait_beyond_max_wait_fails_instead_of_sleeping(asked: str) -> None:
    policy = RetryPolicy.transient(max_wait=120)
    outcome = policy(status_error(503, **{"Retry-After": asked}), 0)
    assert isinstance(outcome, Fail)
    assert isinstance(outcome.error, RetryWaitTooLong)
    assert outcome.error.category == "retry_wait"


def test_the_policy_is_a_plain_function_returning_the_outcome() -> None:
    policy = RetryPolicy.transient(attempts=2)
    first = policy(status_error(503, **{"Retry-After": "3"}), 0)
    assert isinstance(first, Retry)
    assert first.delay == 3.0
    last = policy(status_error(503), 1)
    assert isinstance(last, Fail)
    assert last.error.attempts == 2
    assert isinstance(policy(status_error(404), 0), Fail)


def test_skip_blocks_hands_a_block_back_even_on_a_trigger_status() -> None:
    page = status_error(429, Server="cloudflare")
    page.response.body = b"<html>error code: 1015</html>"
    policy = RetryPolicy.transient()
    assert policy.retries(page)
    assert not policy.skip_blocks(BlockRules.builtin()).retries(page)


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(attempts=0)
    with pytest.raises(ConfigError):
        RetryPolicy(max_wait=-1)
    with pytest.raises(ConfigError):
        RetryPolicy(jitter=2)


def test_a_429_storm_with_retry_after_ends_with_every_page_kept(site: Site) -> None:
    for n in range(3):
        site.sequence(f"/p{n}", [(429, {"Retry-After": "1"}, b"slow down")] * 2 + [(200, {}, b"ok")])
    frontier = MemoryFrontier().dedup()
    crawler = Crawler(noop_router(), host_limits=FAST, frontier=frontier, retry=RetryPolicy.transient(attempts=4))
    stats = crawler.run([site.url(f"/p{n}") for n in range(3)])
    assert (stats.finished, stats.failed, stats.retries) == (3, 0, 6)
    first = min(r.at for r in site.requests if r.path == "/p0")
    last = max(r.at for r in site.requests if r.path == "/p0")
    assert last - first >= 1.9  # two waits of the server's second each
    assert anyio.run(frontier.pending) == 0


def test_retry_after_beyond_max_wait_fails_the_seed_at_once(site: Site) -> None:
    site.page("/later", "busy", status=503, headers={"Retry-After": "86400"})
    frontier = MemoryFrontier().dedup()
    policy = RetryPolicy.transient(max_wait=60)
    stats = Crawler(noop_router(), host_limits=FAST, frontier=frontier, retry=policy).run([site.url("/later")])
    assert (site.hits()["/later"], stats.failed) == (1, 1)
    assert stats.errors_by_category["retry_wait"] == 1
    assert anyio.run(frontier.pending) == 0


def test_on_status_makes_the_crawl_retry_that_status(site: Site) -> None:
    site.sequence("/gate", [(403, {}, b"no"), (200, {}, b"ok")])
    policy = RetryPolicy.transient(backoff=0.01).on_status(403)
    stats = Crawler(noop_router(), host_limits=FAST, retry=policy).run([site.url("/gate")])
    assert (stats.finished, stats.retries) == (1, 1)
    plain = Crawler(noop_router(), host_limits=FAST, retry=RetryPolicy.transient(backoff=0.01))
    site.sequence("/gate", [(403, {}, b"no"), (200, {}, b"ok")])
    assert plain.run([site.url("/gate")]).errors_by_category["status"] == 1


def test_a_final_error_carries_the_number_of_tries(site: Site) -> None:
    site.page("/down", "down", status=502)
    failures: list[BaseException] = []
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    @router.failed
    async def failed(error: Error) -> None:
        failures.append(error)

    Crawler(router, host_limits=FAST, retry=RetryPolicy.transient(attempts=3, backoff=0.01)).run([site.url("/down")])
    (error,) = failures
    assert error.attempts == 3  # type: ignore[attr-defined]
    assert site.hits()["/down"] == 3


def test_a_retry_waiting_out_its_delay_holds_no_host_slot(site: Site) -> None:
    site.sequence("/busy", [(503, {"Retry-After": "1"}, b"busy"), (200, {}, b"ok")])
    site.page("/other", "other")
    limits = HostLimits(max_in_flight=1)  # one slot for the origin, and no pause on 503
    stats = Crawler(noop_router(), host_limits=limits, retry=RetryPolicy.transient()).run(
        [site.url("/busy"), site.url("/other")]
    )
    assert (stats.finished, stats.retries) == (2, 1)
    first_busy, second_busy = (r.at for r in site.requests if r.path == "/busy")
    (other,) = (r.at for r in site.requests if r.path == "/other")
    assert other - first_busy < 0.5  # served while the retry waited its second
    assert second_busy - first_busy >= 0.9
