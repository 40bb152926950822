"""Option checks: counts and durations refused with a ConfigError naming the option and the value."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from spire_core.checks import count, duration
from spire_core.errors import ConfigError


def test_counts_are_whole_numbers_from_the_minimum() -> None:
    assert count("n", 3) == 3
    assert count("depth", 0, minimum=0) == 0
    for bad in ("3", 2.0, True, 0, -1, None):
        with pytest.raises(ConfigError, match=rf"n must be a whole number of at least 1, not {bad!r}"):
            count("n", bad)


def test_durations_are_finite_seconds_or_timedeltas() -> None:
    assert duration("wait", 1) == 1.0
    assert duration("wait", timedelta(minutes=1)) == 60.0
    assert duration("wait", 0) == 0.0
    for bad in (-1, math.inf, math.nan, "5", None, True, timedelta(seconds=-1)):
        with pytest.raises(ConfigError, match="wait must be a duration"):
            duration("wait", bad)
    with pytest.raises(ConfigError, match="more than 0"):
        duration("wait", 0, positive=True)
    with pytest.raises(ConfigError, match="at most 10"):
        duration("wait", 11, maximum=10)
