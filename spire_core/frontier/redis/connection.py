"""The connection to a crawl's Redis server: redis-py's errors translated, and a lost connection ridden out.

redis-py is an optional extra (``spire-crawl[redis]``): this is the one module of the package that
imports it, at module level, so a missing package is one clear ``ImportError`` naming the extra.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio

from spire_core.errors import ConfigError, ConnectError, FetchTimeout, SpireError

try:
    import redis.asyncio as aioredis
    import redis.exceptions as redis_errors
    from redis.commands.core import AsyncScript
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("RedisFrontier needs the redis package: pip install 'spire-crawl[redis]'") from exc

__all__ = ["AsyncScript", "Client", "Connection", "RedisError", "glob_escape", "redacted"]

logger = logging.getLogger("spire.frontier")
logger.addHandler(logging.NullHandler())

#: redis-py's client, and the root of its errors, for the modules beside this one.
Client = aioredis.Redis
RedisError = redis_errors.RedisError

_FIRST_RECONNECT_PAUSE = 0.05
_MAX_RECONNECT_PAUSE = 1.0


def redacted(url: str) -> str:
    """``url`` with its password hidden, fit for messages and logs; ``ConfigError`` if it is no URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except (TypeError, ValueError, AttributeError) as exc:
        # Too broken to split: hide whatever sits between "//" and "@", then say so.
        shown = re.sub(r"//[^/@]*@", "//***@", url) if isinstance(url, str) else repr(url)
        raise ConfigError(f"not a Redis URL: {shown!r} ({exc})") from None
    if password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis ``SCAN MATCH`` pattern."""
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


class Connection:
    """One crawl's client of the server at ``url``: commands run under ``prefix``, opened on first use.

    ``ensure_open`` is awaited before every command (the frontier's ``open``: connect, store its
    limits, once).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str,
        connect_timeout: float,
        reconnect_for: float,
        ensure_open: Callable[[], Awaitable[None]],
    ) -> None:
        #: The server's URL, its password hidden: what messages and ``repr`` show.
        self.url = redacted(url)
        self.prefix = prefix
        #: How long a lost connection is tried again before a command fails (``ConnectError``).
        self.reconnect_for = reconnect_for
        self._ensure_open = ensure_open
        try:
            self.client: Client = aioredis.Redis.from_url(
                url, decode_responses=True, socket_connect_timeout=connect_timeout
            )
        except ValueError as exc:
            raise ConfigError(f"not a Redis URL: {self.url} ({exc})") from exc
        self._lost_at: float | None = None  # when the connection was lost, while it is

    async def open(self) -> None:
        """Open the crawl (once) before a command that does not go through ``call``."""
        await self._ensure_open()

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """Turn redis-py's exceptions into spire's, naming the server (never its password)."""
        try:
            yield
        except redis_errors.TimeoutError as exc:
            raise FetchTimeout(f"the Redis frontier at {self.url} timed out: {exc}") from exc
        except redis_errors.ConnectionError as exc:
            raise ConnectError(f"lost the Redis frontier at {self.url}: {exc}") from exc
        except redis_errors.RedisError as exc:
            raise SpireError(f"the Redis frontier at {self.url} failed: {exc}") from exc

    async def run(self, script: AsyncScript, *args: str | float) -> Any:
        """Run one of the crawl's scripts with ``args`` after its key prefix."""
        return await self.call(lambda: script(args=[self.prefix, *args]))

    async def call(self, command: Callable[[], Awaitable[Any]]) -> Any:
        """Run one command, riding out a lost connection for up to ``reconnect_for`` seconds.

        A worker loses its connection when Redis restarts or the network blips: the command is tried
        again with a growing pause, and only an outage longer than ``reconnect_for`` is an error. The
        bound is per outage, shared by every command: once it has passed, each command (handing
        leases back on close, say) fails after a single try. The loss and the return are logged once
        on ``spire.frontier``. A command that reached the server before the connection dropped may
        run twice: every script is safe to repeat, except that a lease taken twice leaves a copy
        nobody holds, which is handed out again when it expires.
        """
        await self._ensure_open()
        pause = _FIRST_RECONNECT_PAUSE
        while True:
            try:
                with self.translated():
                    result = await command()
            except (ConnectError, FetchTimeout) as exc:
                now = time.monotonic()
                if self._lost_at is None:
                    self._lost_at = now
                    logger.warning("%s; trying again for up to %g s", exc, self.reconnect_for)
                if now >= self._lost_at + self.reconnect_for:
                    raise ConnectError(
                        f"lost the Redis frontier at {self.url} and could not reach it again "
                        f"within {self.reconnect_for:g} s: {exc}"
                    ) from exc
                await anyio.sleep(min(pause, self._lost_at + self.reconnect_for - now))
                pause = min(pause * 2, _MAX_RECONNECT_PAUSE)
                continue
            if self._lost_at is not None:
                self._lost_at = None
                logger.warning("reached the Redis frontier at %s again", self.url)
            return result

    async def aclose(self) -> None:
        """Disconnect; an error on the way out is no news."""
        with contextlib.suppress(redis_errors.RedisError):
            await self.client.aclose()
