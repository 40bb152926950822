"""The stats line names its median latency as the histogram bound it is, not as a measured value."""

from __future__ import annotations

from spire_core.stats import CrawlStats


def test_the_median_is_shown_as_the_bound_of_its_bucket() -> None:
    stats = CrawlStats()
    assert str(stats).endswith(" p50_ms=-")
    for elapsed in (0.001, 0.002, 0.030):
        stats.latency.record(elapsed)
    assert str(stats).endswith(" p50_ms<=10")
    for elapsed in (0.2, 0.3, 0.4):
        stats.latency.record(elapsed)
    assert str(stats).endswith(" p50_ms<=50")


def test_a_median_slower_than_the_last_bound_says_so() -> None:
    stats = CrawlStats()
    stats.latency.record(30.0)
    assert str(stats).endswith(" p50_ms>10000")
