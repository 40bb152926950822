"""The sampler: requests in flight a second, and each host's pauses (how many, the longest, why)."""

from __future__ import annotations

from spire.report import Sampler
from spire_core.limits import HostGate, HostLimits, HostStats


def test_it_counts_in_flight_and_each_new_pause_of_a_real_host_gate() -> None:
    gate = HostGate(HostLimits(max_in_flight=4, pause_on=frozenset({429})))
    sampler = Sampler(gate.stats)
    a, b = "http://a.test", "http://b.test"
    gate.acquire(a)
    gate.acquire(a)
    gate.acquire(b)
    sampler.sample()
    assert sampler.in_flight[-1][1] == 3

    gate.pause_for_status(a, 429, "30")  # the host asked for 30 s
    sampler.sample()
    sampler.sample()  # the same pause seen again is not a second one
    assert sampler.pauses[a].count == 1
    assert 29 <= sampler.pauses[a].longest <= 30
    text = sampler.pause_texts()[a]
    assert text.startswith("paused 1 time (longest 30 s), now for ")
    assert text.endswith("a pause_on status such as 429 or 503, or robots.txt's Crawl-delay")
    assert b not in sampler.pauses


def test_a_pause_after_the_last_one_ended_is_counted_again() -> None:
    now = [100.0]
    until = [0.0]

    def stats() -> list[HostStats]:
        return [HostStats("http://a.test", in_flight=0, waiting=0, paused_until=until[0], next_allowed=0.0)]

    sampler = Sampler(stats, clock=lambda: now[0])
    until[0] = 105.0
    sampler.sample()
    now[0], until[0] = 110.0, 112.0  # the first ended at 105; a second, of 2 s
    sampler.sample()
    now[0] = 111.0
    until[0] = 120.0  # the running one made longer: still the second
    sampler.sample()
    assert sampler.pauses["http://a.test"].count == 2
    assert sampler.pauses["http://a.test"].longest == 9.0
    now[0] = 130.0
    assert sampler.pause_texts()["http://a.test"].startswith("paused 2 times (longest 9 s):")


def test_a_one_second_pause_sampled_late_is_a_one_second_pause() -> None:
    now = [50.0]
    gate = HostGate(HostLimits(pause_on=frozenset({429})), clock=lambda: now[0])
    sampler = Sampler(gate.stats, clock=lambda: now[0])
    gate.pause_for_status("http://a.test", 429, "1")  # Retry-After: 1
    now[0] = 50.7  # the sampler runs once a second: it meets the pause 0.7 s in
    sampler.sample()
    assert sampler.pauses["http://a.test"].longest == 1.0
    assert sampler.pause_texts()["http://a.test"].startswith("paused 1 time (longest 1 s), now for 0.3 s more:")
