"""Bytes per seen URL for exact and Bloom seen sets, in memory and in Redis; false positives measured.

    python benchmarks/seen_set.py                   # 1 M and 10 M URLs, a redis-server of its own
    python benchmarks/seen_set.py --sizes 1000000   # one size
    python benchmarks/seen_set.py --no-redis

Prints one table; never asserts. What it measures:

- exact, memory: a Python ``set`` of the URLs (what ``MemoryFrontier`` keeps): the set and its strings.
- exact, redis: ``used_memory`` grown by a Redis SET of the URLs (what ``RedisFrontier`` keeps).
- bloom, memory: the ``rbloom`` filter ``dedup(bloom=N)`` keeps in memory (and SQLite stores).
- bloom, redis: ``used_memory`` grown by the filter's bitmaps, set by ``RedisFrontier``'s push script.
- queued seed, redis: ``used_memory`` grown per seed queued by ``RedisFrontier.push`` (100 k seeds).
- false positives: URLs never added that the filter says it holds, over 1 M probes, once it holds N URLs.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import anyio

from spire_core.frontier.bloom import Bloom
from spire_core.seed import Seed

PROBES = 1_000_000
BATCH = 10_000


def url(n: int) -> str:
    """A URL of a realistic length (about 60 characters), distinct for each ``n``."""
    return f"https://www.site{n % 5000}.example/docs/section-{n % 97}/page-{n}.html"


def probe(n: int) -> str:
    return f"https://www.site{n % 5000}.example/docs/section-{n % 97}/other-{n}.html"


def exact_memory(size: int) -> float:
    seen = {url(n) for n in range(size)}
    total = sys.getsizeof(seen) + sum(sys.getsizeof(key) for key in seen)
    return total / size


def bloom_memory(size: int, rate: float) -> tuple[float, float]:
    bloom = Bloom(size, rate)
    seen = bloom.in_memory()
    for n in range(size):
        seen.add(url(n))
    false = sum(probe(n) in seen for n in range(PROBES))
    return seen.size_in_bits / 8 / size, false / PROBES


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (or pass --no-redis)")
    with tempfile.TemporaryDirectory() as directory:
        port = free_port()
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                directory,
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            import redis

            client = redis.Redis(port=port)
            for _ in range(200):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)  # waiting for the server to listen
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait()


def used_memory(client: object) -> int:
    return int(client.info("memory")["used_memory"])  # type: ignore[attr-defined]


def exact_redis(redis_url: str, size: int) -> float:
    import redis

    client = redis.Redis.from_url(redis_url, socket_timeout=600)
    client.flushdb()
    before = used_memory(client)
    for start in range(0, size, BATCH):
        client.sadd("bench:seen", *(url(n) for n in range(start, min(size, start + BATCH))))
    grown = used_memory(client) - before
    client.flushdb()
    return grown / size


async def bloom_redis(redis_url: str, size: int, rate: float) -> float:
    """Bytes per URL of the filter's bitmaps (``MEMORY USAGE``) once the push script has set bits across them."""
    import redis

    from spire_core.frontier.redis import RedisFrontier

    client = redis.Redis.from_url(redis_url, socket_timeout=600)
    client.flushdb()
    frontier = RedisFrontier(redis_url, name="bench").dedup(bloom=size, error_rate=rate)
    # A few thousand pushes through the real script: a Redis string is allocated up to its highest
    # bit set, so the bitmaps are then as big as they will ever be, for ``size`` URLs or for none.
    await frontier.push([Seed(url(n)) for n in range(5000)])
    await frontier.aclose()
    parts = Bloom(size, rate).parts
    total = sum(int(client.memory_usage(f"bench:bloom:{part}") or 0) for part in range(parts))
    client.flushdb()
    return total / size


async def queued_redis(redis_url: str, count: int = 100_000) -> float:
    import redis

    from spire_core.frontier.redis import RedisFrontier

    client = redis.Redis.from_url(redis_url, socket_timeout=600)
    client.flushdb()
    before = used_memory(client)
    frontier = RedisFrontier(redis_url, name="bench")
    for start in range(0, count, BATCH):
        await frontier.push([Seed(url(n)) for n in range(start, start + BATCH)])
    grown = used_memory(client) - before
    await frontier.aclose()
    client.flushdb()
    return grown / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    rate = args.error_rate
    servers = iter(()) if args.no_redis else redis_server()
    redis_url = next(servers, None)
    print(f"{'URLs':>12} {'exact mem':>10} {'exact redis':>12} {'bloom mem':>10} {'bloom redis':>12} {'FP rate':>9}")
    for size in args.sizes:
        exact = exact_memory(size)
        bloom, false = bloom_memory(size, rate)
        in_redis = exact_redis(redis_url, size) if redis_url else float("nan")
        bitmaps = anyio.run(bloom_redis, redis_url, size, rate) if redis_url else float("nan")
        print(f"{size:>12,} {exact:>9.1f}B {in_redis:>11.1f}B {bloom:>9.2f}B {bitmaps:>11.2f}B {false:>9.4%}")
    if redis_url:
        print(f"a queued seed in Redis: {anyio.run(queued_redis, redis_url):.0f} bytes (url about 60 characters)")
    print(f"error rate asked: {rate:.2%}; bytes per URL in bits / 8 / URLs, Redis from INFO used_memory")
    for _ in servers:
        pass


if __name__ == "__main__":
    main()
