"""``Forker``: the process every worker is forked from, so each starts as the crawl's process was at the start.

The crawl's process forks the forker once, when the run starts, before it has fetched anything; each
worker, the first ones and every replacement, is then forked from the forker. A worker forked from
the crawl's process in the middle of a crawl would inherit what that process opened since (the
backend's connection pool, bound to its event loop; a cache's database connection); one forked from
the forker has none of it. The forker is plain synchronous code: it forks a worker for each byte the
crawl's process sends, reaps the workers that exit, and tells the crawl's process both, as records
of a worker's pid and what happened. It exits when the crawl's process closes the socket (or dies).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import select
import signal
import socket
import struct
import sys
import traceback
from collections.abc import Callable

__all__ = ["EXITED", "STARTED", "Forker", "die_with_parent"]

#: A record: a worker's pid, what happened (``STARTED`` or ``EXITED``), and its exit status.
_RECORD = struct.Struct("!iii")
STARTED = 0
EXITED = 1
#: How often the forker looks for workers that exited, in seconds.
REAP_EVERY = 0.1


class Forker:
    """The crawl's handle on its forker process; ``body`` is what each worker runs."""

    def __init__(self, body: Callable[[], None]) -> None:
        self._body = body
        self._socket, theirs = socket.socketpair()
        context = multiprocessing.get_context("fork")
        self._process = context.Process(
            target=_serve, args=(theirs, self._socket, body, os.getpid()), name="spire-forker", daemon=True
        )
        self._process.start()
        theirs.close()
        self._buffer = b""

    def fork(self) -> None:
        """Ask for one more worker; its pid comes back as a ``STARTED`` record."""
        self._socket.sendall(b"w")

    def records(self) -> list[tuple[int, int, int]]:
        """Wait for the next records ``(pid, STARTED | EXITED, status)``; ``[]`` once the forker is gone.

        Blocking: call it from a thread. ``status`` is an exit code, or minus the signal that ended the worker.
        """
        try:
            data = self._socket.recv(4096)
        except OSError:
            return []
        if not data:
            return []
        self._buffer += data
        whole = len(self._buffer) - len(self._buffer) % _RECORD.size
        found = [_RECORD.unpack_from(self._buffer, offset) for offset in range(0, whole, _RECORD.size)]
        self._buffer = self._buffer[whole:]
        return found

    def close(self, timeout: float) -> None:
        """Close the forker's socket (it exits) and wait up to ``timeout`` seconds for it."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout)


def _serve(control: socket.socket, crawls: socket.socket, body: Callable[[], None], crawl: int) -> None:
    """The forker's loop: a worker for each byte asked for, a record for each start and exit.

    ``crawls`` is the crawl's end of the socket, inherited: closed at once, so that the crawl's
    death closes the socket for good and the forker sees it.
    """
    crawls.close()
    die_with_parent(crawl)  # the kernel ends the forker when the crawl's process dies, even by SIGKILL
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the crawl's process stops the workers itself
    while True:
        ready, _, _ = select.select([control], [], [], REAP_EVERY)
        for pid, status in _reaped():
            control.sendall(_RECORD.pack(pid, EXITED, status))
        if not ready:
            continue
        try:
            wanted = control.recv(64)
        except OSError:
            wanted = b""
        if not wanted:
            return  # the crawl's process closed the socket, or died: the workers notice and exit
        for _ in wanted:
            forker = os.getpid()
            pid = os.fork()
            if pid == 0:
                control.close()
                die_with_parent(forker)  # and each worker when the forker dies: no worker outlives its crawl
                _run(body)
            control.sendall(_RECORD.pack(pid, STARTED, 0))


#: ``prctl``'s option that sends the calling process a signal when its parent thread exits (Linux).
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when ``parent`` (its parent's pid) dies, whatever blocks this
    one's event loop (Linux; elsewhere a worker's own orphan check on its loop remains). Exits at once
    if ``parent`` died already."""
    if sys.platform.startswith("linux"):
        import ctypes  # only in a process that forks: 30 ms of every start-up otherwise

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the kernel was asked to tell


def _run(body: Callable[[], None]) -> None:
    """A worker's whole life: run ``body``, then exit with 0, or 1 after printing what it raised."""
    code = 0
    try:
        body()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()  # what the worker itself wrote (the forker's buffers were empty)
        os._exit(code)


def _reaped() -> list[tuple[int, int]]:
    """The workers that exited since the last call, with their status (an exit code, or minus a signal)."""
    found: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        found.append((pid, os.waitstatus_to_exitcode(status)))
