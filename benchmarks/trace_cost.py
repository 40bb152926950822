"""What the request log and Metrics cost: one crawl of a benchmark site, with them off and on.

    sudo bash benchmarks/setup.sh                     # once: nginx serving the benchmark sites
    .venv/bin/python benchmarks/trace_cost.py --repeats 5

Each run is a fresh process crawling the PostgreSQL manual (1,169 pages) with the benchmark job of
``crawl_spire.py``. The modes alternate run by run, so a noisy neighbour slows all of them alike:

- ``baseline``: the per-request trace call removed altogether (what spire cost before it existed);
- ``off``: the default: no ``Metrics``, logger ``spire.trace`` not enabled;
- ``on``: ``Metrics`` plus the ``spire.trace`` log at INFO, written as key=value lines to a file;
- ``json``: the same with ``JsonFormatter``.

It prints pages/s and the crawl process's CPU time per page (the median of the runs), and each mode's
cost against the baseline. On a shared machine wall-clock pages/s is noisy; CPU per page is the
steadier measure of what the log and the counters add.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
START = "http://127.0.0.1:8631/postgresql/index.html"
MODES = ("baseline", "off", "on", "json")

JOB = """
import json, logging, sys, time
sys.path.insert(0, {here!r})
from crawl_spire import make_router
from spire import Crawler, HostLimits
from spire_core.session.metrics import Metrics
from spire_core.session.trace import JsonFormatter

mode, start, log_path = sys.argv[1], sys.argv[2], sys.argv[3]
metrics = None
if mode in ("on", "json"):
    metrics = Metrics()
    handler = logging.FileHandler(log_path)
    if mode == "json":
        handler.setFormatter(JsonFormatter())
    trace = logging.getLogger("spire.trace")
    trace.addHandler(handler)
    trace.setLevel(logging.INFO)
    trace.propagate = False
crawler = Crawler(make_router((start.rsplit("/", 1)[0] + "/",)), concurrency=16,
                  host_limits=HostLimits(max_in_flight=16), metrics=metrics)
if mode == "baseline":
    crawler.trace.request = lambda *args, **kwargs: None
started, cpu = time.perf_counter(), time.process_time()
stats = crawler.run([start])
took, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({{"pages": stats.pages, "seconds": took, "cpu": cpu, "failed": stats.failed,
                  "metrics": str(metrics.snapshot()) if metrics else ""}}))
"""


def run(mode: str, start: str, folder: Path) -> dict[str, float]:
    log = folder / f"{mode}.log"
    script = JOB.format(here=str(HERE))
    done = subprocess.run(
        [sys.executable, "-c", script, mode, start, str(log)], capture_output=True, text=True, timeout=600, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    if mode in ("on", "json"):
        lines = log.read_text().splitlines()
        assert len(lines) >= result["pages"], f"{mode}: {len(lines)} log lines for {result['pages']} pages"
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--start", default=START)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            for mode in MODES:
                result = run(mode, args.start, Path(folder))
                rates[mode].append(result["pages"] / result["seconds"])
                cpu[mode].append(1000 * result["cpu"] / max(1.0, result["pages"]))
                print(
                    f"run {repeat + 1} {mode:8} {result['pages']:.0f} pages ({result['failed']:.0f} failed) "
                    f"{rates[mode][-1]:7.1f} pages/s {cpu[mode][-1]:6.3f} CPU ms/page"
                )
    base_rate, base_cpu = statistics.median(rates["baseline"]), statistics.median(cpu["baseline"])
    print(f"\n{'mode':10} {'pages/s':>9} {'cost':>7} {'CPU ms/page':>12} {'cost':>7}")
    for mode in MODES:
        rate, per_page = statistics.median(rates[mode]), statistics.median(cpu[mode])
        print(
            f"{mode:10} {rate:9.1f} {100 * (base_rate - rate) / base_rate:6.1f}% "
            f"{per_page:12.3f} {100 * (per_page - base_cpu) / base_cpu:6.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
