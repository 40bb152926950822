"""Worker processes for ``Crawler(..., processes=N)``: one crawl on every core of a machine.

What a crawl needs before it starts any process is here; the pool and its workers (``pool``,
``child``, ``forker``, ``channel``, ``messages``) are imported only by a crawl with ``processes > 1``.
"""

from __future__ import annotations

import os
from typing import Literal

from spire_core import checks
from spire_core.errors import ConfigError

__all__ = ["WORKER_DEATHS", "process_count"]

#: A seed in flight on this many worker processes when they died fails (``WorkerCrashed``).
WORKER_DEATHS = 3


def process_count(processes: int | Literal["auto"]) -> int:
    """``processes`` as a number: ``"auto"`` is every core this process may use."""
    if processes == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1
    checks.count("processes", processes)
    if processes > 1:
        import multiprocessing  # only a crawl that forks pays for it

        if "fork" not in multiprocessing.get_all_start_methods():
            raise ConfigError("processes > 1 forks worker processes, which this platform cannot do; use processes=1")
    return processes
