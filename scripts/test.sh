#!/usr/bin/env bash
# Sets up the environment, then runs every check CI runs: ruff, mypy, the examples and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# One command a line: under set -e a failure inside an && list would not stop the script.
echo "== ruff";  .venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy";  .venv/bin/mypy
# The suite starts hundreds of Python processes (the CLI, the examples, the doc blocks, worker processes)
# and each xdist worker imports every test module: bytecode caches spare each of them the compiling.
unset PYTHONDONTWRITEBYTECODE
# Four pytest-xdist workers on two cores: most tests wait on servers, browsers and child processes, so
# workers beyond the cores pay off (measured: -n 2 727 s, -n 3 473 s, -n 4 436 s on a shared machine).
# worksteal hands a worker that runs dry the tests another has left. Arguments go to pytest (-n 0: one process).
echo "== pytest"; .venv/bin/python -m pytest -q -n 4 --dist worksteal "$@"
