#!/usr/bin/env bash
# Creates .venv (if missing) and installs spire with every extra, for the demo and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev,browser,redis,warc,markdown,parquet]'
