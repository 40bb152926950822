"""Checking option values where they are given: a ``ConfigError`` that names the option and the value.

    count("max_in_flight", 4)                   # 4
    duration("backoff", timedelta(seconds=2))   # 2.0
    count("max_in_flight", "8")                 # ConfigError: max_in_flight must be a whole number ...

A value that would only fail later, on every page or never visibly (``"8"``, ``-1``, ``inf``, ``nan``),
is refused at construction instead.
"""

from __future__ import annotations

import math
from datetime import timedelta

from spire_core.errors import ConfigError

__all__ = ["count", "duration", "is_number"]


def is_number(value: object) -> bool:
    """Whether ``value`` is an int or a float (``True`` and ``False`` are not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def count(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` when it is a whole number of at least ``minimum``; else ``ConfigError``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be a whole number of at least {minimum}, not {value!r}")
    return value


def duration(name: str, value: object, *, positive: bool = False, maximum: float = math.inf) -> float:
    """``value`` (seconds or a ``timedelta``) in seconds when it is finite, 0 or more (more than 0 when
    ``positive``) and at most ``maximum``; else ``ConfigError``."""
    amount = value.total_seconds() if isinstance(value, timedelta) else value
    if not is_number(amount) or not 0 <= amount <= maximum or math.isinf(amount) or (positive and amount == 0):  # type: ignore[operator, arg-type]
        bounds = "more than 0" if positive else "0 or more"
        if math.isfinite(maximum):
            bounds += f" and at most {maximum:g}"
        raise ConfigError(f"{name} must be a duration in seconds (a number or a timedelta), {bounds}, not {value!r}")
    return float(amount)  # type: ignore[arg-type]
