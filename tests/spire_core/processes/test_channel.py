"""``Channel``: every message arrives in the order it was queued, sent now or left to wait for company."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.abc
import pytest

from spire_core.processes.channel import Channel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_message_left_to_wait_arrives_after_those_queued_before_it(tmp_path: Path) -> None:
    received: list[object] = []
    all_in = anyio.Event()

    def on_message(message: object) -> None:
        received.append(message)
        if len(received) == 4:
            all_in.set()

    listener = await anyio.create_unix_listener(tmp_path / "channel.sock")
    async with listener, anyio.create_task_group() as tg:
        accepted: list[anyio.abc.SocketStream] = []
        connected = anyio.Event()

        async def serve(stream: anyio.abc.SocketStream) -> None:
            accepted.append(stream)
            connected.set()
            await Channel(stream, on_message=on_message).run()

        tg.start_soon(listener.serve, serve)
        sender = Channel(await anyio.connect_unix(tmp_path / "channel.sock"), on_message=received.append)
        tg.start_soon(sender.run)
        # All in one turn of the loop, the writer not run in between: a worker answers a request and
        # gives its slot back in one step, and the answer must reach the gate before the release.
        sender.send("answered")
        sender.send_later("release")
        sender.send("finished")
        sender.send_later("counts")
        with anyio.fail_after(10):
            await connected.wait()
            await all_in.wait()
        tg.cancel_scope.cancel()
    assert received == ["answered", "release", "finished", "counts"]
