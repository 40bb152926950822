#!/usr/bin/env bash
# Creates .venv (if missing) and installs spire-crawl with every extra, for the demo and the tests.
# The install is skipped while it is current: a stamp file newer than pyproject.toml and this script.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
STAMP=.venv/.spire-installed
if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] && [ "$STAMP" -nt scripts/setup.sh ] && [ -x .venv/bin/spire ]; then
    echo "setup: .venv is current (remove $STAMP to reinstall)"
    exit 0
fi
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $("$PYTHON" --version)"
    "$PYTHON" -m venv .venv
fi
echo "setup: installing spire-crawl with its extras into .venv (needs PyPI; a minute the first time)"
.venv/bin/python -m pip install --quiet --upgrade pip
# The distribution was called `spire` before it became spire-crawl: drop an old editable install of it.
if .venv/bin/python -m pip show --quiet spire >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall --quiet --yes spire
fi
.venv/bin/python -m pip install --quiet -e '.[dev,browser,redis,warc,markdown,parquet,bloom,speed]'
touch "$STAMP"
echo "setup: done"
