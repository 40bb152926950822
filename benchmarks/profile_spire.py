"""Profile spire's crawl of a benchmark site with py-spy; print where its CPU time goes.

    .venv/bin/pip install py-spy          # into spire's venv for the run; not a dependency of spire
    .venv/bin/python benchmarks/profile_spire.py                  # the SciPy site
    .venv/bin/python benchmarks/profile_spire.py --site postgresql --top 40
    .venv/bin/python benchmarks/profile_spire.py --raw .work/profile-scipy.txt   # re-read a recording

Samples stacks at 250 Hz, leaves out idle waits (py-spy's own, and the frames in ``IDLE``), and
prints two lists: *self* time (the function on top of the stack) and *inclusive* time (the function
anywhere on the stack, counted once per sample), each as a share of the samples on CPU. Frames are
``function (file)``, the venv prefix cut. The raw stacks stay in ``benchmarks/.work/profile-SITE.txt``
for a flame graph.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import serve  # noqa: E402

REPO = HERE.parent
SPIRE_PY = REPO / ".venv" / "bin" / "python"
#: Top frames that are waits, not work: anyio's idle worker threads, the event loop's poll.
IDLE = frozenset({"Condition.wait (threading.py)", "EpollSelector.select (selectors.py)"})
_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")


def short(frame: str) -> str:
    """``fn (file)`` with the venv and repo prefixes cut, and without the line of the sample."""
    match = _FRAME.match(frame)
    if not match:
        return frame
    path = match["file"]
    for cut in ("site-packages/", "lib/python3.11/", str(REPO) + "/"):
        if cut in path:
            path = path.split(cut, 1)[1]
    return f"{match['fn']} ({path})"


def analyse(raw: Path, top: int) -> None:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = idle = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [short(frame) for frame in stack.split(";")]
        if frames[-1] in IDLE:
            idle += count
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    print(f"{total} samples on CPU ({idle} more in idle waits left out: {', '.join(sorted(IDLE))})")
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"\ntop {top} by {title} time")
        for frame, count in counter.most_common(top):
            print(f"{100 * count / total:6.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--site", default="scipy", choices=[site.name for site in serve.SITES])
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--raw", type=Path, help="analyse this py-spy raw file instead of recording")
    args = parser.parse_args()
    if args.raw is None:
        spy = REPO / ".venv" / "bin" / "py-spy"
        if not spy.exists() and shutil.which("py-spy") is None:
            sys.exit("py-spy is missing: .venv/bin/pip install py-spy")
        site = next(site for site in serve.SITES if site.name == args.site)
        serve.start()
        args.raw = serve.WORK / f"profile-{site.name}.txt"
        out = serve.WORK / "out" / f"profile-{site.name}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        crawl = [str(SPIRE_PY), str(HERE / "crawl_spire.py"), "--start", site.start, "--out", str(out)]
        record = [str(spy if spy.exists() else "py-spy"), "record", "-r", str(args.rate), "-f", "raw"]
        subprocess.run([*record, "-o", str(args.raw), "--", *crawl], check=True, cwd=REPO)
    analyse(args.raw, args.top)


if __name__ == "__main__":
    main()
