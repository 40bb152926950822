#!/usr/bin/env bash
# Set up the benchmarks (idempotent: run it again at any time).
#
# 1. apt: nginx and two real documentation sites shipped as Debian packages, the PostgreSQL 15
#    manual (postgresql-doc-15) and the SciPy docs (python-scipy-doc).
# 2. benchmarks/.venv-compare: Scrapy and Crawlee for Python, on the same interpreter as spire's venv.
# 3. py-spy and httpx-aiohttp into spire's venv, for benchmarks/profile_spire.py and the bare loop
#    (tools of the run, not dependencies).
# 4. nginx from our own config under benchmarks/.work (benchmarks/serve.py start).
#
# Needs root for apt (or run the apt line yourself), and spire's venv at .venv (see README.md).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
PACKAGES=(nginx postgresql-doc-15 python-scipy-doc)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
candidate() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}'; }

missing=()
for package in "${PACKAGES[@]}"; do
    installed "$package" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    for package in "${missing[@]}"; do
        found=$(candidate "$package")
        if [ -z "$found" ] || [ "$found" = "(none)" ]; then
            apt-get update
            break
        fi
    done
    for package in "${missing[@]}"; do
        found=$(candidate "$package")
        if [ -z "$found" ] || [ "$found" = "(none)" ]; then
            echo "apt has no package $package; look for its new name with: apt-cache search ${package%%-*} doc" >&2
            exit 1
        fi
    done
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

SPIRE_PY="$REPO/.venv/bin/python"
if [ ! -x "$SPIRE_PY" ]; then
    echo "spire's venv is missing: python -m venv .venv && .venv/bin/pip install -e '.[dev]'" >&2
    exit 1
fi
BASE_PY=$("$SPIRE_PY" -c 'import sys; print(sys._base_executable)')
if [ ! -x "$HERE/.venv-compare/bin/python" ]; then
    "$BASE_PY" -m venv "$HERE/.venv-compare"
fi
"$HERE/.venv-compare/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements-compare.txt"
# httpx-aiohttp: the bare loop's transport (spire itself talks to aiohttp directly).
"$REPO/.venv/bin/pip" install --quiet --disable-pip-version-check py-spy httpx-aiohttp

"$SPIRE_PY" "$HERE/serve.py" start
