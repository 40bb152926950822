"""A seed as Redis keeps it: a record ``priority TAB origin TAB JSON``, and ``BadRecord`` for one that is no seed.

The scripts read only the priority and the origin; the compact JSON of the other ``Seed`` fields is
read only in Python. A record that cannot be read back as a seed (bad JSON, a missing URL, a
priority that is no number, written by hand or by another program) is a ``BadRecord``: the worker
that leased it moves it to the crawl's ``dead`` list, logs it once on ``spire.frontier`` and goes
on; it never crashes the worker, nor comes back to crash the next.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from spire_core.errors import ConfigError, SpireError
from spire_core.revisit import Revisit
from spire_core.seed import Seed

__all__ = ["BadRecord", "decode", "encode", "error_text"]


def encode(seed: Seed) -> str:
    """A seed as a record: ``priority TAB origin TAB JSON``, the JSON holding only non-default fields."""
    fields: dict[str, Any] = {"u": seed.url}
    if seed.tag is not None:
        fields["t"] = seed.tag
    if seed.method != "GET":
        fields["m"] = seed.method
    if seed.depth:
        fields["d"] = seed.depth
    if seed.attempt:
        fields["a"] = seed.attempt
    if seed.user_data is not None:
        fields["x"] = dict(seed.user_data)
    if seed.headers is not None:
        fields["h"] = dict(seed.headers)
    if seed.body is not None:
        fields["b"] = base64.b64encode(seed.body).decode("ascii")
    if seed.unique_key != seed.url:
        fields["k"] = seed.unique_key
    if seed.strategy is not None:
        fields["s"] = seed.strategy
    if seed.revisit is not None:
        fields["v"] = seed.revisit.as_json()
    try:
        document = json.dumps(fields, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"a seed in a RedisFrontier needs JSON user_data: {exc}", url=seed.url) from exc
    return f"{seed.priority}\t{seed.origin}\t{document}"


class BadRecord(SpireError):
    """A record in Redis that cannot be read back as a seed; moved to the crawl's ``dead`` list."""

    category = "bad_record"


def decode(record: str) -> Seed:
    """The seed of ``record``; ``BadRecord``, naming the record, when it is not one."""
    try:
        priority, _, document = record.split("\t", 2)
        fields = json.loads(document)
        if not isinstance(fields, dict):
            raise TypeError(f"its JSON is a {type(fields).__name__}, not an object")
        body = fields.get("b")
        return Seed(
            fields["u"],
            tag=fields.get("t"),
            method=fields.get("m", "GET"),
            depth=fields.get("d", 0),
            priority=int(priority),
            attempt=fields.get("a", 0),
            user_data=fields.get("x"),
            headers=fields.get("h"),
            body=None if body is None else base64.b64decode(body, validate=True),
            unique_key=fields["k"] if "k" in fields else fields["u"],
            strategy=fields.get("s"),
            revisit=Revisit.from_json(fields["v"]) if "v" in fields else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError, SpireError) as exc:
        shown = record if len(record) <= 200 else record[:200] + "..."
        reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, KeyError) else f"no field {exc}"
        raise BadRecord(f"a queue record that is no seed ({reason}): {shown!r}") from None


def error_text(error: BaseException) -> str:
    """An error as a failed entry keeps it: ``"ValueError: boom"``."""
    return f"{type(error).__name__}: {error}"
