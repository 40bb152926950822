"""How long a fresh Python process takes to import spire, against the bare loop's own imports.

    .venv/bin/python benchmarks/import_time.py [--runs 10] [--before DIR]

Each line is the median of ``--runs`` fresh ``python -c "<import>"`` processes, the lines taking turns (warm:
the files are in the page cache and their bytecode is compiled): the wall time, and the CPU time
(user + system, from the child's rusage), which other load on the machine disturbs less. The
``python -c pass`` line is the interpreter's own start-up. ``--before DIR`` times another tree's
``spire`` too (a checkout, or ``git archive REV spire spire_core | tar -x -C DIR``), its runs taking
turns with this tree's, and prints both. Nothing is asserted; tests/test_imports.py is what keeps
heavy modules out of ``import spire``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

#: What each line imports: spire, the engine alone, a crawl's usual names, and the bare loop of
#: benchmarks/crawl_bare.py (aiohttp, parsel, ada-url), the floor any crawl on these parts pays.
IMPORTS = {
    "python -c pass": "pass",
    "import spire": "import spire",
    "import spire_core": "import spire_core",
    "from spire import Crawler, Router, Html": "from spire import Crawler, Router, Html",
    "import aiohttp, parsel, ada_url (bare loop)": "import aiohttp, parsel, ada_url",
}


class Cost(NamedTuple):
    """What one fresh interpreter running a line cost, in milliseconds."""

    wall: float
    cpu: float


#: The children may write bytecode even where the caller's environment says not to: warm means compiled.
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
#: This checkout: ``python -c`` imports its ``spire`` first when run from here.
HERE = Path(__file__).resolve().parent.parent


def run_once(code: str, tree: Path = HERE) -> Cost:
    """One fresh interpreter running ``code`` with ``tree``'s ``spire`` first on its path."""
    start = time.perf_counter()
    environment = {**ENVIRONMENT, "PYTHONPATH": str(tree)}
    process = subprocess.Popen([sys.executable, "-c", code], env=environment, cwd=tree)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"python -c {code!r} exited with {process.returncode}")
    return Cost(wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000)


def median_costs(codes: list[tuple[str, Path]], runs: int) -> list[Cost]:
    """The median cost of each line; the lines take turns, so a change in the machine's load hits them all."""
    for code, tree in codes:
        run_once(code, tree)  # once untimed: compiles bytecode and warms the page cache
    rounds = [[run_once(code, tree) for code, tree in codes] for _ in range(runs)]
    return [
        Cost(statistics.median(r[line].wall for r in rounds), statistics.median(r[line].cpu for r in rounds))
        for line in range(len(codes))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per line (the median is shown)")
    parser.add_argument("--before", type=Path, default=None, help="another tree whose spire is timed too, in turns")
    args = parser.parse_args()
    width = max(map(len, IMPORTS))
    trees = [HERE] if args.before is None else [args.before.resolve(), HERE]
    codes = [(code, tree) for code in IMPORTS.values() for tree in trees]
    costs = iter(median_costs(codes, args.runs))
    print(f"Median of {args.runs} fresh processes; load average {os.getloadavg()[0]:.1f} at the start.\n")
    if args.before is None:
        print(f"| {'what the process runs':<{width}} | wall ms | CPU ms |")
        print(f"|{'-' * (width + 2)}|--------:|-------:|")
    else:
        print(f"| {'what the process runs':<{width}} | before wall ms | before CPU ms | wall ms | CPU ms |")
        print(f"|{'-' * (width + 2)}|---------------:|--------------:|--------:|-------:|")
    for label in IMPORTS:
        *before, after = (next(costs) for _ in trees)
        cells = [f"{cost.wall:>14.0f} | {cost.cpu:>13.0f}" for cost in before]
        cells.append(f"{after.wall:>7.0f} | {after.cpu:>6.0f}")
        print(f"| {label:<{width}} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
