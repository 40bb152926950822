"""Pages a second with 1, 2 and 4 ``spire worker`` processes sharing one Redis, on both documentation sites.

    .venv/bin/python benchmarks/redis_workers.py [--workers 1,2,4] [--sites postgresql,scipy] [--repeats 3]

Starts a redis-server of its own (no persistence) and nginx (``serve.py``), then for each count runs
that many ``spire worker`` processes on the benchmark job (every ``<a href>`` under the site's
folder, one JSON line per page) under one crawl name, and times the crawl from the first worker's
start to the last worker's exit. The CPU a page costs is the workers' (``os.wait4``, start-up
included) plus what redis-server spent meanwhile (``/proc``), over the pages handled. Each page
must be handled exactly once across the workers; the table says so. Host limits are the job's (16
in flight, shared through Redis by all workers). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import serve  # noqa: E402  (the benchmark's nginx)

SCRIPT = """
    import os
    import re
    from pathlib import Path

    from spire import HostLimits, Html, Links, Router, Url

    PREFIX = {prefix!r}
    OUT = Path({out!r})
    host_limits = HostLimits(max_in_flight=16)
    router = Router()
    scope = [re.compile("^" + re.escape(PREFIX))]


    @router.default
    async def page(html: Html, links: Links, url: Url) -> None:
        await links.same_origin(selector="a[href]", regex=scope)
        with OUT.joinpath(f"handled-{{os.getpid()}}").open("a") as handled:
            handled.write(url + "\\n")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen([*command, "--dir", str(directory)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit("redis-server did not start")


def cpu_of(pid: int) -> float:
    """The user + system CPU seconds process ``pid`` has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def crawl(
    redis_url: str, site: serve.DocSite, workers: int, name: str, work: Path, redis_pid: int
) -> tuple[float, Counter[str], float, float]:
    """Run ``workers`` workers on one crawl: its seconds, how often each URL was handled, and the CPU
    seconds of the workers and of redis-server."""
    out = work / name
    out.mkdir()
    script = work / f"{name}.py"
    script.write_text(textwrap.dedent(SCRIPT.format(prefix=site.prefix, out=str(out))), encoding="utf-8")
    command = [sys.executable, "-m", "spire", "worker", "--redis", redis_url, str(script), "--name", name]
    command += ["--seed", site.start, "--concurrency", "16"]
    redis_before = cpu_of(redis_pid)
    started = time.perf_counter()
    logs = [out / f"worker-{index}.err" for index in range(workers)]
    processes = []
    for log in logs:
        with log.open("wb") as stderr:
            processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO))
    workers_cpu = 0.0
    for process, log in zip(processes, logs, strict=True):
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        workers_cpu += usage.ru_utime + usage.ru_stime
        if process.returncode not in (0, 1):
            raise SystemExit(f"a worker exited {process.returncode}: {log.read_text()[-400:]}")
    seconds = time.perf_counter() - started
    redis_cpu = cpu_of(redis_pid) - redis_before
    handled: Counter[str] = Counter()
    for path in out.glob("handled-*"):
        handled.update(path.read_text(encoding="utf-8").splitlines())
    return seconds, handled, workers_cpu, redis_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--sites", default="postgresql,scipy")
    parser.add_argument("--repeats", type=int, default=3, help="the median is reported")
    args = parser.parse_args()
    counts = [int(count) for count in args.workers.split(",")]
    serve.start()
    work = Path(tempfile.mkdtemp(prefix="spire-redis-workers-"))
    server, redis_url = start_redis(work)
    rows: list[tuple[str, int, int, float, float, float, str]] = []
    try:
        for site in serve.SITES:
            if site.name not in args.sites.split(","):
                continue
            for count in counts:
                times: list[float] = []
                cpus: list[tuple[float, float]] = []
                exact = True
                pages = 0
                for repeat in range(args.repeats):
                    name = f"{site.name}-{count}-{repeat}"
                    seconds, handled, workers_cpu, redis_cpu = crawl(redis_url, site, count, name, work, server.pid)
                    times.append(seconds)
                    cpus.append((workers_cpu, redis_cpu))
                    pages = len(handled)
                    exact = exact and set(handled.values()) == {1}
                    rate = pages / seconds
                    print(f"{site.name}, {count} workers, #{repeat + 1}: {rate:.0f} pages/s", file=sys.stderr)
                median = statistics.median(times)
                note = "each page once" if exact else "SOME PAGE HANDLED TWICE"
                workers_ms = statistics.median(cpu for cpu, _ in cpus) * 1000 / max(pages, 1)
                redis_ms = statistics.median(cpu for _, cpu in cpus) * 1000 / max(pages, 1)
                spread = f"{note}; {min(times):.2f}-{max(times):.2f} s"
                rows.append((site.name, count, pages, pages / median, workers_ms, redis_ms, spread))
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{os.cpu_count()} cores; redis-server on this machine; median of {args.repeats}")
    print()
    print("| site | workers | pages | pages/s | vs 1 worker | CPU ms/page, workers + redis | notes |")
    print("|---|---:|---:|---:|---:|---:|---|")
    one = {site: rate for site, count, _, rate, _, _, _ in rows if count == 1}
    for site, count, pages, rate, workers_ms, redis_ms, note in rows:
        ratio = f"{rate / one[site]:.2f}x" if site in one else ""
        cost = f"{workers_ms:.2f} + {redis_ms:.2f}"
        print(f"| {site} | {count} | {pages} | {rate:.0f} | {ratio} | {cost} | {note} |")


if __name__ == "__main__":
    main()
