"""Fixtures for the frontier tests: a real redis-server for ``RedisFrontier``."""

from tests.redis_server import redis_server, redis_url

__all__ = ["redis_server", "redis_url"]
