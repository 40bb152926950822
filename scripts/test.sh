#!/usr/bin/env bash
# Sets up the environment, then runs every check CI runs: ruff, mypy, the examples and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff";  .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== mypy";  .venv/bin/mypy
echo "== pytest"; .venv/bin/python -m pytest -q "$@"
