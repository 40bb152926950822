"""A writer killed mid-write: what it leaves is readable, and appending to it is clean.

The writer runs with a file size limit and the default action for SIGXFSZ, so the kernel writes
part of a batch up to the limit and then kills the process at its next write: a real kill in the
middle of a push, at a byte that lies inside a row, every time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from tests.spire_core.dataset.conftest import STORES

BATCH = 2000
LIMIT = 1_000_003  # bytes: a little over two batches, so the third push is cut partway

WRITER = f"""
import resource
import signal
import sys

import anyio
from pydantic import BaseModel

from spire_core.dataset import CsvDataset, JsonlDataset, SqliteDataset

class Item(BaseModel):
    n: int
    text: str

async def main() -> None:
    store = {{"jsonl": JsonlDataset, "csv": CsvDataset, "sqlite": SqliteDataset}}[sys.argv[1]]
    items = store(Item, sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, resource.RLIM_INFINITY))
    n = 0
    while True:
        await items.push([Item(n=n + i, text='a "quoted",\\nmulti-line ' + "x" * 200) for i in range({BATCH})])
        n += {BATCH}

anyio.run(main)
"""


class Item(BaseModel):
    n: int
    text: str


@pytest.mark.parametrize("store", sorted(STORES))
def test_a_killed_writer_leaves_whole_items_in_order_and_the_next_push_appends_cleanly(
    store: str, tmp_path: Path
) -> None:
    directory = tmp_path / "store"
    path = STORES[store](Item, directory).storage.path  # type: ignore[attr-defined]
    writer = subprocess.run([sys.executable, "-c", WRITER, store, str(path)], capture_output=True, timeout=60)
    assert writer.returncode == -signal.SIGXFSZ, writer.stderr.decode()
    if store != "sqlite":
        torn = path.read_bytes()
        assert len(torn) == LIMIT
        assert not torn.endswith(b"\n")  # the kill cut a row

    async def check() -> None:
        async with STORES[store](Item, directory) as items:
            survivors = [item.n for item in await items.items()]
            assert len(survivors) >= BATCH
            assert survivors == list(range(len(survivors)))  # whole items, in order, none torn in
            if store == "sqlite":
                assert len(survivors) % BATCH == 0  # a transaction per push: whole batches only
            await items.push(Item(n=-1, text="after the crash"))
            assert [item.n for item in await items.items()] == [*survivors, -1]

    anyio.run(check)
