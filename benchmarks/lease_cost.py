"""What one lease costs against the number of queued origins, in the memory and SQLite frontiers.

    .venv/bin/python benchmarks/lease_cost.py [--origins 1000,10000,100000,1000000] [--leases 2000]

Each store is filled with one seed on each of ``N`` origins (pushed in batches), then ``--leases``
leases are timed, each reported ``Done`` at once, with a ``ready`` that admits every origin: the
frontier's own cost, no fetching. SQLite runs on a file in a temporary directory. Nothing is
asserted; tests/spire_core/frontier/test_memory.py pins that a lease asks ``ready`` only about the
origins ahead of the one it hands out.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from spire_core.frontier.base import Frontier, Lease
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.outcome import Done
from spire_core.seed import Seed

_BATCH = 10_000


async def lease_us(frontier: Frontier, origins: int, leases: int) -> float:
    """Microseconds a lease (and its report) takes with ``origins`` origins queued."""
    for start in range(0, origins, _BATCH):
        await frontier.push(Seed(f"http://host-{i}.example/") for i in range(start, min(start + _BATCH, origins)))
    leases = min(leases, origins)
    begin = time.perf_counter()
    for _ in range(leases):
        lease = await frontier.lease()
        assert isinstance(lease, Lease)
        await frontier.report(lease, Done())
    return (time.perf_counter() - begin) / leases * 1e6


async def memory(origins: int, leases: int, _: Path) -> float:
    return await lease_us(MemoryFrontier(), origins, leases)


async def sqlite(origins: int, leases: int, directory: Path) -> float:
    async with SqliteFrontier(directory / f"lease-{origins}.db") as frontier:
        return await lease_us(frontier, origins, leases)


STORES: dict[str, Callable[[int, int, Path], Awaitable[float]]] = {"memory": memory, "sqlite": sqlite}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--origins", default="1000,10000,100000,1000000", help="comma-separated origin counts")
    parser.add_argument("--leases", type=int, default=2000, help="leases timed at each size")
    parser.add_argument("--stores", default="memory,sqlite", help="comma-separated: memory, sqlite")
    args = parser.parse_args()
    sizes = [int(size) for size in args.origins.split(",")]
    stores = args.stores.split(",")
    print(f"|   origins | {' | '.join(f'{store} us/lease' for store in stores)} |")
    print(f"|----------:|{'|'.join('-' * (len(store) + 10) + ':' for store in stores)}|")
    with tempfile.TemporaryDirectory() as directory:
        for size in sizes:
            cells = [await STORES[store](size, args.leases, Path(directory)) for store in stores]
            row = " | ".join(f"{cell:>{len(store) + 9}.1f}" for cell, store in zip(cells, stores, strict=True))
            print(f"| {size:>9,} | {row} |", flush=True)


if __name__ == "__main__":
    anyio.run(main)
