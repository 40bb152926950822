#!/usr/bin/env bash
# Sets up the environment (once: a current install is not redone), serves the bundled example shop on
# 127.0.0.1, crawls it with the example router and writes out/books.jsonl; prints the crawl's stats line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p out
echo "demo: serving examples/shop on 127.0.0.1 and crawling it into out/books.jsonl"
.venv/bin/python examples/shop_crawl.py --output out/books.jsonl
