"""Ctrl-C and SIGTERM for every ``spire`` command: the first stops gently, the second at once.

Both signals print the same message and end the command with the shell's status for the signal
(130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

import anyio

__all__ = ["STOPPING", "Interrupt"]

STOPPING = "spire: stopping (Ctrl-C again to stop at once)"


class Interrupt:
    """Watches for SIGINT and SIGTERM while a crawl runs; remembers the first one."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @property
    def exit_status(self) -> int | None:
        """``128 + signal`` once a signal arrived (the shell's convention), else ``None``."""
        return None if self.signal is None else 128 + self.signal

    async def watch(self, stop: Callable[[], None], stop_now: Callable[[], None]) -> None:
        """Call ``stop`` on the first signal and ``stop_now`` on the second."""
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                if self.signal is None:
                    self.signal = signum
                    print(STOPPING, file=sys.stderr, flush=True)
                    stop()
                else:
                    stop_now()
                    return
