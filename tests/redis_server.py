"""A throwaway ``redis-server`` for tests: a free port on 127.0.0.1, no persistence, a temp directory."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers_as(port: int, pid: int) -> bool:
    """Whether the redis-server answering on ``port`` is process ``pid``.

    A free port can be taken between the probe and the server's bind; another test's redis-server may
    then answer there while ours fails to start, and a test must never flush another's database.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"INFO server\r\n")
            reply = b""
            while (found := re.search(rb"\r\nprocess_id:(\d+)\r\n", reply)) is None:
                chunk = conn.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            return int(found[1]) == pid
    except OSError:
        return False


class RedisServer:
    """``redis-server`` in a child process; ``url`` reaches its database 0."""

    def __init__(self, binary: str, directory: str, *, aof: bool = False) -> None:
        self.binary = binary
        self.directory = directory
        #: Whether every write goes to an append-only file, fsynced, so a restart loses nothing.
        self.aof = aof
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, timeout: float = 10.0, port: int | None = None) -> RedisServer:
        """Start on ``port``, or on a free one."""
        # A free port can be taken between the probe and the server's bind: try a few.
        for _ in range(3):
            self.port = port or free_port()
            persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
            self._process = subprocess.Popen(
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    *persistence,
                    "--dir",
                    self.directory,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self._process.poll() is None:
                if _answers_as(self.port, self._process.pid):
                    return self
                time.sleep(0.02)  # waiting for a child process to listen, not timing a behaviour
            self.stop()
        raise RuntimeError(f"redis-server did not answer PING within {timeout} s")

    def restart(self, *, timeout: float = 10.0) -> RedisServer:
        """Stop the server and start it again on the same port (with ``aof``, its data comes back)."""
        self.stop()
        return self.start(timeout=timeout, port=self.port)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def redis_binary() -> str:
    """The ``redis-server`` binary; skip the test (or, under CI, fail it) when it is not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def start_redis() -> Iterator[RedisServer]:
    """Start a redis-server for a test session; skip (or, under CI, fail) when it is not installed."""
    binary = redis_binary()
    with tempfile.TemporaryDirectory(prefix="spire-redis-") as directory:
        server = RedisServer(binary, directory).start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the whole test session."""
    yield from start_redis()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """The URL of an empty Redis database: everything the test leaves behind is flushed after it."""
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.flushdb()
        yield redis_server.url
        client.flushdb()
    finally:
        client.close()
