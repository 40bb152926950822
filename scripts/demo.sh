#!/usr/bin/env bash
# Sets up the environment, serves the bundled example shop on 127.0.0.1, crawls it with the example
# router and writes out/books.jsonl; prints the crawl's stats line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p out
.venv/bin/python examples/shop_crawl.py --output out/books.jsonl
