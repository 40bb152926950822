"""What ``Markdown`` costs and keeps, page by page, on the PostgreSQL manual (no server, no crawl).

    .venv/bin/python benchmarks/markdown_cost.py [--manual /usr/share/doc/postgresql-doc-15/html]

Each page of the manual is read from disk and handed to ``to_markdown`` as if it had been fetched from
``http://127.0.0.1:8000/pg/<name>``. It prints the CPU time per page of ``to_markdown`` beside the time
the crawl itself spends on a page (parsing it and reading its title and links), and what the Markdown
kept: pages with a heading, code listings (``<pre>``, ``programlisting`` among them) as fenced blocks,
tables, and links that resolved under ``/pg/`` (a link resolved against the site root loses it).
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from spire import to_markdown
from spire_core import html

BASE = "http://127.0.0.1:8000/pg/"
MARKDOWN_LINK = re.compile(r"\]\((<?)(http://127\.0\.0\.1:8000[^)\s>]*)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manual", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    args = parser.parse_args()
    pages = sorted(args.manual.glob("*.html"))
    crawl_seconds = markdown_seconds = 0.0
    headings = listings = fences = tables = kept_tables = local_links = lost_links = 0
    for path in pages:
        body = path.read_bytes()
        url = BASE + path.name
        started = time.process_time()
        page = html.selector(body, "utf-8", url)
        page.css("title::text").get()
        page.css("a::attr(href)").getall()
        crawl_seconds += time.process_time() - started
        text = body.decode("utf-8")
        started = time.process_time()
        markdown = to_markdown(text, url=url)
        markdown_seconds += time.process_time() - started
        headings += any(line.startswith("#") for line in markdown.splitlines())
        listings += text.count("<pre")
        fences += sum(line.lstrip().startswith("```") for line in markdown.splitlines()) // 2
        has_table = '<table class="table"' in text or '<table class="informaltable"' in text
        tables += has_table
        kept_tables += has_table and "|---" in markdown
        for _, link in MARKDOWN_LINK.findall(markdown):
            local_links += 1
            lost_links += not link.startswith(BASE)
    count = len(pages)
    print(f"pages                      {count}")
    print(f"crawl's own work per page  {crawl_seconds / count * 1000:.2f} ms CPU")
    print(f"to_markdown per page       {markdown_seconds / count * 1000:.2f} ms CPU")
    print(f"pages with a heading       {headings}")
    print(f"code listings (<pre>)      {listings}; fenced code blocks: {fences}")
    print(f"pages with a table         {tables}; kept as a Markdown table: {kept_tables}")
    print(f"links to the site          {local_links}; resolved outside /pg/: {lost_links}")


if __name__ == "__main__":
    main()
