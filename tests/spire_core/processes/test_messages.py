"""The messages of ``processes=N``: typed, pickled by their fields, counts that add up exactly."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
from pathlib import Path

import anyio
import anyio.abc
import pytest

from spire_core.outcome import Done
from spire_core.processes.channel import Call, Channel, Reply
from spire_core.processes.messages import (
    AdmitDownload,
    Answered,
    Claim,
    Counts,
    CountsDelta,
    Finished,
    Handled,
    Sending,
    Stop,
    Work,
)
from spire_core.processes.tally import Tally
from spire_core.revisit import How, PageNote, Revisit
from spire_core.seed import Seed
from spire_core.stats import CrawlStats


def busy_stats() -> CrawlStats:
    stats = CrawlStats(requests=7, pages=5, finished=4, failed=1, retries=2, items=3, cached=1)
    stats.skip("duplicate", 40)
    stats.skip("depth", 2)
    stats.errors_by_category["status"] += 1
    stats.rendering["http"] += 5
    stats.latency.record(0.004)
    stats.latency.record(2.5)
    return stats


def test_counts_delta_adds_what_crawl_stats_add_would() -> None:
    worker = busy_stats()
    by_stats, by_delta = CrawlStats(requests=1, pages=1), CrawlStats(requests=1, pages=1)
    by_stats.add(worker)
    pickle.loads(pickle.dumps(CountsDelta.of(worker))).add_to(by_delta)
    timeless = {"rate", "elapsed"}
    assert {k: v for k, v in by_delta.as_dict().items() if k not in timeless} == {
        k: v for k, v in by_stats.as_dict().items() if k not in timeless
    }
    assert by_delta.latency.counts == by_stats.latency.counts
    assert (CountsDelta.of(worker).requests, CountsDelta.of(worker).pages) == (7, 5)


@pytest.mark.parametrize(
    "message",
    [
        Work(3, Seed("http://127.0.0.1:1/a", tag="t"), True, False, None, ["k1", "k2"]),
        Sending(3),
        Answered(3, 429, "5"),
        Finished(3, Handled(Done(), [([Seed("http://127.0.0.1:1/b")], False)], [], None), CountsDelta.of(busy_stats())),
        Work(4, Seed("http://127.0.0.1:1/c", revisit=Revisit(etag='"e"', hash="h1", streak=1)), True, False, None, []),
        Finished(
            4,
            Handled(Done(), [], [], None, page=PageNote(304, '"e"', None, "h1", How.NOT_MODIFIED, True)),
            CountsDelta.of(CrawlStats()),
        ),
        Counts(CountsDelta.of(CrawlStats())),
        Stop(),
        Claim(["k"]),
        AdmitDownload(Seed("http://127.0.0.1:1/file.csv")),
        Call(1, Claim(["k"])),
        Reply(1, True, [True]),
    ],
    ids=lambda message: type(message).__name__,
)
def test_every_message_crosses_as_itself(message: tuple[object, ...]) -> None:
    crossed = pickle.loads(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(crossed) is type(message)
    assert repr(crossed) == repr(message)


def test_a_channel_hands_on_typed_messages_in_order_and_answers_calls(tmp_path: Path) -> None:
    got: list[object] = []

    async def answer(request: object) -> object:
        assert isinstance(request, Claim)
        return [key == "new" for key in request.keys]

    async def main() -> None:
        arrived = anyio.Event()

        def on_message(message: object) -> None:
            got.append(message)
            if len(got) == 500:
                arrived.set()

        listener = await anyio.create_unix_listener(tmp_path / "channel.sock")
        async with listener, anyio.create_task_group() as tg:

            async def serve(stream: anyio.abc.SocketStream) -> None:
                await Channel(stream, on_message=on_message, on_call=answer).run()

            tg.start_soon(listener.serve, serve)
            ours = Channel(await anyio.connect_unix(tmp_path / "channel.sock"), on_message=got.append)
            tg.start_soon(ours.run)
            for index in range(500):
                ours.send(Sending(index))  # many messages in few writes: each read holds several
            with anyio.fail_after(10):
                assert await ours.call(Claim(["new", "old"])) == [True, False]
                await arrived.wait()
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert got == [Sending(index) for index in range(500)]


def _count_then_die(path: Path) -> None:
    tally = Tally.create(path)
    tally.requests += 3
    tally.pages = 2
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_tally_outlives_its_worker_killed_with_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "worker.tally"
    process = multiprocessing.get_context("fork").Process(target=_count_then_die, args=(path,))
    process.start()
    process.join(10)
    assert process.exitcode == -signal.SIGKILL
    assert Tally.read(path) == (3, 2)
    assert Tally.read(tmp_path / "never.tally") == (0, 0)
