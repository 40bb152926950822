"""What one Redis server costs per page: leases and acks a second, Redis CPU per page, bytes per queued seed.

    python benchmarks/redis_frontier.py [--seeds 20000] [--origins 200] [--clients 4]

Starts a redis-server of its own, pushes ``--seeds`` seeds over ``--origins`` hosts through
``RedisFrontier.push``, then ``--clients`` frontiers (as many workers) lease and ack them as fast as
they can, no fetching: the frontier's own ceiling. Prints pages a second, the Redis server's CPU
seconds per 1,000 pages (``INFO cpu``: what bounds one shard), and the bytes each queued seed takes
(``INFO memory``). Never asserts.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time

import anyio

from spire_core.frontier.base import Lease
from spire_core.frontier.redis import RedisFrontier
from spire_core.outcome import Done
from spire_core.seed import Seed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu(client: object) -> float:
    info = client.info("cpu")  # type: ignore[attr-defined]
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def bench(url: str, seeds: int, origins: int, clients: int) -> None:
    import redis

    client = redis.Redis.from_url(url)
    before = int(client.info("memory")["used_memory"])
    async with RedisFrontier(url, name="bench") as frontier:
        batch = [
            Seed(f"https://www.site{n % origins}.example/docs/section-{n % 97}/page-{n}.html") for n in range(seeds)
        ]
        started = time.perf_counter()
        await frontier.dedup().push(batch)
        pushed = time.perf_counter() - started
    per_seed = (int(client.info("memory")["used_memory"]) - before) / seeds
    done = 0
    workers = [RedisFrontier(url, name="bench") for _ in range(clients)]

    async def work(frontier: RedisFrontier) -> None:
        nonlocal done
        while True:
            lease = await frontier.lease()
            if not isinstance(lease, Lease):
                if lease.seconds is None:
                    return
                await anyio.sleep(lease.seconds)
                continue
            await frontier.report(lease, Done())
            done += 1

    cpu_before = cpu(client)
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for frontier in workers:
            tg.start_soon(work, frontier)
    elapsed = time.perf_counter() - started
    redis_cpu = cpu(client) - cpu_before
    for frontier in workers:
        await frontier.aclose()
    print(f"push: {seeds / pushed:,.0f} seeds/s (deduplicated, batches of 500 per script)")
    print(f"queued seed in Redis: {per_seed:.0f} bytes, its seen key included (URL ~60 characters)")
    print(f"lease + ack, {clients} clients: {done / elapsed:,.0f} pages/s; Redis CPU {redis_cpu / done * 1000:.3f} s")
    print("  per 1,000 pages (one shard's ceiling is about 1 / that many thousand pages a second)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20_000)
    parser.add_argument("--origins", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    with tempfile.TemporaryDirectory() as directory:
        port = free_port()
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            import redis

            for _ in range(200):
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)  # waiting for the server to listen
            anyio.run(bench, f"redis://127.0.0.1:{port}/0", args.seeds, args.origins, args.clients)
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
